"""Readers under attack: files changed under an open reader, non-regular inputs, lying sizes, slow regexes."""

from __future__ import annotations

import os
import re
import struct
import threading
import tracemalloc
import zlib
from pathlib import Path

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from benchmarks.bench_flatbuffers import stacked_document
from tracepack import container, traces
from tracepack.errors import ContainerError, InputError, UsageError
from tracepack.io import files, limits


def _fb(tmp_path: Path, nodes: int = 300) -> tuple[tracepack.Document, Path]:
    doc = stacked_document(nodes)
    path = tmp_path / "m.tpk"
    tracepack.dump(doc, path, codec="flatbuffers", compression="none")
    return doc, path


def _answers(lz: tracepack.LazyDocument) -> list[tuple[str, str | None, str | None]]:
    return [(n.name, n.stack_trace, n.module_stack) for n in lz.nodes()]


@pytest.mark.parametrize("change", ["truncate to 0", "truncate to half", "rewrite with zeros", "delete"])
def test_a_file_changed_under_an_open_reader_changes_nothing(tmp_path: Path, change: str) -> None:
    doc, path = _fb(tmp_path)
    size = path.stat().st_size
    with tracepack.open(path) as lz:
        first = lz.node(0).stack_trace
        if change == "truncate to 0":
            os.truncate(path, 0)
        elif change == "truncate to half":
            os.truncate(path, size // 2)
        elif change == "rewrite with zeros":
            with open(path, "r+b") as f:
                f.write(bytes(size))
        else:
            path.unlink()
        # A mapped file would die here with SIGBUS; the snapshot answers as before, verified.
        got = _answers(lz)
    assert got[0][1] == first
    assert got == [(n.name, n.stack_trace, n.module_stack) for n in doc.nodes()]


def test_one_changed_letter_is_refused_by_default(tmp_path: Path) -> None:
    doc, path = _fb(tmp_path)
    data = bytearray(path.read_bytes())
    trace = doc.node(0).stack_trace
    assert trace is not None
    needle = trace.split('"')[1].encode()  # a file name of the trace, stored once in the string table
    at = data.index(needle)
    data[at] ^= 0x20  # one letter's case
    path.write_bytes(bytes(data))
    with pytest.raises(ContainerError, match="checksum mismatch"):
        tracepack.open(path)
    with pytest.raises(ContainerError, match="checksum mismatch"):
        tracepack.lazy.trace(path, 0)
    with tracepack.open(path, checksum=False) as lz:  # the explicit opt-out reads what is there
        assert lz.node(0).stack_trace != trace


@pytest.mark.parametrize("opener", ["load", "open"])
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, opener: str) -> None:
    fifo = tmp_path / "in.tpk"
    os.mkfifo(fifo)
    result: list[BaseException] = []

    def go() -> None:
        try:
            (tracepack.load if opener == "load" else tracepack.open)(fifo)
        except BaseException as exc:
            result.append(exc)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "opening a FIFO blocked"
    assert isinstance(result[0], UsageError)
    assert "FIFO" in str(result[0])


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_refused_not_read_forever(device: str) -> None:
    for read in (tracepack.load, tracepack.open, files.read_input):
        with pytest.raises(UsageError, match="character device"):
            read(device)  # type: ignore[operator]


def test_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="folder"):
        tracepack.load(tmp_path)
    with pytest.raises(UsageError, match="folder"):
        tracepack.open(tmp_path)


def test_input_size_budget(tmp_path: Path) -> None:
    p = tmp_path / "big"
    p.write_bytes(b"x" * 1000)
    with limits.raised(max_input=999), pytest.raises(InputError, match="999-byte input limit"):
        files.read_input(p)
    with limits.raised(max_input=1000):
        assert files.read_input(p) == b"x" * 1000


def _lying(raw_length: int, payload: bytes) -> bytes:
    """A zstd container whose header declares ``raw_length``, checksums fixed as a careful attacker would."""
    head = bytearray(container.pack(b"", schema_version=(1, 1), codec="msgpack", compression="zstd"))
    struct.pack_into("<QQI", head, 24, len(payload), raw_length, zlib.crc32(payload))
    struct.pack_into("<I", head, 44, zlib.crc32(bytes(head[:44])))
    return bytes(head[:48]) + payload


def test_a_tiny_file_declaring_4_gib_allocates_nothing_big() -> None:
    payload = zstandard.ZstdCompressor().compress(b"\x90")  # 10 bytes
    data = _lying((4 << 30) - 1, payload)
    assert len(data) < 64
    tracemalloc.start()
    try:
        with pytest.raises(ContainerError):
            tracepack.loads(data, source="bomb.tpk")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20


def test_ratio_budget_refuses_a_frame_that_claims_too_much() -> None:
    raw = bytes(200 << 20)  # 200 MiB of zeros -> a few KiB of zstd
    payload = zstandard.ZstdCompressor(level=1).compress(raw)
    data = _lying(len(raw), payload)
    with pytest.raises(ContainerError, match="times the"):
        tracepack.loads(data, source="bomb.tpk")
    with limits.raised(max_ratio=1 << 30), pytest.raises(InputError):
        # within budget now: decompressed (streamed, chunk by chunk) and then refused as not msgpack
        tracepack.loads(data, source="bomb.tpk")


def test_limits_are_positive_integers() -> None:
    with pytest.raises(ValueError, match="positive integer"):
        limits.Limits(max_ratio=0)
    with pytest.raises(TypeError), limits.raised(no_such_budget=1):
        pass
    assert limits.current() == limits.DEFAULT


_REFERENCE = re.compile(r'  File "(.*)", line (0|[1-9][0-9]*), in (.*)\n')


def _reference(text: str) -> tuple[str, int, str, int] | None:
    m = _REFERENCE.match(text)
    if m is None or len(m.group(2)) > 19:
        return None
    return m.group(1), int(m.group(2)), m.group(3), m.end()


_PIECES = ['  File "', '", line ', ", in ", "0", "1", "9", "01", "x", '"', ",", " ", "\n", "é", "a, in b"]


@given(st.lists(st.sampled_from(_PIECES), max_size=14), st.booleans())
def test_the_linear_frame_matcher_is_the_regex(pieces: list[str], head: bool) -> None:
    text = ('  File "' if head else "") + "".join(pieces)
    assert traces._match_file_line(text, 0) == _reference(text)


@pytest.mark.parametrize(
    "line",
    [
        '  File "' + '", line 1, in x' * 20_000,  # no newline: the regex retried every separator
        '  File "' + '", line 1' * 30_000 + "\n",
        '  File "' + '", line ' * 30_000 + "\n",
        '  File "a", line ' + "1" * 5_000 + ", in f\n",  # 5,000 digits: int() would refuse past 4,300
    ],
)
def test_pathological_stack_traces_parse_or_are_refused(line: str) -> None:
    # Each took seconds to minutes with the backtracking regex; now one pass (the bench times it).
    assert traces.parse_stack_trace(line * 8) is None


def test_a_240_kb_trace_of_real_frames_round_trips() -> None:
    frame = traces.FrameKey('/home/user/project/m", line 3, in f.py', 12, "forward", "return self.fc(x)")
    text = traces.render_frames([frame] * 3_000)
    assert len(text) > 240_000
    parsed = traces.parse_stack_trace(text)
    assert parsed is not None
    assert parsed[0] == [frame] * 3_000


def _deep_stack_file(tmp_path: Path, frames: int, text_size: int) -> tuple[Path, list[tuple[str, int, str, str]]]:
    """A small file whose one node's stack renders to about ``frames * text_size`` characters."""
    import tracepack
    from tracepack import DocumentBuilder

    line = "x = " + "y" * text_size  # one shared string row, referenced by every frame
    stack = [("/home/user/project/deep.py", i + 1, f"f{i % 7}", line) for i in range(frames)]
    b = DocumentBuilder(producer="test", producer_version="0")
    b.add_node("deep", "aten.add.Tensor", stack_trace=stack)
    path = tmp_path / "deep.tpk"
    tracepack.dump(b.build(), path, codec="flatbuffers", compression="none")
    return path, stack


def test_a_stack_that_would_render_past_the_budget_is_refused_in_one_line(tmp_path: Path) -> None:
    import traceback

    import tracepack
    from tracepack.errors import DecodeError
    from tracepack.io import limits

    path, stack = _deep_stack_file(tmp_path, frames=400, text_size=4_000)  # ~1.6 MB of text
    assert path.stat().st_size < 64_000
    expected = "".join(traceback.StackSummary.from_list(stack).format()).strip()  # Python's own rendering
    with limits.raised(max_rendered=1 << 20):
        with pytest.raises(DecodeError) as eager:
            tracepack.load(path).node("deep").stack_trace  # noqa: B018 - the property renders
        with tracepack.open(path) as lazy_doc, pytest.raises(DecodeError) as lazy:
            lazy_doc.node("deep").stack_trace  # noqa: B018
    for info in (eager, lazy):
        message = str(info.value)
        assert "\n" not in message
        assert "$.stacks[" in message
        assert "stack trace would render to about" in message
        assert "limits.raised(max_rendered=...)" in message
    # Within the budget, both readers give Python's own text.
    assert tracepack.load(path).node("deep").stack_trace == expected
    with tracepack.open(path) as lazy_doc:
        assert lazy_doc.node("deep").stack_trace == expected
