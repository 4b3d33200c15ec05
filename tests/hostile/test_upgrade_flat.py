"""``tracepack upgrade`` of a flat archive (torch 2.1-2.7) is streamed too: checked against torch.

The flat archive becomes the ``<top>/models/`` archive ``torch.export.save`` writes: the program
upgraded by the migration chain, every storage of the nested ``serialized_state_dict.pt`` /
``serialized_constants.pt`` copied raw as a member of its own with the config torch writes, the
example inputs copied raw. Over every flat release sample, the installed torch's
``torch.export.load`` of it must give what it gives for the through-torch upgrade (the program
loaded into torch and saved by torch.export.save), and the same outputs as the release recorded.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.test_upgrade_stream import (
    _legacy_with,
    assert_same_program,
    check_big_upgrade,
    with_big_weight,
)
from tests.releases.samples import files, path
from tests.torch.conftest import PAYLOAD_CONFIGS, TORCH_MARKS
from tests.torch.test_load_hostile import _Touch
from tracepack.cli import main
from tracepack.errors import LegacyFormatError, UnsafePickleError

torch = pytest.importorskip("torch")
from tracepack.torch.upgrade import upgrade_pt2, upgrade_pt2_file  # noqa: E402 - needs torch

# The streamed upgrade writes torch 2.10's layout, which an older torch's torch.export.load cannot read:
# there `tracepack upgrade` goes through torch (tests/releases/test_upgrade.py, tests/torch/test_load_hostile.py).
pytestmark = [*TORCH_MARKS, PAYLOAD_CONFIGS.mark]

#: Every export sample of a release that wrote the flat layout.
FLAT = [
    (v, n) for v, n in files("export") if "serialized_exported_program.json" in zipfile.ZipFile(path(v, n)).namelist()
]
NESTED = ("serialized_state_dict.pt", "serialized_constants.pt", "serialized_example_inputs.pt")


def test_the_flat_samples_are_every_release_before_2_8() -> None:
    assert {v for v, _ in FLAT} == {"2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7"}
    assert len(FLAT) == 35


def _storages(data: bytes) -> set[bytes]:
    """The storages' bytes of a nested ``torch.save`` archive."""
    with zipfile.ZipFile(io.BytesIO(data)) as nested:
        return {nested.read(n) for n in nested.namelist() if "/data/" in n}


@pytest.mark.parametrize(("version", "name"), FLAT)
def test_streamed_flat_upgrade_loads_as_the_torch_saved_one(version: str, name: str) -> None:
    data = path(version, name).read_bytes()
    out = upgrade_pt2(data, source=name)
    saved_bytes = upgrade_pt2(data, source=name, through_torch=True)
    with (
        zipfile.ZipFile(io.BytesIO(out)) as new,
        zipfile.ZipFile(io.BytesIO(saved_bytes)) as saved,
        zipfile.ZipFile(io.BytesIO(data)) as old,
    ):
        assert sorted(new.namelist()) == sorted(saved.namelist())  # the members torch.export.save writes
        configs = [n for n in saved.namelist() if n.endswith("_config.json")]
        assert len(configs) == 2
        assert all(new.read(n) == saved.read(n) for n in configs)  # the very configs torch writes
        sd = next(n for n in old.namelist() if n.startswith("serialized_state_dict"))
        weights = {new.read(n) for n in new.namelist() if "/data/weights/weight_" in n}
        assert weights == _storages(old.read(sd))  # the storages' bytes, copied raw
        if "serialized_constants.pt" in old.namelist() and old.read("serialized_constants.pt"):
            tensors = {new.read(n) for n in new.namelist() if "/data/constants/tensor_" in n}
            assert tensors == _storages(old.read("serialized_constants.pt"))
        inputs = old.read("serialized_example_inputs.pt") if "serialized_example_inputs.pt" in old.namelist() else b""
        assert new.read("archive/data/sample_inputs/model.pt") == inputs
    streamed = torch.export.load(io.BytesIO(out))
    assert_same_program(streamed, torch.export.load(io.BytesIO(saved_bytes)), version, name)


@pytest.mark.parametrize("member", NESTED)
def test_a_flat_pickle_that_runs_code_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], member: str
) -> None:
    """A hostile ``data.pkl`` in any nested torch.save archive runs nothing: one line, exit 2,
    naming the member, no output. (torch.export.load of the example inputs would fall back to a
    full unpickle, so they are checked too, though copied raw.)"""
    marker = tmp_path / "ran"
    src = tmp_path / "old.pt2"
    src.write_bytes(_legacy_with(path("2.6", "mlp.pt2"), pickle.dumps({"w": _Touch(marker)}), member))
    assert main(["upgrade", str(src), str(tmp_path / "new.pt2")]) == 2
    err = capsys.readouterr().err
    assert f"old.pt2:{member}:" in err
    assert "weights_only" in err
    assert len(err.strip().splitlines()) == 1
    assert not marker.exists()
    assert not (tmp_path / "new.pt2").exists()
    with pytest.raises(UnsafePickleError):
        upgrade_pt2(src.read_bytes(), source="old.pt2", through_torch=True)  # nor does the opt-in
    assert not marker.exists()


@pytest.mark.parametrize(
    ("member", "value"), [("serialized_constants.pt", {"c": 3}), ("serialized_state_dict.pt", [1])]
)
def test_flat_members_that_are_not_tensors_are_one_line(member: str, value: Any) -> None:
    data = _legacy_with(path("2.6", "mlp.pt2"), pickle.dumps(value, protocol=2), member)
    with pytest.raises(LegacyFormatError, match=rf"{member}:archive/data\.pkl: not a dict of tensors"):
        upgrade_pt2(data, source="old.pt2")


def _data_pkl(value: Any) -> bytes:
    """The ``data.pkl`` torch.save writes for ``value``."""
    buffer = io.BytesIO()
    torch.save(value, buffer)
    with zipfile.ZipFile(buffer) as z:
        return z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (lambda: torch.empty(3, device="meta"), "tensor 'w' has no stored data"),
        (lambda: torch.eye(2).to_sparse(), "tensor 'w' is sparse_coo: only strided tensors are streamed"),
    ],
)
def test_tensors_without_one_storage_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: Any, message: str
) -> None:
    """A weight torch's weights_only unpickler builds, but not on a storage of the archive (a meta
    tensor, a sparse one), is refused by the streamed upgrade, naming it (never a KeyError)."""
    src = tmp_path / "old.pt2"
    src.write_bytes(_legacy_with(path("2.6", "mlp.pt2"), _data_pkl({"w": value()}), "serialized_state_dict.pt"))
    assert main(["upgrade", str(src), str(tmp_path / "new.pt2")]) == 2
    err = capsys.readouterr().err
    assert "old.pt2:serialized_state_dict.pt:archive/data.pkl: " + message in err
    assert len(err.strip().splitlines()) == 1


def _with_members(src: Path, add: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info, zin.read(info))
        for name, data in add.items():
            zout.writestr(name, data)
    return out.getvalue()


def test_extra_files_come_through_and_unknown_members_are_refused() -> None:
    """``extra_files/<name>`` is torch 2.8+'s ``extra/<name>`` (torch.export.load(extra_files=)
    reads it, after either upgrade); a member torch never wrote is not dropped unseen."""
    data = _with_members(path("2.5", "cnn.pt2"), {"extra_files/note.txt": b"kept"})
    extra = {"note.txt": ""}
    torch.export.load(io.BytesIO(upgrade_pt2(data, source="old.pt2")), extra_files=extra)
    assert extra == {"note.txt": "kept"}
    extra = {"note.txt": ""}
    torch.export.load(io.BytesIO(upgrade_pt2(data, source="old.pt2", through_torch=True)), extra_files=extra)
    assert extra == {"note.txt": "kept"}
    stray = _with_members(path("2.5", "cnn.pt2"), {"models/other.json": b"{}"})
    with pytest.raises(LegacyFormatError, match=r"old\.pt2:models/other\.json: not a member torch 2\.1-2\.7"):
        upgrade_pt2(stray, source="old.pt2")


def _flat_big(dst: Path, size: int) -> None:
    """torch 2.6's mlp sample with one more weight of ``size`` zero bytes in its state dict."""
    with_big_weight(path("2.6", "mlp.pt2"), "serialized_state_dict.pt", dst, size)


def test_flat_peak_memory_follows_the_graph_not_the_weights(tmp_path: Path) -> None:
    """torch 2.6's flat sample with a 128 MiB weight more in ``serialized_state_dict.pt``: the
    upgrade's peak RSS grows by at most 32 MiB (:func:`check_big_upgrade`)."""
    check_big_upgrade(tmp_path, path("2.6", "mlp.pt2"), _flat_big)


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2])
def test_a_flat_archive_rezipped_compressed_is_streamed_too(tmp_path: Path, method: int) -> None:
    """A flat archive whose members are compressed (rewritten by ``zipfile``; torch stores them):
    each nested torch.save archive is decompressed into a temporary file, not memory, and the
    upgrade loads as the through-torch one does."""
    version, name = "2.4", "cnn.pt2"
    src = tmp_path / "deflated.pt2"
    with zipfile.ZipFile(path(version, name)) as zin, zipfile.ZipFile(src, "w", method) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info))
    with zipfile.ZipFile(src) as z:
        assert all(i.compress_type == method for i in z.infolist())
    dst = tmp_path / "new.pt2"
    upgrade_pt2_file(src, dst)
    saved = torch.export.load(
        io.BytesIO(upgrade_pt2(path(version, name).read_bytes(), source=name, through_torch=True))
    )
    assert_same_program(torch.export.load(dst), saved, version, name)


def test_a_corrupt_compressed_nested_archive_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "old.pt2"
    with zipfile.ZipFile(path("2.6", "mlp.pt2")) as zin, zipfile.ZipFile(src, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info))
    data = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as z:
        info = z.getinfo("serialized_state_dict.pt")
    at = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.compress_size // 2
    data[at : at + 8] = b"\xff" * 8
    src.write_bytes(bytes(data))
    assert main(["upgrade", str(src), str(tmp_path / "new.pt2")]) == 2
    err = capsys.readouterr().err
    assert "old.pt2:serialized_state_dict.pt" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "new.pt2").exists()


def test_flat_upgrade_file_to_file(tmp_path: Path) -> None:
    src, dst = path("2.3", "cond.pt2"), tmp_path / "new.pt2"
    sizes = upgrade_pt2_file(src, dst)
    assert sizes == (src.stat().st_size, dst.stat().st_size)
    with zipfile.ZipFile(dst) as z:
        assert "archive/models/model.json" in z.namelist()
        assert z.read("archive/archive_format") == b"pt2"
    torch.export.load(dst)
    again = tmp_path / "again.pt2"
    upgrade_pt2_file(src, again)
    assert again.read_bytes() == dst.read_bytes()  # reproducible: no random serialization id, no clock
