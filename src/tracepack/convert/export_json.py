"""torch.export ``model.json`` <-> tracepack Document, byte for byte.

torch writes ``model.json`` with ``json.dumps`` (default separators, ASCII
escapes, insertion order). Importing keeps:

* every node typed: name, target, inputs and outputs as typed arguments where
  the value has an exact typed form (``as_tensor``, ``as_int``, ...), the
  rest as generic JSON; metadata in torch's order, with ``stack_trace`` and
  ``nn_module_stack`` lifted into the stack and module tries when they render
  back exactly;
* tensor values typed (dtype, shape, strides, device, requires_grad), with
  the original JSON kept only for a value whose typed form does not rebuild it;
* everything else (signature, module call graph, range constraints, versions)
  verbatim, in an extension holding the program with the graph taken out.

Each node is rebuilt from its stored form and compared with the input during
import; a node that does not come back equal is stored with its original JSON,
so the export is exact whatever the input held.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from tracepack import model as m
from tracepack.builder import DocumentBuilder
from tracepack.document import Document, json_value
from tracepack.errors import LegacyFormatError, UsageError

__all__ = ["PROGRAM_EXTENSION", "export_model_json", "import_model_json", "is_model_json"]

PROGRAM_EXTENSION = "torch.export/program"
NODES_EXTENSION = "torch.export/nodes"
SUPPORTED_MAJORS = (5, 6, 7, 8)

# torch's ScalarType codes (torch/_export/serde/schema.py) <-> names stored in Value.dtype.
_DTYPES = {
    0: "UNKNOWN", 1: "BYTE", 2: "CHAR", 3: "SHORT", 4: "INT", 5: "LONG", 6: "HALF", 7: "FLOAT", 8: "DOUBLE",
    9: "COMPLEXHALF", 10: "COMPLEXFLOAT", 11: "COMPLEXDOUBLE", 12: "BOOL", 13: "BFLOAT16", 28: "UINT16",
    29: "FLOAT8E4M3FN", 30: "FLOAT8E5M2", 31: "FLOAT8E4M3FNUZ", 32: "FLOAT8E5M2FNUZ",
}  # fmt: skip
_DTYPE_CODES = {v: k for k, v in _DTYPES.items()}
# torch's Layout codes <-> names stored in Value.layout (Strided, the default, is stored as 0).
_LAYOUTS = {0: "Unknown", 1: "SparseCoo", 2: "SparseCsr", 3: "SparseCsc", 4: "SparseBsr", 5: "SparseBsc", 6: "_mkldnn"}
_LAYOUT_CODES = {v: k for k, v in _LAYOUTS.items()}
_STRIDED = 7
_TENSOR_KEYS = ["dtype", "sizes", "requires_grad", "device", "strides", "storage_offset", "layout"]


def is_model_json(data: bytes) -> bool:
    """Whether ``data`` looks like a torch.export ``model.json``."""
    head = data[:4096].lstrip()
    return head.startswith(b"{") and b'"graph_module"' in data[: 1 << 20]


def _loads(text: bytes | str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LegacyFormatError(
            f"not valid JSON: {exc.msg}", source=source, where=f"line {exc.lineno} column {exc.colno}"
        ) from None
    except UnicodeDecodeError as exc:
        raise LegacyFormatError("not UTF-8 text", source=source, where=f"byte {exc.start}") from None


def _dumps(value: Any) -> str:
    """torch's own encoding: ``json.dumps`` defaults."""
    return json.dumps(value)


def _typed_argument(b: DocumentBuilder, arg: Any) -> m.Argument:
    """The typed form of a torch Argument dict when it rebuilds exactly, else generic JSON."""
    if type(arg) is dict and len(arg) == 1:
        ((kind, v),) = arg.items()
        t = type(v)
        s = b.string
        if kind == "as_tensor" and t is dict and len(v) == 1 and type(v.get("name")) is str:
            return m.ArgTensor(s(v["name"]))
        if kind == "as_int" and t is int:
            return m.ArgInt(v)
        if kind == "as_float" and t is float:
            return m.ArgFloat(v)
        if kind == "as_bool" and t is bool:
            return m.ArgBool(v)
        if kind == "as_string" and t is str:
            return m.ArgString(s(v))
        if kind == "as_none" and v is True:
            return m.ArgNone()
        if t is list:
            if kind == "as_ints" and all(type(x) is int for x in v):
                return m.ArgInts(v)
            if kind == "as_floats" and all(type(x) is float for x in v):
                return m.ArgFloats(v)
            if kind == "as_bools" and all(type(x) is bool for x in v):
                return m.ArgBools(v)
            if kind == "as_strings" and all(type(x) is str for x in v):
                return m.ArgStrings([s(x) for x in v])
            if kind == "as_tensors" and all(type(x) is dict and len(x) == 1 and type(x.get("name")) is str for x in v):
                return m.ArgTensors([s(x["name"]) for x in v])
        if kind == "as_sym_int" and t is dict and len(v) == 1 and type(v.get("as_name")) is str:
            return m.ArgSymInt(s(v["as_name"]))
        return m.ArgGeneric(s(kind), s(_dumps(v)))
    return m.ArgGeneric(0, b.string(_dumps(arg)))


def _argument_json(s: list[str], a: m.Argument) -> Any:
    """The torch Argument dict of a stored argument (inverse of :func:`_typed_argument`)."""
    if isinstance(a, m.ArgTensor):
        return {"as_tensor": {"name": s[a.name]}}
    if isinstance(a, m.ArgInt):
        return {"as_int": a.value}
    if isinstance(a, m.ArgFloat):
        return {"as_float": a.value}
    if isinstance(a, m.ArgBool):
        return {"as_bool": a.value}
    if isinstance(a, m.ArgString):
        return {"as_string": s[a.value]}
    if isinstance(a, m.ArgNone):
        return {"as_none": True}
    if isinstance(a, m.ArgInts):
        return {"as_ints": list(a.values)}
    if isinstance(a, m.ArgFloats):
        return {"as_floats": list(a.values)}
    if isinstance(a, m.ArgBools):
        return {"as_bools": list(a.values)}
    if isinstance(a, m.ArgStrings):
        return {"as_strings": [s[i] for i in a.values]}
    if isinstance(a, m.ArgTensors):
        return {"as_tensors": [{"name": s[i]} for i in a.names]}
    if isinstance(a, m.ArgSymInt):
        return {"as_sym_int": {"as_name": s[a.name]}}
    value = json_value(s[a.json], f"$.strings[{a.json}]")
    return value if a.variant == 0 else {s[a.variant]: value}


def _sym(v: Any) -> int | str | None:
    """A torch SymInt dict as a concrete int or an expression string; None if neither exactly."""
    if type(v) is dict and len(v) == 1:
        if type(v.get("as_int")) is int:
            return int(v["as_int"])
        e = v.get("as_expr")
        if type(e) is dict and list(e) == ["expr_str", "hint"] and type(e["expr_str"]) is str and e["hint"] is None:
            return str(e["expr_str"])
    return None


def _sym_json(v: int | str) -> Any:
    return {"as_int": v} if isinstance(v, int) else {"as_expr": {"expr_str": v, "hint": None}}


def _device_str(d: Any) -> str | None:
    if type(d) is dict and list(d) == ["type", "index"] and type(d["type"]) is str and ":" not in d["type"]:
        if d["index"] is None:
            return str(d["type"])
        if type(d["index"]) is int:
            return f"{d['type']}:{d['index']}"
    return None


def _device_json(text: str) -> dict[str, Any]:
    kind, _, index = text.partition(":")
    return {"type": kind, "index": int(index) if index else None}


def _add_value(b: DocumentBuilder, name: str, meta: Any) -> None:
    typed: dict[str, Any] | None = None
    if type(meta) is dict and list(meta) == _TENSOR_KEYS and (meta["layout"] == _STRIDED or meta["layout"] in _LAYOUTS):
        sizes = [_sym(x) for x in meta["sizes"]] if type(meta["sizes"]) is list else [None]
        strides = [_sym(x) for x in meta["strides"]] if type(meta["strides"]) is list else [None]
        device = _device_str(meta["device"])
        offset = _sym(meta["storage_offset"])
        if (
            None not in sizes
            and None not in strides
            and device is not None
            and offset is not None
            and type(meta["dtype"]) is int
            and meta["dtype"] in _DTYPES
            and type(meta["layout"]) is int
            and type(meta["requires_grad"]) is bool
        ):
            typed = {"dtype": _DTYPES[meta["dtype"]], "shape": sizes, "strides": strides, "device": device}
            typed["requires_grad"] = meta["requires_grad"]
            typed["storage_offset"] = offset
            typed["layout"] = _LAYOUTS.get(meta["layout"], "")
    if typed is None:
        b.add_value(name, json_form=meta)
    else:
        b.add_value(name, **typed)


def _value_json(s: list[str], v: m.Value) -> Any:
    if v.json:
        return json_value(s[v.json], f"$.strings[{v.json}]")
    shape: list[int | str] = [s[e] if e else d for d, e in zip(v.shape, v.sym_shape or [0] * len(v.shape), strict=True)]
    strides: list[int | str] = [
        s[e] if e else d for d, e in zip(v.strides, v.sym_strides or [0] * len(v.strides), strict=True)
    ]
    return {
        "dtype": _DTYPE_CODES[s[v.dtype]],
        "sizes": [_sym_json(x) for x in shape],
        "requires_grad": v.requires_grad,
        "device": _device_json(s[v.device]),
        "strides": [_sym_json(x) for x in strides],
        "storage_offset": _sym_json(s[v.sym_storage_offset] if v.sym_storage_offset else v.storage_offset),
        "layout": _LAYOUT_CODES[s[v.layout]] if v.layout else _STRIDED,
    }


def import_model_json(data: bytes | str, *, source: str = "<model.json>") -> Document:
    """Convert a torch.export ``model.json`` into a Document (no torch needed)."""
    obj = _loads(data, source)
    if type(obj) is not dict:
        raise LegacyFormatError(
            "top level is not an object", source=source, where="$", expected="a torch.export program"
        )
    version = obj.get("schema_version")
    if not (type(version) is dict and type(version.get("major")) is int and type(version.get("minor")) is int):
        raise LegacyFormatError(
            "no schema_version", source=source, where="$.schema_version", expected="{major, minor} of torch's schema"
        )
    if version["major"] not in SUPPORTED_MAJORS:
        raise LegacyFormatError(
            f"torch.export schema {version['major']}.{version['minor']} is not supported",
            source=source,
            where="$.schema_version",
            expected=f"major {', '.join(map(str, SUPPORTED_MAJORS))}",
        )
    try:
        gm = obj["graph_module"]
        graph = gm["graph"]
        nodes = graph["nodes"]
        if type(nodes) is not list or type(graph.get("inputs")) is not list or type(graph.get("outputs")) is not list:
            raise TypeError
    except (KeyError, TypeError):
        raise LegacyFormatError(
            "no graph_module.graph with nodes, inputs and outputs",
            source=source,
            where="$.graph_module.graph",
            expected="a torch.export program",
        ) from None

    b = DocumentBuilder(producer="torch.export", producer_version=str(obj.get("torch_version", "")))
    b.add_metadata("torch.export/schema_version", f"{version['major']}.{version['minor']}")
    tensor_values = graph.get("tensor_values")
    if type(tensor_values) is dict:
        for name, meta in tensor_values.items():
            _add_value(b, name, meta)
    doc_inputs = [_typed_argument(b, a) for a in graph["inputs"]]
    doc_outputs = [_typed_argument(b, a) for a in graph["outputs"]]

    # The layout shared by the nodes: key order and the value of every field we do not type.
    key_orders = Counter(tuple(n) if type(n) is dict else () for n in nodes)
    keys = list(key_orders.most_common(1)[0][0]) if nodes else ["target", "inputs", "outputs", "metadata", "name"]
    extra_keys = [k for k in keys if k not in ("target", "inputs", "outputs", "metadata", "name")]
    extra_defaults = {
        k: Counter(_dumps(n.get(k)) for n in nodes if type(n) is dict).most_common(1)[0][0] for k in extra_keys
    }
    # Nodes kept whole (odd shapes), and per-node values of the untyped fields that differ from the default.
    whole: dict[str, Any] = {}
    extras_of: dict[str, Any] = {}
    typed: list[int] = []
    for i, n in enumerate(nodes):
        if type(n) is dict and list(n) == keys and _plain_node(n):
            try:
                b.add_node(
                    n["name"],
                    n["target"],
                    inputs=[(a["name"], _typed_argument(b, a["arg"]), a["kind"]) for a in n["inputs"]],
                    outputs=[_typed_argument(b, a) for a in n["outputs"]],
                    meta=n["metadata"],
                )
                typed.append(i)
                continue
            except UsageError:  # a duplicate node name: keep the node verbatim
                pass
        b.add_raw_node(_generic_node(b, i, n if type(n) is dict else {}))
        whole[str(i)] = n
    b.set_graph(name="graph", inputs=doc_inputs, outputs=doc_outputs)

    skeleton = dict(obj)
    skeleton["graph_module"] = dict(gm)
    skeleton["graph_module"]["graph"] = dict(graph, nodes=[], inputs=[], outputs=[])
    if type(tensor_values) is dict:
        skeleton["graph_module"]["graph"]["tensor_values"] = {}
    b.add_extension(PROGRAM_EXTENSION, None, raw_json=_dumps(skeleton))
    doc = b.build()

    # Check every typed node against its input; keep the ones that do not come back equal.
    renderer = _MetaRenderer(doc)
    strings, stored = doc.raw.strings, doc.raw.graph.nodes
    for i in typed:
        n = nodes[i]
        extras = {k: n[k] for k in extra_keys}
        if any(_dumps(v) != extra_defaults[k] for k, v in extras.items()):
            extras_of[str(i)] = extras
        if _dumps(_node_json(strings, renderer, stored[i], keys, extras)) != _dumps(n):
            whole[str(i)] = n
    defaults = {k: json.loads(v) for k, v in extra_defaults.items()}
    layout = {"keys": keys, "defaults": defaults, "extras": extras_of, "whole": whole}
    doc.raw.extensions.append(m.Extension(NODES_EXTENSION, _dumps(layout)))
    return doc


def _plain_node(n: dict[str, Any]) -> bool:
    """Whether a node's fields have the types the typed form holds."""
    meta = n["metadata"]
    return (
        type(n["name"]) is str
        and type(n["target"]) is str
        and type(meta) is dict
        and all(type(k) is str and type(v) is str for k, v in meta.items())
        and type(n["inputs"]) is list
        and type(n["outputs"]) is list
        and all(
            type(a) is dict and list(a) == ["name", "arg", "kind"] and type(a["name"]) is str and a["kind"] in (0, 1, 2)
            for a in n["inputs"]
        )
    )


def _generic_node(b: DocumentBuilder, i: int, n: dict[str, Any]) -> m.Node:
    name = n.get("name")
    return m.Node(
        name=b.string(name if type(name) is str else f"<node {i}>"), target=b.string(str(n.get("target", "")))
    )


def _node_json(s: list[str], b: _MetaRenderer, node: m.Node, keys: list[str], extras: dict[str, Any]) -> dict[str, Any]:
    """Rebuild a node's torch JSON from its stored form, in torch's key order."""
    out: dict[str, Any] = {}
    for k in keys:
        if k == "target":
            out[k] = s[node.target]
        elif k == "name":
            out[k] = s[node.name]
        elif k == "inputs":
            out[k] = [{"name": s[a.name], "arg": _argument_json(s, a.arg), "kind": int(a.kind)} for a in node.inputs]
        elif k == "outputs":
            out[k] = [_argument_json(s, a) for a in node.outputs]
        elif k == "metadata":
            out[k] = b.meta_of(node)
        else:
            out[k] = extras[k]
    return out


class _MetaRenderer:
    """Renders a stored node's metadata dict, lifted values included."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc

    def meta_of(self, node: m.Node) -> dict[str, str]:
        # Schema 1.1 lifts more metadata (from_node): the document renders what it lifted.
        node_meta = getattr(self.doc, "node_meta", None)
        if node_meta is not None:
            return dict(node_meta(node))
        s = self.doc.raw.strings
        out = {}
        for k, v in zip(node.meta_keys, node.meta_values, strict=True):
            if v >= 0:
                out[s[k]] = s[v]
            elif v == -1:
                out[s[k]] = self.doc.stack_trace(node.stack, node.stack_style)
            else:
                out[s[k]] = self.doc.module_stack(node.module)
        return out


def _extension(doc: Document, name: str) -> Any:
    for i, e in enumerate(doc.raw.extensions):
        if e.name == name:
            return json_value(e.json, f"$.extensions[{i}].json")
    raise UsageError(f"the document has no {name!r} extension: it was not imported from a torch model.json")


def export_model_json(doc: Document) -> bytes:
    """Write the torch.export ``model.json`` a document was imported from, byte for byte."""
    program = _extension(doc, PROGRAM_EXTENSION)
    layout = _extension(doc, NODES_EXTENSION)
    s = doc.raw.strings
    g = doc.raw.graph
    renderer = _MetaRenderer(doc)
    keys, defaults, extras_of, whole = layout["keys"], layout["defaults"], layout["extras"], layout["whole"]
    nodes = []
    for i, node in enumerate(g.nodes):
        kept = whole.get(str(i))
        if kept is not None:
            nodes.append(kept)
            continue
        extras = dict(defaults)
        extras.update(extras_of.get(str(i), {}))
        nodes.append(_node_json(s, renderer, node, keys, extras))
    graph = program["graph_module"]["graph"]
    graph["nodes"] = nodes
    graph["inputs"] = [_argument_json(s, a) for a in g.inputs]
    graph["outputs"] = [_argument_json(s, a) for a in g.outputs]
    if "tensor_values" in graph:
        graph["tensor_values"] = {s[v.name]: _value_json(s, v) for v in g.values}
    return _dumps(program).encode("ascii")
