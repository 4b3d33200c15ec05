"""ExecuTorch ETDump files (flatcc FlatBuffers, size-prefixed, file identifier ``ED00``): profile events.

Read through flatc's Python code generated from ExecuTorch's published ``etdump_schema_flatcc.fbs``
(``tracepack_generated.executorch.etdump``). An ETDump holds one ``RunData`` block per run; its
profile events name what ran (``native_call_add.out``, ``OPERATOR_CALL``, ``Method::execute``...),
the chain and instruction it ran at (``-1`` for framework events), delegate debug ids and start/end
times (in the runtime's clock units: ticks of ``et_pal_current_ticks``, usually nanoseconds). Events
carry no debug handle: the instruction id is the link to an ETRecord's ``debug_handle_map``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tracepack.errors import DecodeError, LegacyFormatError
from tracepack.torch.executorch._flatbuffers import as_text, generated, guarded

__all__ = [
    "ETDUMP_IDENTIFIER",
    "SCALAR_TYPES",
    "AllocationEvent",
    "DebugEvent",
    "ETDump",
    "ProfileEvent",
    "RunData",
    "TensorInfo",
    "is_etdump",
    "read_etdump",
]

ETDUMP_IDENTIFIER = b"ED00"
_EXPECTED = "an ExecuTorch ETDump as etdump_schema_flatcc.fbs describes it (size-prefixed)"


class ProfileEvent(NamedTuple):
    name: str
    chain: int
    instruction: int
    """The instruction id, -1 for events that are not an instruction (``Method::execute``...)."""
    delegate_id: int
    delegate_name: str
    start: int
    end: int


#: ExecuTorch's ScalarType ids (scalar_type.fbs) as torch names the dtypes.
SCALAR_TYPES = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
    11: "bool", 12: "qint8", 13: "quint8", 14: "qint32", 15: "bfloat16", 16: "quint4x2", 17: "quint2x4",
    22: "bits16", 23: "float8_e5m2", 24: "float8_e4m3fn", 25: "float8_e5m2fnuz", 26: "float8_e4m3fnuz",
    27: "uint16", 28: "uint32", 29: "uint64",
}  # fmt: skip
_VALUE_KINDS = {0: "null", 1: "int", 2: "bool", 3: "float", 4: "double", 5: "tensor", 6: "tensor_list", 7: "string"}


class TensorInfo(NamedTuple):
    """A logged tensor's metadata; its data is in the run's debug buffer, at ``offset``."""

    dtype: str
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int


class DebugEvent(NamedTuple):
    """An intermediate output the runtime logged (``debug_buffer_size`` / ``set_debug_buffer``)."""

    name: str
    chain: int
    instruction: int
    delegate_id: int
    delegate_name: str
    kind: str
    """``tensor``, ``tensor_list``, ``int``, ``bool``, ``float``, ``double``, ``string`` or ``null``."""
    tensors: tuple[TensorInfo, ...]
    scalar: int | float | bool | None
    output: bool | None
    """The schema's ``output`` flag (whether the value is an output of the method), when written."""


class AllocationEvent(NamedTuple):
    """One allocation from a profiled allocator: no time, no instruction (the schema has neither)."""

    allocator: str
    """The allocator's name (``RunData.allocators``), or ``#<id>`` when it has no entry there."""
    size: int


class RunData(NamedTuple):
    name: str
    bundled_input_index: int
    events: list[ProfileEvent]
    debug_events: int
    allocation_events: int
    debug: tuple[DebugEvent, ...] = ()
    allocations: tuple[AllocationEvent, ...] = ()
    allocators: tuple[str, ...] = ()


class ETDump(NamedTuple):
    version: int
    runs: list[RunData]


def is_etdump(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` is a size-prefixed buffer with ETDump's file identifier."""
    return len(data) >= 12 and bytes(data[8:12]) == ETDUMP_IDENTIFIER


def read_etdump(data: bytes | bytearray | memoryview, *, source: str = "<etdump>") -> ETDump:
    """Every run's profile events, in order."""
    buf = bytes(data)
    if not is_etdump(buf):
        raise LegacyFormatError(
            f"no ETDump identifier (bytes 8-12 are {buf[8:12]!r})", source=source, where="byte 8", expected=_EXPECTED
        )
    size = int.from_bytes(buf[:4], "little")
    if size + 4 > len(buf):
        raise DecodeError(
            f"size prefix says {size} bytes, the file has {len(buf) - 4}", source=source, where="byte 0",
            expected=_EXPECTED,
        )  # fmt: skip
    fb = generated("etdump")
    limit = len(buf)

    def count(n: int, where: str) -> int:
        if not 0 <= n <= limit:
            raise DecodeError(f"vector of {n} entries in a {limit}-byte file", source=source, where=where)
        return n

    def tensor(t: Any, where: str) -> TensorInfo:
        sizes = tuple(t.Sizes(i) for i in range(count(t.SizesLength(), where + ".sizes")))
        strides = tuple(t.Strides(i) for i in range(count(t.StridesLength(), where + ".strides")))
        st = t.ScalarType()
        return TensorInfo(SCALAR_TYPES.get(st, f"scalar type {st}"), sizes, strides, t.Offset())

    def debug_event(d: Any, where: str) -> DebugEvent:
        v = d.DebugEntry()
        kind, output = "null", None
        tensors: tuple[TensorInfo, ...] = ()
        scalar_value: int | float | bool | None = None
        if v is not None:
            kind = _VALUE_KINDS.get(v.Val(), f"value type {v.Val()}")
            if v.Tensor() is not None:
                tensors = (tensor(v.Tensor(), where + ".debug_entry.tensor"),)
            tl = v.TensorList()
            if tl is not None:
                n = count(tl.TensorsLength(), where + ".debug_entry.tensor_list")
                tensors = tuple(tensor(tl.Tensors(i), f"{where}.debug_entry.tensor_list[{i}]") for i in range(n))
            for table, get in ((v.IntValue(), "IntVal"), (v.FloatValue(), "FloatVal"), (v.DoubleValue(), "DoubleVal")):
                if table is not None:
                    scalar_value = getattr(table, get)()
            if v.BoolValue() is not None:
                scalar_value = bool(v.BoolValue().BoolVal())
            if v.Output() is not None:
                output = bool(v.Output().BoolVal())
        chain = d.ChainIndex()
        return DebugEvent(
            as_text(d.Name()),
            chain - (1 << 64) if chain >= 1 << 63 else chain,  # an unsigned field: the runtime writes -1
            d.InstructionId(),
            d.DelegateDebugIdInt(),
            as_text(d.DelegateDebugIdStr()),
            kind,
            tensors,
            scalar_value,
            output,
        )

    def read() -> ETDump:
        root = fb.ETDump.GetRootAs(buf, 4)
        runs = []
        for r in range(count(root.RunDataLength(), "$.run_data")):
            run = root.RunData(r)
            events = []
            debug: list[DebugEvent] = []
            allocs: list[tuple[int, int]] = []
            n_alloc = count(run.AllocatorsLength(), f"$.run_data[{r}].allocators")
            allocators = tuple(as_text(run.Allocators(i).Name()) for i in range(n_alloc))
            for e in range(count(run.EventsLength(), f"$.run_data[{r}].events")):
                ev = run.Events(e)
                p = ev.ProfileEvent()
                if p is not None:
                    events.append(
                        ProfileEvent(
                            as_text(p.Name()),
                            p.ChainIndex(),
                            p.InstructionId(),
                            p.DelegateDebugIdInt(),
                            as_text(p.DelegateDebugIdStr()),
                            p.StartTime(),
                            p.EndTime(),
                        )
                    )
                elif ev.DebugEvent() is not None:
                    debug.append(debug_event(ev.DebugEvent(), f"$.run_data[{r}].events[{e}].debug_event"))
                elif ev.AllocationEvent() is not None:
                    a = ev.AllocationEvent()
                    allocs.append((a.AllocatorId(), a.AllocationSize()))
            allocations = tuple(
                AllocationEvent(allocators[i] if 0 <= i < len(allocators) else f"#{i}", size) for i, size in allocs
            )
            runs.append(
                RunData(
                    as_text(run.Name()),
                    run.BundledInputIndex(),
                    events,
                    len(debug),
                    len(allocations),
                    tuple(debug),
                    allocations,
                    allocators,
                )
            )
        return ETDump(root.Version(), runs)

    return guarded(read, source=source, where="$", expected=_EXPECTED)
