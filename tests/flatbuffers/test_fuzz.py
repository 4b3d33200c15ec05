"""Damaged FlatBuffers payloads only ever raise TracepackError subclasses, and never hang.

Each example takes a valid payload (the bundled torch.export sample, a generated document,
one with 1.1's provenance and end lines, or the 1.0 golden file, read with 1.0's code),
damages it the ways hostile or corrupted files do -- bit flips, truncation,
offsets pointing anywhere (outside the buffer, backwards, at themselves), vtable sizes
and entries made garbage, random bytes -- re-wraps it in a container with a correct
checksum (so the damage reaches the FlatBuffers layer), and reads it both ways: a full
``tracepack.loads`` and a lazy ``tracepack.open`` touching every node's every answer
(provenance, arguments and the migrated ``raw`` included).
A watchdog fails any example that runs longer than a few seconds.
"""

from __future__ import annotations

import signal
import struct
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracepack
from tests.strategies import documents
from tracepack import container
from tracepack.codecs import flatbuffers as fbc
from tracepack.errors import TracepackError
from tracepack.versions import CURRENT

from .provenance_strategies import ProvenanceDocument, provenance_documents

SAMPLE = Path(tracepack.__file__).parent / "data" / "sample" / "model.json"
_SPECIAL_U32 = [0, 1, 3, 4, 8, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFC]
_SPECIAL_I32 = [0, 4, -4, 8, -8, 0x7FFFFFFF, -0x80000000]
_SPECIAL_U16 = [0, 1, 2, 3, 4, 5, 0xFFFE, 0xFFFF]


@cache
def _sample_payload() -> bytes:
    from tracepack.torch.export.model_json import import_model_json

    return fbc.encode(import_model_json(SAMPLE.read_bytes()).raw, CURRENT)


@contextmanager
def _watchdog(seconds: int) -> Iterator[None]:
    """Fail instead of hanging (Unix; elsewhere the bounded loops are trusted as they are)."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def fire(signum: int, frame: object) -> None:
        raise TimeoutError(f"no answer within {seconds} s: a loop that does not end?")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@st.composite
def damaged(draw: st.DrawFn, payload: bytes) -> bytes:
    b = bytearray(payload)
    n = len(b)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "u32", "i32", "u16", "bytes", "self", "vtable"]))
        if kind == "truncate":
            del b[draw(st.integers(0, max(len(b) - 1, 0))) :]
            continue
        if len(b) < 8:
            break
        at = draw(st.integers(0, len(b) - 4)) & ~3
        if kind == "flip":
            i = draw(st.integers(0, len(b) - 1))
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "u32":
            struct.pack_into("<I", b, at, draw(st.sampled_from([*_SPECIAL_U32, n, n - at, n - at - 4])))
        elif kind == "i32":
            struct.pack_into("<i", b, at, draw(st.sampled_from([*_SPECIAL_I32, at, -at, at - n])))
        elif kind == "u16":
            struct.pack_into("<H", b, at, draw(st.sampled_from(_SPECIAL_U16)))
        elif kind == "self":  # an offset that points at itself (a one-step cycle)
            struct.pack_into("<I", b, at, 0)
        elif kind == "vtable":  # follow the root table to its vtable and make it garbage
            root = struct.unpack_from("<I", b, 0)[0]
            if root + 4 <= len(b):
                vt = root - struct.unpack_from("<i", b, root)[0]
                if 0 <= vt <= len(b) - 4:
                    struct.pack_into(
                        "<HH", b, vt, *draw(st.tuples(st.sampled_from(_SPECIAL_U16), st.sampled_from(_SPECIAL_U16)))
                    )
        else:
            i = draw(st.integers(0, len(b) - 1))
            b[i : i + 16] = draw(st.binary(min_size=1, max_size=16))
    return bytes(b)


_ATTRS = (
    "name",
    "target",
    "stack_trace",
    "module_stack",
    "module_hierarchy",
    "meta",
    "from_node",
    "provenance",
    "frames",
    "inputs",
    "outputs",
    "raw",
)


def _read_everything(data: bytes, path: Path) -> None:
    with suppress(TracepackError):
        tracepack.loads(data)
    path.write_bytes(data)
    with suppress(TracepackError), tracepack.open(path) as lz:
        for node in lz.nodes():
            for attr in _ATTRS:
                with suppress(TracepackError):
                    getattr(node, attr)
            with suppress(TracepackError):
                lz.node(node.name)
        for h in range(-2, 5):
            with suppress(TracepackError):
                lz.debug_handle(h)


def _wrap(payload: bytes, version: tuple[int, int] = CURRENT) -> bytes:
    return container.pack(payload, schema_version=version, codec="flatbuffers-rows")


@cache
def _golden_1_0_payload() -> bytes:
    data = (Path(__file__).parent.parent / "golden" / "1.0" / "flatbuffers.tpk").read_bytes()
    return data[container.read_header(data).header_size :]


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_sample_payloads_raise_only_tracepack_errors(data: st.DataObject, tmp_path: Path) -> None:
    payload = data.draw(damaged(_sample_payload()))
    with _watchdog(20):
        _read_everything(_wrap(payload), tmp_path / "fuzz.tpk")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(doc=documents(max_nodes=10), data=st.data())
def test_damaged_generated_payloads_raise_only_tracepack_errors(
    doc: tracepack.Document, data: st.DataObject, tmp_path: Path
) -> None:
    payload = data.draw(damaged(fbc.encode(doc.raw, CURRENT)))
    with _watchdog(20):
        _read_everything(_wrap(payload), tmp_path / "fuzz.tpk")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(built=provenance_documents(max_nodes=8), data=st.data())
def test_damaged_provenance_payloads_raise_only_tracepack_errors(
    built: ProvenanceDocument, data: st.DataObject, tmp_path: Path
) -> None:
    payload = data.draw(damaged(fbc.encode(built.doc.raw, CURRENT)))
    with _watchdog(20):
        _read_everything(_wrap(payload), tmp_path / "fuzz.tpk")


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_1_0_payloads_raise_only_tracepack_errors(data: st.DataObject, tmp_path: Path) -> None:
    payload = data.draw(damaged(_golden_1_0_payload()))
    with _watchdog(20):
        _read_everything(_wrap(payload, (1, 0)), tmp_path / "fuzz.tpk")


@pytest.mark.parametrize("size", [0, 1, 4, 7, 8, 12, 16])
def test_tiny_payloads(size: int, tmp_path: Path) -> None:
    for payload in (bytes(size), b"\xff" * size, (b"\x08\x00\x00\x00TPK1" + bytes(64))[:size]):
        _read_everything(_wrap(payload), tmp_path / "tiny.tpk")
