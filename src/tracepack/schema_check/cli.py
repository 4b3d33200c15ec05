"""``tracepack schema check``: the compatibility checker's command line.

::

    tracepack schema check OLD NEW [--json]     # NEW against OLD: findings, verdict, ways out
    tracepack schema check --all [DIR] [--json] # every release in DIR (default: the schemas installed
                                                # with tracepack), the lock file and the draft, if any

Exit codes: 0 compatible and declared correctly; 1 incompatible, wrong
declared version, or a changed/unlocked release; 2 bad input (a missing or
invalid schema or lock file, bad arguments), reported on one line of stderr.
``main`` takes the words after ``tracepack schema`` (``["check", ...]``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, NoReturn

from tracepack.codegen.check import load_schemas
from tracepack.codegen.model import Schema, load_schema
from tracepack.errors import InputError, TracepackError, UsageError
from tracepack.schema_check.diff import Finding
from tracepack.schema_check.lock import LOCK_FILE, LockEntry, check_lock, parse_lock
from tracepack.schema_check.verdict import Report, check_history, check_pair

__all__ = ["SuiteReport", "check_all", "format_report", "format_suite", "main", "report_json"]

PROG = "tracepack schema check"
EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2


@dataclass
class SuiteReport:
    """``check --all``: every consecutive pair of releases, the draft, and the lock file."""

    folder: str
    released: list[str] = field(default_factory=list)
    drafts: list[str] = field(default_factory=list)
    pairs: list[Report] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    ways_out: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and all(r.ok for r in self.pairs)


def check_all(folder: str | Path) -> SuiteReport:
    """Check a schema folder: releases pairwise, the draft against the latest release, the lock."""
    folder = Path(folder)
    if not folder.name:  # `.` or `..`: name files after the folder itself
        folder = folder.resolve()
    schemas = load_schemas(folder)
    released = [s for s in schemas if s.status == "released"]
    drafts = [s for s in schemas if s.status != "released"]
    out = SuiteReport(folder.name, [s.version for s in released], [s.version for s in drafts])
    for i, (a, b) in enumerate(pairwise(released)):
        out.pairs.append(check_pair(a, b))
        out.pairs += check_history(released[:i], a, b)
    for draft in drafts:
        if released and (draft.major, draft.minor) < (released[-1].major, released[-1].minor):
            out.problems.append(f"{draft.source}: a draft older than the latest release, {released[-1].version}")
            out.ways_out.append(f"rename {draft.source} after its version: the next version after the latest release")
        elif released:
            out.pairs.append(check_pair(released[-1], draft))
            out.pairs += check_history(released[:-1], released[-1], draft)
    if len(drafts) > 1:
        out.problems.append(
            f"{len(drafts)} drafts ({', '.join(d.source for d in drafts)}): work on one version at a time"
        )
        out.ways_out.append("keep one draft: the next version")
    lock_path = folder / LOCK_FILE
    lock_name = f"{folder.name}/{LOCK_FILE}"
    entries: list[LockEntry] | None = None
    if lock_path.exists():
        try:
            text = lock_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read: {exc}", source=lock_name) from None
        entries = parse_lock(text, source=lock_name)
    by_file = {Path(s.source).name: s for s in schemas}
    problems, ways = check_lock(entries, by_file, lock=lock_name)
    out.problems += problems
    out.ways_out += ways
    return out


# -- output ------------------------------------------------------------------------------------------


def _finding_line(f: Finding) -> str:
    breaks = ", ".join(f.breaks) or "no codec"
    return f"  {f.bump} {f.rule} {f.where}: {f.detail} [breaks {breaks}]"


def _numbered(ways: Sequence[str], note: str = "") -> list[str]:
    head = f"Ways out ({note}):" if note else "Ways out:"
    return [head, *(f"  {i}. {w}" for i, w in enumerate(ways, 1))] if ways else []


def format_report(r: Report) -> list[str]:
    """Human lines: the pair, one line per finding, the verdict, the numbered ways out."""
    ov, nv = (f"{a}.{b}" for a, b in (r.old_version, r.new_version))
    lines = [f"check {r.old_source} ({ov}, {r.old_status}) -> {r.new_source} ({nv}, {r.new_status})"]
    lines += [_finding_line(f) for f in r.findings] or ["  no changes"]
    if r.ok:
        if r.needed == "none":
            lines.append(f"OK: no change a reader can see; {nv} is unchanged")
        else:
            lines.append(f"OK: a {r.needed} change, and {nv} is the version after {ov} for it")
    else:
        lines += [f"FAIL: {p}" for p in r.problems]
    return lines + _numbered(r.ways_out, r.ways_note)


def report_json(r: Report) -> dict[str, Any]:
    """The machine form of a report."""
    expected = r.expected_version
    return {
        "ok": r.ok,
        "old": {"source": r.old_source, "version": "{}.{}".format(*r.old_version), "status": r.old_status},
        "new": {"source": r.new_source, "version": "{}.{}".format(*r.new_version), "status": r.new_status},
        "needed": r.needed,
        "expected_version": None if expected is None else "{}.{}".format(*expected),
        "findings": [
            {
                "rule": f.rule,
                "where": f.where,
                "detail": f.detail,
                "breaks": list(f.breaks),
                "bump": f.bump,
                "fix": f.fix,
            }
            for f in r.findings
        ],
        "problems": list(r.problems),
        "ways_out": list(r.ways_out),
        "ways_note": r.ways_note,
    }


def format_suite(s: SuiteReport) -> list[str]:
    draft = f"draft {', '.join(s.drafts)}" if s.drafts else "no draft"
    lines = [f"check --all {s.folder}/: released {', '.join(s.released) or 'none'}; {draft}"]
    for r in s.pairs:
        lines += format_report(r)
    lines += [f"FAIL: {p}" for p in s.problems]
    lines += _numbered(s.ways_out)
    failed = sum(not r.ok for r in s.pairs) + len(s.problems)
    if failed:
        lines.append(f"FAIL: {failed} problem(s) in {s.folder}/")
    else:
        lines.append(
            f"OK: every release of {s.folder}/ is locked and unchanged, every step declares its version, "
            "and no release reuses what an earlier one retired"
        )
    return lines


def _suite_json(s: SuiteReport) -> dict[str, Any]:
    return {
        "ok": s.ok,
        "folder": s.folder,
        "released": s.released,
        "drafts": s.drafts,
        "checks": [report_json(r) for r in s.pairs],
        "problems": s.problems,
        "ways_out": s.ways_out,
    }


# -- arguments -----------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tracepack schema", description="Schema tools.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    c = sub.add_parser(
        "check",
        usage="tracepack schema check OLD NEW [--json]\n       tracepack schema check --all [DIR] [--json]",
        help="check a schema change: the bump it needs per codec, and the version it declares",
        description="Check NEW against OLD (or every release in DIR with --all): list every change with the "
        "codecs it breaks and the bump it needs, and fail when NEW declares another version. "
        "Rules: docs/schema-rules.md.",
    )
    c.add_argument("schemas", nargs="*", metavar="FILE", help="OLD and NEW: two schema files")
    c.add_argument(
        "--all",
        nargs="?",
        const="",
        metavar="DIR",
        help="check every consecutive pair of releases in DIR (default: the schemas installed with tracepack), "
        f"the lock file DIR/{LOCK_FILE} and the draft against the latest release",
    )
    c.add_argument("--json", action="store_true", help="machine-readable output")
    d = sub.add_parser(
        "draft",
        help="copy the newest release to the next version, as a draft to edit",
        description="Copy the newest release in ROOT/schema to tracepack-X.Y.toml (the next minor, or major "
        'with --major), status = "draft". Language: docs/schema-language.md.',
    )
    d.add_argument("--major", action="store_true", help="the next major version instead of the next minor")
    d.add_argument("--root", default=".", metavar="DIR", help="the repository (default: the current folder)")
    r = sub.add_parser(
        "release",
        help="release the draft: check, lock, generate, migration, golden files",
        description="Release the draft in ROOT/schema: refuse unless `check --all` passes; set status = "
        '"released", lock it, regenerate generated/, point src/tracepack/model.py at it, write the migration '
        "from the previous release (complete when the change only adds) and the golden files.",
    )
    r.add_argument("--root", default=".", metavar="DIR", help="the repository (default: the current folder)")
    r.add_argument("--no-golden", action="store_true", help="do not write golden files")
    return p


def _load(path: str) -> Schema:
    return load_schema(path, display=path)


def _run(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    if args.command == "draft":
        from tracepack.schema_check.release import new_draft

        path = new_draft(Path(args.root) / "schema", major=args.major)
        print(
            f"{path.relative_to(args.root) if path.is_relative_to(args.root) else path}: the draft; edit it, then "
            "`tracepack schema release`"
        )
        return EXIT_OK
    if args.command == "release":
        from tracepack.schema_check.release import release

        done = release(Path(args.root), golden=not args.no_golden)
        for line in done.todo:
            print(f"TODO: {line}")
        print(f"released {done.version}" + ("" if done.todo else ": nothing left to write by hand"))
        return EXIT_OK
    if args.all is not None:
        if args.schemas:
            raise UsageError("--all takes a folder, not OLD NEW")
        if not args.all:
            from tracepack.resources import schema_dir

            args.all = str(schema_dir())
        suite = check_all(args.all)
        print(
            json.dumps(_suite_json(suite), indent=2, ensure_ascii=False)
            if args.json
            else "\n".join(format_suite(suite))
        )
        return EXIT_OK if suite.ok else EXIT_FAIL
    if len(args.schemas) != 2:
        raise UsageError(f"expected OLD NEW, got {len(args.schemas)} schema file(s)")
    report = check_pair(_load(args.schemas[0]), _load(args.schemas[1]))
    print(
        json.dumps(report_json(report), indent=2, ensure_ascii=False) if args.json else "\n".join(format_report(report))
    )
    return EXIT_OK if report.ok else EXIT_FAIL


def main(argv: Sequence[str]) -> int:
    """Run ``tracepack schema ARGV...``; return the exit code. Errors are one line on stderr."""
    try:
        return _run(argv)
    except TracepackError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return exc.exit_code
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except Exception as exc:  # one line, never a traceback
        text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        print(f"{PROG}: internal error: {text} (please report this)", file=sys.stderr)
        return EXIT_FAIL
