"""``python -m tracepack.codegen generate|check`` (``make generate`` / ``make check``)."""

from __future__ import annotations

import argparse
import sys

from tracepack.codegen.check import FIX_COMMAND, check_generated, write_generated
from tracepack.errors import TracepackError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracepack.codegen", description=__doc__)
    parser.add_argument("command", choices=["generate", "check"], help="write generated/, or verify it is current")
    parser.add_argument("--schema-dir", default="schema", help="folder of schema files (default: schema)")
    parser.add_argument("--out", default="generated", help="folder of generated files (default: generated)")
    args = parser.parse_args(argv)
    try:
        if args.command == "generate":
            written = write_generated(args.schema_dir, args.out)
            print(f"generated {written} file(s) in {args.out}/")
            return 0
        stale = check_generated(args.schema_dir, args.out)
    except TracepackError as exc:
        print(f"tracepack.codegen: {exc}", file=sys.stderr)
        return exc.exit_code
    if stale:
        for line in stale:
            print(f"stale: {line}", file=sys.stderr)
        print(f"{args.out}/ is out of date with {args.schema_dir}/; fix it with: {FIX_COMMAND}", file=sys.stderr)
        return 1
    print(f"{args.out}/ is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
