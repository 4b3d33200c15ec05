"""Pickled payloads of torch 2.9+ archives (``use_pickle`` weights and constants, torchbind and
opaque objects) through ``tracepack upgrade`` and the other commands: nothing runs (issue 12).

``torch.export.load`` unpickles every such member in full (``torch.load(weights_only=False)``,
``torch._C._pickle_load_obj``, ``pickle.loads``), so the streamed upgrade, which copies them raw
into a file it calls upgraded, reads each with torch's ``weights_only`` unpickler on ``meta``
storages first: a plain tensor passes (copied byte for byte), anything else is refused naming the
member, unless ``--trust-pickles``. The archives are torch's own: a release sample, and a program
``torch.export.save`` writes with pickled weights (a tensor subclass).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import warnings
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.hostile.strategies import payload_configs
from tests.hostile.test_upgrade_stream import _legacy_with
from tests.releases.samples import path
from tests.torch.conftest import OPAQUE_CONSTANTS, PAYLOAD_CONFIGS, TORCH_MARKS
from tracepack.cli import main
from tracepack.errors import InputError, UnsafePickleError

torch = pytest.importorskip("torch")
import tracepack.torch  # noqa: E402 - needs torch
from tracepack.torch.upgrade import upgrade_pt2, upgrade_pt2_file  # noqa: E402 - needs torch

# The streamed upgrade writes torch 2.10's layout, which an older torch's torch.export.load cannot read:
# there `tracepack upgrade` goes through torch (tests/releases/test_upgrade.py, tests/torch/test_load_hostile.py).
pytestmark = [*TORCH_MARKS, PAYLOAD_CONFIGS.mark]

SAMPLE = path("2.13", "mlp.pt2")  # a torch 2.13 release sample: raw weights, an empty constants config
TOP = "mlp"


def _rewrite(src: bytes, changes: dict[str, bytes | None]) -> bytes:
    """``src`` with members replaced (or added, in order at the end; ``None`` drops one)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(src)) as zin, zipfile.ZipFile(out, "w") as zout:
        seen = set()
        for info in zin.infolist():
            seen.add(info.filename)
            data = changes.get(info.filename, zin.read(info))
            if data is not None:
                zout.writestr(info, data)
        for name, data in changes.items():
            if name not in seen and data is not None:
                zout.writestr(name, data)
    return out.getvalue()


def _saved(value: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _config(data: bytes, kind: str) -> dict[str, Any]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return dict(json.loads(z.read(f"{TOP}/data/{kind}/model_{kind}_config.json")))


def pickled_weight_sample() -> bytes:
    """The release sample with its first weight stored as torch.export.save stores a pickled one:
    ``use_pickle`` in the config, the member a ``torch.save`` of the tensor (a Parameter)."""
    data = SAMPLE.read_bytes()
    state = torch.export.load(SAMPLE).state_dict
    config = _config(data, "weights")
    fqn, entry = next(iter(config["config"].items()))
    entry["use_pickle"] = True
    return _rewrite(
        data,
        {
            f"{TOP}/data/weights/{entry['path_name']}": _saved(state[fqn]),
            f"{TOP}/data/weights/model_weights_config.json": json.dumps(config).encode(),
        },
    )


def _with_constant(data: bytes, path_name: str, payload: bytes) -> bytes:
    """``data`` with one more constant record ``path_name`` (torch's constants config entry)."""
    config = _config(data, "constants")
    config["config"]["extra"] = {"path_name": path_name, "is_param": False, "use_pickle": True, "tensor_meta": None}
    return _rewrite(
        data,
        {
            f"{TOP}/data/constants/{path_name}": payload,
            f"{TOP}/data/constants/model_constants_config.json": json.dumps(config).encode(),
        },
    )


class _Runs:
    """A pickle whose loading runs ``touch MARKER`` through ``os.system``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def _hostile(kind: str, marker: Path) -> tuple[bytes, str]:
    """An archive whose ``kind`` pickled member runs code, and that member's name."""
    evil = pickle.dumps(_Runs(marker), protocol=2)
    if kind == "weight":  # torch.load(weights_only=False) in torch.export.load
        return _legacy_with_bytes(pickled_weight_sample(), evil, "/data/weights/weight_0"), "data/weights/weight_0"
    if kind == "tensor constant":  # the same, for a use_pickle tensor_<n>
        data = _with_constant(SAMPLE.read_bytes(), "tensor_0", _saved(torch.ones(2)))
        return _legacy_with_bytes(data, evil, "/data/constants/tensor_0"), "data/constants/tensor_0"
    if kind == "opaque object":  # pickle.loads in torch.export.load
        return _with_constant(SAMPLE.read_bytes(), "opaque_obj_0", evil), "data/constants/opaque_obj_0"
    assert kind == "torchbind object"  # torch._C._pickle_load_obj: a torch.save-like archive
    return _with_constant(SAMPLE.read_bytes(), "custom_obj_0", _saved(torch.ones(1))), "data/constants/custom_obj_0"


def _legacy_with_bytes(data: bytes, data_pkl: bytes, member: str) -> bytes:
    """``data`` with the ``data.pkl`` of its nested ``torch.save`` archive ``*member`` replaced."""
    return _legacy_with(io.BytesIO(data), data_pkl, member)  # type: ignore[arg-type] - zipfile reads a stream too


@pytest.fixture(scope="module")
def subclass_sample() -> bytes:
    """What torch.export.save writes for a program whose weights are a tensor subclass:
    ``use_pickle`` payloads that torch's weights_only unpickler does not read."""
    two_tensor = pytest.importorskip("torch.testing._internal.two_tensor")

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(two_tensor.TwoTensor(torch.ones(3), torch.full((3,), 2.0)))

        def forward(self, x: Any) -> Any:
            return x + self.w

    buffer = io.BytesIO()
    torch.export.save(torch.export.export(M(), (torch.ones(3),)), buffer)
    return buffer.getvalue()


def test_torch_writes_use_pickle_for_a_tensor_subclass(subclass_sample: bytes) -> None:
    with zipfile.ZipFile(io.BytesIO(subclass_sample)) as z:
        config = json.loads(z.read("archive/data/weights/model_weights_config.json"))
    assert config["config"]["w"]["use_pickle"] is True


def test_a_tensor_subclass_is_refused_unless_trusted(
    subclass_sample: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = tmp_path / "sub.pt2", tmp_path / "new.pt2"
    src.write_bytes(subclass_sample)
    assert main(["upgrade", str(src), str(dst)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "sub.pt2:archive/data/weights/weight_0: weight 'w' stored as a pickle" in err
    assert "--trust-pickles" in err
    assert not dst.exists()
    with pytest.raises(UnsafePickleError, match="weight_0"):
        tracepack.torch.load(src)
    # Trusted: the member is copied as it is, and torch loads the output as it loads the input.
    assert main(["upgrade", "--trust-pickles", str(src), str(dst)]) == 0
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst) as b:
        assert a.read("archive/data/weights/weight_0") == b.read("archive/data/weights/weight_0")
    got, want = torch.export.load(dst).state_dict["w"], torch.export.load(src).state_dict["w"]
    assert type(got) is type(want)
    assert torch.equal(got.a, want.a)
    assert torch.equal(got.b, want.b)
    through = tmp_path / "through.pt2"
    assert main(["upgrade", "--through-torch", str(src), str(through)]) == 2
    assert "weight_0" in capsys.readouterr().err
    assert main(["upgrade", "--through-torch", "--trust-pickles", str(src), str(through)]) == 0
    assert type(torch.export.load(through).state_dict["w"]) is type(want)


def test_a_plain_pickled_tensor_passes_byte_for_byte(tmp_path: Path) -> None:
    src, dst = tmp_path / "old.pt2", tmp_path / "new.pt2"
    src.write_bytes(pickled_weight_sample())
    upgrade_pt2_file(src, dst)
    member = f"{TOP}/data/weights/weight_0"
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst) as b:
        assert a.read(member) == b.read(member)
        assert json.loads(b.read(f"{TOP}/data/weights/model_weights_config.json"))["config"]
    want = torch.export.load(SAMPLE).state_dict
    for got in (torch.export.load(dst).state_dict, tracepack.torch.load(src).state_dict):
        assert got.keys() == want.keys()
        assert all(torch.equal(got[k], want[k]) and type(got[k]) is type(want[k]) for k in want)


KINDS = ["weight", "tensor constant", "opaque object", "torchbind object"]


@pytest.mark.parametrize(
    "kind", [k if k != "opaque object" else pytest.param(k, marks=OPAQUE_CONSTANTS.mark) for k in KINDS[:3]]
)
def test_torch_export_load_runs_them(kind: str, tmp_path: Path) -> None:
    """The reference: torch's own loader runs what these members hold. (A torchbind record goes to
    torch's C++ unpickler, which builds registered torchbind classes only; refused all the same.)"""
    marker = tmp_path / "ran"
    data, _ = _hostile(kind, marker)
    with contextlib.suppress(Exception):  # the payload runs first; what torch does next does not matter
        torch.export.load(io.BytesIO(data))
    assert marker.exists()


@pytest.mark.parametrize("kind", KINDS)
def test_upgrade_runs_nothing_and_names_the_member(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker, src, dst = tmp_path / "ran", tmp_path / "old.pt2", tmp_path / "new.pt2"
    data, member = _hostile(kind, marker)
    src.write_bytes(data)
    for through in ([], ["--through-torch"]):
        assert main(["upgrade", *through, str(src), str(dst)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert f"old.pt2:{TOP}/{member}" in err
        assert not dst.exists()
    assert main(["upgrade", str(src), "-"]) == 2
    assert member in capsys.readouterr().err
    with pytest.raises(UnsafePickleError, match=member):
        upgrade_pt2(data, source="old.pt2")
    with pytest.raises(UnsafePickleError, match=member):
        tracepack.torch.load(src)
    assert not marker.exists()


@pytest.mark.parametrize("kind", KINDS)
def test_pack_unpack_convert_copy_them_unread(kind: str, tmp_path: Path) -> None:
    """pack/unpack/convert never unpickle a weight or constant member: they copy it raw (the
    output is as hostile as the input, and says nothing more about it)."""
    marker, src = tmp_path / "ran", tmp_path / "old.pt2"
    data, member = _hostile(kind, marker)
    src.write_bytes(data)
    assert main(["pack", str(src), str(tmp_path / "packed.pt2")]) == 0
    assert main(["unpack", str(tmp_path / "packed.pt2"), str(tmp_path / "unpacked.pt2")]) == 0
    assert main(["convert", str(src), str(tmp_path / "doc.tpk")]) == 0
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(tmp_path / "unpacked.pt2") as b:
        assert a.read(f"{TOP}/{member}") == b.read(f"{TOP}/{member}")
    with pytest.raises(UnsafePickleError, match=member):
        tracepack.torch.load(tmp_path / "packed.pt2")
    assert not marker.exists()


def test_records_torch_would_read_elsewhere_are_refused() -> None:
    """A pickled record whose name is not a plain member name, or is missing, or is repeated."""
    data = pickled_weight_sample()
    config = _config(data, "weights")
    first = next(iter(config["config"].values()))
    for path_name, message in (("../constants/x", "not a member name"), ("weight_99", "no such member")):
        first["path_name"] = path_name
        bad = _rewrite(data, {f"{TOP}/data/weights/model_weights_config.json": json.dumps(config).encode()})
        with pytest.raises(InputError, match=message):
            upgrade_pt2(bad, source="old.pt2")


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(payload_configs(_config(SAMPLE.read_bytes(), "weights")))
def test_any_payload_config_is_upgraded_checked_or_refused(config: dict[str, Any]) -> None:
    """Whatever a weights config says of the sample's pickled weight, the upgrade either refuses
    it with an InputError or writes a file in which every member torch.export.load would
    unpickle was read by the weights_only unpickler as a tensor."""
    data = _rewrite(
        pickled_weight_sample_cached(),
        {f"{TOP}/data/weights/model_weights_config.json": json.dumps(config).encode()},
    )
    try:
        out = upgrade_pt2(data, source="old.pt2")
    except InputError:
        return
    with zipfile.ZipFile(io.BytesIO(out)) as z:
        written = json.loads(z.read(f"{TOP}/data/weights/model_weights_config.json"))
        for entry in written["config"].values():
            if entry.get("use_pickle"):
                payload = z.read(f"{TOP}/data/weights/{entry['path_name']}")
                assert isinstance(torch.load(io.BytesIO(payload), weights_only=True), torch.Tensor)


_CACHE: dict[str, bytes] = {}


def pickled_weight_sample_cached() -> bytes:
    if "s" not in _CACHE:
        _CACHE["s"] = pickled_weight_sample()
    return _CACHE["s"]


def test_a_repeated_member_is_refused(tmp_path: Path) -> None:
    """Two members of one name (a checked plain tensor and a hostile one): torch might read either."""
    marker = tmp_path / "ran"
    hostile, member = _hostile("weight", marker)
    with zipfile.ZipFile(io.BytesIO(hostile)) as z:
        evil = z.read(f"{TOP}/{member}")
    out = io.BytesIO(pickled_weight_sample())
    with warnings.catch_warnings(), zipfile.ZipFile(out, "a") as z:
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name: the point here
        z.writestr(f"{TOP}/{member}", evil)
    with pytest.raises(InputError, match=f"{TOP}/{member}: the member name is repeated"):
        upgrade_pt2(out.getvalue(), source="old.pt2")
    assert not marker.exists()


def test_legacy_weights_next_to_a_config_are_refused() -> None:
    """torch 2.8's nested weights archive is rewritten into the config torch 2.9+ reads: an archive
    holding both (the config naming pickles) would come out with two configs."""
    data = path("2.8", "mlp.pt2").read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        top = z.namelist()[0].split("/")[0]
    config = {"config": {"w": {"path_name": "weight_0", "is_param": True, "use_pickle": True, "tensor_meta": None}}}
    bad = _rewrite(data, {f"{top}/data/weights/model_weights_config.json": json.dumps(config).encode()})
    with pytest.raises(InputError, match=r"model_weights_config\.json: both weights layouts"):
        upgrade_pt2(bad, source="old.pt2")
