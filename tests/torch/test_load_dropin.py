"""tracepack.torch.load as a drop-in for torch.export.load: the checks torch makes before it reads a
program (the zip format version, ``archive_format``, ``archive_version``, the example inputs member),
refused where torch refuses with an error that is also torch's exception type, and programs whose
example inputs are fake tensors (torch unpickles them inside its deserializer). Every case is run
through torch.export.load too: the reference is torch's behaviour on the same bytes."""

from __future__ import annotations

import copy
import ctypes
import importlib
import io
import json
import logging
import os
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.torch.compare import describe
from tests.torch.conftest import CORPUS, PACKAGE_LAYOUT, READS_PACKAGE, TORCH_MARKS
from tracepack.errors import InputError, UnsafePickleError

torch = pytest.importorskip("torch")
import tracepack.torch as tt  # noqa: E402 - needs torch
from tracepack.torch import loader  # noqa: E402
from tracepack.torch.pt2 import pack_pt2  # noqa: E402

pytestmark = TORCH_MARKS


@pytest.fixture(autouse=True)
def _quiet_torch() -> Iterator[None]:
    """torch.export.load logs (and mis-formats) the fallbacks it takes on these files."""
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def variant(change: Callable[[str, bytes], bytes | None], src: Path = CORPUS / "cond.pt2") -> bytes:
    """``src`` with each member (by its name under the top folder) replaced by ``change``'s bytes, or
    left out where it gives None."""
    out = io.BytesIO()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = change(info.filename.split("/", 1)[1], zin.read(info))
            if data is not None:
                zout.writestr(info, data)
    return out.getvalue()


def _member(rel: str, new: bytes | None) -> Callable[[str, bytes], bytes | None]:
    return lambda name, data: new if name == rel else data


def outcome(load: Callable[[Any], Any], data: bytes) -> BaseException | None:
    try:
        load(io.BytesIO(data))
    except Exception as exc:
        return exc
    return None


def same_outcome(data: bytes) -> BaseException | None:
    """Load ``data`` both ways: either both load (to the same program) or both refuse, tracepack with an
    InputError that is also an instance of torch's exception class. Returns tracepack's error."""
    theirs = outcome(torch.export.load, data)
    ours = outcome(tt.load, data)
    if theirs is None:
        assert ours is None, ours
        assert describe(tt.load(io.BytesIO(data))) == describe(torch.export.load(io.BytesIO(data)))
        return None
    assert ours is not None, f"torch refuses ({theirs!r}), tracepack loads"
    assert isinstance(ours, InputError), ours
    assert isinstance(ours, type(theirs)), (ours, theirs)
    return ours


def _schema_major(major: int) -> Callable[[str, bytes], bytes | None]:
    def change(name: str, data: bytes) -> bytes | None:
        if name != "models/model.json":
            return data
        program = json.loads(data)
        program["schema_version"]["major"] = major
        return json.dumps(program).encode()

    return change


CASES: dict[str, Callable[[str, bytes], bytes | None]] = {
    "archive_version -1": _member("archive_version", b"-1"),
    "archive_version 1": _member("archive_version", b"1"),
    "archive_version ' 0'": _member("archive_version", b" 0"),
    "no archive_version": _member("archive_version", None),
    "no archive_format": _member("archive_format", None),
    "archive_format zip": _member("archive_format", b"zip"),
    "zip version 0": _member(".data/version", b"0"),
    "zip version 3": _member(".data/version", b"3\n"),
    "zip version 10": _member(".data/version", b"10"),
    "zip version 11": _member(".data/version", b"11"),
    "zip version ' +3x'": _member(".data/version", b" +3x"),
    "zip version -0": _member(".data/version", b"-0"),
    "zip version empty": _member(".data/version", b""),
    "no zip version": _member(".data/version", None),
    "no example inputs": lambda name, data: None if name.startswith("data/sample_inputs/") else data,
    "empty example inputs": lambda name, data: b"" if name.startswith("data/sample_inputs/") else data,
    "no byteorder": _member("byteorder", None),
    "no serialization_id": _member(".data/serialization_id", None),
    # torch: AssertionError("... not found in PT2 archive")
    "no weights config": _member("data/weights/model_weights_config.json", None),
    "no constants config": _member("data/constants/model_constants_config.json", None),
    # torch: its deserializer's SerializeError (a RuntimeError), which load turns into its own RuntimeError
    "schema major 99": _schema_major(99),
    "schema major 9": _schema_major(9),
}


@READS_PACKAGE.mark  # torch.export.load of 2.13's <name>/ archives is the reference
@pytest.mark.parametrize("case", list(CASES))
def test_archive_checks_are_torchs(case: str) -> None:
    same_outcome(variant(CASES[case]))


@PACKAGE_LAYOUT.mark  # the archive checks and members of torch's <name>/ layout
def test_a_saved_archive_version_of_minus_one_is_torchs_value_error() -> None:
    ours = same_outcome(variant(_member("archive_version", b"-1")))
    assert isinstance(ours, ValueError)
    assert "Saved archive version -1 does not match our current archive version 0" in str(ours)
    assert "cond/archive_version" in str(ours)  # and it names the member


@READS_PACKAGE.mark  # torch.export.load of 2.13's <name>/ archives is the reference
def test_the_zip_version_can_be_the_old_version_member() -> None:
    data = variant(_member(".data/version", None))
    with zipfile.ZipFile(io.BytesIO(data), "a") as z:
        z.writestr("cond/version", b"3")
    same_outcome(data)


_LIBC = ctypes.CDLL(None)
_LIBC.strtoull.restype = ctypes.c_ulonglong
_LIBC.strtoull.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]


def _c_stoull(text: str) -> int | None:
    """std::stoull through the C library's strtoull (what it calls), None where std::stoull throws
    invalid_argument (no digits); an out-of-range value as 2**64 (it throws out_of_range)."""
    raw = text.encode()
    end = ctypes.c_char_p()
    ctypes.set_errno(0)
    value = _LIBC.strtoull(raw, ctypes.byref(end), 10)
    consumed = ctypes.cast(end, ctypes.c_void_p).value - ctypes.cast(ctypes.c_char_p(raw), ctypes.c_void_p).value  # type: ignore[operator]
    if consumed == 0:
        return None
    return 2**64 if ctypes.get_errno() else int(value)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=" \t\n\v\f\r+-0123456789xab", max_size=24))
def test_zip_version_parse_is_the_c_librarys(text: str) -> None:
    ours = loader._stoull(text)
    theirs = _c_stoull(text)
    if theirs == 2**64:
        assert ours is not None
        assert ours >= 2**64
    else:
        assert ours == theirs


@READS_PACKAGE.mark  # torch.export.load of 2.13's <name>/ archives is the reference
@settings(max_examples=12, deadline=None)
@given(st.sampled_from(["1", "2", "9", "10", "11", "0", " 7", "7\n", "+4", "-1", "-0", "4z", "z4", ""]))
def test_zip_versions_torch_reads_are_the_ones_tracepack_reads(text: str) -> None:
    same_outcome(variant(_member(".data/version", text.encode())))


# -- example inputs that are fake tensors -----------------------------------------------------------------


class _Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x: Any) -> Any:
        return self.lin(x).relu()


def _fake_input_program(dynamic: bool) -> bytes:
    """A non-strict export whose example inputs are fake tensors (exported inside a FakeTensorMode),
    saved by torch."""
    fake = pytest.importorskip("torch._subclasses.fake_tensor")
    with fake.FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.randn(4, 8)
        shapes = ({0: torch.export.Dim("batch")},) if dynamic else None
        ep = torch.export.export(_Linear(), (x,), dynamic_shapes=shapes, strict=False)
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    return buf.getvalue()


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_fake_tensor_example_inputs_load_as_torch_loads_them(dynamic: bool) -> None:
    data = _fake_input_program(dynamic)
    theirs = torch.export.load(io.BytesIO(data))
    ours = tt.load(io.BytesIO(data))  # no trust_pickles: torch's own fake tensor reconstruction only
    assert describe(ours) == describe(theirs)
    (x,), _ = ours.example_inputs
    assert type(x).__name__ == "FakeTensor"
    placeholder = [n for n in ours.graph.nodes if n.op == "placeholder"][-1]
    assert x.fake_mode is placeholder.meta["val"].fake_mode  # made in the program's own fake mode
    assert str(x.shape) == str(theirs.example_inputs[0][0].shape)
    packed = io.BytesIO()
    tt.save(theirs, packed)
    assert describe(tt.load(io.BytesIO(packed.getvalue()))) == describe(theirs)


class _Touch:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


@PACKAGE_LAYOUT.mark  # the archive checks and members of torch's <name>/ layout
def test_example_inputs_needing_a_full_unpickler_are_still_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    saved = io.BytesIO()
    torch.save(((_Touch(marker),), {}), saved)  # as torch.export.save writes example inputs
    payload = saved.getvalue()
    data = variant(lambda name, d: payload if name.startswith("data/sample_inputs/") else d)
    with pytest.raises(UnsafePickleError, match=r"cond/data/sample_inputs/model\.pt: reading example inputs"):
        tt.load(io.BytesIO(data))
    assert not marker.exists()
    torch.export.load(io.BytesIO(data))  # torch runs it
    assert marker.exists()
    marker.unlink()
    tt.load(io.BytesIO(data), trust_pickles=True)  # trusted: loaded as torch loads it
    assert marker.exists()


# -- torch's own export DB: every supported example, strict and non-strict ------------------------------------


def _exportdb() -> dict[str, Any]:
    """torch's export DB examples by name (every supported torch ships them)."""
    examples: dict[str, Any] = importlib.import_module("torch._export.db.examples").all_examples()
    return examples


def _exportdb_cases() -> list[str]:
    return sorted(n for n, c in _exportdb().items() if c.support_level.name == "SUPPORTED")


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "nonstrict"])
@pytest.mark.parametrize("name", _exportdb_cases())
def test_exportdb_programs_load_as_torch_loads_them(name: str, strict: bool) -> None:
    """The programs of torch's export DB (the examples its docs and test_serialize.py's
    ``test_exportdb_supported_case_*`` use, shipped with torch): saved by torch, loaded by torch and by
    tracepack (the .pt2 as torch wrote it and packed, with and without ``trust_pickles``), the same
    program, and its module gives torch's loaded module's outputs on fresh copies of the example inputs."""
    case = _exportdb()[name]
    # export gets a copy of the inputs and the runs fresh copies of another: strict export on torch 2.8
    # leaves fake tensors in the inputs it was given (tensor_setattr), which no one can deepcopy after it,
    # and the examples are shared by every test of the module
    pristine = copy.deepcopy((case.example_args, case.example_kwargs or {}))
    args, kwargs = copy.deepcopy(pristine)
    try:
        ep = torch.export.export(case.model, args, kwargs, dynamic_shapes=case.dynamic_shapes, strict=strict)
    except Exception as exc:  # not ours: this torch cannot export it in this mode
        pytest.skip(f"torch.export.export fails ({type(exc).__name__})")
    buf = io.BytesIO()
    try:
        torch.export.save(ep, buf)
    except Exception as exc:  # not ours either: torch 2.6 cannot serialize a map's outputs (dynamic_shape_map)
        pytest.skip(f"torch.export.save fails ({type(exc).__name__})")
    raw = buf.getvalue()
    theirs = torch.export.load(io.BytesIO(raw))
    expected = theirs.module()(*copy.deepcopy(pristine[0]), **copy.deepcopy(pristine[1]))
    for data in (raw, pack_pt2(raw, source=name)):
        for trust in (False, True):
            ours = tt.load(io.BytesIO(data), trust_pickles=trust)
            assert describe(ours) == describe(theirs)
            got = ours.module()(*copy.deepcopy(pristine[0]), **copy.deepcopy(pristine[1]))
            torch.testing.assert_close(got, expected)
