"""``python -m tracepack.codegen generate|check`` (``make generate`` / ``make check``)."""

from __future__ import annotations

import argparse
import sys

from tracepack.codegen.check import FIX_COMMAND, check_generated, write_generated
from tracepack.errors import TracepackError


def write_torch_spec(schema_dir: str, yaml_path: str | None) -> str:
    """Describe a torch ``schema.yaml`` (default: the installed torch's) in ``schema/torch/torch-X.Y.json``."""
    from pathlib import Path

    from tracepack.codegen.torch_schema import SPEC_DIR, installed_schema_yaml, parse_schema_yaml, spec_json
    from tracepack.errors import UsageError

    path = Path(yaml_path) if yaml_path else installed_schema_yaml()
    if path is None:
        raise UsageError("torch is not installed: pass --yaml PATH/TO/schema.yaml")
    spec = parse_schema_yaml(path.read_text(encoding="utf-8"), source=path.name)
    try:
        from importlib.metadata import version

        torch_version = version("torch") if not yaml_path else "(from --yaml)"
    except Exception:
        torch_version = "(unknown)"
    dest = Path(schema_dir) / SPEC_DIR / f"torch-{spec.version[0]}.{spec.version[1]}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(spec_json(spec, torch_version=torch_version), encoding="utf-8")
    return str(dest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracepack.codegen", description=__doc__)
    parser.add_argument(
        "command",
        choices=["generate", "check", "torch-schema"],
        help="write generated/, verify it is current, or describe the installed torch's export schema "
        "in schema/torch/ (then run generate)",
    )
    parser.add_argument("--yaml", help="torch-schema: read this schema.yaml instead of the installed torch's")
    parser.add_argument("--schema-dir", default="schema", help="folder of schema files (default: schema)")
    parser.add_argument("--out", default="generated", help="folder of generated files (default: generated)")
    args = parser.parse_args(argv)
    try:
        if args.command == "torch-schema":
            print(f"wrote {write_torch_spec(args.schema_dir, args.yaml)}")
            return 0
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
