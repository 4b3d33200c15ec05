"""Every example in the README (and the docs listed in ``CHECKED``) runs and prints what it shows.

See transcript.py for what each kind of block must hold. To add a checked example, write a
``console`` (or ``python``/``pycon``) block in one of the ``CHECKED`` files, using the files of
``FIXTURES`` (or files that earlier blocks of the same file wrote); run this test to see it pass.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tracepack
from tests.readme.transcript import ROOT, Block, Failure, blocks, match_output, run_file

SAMPLE = ROOT / "src" / "tracepack" / "data" / "sample"
TORCH_DATA = ROOT / "tests" / "data" / "torch"

#: The Markdown files whose examples are run.
CHECKED = ["README.md", "docs/cli.md", "docs/tables.md"]

#: The files every checked document starts from (a fresh copy per document).
FIXTURES = {
    "model.json": SAMPLE / "model.json",  # the bundled torch.export program (70 nodes), as torch wrote it
    "model.pt2": SAMPLE / "tiny_transformer.pt2",  # the same program in torch.export.save's archive
    "model.ptl": TORCH_DATA / "lite_debug.ptl",  # a TorchScript lite-interpreter file with debug handles
    "zoo/cnn.pt2": TORCH_DATA / "corpus" / "cnn.pt2",
    "zoo/transformer.pt2": TORCH_DATA / "corpus" / "transformer.pt2",
    "zoo/helpers.pt2": TORCH_DATA / "corpus" / "helpers.pt2",
    "zoo/dynamic.pt2": TORCH_DATA / "corpus" / "dynamic.pt2",
}


def _fixtures(folder: Path) -> Path:
    for name, source in FIXTURES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, folder / name)
    doc = tracepack.load(folder / "model.json")
    tracepack.dump(doc, folder / "model.tpk")  # the defaults: msgpack + zstd
    tracepack.dump(doc, folder / "model.fb.tpk", codec="flatbuffers", compression="none")
    from tracepack.torch.pt2 import pack_pt2

    (folder / "packed.pt2").write_bytes(pack_pt2((folder / "model.pt2").read_bytes(), source="model.pt2"))
    return folder


@pytest.mark.parametrize("name", CHECKED)
def test_every_example_runs_as_shown(name: str, tmp_path: Path) -> None:
    ran = run_file(ROOT / name, _fixtures(tmp_path))
    assert ran > 0, f"{name} has no checked examples"


def test_every_code_block_of_the_readme_is_checked() -> None:
    # Only tables of figures (fenced as `text`) are not run: anything else must be a checked kind.
    kinds = [b.kind for b in blocks((ROOT / "README.md").read_text(encoding="utf-8"))]
    assert set(kinds) <= {"console", "python", "pycon", "sh", "tree", "text"}, kinds
    assert kinds.count("console") >= 3


def test_the_readme_starts_with_make_demo_and_make_test() -> None:
    first = next(blocks((ROOT / "README.md").read_text(encoding="utf-8")))
    assert first.kind == "sh"
    assert [line.split("#")[0].strip() for line in first.text.splitlines()][:2] == ["make demo", "make test"]


# -- the checker itself: it must be able to fail ------------------------------------------------------


def test_output_matching() -> None:
    assert match_output(["a", "b"], ["a", "b"])
    assert not match_output(["a", "b"], ["a", "c"])
    assert not match_output(["a"], ["a", "b"])
    assert match_output(["a", "...", "z"], ["a", "b", "c", "z"])
    assert match_output(["a", "...", "z"], ["a", "z"])
    assert match_output(["a  "], ["a"])
    assert match_output(["wrote [...] bytes"], ["wrote 123 bytes"])
    assert not match_output(["wrote [...] bytes"], ["wrote 123 KB"])


def test_a_wrong_transcript_fails(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("```console\n$ echo hello\nhallo\n```\n")
    with pytest.raises(Failure, match="printed\nhello\nbut the file shows\nhallo"):
        run_file(doc, tmp_path)
    doc.write_text("```console\n$ false\n```\n")
    with pytest.raises(Failure, match="exited 1"):
        run_file(doc, tmp_path)
    doc.write_text("```python\nassert 1 == 2\n```\n")
    with pytest.raises(Failure, match="AssertionError"):
        run_file(doc, tmp_path)
    doc.write_text("```pycon\n>>> 1 + 1\n3\n```\n")
    with pytest.raises(Failure, match="doctest failed"):
        run_file(doc, tmp_path)
    doc.write_text("```sh\nmake frobnicate\n```\n")
    with pytest.raises(Failure, match="not a target"):
        run_file(doc, tmp_path)
    doc.write_text("```sh\npip install 'tracepack[gpu]'\n```\n")
    with pytest.raises(Failure, match=r"\[gpu\] is not an extra"):
        run_file(doc, tmp_path)
    doc.write_text("```tree\nsrc/\n  tracepack/\n    nosuchfile.py\n```\n")
    with pytest.raises(Failure, match=r"src/tracepack/nosuchfile\.py is listed"):
        run_file(doc, tmp_path)


def test_blocks_keep_their_line_numbers() -> None:
    assert list(blocks("text\n```console\n$ ls\n```\n")) == [Block("console", 2, "$ ls\n")]


def test_the_demo_table_is_what_make_demo_prints(capsys: pytest.CaptureFixture[str]) -> None:
    # The README's size table and debug-info sentence, against `tracepack demo` run now.
    import re

    from tracepack.cli import main

    assert main(["demo", "--quick"]) == 0
    printed = capsys.readouterr().out
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("What `make demo` prints") :].split("\n\n")[1]
    rows = [r.strip("|").split("|") for r in table.splitlines()[2:]]
    assert len(rows) >= 4
    for label, size, ratio in rows:
        assert re.search(
            rf"^{re.escape(label.strip())}\s+{re.escape(size.strip())}\s+{re.escape(ratio.strip())}$", printed, re.M
        ), label
    m = re.search(r"per-node strings ([\d,]+) bytes -> interned tables ([\d,]+) bytes \(([\d.]+)x smaller\)", printed)
    assert m is not None, printed
    strings, tables, ratio = int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")), float(m.group(3))
    claim = f"Its debug info goes from {round(strings / 1000)} KB of per-node strings to {tables / 1000:.1f} KB of tables ({int(ratio)}x)"
    assert claim in " ".join(readme.split()), claim
