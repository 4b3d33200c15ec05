"""Write the golden files of a schema version: one feature-complete document in every codec.

::

    python tests/golden/make_golden.py                       # json + msgpack of the current version
    python tests/golden/make_golden.py --codec flatbuffers-rows   # add a codec to the existing folders
    python tests/golden/make_golden.py --version 1.0 --codec flatbuffers-rows   # an older version (downgraded)

``tests/golden/<version>/`` holds ``<codec>.tpk`` and ``<codec>-zstd.tpk`` for
every codec, and ``expected.json``: the document's content as plain values
(names, rendered stack traces, module stacks, metadata, arguments, sources,
resolved debug handles...), with no table index in it, so it stays true
after any migration to a later schema version. ``test_golden.py`` reads every
file of every version with the current code and compares with it.

Golden files are immutable: this script only writes files that do not exist
yet, checks the ones that do against ``MANIFEST.sha256`` and refuses to go on
when one changed, and records every new file there. Codecs whose module is
not importable yet are skipped with a message.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
import traceback
from pathlib import Path
from typing import Any

import tracepack
from tracepack import Document, DocumentBuilder, Generic, SymInt, Tensor
from tracepack import model as m
from tracepack.codecs import ALIASES, CODECS, WRITE_NAMES
from tracepack.document import resolve_argument
from tracepack.traces import STYLE_PYTHON, STYLE_STRIPPED, FrameKey, ModuleKey, Provenance, render_frames
from tracepack.versions import CURRENT

__all__ = [
    "COMPRESSIONS",
    "GOLDEN",
    "MANIFEST",
    "REQUIRED_CODECS",
    "build_document",
    "covers",
    "document_content",
    "codec_of",
    "file_name",
    "read_manifest",
]

GOLDEN = Path(__file__).resolve().parent
MANIFEST = GOLDEN / "MANIFEST.sha256"
#: Codecs every released version has golden files for; others are added when their codec lands.
REQUIRED_CODECS = ("json", "msgpack")
#: (name in the file name, container compression, zstd level).
COMPRESSIONS = (("", "none", 0), ("-zstd", "zstd", 19))


#: Codecs whose golden files are named otherwise: the row layout (id 2) was called ``flatbuffers`` when
#: its files were written (golden files never change, and later releases keep the name).
FILE_STEMS = {"flatbuffers-rows": "flatbuffers"}


def file_name(codec: str, compression: str) -> str:
    """``msgpack.tpk``, ``msgpack-zstd.tpk``, ``flatbuffers.tpk`` (the row layout, ``flatbuffers-rows``)..."""
    suffix = next(s for s, name, _ in COMPRESSIONS if name == compression)
    return f"{FILE_STEMS.get(codec, codec)}{suffix}.tpk"


def codec_of(stem: str) -> str:
    """The codec (a name of CODECS, as headers print) of a golden file's stem without its compression suffix."""
    return next((codec for codec, s in FILE_STEMS.items() if s == stem), stem)


# -- the document ------------------------------------------------------------------------------------

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1

#: Frames of one deep call path: nodes take prefixes of it, so their stacks share callers.
_DEEP = [FrameKey("/home/user/project/train.py", 100 + i, f"level_{i}", f"return level_{i + 1}(x)") for i in range(48)]
_UNICODE = [
    FrameKey("/home/usér/プロジェクト/モデル.py", 7, "forward", "y = self.ñorm(x)  # 正規化 ✓"),
    FrameKey("/srv/данные/модуль.py", _I64_MAX, "слой", "return torch.relu(x) + 1  # ☃"),
    FrameKey("C:\\Users\\zoë\\model.py", 0, "<lambda>", ""),
    FrameKey("/opt/\U0001f4e6 pkg/模型.py", 2**40, "f", "x = '\\t tab and \U0001f600'"),
]
#: A Python 3.11 frame with columns and a caret annotation.
_CARET = FrameKey(
    "/home/user/project/layers.py",
    42,
    "forward",
    "return self.linear(x) * self.scale",
    11,
    25,
    "           ^^^^^^^^^^^^^^\n",
)


def _trace(frames: list[FrameKey], style: int) -> str:
    return render_frames(frames, style)


def _node_source(
    name: str, target: str, graph_id: int, pass_name: str, action: str, *children: dict[str, Any]
) -> dict[str, Any]:
    """A torch.fx NodeSource as torch.export writes it into ``from_node`` metadata (``json.dumps`` of these)."""
    keys = ("name", "target", "graph_id", "pass_name", "action", "from_node")
    return dict(zip(keys, (name, target, graph_id, pass_name, action, list(children)), strict=True))


def _add_1_1_features(b: DocumentBuilder) -> None:
    """What schema 1.1 added: frame end_line positions and interned from_node provenance."""
    dynamo = _node_source("linear", "<built-in function linear>", 140438213135888, "Interpreter_Dynamo", "create")
    shared = _node_source(
        "linear", "<built-in function linear>", 2**63 - 1, "Interpreter_PropagateUnbackedSymInts", "create", dynamo
    )
    unicode = _node_source("ñode_ü \U0001f600", 'target "quoted"\n', -1, "pass/ünï", "replace.create", shared, dynamo)
    # Lifted from metadata, at the start, in the middle and as the only entry; shared history stored once.
    b.add_node(
        "provenance_first",
        "torch.ops.aten.linear.default",
        meta={"from_node": json.dumps([shared]), "stack_trace": _trace(_DEEP[:2], STYLE_STRIPPED)},
    )
    b.add_node(
        "provenance_middle",
        "torch.ops.aten.relu.default",
        meta={"custom": "{}", "from_node": json.dumps([unicode, shared]), "torch_fn": "relu_1;builtin.relu"},
    )
    b.add_node("provenance_empty", "placeholder", meta={"from_node": "[]"})
    # Not json.dumps's own form (compact separators): kept verbatim, as every codec and 1.0 reader sees it.
    b.add_node("provenance_verbatim", "output", meta={"from_node": json.dumps([dynamo], separators=(",", ":"))})
    # Given directly, not as metadata (only schema 1.1 can hold this).
    b.add_node(
        "provenance_direct",
        "call_function",
        from_node=[Provenance("x", "x", 0, "", "", (Provenance("y", "<lambda>", 7, "p", "create"),))],
    )
    # Python 3.11 positions: a multi-line expression (end_line > line), as FrameSummary and as a tuple.
    first: Any = ("/home/user/project/model.py", 20, "forward", "return self.block(", 15, 9, "", 23)
    if sys.version_info >= (3, 11):  # FrameSummary has positions since 3.11; the tuple says the same
        first = traceback.FrameSummary(*first[:3], line=first[3], end_lineno=23, colno=15, end_colno=9)
    b.add_node(
        "positions", "call_module", stack_trace=[first, ("/home/user/project/block.py", 5, "f", "y", 4, 8, "", 5)]
    )


#: A torch.export program with what schema 1.2 stores typed: a signature of every spec form the columns
#: hold, and one they do not (kept as JSON), and a module call graph with a signature, nulls and an odd entry.
_PROGRAM_1_2: dict[str, Any] = {
    "graph_module": {
        "graph": {"inputs": [], "outputs": [], "nodes": []},
        "signature": {
            "input_specs": [
                {"parameter": {"arg": {"name": "p_w"}, "parameter_name": "blöck.0.w"}},
                {"buffer": {"arg": {"name": "b_stat"}, "buffer_name": "stat", "persistent": False}},
                {"user_input": {"arg": {"as_tensor": {"name": "x"}}}},
                {"user_input": {"arg": {"as_int": 3}}},
            ],
            "output_specs": [{"user_output": {"arg": {"as_tensor": {"name": "columns"}}}}],
        },
        "module_call_graph": [
            {"fqn": "", "signature": {"inputs": [], "in_spec": '[1, {"type": null}]', "forward_arg_names": ["x"]}},
            {"fqn": "blöck.0", "signature": None},
            {"fqn": "blöck.1", "signature": None, "extra": 1},
        ],
    },
    "schema_version": {"major": 8, "minor": 20},
    "torch_version": "2.13.0+cpu",
}


def _add_1_2_features(b: DocumentBuilder) -> tuple[Any, Any, m.Extension]:
    """What schema 1.2 added: the program's signature and module call graph as tables, and the rest of the
    program as an extension with its strings interned (attached to the built document by the caller)."""
    from tracepack import interned_json, program_tables

    gm = _PROGRAM_1_2["graph_module"]
    signature = program_tables.signature_table(b.string, gm["signature"])
    calls = program_tables.module_call_table(b.string, gm["module_call_graph"])
    rest = dict(
        _PROGRAM_1_2, graph_module=dict(gm, signature={"input_specs": [], "output_specs": []}, module_call_graph=[])
    )
    parts = interned_json.split(json.dumps(rest), b.string)
    assert parts is not None
    return signature, calls, m.Extension(program_tables.PROGRAM_EXTENSION, "", parts[0], parts[1])


def build_document(version: tuple[int, int] = CURRENT) -> Document:
    """The golden document of ``version``: deterministic, and using every feature of that version.

    Later versions add nodes after the earlier versions' nodes, so an earlier version's document is
    exactly the one its golden files were written from.
    """
    b = DocumentBuilder(producer="tracepack-golden", producer_version="1 ✓")
    b.add_metadata("exported_by", "tracepack tests/golden/make_golden.py")
    b.add_metadata("ünïcode key", "välue with\nnewline and \t tab")
    b.add_metadata("", "")

    mods_a = [
        ModuleKey("L__self__", "", "__main__.Net"),
        ModuleKey("L__self___layers_0", "layers.0", "torch.nn.modules.container.Sequential"),
        ModuleKey("L__self___layers_0_linear", "layers.0.linear", "torch.nn.modules.linear.Linear"),
    ]
    mods_ts = [
        ModuleKey("TOP", "", "Net", "forward"),
        ModuleKey("SELF", "", "Net", "_forward_impl"),
        ModuleKey("layer1", "layer1", "Sequential", "forward"),
        ModuleKey("0", "layer1.0", "BasicBlock", "forward"),
    ]
    nn_stack = ";".join(f"{m.key},{m.path},{m.type}" for m in mods_a)

    every_argument: list[tuple[str, Any] | tuple[str, Any, int]] = [
        ("none", None),
        ("tensor", Tensor("x")),
        ("tensors", [Tensor("x"), Tensor("ÿ_1")]),
        ("int_min", _I64_MIN, 1),
        ("int_max", _I64_MAX, 2),
        ("ints", [0, -1, _I64_MAX, _I64_MIN], 0),
        ("empty_ints", []),
        ("float", -0.0),
        ("floats", [0.1, 1e308, 5e-324, -2.5]),
        ("bool", True),
        ("bools", [True, False, True]),
        ("string", "naïve → string \U0001f680"),
        ("strings", ["a", "", "ω"]),
        ("sym_int", SymInt("s0")),
        ("generic", Generic("as_scalar_type", {"z": 1, "a": [None, True, 2.5, "ü"], "nested": {"k": {}}})),
        ("generic_list", Generic("as_device", ["cuda", 0])),
    ]

    # Deep stacks sharing callers: every node takes a prefix of the same call path.
    for depth in (48, 47, 40, 24, 1):
        b.add_node(
            f"deep_{depth}",
            "torch.ops.aten.add.Tensor",
            inputs=[("self", Tensor("x")), ("other", Tensor("y"), 1)],
            outputs=[Tensor(f"deep_{depth}")],
            meta={"stack_trace": _trace(_DEEP[:depth], STYLE_STRIPPED), "nn_module_stack": nn_stack},
        )
    # Stacks of their own; the python style (trailing newline) lifted from metadata.
    for i, frame in enumerate(_UNICODE):
        b.add_node(
            f"unique_{i}_ü",
            "torch.ops.aten.mul.Tensor",
            inputs=[("self", Tensor("x"))],
            outputs=[Tensor(f"unique_{i}")],
            meta={"stack_trace": _trace([_DEEP[0], frame], STYLE_PYTHON), "custom": json.dumps({"i": i})},
        )
    # Frames given directly (with columns and an annotation), and a TorchScript module stack.
    b.add_node(
        "columns",
        "torch.ops.aten.linear.default",
        inputs=every_argument,
        outputs=[Tensor("columns"), None, [Tensor("a"), Tensor("b")], 3, SymInt("s1")],
        stack_trace=[*_DEEP[:3], _CARET],
        module_stack=mods_ts,
        meta={"source_fn_stack": "linear,torch.nn.functional.linear", "torch_fn": "linear_1;builtin.linear"},
    )
    # FrameSummary objects, as traceback produces them.
    summary = traceback.StackSummary.from_list(
        [("/home/user/a.py", 3, "main", "run()"), ("/home/user/b.py", 9, "run", "")]
    )
    b.add_node("from_summary", "call_function", stack_trace=summary)
    # Metadata kept verbatim: a stack trace and a module stack that do not render back exactly.
    b.add_node(
        "verbatim",
        "output",
        inputs=[("args", [Tensor("deep_48"), Tensor("columns")])],
        meta={
            "stack_trace": "Traceback? no: just some text\n  with odd indentation ",
            "nn_module_stack": "not,a;module stack",
            "from_node": '[{"name": "x", "target": "x", "graph_id": 1}]',
        },
    )
    # Lifted keys whose values are empty / the empty stack.
    b.add_node("bare", "placeholder", meta={"nn_module_stack": nn_stack})
    b.add_node("empty", "")
    if version >= (1, 1):
        _add_1_1_features(b)

    b.add_value("x", dtype="float32", shape=[2, "s0", 2**40], strides=["s0*2**40", 2**40, 1], device="cuda:0")
    b.add_value("ÿ_1", dtype="bfloat16", shape=[], requires_grad=True, layout="torch.sparse_coo")
    b.add_value("view", dtype="float32", shape=["s0", 3], strides=[3, 1], storage_offset="s0+1", device="cpu")
    b.add_value("weird", json_form={"dtype": "complex32", "shape": ["u0"], "extra": [1, 2.5, None]})
    b.add_value("offset", dtype="int64", shape=[4], strides=[1], storage_offset=_I64_MAX)
    b.set_graph(
        name="golden_graph_ω", inputs=[Tensor("x"), Tensor("ÿ_1"), SymInt("s0")], outputs=[Tensor("columns"), None]
    )

    # TorchScript sources, ranges, debug files (both debug_pkl layouts) and debug handles.
    src_a = b.source("def forward(self, x):\n    y = x + 1\n    return y * 2\n", "code/__torch__/model.py", 1)
    src_b = b.source("return torch.relu(x)  # ☃ no trailing newline", None, 2**40)
    src_c = b.source("", "empty.py", 0)
    src_d = b.source("línea 1\r\nlínea 2\n\nlast", "/home/usér/crlf.py", 17)
    r1 = b.source_range(src_a, 0, 22)
    r2 = b.source_range(src_a, 26, 35)
    r3 = b.source_range(src_b, 7, 17)
    r4 = b.source_range(src_c, 0, 0)
    r5 = b.source_range(src_d, 0, len("línea 1".encode()))
    b.add_debug_file("code/__torch__/model.py", [(0, r1, -1), (120, r2, 3), (_I64_MAX, r3, _I64_MAX)])
    b.add_debug_file("code/__torch__/legacy.py", [(5, r4, 0), (6, r5, -1), (6, r1, 1)], legacy=True)
    deep = b.stack_of_frames(_DEEP)
    shallow = b.stack_of_frames(_DEEP[:2])
    ts = b.module(mods_ts)
    top = b.module(mods_ts[:1])
    b.add_debug_handle(_I64_MAX, stack=deep, module=ts, op="aten::linear", source_range=r2)
    b.add_debug_handle(_I64_MIN, stack=shallow, module=top, op="prim::Constant", source_range=r3)
    b.add_debug_handle(0, op="", source_range=0)
    b.add_debug_handle(7, stack=deep, module=ts, op="aten::relu ☃", source_range=r5)

    b.add_extension("torch.export/signature", {"inputs": ["x"], "outputs": ["columns"], "ü": 1.5})
    b.add_extension("raw/key-order", None, raw_json='{"z":1,"a":[{"y":null,"b":true}],"é":"\\u00e9"}')
    if version < (1, 2):
        return b.build()
    signature, calls, program = _add_1_2_features(b)
    doc = b.build()
    doc.raw.signature, doc.raw.module_calls = signature, calls
    doc.raw.extensions.append(program)
    doc.validate()
    return doc


# -- expected content ---------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Tuples as lists, recursively, so content compares equal to its JSON form."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def document_content(doc: Document) -> dict[str, Any]:
    """Everything the document says, as plain values: no table index survives in it.

    Written against the current ``Document`` API: when a later schema version
    reshapes the stored form, this function changes with the migration and every
    ``expected.json`` stays true. Records are objects, so a later version may add
    keys (``test_golden`` ignores keys an older ``expected.json`` does not have);
    ordered pairs (metadata) are ``[key, value]`` lists, because order is content.
    """
    raw = doc.raw
    s = raw.strings
    header = raw.header

    def source(i: int) -> dict[str, Any]:
        file = raw.sources.file[i]
        return {
            "file": s[file] if file >= 0 else None,
            "start_line": raw.sources.start_line[i],
            "text": doc.source_text(i),
        }

    def source_range(r: int) -> dict[str, Any] | None:
        if r == 0:
            return None
        rt = raw.ranges
        src = source(rt.source[r])
        data = src["text"].encode("utf-8")[rt.start[r] : rt.end[r]]
        return {**src, "start": rt.start[r], "end": rt.end[r], "range_text": data.decode("utf-8", "replace")}

    def frame(f: FrameKey) -> dict[str, Any]:
        return f._asdict()

    def dims(concrete: list[int], symbolic: list[int]) -> list[int | str]:
        return [s[symbolic[i]] if symbolic and symbolic[i] else d for i, d in enumerate(concrete)]

    nodes = [
        {
            "name": view.name,
            "target": view.target,
            "stack_trace": view.stack_trace,
            "frames": [frame(f) for f in view.frames],
            "module_stack": view.module_stack,
            "module_hierarchy": view.module_hierarchy,
            "meta": [[k, v] for k, v in view.meta.items()],
            "from_node": view.from_node,
            "inputs": [
                {"name": name, "value": value, "kind": m.ArgumentKind(a.kind).name.lower()}
                for (name, value), a in zip(view.inputs, view.raw.inputs, strict=True)
            ],
            "outputs": view.outputs,
        }
        for view in doc.nodes()
    ]
    values = [
        {
            "name": s[v.name],
            "dtype": s[v.dtype],
            "shape": dims(v.shape, v.sym_shape),
            "strides": dims(v.strides, v.sym_strides),
            "storage_offset": s[v.sym_storage_offset] if v.sym_storage_offset else v.storage_offset,
            "device": s[v.device],
            "layout": s[v.layout],
            "requires_grad": v.requires_grad,
            "json": s[v.json] if v.json else None,
        }
        for v in raw.graph.values
    ]
    handles = []
    for h in map(doc.debug_handle, raw.debug_handles.handle):
        rng = None if h.source_range is None else dict(zip(("file", "start", "end"), h.source_range, strict=True))
        handles.append(
            {
                "handle": h.handle,
                "op": h.op,
                "stack_trace": h.stack_trace,
                "module_hierarchy": h.module_hierarchy,
                "source_range": rng,
            }
        )
    return _plain(
        {
            "header": {
                "producer": None
                if header.producer is None
                else {"name": header.producer.name, "version": header.producer.version},
                "metadata": [[kv.key, kv.value] for kv in header.metadata],
            },
            "graph": {
                "name": raw.graph.name,
                "inputs": [resolve_argument(s, a) for a in raw.graph.inputs],
                "outputs": [resolve_argument(s, a) for a in raw.graph.outputs],
            },
            "nodes": nodes,
            "values": values,
            "sources": [source(i) for i in range(1, len(raw.sources.file))],
            "debug_files": [
                {
                    "path": f.path,
                    "format": m.DebugFormat(f.format).name.lower(),
                    "rows": [
                        {"byte_offset": off, "range": source_range(r), "tag": tag}
                        for off, r, tag in zip(f.byte_offset, f.range, f.tag, strict=True)
                    ],
                }
                for f in raw.debug_files
            ],
            "debug_handles": handles,
            "extensions": [{"name": e.name, "json": _extension_text(raw, i)} for i, e in enumerate(raw.extensions)],
            **_tables_1_2(raw),
        }
    )


def _extension_text(raw: Any, i: int) -> str:
    """An extension's JSON text (a 1.2 template filled in)."""
    from tracepack import interned_json

    e = raw.extensions[i]
    return interned_json.fill(e.template, e.refs, raw.strings) if getattr(e, "template", "") else e.json


def _tables_1_2(raw: Any) -> dict[str, Any]:
    """The program's signature and module call graph (schema 1.2), as torch's JSON; nothing when absent."""
    from tracepack import program_tables

    out: dict[str, Any] = {}
    if getattr(raw, "signature", None) is not None:
        out["signature"] = program_tables.signature_json(raw.strings, raw.signature)
    if getattr(raw, "module_calls", None) is not None:
        out["module_call_graph"] = program_tables.module_calls_json(raw.strings, raw.module_calls)
    return out


def covers(actual: Any, expected: Any) -> bool:
    """``actual`` says everything ``expected`` does; records (objects) may have gained keys since."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and covers(actual[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(covers(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return type(actual) is type(expected) and actual == expected


def dump_json(content: dict[str, Any]) -> str:
    """``expected.json``'s exact text."""
    return json.dumps(content, ensure_ascii=False, indent=1, allow_nan=False) + "\n"


# -- the manifest -------------------------------------------------------------------------------------


def read_manifest() -> dict[str, str]:
    """``{"1.0/msgpack.tpk": sha256}``: ``sha256sum`` format, paths relative to tests/golden/."""
    if not MANIFEST.exists():
        return {}
    out = {}
    for line in MANIFEST.read_text(encoding="utf-8").splitlines():
        if line.strip():
            digest, _, path = line.partition("  ")
            out[path] = digest
    return out


def _write_manifest(entries: dict[str, str]) -> None:
    MANIFEST.write_text("".join(f"{entries[p]}  {p}\n" for p in sorted(entries)), encoding="utf-8")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- main ---------------------------------------------------------------------------------------------


def _importable(codec: str) -> bool:
    try:
        importlib.import_module(CODECS[codec][1])
    except ImportError:
        return False
    return True


def make(version: tuple[int, int], codecs: list[str]) -> int:
    """Write what is missing for ``version``; return the exit code."""
    label = f"{version[0]}.{version[1]}"
    folder = GOLDEN / label
    manifest = read_manifest()
    for rel, digest in manifest.items():
        path = GOLDEN / rel
        if path.exists() and _sha(path) != digest:
            print(
                f"tests/golden/{rel} changed since it was recorded: golden files are immutable; "
                f"restore it with `git checkout -- tests/golden/{rel}`",
                file=sys.stderr,
            )
            return 1
    doc = build_document(version)
    content = document_content(doc)
    expected = folder / "expected.json"
    if expected.exists():
        if not covers(content, json.loads(expected.read_text(encoding="utf-8"))):
            print(
                f"tests/golden/{label}/expected.json differs from the document this code builds: golden files "
                "never change, so new codecs cannot be added from this build",
                file=sys.stderr,
            )
            return 1
    else:
        folder.mkdir(parents=True, exist_ok=True)
        expected.write_text(dump_json(content), encoding="utf-8")
        manifest[f"{label}/expected.json"] = _sha(expected)
        print(f"wrote tests/golden/{label}/expected.json")
    for codec in codecs:
        if not _importable(codec):
            print(f"skip {codec}: {CODECS[codec][1]} is not importable yet")
            continue
        for _, compression, level in COMPRESSIONS:
            path = folder / file_name(codec, compression)
            rel = f"{label}/{path.name}"
            if path.exists():
                print(f"keep tests/golden/{rel} (golden files are immutable)")
                manifest.setdefault(rel, _sha(path))
                continue
            data = tracepack.dumps(doc, codec=codec, compression=compression, level=level, version=version)
            back = document_content(tracepack.loads(data, source=rel))
            if not covers(back, content):
                print(
                    f"tests/golden/{rel}: reading the encoded document back gives other content; not written",
                    file=sys.stderr,
                )
                return 1
            path.write_bytes(data)
            manifest[rel] = _sha(path)
            print(f"wrote tests/golden/{rel} ({len(data)} bytes)")
    _write_manifest(manifest)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="make_golden.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--codec",
        default=",".join(REQUIRED_CODECS),
        help=f"comma-separated, of {', '.join(WRITE_NAMES)} (default: {','.join(REQUIRED_CODECS)})",
    )
    p.add_argument("--version", default=f"{CURRENT[0]}.{CURRENT[1]}", help="schema version to write (default: current)")
    args = p.parse_args(argv)
    codecs = [c.strip() for c in args.codec.split(",") if c.strip()]
    unknown = [c for c in codecs if c not in CODECS and c not in ALIASES]
    if unknown:
        p.error(f"unknown codec(s) {', '.join(unknown)}; expected {', '.join(WRITE_NAMES)}")
    codecs = [ALIASES.get(c, c) for c in codecs]  # flatbuffers: the column layout
    major, _, minor = args.version.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        p.error(f"--version {args.version!r}: expected MAJOR.MINOR")
    return make((int(major), int(minor)), codecs)


if __name__ == "__main__":
    sys.exit(main())
