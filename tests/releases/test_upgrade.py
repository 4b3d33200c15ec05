"""Old programs in today's torch: ``tracepack.torch.load`` and ``tracepack upgrade`` on every release's
samples reproduce the outputs that release computed on the recorded inputs."""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.releases.samples import files, path, readback
from tests.torch.conftest import TORCH_MARKS
from tracepack.cli import main
from tracepack.errors import VersionError

torch = pytest.importorskip("torch")
import tracepack.torch  # noqa: E402 - needs torch
from tracepack.torch.upgrade import load_upgraded  # noqa: E402

pytestmark = TORCH_MARKS
INSTALLED = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
#: Every release's export samples up to the installed torch's release, and those of newer releases.
EXPORTS = [(v, n) for v, n in files("export") if tuple(int(x) for x in v.split(".")) <= INSTALLED]
NEWER = [(v, n) for v, n in files("export") if tuple(int(x) for x in v.split(".")) > INSTALLED]
#: The newest release with samples that the installed torch reads: torch.export.load reads its own samples.
NEWEST = max({v for v, _ in EXPORTS}, key=lambda v: [int(x) for x in v.split(".")])


def _splits_nested_module_paths() -> bool:
    from torch._export.serde import serialize as serde

    try:
        serde.GraphModuleDeserializer().deserialize_metadata({"nn_module_stack": "k,f(f(a, '0').b, '0'),T"})
    except Exception:
        return False
    return True


def refused_here(version: str, name: str) -> str | None:
    """Why tracepack.torch.load refuses a release's sample on the installed torch, or None: torch
    2.1's ``torch.cond`` returns its tensor itself, which torch 2.6's schema (8.2, no
    ``is_hop_single_tensor_return``) cannot say; torch 2.1's strict export wrote module paths nesting
    parentheses, which torch 2.6's deserializer cannot split (torch 2.8 can)."""
    from torch._export.serde import schema

    fields = {f.name for f in dataclasses.fields(schema.Node)}
    if (version, name) == ("2.1", "cond.pt2") and "is_hop_single_tensor_return" not in fields:
        return "is_hop_single_tensor_return.*a newer torch is needed"
    if (version, name) == ("2.1", "transformer.pt2") and not _splits_nested_module_paths():
        return r"nodes\[\d+\]\.metadata\.nn_module_stack: .*cannot split this nn_module_stack"
    return None


def tensors(values: list[dict[str, Any]]) -> list[Any]:
    return [torch.tensor(t["values"], dtype=getattr(torch, t["dtype"])).reshape(t["shape"]) for t in values]


def outputs(program: Any, inputs: list[dict[str, Any]]) -> list[Any]:
    """The program's outputs on one recorded input, as a list."""
    got = program.module()(*tensors(inputs))
    return list(got) if isinstance(got, (list, tuple)) else [got]


def outputs_match(program: Any, entry: dict[str, Any]) -> tuple[bool, bool]:
    """(exactly equal, equal within float32 rounding) on every recorded input."""
    exact = close = True
    for inputs, recorded in zip(entry["inputs"], entry["outputs"], strict=True):
        got = outputs(program, inputs)
        want = recorded if isinstance(recorded, list) else [recorded]
        for g, w in zip(got, tensors(want), strict=True):
            assert g.shape == w.shape
            assert g.dtype == w.dtype
            exact = exact and torch.equal(g, w)
            close = close and torch.allclose(g, w, rtol=1e-5, atol=1e-6)
    return exact, close


@pytest.mark.parametrize(("version", "name"), EXPORTS)
def test_old_program_runs_in_todays_torch(version: str, name: str) -> None:
    """``tracepack.torch.load`` gives a program the installed torch runs, computing the writing
    release's outputs."""
    why = refused_here(version, name)
    if why is not None:
        with pytest.raises(VersionError, match=why) as info:
            tracepack.torch.load(path(version, name))
        assert "\n" not in str(info.value)
        return
    program = tracepack.torch.load(path(version, name))
    _exact, close = outputs_match(program, readback(version)["files"][name])
    assert close, f"{version}/{name}: outputs differ from torch {version}'s"


def test_a_newer_releases_programs_run_or_are_refused_in_one_line() -> None:
    """A file of a release newer than the installed torch: tracepack.torch.load gives the program,
    computing the writing release's outputs, or a one-line VersionError. torch 2.10 and newer read
    every newer release's files (same schema major; newer fields dropped when empty); torch 2.6 and
    2.7 none of the ``<name>/models/`` layout (2.8+), torch 2.8 none with payload configs (2.10+)."""
    loaded, refusals = [], []
    for version, name in NEWER:
        try:
            program = tracepack.torch.load(path(version, name))
        except VersionError as exc:
            refusals.append(str(exc))
            continue
        assert outputs_match(program, readback(version)["files"][name])[1], f"{version}/{name}"
        loaded.append((version, name))
    assert all("\n" not in r and "newer" in r for r in refusals), refusals
    if INSTALLED >= (2, 10):
        assert loaded == NEWER
    if INSTALLED < (2, 8):
        assert loaded == []


@cache
def _native(version: str, name: str) -> Any | None:
    """The sample as the installed torch loads it itself (``torch.export.load``), or None if it cannot."""
    try:
        return torch.export.load(path(version, name))
    except Exception:  # an older archive layout or schema than this torch reads
        return None


def reproduced_here() -> set[str]:
    """The models whose recorded outputs the installed torch reproduces bit for bit from the newest
    release's sample it loads itself, without tracepack. Float kernels are chosen per CPU (AVX2,
    AVX-512...), so on another machine than the recording one a model may round differently in every
    release, torch's own load included: bit identity with the recordings is only asked of the others."""
    own = [(v, n) for v, n in EXPORTS if v == NEWEST]
    return {n for v, n in own if (p := _native(v, n)) is not None and outputs_match(p, readback(v)["files"][n])[0]}


def test_most_outputs_are_bit_identical_where_this_machine_reproduces_the_recordings() -> None:
    models = reproduced_here()
    runs = [(v, n) for v, n in EXPORTS if not refused_here(v, n) and n in models]
    assert runs, "torch reproduces none of its own recorded outputs on this machine"
    exact = sum(
        outputs_match(load_upgraded(path(v, n).read_bytes(), source=n), readback(v)["files"][n])[0] for v, n in runs
    )
    assert exact >= 0.9 * len(runs)


def test_upgraded_programs_compute_what_torch_computes_bit_for_bit() -> None:
    """Every sample the installed torch also loads itself: tracepack's upgraded program gives torch's
    own outputs on the recorded inputs, bit for bit, on this machine (the reference is torch's answer,
    not a recording made elsewhere)."""
    compared = set()
    for version, name in EXPORTS:
        native = None if refused_here(version, name) else _native(version, name)
        if native is None:
            continue
        compared.add((version, name))
        upgraded = load_upgraded(path(version, name).read_bytes(), source=name)
        for inputs in readback(version)["files"][name]["inputs"]:
            want, got = outputs(native, inputs), outputs(upgraded, inputs)
            assert len(got) == len(want), (version, name)
            assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True)), (version, name)
    own = {(v, n) for v, n in EXPORTS if v == NEWEST and not refused_here(v, n)}
    assert own
    assert own <= compared, f"torch {torch.__version__} did not load its own samples: {own - compared}"


@pytest.mark.parametrize("version", sorted({v for v, _ in EXPORTS}))
def test_cli_upgrade_writes_what_torch_export_load_reads(
    version: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "mlp.pt2"
    dst = tmp_path / "new.pt2"
    assert main(["upgrade", str(path(version, name)), str(dst)]) == 0
    assert "wrote" in capsys.readouterr().out
    program = torch.export.load(dst)
    assert outputs_match(program, readback(version)["files"][name])[1]


def with_target(src: Path, old: str, new: str) -> bytes:
    """The archive with one operator renamed in its program (any layout)."""
    out = io.BytesIO()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith(".json") and b'"graph_module"' in data:
                data = data.replace(json.dumps(old).encode(), json.dumps(new).encode(), 1)
            zout.writestr(info, data)
    return out.getvalue()


@pytest.mark.parametrize("version", ["2.1", "2.3"])
def test_a_missing_operator_is_named_in_one_line(version: str) -> None:
    data = with_target(path(version, "mlp.pt2"), "torch.ops.aten.addmm.default", "torch.ops.aten.no_such_op.default")
    with pytest.raises(VersionError) as info:
        load_upgraded(data, source="old.pt2")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("old.pt2:")
    assert "operator torch.ops.aten.no_such_op.default (node " in message
    assert f"does not exist in torch {torch.__version__}" in message


def test_cli_refuses_a_missing_operator_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "old.pt2"
    src.write_bytes(with_target(path("2.1", "mlp.pt2"), "torch.ops.aten.addmm.default", "torch.ops.aten.gone.default"))
    assert main(["upgrade", str(src), str(tmp_path / "new.pt2")]) == 2
    err = capsys.readouterr().err
    assert "operator torch.ops.aten.gone.default" in err
    assert "Traceback" not in err
    assert not (tmp_path / "new.pt2").exists()


def test_weights_that_need_a_full_unpickler_are_refused(tmp_path: Path) -> None:
    """A flat archive's state dict is read with weights_only=True: a pickle that runs code is refused."""
    import pickle

    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self) -> tuple[Any, ...]:
            return (open, (str(marker), "w"))

    out = io.BytesIO()
    src = path("2.3", "mlp.pt2")
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == "serialized_state_dict.pt":
                data = pickle.dumps(Evil())
            zout.writestr(info, data)
    from tracepack.errors import UnsafePickleError

    with pytest.raises(
        UnsafePickleError,
        match=r"old\.pt2:serialized_state_dict\.pt: reading the weights needs more than torch's weights_only unpickler",
    ):
        load_upgraded(out.getvalue(), source="old.pt2")
    assert not marker.exists()


def test_a_damaged_program_is_one_line() -> None:
    from tracepack.errors import LegacyFormatError
    from tracepack.torch.export.upgrade import upgrade_program

    with pytest.raises(LegacyFormatError, match=r"^p\.json: cannot upgrade schema 1: unexpected layout") as info:
        upgrade_program({"schema_version": 1, "graph_module": 5}, source="p.json")
    assert "\n" not in str(info.value)
