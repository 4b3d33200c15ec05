"""``tracepack schema draft`` and ``tracepack schema release``: a new schema version in two commands.

::

    tracepack schema draft [--major] [--root DIR]   # copy the newest release to the next version, as a draft
    # ... edit schema/tracepack-X.Y.toml ...
    tracepack schema release [--root DIR]           # check it, release it, and write everything that follows

``release`` refuses unless ``tracepack schema check --all`` passes (the draft against the newest
release and every earlier one), then, in ``DIR`` (default: the current folder):

1. sets ``status = "released"`` in the draft (and its header comment to the released one);
2. adds its line to ``schema/RELEASED.sha256``, and checks the folder again;
3. regenerates ``generated/`` (``python -m tracepack.codegen generate``);
4. points ``src/tracepack/model.py`` (the one place that names the current version) at it;
5. writes the migration ``src/tracepack/migrations/vA_B_to_vX_Y.py`` from the previous release,
   unless one exists: for a change that only adds it is complete (upgrade and a downgrade that
   refuses to lose data, :mod:`tracepack.migrations._additive`); otherwise it lists what a person
   must still write;
6. writes the version's golden files (``tests/golden/make_golden.py`` with every codec).

All or nothing: before it changes anything it checks what the steps need (the formatter ``ruff`` and
the FlatBuffers compiler ``flatc`` that generation runs, the golden-file script), and if any step
fails (or is interrupted) every file it wrote, changed or removed under ``schema/``, ``generated/``,
``src/tracepack/model.py``, ``src/tracepack/migrations/`` and ``tests/golden/`` is put back as it was,
so the draft is still a draft and ``release`` can simply be run again. Every file is written whole or
not at all (a temporary file, then a rename). Steps 3 and 6 run in a child interpreter on ``DIR``'s own
code, so they see the new version. Exit codes: 0 released, 1 the check failed or a step did (nothing
changed), 2 bad input (no draft, two drafts, unreadable files).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tracepack.codegen.check import load_schemas
from tracepack.codegen.model import Schema, load_schema_text
from tracepack.errors import InputError, TracepackError, UsageError
from tracepack.schema_check.diff import Finding, diff_schemas
from tracepack.schema_check.lock import LOCK_FILE, lock_line
from tracepack.schema_check.rules import worst

__all__ = [
    "DRAFT_HEADER",
    "RELEASED_HEADER",
    "ReleaseError",
    "Released",
    "migration_module",
    "new_draft",
    "release",
]


class ReleaseError(TracepackError):
    """A release step failed (or what it needs is missing); the tree is as it was before the release."""

    exit_code = 1


DRAFT_HEADER = """\
# tracepack schema {version} -- DRAFT: the next release, to be edited.
#
# Change the format here. `tracepack schema check --all schema` says which version the change needs
# (it must be the one declared below); `tracepack schema release` (`make release-schema`) releases
# it: locks this file in schema/RELEASED.sha256, generates code, the migration and golden files.
#
# The language: docs/schema-language.md. What may change, per codec: docs/schema-rules.md.
"""

RELEASED_HEADER = """\
# tracepack schema {version} -- RELEASED.
#
# To whoever edits this file: DON'T. A released schema is immutable: files written with it must stay
# readable forever, and `make check` fails if this file's checksum changes. To change the format, run
# `tracepack schema draft` and edit the draft it makes.
#
# The language: docs/schema-language.md. What may change, per codec: docs/schema-rules.md.
"""

_VERSION_LINE = re.compile(r'^version = "(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"$', re.M)
_STATUS_LINE = re.compile(r'^status = "(released|draft)"$', re.M)
_MODEL_IMPORT = re.compile(r"tracepack_generated\.v[0-9]+_[0-9]+\b")
_ADDITIVE = {
    "FIELD_ADDED",
    "STRUCT_ADDED",
    "ENUM_ADDED",
    "UNION_ADDED",
    "ENUM_VALUE_ADDED",
    "UNION_VARIANT_ADDED",
    "FIELD_DEPRECATED",
    "ENUM_VALUE_DEPRECATED",
    "UNION_VARIANT_DEPRECATED",
    "STRUCT_RENAMED",
    "ENUM_RENAMED",
    "UNION_RENAMED",
    "SCHEMA_NAME_CHANGED",
}


def _write(path: Path, text: str) -> None:
    """Write ``text`` whole or not at all."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write: {exc.strerror}", source=str(path)) from None


def _header_and_body(text: str) -> str:
    """``text`` without its leading comment block."""
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines) and (lines[i].startswith("#") or not lines[i].strip()):
        i += 1
    return "".join(lines[i:])


def _with_header(text: str, header: str) -> str:
    return header + "\n" + _header_and_body(text)


def new_draft(schema_dir: Path, *, major: bool = False) -> Path:
    """Copy the newest release to the next minor (or major) version as a draft; return its path."""
    schemas = load_schemas(schema_dir)
    drafts = [s for s in schemas if s.status != "released"]
    if drafts:
        raise UsageError(f"{drafts[0].source} is a draft already: edit it, or release it first")
    latest = [s for s in schemas if s.status == "released"][-1]
    version = (latest.major + 1, 0) if major else (latest.major, latest.minor + 1)
    label = f"{version[0]}.{version[1]}"
    text = _with_header(latest.text, DRAFT_HEADER.format(version=label))
    text = _VERSION_LINE.sub(f'version = "{label}"', text, count=1)
    text = _STATUS_LINE.sub('status = "draft"', text, count=1)
    path = Path(schema_dir) / f"tracepack-{label}.toml"
    load_schema_text(text, source=str(path))  # the copy is a valid schema
    _write(path, text)
    return path


@dataclass
class Released:
    """What :func:`release` did."""

    version: str
    findings: list[Finding]
    steps: list[str] = field(default_factory=list)
    #: Empty when the migration is complete as written; else what a person must still do.
    todo: list[str] = field(default_factory=list)


def migration_module(old: Schema, new: Schema, findings: list[Finding]) -> str:
    """The migration module from release ``old`` to ``new``: complete when every finding only adds."""
    a, b = old.module_name, new.module_name
    other = [f for f in findings if f.rule not in _ADDITIVE]
    listed = "\n".join(f"* ``{f.where}``: {f.detail}" for f in findings) or "* nothing a reader can see"
    fields = [f.where for f in findings if f.rule == "FIELD_ADDED"]
    note = (
        f"{new.version} only adds (docs/schema-rules.md, rule 1), so this module is complete as written: "
        "an older document is a newer one with the added fields at their defaults, and a newer one "
        "goes back only when it holds nothing the older version lacks."
        if not other
        else f"{new.version} does more than add: the generic step below handles what was added and refuses "
        f"the rest; write the conversion of {', '.join(f'{f.rule} {f.where}' for f in other)} here."
    )
    lines = [
        f'"""Schema {old.version} <-> {new.version} (written by ``tracepack schema release``).',
        "",
        f"What {new.version} changed, as ``tracepack schema check`` lists it:",
        "",
        listed,
        "",
        note,
        '"""',
        "",
        "from __future__ import annotations",
        "",
        f"from tracepack_generated.{a} import model as old",
        f"from tracepack_generated.{b} import model as new",
        "",
        "from tracepack.migrations._additive import AdditiveStep",
        "",
        '__all__ = ["ADDED_FIELDS", "FROM", "TO", "downgrade", "upgrade"]',
        "",
        f"FROM = ({old.major}, {old.minor})",
        f"TO = ({new.major}, {new.minor})",
        f"#: Fields {new.version} added: a downgrade refuses a document where one holds more than its default.",
        f"ADDED_FIELDS: tuple[str, ...] = ({''.join(f'{w!r}, ' for w in fields)})",
        "",
        "_STEP = AdditiveStep(old, new, FROM, TO, ADDED_FIELDS)",
        "upgrade = _STEP.upgrade",
        "downgrade = _STEP.downgrade",
        "",
    ]
    return "\n".join(lines)


def _run(cmd: list[str], root: Path, what: str) -> None:
    env = dict(os.environ)
    paths = [str(root / "src"), str(root / "generated" / "python"), str(root)]
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        text = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise ReleaseError(f"{what} failed: {text[-1] if text else f'exit code {done.returncode}'}")


#: What a release may write, change or remove, relative to its root: restored as a whole when a step fails.
_TOUCHED = ("generated", "src/tracepack/model.py", "src/tracepack/migrations", "tests/golden")


class _Snapshot:
    """The files under some paths (folders whole), to put back as they were: changed and removed files
    rewritten, new files and the folders made for them removed."""

    def __init__(self, root: Path, paths: list[Path]) -> None:
        self.paths = paths
        self.files: dict[Path, bytes] = {}
        self.dirs: set[Path] = set()
        for path in paths:
            for f in self._walk(path):
                self.files[f] = f.read_bytes()
            if path.is_dir():
                self.dirs |= {d for d in path.rglob("*") if d.is_dir()} | {path}

    @staticmethod
    def _walk(path: Path) -> list[Path]:
        if path.is_file():
            return [path]
        if not path.is_dir():
            return []
        return [f for f in path.rglob("*") if f.is_file() and "__pycache__" not in f.parts]

    def restore(self) -> None:
        for path in self.paths:
            for f in self._walk(path):
                if f not in self.files:
                    f.unlink()
            if path.is_dir():  # folders a step made, deepest first, once their files are gone
                for d in sorted((d for d in path.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
                    if d not in self.dirs and "__pycache__" not in d.parts:
                        shutil.rmtree(d, ignore_errors=True)
            elif path not in self.files and path not in self.dirs and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
        for f, data in self.files.items():
            if not f.is_file() or f.read_bytes() != data:
                f.parent.mkdir(parents=True, exist_ok=True)
                tmp = f.with_name(f".{f.name}.restore")
                tmp.write_bytes(data)
                os.replace(tmp, f)


def _preflight(root: Path, golden: bool) -> None:
    """What the steps need, checked before anything is changed."""
    from tracepack.codegen import check as codegen

    missing = []
    for find in (codegen._ruff, codegen._flatc):
        try:
            find()
        except TracepackError as exc:
            missing.append(exc.problem)
    script = root / "tests" / "golden" / "make_golden.py"
    if golden and not script.is_file():
        missing.append(f"{script.relative_to(root)} (the golden files' writer) is missing; or pass --no-golden")
    if missing:
        raise ReleaseError("cannot release, nothing was changed: " + "; ".join(missing))


def release(root: Path, *, schema: str = "schema", golden: bool = True, log: Callable[[str], None] = print) -> Released:
    """Release the draft of ``root/schema``; see the module doc for the steps. All or nothing: a step that
    fails leaves ``root`` as it was (:class:`ReleaseError`)."""
    from tracepack.schema_check.cli import check_all, format_suite  # cli imports this module

    root = Path(root)
    folder = root / schema
    schemas = load_schemas(folder)
    drafts = [s for s in schemas if s.status != "released"]
    released = [s for s in schemas if s.status == "released"]
    if len(drafts) != 1:
        raise UsageError(
            f"{folder.name}/ has {len(drafts)} drafts; expected one (make it with `tracepack schema draft`)"
            if not drafts
            else f"{folder.name}/ has {len(drafts)} drafts ({', '.join(d.source for d in drafts)}); expected one"
        )
    draft, previous = drafts[0], released[-1]
    suite = check_all(folder)
    if not suite.ok:
        raise ReleaseError(
            f"{draft.source} does not pass `tracepack schema check --all {folder.name}`:\n"
            + "\n".join(format_suite(suite))
        )
    findings = diff_schemas(previous, draft)
    _preflight(root, golden)
    snapshot = _Snapshot(root, [folder, *(root / p for p in _TOUCHED)])
    try:
        return _steps(
            root,
            schema=schema,
            folder=folder,
            draft=draft,
            previous=previous,
            findings=findings,
            golden=golden,
            log=log,
        )
    except BaseException as exc:  # a failed step, or an interrupt: put everything back
        snapshot.restore()
        if isinstance(exc, TracepackError):
            where = "; the tree is as it was before the release (run it again once fixed)"
            exc.problem += where
            exc.args = (str(exc),)
        raise


def _steps(
    root: Path,
    *,
    schema: str,
    folder: Path,
    draft: Schema,
    previous: Schema,
    findings: list[Finding],
    golden: bool,
    log: Callable[[str], None],
) -> Released:
    from tracepack.codecs import CODECS
    from tracepack.schema_check.cli import check_all, format_suite  # cli imports this module

    out = Released(draft.version, findings)

    def step(text: str) -> None:
        out.steps.append(text)
        log(f"release {draft.version}: {text}")

    path = folder / f"tracepack-{draft.version}.toml"
    text = _STATUS_LINE.sub('status = "released"', draft.text, count=1)
    text = _with_header(text, RELEASED_HEADER.format(version=draft.version))
    final = load_schema_text(text, source=draft.source)
    _write(path, text)
    lock_path = folder / LOCK_FILE
    lock = lock_path.read_text(encoding="utf-8") if lock_path.exists() else ""
    _write(lock_path, lock + ("" if not lock or lock.endswith("\n") else "\n") + lock_line(final, path.name) + "\n")
    after = check_all(folder)
    if not after.ok:
        raise ReleaseError("the released folder does not pass its check:\n" + "\n".join(format_suite(after)))
    step(f"{draft.source} released and locked in {folder.name}/{LOCK_FILE}")

    _run([sys.executable, "-m", "tracepack.codegen", "generate", "--schema-dir", schema], root, "make generate")
    step("generated/ regenerated")

    model = root / "src" / "tracepack" / "model.py"
    if model.exists():
        _write(model, _MODEL_IMPORT.sub(f"tracepack_generated.{final.module_name}", model.read_text(encoding="utf-8")))
        step(f"src/tracepack/model.py imports tracepack_generated.{final.module_name}")

    migration = root / "src" / "tracepack" / "migrations" / f"{previous.module_name}_to_{final.module_name}.py"
    if migration.exists():
        step(f"{migration.relative_to(root)} exists: kept as it is")
    else:
        _write(migration, migration_module(previous, final, findings))
        step(f"{migration.relative_to(root)} written")
    other = [f for f in findings if f.rule not in _ADDITIVE]
    if other:
        out.todo.append(
            f"the changes need a {worst([f.bump for f in other])} bump: finish {migration.relative_to(root)} "
            f"({', '.join(f.rule for f in other)})"
        )

    if golden:
        script = root / "tests" / "golden" / "make_golden.py"
        _run([sys.executable, str(script), "--codec", ",".join(CODECS)], root, "tests/golden/make_golden.py")
        step(f"golden files of {final.version} written (tests/golden/{final.version}/)")
    return out
