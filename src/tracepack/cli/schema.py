"""``tracepack schema ...``: the schema toolchain (compatibility checks, releases)."""

from __future__ import annotations

import argparse
from typing import Any

from tracepack.cli._common import optional
from tracepack.errors import UsageError


def cmd_schema(args: argparse.Namespace) -> int:
    schema_cli = optional("tracepack.schema_check.cli")
    if schema_cli is None:
        raise UsageError("the schema checker is not part of this build", where="schema")
    return int(schema_cli.main(list(args.rest)))


def register(sub: Any) -> None:
    """Add this module's commands to the ``tracepack`` parser."""
    s = sub.add_parser("schema", help="schema tools: `tracepack schema check OLD NEW` (see its --help)", add_help=False)
    s.set_defaults(func=cmd_schema, rest=[])
