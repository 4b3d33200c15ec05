"""Block checksums (container flag bit 0, spec §1.5): the block table, its writers, and what each reader checks.

References, none of them tracepack's own writer: the block table is compared with one built here
from the stored payload with ``zlib.crc32`` and ``struct``; lazy answers with ``tracepack.load``'s;
which blocks a lookup reads with the blocks the damaged byte is in; a build before block checksums
is the container reader of the commit before them, run from git in a subprocess.
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracepack
from benchmarks.bench_flatbuffers import stacked_document
from tests.strategies import BuiltDocument, built_documents, documents
from tracepack import container
from tracepack.cli import main
from tracepack.codecs import CODECS, WRITE_NAMES, resolve
from tracepack.errors import ContainerError, DecodeError
from tracepack.io import blocks as blockfile
from tracepack.versions import CURRENT

from .test_lazy import _same_document

LAYOUTS = ["flatbuffers-rows", "flatbuffers-columns"]
ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "torch" / "corpus"
#: The last commit whose container reader knew no flags (the one block checksums were built on).
BEFORE_BLOCKS = "068e9a6751ce4ff3e66c1c0024aa9851fcb55388"


def _reference_table(stored: bytes, size: int) -> bytes:
    """The block table spec §1.5 describes, built from the stored payload."""
    crcs = [zlib.crc32(stored[i : i + size]) for i in range(0, len(stored), size)]
    table = b"TPKB" + struct.pack("<IQ", size, len(crcs)) + b"".join(struct.pack("<I", c) for c in crcs)
    return table + struct.pack("<I", zlib.crc32(table))


def _with_blocks(data: bytes, size: int) -> bytes:
    """A file without block checksums rewritten with them, in blocks of ``size`` bytes."""
    header, _ = container.unpack(data)
    stored = data[header.header_size : header.block_table_at]
    return container.pack(
        stored, schema_version=header.schema_version, codec=header.codec, block_checksums=True, block_size=size
    )


def _doc() -> tracepack.Document:
    b = tracepack.DocumentBuilder(producer="test-blocks")
    for i in range(24):
        b.add_node(
            f"node_{i}",
            "aten.add.Tensor" if i % 2 else "aten.relu.default",
            stack_trace=[("model.py", 10 + i % 5, "forward", f"x = f{i % 5}(x)"), ("layers.py", 3 + i, "g", "y")],
            module_stack=[("L__self__", "", "M"), (f"L__self___b{i % 3}", f"b{i % 3}", "torch.nn.Linear")],
            meta={"seq_nr": str(i)},
        )
        b.add_debug_handle(100 + i, stack=b.stack_of_frames([tracepack.FrameKey("model.py", i, "forward", "z")]))
    return b.build()


# -- the format ------------------------------------------------------------------------------------


@given(
    payload=st.binary(max_size=6000),
    size=st.sampled_from(container.BLOCK_SIZES[:4]),
    codec=st.sampled_from(list(CODECS)),
    compression=st.sampled_from(["none", "zstd"]),
)
def test_the_block_table_is_one_crc_per_block_after_the_payload(
    payload: bytes, size: int, codec: str, compression: str
) -> None:
    data = container.pack(
        payload, schema_version=CURRENT, codec=codec, compression=compression, block_checksums=True, block_size=size
    )
    header = container.read_header(data)
    assert struct.unpack_from("<H", data, 18)[0] == 1 == header.flags
    assert header.block_checksums
    stored = data[48 : 48 + header.payload_length]
    assert header.payload_crc32 == zlib.crc32(stored)  # the whole-payload checksum stays
    assert data[48 + header.payload_length :] == _reference_table(stored, size)
    assert bytes(container.unpack(data)[1]) == payload
    plain = container.pack(payload, schema_version=CURRENT, codec=codec, compression=compression, block_checksums=False)
    assert plain[48:] == stored
    assert container.read_header(plain).flags == 0


@settings(max_examples=40)
@given(
    doc=documents(max_nodes=8),
    codec=st.sampled_from(list(CODECS)),
    compression=st.sampled_from(["none", "zstd"]),
)
def test_every_codec_round_trips_with_block_checksums(doc: tracepack.Document, codec: str, compression: str) -> None:
    data = tracepack.dumps(doc, codec=codec, compression=compression, block_checksums=True)
    assert container.read_header(data).block_checksums
    assert tracepack.loads(data) == doc
    plain = tracepack.dumps(doc, codec=codec, compression=compression, block_checksums=False)
    assert not container.read_header(plain).block_checksums
    assert tracepack.loads(plain) == doc
    length = container.read_header(data).payload_length
    assert data[48 : 48 + length] == plain[48:]


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    built=built_documents(max_nodes=12),
    layout=st.sampled_from(LAYOUTS),
    size=st.sampled_from(container.BLOCK_SIZES[:3]),
)
def test_lazy_answers_equal_eager_ones_in_small_blocks(
    built: BuiltDocument, layout: str, size: int, tmp_path: Path
) -> None:
    """Blocks of 512 B to 2 KiB: columns, vectors, tables and strings straddle block boundaries."""
    path = tmp_path / "blocks.tpk"
    path.write_bytes(_with_blocks(tracepack.dumps(built.doc, codec=layout, compression="none"), size))
    with tracepack.open(path) as lz:
        assert lz._blocks is not None
        _same_document(lz, built.doc)


@pytest.mark.parametrize("codec", WRITE_NAMES)
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_written_by_default_for_the_files_read_lazily(codec: str, compression: str) -> None:
    data = tracepack.dumps(_doc(), codec=codec, compression=compression)
    lazily = resolve(codec) in LAYOUTS and compression == "none"
    assert container.read_header(data).block_checksums is lazily
    assert container.block_checksums_by_default(resolve(codec), compression) is lazily


def test_the_command_line_option_and_inspect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "m.tpk"
    tracepack.dump(_doc(), src)
    cases = {
        (): True,
        ("--no-block-checksums",): False,
        ("--block-checksums",): True,
    }
    for flags, blocks in cases.items():
        out = tmp_path / f"out{len(flags)}{blocks}.tpk"
        argv = ["convert", str(src), str(out), "--codec", "flatbuffers", "--compression", "none", *flags, "--json"]
        assert main(argv) == 0
        assert json.loads(capsys.readouterr().out)["block_checksums"] is blocks
        assert container.read_header(out.read_bytes()).block_checksums is blocks
        assert main(["inspect", str(out), "--json"]) == 0
        info = json.loads(capsys.readouterr().out)
        assert (info["flags"], info["block_checksums"]) == (int(blocks), blocks)
        if blocks:
            size = out.stat().st_size - 48 - container.read_header(out.read_bytes()).payload_length
            assert info["block_size"] == container.BLOCK_SIZE
            assert container.block_table_size(info["blocks"]) == size
        assert main(["inspect", str(out)]) == 0
        text = capsys.readouterr().out
        assert ("flags 0x1: block checksums" in text) is blocks
    # On any codec, with --block-checksums: a compressed MessagePack file with a table reads back.
    out = tmp_path / "mp.tpk"
    assert main(["convert", str(src), str(out), "--codec", "msgpack", "--block-checksums"]) == 0
    assert container.read_header(out.read_bytes()).block_checksums
    assert tracepack.load(out) == _doc()
    assert "block checksums" in capsys.readouterr().out
    assert main(["convert", str(src), str(out), "--block-checksums", "--no-block-checksums"]) == 2


# -- damage ----------------------------------------------------------------------------------------


def _fix_table(data: bytes | bytearray) -> bytes:
    """Recompute the block table's own CRC-32 (the last four bytes), as a careful attacker would."""
    at = container.read_header(data).block_table_at
    table = bytes(data[at:-4])
    return bytes(data[:-4]) + struct.pack("<I", zlib.crc32(table))


def _refused(data: bytes) -> str:
    with pytest.raises(ContainerError) as info:
        tracepack.loads(data, source="m.tpk")
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("m.tpk: ")
    return text


def test_a_damaged_block_table_is_refused_naming_the_field() -> None:
    data = tracepack.dumps(_doc(), codec="flatbuffers-columns", compression="none")
    header = container.read_header(data)
    at = header.block_table_at
    count = struct.unpack_from("<Q", data, at + 8)[0]
    assert count >= 1

    def patched(offset: int, fmt: str, value: int | bytes) -> bytes:
        b = bytearray(data)
        struct.pack_into(fmt, b, at + offset, value)
        return _fix_table(b)

    assert _refused(patched(0, "4s", b"XPKB")) == f"m.tpk: byte {at}: block table magic is b'XPKB'; expected b'TPKB'"
    assert _refused(patched(4, "<I", 1000)) == (
        f"m.tpk: byte {at + 4}: block size 1000; expected a power of two from 512 to 16777216"
    )
    assert _refused(patched(4, "<I", 256)).endswith("block size 256; expected a power of two from 512 to 16777216")
    assert _refused(patched(8, "<Q", count + 1)) == (
        f"m.tpk: byte {at + 8}: block count {count + 1}; expected {count}: {header.payload_length} payload bytes "
        f"in blocks of {container.BLOCK_SIZE}"
    )
    size = container.block_table_size(count)
    assert _refused(data[:-1]).startswith(f"m.tpk: byte {at + size - 1}: truncated block table: {size - 1} block")
    assert _refused(data + b"\0").startswith(f"m.tpk: byte {at + size}: 1 unexpected bytes after it")
    assert _refused(data[: at + 10]).startswith(f"m.tpk: byte {at}: truncated block table: 10 bytes")
    flipped = bytearray(data)
    flipped[at + 16] ^= 1  # a block's CRC, the table's own CRC not fixed
    assert _refused(bytes(flipped)) == f"m.tpk: bytes {at}..{at + size - 1}: block table checksum mismatch: " + (
        "the file is corrupted"
    )


def test_a_forged_block_crc_is_refused_by_every_reader(tmp_path: Path) -> None:
    """A table whose own CRC-32 matches but whose block CRC does not: the payload's CRC-32 matches, and
    still the eager reader refuses it (it checks every block), as the lazy reader does once it reads it."""
    data = bytearray(tracepack.dumps(_doc(), codec="flatbuffers-rows", compression="none"))
    at = container.read_header(data).block_table_at
    struct.pack_into("<I", data, at + 16, struct.unpack_from("<I", data, at + 16)[0] ^ 1)
    forged = _fix_table(data)
    end = min(48 + container.BLOCK_SIZE, at) - 1
    assert _refused(forged) == f"m.tpk: bytes 48..{end}: block 0 checksum mismatch: the file is corrupted"
    path = tmp_path / "forged.tpk"
    path.write_bytes(forged)
    with pytest.raises(ContainerError, match=r"bytes 48\.\.\d+: block 0 checksum mismatch"):
        tracepack.open(path)  # the root is in block 0


def test_the_flag_without_a_table_is_refused() -> None:
    data = bytearray(tracepack.dumps(_doc(), codec="msgpack", compression="none"))
    data[18] = 1
    struct.pack_into("<I", data, 44, zlib.crc32(bytes(data[:44])))
    at = len(data)
    assert _refused(bytes(data)) == (
        f"m.tpk: byte {at}: truncated block table: 0 bytes; expected a block table of at least 20 bytes after "
        "the payload (header flag bit 0)"
    )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_flipped_byte_is_refused_exactly_when_a_lookup_reads_its_block(layout: str, tmp_path: Path) -> None:
    """A byte of the file flipped: the lazy reader refuses it exactly when the byte is in the header, the
    block table or a block the lookup reads (naming that block and its bytes), and answers as before
    otherwise; the eager reader and ``verify()`` always refuse it. Every header and table byte, and in
    every block of 512 B its first, its last and a random byte."""
    size = 512
    doc = stacked_document(300)
    data = _with_blocks(tracepack.dumps(doc, codec=layout, compression="none"), size)
    header = container.read_header(data)
    at = header.block_table_at
    path = tmp_path / "flip.tpk"
    name = doc.node(200).name
    handle = doc.raw.debug_handles.handle[123]

    def lookup(lz: tracepack.LazyDocument) -> tuple[object, ...]:
        node = lz.node(name)
        return node.stack_trace, node.module_stack, node.meta, lz.debug_handle(handle).stack_trace

    path.write_bytes(data)
    with tracepack.open(path) as lz:
        answer = lookup(lz)
        assert lz._blocks is not None
        read = {k for k, ok in enumerate(lz._blocks.ok) if ok}
    want = doc.node(name)
    assert answer == (want.stack_trace, want.module_stack, want.meta, doc.debug_handle(handle).stack_trace)
    blocks = -(-header.payload_length // size)
    assert 0 < len(read) < blocks  # some blocks are read, some not
    rng = random.Random(layout)
    positions = [*range(48), *range(at, len(data))]
    for k in range(blocks):
        first, last = 48 + k * size, min(48 + (k + 1) * size, at) - 1
        positions += sorted({first, last, rng.randint(first, last)})
    refused = set()
    for p in positions:
        bad = bytearray(data)
        bad[p] ^= 0xFF
        with pytest.raises(ContainerError):
            tracepack.loads(bytes(bad))
        path.write_bytes(bad)
        block = (p - 48) // size if 48 <= p < at else None
        try:
            with tracepack.open(path) as lz:
                got = lookup(lz)
                with pytest.raises(ContainerError):
                    lz.verify()
        except ContainerError as exc:
            text = str(exc)
            assert "\n" not in text
            assert block is None or block in read, f"byte {p} (block {block}, not read) refused: {text}"
            if block is not None:
                start = 48 + block * size
                end = min(start + size, at) - 1
                assert text == f"{path}: bytes {start}..{end}: block {block} checksum mismatch: the file changed " + (
                    "while it was open, or is corrupted"
                )
                refused.add(block)
            continue
        assert block is not None, f"byte {p} (header or block table) not refused"
        assert block not in read, f"byte {p} (block {block}) was read and not refused"
        assert got == answer
    assert refused == read


# -- a file that changes while it is open ------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_file_truncated_or_rewritten_while_open_never_gives_a_wrong_answer(layout: str, tmp_path: Path) -> None:
    """After a first lookup, the file is cut or overwritten in place (the reader's descriptor sees it):
    every later answer is the right one (its blocks were read before, or are unchanged) or a one-line
    ContainerError, and ``verify()`` (which reads every block) is refused whenever a payload byte changed."""
    doc = stacked_document(12_000)  # 240 blocks as rows, 57 as columns
    data = tracepack.dumps(doc, codec=layout, compression="none")
    at = container.read_header(data).block_table_at
    other = bytearray(data)
    for i in range(48, at, 997):
        other[i] ^= 0x5A  # the same length, other bytes in every block
    names = [doc.node(i).name for i in range(0, len(doc), 397)]
    path = tmp_path / "moving.tpk"

    def check(change: bytes | int | None) -> tuple[int, bool]:
        """Errors of the lookups after the change, and whether ``verify()`` then passed."""
        path.write_bytes(data)
        errors = 0
        with tracepack.open(path) as lz:
            assert lz.node(names[0]).stack_trace == doc.node(names[0]).stack_trace
            assert lz._blocks is not None
            unread = lz._blocks.ok.index(0)
            with path.open("r+b") as f:
                if change is None:
                    f.truncate(48 + unread * container.BLOCK_SIZE)  # at the first block not read yet
                elif isinstance(change, int):
                    f.truncate(change)
                else:
                    f.write(change)
            for name in names:
                try:
                    node = lz.node(name)
                    got = (node.name, node.stack_trace, node.module_stack)
                except ContainerError as exc:
                    text = str(exc)
                    assert "\n" not in text
                    assert "the file changed while it was open" in text, text
                    errors += 1
                    continue
                want = doc.node(name)
                assert got == (want.name, want.stack_trace, want.module_stack)
            try:
                lz.verify()
            except ContainerError as exc:
                text = str(exc)
                assert "\n" not in text
                assert "the file changed while it was open" in text, text
                return errors, False
        return errors, True

    results = [check(change) for change in (None, 0, 48, bytes(other))]
    assert not any(verified for _, verified in results)  # a block not read before the change: refused
    assert sum(errors for errors, _ in results) > 0  # lookups too, where they needed one
    assert check(at + 3) == (0, True)  # only the block table cut: it was read when the file was opened
    assert check(data) == (0, True)  # the same bytes written again: every answer as before


# -- older builds ----------------------------------------------------------------------------------


def test_a_build_before_block_checksums_refuses_them_in_one_line(tmp_path: Path) -> None:
    """The container reader of the commit before block checksums, from git, run on a file with them."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an unpacked sdist): the earlier build's reader is not at hand")
    old = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{BEFORE_BLOCKS}:src/tracepack/container.py"],
        capture_output=True,
        check=False,
    )
    assert old.returncode == 0, f"commit {BEFORE_BLOCKS} is not in this clone (a shallow one? git fetch --unshallow)"
    (tmp_path / "old_container.py").write_bytes(old.stdout)
    path = tmp_path / "new.tpk"
    tracepack.dump(_doc(), path, codec="flatbuffers", compression="none")
    script = (
        "import sys\n"
        "import old_container\n"
        "from tracepack.errors import TracepackError\n"
        "data = open(sys.argv[1], 'rb').read()\n"
        "for read in (old_container.read_header, old_container.unpack):\n"
        "    try:\n"
        "        read(data, source='new.tpk')\n"
        "    except TracepackError as exc:\n"
        "        print(exc, exc.exit_code)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src")])}
    run = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env, check=False
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["new.tpk: header byte 18: unknown flags 0x1; expected 0 2"] * 2


def test_every_reader_goes_through_the_flags_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Emulated: a build that knows no flags (``_KNOWN_FLAGS`` 0) refuses such a file at header byte 18
    from every entry point: eager load, lazy open, the command line (exit 2, one line)."""
    path = tmp_path / "new.tpk"
    tracepack.dump(_doc(), path, codec="flatbuffers-rows", compression="none")
    monkeypatch.setattr(container, "_KNOWN_FLAGS", 0)
    for read in (tracepack.load, tracepack.open):
        with pytest.raises(ContainerError, match=r"header byte 18: unknown flags 0x1"):
            read(path)
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from tracepack import container; container._KNOWN_FLAGS = 0; "
         "from tracepack.cli import main; sys.exit(main(sys.argv[1:]))", "trace", str(path), "node_1"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        f"tracepack: {path}: header byte 18: unknown flags 0x1; expected 0 or 0x1 (block checksums)"
    ]


# -- the real corpus, and how lazy the reads are ------------------------------------------------------


def _corpus() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if p.suffix in (".pt2", ".pt", ".ptl"))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", [p.name for p in _corpus()])
def test_lazy_answers_equal_eager_ones_on_the_corpus(name: str, layout: str, tmp_path: Path) -> None:
    doc = tracepack.load(CORPUS / name)
    path = tmp_path / "corpus.tpk"
    for size in (container.BLOCK_SIZE, 512):
        path.write_bytes(_with_blocks(tracepack.dumps(doc, codec=layout, compression="none"), size))
        assert tracepack.load(path) == doc
        with tracepack.open(path) as lz:
            assert lz._blocks is not None
            _same_document(lz, doc)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_lookup_verifies_a_few_blocks_and_verify_all(layout: str, tmp_path: Path) -> None:
    doc = stacked_document(12_000)  # 4 MB as rows, 1 MB as columns: 240 and 57 blocks
    path = tmp_path / "big.tpk"
    tracepack.dump(doc, path, codec=layout, compression="none")
    name = doc.node(8000).name
    with tracepack.open(path) as lz:
        blocks = lz._blocks
        assert blocks is not None
        assert lz.node(name).stack_trace == doc.node(name).stack_trace
        assert blocks.reads * 2 < len(blocks.ok), (blocks.reads, len(blocks.ok))
        lz.verify()
        assert blocks.reads == len(blocks.ok)


def test_checksum_false_reads_the_whole_file_unchecked(tmp_path: Path) -> None:
    doc = _doc()
    data = bytearray(tracepack.dumps(doc, codec="flatbuffers-columns", compression="none"))
    path = tmp_path / "trusted.tpk"
    path.write_bytes(data)
    with tracepack.open(path, checksum=False) as lz:
        assert lz._blocks is None
        assert lz._mm is not None
        _same_document(lz, doc)
    at = container.read_header(data).block_table_at
    data[at - 40] ^= 1  # the side index, no CRC checked: a trusted file is taken as it is
    path.write_bytes(data)
    tracepack.open(path, checksum=False).close()
    with pytest.raises(ContainerError, match="checksum mismatch"), tracepack.open(path) as lz:
        lz.verify()


def test_a_column_view_kept_after_close_never_changes(tmp_path: Path) -> None:
    """Buffers of closed documents are reused, but never one a caller still holds a view of."""
    a, b = tmp_path / "a.tpk", tmp_path / "b.tpk"
    tracepack.dump(stacked_document(600), a, codec="flatbuffers-rows", compression="none")
    tracepack.dump(stacked_document(610), b, codec="flatbuffers-rows", compression="none")
    with tracepack.open(a) as lz:
        view = lz.columns("stacks")["frame"][:]  # a view of the column's view: it outlives close()
        kept = view.tobytes()
    for _ in range(3):
        with tracepack.open(b) as lz:
            lz.verify()
    assert view.tobytes() == kept
    del view
    # Once no view is left, the next file that fits takes a pooled buffer, its pages already there.
    pooled = list(blockfile._POOL._free)
    assert pooled
    with tracepack.open(a) as lz:
        assert lz._blocks is not None
        assert any(lz._blocks._mem is m for m in pooled)


def test_errors_from_under_the_reader_keep_their_place(tmp_path: Path) -> None:
    """A block that fails its check inside a generated decoder (a node decoded whole) is the container's
    one-line error with the block's bytes, not a decode error about the FlatBuffer's shape."""
    doc = stacked_document(1500)
    data = tracepack.dumps(doc, codec="flatbuffers-rows", compression="none")
    path = tmp_path / "x.tpk"
    path.write_bytes(data)
    with tracepack.open(path) as lz:
        lz.node(0).stack_trace  # noqa: B018 - reading it is the test
        read = {k for k, ok in enumerate(lz._blocks.ok) if ok}  # type: ignore[union-attr]
    bad = bytearray(data)
    for victim in range(len(doc) - 1, 0, -50):  # a node whose decoding reads a block reading node 0 did not
        with tracepack.open(path) as lz:
            lz.node(victim).raw  # noqa: B018
            touched = {k for k, ok in enumerate(lz._blocks.ok) if ok} - read  # type: ignore[union-attr]
        if touched:
            break
    assert touched
    k = min(touched)
    bad[48 + k * container.BLOCK_SIZE + 1] ^= 1
    path.write_bytes(bad)
    with tracepack.open(path) as lz:
        lz.node(0).stack_trace  # noqa: B018
        with pytest.raises(ContainerError, match=rf"block {k} checksum mismatch") as info:
            lz.node(victim).raw  # noqa: B018
    assert not isinstance(info.value, DecodeError)
    assert str(info.value).startswith(f"{path}: bytes {48 + k * container.BLOCK_SIZE}..")
