"""``python -m tracepack.schema_check [OLD NEW | --all [DIR]] [--json]`` (``make check`` runs ``--all schema``),
and ``python -m tracepack.schema_check draft|release ...`` (like ``tracepack schema draft|release``)."""

from __future__ import annotations

import sys

from tracepack.schema_check.cli import main

if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(args if args[:1] in (["draft"], ["release"], ["check"]) else ["check", *args]))
