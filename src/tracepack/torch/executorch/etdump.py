"""ExecuTorch ETDump files (flatcc FlatBuffers, size-prefixed, file identifier ``ED00``): profile events.

Read through flatc's Python code generated from ExecuTorch's published ``etdump_schema_flatcc.fbs``
(``tracepack_generated.executorch.etdump``). An ETDump holds one ``RunData`` block per run; its
profile events name what ran (``native_call_add.out``, ``OPERATOR_CALL``, ``Method::execute``...),
the chain and instruction it ran at (``-1`` for framework events), delegate debug ids and start/end
times (in the runtime's clock units: ticks of ``et_pal_current_ticks``, usually nanoseconds). Events
carry no debug handle: the instruction id is the link to an ETRecord's ``debug_handle_map``.
"""

from __future__ import annotations

from typing import NamedTuple

from tracepack.errors import DecodeError, LegacyFormatError
from tracepack.torch.executorch._flatbuffers import as_text, generated, guarded

__all__ = ["ETDUMP_IDENTIFIER", "ETDump", "ProfileEvent", "RunData", "is_etdump", "read_etdump"]

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


class RunData(NamedTuple):
    name: str
    bundled_input_index: int
    events: list[ProfileEvent]
    debug_events: int
    allocation_events: int


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

    def read() -> ETDump:
        root = fb.ETDump.GetRootAs(buf, 4)
        runs = []
        for r in range(count(root.RunDataLength(), "$.run_data")):
            run = root.RunData(r)
            events = []
            debug = alloc = 0
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
                    debug += 1
                elif ev.AllocationEvent() is not None:
                    alloc += 1
            runs.append(RunData(as_text(run.Name()), run.BundledInputIndex(), events, debug, alloc))
        return ETDump(root.Version(), runs)

    return guarded(read, source=source, where="$", expected=_EXPECTED)
