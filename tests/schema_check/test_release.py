"""Releasing a schema version is two commands: a scratch copy of the repository, released end to end.

The copy (``src/``, ``generated/``, ``schema/``, the golden files and their tests) lives in a
temporary folder; every step runs there in a child interpreter on the copy's own code, exactly as
a schema author would run it in the repository:

1. ``tracepack schema draft``: the next minor, a copy of the newest release (whatever it is);
2. the author's edit: two fields appended (the only hands-on part);
3. ``tracepack schema release``: check, lock, generate, model, migration, golden files.

Then the copy's own golden tests pass for every version (the new one included) with no test
edited, and its generated migration reads every older file, with nothing written by hand.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracepack.codegen.check import load_schemas
from tracepack.schema_check import diff_schemas
from tracepack.schema_check.release import migration_module, new_draft, release

ROOT = Path(__file__).resolve().parents[2]

TWO_FIELDS = """
[structs.Node.fields.{node}]
id = {node_id}
type = "f64"
default = 1.0
doc = "How much the node counts (added in {version})."

[structs.Value.fields.{value}]
id = {value_id}
type = "str"
default = ""
doc = "A free-form note (added in {version})."
"""


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".codegen-*")
    for part in ("src", "generated", "schema"):
        shutil.copytree(ROOT / part, root / part, ignore=ignore)
    shutil.copytree(ROOT / "tests" / "golden", root / "tests" / "golden", ignore=ignore)
    for name in ("__init__.py", "conftest.py"):
        shutil.copy(ROOT / "tests" / name, root / "tests" / name)
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    drafts = [s for s in load_schemas(root / "schema") if s.status == "draft"]
    for s in drafts:  # the repository's own draft in progress: the test releases a draft of its own
        (root / "schema" / f"tracepack-{s.version}.toml").unlink()
        shutil.rmtree(root / "generated" / "python" / "tracepack_generated" / s.module_name)
        (root / "generated" / "fbs" / f"tracepack-{s.version}.fbs").unlink()
        (root / "generated" / "jsonschema" / f"tracepack-{s.version}.schema.json").unlink()
    if drafts:
        generated = _run(root, "-m", "tracepack.codegen", "generate")
        assert generated.returncode == 0, generated.stderr
    return root


def _released_schemas(root: Path) -> None:
    """``schema/`` without the repository's own draft in progress, if any."""
    shutil.copytree(ROOT / "schema", root / "schema")
    for s in load_schemas(root / "schema"):
        if s.status == "draft":
            (root / "schema" / f"tracepack-{s.version}.toml").unlink()


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), str(root / "generated" / "python"), str(root)])
    env.setdefault("HYPOTHESIS_PROFILE", "fast")
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, check=False)


def test_a_minor_release_adding_two_fields(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    before = [s for s in load_schemas(root / "schema") if s.status == "released"][-1]
    start = time.perf_counter()
    drafted = _run(root, "-m", "tracepack.schema_check", "draft")
    assert drafted.returncode == 0, drafted.stderr
    version = f"{before.major}.{before.minor + 1}"
    draft = root / "schema" / f"tracepack-{version}.toml"
    assert drafted.stdout == f"schema/tracepack-{version}.toml: the draft; edit it, then `tracepack schema release`\n"
    # The hands-on part: append two fields after the last ids.
    node, value = before.structs["Node"], before.structs["Value"]
    with draft.open("a", encoding="utf-8") as f:
        f.write(
            TWO_FIELDS.format(
                node="weight_x", node_id=len(node.fields), value="note_x", value_id=len(value.fields), version=version
            )
        )
    released = _run(root, "-m", "tracepack.schema_check", "release")
    seconds = time.perf_counter() - start
    assert released.returncode == 0, released.stderr + released.stdout
    assert released.stdout.splitlines()[-1] == f"released {version}: nothing left to write by hand"
    print(f"\ndraft + edit + release of {version} took {seconds:.1f} s")  # the demo's figure (not asserted)

    schemas = load_schemas(root / "schema")
    new = schemas[-1]
    assert (new.version, new.status) == (version, "released")
    assert (root / "schema" / "RELEASED.sha256").read_text().splitlines()[-1] == (
        f"{version} {new.sha256} tracepack-{version}.toml"
    )
    assert new.text.startswith(f"# tracepack schema {version} -- RELEASED.")
    assert "docs/schema-language.md" in new.text.splitlines()[6]
    # The migration is exactly what the generator writes: 0 lines by hand.
    migration = root / "src" / "tracepack" / "migrations" / f"{before.module_name}_to_{new.module_name}.py"
    assert migration.read_text() == migration_module(before, new, diff_schemas(before, new))
    assert f"tracepack_generated.{new.module_name}" in (root / "src" / "tracepack" / "model.py").read_text()
    assert sorted(p.name for p in (root / "tests" / "golden" / version).iterdir()) == sorted(
        [
            f"{c}{z}.tpk"  # the row layout's files keep their first name, flatbuffers.tpk
            for c in ("json", "msgpack", "flatbuffers", "columnar", "flatbuffers-columns")
            for z in ("", "-zstd")
        ]
        + ["expected.json"]
    )
    # The copy's checks and golden tests pass with no test edited: every version's files read by the
    # new build, the new version's written by it.
    check = _run(root, "-m", "tracepack.schema_check", "--all", "schema")
    assert check.returncode == 0, check.stdout
    golden = _run(root, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/golden")
    assert golden.returncode == 0, golden.stdout[-3000:]
    # The generated migration: older files come up with the new fields at their defaults; a new
    # document goes back down only when it holds nothing the older version lacks.
    probe = f"""
import tracepack
from tracepack.migrations import STEPS, downgrade, upgrade
from tracepack.versions import CURRENT
assert CURRENT == ({new.major}, {new.minor}), CURRENT
doc = tracepack.load("tests/golden/{before.version}/msgpack.tpk")
assert doc.version == CURRENT and doc.source_version == ({before.major}, {before.minor})
assert {{n.weight_x for n in doc.raw.graph.nodes}} == {{1.0}}
back = downgrade(doc.raw, CURRENT, ({before.major}, {before.minor}))
assert upgrade(back, ({before.major}, {before.minor}), CURRENT) == doc.raw
doc.raw.graph.values[0].note_x = "kept only by {version}"
try:
    downgrade(doc.raw, CURRENT, ({before.major}, {before.minor}))
except tracepack.VersionError as exc:
    assert "Value.note_x" in str(exc), exc
else:
    raise AssertionError("a downgrade lost a new field's value")
print("ok")
"""
    probed = _run(root, "-c", probe)
    assert probed.stdout == "ok\n", probed.stderr[-3000:]


def test_release_refuses_a_draft_that_fails_its_check(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _released_schemas(root)
    draft = new_draft(root / "schema")
    text = draft.read_text()
    draft.write_text(
        text.replace(
            '[structs.KeyValue.fields.value]\nid = 1\ntype = "str"',
            '[structs.KeyValue.fields.value]\nid = 1\ntype = "u32"',
        )
    )
    from tracepack.schema_check.release import ReleaseError

    with pytest.raises(ReleaseError) as info:
        release(root, golden=False, log=lambda _: None)
    assert "FIELD_TYPE_CHANGED KeyValue.value" in str(info.value)
    # Nothing was written: the draft is still a draft, the lock unchanged.
    assert 'status = "draft"' in draft.read_text()
    assert (root / "schema" / "RELEASED.sha256").read_text() == (ROOT / "schema" / "RELEASED.sha256").read_text()


def test_a_draft_needs_no_second_draft(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _released_schemas(root)
    new_draft(root / "schema")
    from tracepack.errors import UsageError

    with pytest.raises(UsageError, match="is a draft already"):
        new_draft(root / "schema")
