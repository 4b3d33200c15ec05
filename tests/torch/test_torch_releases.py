"""The torch tests on every supported release: the corpus they read is the installed torch's own, every
exclusion names a feature this torch really lacks, and programs exported here (not only the corpus's
models) go through tracepack as torch reads them (docs/torch-releases.md)."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import pytest

from tests.torch.compare import describe
from tests.torch.conftest import (
    ALL_NEEDS,
    COMMITTED_CORPUS,
    CORPUS,
    EXPORTED,
    PACKAGE_LAYOUT,
    PT2,
    TORCH_MARKS,
    TORCH_VERSION,
    Needs,
    is_program,
    members,
    model_json,
)
from tracepack.cli import main

torch = pytest.importorskip("torch")
import tracepack.torch as tt  # noqa: E402 - needs torch
from tracepack.torch import pt2  # noqa: E402

pytestmark = TORCH_MARKS


@pytest.mark.parametrize("name", sorted(ALL_NEEDS))
def test_each_exclusion_names_what_this_torch_lacks(name: str) -> None:
    """A test marked as needing a feature is excluded exactly where the installed torch lacks it: the
    release range of the mark agrees with a probe of torch itself, on every release this runs on."""
    need: Needs = ALL_NEEDS[name]
    assert need.probe() == need.present, f"{need.what}: the range says torch {need.since} and newer"


def test_the_corpus_is_this_torchs_own() -> None:
    """Every test comparing with torch.export.load reads files the installed torch wrote (or, on
    torch 2.13, the committed ones it wrote): the schema of the programs is the installed torch's."""
    if os.environ.get("TRACEPACK_TORCH_CORPUS") == "committed":
        pytest.skip("TRACEPACK_TORCH_CORPUS=committed: the committed torch 2.13 corpus, whatever torch runs")
    from torch._export.serde import schema

    assert (TORCH_VERSION != (2, 13) or os.environ.get("TRACEPACK_TORCH_CORPUS") == "export") == EXPORTED
    assert CORPUS.is_dir()
    for name in PT2:
        version = json.loads(model_json(CORPUS / name))["schema_version"]
        assert (version["major"], version["minor"]) == tuple(schema.SCHEMA_VERSION), name
        with zipfile.ZipFile(CORPUS / name) as archive:
            flat = [n for n in archive.namelist() if is_program(n) and "/" not in n]
        assert bool(flat) != PACKAGE_LAYOUT.present, name
    if not EXPORTED:
        assert CORPUS == COMMITTED_CORPUS


class SpecialFloats(torch.nn.Module):  # type: ignore[misc]
    """Infinities and NaN as arguments (attention masks, clamps): torch 2.6-2.7 write them as JSON's
    ``Infinity``/``NaN`` literals, later releases as strings."""

    def __init__(self, *, nan: bool = True) -> None:
        super().__init__()
        self.nan = nan

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        masked = x.masked_fill(x > 0.5, float("-inf"))
        clamped = torch.clamp(x, min=float("-inf"), max=float("inf"))
        return torch.softmax(masked, dim=-1) + clamped.nan_to_num(nan=float("nan") if self.nan else 0.0, posinf=1.0)


def _torch_writes_nan() -> bool:
    """Whether the installed torch.export.save can write a NaN argument. torch 2.6 writes JSON's ``NaN``
    literal; torch 2.8's ``_dataclass_to_dict`` spells infinities as strings but tests NaN with
    ``obj == math.nan`` (never true), so its ``json.dumps(allow_nan=False)`` refuses the program."""
    from torch._export.serde import serialize

    to_dict = getattr(serialize, "_dataclass_to_dict", None)
    if to_dict is None or not hasattr(serialize, "_to_json_bytes"):
        return True
    return bool(to_dict(float("nan")) == "NaN")


TORCH_WRITES_NAN = _torch_writes_nan()


def test_torch_writes_nan_arguments_where_the_probe_says() -> None:
    """The probe above is what torch.export.save does: where it says no, torch itself refuses a
    program with a NaN argument (so the tests below leave the NaN out there)."""
    ep = torch.export.export(SpecialFloats(), (torch.rand(2, 5),))
    buffer = io.BytesIO()
    if TORCH_WRITES_NAN:
        torch.export.save(ep, buffer)
        assert b"NaN" in model_json(buffer.getvalue())
    else:
        with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
            torch.export.save(ep, buffer)


@pytest.fixture(scope="module")
def special_floats(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A program with infinite arguments (and NaN where torch can write it), exported and saved by the
    installed torch."""
    torch.manual_seed(0)
    ep = torch.export.export(SpecialFloats(nan=TORCH_WRITES_NAN), (torch.rand(2, 5),))
    path = tmp_path_factory.mktemp("floats") / "floats.pt2"
    torch.export.save(ep, path)
    return path


def test_special_floats_through_pack_convert_and_load(
    special_floats: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = model_json(special_floats)
    assert b"Infinity" in raw
    tpk, out, packed = tmp_path / "f.tpk", tmp_path / "model.json", tmp_path / "packed.pt2"
    assert main(["convert", str(special_floats), str(tpk)]) == 0
    assert main(["expand", str(tpk), str(out)]) == 0
    assert out.read_bytes() == raw
    assert main(["pack", str(special_floats), str(packed)]) == 0
    assert members(pt2.unpack_pt2(packed.read_bytes(), source="packed")) == members(special_floats)
    capsys.readouterr()
    theirs = torch.export.load(special_floats)
    x = torch.rand(2, 5)
    for ours in (tt.load(special_floats), tt.load(packed)):
        assert describe(ours)["code"] == describe(theirs)["code"]
        assert describe(ours)["nodes"] == describe(theirs)["nodes"]
        assert torch.equal(ours.module()(x), theirs.module()(x))
    back = tt.from_document(tt.to_document(theirs), like=theirs)
    assert describe(back)["code"] == describe(theirs)["code"]
    assert tt.model_json(theirs) == raw


def test_save_and_load_of_a_fresh_export(special_floats: Path) -> None:
    """tracepack.torch.save of a program the installed torch exported: torch.export.load reads it, and
    tracepack.torch.load gives what torch.export.load gives of torch.export.save's own file."""
    ep = torch.export.load(special_floats)
    saved, plain = io.BytesIO(), io.BytesIO()
    tt.save(ep, saved)
    torch.export.save(ep, plain)
    theirs = describe(torch.export.load(io.BytesIO(plain.getvalue())))
    assert describe(tt.load(io.BytesIO(saved.getvalue()))) == theirs
    assert describe(torch.export.load(io.BytesIO(saved.getvalue())))["code"] == theirs["code"]
