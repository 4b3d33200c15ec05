"""``tracepack upgrade`` of a ``<top>/models/`` archive (torch 2.8+) is streamed: checked against torch.

The streamed output (program members rewritten, weights copied raw, torch 2.8's legacy weight
archives rewritten as storages + config) must load in the installed torch's ``torch.export.load``
as the same program, with the same weights and outputs, as what the non-streamed path
(``torch.export.save`` of the program torch loaded) gives, over every release sample of that layout.
"""

from __future__ import annotations

import io
import logging
import os
import pickle
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.releases.samples import files, path, readback
from tests.torch.conftest import PAYLOAD_CONFIGS, TORCH_MARKS
from tracepack.cli import main

torch = pytest.importorskip("torch")
from tracepack.torch.upgrade import upgrade_pt2, upgrade_pt2_file  # noqa: E402 - needs torch

# The streamed upgrade writes torch 2.10's layout, which an older torch's torch.export.load cannot read:
# there `tracepack upgrade` goes through torch (tests/releases/test_upgrade.py, tests/torch/test_load_hostile.py).
pytestmark = [*TORCH_MARKS, PAYLOAD_CONFIGS.mark]

#: Every export sample of a release that wrote the ``<top>/models/`` layout.
PACKAGE = [(v, n) for v, n in files("export") if zipfile.ZipFile(path(v, n)).namelist()[0].count("/") >= 1]
LEGACY = [
    (v, n)
    for v, n in PACKAGE
    if any(m.endswith("/data/weights/model.pt") for m in zipfile.ZipFile(path(v, n)).namelist())
]


def _tensors(values: list[dict[str, Any]]) -> list[Any]:
    return [torch.tensor(t["values"], dtype=getattr(torch, t["dtype"])).reshape(t["shape"]) for t in values]


def _outputs(program: Any, inputs: list[Any]) -> list[Any]:
    got = program.module()(*inputs)
    return list(got) if isinstance(got, (list, tuple)) else [got]


def _same_tensors(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(
        type(a[k]) is type(b[k])
        and (
            not isinstance(a[k], torch.Tensor) or (torch.equal(a[k], b[k]) and a[k].requires_grad == b[k].requires_grad)
        )
        for k in a
    )


def test_the_samples_cover_both_weight_formats() -> None:
    assert {v for v, _ in LEGACY} == {"2.8"}
    assert {v for v, _ in PACKAGE} >= {"2.8", "2.10", "2.12", "2.13"}


def assert_same_program(streamed: Any, saved: Any, version: str, name: str) -> None:
    """Two ExportedPrograms torch loaded (the streamed upgrade's and the torch-saved one's) are the
    same program: graph, signature, module call graph, range constraints, weights and constants
    (equal tensors), example inputs, and they give the same outputs, those the release recorded."""
    assert str(streamed.graph) == str(saved.graph)
    assert streamed.graph_signature == saved.graph_signature
    assert streamed.module_call_graph == saved.module_call_graph
    assert str(streamed.range_constraints) == str(saved.range_constraints)
    assert _same_tensors(streamed.state_dict, saved.state_dict)
    assert _same_tensors(streamed.constants, saved.constants)
    assert str(streamed.example_inputs) == str(saved.example_inputs)
    entry = readback(version)["files"][name]
    for inputs, recorded in zip(entry["inputs"], entry["outputs"], strict=True):
        a, b = _outputs(streamed, _tensors(inputs)), _outputs(saved, _tensors(inputs))
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
        want = _tensors(recorded if isinstance(recorded, list) else [recorded])
        assert all(torch.allclose(x, w, rtol=1e-5, atol=1e-6) for x, w in zip(a, want, strict=True))


@pytest.mark.parametrize(("version", "name"), PACKAGE)
def test_streamed_upgrade_loads_as_the_torch_saved_one(version: str, name: str) -> None:
    data = path(version, name).read_bytes()
    streamed = torch.export.load(io.BytesIO(upgrade_pt2(data, source=name)))
    saved = torch.export.load(io.BytesIO(upgrade_pt2(data, source=name, through_torch=True)))
    assert_same_program(streamed, saved, version, name)


@pytest.mark.parametrize(("version", "name"), [p for p in PACKAGE if p not in LEGACY][:3])
def test_weight_members_are_copied_byte_for_byte(version: str, name: str) -> None:
    data = path(version, name).read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as old, zipfile.ZipFile(io.BytesIO(upgrade_pt2(data, source=name))) as new:
        kept = [n for n in old.namelist() if "/models/" not in n]
        assert kept
        assert all(new.read(n) == old.read(n) for n in kept)
        assert all(new.getinfo(n).CRC == old.getinfo(n).CRC for n in kept)


@pytest.mark.parametrize(("version", "name"), LEGACY)
def test_legacy_weights_are_rewritten_as_torch_writes_them_today(
    version: str, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """torch 2.8's ``data/weights/model.pt`` loads with a "legacy format" warning, whole into memory;
    the upgrade writes one member per storage and the weights config, as torch.export.save does."""
    data = path(version, name).read_bytes()
    with caplog.at_level(logging.WARNING):
        torch.export.load(io.BytesIO(data))
    assert "legacy format" in caplog.text
    caplog.clear()
    out = upgrade_pt2(data, source=name)
    with caplog.at_level(logging.WARNING):
        torch.export.load(io.BytesIO(out))
    assert "legacy format" not in caplog.text
    with zipfile.ZipFile(io.BytesIO(out)) as new, zipfile.ZipFile(io.BytesIO(data)) as old:
        top = new.namelist()[0].split("/")[0]
        names = set(new.namelist())
        assert f"{top}/data/weights/model.pt" not in names
        assert f"{top}/data/weights/model_weights_config.json" in names
        assert f"{top}/data/constants/model_constants_config.json" in names
        nested = zipfile.ZipFile(io.BytesIO(old.read(f"{top}/data/weights/model.pt")))
        storages = {nested.read(n) for n in nested.namelist() if "/data/" in n}
        weights = {new.read(n) for n in names if "/data/weights/weight_" in n}
        assert weights == storages  # the storages' bytes, copied raw
        saved = zipfile.ZipFile(io.BytesIO(upgrade_pt2(data, source=name, through_torch=True)))
        assert new.read(f"{top}/data/weights/model_weights_config.json") == saved.read(
            f"{saved.namelist()[0].split('/')[0]}/data/weights/model_weights_config.json"
        )  # the very config torch.export.save writes


def test_a_packed_archive_is_upgraded_unpacked(tmp_path: Path) -> None:
    src, packed, out = path("2.10", "transformer.pt2"), tmp_path / "packed.pt2", tmp_path / "new.pt2"
    assert main(["pack", str(src), str(packed)]) == 0
    assert main(["upgrade", str(packed), str(out)]) == 0
    with zipfile.ZipFile(out) as z:
        assert not any("/tracepack/" in n for n in z.namelist())
    upgraded = torch.export.load(out)
    saved = torch.export.load(io.BytesIO(upgrade_pt2(src.read_bytes(), source="t", through_torch=True)))
    assert str(upgraded.graph) == str(saved.graph)
    stacks = [n.meta.get("stack_trace") for n in upgraded.graph.nodes]
    assert stacks == [n.meta.get("stack_trace") for n in saved.graph.nodes]
    assert any(stacks)


def _legacy_with(src: Path, data_pkl: bytes, member: str = "/data/weights/model.pt") -> bytes:
    """``src`` with the ``data.pkl`` of its nested ``torch.save`` archive ``*member`` replaced
    (torch 2.8's weights by default; a flat archive's ``serialized_state_dict.pt`` and friends)."""
    out = io.BytesIO()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith(member):
                inner = io.BytesIO()
                with zipfile.ZipFile(io.BytesIO(data)) as nin, zipfile.ZipFile(inner, "w") as nout:
                    for ninfo in nin.infolist():
                        nout.writestr(ninfo, data_pkl if ninfo.filename.endswith("data.pkl") else nin.read(ninfo))
                data = inner.getvalue()
            zout.writestr(info, data)
    return out.getvalue()


def test_legacy_weights_that_run_code_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self) -> tuple[Any, ...]:
            return (open, (str(marker), "w"))

    src = tmp_path / "old.pt2"
    src.write_bytes(_legacy_with(path("2.8", "mlp.pt2"), pickle.dumps({"w": Evil()})))
    assert main(["upgrade", str(src), str(tmp_path / "new.pt2")]) == 2
    err = capsys.readouterr().err
    assert "data/weights/model.pt" in err
    assert "weights_only" in err
    assert len(err.strip().splitlines()) == 1
    assert not marker.exists()
    assert not (tmp_path / "new.pt2").exists()


def test_legacy_weights_that_are_not_tensors_are_one_line(tmp_path: Path) -> None:
    from tracepack.errors import LegacyFormatError

    data = _legacy_with(path("2.8", "mlp.pt2"), pickle.dumps({"w": 3}, protocol=2))
    with pytest.raises(LegacyFormatError, match=r"data\.pkl: not a dict of tensors"):
        upgrade_pt2(data, source="old.pt2")


def with_big_weight(src: Path, member: str, dst: Path, size: int) -> None:
    """``src`` with one more weight ``big`` of ``size`` zero bytes in its nested ``torch.save``
    archive of weights ``*member`` (torch 2.8's ``data/weights/model.pt``, a flat archive's
    ``serialized_state_dict.pt``)."""
    with zipfile.ZipFile(src) as z:
        nested_name = next(n for n in z.namelist() if n.endswith(member))
        sd = torch.load(io.BytesIO(z.read(nested_name)), weights_only=True)
    sd["big"] = torch.zeros(size // 4)
    inner = io.BytesIO()
    torch.save(sd, inner)
    del sd
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info, inner.getvalue() if info.filename == nested_name else zin.read(info))


def _legacy_big(dst: Path, size: int) -> None:
    """torch 2.8's mlp sample with one more stored weight of ``size`` zero bytes, in the nested archive."""
    with_big_weight(path("2.8", "mlp.pt2"), "/data/weights/model.pt", dst, size)


def _peak(src: Path, dst: Path) -> int:
    """Peak RSS of ``tracepack upgrade SRC DST`` as its own process (not this one's, see run_measured)."""
    from benchmarks.bench_hostile import run_measured

    _, rss, code = run_measured([sys.executable, "-m", "tracepack", "upgrade", str(src), str(dst)])
    assert code == 0
    return rss


def check_big_upgrade(tmp_path: Path, sample: Path, make_big: Callable[[Path, int], None]) -> tuple[int, int]:
    """Two processes, one upgrading ``sample``, one ``sample`` with a 128 MiB zero weight ``big``
    more (``make_big``): the second's peak RSS is at most 32 MiB above the first's, and the
    upgrade loads with every weight. Returns both peaks."""
    small = tmp_path / "small.pt2"
    small.write_bytes(sample.read_bytes())
    big = tmp_path / "big.pt2"
    make_big(big, 128 << 20)
    base = _peak(small, tmp_path / "a.pt2")
    peak = _peak(big, tmp_path / "b.pt2")
    assert peak - base < 32 << 20, (base, peak)
    with zipfile.ZipFile(tmp_path / "b.pt2") as z:
        sizes = sorted(i.file_size for i in z.infolist())
    assert sizes[-1] == 128 << 20
    assert os.path.getsize(tmp_path / "b.pt2") > 128 << 20
    program = torch.export.load(tmp_path / "b.pt2")
    original = torch.export.load(tmp_path / "a.pt2").state_dict
    assert set(program.state_dict) == {*original, "big"}
    assert all(torch.equal(program.state_dict[k], v) for k, v in original.items())
    assert program.state_dict["big"].shape == ((128 << 20) // 4,)
    assert not program.state_dict["big"].any()
    return base, peak


def test_peak_memory_follows_the_graph_not_the_weights(tmp_path: Path) -> None:
    """torch 2.8's legacy weights archive with a 128 MiB weight more: see :func:`check_big_upgrade`."""
    check_big_upgrade(tmp_path, path("2.8", "mlp.pt2"), _legacy_big)
    assert _same_tensors(
        torch.export.load(tmp_path / "a.pt2").state_dict, torch.export.load(path("2.8", "mlp.pt2")).state_dict
    )


def test_through_torch_is_the_opt_in(tmp_path: Path) -> None:
    """``through_torch=True`` (CLI ``--through-torch``) loads the program into torch and saves it
    with torch.export.save, for either layout; the default streams it."""
    for version in ("2.6", "2.10"):
        src, dst = path(version, "mlp.pt2"), tmp_path / f"{version}.pt2"
        sizes = upgrade_pt2_file(src, dst, through_torch=True)
        assert sizes == (src.stat().st_size, dst.stat().st_size)
        with zipfile.ZipFile(dst) as z:
            assert z.namelist()[0].startswith("archive/")  # torch.export.save into a stream
        cli = tmp_path / f"{version}-cli.pt2"
        assert main(["upgrade", "--through-torch", str(src), str(cli)]) == 0
        assert str(torch.export.load(dst).graph) == str(torch.export.load(cli).graph)
