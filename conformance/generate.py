"""Write the conformance suite (spec/12-conformance.md): vectors, expected outputs and the manifest.

::

    python -m conformance.generate            # write conformance/vectors/, expected/, manifest.json
    python -m conformance.generate --check    # fail, naming the command above, when they are not what it writes

Every vector is made here, deterministically: the same bytes every run (zstd's output depends on the
zstd library's version, so ``--check`` compares compressed payloads by what they decompress to). The
expected outputs are what the reference implementation's command line prints for each vector (run in
this process); the spec section each vector exercises is in its manifest entry. The golden files of
``tests/golden/`` (written once by each release and never changed) are vectors too, listed in place.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import math
import shutil
import struct
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import zstandard

import tracepack
from tracepack import DocumentBuilder, Tensor
from tracepack import model as m
from tracepack.codecs import _fbrt as rt
from tracepack.codecs import columnar, fbcolumns
from tracepack.codecs import flatbuffers as fbc
from tracepack.container import pack, read_header, unpack
from tracepack.traces import Provenance
from tracepack.versions import CURRENT, RELEASED, generated

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MANIFEST = HERE / "manifest.json"
VECTORS = HERE / "vectors"
EXPECTED = HERE / "expected"
USER_DICT = HERE / "dicts" / "user.dict"
#: The user dictionary's id: "USER" (outside the built-in ranges, below 2**31).
USER_DICT_ID = 0x55534552
#: The built-in dictionary the vectors are compressed with (pinned: a newer default changes no vector).
BUILTIN_DICT = "torch-export-7"
CODECS = ("json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns")
SHORT = {"json": "json", "msgpack": "msgpack", "flatbuffers-rows": "fbrows", "columnar": "columnar",
         "flatbuffers-columns": "fbcols"}  # fmt: skip
#: Expected outputs larger than this are stored gzip-compressed (the runner reads both).
GZIP_OVER = 32 * 1024
FIX = "python -m conformance.generate"


@dataclass
class Vector:
    id: str
    spec: str
    what: str
    data: bytes | None = None  # None: a file already in the repository (``file``)
    file: str = ""
    command: str = "cat"
    args: list[str] = field(default_factory=list)
    zstd_dict: str | None = None
    group: str = ""  # valid vectors of one group share their expected output

    def __post_init__(self) -> None:
        if not self.file:
            self.file = f"vectors/{self.id}.tpk"


# -- documents ------------------------------------------------------------------------------------------


def _golden() -> Any:
    """tests/golden/make_golden.py: the golden documents of every release (imported by name: test code)."""
    import importlib

    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return importlib.import_module("tests.golden.make_golden")


def small_document() -> tracepack.Document:
    """The base of most damaged vectors: a few nodes using every table, small enough to read in a hex dump."""
    b = DocumentBuilder(producer="conformance", producer_version="1")
    stack = [("/home/user/m.py", 3, "forward", "return self.f(x)"), ("/home/user/m.py", 9, "f", "y = relu(x)")]
    modules = [("L__self__", "", "__main__.M"), ("L__self___fc", "fc", "torch.nn.modules.linear.Linear")]
    prov = [Provenance("relu", "<built-in function relu>", 7, "p", "create", (Provenance("x", "x", 1, "", ""),))]
    b.add_node("relu", "aten.relu", inputs=[("x", Tensor("x"))], outputs=[Tensor("relu")], stack_trace=stack,
               module_stack=modules, meta={"torch_fn": "relu_1;relu", "probe": "conformance-probe-string"})  # fmt: skip
    inputs: Any = [("a", Tensor("relu")), ("b", 2.5, 2), ("c", 3.0)]  # a keyword argument among positional ones
    b.add_node("add", "aten.add", inputs=inputs, outputs=[Tensor("add")], stack_trace=stack[:1], from_node=prov)
    b.add_node("out", "output", inputs=[("args", [Tensor("add")])])
    b.add_value("x", dtype="float32", shape=[2, 3], strides=[3, 1])
    src = b.source("def f(x):\n    return x\n", "code/m.py", 1)
    rng = b.source_range(src, 0, 9)
    b.add_debug_handle(1, stack=b.stack_of_frames([]), op="aten::relu", source_range=rng)
    b.add_debug_handle(5, op="aten::add")
    b.set_graph(name="g", inputs=[Tensor("x")], outputs=[Tensor("add")])
    return b.build()


def floats_strings_document() -> tracepack.Document:
    """Every float form §11.2 prints, and the string escapes of §11.2.2 (U+0000 makes the FlatBuffers column
    layout store a blob column)."""
    b = DocumentBuilder(producer="conformance floats ✓", producer_version="1")
    floats = [math.nan, math.inf, -math.inf, -0.0, 0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
              1e-05, 0.0001, 0.1, 1.5, 1e15, 1e16, 123456789.125, 2.0**53, -2.5e-7]  # fmt: skip
    b.add_node("floats", "f", inputs=[("xs", floats), ("nan", math.nan), ("neg_zero", -0.0), ("tiny", 5e-324)])
    text = 'nul\x00 ctl\x01\x08\x09\x0a\x0c\x0d\x1f del\x7f ls\u2028ps\u2029 quote" back\\ slash/ é 😀 \U0010ffff'
    b.add_node("strings", "s", inputs=[("s", text), ("empty", ""), ("list", [text, "", "ü"])],
               meta={"key\x00with nul": "value\nwith\nlines", "ümlaut": "😀"})  # fmt: skip
    b.add_node("ints", "i", inputs=[("min", -(2**63)), ("max", 2**63 - 1), ("ints", [0, -1, 2**32, -(2**31)])])
    b.add_metadata("\x00", "\x1f")
    return b.build()


def forms_document() -> tracepack.Document:
    """Node names that the columnar writer stores as `forms` (§6.4.3), with the edge cases of its numbers."""
    b = DocumentBuilder(producer="conformance", producer_version="1")
    names = [f"add_{i}" for i in range(12)] + [f"mul_{i}" for i in (5, 3, 0, 17)]  # restarts and drops
    names += ["a007", "x_" + "9" * 18, "y_" + "1" * 19, "z_0_suffix", "0", "123", "with space_3", "q" * 300 + "_1"]
    names += [f"blocks.{i}.attn" for i in range(8)] + ["tail", "add_12", "add_12;method_descriptor.add"]
    for name in names:
        b.add_node(name, "op", meta={"torch_fn": f"{name};builtin.op"})
    return b.build()


def empty_document() -> tracepack.Document:
    """No nodes, no debug info: every table holds only its reserved row 0, and no producer."""
    raw = DocumentBuilder().build_raw()
    raw.header.producer = None
    return tracepack.Document(raw)


def deep_document() -> tracepack.Document:
    """Deep tries: a 600-frame stack and a 100-level module path, and nodes on prefixes of them."""
    b = DocumentBuilder(producer="conformance", producer_version="1")
    frames = [(f"/home/user/deep_{i % 7}.py", i + 1, f"level_{i}", f"return level_{i + 1}(x)") for i in range(600)]
    modules = [(f"L__self___m{i}", ".".join(f"m{j}" for j in range(i + 1)), f"Mod{i}") for i in range(100)]
    for depth, mdepth in ((600, 100), (599, 99), (300, 50), (1, 1)):
        b.add_node(f"deep_{depth}", "op", stack_trace=frames[:depth], module_stack=modules[:mdepth])
    return b.build()


def real_documents() -> list[tuple[str, tracepack.Document]]:
    """The committed torch samples, as `tracepack convert` reads them (no torch needed)."""
    sources = [REPO / "src/tracepack/data/sample/tiny_transformer.pt2"]
    sources += sorted((REPO / "tests/data/torch/corpus").glob("*.pt*"))
    return [(("sample" if "sample" in str(p) else "corpus-" + p.stem.replace("_", "-")), tracepack.load(p))
            for p in sources]  # fmt: skip


# -- helpers --------------------------------------------------------------------------------------------


def user_dict() -> zstandard.ZstdCompressionDict:
    return zstandard.ZstdCompressionDict(USER_DICT.read_bytes())


def make_user_dict() -> bytes:
    """A user dictionary (trained once on the golden documents' payloads; committed, not regenerated)."""
    mg = _golden()
    samples = []
    for v in sorted(RELEASED):
        doc = mg.build_document(v)
        for codec in CODECS:
            samples.append(bytes(unpack(tracepack.dumps(doc, codec=codec, compression="none", version=v))[1]))
    chunks: list[bytes | bytearray | memoryview] = [s[i : i + 2048] for s in samples for i in range(0, len(s), 2048)]
    return zstandard.train_dictionary(16384, chunks, dict_id=USER_DICT_ID, k=1024, d=8, threads=1).as_bytes()


COMPRESSIONS = {
    "none": {"compression": "none"},
    "zstd": {"compression": "zstd"},
    "dict": {"compression": "zstd", "zstd_dict": BUILTIN_DICT},
    "user": {"compression": "zstd", "zstd_dict": "user"},
}


def dumps(
    doc: tracepack.Document, codec: str, comp: str, version: tuple[int, int] = CURRENT, *, blocks: bool = False
) -> bytes:
    """``tracepack.dumps``; without block checksums (spec §1.5) unless ``blocks``: only the vectors of §1.5
    (``block_vectors``) carry a block table, and every other one stays what it was before them."""
    kw: dict[str, Any] = dict(COMPRESSIONS[comp])
    if kw.get("zstd_dict") == "user":
        kw["zstd_dict"] = user_dict()
    return tracepack.dumps(doc, codec=codec, level=3, version=version, block_checksums=blocks, **kw)


def payload_of(data: bytes) -> bytes:
    return bytes(unpack(data)[1])


def repack(payload: bytes, codec: str, version: tuple[int, int] = CURRENT) -> bytes:
    return pack(payload, schema_version=version, codec=codec, block_checksums=False)


def reheader(data: bytes, **fields: int) -> bytes:
    """Header fields changed, the header CRC-32 fixed (a careful attacker)."""
    offsets = {"cver": (8, "<H"), "hsize": (10, "<H"), "major": (12, "<H"), "minor": (14, "<H"), "codec": (16, "<B"),
               "comp": (17, "<B"), "flags": (18, "<H"), "dict": (20, "<I"), "plen": (24, "<Q"), "rlen": (32, "<Q"),
               "pcrc": (40, "<I")}  # fmt: skip
    buf = bytearray(data)
    for name, value in fields.items():
        off, fmt = offsets[name]
        struct.pack_into(fmt, buf, off, value)
    struct.pack_into("<I", buf, 44, zlib.crc32(bytes(buf[:44])))
    return bytes(buf)


def with_payload(data: bytes, payload: bytes) -> bytes:
    """The container ``data`` with another stored payload, lengths and CRCs fixed (compression kept)."""
    head = data[:48]
    comp = head[17]
    raw_len = struct.unpack_from("<Q", head, 32)[0] if comp else len(payload)
    return reheader(head + payload, plen=len(payload), rlen=raw_len, pcrc=zlib.crc32(payload))


def raw_of(doc: tracepack.Document) -> Any:
    return msgspec.msgpack.decode(msgspec.msgpack.encode(doc.raw), type=m.Document)


def mp(raw: Any, version: tuple[int, int] = CURRENT) -> bytes:
    """A msgpack container of ``raw`` (anything msgspec encodes: a model, or plain lists)."""
    return repack(msgspec.msgpack.encode(raw), "msgpack", version)


def arrays(doc: tracepack.Document) -> Any:
    return msgspec.msgpack.decode(msgspec.msgpack.encode(doc.raw))


def keyed(doc: tracepack.Document) -> Any:
    return msgspec.to_builtins(generated(CURRENT).convert.to_json(doc.raw))


def js(obj: Any) -> bytes:
    return repack(msgspec.json.encode(obj), "json")


def columns_payload(doc: tracepack.Document) -> dict[str, Any]:
    """The columnar payload map with its columns keyed by path."""
    payload: dict[str, Any] = msgspec.msgpack.decode(columnar.encode(doc.raw, CURRENT))
    paths = columnar.path_numbers()[0]
    payload["columns"] = {paths[k] if type(k) is int else k: v for k, v in payload["columns"].items()}
    return payload


def columnar_bytes(payload: dict[str, Any], *, numbered: bool = True) -> bytes:
    numbers = columnar.path_numbers()[1]
    cols = {numbers.get(p, p) if numbered else p: v for p, v in payload["columns"].items()}
    return msgspec.msgpack.encode({**payload, "columns": cols})


def shredded(doc_raw: Any, root: type | None = None) -> dict[str, tuple[int, Any]]:
    s = fbcolumns._Shredder()
    s.shred(columnar._plan(root or type(doc_raw)), [doc_raw])
    return dict(s.values)


def fbcols(values: dict[str, tuple[int, Any]], side_of: Any) -> bytes:
    return repack(fbc.with_side_index(fbcolumns._write(values), fbc.side_index(side_of)), "flatbuffers-columns")


#: The element code of each slot of the ``Columns`` table (slot 0, ``layout``, is a scalar).
_SLOT_CODES: tuple[str, ...] = ("I", "B", "B", "I", "B", "b", "B", "h", "H", "i", "I", "q", "Q", "d", "B", "B", "I")


def columns_buffer(values: dict[str, tuple[int, Any]], **override: Any) -> bytes:
    """A ``Columns`` buffer of ``values`` as fbcolumns writes it, with slots replaced (a damaged directory):
    ``bytes`` for a byte vector, a list of numbers for the others, ``layout=N``."""
    body = fbcolumns._write(values)
    r = rt.Reader(body)
    v = r.fields(r.root(fbcolumns.FILE_IDENTIFIER), fbcolumns.ROOT_SPEC)
    names = fbcolumns.ROOT_SPEC.names
    slots: list[Any] = [override.get("layout", v[0])]
    for i in range(1, len(names)):
        code = _SLOT_CODES[i]
        if names[i] in override:
            slots.append(override[names[i]])
        elif not v[i]:
            slots.append(None)
        else:
            start, count = r.vector(v[i], rt.SIZES[code])
            view = r.mv[start : start + count * rt.SIZES[code]]
            slots.append(bytes(view) if code == "B" else view.cast(code).tolist())  # type: ignore[call-overload]
    w = rt.Writer()
    offsets: list[Any] = [slots[0]] + [0] * (len(names) - 1)
    mask = 1
    for i in range(len(names) - 1, 0, -1):  # back to front, so the buffer reads in slot order
        if slots[i] is None:
            continue
        value = slots[i]
        offsets[i] = (
            w.bytes_(bytes(value)) if isinstance(value, (bytes, bytearray)) else w.scalars(_SLOT_CODES[i], value)
        )
        mask |= 1 << i
    return w.finish(w.table(fbcolumns.ROOT_SPEC, mask, tuple(offsets)), fbcolumns.FILE_IDENTIFIER)


@contextlib.contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    saved = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, saved)


def fbrows_raw(raw: Any) -> bytes:
    """The row layout of ``raw`` (no validation: ``raw`` may hold values no model would)."""
    return fbc.with_side_index(fbc.codec_module(CURRENT).encode(raw), fbc.side_index(raw))


# -- the vectors ----------------------------------------------------------------------------------------


def valid_vectors() -> list[Vector]:
    out: list[Vector] = []
    mg = _golden()
    for v in sorted(RELEASED):
        label = f"{v[0]}.{v[1]}"
        doc = mg.build_document(v)
        for codec in CODECS:
            for comp in COMPRESSIONS:
                out.append(Vector(
                    f"valid/golden-{label}/{SHORT[codec]}-{comp}", "§1-§8, §10.4",
                    f"the golden document of schema {label} (every type, union variant, table and encoding of that "
                    f"release) in {codec}, compression {comp}", dumps(doc, codec, comp, v),
                    zstd_dict="dicts/user.dict" if comp == "user" else None, group=f"golden-{label}"))  # fmt: skip
        for path in sorted((REPO / "tests" / "golden" / label).glob("*.tpk")):
            out.append(Vector(
                f"valid/golden-frozen-{label}/{path.stem}", "§1-§8, §6.1 (layout 1)",
                f"tests/golden/{label}/{path.name}, written by the release of schema {label} and never changed "
                "(its columnar file is layout 1)", None, file=f"../tests/golden/{label}/{path.name}",
                group=f"golden-frozen-{label}"))  # fmt: skip
    features = {
        "floats-strings": (floats_strings_document(), "every float form of §11.2.2 (NaN, infinities, -0.0, "
                           "subnormals, repr's switch to exponents) and every string escape, U+0000 included"),
        "forms": (forms_document(), "a string column written as forms (§6.4.3): counters that restart, drop and "
                  "run to 18 digits, numbers with leading zeros, literals reused as prefix and suffix"),
        "empty": (empty_document(), "no nodes, every table its row 0 only, no producer (§2.4, §11.2.1)"),
        "deep": (deep_document(), "a 600-frame stack trie and a 100-level module trie (§2.6, §2.9)"),
        "small": (small_document(), "the base of the damaged vectors, undamaged"),
    }  # fmt: skip
    for name, (doc, what) in features.items():
        for codec in CODECS:
            for comp in ("zstd",) if name == "deep" else ("none", "zstd"):
                out.append(Vector(f"valid/{name}/{SHORT[codec]}-{comp}", "§2-§7, §11.2", f"{what}; {codec}, {comp}",
                                  dumps(doc, codec, comp), group=name))  # fmt: skip
    assert columnar.FORMS in {e for e, _ in columns_payload(features["forms"][0]).get("columns", {}).values()}
    for name, doc in real_documents():
        for codec in CODECS:
            comps = list(COMPRESSIONS) if name == "sample" else ["dict"]
            for comp in comps:
                out.append(
                    Vector(
                        f"valid/{name}/{SHORT[codec]}-{comp}",
                        "§1-§8, §11.2",
                        f"a committed torch sample ({name}) as `tracepack convert` reads it; {codec}, {comp}",
                        dumps(doc, codec, comp),
                        zstd_dict="dicts/user.dict" if comp == "user" else None,
                        group=name,
                    )
                )
        nodes = [f"#{i}" for i in range(len(doc))]
        if not nodes:  # TorchScript archives: debug handles and source ranges, no graph nodes
            continue
        lazy = ("fbrows-none", "fbcols-none") if name in ("sample", "corpus-cond", "corpus-helpers") else ()
        for short, comp in [("msgpack", "dict"), *(c.rsplit("-", 1) for c in lazy)]:
            codec = {"fbrows": "flatbuffers-rows", "fbcols": "flatbuffers-columns"}.get(short, short)
            out.append(Vector(
                f"valid/{name}/trace-{SHORT[codec]}-{comp}", "§2.9, §11.3",
                f"`trace` of every node of {name} ({'read lazily: ' if comp == 'none' else ''}{codec}, {comp})",
                dumps(doc, codec, comp), file=f"vectors/valid/{name}/{SHORT[codec]}-{comp}.tpk", command="trace",
                args=nodes, group=f"{name}.trace"))  # fmt: skip
    out += draft_vectors()
    out += special_valid_vectors()
    out += [v for v in block_vectors() if v.id.startswith("valid/")]
    return out


def block_vectors() -> list[Vector]:
    """§1.5: files with block checksums, read whole (`cat`) and lazily (`trace`), and every check of §1.5.2
    on a damaged block table or block (`cat`: exact places; `trace`: block 0, which every lazy reader reads)."""
    out: list[Vector] = []
    golden = _golden().build_document(CURRENT)
    for codec in ("flatbuffers-rows", "flatbuffers-columns"):
        short = SHORT[codec]
        out.append(Vector(f"valid/blocks/{short}-none", "§1.5", f"the golden 1.2 document in {codec} with block "
                          "checksums in 16 KiB blocks (what writers write for uncompressed FlatBuffers)",
                          dumps(golden, codec, "none", blocks=True), group="golden-1.2"))  # fmt: skip
        plain = dumps(golden, codec, "none")
        out.append(Vector(f"valid/blocks/{short}-512", "§1.5", f"the golden 1.2 document in {codec} in blocks of "
                          "512 bytes (the smallest): tables, vectors and strings straddle blocks",
                          with_blocks(plain, 512), group="golden-1.2"))  # fmt: skip
    out.append(Vector("valid/blocks/msgpack-zstd", "§1.5", "block checksums over a zstd payload (any codec and "
                      "compression may have them; the blocks cover the stored, compressed bytes)",
                      dumps(golden, "msgpack", "zstd", blocks=True), group="golden-1.2"))  # fmt: skip
    for name, doc in real_documents():
        if name != "sample":
            continue
        nodes = [f"#{i}" for i in range(len(doc))]
        for codec in ("flatbuffers-rows", "flatbuffers-columns"):
            out.append(Vector(f"valid/blocks/sample-trace-{SHORT[codec]}-512", "§1.5.3, §11.3",
                              f"`trace` of every node of the sample read lazily from {codec} in 512-byte blocks",
                              with_blocks(dumps(doc, codec, "none"), 512), command="trace", args=nodes,
                              group="sample.trace"))  # fmt: skip
    base = dumps(small_document(), "flatbuffers-columns", "none", blocks=True)
    at = read_header(base).block_table_at
    count = struct.unpack_from("<Q", base, at + 8)[0]

    def table(offset: int, fmt: str, value: Any) -> bytes:
        b = bytearray(base)
        struct.pack_into(fmt, b, at + offset, value)
        return fix_table(bytes(b))

    def bad(name: str, step: str, what: str, data: bytes, command: str = "cat") -> None:
        out.append(Vector(f"invalid/blocks/{name}", f"§1.5.2 step {step}", what, data, command=command,
                          args=["relu"] if command == "trace" else []))  # fmt: skip

    bad("truncated-table-head", "11a", "the block table cut to its first 10 bytes", base[: at + 10])
    no_table = dumps(small_document(), "msgpack", "none")
    bad("flag-without-table", "11a", "flag bit 0 on a file with no block table", reheader(no_table, flags=1))
    bad("table-magic", "11b", "the table's magic TPKB changed to XPKB (its CRC fixed)", table(0, "4s", b"XPKB"))
    bad("block-size", "11c", "block size 1000, not a power of two (the table's CRC fixed)", table(4, "<I", 1000))
    bad("block-size-small", "11c", "block size 256, below 512 (the table's CRC fixed)", table(4, "<I", 256))
    bad("block-count", "11d", "a block count one more than the payload has (the table's CRC fixed)",
        table(8, "<Q", count + 1))  # fmt: skip
    bad("truncated-table", "11e", "the table's last byte cut", base[:-1])
    bad("bytes-after-table", "11e", "a byte after the block table", base + b"\0")
    flipped = bytearray(base)
    flipped[at + 16] ^= 1
    bad("table-crc", "11f", "a block's CRC-32 changed without the table's CRC-32", bytes(flipped))
    forged = bytearray(base)
    struct.pack_into("<I", forged, at + 16, struct.unpack_from("<I", forged, at + 16)[0] ^ 1)
    bad("forged-block-crc", "12a", "block 0's CRC-32 changed and the table's CRC-32 fixed: the payload's CRC-32 "
        "matches, block 0 does not", fix_table(bytes(forged)))  # fmt: skip
    bad("forged-block-crc-trace", "12a (lazy, §1.5.3)", "the same, read lazily: block 0 holds the root",
        fix_table(bytes(forged)), command="trace")  # fmt: skip
    damaged = bytearray(base)
    damaged[48 + 1] ^= 1  # in block 0 (the payload's CRC-32 no longer matches either)
    bad("block-byte-trace", "12a (lazy, §1.5.3)", "a byte of block 0 changed, read lazily: refused at block 0 "
        "(an eager reader stops at the payload CRC-32, §1.3 step 12)", bytes(damaged), command="trace")  # fmt: skip
    return out


def with_blocks(data: bytes, size: int) -> bytes:
    """A container without block checksums rewritten with them, in blocks of ``size`` bytes."""
    header = read_header(data)
    stored = data[header.header_size : header.header_size + header.payload_length]
    return pack(stored, schema_version=header.schema_version, codec=header.codec, block_checksums=True, block_size=size)


def fix_table(data: bytes) -> bytes:
    """The block table's own CRC-32 (its last 4 bytes) recomputed, as a careful attacker would."""
    at = read_header(data).block_table_at
    return data[:-4] + struct.pack("<I", zlib.crc32(data[at:-4]))


def _draft_schema(extra: str) -> Any:
    """Schema 1.2 as the draft of 1.3 with ``extra`` TOML appended, and its generated Python (imported from a
    folder this process writes)."""
    import importlib
    import tempfile

    from tracepack.codegen.emit_fbs_python import emit_fbs_python
    from tracepack.codegen.emit_python import emit_python
    from tracepack.codegen.model import load_schema_text

    text = (REPO / "schema" / "tracepack-1.2.toml").read_text(encoding="utf-8")
    text = text.replace('version = "1.2"', 'version = "1.3"').replace('status = "released"', 'status = "draft"')
    schema = load_schema_text(text + extra, source="tracepack-1.3.toml (conformance draft)")
    files = {**emit_python(schema), **emit_fbs_python(schema)}
    folder = Path(tempfile.mkdtemp(prefix="tracepack-draft-"))
    name = f"conformance_draft_{hashlib.sha256(extra.encode()).hexdigest()[:12]}"
    for rel, content in files.items():
        if "/v1_3/" in rel:
            target = folder / name / rel.split("/v1_3/", 1)[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
    sys.path.insert(0, str(folder))
    try:
        pkg = importlib.import_module(name)
        for sub in ("model", "json_model", "convert", "validate", "fbcodec"):
            importlib.import_module(f"{name}.{sub}")
    finally:
        sys.path.remove(str(folder))
        shutil.rmtree(folder)
    return pkg


_DRAFT_FIELDS = """
[structs.Node.fields.weight]
id = 11
type = "f64"
default = 0.0
doc = "A field of the conformance draft: nodes of 1.3 files have a weight."

[structs.Document.fields.notes]
id = 16
type = "list[str]"
default = []
doc = "A field of the conformance draft."
"""
_DRAFT_ENUM = """
[enums.StackStyle.values.compact]
value = 2
doc = "A value of the conformance draft."
"""


def _draft_payloads(pkg: Any, raw: Any) -> dict[str, bytes]:
    """``raw`` (a draft document) in every codec."""
    model = pkg.model
    conv = importlib_module(pkg, "convert")
    fb = importlib_module(pkg, "fbcodec")
    return {
        "json": msgspec.json.encode(conv.to_json(raw)),
        "msgpack": msgspec.msgpack.encode(raw),
        "flatbuffers-rows": fbc.with_side_index(fb.encode(raw), fbc.side_index(raw)),
        "columnar": columnar.encode_model(raw, model.Document),
        "flatbuffers-columns": fbc.with_side_index(fbcolumns.encode_model(raw, model.Document), fbc.side_index(raw)),
    }


def importlib_module(pkg: Any, name: str) -> Any:
    import importlib

    return importlib.import_module(f"{pkg.__name__}.{name}")


def _as_draft(pkg: Any, doc: tracepack.Document) -> Any:
    raw = msgspec.msgpack.decode(msgspec.msgpack.encode(doc.raw), type=pkg.model.Document)
    raw.header.version = pkg.model.Version(1, 3)
    return raw


def draft_vectors() -> list[Vector]:
    """Files of a newer minor, 1.3, written by a draft schema that adds a node field, a root field (by name in
    the columnar codecs: a draft's unnumbered path, §6.3) and, for the damaged ones, an enum value."""
    mg = _golden()
    doc = mg.build_document(CURRENT)
    pkg = _draft_schema(_DRAFT_FIELDS)
    raw = _as_draft(pkg, doc)
    for i, node in enumerate(raw.graph.nodes):
        node.weight = i + 0.5
    raw.notes = ["a note only 1.3 readers see"]
    out = []
    for codec, payload in _draft_payloads(pkg, raw).items():
        out.append(Vector(f"valid/draft-1.3/{SHORT[codec]}", "§10.3, §6.3",
                          f"a file of schema 1.3 (a newer minor) whose draft adds Node.weight and Document.notes; "
                          f"a 1.2 reader skips them ({codec}: {_SKIPS[codec]})",
                          repack(payload, codec, (1, 3)), group="golden-1.2"))  # fmt: skip
    pkg = _draft_schema(_DRAFT_FIELDS + _DRAFT_ENUM)
    raw = _as_draft(pkg, doc)
    raw.graph.nodes[0].stack_style = pkg.model.StackStyle.COMPACT
    for codec, payload in _draft_payloads(pkg, raw).items():
        out.append(Vector(f"invalid/versions/newer-minor-enum-{SHORT[codec]}", "§10.3",
                          f"a 1.3 file whose node 0 uses a StackStyle value 1.3 added: refused where the value is "
                          f"({codec})", repack(payload, codec, (1, 3))))  # fmt: skip
    return out


_SKIPS = {"json": "an unknown member", "msgpack": "extra trailing array elements",
          "flatbuffers-rows": "vtable slots past the known ones",
          "columnar": "columns keyed by a path no release numbers", "flatbuffers-columns": "unknown paths"}  # fmt: skip


def special_valid_vectors() -> list[Vector]:
    """Files no reference writer writes but every reader accepts."""
    mg = _golden()
    doc = mg.build_document(CURRENT)
    small = small_document()
    out = []
    base = dumps(small, "msgpack", "none")
    payload = payload_of(base)
    out.append(Vector("valid/special/header-size-56", "§1.2",
                      "a header size of 56: a reader skips the 8 bytes after byte 48",
                      reheader(base[:48] + bytes(range(8)) + payload, hsize=56), group="small"))  # fmt: skip
    z = zstandard.ZstdCompressor(level=3)
    frames = b"\x50\x2a\x4d\x18\x04\x00\x00\x00skip" + z.compress(payload[:100]) + z.compress(payload[100:])
    out.append(Vector("valid/special/zstd-frames", "§8.1",
                      "a zstd payload of a skippable frame and two frames: their contents concatenated",
                      reheader(base[:48] + frames, comp=1, plen=len(frames), rlen=len(payload),
                               pcrc=zlib.crc32(frames)), group="small"))  # fmt: skip
    nonmin = bytearray(payload)
    at = nonmin.index(b"\x92\x01\x02")  # header.version [1, 2]
    nonmin[at : at + 3] = b"\x92\xcf" + (1).to_bytes(8, "big") + b"\xd3" + (2).to_bytes(8, "big")
    out.append(Vector("valid/special/msgpack-non-minimal", "§4.4",
                      "MessagePack integers in wider formats than needed (uint 64, int 64)",
                      repack(bytes(nonmin), "msgpack"), group="small"))  # fmt: skip
    f64 = payload
    half, three = msgspec.msgpack.encode([6, 2.5]), msgspec.msgpack.encode([6, 3.0])  # ArgFloats as float 64
    assert half in f64
    assert three in f64
    f32 = f64.replace(half, b"\x92\x06\xca" + struct.pack(">f", 2.5), 1).replace(three, b"\x92\x06\x03", 1)
    out.append(Vector("valid/special/msgpack-float32-and-int", "§4.1",
                      "an f64 field given as float 32 (2.5), another as a positive fixint (3)",
                      repack(f32, "msgpack"), group="small"))  # fmt: skip
    text = msgspec.json.encode(keyed(small))
    loose = text.replace(b'{"magic"', b'\n {\t"zz_unknown": [1, {"a": null}, "\\u00e9\\ud83d\\ude00"],\r\n "magic"', 1)
    loose = loose.replace(b'{"kind":"float","value":2.5}', b'{"value":2.5 , "kind":"float"}') + b" \n"
    out.append(Vector("valid/special/json-loose", "§3",
                      "JSON with whitespace, an unknown member (escapes, a surrogate pair), `kind` last",
                      repack(loose, "json"), group="small"))  # fmt: skip
    minus = text.replace(b'"value":2.5', b'"value":-0', 1)
    out.append(Vector("valid/special/json-minus-zero", "§3.1",
                      "JSON -0 for a float field: the integer 0, so +0.0 (cat prints 0.0)", repack(minus, "json"),
                      group="json-minus-zero"))  # fmt: skip
    cols = columns_payload(small)
    out.append(Vector("valid/special/columnar-by-name", "§6.3",
                      "columnar layout 2 with every column keyed by its path instead of its number",
                      repack(columnar_bytes(cols, numbered=False), "columnar"), group="small"))  # fmt: skip
    extra = dict(cols, extra_key="ignored", columns={**cols["columns"], 999999: ["plain", [1]],
                                                     "$.not.a.path": ["weird", {"x": 1}]})  # fmt: skip
    out.append(Vector("valid/special/columnar-unknown", "§6.1, §6.3",
                      "an unknown payload key, a column number no release has and an unknown path (with an unknown "
                      "encoding): all ignored", repack(columnar_bytes(extra), "columnar"), group="small"))  # fmt: skip
    for codec in ("flatbuffers-rows", "flatbuffers-columns"):
        data = bytearray(dumps(doc, codec, "none"))
        body, side = fbc.split(bytes(data[48:]))
        assert side is not None
        r = rt.Reader(side)
        start, count = r.vector(r.fields(r.root(fbc.SIDE_IDENTIFIER), fbc.SIDE_SPEC)[0], 4)
        at = 48 + len(body) + start
        data[at : at + 4 * count] = b"".join((i * 7 % count).to_bytes(4, "little") for i in range(count))
        lied = with_payload(bytes(data[:48]), bytes(data[48:]))
        out.append(Vector(f"valid/special/side-index-lies-{SHORT[codec]}", "§5.4",
                          f"{codec} whose side index is a wrong permutation: derived data, ignored by cat",
                          lied, group="golden-1.2"))  # fmt: skip
        names = [n.name for n in doc.nodes()]
        out.append(Vector(f"valid/special/side-index-lies-{SHORT[codec]}-trace", "§5.4, §11.3",
                          f"trace by name on {codec} whose side index lies: every node still found",
                          lied, file=f"vectors/valid/special/side-index-lies-{SHORT[codec]}.tpk", command="trace",
                          args=names, group="golden-1.2.trace-by-name"))  # fmt: skip
    return out


# -- damaged and hostile vectors ------------------------------------------------------------------------


def invalid_vectors() -> list[Vector]:
    out: list[Vector] = []

    def bad(name: str, spec: str, what: str, data: bytes, **kw: Any) -> None:
        out.append(Vector(f"invalid/{name}", spec, what, data, **kw))

    small = small_document()
    base = dumps(small, "msgpack", "none")
    zbase = dumps(small, "msgpack", "zstd")
    # §1.3: the container
    bad("container/empty", "§1.3 step 1", "an empty file", b"")
    bad("container/not-a-container", "§1.3 step 1", "JSON text, not a container",
        b'{"not": "a tracepack container, nor a torch program"}\n')  # fmt: skip
    bad("container/etdump", "§1.3 step 1", "an ExecuTorch ETDump's header (FlatBuffers identifier ED00): a "
        "ContainerError about the whole file, with no place (the C++ reader said InputError, found by cpp_reader)",
        b"\x1c\x00\x00\x00\x00\x00\x00\x00ED00" + bytes(20))  # fmt: skip
    bad("container/truncated-header", "§1.3 step 1", "the first 20 bytes of a file", base[:20])
    bad("container/truncated-header-47", "§1.3 step 1", "the first 47 bytes of a file", base[:47])
    bad("container/bad-magic", "§1.3 step 2", "byte 6 of the magic changed (\\x1a -> \\x1b)",
        base[:6] + b"\x1b" + base[7:])  # fmt: skip
    bad("container/header-crc", "§1.3 step 3", "a header byte changed without its CRC",
        base[:14] + b"\x03" + base[15:])  # fmt: skip
    bad("container/container-version", "§1.3 step 4", "container version 2", reheader(base, cver=2))
    bad("container/header-size", "§1.3 step 5", "header size 40", reheader(base, hsize=40))
    bad("container/unknown-codec", "§1.3 step 6", "codec id 5", reheader(base, codec=5))
    bad("container/unknown-compression", "§1.3 step 7", "compression id 2", reheader(base, comp=2))
    bad("container/unknown-flag", "§1.3 step 8", "flag bit 1 (reserved)", reheader(base, flags=2))
    bad("container/unknown-flag-15", "§1.3 step 8", "flag bit 15 (reserved)", reheader(base, flags=0x8000))
    bad("container/raw-length-uncompressed", "§1.3 step 9", "raw length != payload length without compression",
        reheader(base, rlen=len(base) - 47))  # fmt: skip
    bad("container/truncated-payload", "§1.3 step 10", "the payload cut short by one byte", base[:-1])
    bad("container/lying-payload-length", "§1.3 step 10", "a payload length far beyond the file (2^40)",
        reheader(base, plen=1 << 40, rlen=1 << 40))  # fmt: skip
    bad("container/trailing-bytes", "§1.3 step 11", "4 bytes after the payload", base + b"\0\0\0\0")
    bad("container/payload-crc", "§1.3 step 12", "a payload byte changed without its CRC",
        base[:-1] + bytes([base[-1] ^ 1]))  # fmt: skip
    out += [v for v in block_vectors() if v.id.startswith("invalid/")]
    bad("container/too-large", "§1.3 step 13, §9.6", "a declared raw length of 5 GiB (max_decompressed: 4 GiB)",
        reheader(zbase, rlen=5 << 30))  # fmt: skip
    bomb = zstandard.ZstdCompressor(level=19).compress(bytes(100 << 20))
    bad("container/zstd-bomb", "§1.3 step 14, §9.6",
        f"a real zstd bomb: 100 MiB of zeros in {len(bomb)} bytes, over the max_ratio budget (1000x above 64 MiB)",
        reheader(zbase[:48] + bomb, plen=len(bomb), rlen=100 << 20, pcrc=zlib.crc32(bomb)))  # fmt: skip
    udata = dumps(small, "msgpack", "user")
    bad("container/missing-dictionary", "§1.3 step 15, §8.3",
        "compressed with the user dictionary, read without it", udata)  # fmt: skip
    bad("container/wrong-dictionary", "§1.3 step 15, §8.3",
        "compressed with the built-in dictionary, read with the user dictionary given",
        dumps(small, "msgpack", "dict"), zstd_dict="dicts/user.dict")  # fmt: skip
    bad("container/withdrawn-dictionary", "§1.3 step 15, §8.2",
        "a dictionary id that was withdrawn (torch-export-4)", reheader(udata, dict=0x54504B04))  # fmt: skip
    bad("container/unknown-dictionary", "§1.3 step 15, §8.3", "dictionary id 0x54504BFF, built into nothing",
        reheader(udata, dict=0x54504BFF))  # fmt: skip
    zp = zbase[48:]
    corrupt = zp[:8] + bytes(b ^ 0x55 for b in zp[8:16]) + zp[16:]
    bad("container/zstd-corrupt", "§1.3 step 16, §8.1", "a damaged zstd frame (CRC-32 fixed)",
        with_payload(zbase, corrupt))  # fmt: skip
    bad("container/zstd-junk-after-frame", "§1.3 step 16, §8.1", "bytes after the zstd frame that are not a frame",
        with_payload(zbase, zp + b"junk"))  # fmt: skip
    raw_len = struct.unpack_from("<Q", zbase, 32)[0]
    bad("container/zstd-longer", "§1.3 step 17, §8.1", "the frame decompresses to more than the raw length",
        reheader(zbase, rlen=raw_len - 1))  # fmt: skip
    bad("container/zstd-shorter", "§1.3 step 17, §8.1", "the frame decompresses to less than the raw length",
        reheader(zbase, rlen=raw_len + 1))  # fmt: skip
    bad("container/schema-major", "§1.3 step 18, §10.2", "schema version 2.0", reheader(base, major=2, minor=0))
    bad("container/schema-major-0", "§1.3 step 18, §10.2", "schema version 0.9", reheader(base, major=0, minor=9))
    # §9.2.2: the payload header
    a = arrays(small)
    a[0][0] = "trackpack"
    bad("payload/magic", "§9.2.2", "the payload's header.magic is not 'tracepack'", mp(a))
    a = arrays(small)
    a[0][1] = [1, 1]
    bad("payload/version", "§9.2.2", "container 1.2, payload header 1.1", mp(a))
    out.extend(_json_vectors(small))
    out.extend(_msgpack_vectors(small))
    out.extend(_fbrows_vectors(small))
    out.extend(_columnar_vectors(small))
    out.extend(_fbcols_vectors(small))
    out.extend(_validation_vectors(small))
    out.extend(_render_vectors(small))
    return out


def _json_vectors(small: tracepack.Document) -> list[Vector]:
    out = []
    text = msgspec.json.encode(keyed(small))

    def bad(name: str, spec: str, what: str, payload: bytes) -> None:
        out.append(Vector(f"invalid/json/{name}", spec, what, repack(payload, "json")))

    bad("truncated", "§3.3", "the JSON text cut in the middle", text[: len(text) // 2])
    bad("trailing", "§3.3", "a second value after the document", text + b" {}")
    bad("bom", "§3.3", "a UTF-8 byte order mark first", b"\xef\xbb\xbf" + text)
    bad("duplicate-name", "§3.2", "an object with the name `major` twice",
        text.replace(b'"major":1', b'"major":1,"major":1', 1))  # fmt: skip
    bad("duplicate-escaped", "§3.2", "a name twice, once spelled with an escape (`\\u006dagic`)",
        text.replace(b'"magic":', b'"\\u006dagic":"x","magic":', 1))  # fmt: skip
    bad("utf8-ignored-member", "§3.3", "invalid UTF-8 in a member no reader knows",
        text.replace(b'"magic":', b'"zz":"\xff\xfe","magic":', 1))  # fmt: skip
    bad("utf8-string", "§3.3", "invalid UTF-8 in a string of the document",
        text.replace(b"conformance-probe-string", b"conformance-probe\xc3\x28string", 1))  # fmt: skip
    bad("lone-surrogate", "§3.3", "a lone surrogate escape in a string",
        text.replace(b"conformance-probe-string", b"conformance-probe\\ud800string", 1))  # fmt: skip
    bad("nan-word", "§3.3", "the word NaN (not JSON) for a float",
        text.replace(b'"value":2.5', b'"value":NaN', 1))  # fmt: skip
    k = keyed(small)
    k["graph"]["nodes"][0]["name"] = "relu"
    bad("wrong-type", "§3.1, §9.2.1", "a string where a string-table index is", msgspec.json.encode(k))
    k = keyed(small)
    k["graph"]["nodes"][0]["stack_style"] = "compact"
    bad("unknown-enum", "§3.1", "an enum name the schema does not have", msgspec.json.encode(k))
    k = keyed(small)
    k["graph"]["nodes"][0]["stack_style"] = 1
    bad("enum-number", "§3.1", "an enum as its number (JSON writes names)", msgspec.json.encode(k))
    k = keyed(small)
    k["graph"]["nodes"][0]["inputs"][0]["arg"]["kind"] = "tensor_list"
    bad("unknown-kind", "§3.1", "a union kind that is no variant", msgspec.json.encode(k))
    k = keyed(small)
    del k["graph"]["nodes"][0]["name"]
    bad("missing-required", "§3.2", "a node without its required `name`", msgspec.json.encode(k))
    k = keyed(small)
    k["graph"]["nodes"][0]["target"] = None
    bad("null-required", "§3.2", "null for a required field", msgspec.json.encode(k))
    k = keyed(small)
    k["graph"]["nodes"][0]["stack"] = 2**32
    bad("u32-range", "§3.1", "2^32 in a u32 field", msgspec.json.encode(k))
    bad("int-with-fraction", "§3.1", "1.0 for an integer field", text.replace(b'"major":1', b'"major":1.0', 1))
    bad("float-range", "§3.1", "1e400 for a float field", text.replace(b'"value":2.5', b'"value":1e400', 1))
    bad("too-deep", "§3.3, §9.6", "an unknown member nested 10,000 arrays deep (max_depth: 1,000)",
        text.replace(b'"magic":', b'"zz":' + b"[" * 10_000 + b"]" * 10_000 + b',"magic":', 1))  # fmt: skip
    bad("long-integer", "§9.6", "an integer of 5,000 digits in an unknown member (max_int_digits: 4,300)",
        text.replace(b'"magic":', b'"zz":' + b"7" * 5000 + b',"magic":', 1))  # fmt: skip
    bad("root-array", "§3.3", "a JSON array as the root", b"[" + text + b"]")
    return out


def _msgpack_vectors(small: tracepack.Document) -> list[Vector]:
    out = []
    payload = msgspec.msgpack.encode(arrays(small))

    def bad(name: str, spec: str, what: str, data: bytes) -> None:
        out.append(Vector(f"invalid/msgpack/{name}", spec, what, repack(data, "msgpack")))

    def changed(change: Callable[[Any], None]) -> bytes:
        a = arrays(small)
        change(a)
        return msgspec.msgpack.encode(a)

    def node(a: Any, i: int = 0) -> Any:
        return a[10][3][i]

    bad("truncated", "§4.4", "the payload cut in the middle", payload[: len(payload) // 2])
    bad("trailing", "§4.4", "a second value after the document", payload + b"\xc0")
    bad("root-map", "§4.4", "a map as the root", msgspec.msgpack.encode({"header": 1}))
    bad("invalid-opcode", "§4.4", "the never-used byte 0xc1 as a value",
        payload.replace(b"\x92\x01\x02", b"\x92\x01\xc1", 1))  # fmt: skip
    bad("wrong-type", "§4.1, §9.2.1", "a string where a node's name index is",
        changed(lambda a: node(a).__setitem__(0, "relu")))  # fmt: skip
    bad("bool-for-int", "§4.1", "true where an integer is", changed(lambda a: node(a).__setitem__(4, True)))
    bad("bin-for-str", "§4.1", "bin where a string is (the producer name)",
        payload.replace(b"\xabconformance", b"\xc4\x0bconformance", 1))  # fmt: skip
    bad("nil-required", "§4.1", "nil for a required field", changed(lambda a: node(a).__setitem__(1, None)))
    bad("unknown-enum", "§4.1", "stack_style 7", changed(lambda a: node(a).__setitem__(5, 7)))
    bad("unknown-variant", "§4.3", "union variant id 99", changed(lambda a: node(a)[2][0][1].__setitem__(0, 99)))
    bad("empty-union", "§4.3", "a union as an empty array", changed(lambda a: node(a)[2][0].__setitem__(1, [])))
    bad("short-struct", "§4.2", "a node array without its required target", changed(lambda a: node(a).__delitem__(
        slice(1, None))))  # fmt: skip
    bad("u32-range", "§4.1", "2^32 in a u32 field", changed(lambda a: node(a).__setitem__(4, 2**32)))
    bad("negative-u32", "§4.1", "-1 in a u32 field", changed(lambda a: node(a).__setitem__(0, -1)))
    bad("utf8", "§4.1", "invalid UTF-8 in a string",
        payload.replace(b"conformance-probe-string", b"conformance-probe\xed\xa0\x80tring", 1))  # fmt: skip
    deep = b"\x91" * 10_000 + b"\x90"
    bad("too-deep", "§4.4, §9.6", "an extra trailing element nested 10,000 arrays deep (max_depth: 1,000)",
        payload.replace(b"\x92\x01\x02", b"\x93\x01\x02" + deep, 1))  # fmt: skip
    assert payload.endswith(b"\xc0")  # module_calls, absent: the last value
    bad("lying-array-length", "§4.4", "the last value an array claiming 2^32-1 elements, then the payload's end",
        payload[:-1] + b"\xdd\xff\xff\xff\xff")  # fmt: skip
    return out


def _fbrows_vectors(small: tracepack.Document) -> list[Vector]:
    out = []
    fb = fbc.codec_module(CURRENT)
    raw = raw_of(small)
    body = fbrows_raw(raw)

    def bad(name: str, spec: str, what: str, payload: bytes) -> None:
        out.append(Vector(f"invalid/fbrows/{name}", spec, what, repack(payload, "flatbuffers-rows")))

    def patch(data: bytes, at: int, value: bytes) -> bytes:
        return data[:at] + value + data[at + len(value) :]

    bad("identifier", "§5.3", "file identifier TPKX", patch(body, 4, b"TPKX"))
    bad("too-short", "§5.1", "a 4-byte buffer", b"\x08\x00\x00\x00")
    bad("root-out-of-bounds", "§5.1", "a root offset past the buffer", patch(body, 0, struct.pack("<I", 1 << 30)))
    root = struct.unpack_from("<I", body, 0)[0]
    bad("vtable-out-of-bounds", "§5.1", "the root table's vtable offset pointing before the buffer",
        patch(body, root, struct.pack("<i", 0x7FFFFFF0)))  # fmt: skip
    r = rt.Reader(body)
    v = r.fields(r.root(b"TPK1"), fb._S_DOCUMENT)
    bad("vector-overrun", "§5.1", "the string table's vector claims 2^24 elements",
        patch(body, v[1], struct.pack("<I", 1 << 24)))  # fmt: skip
    probe = body.index(b"conformance-probe-string")
    bad("string-no-nul", "§5.1", "a string whose NUL terminator is not there",
        patch(body, probe + len(b"conformance-probe-string"), b"x"))  # fmt: skip
    bad("string-utf8", "§5.1", "invalid UTF-8 in a string", patch(body, probe + 3, b"\xff"))
    bad("string-overrun", "§5.1", "a string length past the buffer",
        patch(body, probe - 4, struct.pack("<I", len(body))))  # fmt: skip
    bad_enum = raw_of(small)
    bad_enum.graph.nodes[0].stack_style = 9
    bad("unknown-enum", "§5.3", "stack_style 9", fbrows_raw(bad_enum))
    table = dict(fb._U_ARGUMENT_ENC)
    tag, write = table[m.ArgTensor]
    fb._U_ARGUMENT_ENC[m.ArgTensor] = (77, write)
    try:
        variant = fbrows_raw(raw)
    finally:
        fb._U_ARGUMENT_ENC[m.ArgTensor] = (tag, write)
    bad("unknown-variant", "§5.3", "union type 77 for every tensor argument", variant)

    def header_without_magic(w: Any, o: Any) -> int:
        a1 = fb._e_version(w, o.version)
        a2 = fb._e_producer(w, o.producer) if o.producer is not None else 0
        return int(w.table(fb._S_HEADER, 2 | (a2 != 0) << 2, (0, a1, a2, 0)))

    with patched(fb, "_e_header", header_without_magic):
        missing = fbrows_raw(raw)
    bad("required-missing", "§5.3", "the header table without its required magic", missing)

    def shared_nodes(w: Any, items: list[Any]) -> int:
        at = fb._e_node(w, items[0])
        return int(w.offsets([at] * 20_000))

    wide = raw_of(small)  # node 0 holds one vector only: every element counted past the nodes is its
    n0 = wide.graph.nodes[0]
    n0.inputs, n0.outputs, n0.meta_keys, n0.meta_values = [], [], [], [0] * 1000
    with patched(fb, "_ev_node", shared_nodes):
        shared = fbrows_raw(wide)
    bad("shared-objects", "§5.1, §9.6",
        f"20,000 offsets to one node whose meta_values hold 1,000 items: {len(shared)} bytes that decode to 20 million "
        "elements (the budget: 2 x bytes + 1024)", shared)  # fmt: skip
    return out


def _columnar_vectors(small: tracepack.Document) -> list[Vector]:
    out = []

    def bad(name: str, spec: str, what: str, payload: bytes) -> None:
        out.append(Vector(f"invalid/columnar/{name}", spec, what, repack(payload, "columnar")))

    def changed(change: Callable[[dict[str, Any]], None], *, numbered: bool = True) -> bytes:
        p = columns_payload(small)
        change(p["columns"])
        return columnar_bytes(p, numbered=numbered)

    cols = columns_payload(small)
    bad("not-a-map", "§6.1", "an array as the payload", msgspec.msgpack.encode([1, 2, 3]))
    bad("format", "§6.1", "format marker 'tracepack-rows'",
        columnar_bytes(dict(cols, format="tracepack-rows")))  # fmt: skip
    bad("layout", "§6.1", "layout 4", columnar_bytes(dict(cols, layout=4)))
    bad("layout-1-number", "§6.1", "layout 1 with a column keyed by number", columnar_bytes(dict(cols, layout=1)))
    both = columnar_bytes(cols)
    extra_key = msgspec.msgpack.encode("$.graph.nodes[].stack")
    entry = msgspec.msgpack.encode(cols["columns"]["$.graph.nodes[].stack"])
    n = len(cols["columns"])
    head = msgspec.msgpack.encode({"format": cols["format"], "layout": cols["layout"]})
    numbered = msgspec.msgpack.encode({columnar.path_numbers()[1][p]: v for p, v in cols["columns"].items()})
    assert numbered[0] == 0xDE
    grown = b"\xde" + (n + 1).to_bytes(2, "big") + numbered[3:]
    bad("by-name-and-number", "§6.1", "the node stack column stored by number and by name",
        b"\x83" + head[1:] + b"\xa7columns" + grown + extra_key + entry)  # fmt: skip
    number = msgspec.msgpack.encode(columnar.path_numbers()[1]["$.graph.nodes[].stack"])
    bad("key-twice", "§6.1", "the columns map with one number twice",
        b"\x83" + head[1:] + b"\xa7columns" + grown + number + entry)  # fmt: skip
    bad("payload-key-twice", "§6.1", "the payload map with `layout` twice", b"\x84" + both[1:] + b"\xa6layout\x02")
    bad(
        "unknown-encoding",
        "§6.4",
        "encoding 'rle'",
        changed(lambda c: c.__setitem__("$.graph.nodes[].stack", ["rle", c["$.graph.nodes[].stack"][1]])),
    )
    bad(
        "delta-on-strings",
        "§6.4.2",
        "delta on the string table's column",
        changed(lambda c: c.__setitem__("$.strings[]", ["delta", [1] * len(c["$.strings[]"][1])])),
    )
    bad(
        "forms-on-integers",
        "§6.4.3",
        "forms on an integer column",
        changed(lambda c: c.__setitem__("$.graph.nodes[].stack", ["forms", [[], [], [], [], []]])),
    )
    bad("count", "§6.5", "a node column with one value too many",
        changed(lambda c: c["$.graph.nodes[].target"][1].append(0)))  # fmt: skip
    bad("len-negative", "§6.4.1", "a -1 in a #len column",
        changed(lambda c: c.__setitem__("$.graph.nodes[].inputs#len", ["plain", [-1, 2, 1]])))  # fmt: skip
    bad("len-sum", "§6.5", "#len values that add up to more items than the items' columns hold",
        changed(lambda c: c.__setitem__("$.graph.nodes[].inputs#len", ["plain", [1, 4, 1]])))  # fmt: skip
    bad("len-delta-negative", "§6.4.2", "a delta-coded #len whose running sum goes below 0",
        changed(lambda c: c.__setitem__("$.graph.nodes[].inputs#len", ["delta", [1, 1, -3]])))  # fmt: skip
    bad("unknown-variant", "§6.4.1", "variant id 99 in a #tag column",
        changed(lambda c: c["$.graph.nodes[].inputs[].arg#tag"][1].__setitem__(0, 99)))  # fmt: skip
    bad("unknown-enum", "§6.4.1", "stack_style 5",
        changed(lambda c: c.__setitem__("$.graph.nodes[].stack_style", ["plain", [1, 5, 1]])))  # fmt: skip
    bad("enum-delta", "§6.4.2", "a delta-coded enum column whose sums leave the enum",
        changed(lambda c: c.__setitem__("$.graph.nodes[].stack_style", ["delta", [1, 1, 1]])))  # fmt: skip
    bad("range", "§6.4.1", "2^32 in a u32 column",
        changed(lambda c: c["$.graph.nodes[].target"][1].__setitem__(0, 2**32)))  # fmt: skip
    bad("delta-range", "§6.4.2", "a delta-coded u32 column whose sums pass 2^32-1",
        changed(lambda c: c.__setitem__("$.graph.nodes[].target", ["delta", [2**32 - 1, 1, 0]])))  # fmt: skip
    bad("wrong-type", "§6.4.1", "strings in an integer column",
        changed(lambda c: c.__setitem__("$.graph.nodes[].target", ["plain", ["a", "b", "c"]])))  # fmt: skip
    utf8 = changed(lambda c: None)
    at = utf8.index(b"conformance-probe-string")
    bad("utf8", "§6.4.1", "invalid UTF-8 in the string table's column", utf8[:at] + b"\xff" + utf8[at + 1 :])
    bad("missing-required", "§6.5", "the node name column left out (name has no default)",
        changed(lambda c: c.__delitem__("$.graph.nodes[].name")))  # fmt: skip
    bad("missing-items", "§6.5", "a #len column whose items' column is missing",
        changed(lambda c: c.__delitem__("$.graph.nodes[].meta_keys[]")))  # fmt: skip
    deep = b"\x91" * 10_000 + b"\x90"
    bad("too-deep", "§9.6", "an unknown column nested 10,000 arrays deep",
        b"\x83" + head[1:] + b"\xa7columns" + grown + b"\xa2zz\x92\xa5plain" + deep)  # fmt: skip
    # forms (§6.4.3), on the string table: [literals, steps, prefixes, suffixes, residuals]
    strings = cols["columns"]["$.strings[]"][1]
    nstr = len(strings)
    target = "relu_1;relu"  # node relu's torch_fn: literals `relu_` and `;relu` around the number 1
    lits = ["" if s == target else s for s in strings] + ["relu_", ";relu"]

    def forms(value: list[Any]) -> bytes:
        return changed(lambda c: c.__setitem__("$.strings[]", ["forms", value]))

    row = strings.index(target)
    ok = [lits, [row], [nstr], [nstr + 1], [1]]
    out.append(Vector("valid/special/columnar-forms-handmade", "§6.4.3",
                      "the string table as forms: `relu_1;relu` as the literals `relu_` and `;relu` (appended after "
                      "the rows) around the number 1 (residual 1: the first number predicted is 0)",
                      repack(forms(ok), "columnar"), group="small"))  # fmt: skip
    bad("forms-shape", "§6.4.3", "a forms value of four lists", forms(ok[:4]))
    bad("forms-lengths", "§6.4.3", "forms lists of different lengths", forms([lits, [row], [nstr], [nstr + 1], []]))
    bad("forms-few-literals", "§6.4.3", "fewer literals than rows", forms([lits[: nstr - 1], [], [], [], []]))
    bad("forms-row-past", "§6.4.3", "a form for a row past the column", forms([lits, [nstr], [nstr], [nstr + 1], [0]]))
    bad("forms-steps", "§6.4.3", "two forms for one row (a step of 0)",
        forms([lits, [row, 0], [nstr, nstr], [nstr + 1, nstr + 1], [0, 0]]))  # fmt: skip
    bad("forms-literal-at-form", "§6.4.3", "a form on a row that holds a literal",
        forms([[*strings, "relu_", ";relu"], [row], [nstr], [nstr + 1], [1]]))  # fmt: skip
    bad("forms-prefix-range", "§6.4.3", "a prefix index past the literals", forms([lits, [row], [nstr + 5], [nstr + 1],
                                                                                   [0]]))  # fmt: skip
    bad("forms-prefix-is-form", "§6.4.3", "a prefix index that is a form's row",
        forms([lits, [row], [row], [nstr + 1], [0]]))  # fmt: skip
    bad(
        "forms-affix-long",
        "§6.4.3",
        "prefix + suffix of 257 characters",
        forms([[*strings[:row], "", *strings[row + 1 :], "p" * 200, "s" * 57], [row], [nstr], [nstr + 1], [0]]),
    )
    bad("forms-number-overflow", "§6.4.3, §9.6", "a form number of 10^18 (the counter past 18 digits)",
        forms([lits, [row], [nstr], [nstr + 1], [10**18]]))  # fmt: skip
    bad("forms-number-negative", "§6.4.3", "a form number below 0", forms([lits, [row], [nstr], [nstr + 1], [-2]]))
    bad("forms-residual-range", "§6.4.3", "a residual past the i64 range",
        forms([lits, [row], [nstr], [nstr + 1], [2**63]]))  # fmt: skip
    out.extend(_lag_vectors(small))
    return out


def _lag_vectors(small: tracepack.Document) -> list[Vector]:
    """§6.4.4: ``lag`` columns (layout 3) made by hand on the small document, good and bad."""
    out = []
    cols = columns_payload(small)
    assert cols["layout"] == columnar.LAYOUT  # too small for the writer to lag any column: the base is layout 2

    def lagged(path: str, value: Any, layout: int = columnar.LAG_LAYOUT) -> bytes:
        c = columns_payload(small)
        c["columns"][path] = ["lag", value]
        return columnar_bytes(dict(c, layout=layout))

    def bad(name: str, spec: str, what: str, payload: bytes) -> None:
        out.append(Vector(f"invalid/columnar/{name}", spec, what, repack(payload, "columnar")))

    target = "$.graph.nodes[].target"
    values = cols["columns"][target]
    assert values[0] == "plain"
    assert len(values[1]) == 3
    v = values[1]
    for lag in (1, 2, 5):
        deltas = [x - (v[i - lag] if i >= lag else 0) for i, x in enumerate(v)]
        out.append(Vector(f"valid/special/columnar-lag-{lag}", "§6.1, §6.4.4",
                          f"layout 3 with the node target column lag-coded with lag {lag}: [{lag}, {deltas}] "
                          f"for {v}", repack(lagged(target, [lag, deltas]), "columnar"), group="small"))  # fmt: skip
    plain = [v[0], v[1] - v[0], v[2] - v[0]]  # lag 2 for rows 0 and 1, then row 2 from row 0
    bad("lag-layout-2", "§6.1, §6.4.4", "a lag column in a layout 2 payload", lagged(target, [2, plain], layout=2))
    bad("lag-zero", "§6.4.4", "lag 0", lagged(target, [0, v]))
    bad("lag-65", "§6.4.4", "lag 65 (past 64)", lagged(target, [65, v]))
    bad("lag-shape", "§6.4.4", "a lag value that is the differences alone, without the lag", lagged(target, v))
    bad("lag-count", "§6.4.4, §6.5", "a lag column with one difference too few", lagged(target, [2, plain[:2]]))
    bad("lag-on-strings", "§6.4.4", "lag on the string table's column",
        lagged("$.strings[]", [2, [0] * len(cols["columns"]["$.strings[]"][1])]))  # fmt: skip
    bad("lag-range", "§6.4.4", "a lag-coded u32 column whose sums pass 2^32-1",
        lagged(target, [2, [2**32 - 1, 0, 1]]))  # fmt: skip
    bad("lag-enum", "§6.4.4", "a lag-coded enum column whose sums leave the enum",
        lagged("$.graph.nodes[].stack_style", [2, [1, 1, 4]]))  # fmt: skip
    return out


def _fbcols_vectors(small: tracepack.Document) -> list[Vector]:
    out = []
    raw = raw_of(small)
    values = shredded(raw)

    def bad(name: str, spec: str, what: str, buffer: bytes) -> None:
        payload = fbc.with_side_index(buffer, fbc.side_index(raw))
        out.append(Vector(f"invalid/fbcols/{name}", spec, what, repack(payload, "flatbuffers-columns")))

    def changed(change: Callable[[dict[str, tuple[int, Any]]], None]) -> bytes:
        v = dict(values)
        change(v)
        return fbcolumns._write(v)

    body = fbcolumns._write(values)
    bad("identifier", "§7.1", "file identifier TPKX", body[:4] + b"TPKX" + body[8:])
    bad("layout", "§7.4", "layout 2", columns_buffer(values, layout=2))
    paths = ("\0".join(values) + "\0").encode()
    bad("paths-no-nul", "§7.4", "the paths without their last NUL", columns_buffer(values, paths=paths[:-1]))
    bad("paths-utf8", "§7.4", "invalid UTF-8 in the paths", columns_buffer(values, paths=b"\xff" + paths[1:]))
    kinds = bytes(k for k, _ in values.values())
    bad("kinds-count", "§7.4", "one kind fewer than paths", columns_buffer(values, kinds=kinds[:-1]))
    bad("unknown-kind", "§7.4", "kind 12", columns_buffer(values, kinds=kinds[:-1] + b"\x0c"))
    first = next(iter(values))
    twice = paths.replace(list(values)[1].encode() + b"\0", first.encode() + b"\0", 1)
    bad("path-twice", "§7.4", "a path twice in the directory", columns_buffer(values, paths=twice))
    u8 = [v for k, vals in values.values() if k == 2 for v in vals]
    bad("vector-count", "§7.4", "the uint8 vector with one value more than its columns count",
        columns_buffer(values, uint8=bytes([*u8, 0])))  # fmt: skip
    text = b"".join(s.encode() + b"\0" for k, vals in values.values() if k == 10 for s in vals)
    bad("text-no-nul", "§7.4", "the text without its last NUL", columns_buffer(values, text=text[:-1]))
    bad("text-count", "§7.4", "one text value more than the text columns count",
        columns_buffer(values, text=text + b"extra\0"))  # fmt: skip
    # a directory that declares billions of text values for a text of a few hundred bytes: a reader that
    # sizes anything by the declared count before it counts the text runs out of memory (the C++ lazy
    # reader did, found by the cpp_reader fuzzer); `trace` reaches the lazy readers
    inflated = [len(vals) + (4_000_000_000 if k == 10 else 0) for k, vals in values.values()]
    for command in ("cat", "trace"):
        payload = fbc.with_side_index(columns_buffer(values, counts=inflated), fbc.side_index(raw))
        out.append(Vector(f"invalid/fbcols/text-count-declared-{command}", "§7.4, §9.6",
                          "every text column declaring 4,000,000,000 values more than the text holds",
                          repack(payload, "flatbuffers-columns"), command=command,
                          args=["#0"] if command == "trace" else []))  # fmt: skip
    # no nodes, but node columns with values: §6.5's n == 0 rule says they are not looked at, by the lazy
    # readers either (the C++ lazy reader refused them on opening, found by the cpp_reader fuzzer)
    kind, _ = values["$.graph.nodes#len"]
    payload = changed(lambda v: v.__setitem__("$.graph.nodes#len", (kind, [0])))  # no side index: none needed
    out.append(Vector("invalid/trace/stray-node-columns", "§6.5, §7.3, §11.3",
                      "trace #0 of a document of 0 nodes whose node columns hold values (ignored: no rows)",
                      repack(payload, "flatbuffers-columns"), command="trace", args=["#0"]))  # fmt: skip
    bad("text-utf8", "§7.4", "invalid UTF-8 in the text",
        columns_buffer(values, text=text.replace(b"conformance-probe", b"\xffonformance-probe")))  # fmt: skip
    bad("text-index", "§7.4", "a text_index entry that is not where a value starts",
        columns_buffer(values, text_index=[1]))  # fmt: skip
    bad("vector-overrun", "§5.1, §7.4", "a vector whose count runs past the buffer",
        _overrun_counts(body))  # fmt: skip
    bad("wrong-kind", "§7.4", "a float64 column where integers are",
        changed(lambda v: v.__setitem__("$.graph.nodes[].target", (9, [1.0, 2.0, 3.0]))))  # fmt: skip
    bools = [int(x) for k, vals in values.values() if k == 0 for x in vals]
    bad("bool-value", "§7.4", "a bool column holding 2 (the header's producer#present)",
        columns_buffer(values, bool=bytes([2, *bools[1:]])))  # fmt: skip
    bad(
        "tag-zero",
        "§7.3",
        "#tag 0 (none) for a required union",
        changed(
            lambda v: v.__setitem__(
                "$.graph.nodes[].inputs[].arg#tag", (2, [0, *list(v["$.graph.nodes[].inputs[].arg#tag"][1][1:])])
            )
        ),
    )
    bad("range", "§7.4", "a uint64 value past u32 in a u32 column",
        changed(lambda v: v.__setitem__("$.graph.nodes[].target", (8, [2**32, 1, 2]))))  # fmt: skip
    bad(
        "count",
        "§7.4",
        "a node column with a value too many",
        changed(lambda v: v.__setitem__("$.graph.nodes[].name", (2, [*v["$.graph.nodes[].name"][1], 0]))),
    )
    bad("len-sum", "§6.5, §7.3", "#len values that add up to more items than the items' column holds",
        changed(lambda v: v.__setitem__("$.graph.nodes[].inputs#len", (2, [1, 4, 1]))))  # fmt: skip
    bad("missing-required", "§6.5, §7.3", "the node target column left out",
        changed(lambda v: v.__delitem__("$.graph.nodes[].target")))  # fmt: skip
    blob = dict(values)
    blob["$.strings[]"] = (11, blob["$.strings[]"][1])
    body_blob = fbcolumns._write(blob)
    bad("blob-utf8", "§7.4", "a blob string column with invalid UTF-8",
        body_blob.replace(b"conformance-probe", b"\xffonformance-probe"))  # fmt: skip
    blob_bytes = b"".join(s.encode() for s in blob["$.strings[]"][1])
    bad("blob-overrun", "§7.4", "blob value lengths past the end of the blob vector",
        columns_buffer(blob, blob=blob_bytes[:-3]))  # fmt: skip
    bad("blob-extra", "§7.4", "a blob vector longer than its columns' values",
        columns_buffer(blob, blob=blob_bytes + b"xyz"))  # fmt: skip
    return out


def _overrun_counts(body: bytes) -> bytes:
    r = rt.Reader(body)
    v = r.fields(r.root(fbcolumns.FILE_IDENTIFIER), fbcolumns.ROOT_SPEC)
    at = v[3]  # counts
    return body[:at] + struct.pack("<I", 1 << 28) + body[at + 4 :]


def _validation_vectors(small: tracepack.Document) -> list[Vector]:
    out = []

    def bad(name: str, spec: str, what: str, change: Callable[[Any], None]) -> None:
        raw = raw_of(small)
        change(raw)
        out.append(Vector(f"invalid/validation/{name}", spec, what, mp(raw)))

    bad("string-0", "§9.4.1 V1", "strings[0] is not empty", lambda r: r.strings.__setitem__(0, "x"))
    bad("column-length", "§9.4.1 V2", "lines.line one entry short", lambda r: r.lines.line.pop())
    bad("sparse-column-length", "§9.4.1 V2", "frames.col neither empty nor one per row",
        lambda r: setattr(r.frames, "col", [-1]))  # fmt: skip
    bad("empty-table", "§9.4.1 V3", "a reference target (files) with no rows",
        lambda r: setattr(r, "files", m.FileTable([])))  # fmt: skip
    bad("trie-root", "§9.4.1 V4", "stacks.parent[0] is not 0", lambda r: r.stacks.parent.__setitem__(0, 1))
    bad("trie-cycle", "§9.4.1 V4", "a stack row whose parent is itself (parent >= self)",
        lambda r: r.stacks.parent.__setitem__(2, 2))  # fmt: skip
    bad("trie-forward", "§9.4.1 V4", "a module row whose parent comes after it",
        lambda r: r.modules.parent.__setitem__(1, 2))  # fmt: skip
    bad("ref-node-stack", "§9.4.1 V5", "a node's stack row past the stack table",
        lambda r: setattr(r.graph.nodes[0], "stack", len(r.stacks.parent)))  # fmt: skip
    bad("ref-column", "§9.4.1 V5", "a frame's line row past the line table",
        lambda r: r.frames.line.__setitem__(1, 99))  # fmt: skip
    bad("ref-string", "§9.4.1 V5", "a node name past the string table",
        lambda r: setattr(r.graph.nodes[1], "name", len(r.strings)))  # fmt: skip
    bad("ref-in-union", "§9.4.1 V5", "a tensor argument's name past the string table",
        lambda r: setattr(r.graph.nodes[1].inputs[0].arg, "name", 10_000))  # fmt: skip
    bad("ref-sentinel", "§9.4.1 V5", "meta_values -3 (sentinels go down to -2)",
        lambda r: r.graph.nodes[0].meta_values.__setitem__(0, -3))  # fmt: skip
    bad(
        "ref-absent-table",
        "§9.4.1 V5",
        "a from_node row with no provenance table",
        lambda r: setattr(r, "provenance", None),
    )
    bad("ref-debug-handle", "§9.4.1 V5", "a debug handle's range past the range table",
        lambda r: r.debug_handles.range.__setitem__(0, 50))  # fmt: skip
    bad("meta-lengths", "§9.4.2 D1", "more meta_keys than meta_values",
        lambda r: r.graph.nodes[0].meta_keys.append(1))  # fmt: skip
    bad("source-lines", "§9.4.2 D2", "line counts that do not add up to the lines pool",
        lambda r: r.sources.line_count.__setitem__(1, r.sources.line_count[1] + 1))  # fmt: skip
    bad("from-node-index", "§9.4.2 D3", "from_node_meta_index past the metadata",
        lambda r: setattr(r.graph.nodes[0], "from_node_meta_index", 9))  # fmt: skip

    def lifted_and_key(r: Any) -> None:
        node = r.graph.nodes[0]
        r.strings.append("from_node")
        node.meta_keys[0] = len(r.strings) - 1
        node.from_node_meta_index = 0

    bad("from-node-twice", "§9.4.2 D3", "a lifted from_node and a from_node metadata key", lifted_and_key)
    bad("child-count", "§9.4.2 D4", "provenance child counts that do not add up",
        lambda r: r.provenance.child_count.__setitem__(1, 5))  # fmt: skip
    bad("child-order", "§9.4.2 D5", "a provenance child that is not below its row",
        lambda r: r.provenance.children.__setitem__(0, 2))  # fmt: skip
    bad("handles-order", "§9.4.2 D6", "debug handles not ascending",
        lambda r: r.debug_handles.handle.__setitem__(0, 9))  # fmt: skip
    return out


def _render_vectors(small: tracepack.Document) -> list[Vector]:
    """Budgets of rendering (§2.9, §9.6) and lookups (§11.3), through `trace`."""
    out = []
    base = dumps(small, "msgpack", "none")
    out.append(Vector("invalid/trace/no-such-node", "§11.3", "trace of a node name the document does not have",
                      base, command="trace", args=["relu", "no_such_node"]))  # fmt: skip
    out.append(Vector("invalid/trace/index-past-end", "§11.3", "trace of index #3 in a 3-node document",
                      base, command="trace", args=["#3"]))  # fmt: skip
    b = DocumentBuilder(producer="conformance", producer_version="1")
    name = "/" + "d" * 30_000 + ".py"
    frames = [(name, i + 1, "f", "") for i in range(10_000)]
    b.add_node("huge", "op", stack_trace=frames)
    huge = dumps(b.build(), "columnar", "zstd")
    out.append(Vector("invalid/trace/rendered-budget", "§2.9.2, §9.6",
                      f"a stack of 10,000 frames naming one 30,000-character file: {len(huge)} bytes whose trace "
                      "would render to 300 million characters (max_rendered: 256 Mi)",
                      huge, command="trace", args=["huge"]))  # fmt: skip
    return out


# -- running the reference implementation ---------------------------------------------------------------


def run_cli(argv: list[str]) -> tuple[int, bytes, bytes]:
    """``tracepack ARGV`` in this process: exit code, standard output, standard error."""
    from tracepack.cli import main

    out, err = io.BytesIO(), io.BytesIO()
    saved = sys.stdout, sys.stderr
    wrappers = io.TextIOWrapper(out, encoding="utf-8", newline=""), io.TextIOWrapper(err, encoding="utf-8", newline="")
    sys.stdout, sys.stderr = wrappers
    try:
        code = main(argv)
    finally:
        sys.stdout, sys.stderr = saved
        for w in wrappers:
            w.flush()
            w.detach()  # the BytesIO stays open
    return code, out.getvalue(), err.getvalue()


def expectation(v: Vector, path: Path) -> tuple[dict[str, Any], bytes | None]:
    argv = [v.command, "--error-format", "json"]
    if v.zstd_dict:
        argv += ["--zstd-dict", str(HERE / v.zstd_dict)]
    argv += [str(path), *v.args]
    code, stdout, stderr = run_cli(argv)
    if code == 0:
        return {"exit": 0}, stdout
    if code != 2 or stdout or stderr.count(b"\n") != 1:
        raise SystemExit(f"{v.id}: the reference exits {code} ({stderr[:300]!r}); vectors expect 0 or 2")
    report = json.loads(stderr)
    return {"exit": 2, "error": report["error"], "place": report["place"]}, None


# -- writing and checking -------------------------------------------------------------------------------


def build(*, check: bool = False) -> tuple[dict[str, bytes], dict[str, Any]]:
    """Every file of the suite (relative to conformance/) and the manifest, in memory."""
    if check and not USER_DICT.exists():
        raise SystemExit(f"conformance/dicts/user.dict is missing; restore it (git checkout) or run {FIX}")
    if not USER_DICT.exists():
        USER_DICT.parent.mkdir(parents=True, exist_ok=True)
        USER_DICT.write_bytes(make_user_dict())
    files: dict[str, bytes] = {}
    vectors = valid_vectors() + invalid_vectors()
    ids = [v.id for v in vectors]
    assert len(set(ids)) == len(ids), "vector ids are unique"
    entries = []
    outputs: dict[str, bytes] = {}  # expected file name -> content
    by_content: dict[bytes, str] = {}
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for v in vectors:
            path = HERE / v.file if v.data is None else Path(tmp) / (v.id.replace("/", "__") + ".tpk")
            if v.data is not None:
                path.write_bytes(v.data)
                files[v.file] = v.data
            expect, stdout = expectation(v, path)
            if v.id.startswith("valid/") != (expect["exit"] == 0):
                raise SystemExit(f"{v.id}: the reference gives {expect}")
            if stdout is not None:
                name = by_content.get(stdout)
                if name is None:
                    stem = v.group or v.id.replace("/", "-")
                    suffix = ".txt" if v.command == "trace" else ".json"
                    name = f"expected/{stem}{suffix}" + (".gz" if len(stdout) > GZIP_OVER else "")
                    assert name not in outputs, f"{name}: two outputs for one group"
                    by_content[stdout] = name
                    outputs[name] = stdout
                expect["stdout"] = name
            entry: dict[str, Any] = {"id": v.id, "file": v.file, "command": v.command}
            if v.args:
                entry["args"] = v.args
            if v.zstd_dict:
                entry["zstd_dict"] = v.zstd_dict
            entries.append({**entry, "expect": expect, "spec": v.spec, "what": v.what})
    for name, content in outputs.items():
        files[name] = gzip.compress(content, mtime=0) if name.endswith(".gz") else content
    manifest = {
        "format": "tracepack-conformance",
        "version": 1,
        "spec": "spec/12-conformance.md",
        "schema_version": f"{CURRENT[0]}.{CURRENT[1]}",
        "protocol": "IMPL COMMAND --error-format json [--zstd-dict DICT] FILE [ARGS...]",
        "vectors": entries,
    }
    files["manifest.json"] = (json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode()
    return files, manifest


def _same(name: str, new: bytes, old: bytes) -> bool:
    """Whether a committed file is what the generator writes: equal bytes, or (zstd's output differs between
    zstd versions) a container whose header and decompressed payload are equal, or gzip with equal content."""
    if new == old:
        return True
    if name.endswith(".gz"):
        return gzip.decompress(new) == gzip.decompress(old)
    if name.endswith(".tpk") and len(new) >= 48 and len(old) >= 48 and new[17] == old[17] == 1:

        def fields(h: bytes) -> bytes:  # the header but the stored length and the CRCs
            return h[:24] + h[32:40]

        try:
            return fields(new[:48]) == fields(old[:48]) and payload_plain(new) == payload_plain(old)
        except Exception:
            return False
    return False


def payload_plain(data: bytes) -> bytes:
    head = data[:48]
    dict_id = struct.unpack_from("<I", head, 20)[0]
    zd = None
    if dict_id == USER_DICT_ID:
        zd = user_dict()
    elif dict_id:
        from tracepack import dictionaries

        zd = dictionaries.by_id(dict_id)
    dctx = zstandard.ZstdDecompressor(dict_data=zd) if zd is not None else zstandard.ZstdDecompressor()
    return dctx.decompressobj().decompress(data[48:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m conformance.generate", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="compare with the committed suite instead of writing")
    args = p.parse_args(argv)
    files, manifest = build(check=args.check)
    existing = {
        str(f.relative_to(HERE)) for d in (VECTORS, EXPECTED) if d.exists() for f in d.rglob("*") if f.is_file()
    }
    if args.check:
        stale = [
            n for n, data in files.items() if not (HERE / n).exists() or not _same(n, data, (HERE / n).read_bytes())
        ]
        extra = sorted(existing - set(files))
        if stale or extra:
            for n in stale:
                print(f"stale: conformance/{n}", file=sys.stderr)
            for n in extra:
                print(f"not written by the generator: conformance/{n}", file=sys.stderr)
            print(f"conformance/ is out of date; fix it with: {FIX}", file=sys.stderr)
            return 1
        print(f"conformance/ is up to date ({len(manifest['vectors'])} vectors)")
        return 0
    for n in sorted(existing - set(files)):
        (HERE / n).unlink()
    written = 0
    for n, data in files.items():
        target = HERE / n
        if target.exists() and _same(n, data, target.read_bytes()):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written += 1
    total = sum(len(d) for d in files.values())
    print(f"{len(manifest['vectors'])} vectors, {len(files)} files ({total:,} bytes); {written} written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
