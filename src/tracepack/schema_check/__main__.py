"""``python -m tracepack.schema_check [OLD NEW | --all [DIR]] [--json]`` (``make check`` runs ``--all schema``)."""

from __future__ import annotations

import sys

from tracepack.schema_check.cli import main

if __name__ == "__main__":
    sys.exit(main(["check", *sys.argv[1:]]))
