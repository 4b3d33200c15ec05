"""The README's facts that are neither examples nor the demo table, against the code and `tracepack demo`:
the current schema release, the default dictionary, the ratio of the sample's default file, what
`convert` prints. (The defaults' figures on the real set and the ladder are checked by `make bench`,
section `defaults`, against its own run.)"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import tracepack
from tests.readme.transcript import ROOT
from tracepack import dictionaries
from tracepack.codecs import encode_best
from tracepack.versions import CURRENT


def _readme() -> str:
    return " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())


def test_the_current_release_is_the_one_the_code_writes() -> None:
    name = f"schema/tracepack-{CURRENT[0]}.{CURRENT[1]}.toml"
    assert f"The schema ([`{name}`]({name}), the current release;" in _readme()
    assert (ROOT / name).is_file()


def test_the_default_dictionary_is_named() -> None:
    readme = _readme()
    assert f"tracepack ships zstd dictionaries trained on torch.export programs (`{dictionaries.DEFAULT}`" in readme
    assert f"({dictionaries.DEFAULT}))`); `tracepack pack`" in readme


def test_what_convert_prints_for_the_sample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracepack.cli import main

    src = tmp_path / "model.pt2"
    shutil.copyfile(ROOT / "src" / "tracepack" / "data" / "sample" / "tiny_transformer.pt2", src)
    assert main(["convert", str(src), str(tmp_path / "m.tpk")]) == 0
    printed = capsys.readouterr().out.strip().replace(str(tmp_path) + "/", "")
    quoted = re.search(r"says so \(`(wrote m\.tpk: [^`]+)`\)", _readme())
    assert quoted is not None
    assert printed == quoted.group(1)


def test_the_samples_ratio_is_what_demo_prints(capsys: pytest.CaptureFixture[str]) -> None:
    from tracepack.cli import main

    assert main(["demo", "--quick"]) == 0
    printed = capsys.readouterr().out

    def size(label: str) -> int:
        m = re.search(rf"^{re.escape(label)}\s+([\d,]+)\s", printed, re.M)
        assert m is not None, label
        return int(m.group(1).replace(",", ""))

    doc = tracepack.load(ROOT / "src" / "tracepack" / "data" / "sample" / "model.json")
    default = encode_best(doc)
    assert len(default.data) == size(f"tracepack {default.codec} + zstd -19 + dict")
    ratio = len(default.data) / size("model.json + zstd -19")
    assert f"convert` writes by default): {ratio:.2f}x of `zstd -19 model.json` here" in _readme()
