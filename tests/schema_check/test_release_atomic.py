"""``tracepack schema release`` is all or nothing: what it needs is checked before anything changes, and a
step that fails (after it wrote what it writes) leaves the scratch repository byte for byte as it was,
so that running the release again finishes it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.schema_check.test_release import TWO_FIELDS, _copy, _run
from tracepack.codegen.check import load_schemas
from tracepack.errors import SchemaError
from tracepack.schema_check import release as rel

#: Tools' caches (ignored by git): not the release's files.
CACHES = {"__pycache__", ".ruff_cache", ".pytest_cache", ".hypothesis"}


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not CACHES & set(p.parts)
    }


def _drafted(tmp_path: Path) -> tuple[Path, str]:
    """A scratch repository with the next minor drafted and two fields added (as a schema author does)."""
    root = _copy(tmp_path)
    before = [s for s in load_schemas(root / "schema") if s.status == "released"][-1]
    drafted = _run(root, "-m", "tracepack.schema_check", "draft")
    assert drafted.returncode == 0, drafted.stderr
    version = f"{before.major}.{before.minor + 1}"
    node, value = before.structs["Node"], before.structs["Value"]
    with (root / "schema" / f"tracepack-{version}.toml").open("a", encoding="utf-8") as f:
        f.write(
            TWO_FIELDS.format(
                node="weight_x", node_id=len(node.fields), value="note_x", value_id=len(value.fields), version=version
            )
        )
    return root, version


def _released(root: Path, version: str) -> bool:
    return any(s.version == version and s.status == "released" for s in load_schemas(root / "schema"))


@pytest.mark.parametrize("tool", ["_ruff", "_flatc"])
def test_a_missing_tool_is_found_before_anything_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    root, version = _drafted(tmp_path)
    before = _tree(root)
    what = {"_ruff": "the formatter `ruff` is not installed", "_flatc": "the FlatBuffers compiler `flatc`"}[tool]

    def missing() -> str:
        raise SchemaError(f"{what}; run `make venv`")

    from tracepack.codegen import check

    monkeypatch.setattr(check, tool, missing)
    with pytest.raises(rel.ReleaseError, match=f"cannot release, nothing was changed: {what}"):
        rel.release(root, log=lambda _: None)
    assert _tree(root) == before
    monkeypatch.undo()
    # the user installs the tool and runs it again: released
    done = _run(root, "-m", "tracepack.schema_check", "release")
    assert done.returncode == 0, done.stderr + done.stdout
    assert _released(root, version)


def _fail_write(name: str) -> Callable[[Any], None]:
    def install(monkeypatch: Any) -> None:
        real = rel._write

        def write(path: Path, text: str) -> None:
            real(path, text)  # written, then the step fails: the worst moment
            if name in path.name:
                raise rel.ReleaseError(f"injected failure after writing {path.name}")

        monkeypatch.setattr(rel, "_write", write)

    return install


def _fail_run(what: str) -> Callable[[Any], None]:
    def install(monkeypatch: Any) -> None:
        real = rel._run

        def run(cmd: list[str], root: Path, label: str) -> None:
            real(cmd, root, label)
            if what in label:
                raise rel.ReleaseError(f"injected failure after {label}")

        monkeypatch.setattr(rel, "_run", run)

    return install


def _fail_check(monkeypatch: Any) -> None:
    from tracepack.schema_check import cli

    real, calls = cli.check_all, []

    def check_all(folder: Path) -> Any:
        calls.append(folder)
        out = real(folder)
        if len(calls) == 2:  # the check of the released folder, after the lock
            out.problems.append("injected: the released folder does not pass")
        return out

    monkeypatch.setattr(cli, "check_all", check_all)


def _interrupt_golden(monkeypatch: Any) -> None:
    real = rel._run

    def run(cmd: list[str], root: Path, label: str) -> None:
        real(cmd, root, label)
        if "golden" in label:
            raise KeyboardInterrupt

    monkeypatch.setattr(rel, "_run", run)


STEPS = {
    "released schema written": _fail_write(".toml"),
    "lock written": _fail_write("RELEASED.sha256"),
    "check after the lock": _fail_check,
    "generated/": _fail_run("generate"),
    "model.py": _fail_write("model.py"),
    "migration": _fail_write("_to_v"),
    "golden files": _fail_run("golden"),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_a_failure_at_any_step_leaves_the_tree_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    root, version = _drafted(tmp_path)
    before = _tree(root)
    STEPS[step](monkeypatch)
    with pytest.raises(rel.ReleaseError) as info:
        rel.release(root, log=lambda _: None)
    assert "the tree is as it was before the release" in str(info.value)
    after = _tree(root)
    assert sorted(set(after) ^ set(before)) == []  # nothing added, nothing removed
    assert [p for p in before if after[p] != before[p]] == []  # nothing changed
    assert not _released(root, version)


def test_an_interrupt_restores_too_and_a_rerun_finishes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, version = _drafted(tmp_path)
    before = _tree(root)
    _interrupt_golden(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        rel.release(root, log=lambda _: None)
    assert _tree(root) == before
    monkeypatch.undo()
    done = _run(root, "-m", "tracepack.schema_check", "release")
    assert done.returncode == 0, done.stderr + done.stdout
    assert done.stdout.splitlines()[-1] == f"released {version}: nothing left to write by hand"
    assert (root / "tests" / "golden" / version / "expected.json").is_file()
