"""``tracepack schema check``: exact output on handwritten schema pairs (``data/``), exit codes."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tracepack.schema_check.cli import main

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _in_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DATA)  # messages name files as given: relative names keep them short and stable


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["check", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_minor_change_declared_right(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "base-1.0.toml", "minor-1.1.toml") == (
        0,
        """\
check base-1.0.toml (1.0, released) -> minor-1.1.toml (1.1, draft)
  minor ENUM_VALUE_ADDED Color.blue: new value 2 [breaks no codec]
  minor FIELD_ADDED Doc.weight: new field 5 (f64) with default 1.0 [breaks no codec]
OK: a minor change, and 1.1 is the version after 1.0 for it
""",
        "",
    )


def test_major_change_declared_minor(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "base-1.0.toml", "major-1.1.toml") == (
        1,
        """\
check base-1.0.toml (1.0, released) -> major-1.1.toml (1.1, draft)
  major FIELD_RENAMED Point.left: field 0 was named `x`: JSON files key it by name [breaks json, columnar, flatbuffers-columns]
  major FIELD_REMOVED Label.text: field 0 (str) was removed [breaks json, msgpack, flatbuffers-rows, columnar, flatbuffers-columns]
FAIL: the changes need a major bump to 2.0, but major-1.1.toml declares 1.1, a minor bump
Ways out (1-2 together to keep 1.1, or 3):
  1. keep the name `Point.x` (FIELD_RENAMED)
  2. keep `Label.text` and mark it `deprecated = true` instead of removing it (FIELD_REMOVED)
  3. declare version 2.0
""",
        "",
    )


def test_major_change_declared_major(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "base-1.0.toml", "major-2.0.toml")
    assert code == 0
    assert out.splitlines()[-1] == "OK: a major change, and 2.0 is the version after 1.0 for it"


def test_minor_change_declared_major(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(DATA / "base-1.0.toml", "base-1.0.toml")
    Path("minor-2.0.toml").write_text(
        (DATA / "minor-1.1.toml").read_text().replace('version = "1.1"', 'version = "2.0"')
    )
    code, out, _ = run(capsys, "base-1.0.toml", "minor-2.0.toml")
    assert code == 1
    assert out.splitlines()[-3:] == [
        "FAIL: minor-2.0.toml declares 2.0, a major bump, but the changes only need a minor bump: 1.1",
        "Ways out:",
        "  1. declare version 1.1",
    ]


def test_forbidden_change(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "base-1.0.toml", "forbidden-1.1.toml") == (
        1,
        """\
check base-1.0.toml (1.0, released) -> forbidden-1.1.toml (1.1, draft)
  major FIELD_TYPE_PROMOTED Point.y: type i32 widened to i64: JSON and MessagePack read old values, \
FlatBuffers does not [breaks flatbuffers-rows]
  forbidden FIELD_DEFAULT_CHANGED Doc.color: default "red" became "green": files that omitted it would \
change meaning [breaks json, flatbuffers-rows, flatbuffers-columns]
FAIL: FIELD_DEFAULT_CHANGED at Doc.color is forbidden in every version
Ways out:
  1. restore `default = "red"` on `Doc.color`; for another default, add a new field and deprecate \
`Doc.color` (FIELD_DEFAULT_CHANGED)
""",
        "",
    )


def test_identical_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "base-1.0.toml", "base-1.0.toml") == (
        0,
        """\
check base-1.0.toml (1.0, released) -> base-1.0.toml (1.0, released)
  no changes
OK: no change a reader can see; 1.0 is unchanged
""",
        "",
    )


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "base-1.0.toml", "major-1.1.toml", "--json")
    assert (code, err) == (1, "")
    doc = json.loads(out)
    assert doc["ok"] is False
    assert doc["needed"] == "major"
    assert doc["expected_version"] == "2.0"
    assert doc["old"] == {"source": "base-1.0.toml", "version": "1.0", "status": "released"}
    assert doc["findings"][1] == {
        "rule": "FIELD_REMOVED",
        "where": "Label.text",
        "detail": "field 0 (str) was removed",
        "breaks": ["json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns"],
        "bump": "major",
        "fix": "keep `Label.text` and mark it `deprecated = true` instead of removing it",
    }
    assert doc["ways_out"][-1] == "declare version 2.0"
    assert doc["ways_note"] == "1-2 together to keep 1.1, or 3"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["base-1.0.toml", "invalid.toml"],
            "invalid.toml: 1 problem(s): $.structs.Point: field ids must be 0..1 without gaps; found 3",
        ),
        (["base-1.0.toml", "missing.toml"], "missing.toml: cannot open: No such file or directory"),
        (["base-1.0.toml"], "expected OLD NEW, got 1 schema file(s)"),
        (["a.toml", "b.toml", "c.toml"], "expected OLD NEW, got 3 schema file(s)"),
        (["--all", "x", "y"], "--all takes a folder, not OLD NEW"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--all", "no-such-folder"], "no-such-folder: no schema files (tracepack-X.Y.toml)"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert run(capsys, *argv) == (2, "", f"tracepack schema check: {message}\n")


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    assert out.startswith("usage: tracepack schema check OLD NEW [--json]\n")


# -- check --all --------------------------------------------------------------------------------------


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A schema folder with release 1.0 (the demo schema), locked, and draft 1.1."""
    d = tmp_path / "schema"
    d.mkdir()
    shutil.copy(DATA / "base-1.0.toml", d / "tracepack-1.0.toml")
    shutil.copy(DATA / "minor-1.1.toml", d / "tracepack-1.1.toml")
    (d / "RELEASED.sha256").write_text(f"# lock\n1.0 {_sha(d / 'tracepack-1.0.toml')} tracepack-1.0.toml\n")
    return d


def test_all_ok(capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    assert run(capsys, "--all", str(folder)) == (
        0,
        """\
check --all schema/: released 1.0; draft 1.1
check schema/tracepack-1.0.toml (1.0, released) -> schema/tracepack-1.1.toml (1.1, draft)
  minor ENUM_VALUE_ADDED Color.blue: new value 2 [breaks no codec]
  minor FIELD_ADDED Doc.weight: new field 5 (f64) with default 1.0 [breaks no codec]
OK: a minor change, and 1.1 is the version after 1.0 for it
OK: every release of schema/ is locked and unchanged, every step declares its version, and no release \
reuses what an earlier one retired
""",
        "",
    )


def test_all_released_schema_changed(capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    released = folder / "tracepack-1.0.toml"
    locked = _sha(released)
    released.write_text(released.read_text() + "# an innocent comment\n")
    code, out, _ = run(capsys, "--all", str(folder))
    assert code == 1
    assert out.splitlines()[-4:] == [
        f"FAIL: schema/tracepack-1.0.toml: released schemas are immutable, but its sha256 is {_sha(released)}, "
        f"not {locked} as schema/RELEASED.sha256 line 2 locks",
        "Ways out:",
        "  1. restore the released bytes of schema/tracepack-1.0.toml "
        "(`git log -p -- schema/tracepack-1.0.toml` shows the change); "
        "make the change in the next version's schema instead",
        "FAIL: 1 problem(s) in schema/",
    ]


def test_all_release_without_lock_line(capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    release = folder / "tracepack-1.1.toml"
    release.write_text(release.read_text().replace('status = "draft"', 'status = "released"'))
    code, out, _ = run(capsys, "--all", str(folder))
    assert code == 1
    assert out.splitlines()[-4:] == [
        "FAIL: schema/tracepack-1.1.toml: released as 1.1, but schema/RELEASED.sha256 has no line for it",
        "Ways out:",
        f"  1. add this line to schema/RELEASED.sha256: `1.1 {_sha(release)} tracepack-1.1.toml`",
        "FAIL: 1 problem(s) in schema/",
    ]


def test_all_without_lock_file(capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    (folder / "RELEASED.sha256").unlink()
    code, out, _ = run(capsys, "--all", str(folder))
    assert code == 1
    assert "FAIL: schema/tracepack-1.0.toml: released as 1.0, but schema/RELEASED.sha256 does not exist" in out


def test_all_lock_names_a_missing_or_draft_file(capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    lock = folder / "RELEASED.sha256"
    draft = folder / "tracepack-1.1.toml"
    lock.write_text(lock.read_text() + f"1.1 {_sha(draft)} tracepack-1.1.toml\n1.2 {'0' * 64} tracepack-1.2.toml\n")
    code, out, _ = run(capsys, "--all", str(folder))
    assert code == 1
    lines = out.splitlines()
    assert (
        "FAIL: schema/tracepack-1.1.toml: is a draft, but schema/RELEASED.sha256 line 3 locks it as released" in lines
    )
    assert "FAIL: schema/RELEASED.sha256 line 4: locks tracepack-1.2.toml, which does not exist" in lines


def test_all_wrong_step_between_releases(capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    (folder / "tracepack-1.1.toml").unlink()
    shutil.copy(DATA / "major-1.1.toml", folder / "tracepack-1.1.toml")
    code, out, _ = run(capsys, "--all", str(folder))
    assert code == 1
    assert "FAIL: the changes need a major bump to 2.0, but schema/tracepack-1.1.toml declares 1.1, a minor bump" in (
        out.splitlines()
    )


def test_all_malformed_lock_is_bad_input(capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    (folder / "RELEASED.sha256").write_text("1.0 deadbeef tracepack-1.0.toml\n")
    code, out, err = run(capsys, "--all", str(folder))
    assert (code, out) == (2, "")
    assert err == (
        "tracepack schema check: schema/RELEASED.sha256: line 1: malformed lock line "
        "'1.0 deadbeef tracepack-1.0.toml'; expected `MAJOR.MINOR <sha256, 64 lowercase hex digits> "
        "tracepack-MAJOR.MINOR.toml`\n"
    )


def test_all_json(capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    code, out, _ = run(capsys, "--all", str(folder), "--json")
    assert code == 0
    doc = json.loads(out)
    assert (doc["ok"], doc["released"], doc["drafts"], doc["problems"]) == (True, ["1.0"], ["1.1"], [])
    assert [c["needed"] for c in doc["checks"]] == ["minor"]


def test_module_entry_point_on_the_repository() -> None:
    """What `make check` runs."""
    done = subprocess.run(
        [sys.executable, "-m", "tracepack.schema_check", "--all", "schema"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[-1].startswith("OK: ")


def test_all_draft_older_than_a_release(capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    old = folder / "tracepack-0.9.toml"
    old.write_text(
        (DATA / "base-1.0.toml")
        .read_text()
        .replace('version = "1.0"', 'version = "0.9"')
        .replace('status = "released"', 'status = "draft"')
    )
    code, out, _ = run(capsys, "--all", str(folder))
    assert code == 1
    assert "FAIL: schema/tracepack-0.9.toml: a draft older than the latest release, 1.0" in out.splitlines()
    assert "FAIL: 2 drafts (schema/tracepack-0.9.toml, schema/tracepack-1.1.toml): work on one version at a time" in (
        out.splitlines()
    )


def _release_chain(tmp_path: Path, middle: str, new: str) -> Path:
    """A folder: the demo schema as 1.0, ``middle`` edits of it released as 2.0, ``new`` edits as draft 2.1."""
    d = tmp_path / "history"
    d.mkdir()
    base = (DATA / "base-1.0.toml").read_text(encoding="utf-8")
    two = base.replace('version = "1.0"', 'version = "2.0"')
    for old, replacement in (pair.split(" => ") for pair in middle.split(" ;; ")):
        two = two.replace(old, replacement)
    draft = two.replace('version = "2.0"', 'version = "2.1"').replace('status = "released"', 'status = "draft"')
    draft += new
    (d / "tracepack-1.0.toml").write_text(base, encoding="utf-8")
    (d / "tracepack-2.0.toml").write_text(two, encoding="utf-8")
    (d / "tracepack-2.1.toml").write_text(draft, encoding="utf-8")
    lock = "".join(f"{v} {_sha(d / f'tracepack-{v}.toml')} tracepack-{v}.toml\n" for v in ("1.0", "2.0"))
    (d / "RELEASED.sha256").write_text(lock, encoding="utf-8")
    return d


_TITLE = '[structs.Doc.fields.title]\nid = 4\ntype = "u32"\nref = "strings"\ndefault = 0\ndoc = "Title."\n'


@pytest.mark.parametrize(
    ("middle", "new", "finding"),
    [
        # Doc.title (id 4) removed in 2.0; 2.1 gives id 4 to another u32: pairs say "a new field".
        (
            f"{_TITLE} => ",
            '\n[structs.Doc.fields.subtitle]\nid = 4\ntype = "u32"\ndefault = 0\ndoc = "S."\n',
            "FIELD_ID_REUSED at Doc.subtitle is forbidden in every version (history/tracepack-2.1.toml against 1.0)",
        ),
        # Doc.title removed in 2.0, back in 2.1 as a string.
        (
            f"{_TITLE} => ",
            '\n[structs.Doc.fields.title]\nid = 4\ntype = "str"\ndefault = ""\ndoc = "T."\n',
            "FIELD_NAME_REUSED at Doc.title is forbidden in every version (history/tracepack-2.1.toml against 1.0)",
        ),
        # Color.green (1) removed in 2.0; 2.1 gives 1 to blue.
        (
            '[enums.Color.values.green]\nvalue = 1\ndoc = "Green."\n => ',
            '\n[enums.Color.values.blue]\nvalue = 1\ndoc = "Blue."\n',
            "ENUM_VALUE_NUMBER_REUSED at Color.blue is forbidden in every version (history/tracepack-2.1.toml "
            "against 1.0)",
        ),
    ],
)
def test_all_checks_every_release_against_every_earlier_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, middle: str, new: str, finding: str
) -> None:
    d = _release_chain(tmp_path, middle, new)
    code, out, err = run(capsys, "--all", str(d))
    assert (code, err) == (1, "")
    # Next to its predecessor the draft only adds (a minor step); against 1.0 it reuses.
    assert "OK: a minor change, and 2.1 is the version after 2.0 for it" in out
    assert f"FAIL: {finding}" in out
