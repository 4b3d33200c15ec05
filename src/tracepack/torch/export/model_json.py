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
import re
from collections import Counter
from dataclasses import replace
from typing import Any

from tracepack import interned_json, program_tables, string_order
from tracepack import model as m
from tracepack.builder import DocumentBuilder
from tracepack.document import Document, json_value
from tracepack.errors import DecodeError, LegacyFormatError, UsageError
from tracepack.torch.export.node_names import GraphNames
from tracepack.torch.export.schema_versions import RELEASE_SCHEMA, schema_version_of
from tracepack.torch.export.values import (
    ValueForm,
    decode_value,
    derivable_hints,
    detect_form,
    encode_value,
    known_hints,
)
from tracepack.traces import FrameKey

__all__ = ["PROGRAM_EXTENSION", "export_model_json", "export_program", "import_model_json", "is_model_json"]


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


PROGRAM_EXTENSION = program_tables.PROGRAM_EXTENSION
NODES_EXTENSION = "torch.export/nodes"
#: Layout 2 of the nodes extension, a new name so that builds before it refuse the file (they find
#: no ``torch.export/nodes`` extension) instead of misreading it: the value form leaves out the hints
#: :func:`tracepack.torch.export.values.derivable_hints` drops, the program's ``sym_int_values`` hints
#: included (older builds would spell them ``null``),
#: and an ``as_sym_ints`` argument of names and integers is stored as a plain list,
#: ``["sym_size_int_2", 3]`` for ``[{"as_name": "sym_size_int_2"}, {"as_int": 3}]``
#: (:func:`_compact_sym_ints`). Written only when one of them saves bytes.
NODES_EXTENSION_DERIVED = "torch.export/nodes-2"
_NODES_EXTENSIONS = (NODES_EXTENSION, NODES_EXTENSION_DERIVED)
#: Programs of at most this many nodes get their string table grouped by field
#: (:func:`tracepack.string_order.group_strings`): on the size ladder that makes the best codec +
#: zstd -19 + dictionary 7-10% smaller from 8 to 133 nodes; from about 450 nodes on the import's
#: interleaved order compresses as well or better (1-6%) and grouping would slow the import.
GROUP_STRINGS_MAX_NODES = 300
#: The schema majors torch releases wrote (3, 4 and 6 lived only between releases).
SUPPORTED_MAJORS = tuple(sorted({int(v.split(".")[0]) for v in RELEASE_SCHEMA.values()}))
_RELEASES = f"torch {min(RELEASE_SCHEMA, key=_release_key)}-{max(RELEASE_SCHEMA, key=_release_key)}"


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


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_PAIR = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


_LONG_NUMBER = re.compile(rb"[0-9]{19}")
_I64 = (-(2**63), 2**63 - 1)


def _check_int_range(raw: bytes, source: str) -> None:
    """Refuse a JSON integer outside 64 bits (torch's schema has int64 only; no codec could store it)."""

    def parse_int(text: str) -> int:
        value = int(text)
        if not _I64[0] <= value <= _I64[1]:
            at = raw.find(text.encode("ascii"))
            raise LegacyFormatError(
                f"integer {text[:30]}{'...' if len(text) > 30 else ''} does not fit in 64 bits",
                source=source,
                where=f"byte {max(at, 0)}",
                expected="a 64-bit integer",
            )
        return value

    json.loads(raw, parse_int=parse_int)


def _check_exact_text(data: bytes | str, obj: Any, source: str) -> None:
    """Refuse what could not come back byte for byte: text torch's ``json.dumps`` would not write,
    and strings with lone UTF-16 surrogates (``"\\ud800"``: valid JSON, but no UTF-8 holds it)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    canon = _dumps(obj).encode("ascii")
    if canon != raw:
        at = next((i for i, (a, b) in enumerate(zip(canon, raw, strict=False)) if a != b), min(len(canon), len(raw)))
        raise LegacyFormatError(
            f"not laid out as torch writes model.json (json.dumps defaults): {raw[at : at + 24]!r}",
            source=source,
            where=f"byte {at}",
            expected=f"{canon[at : at + 24]!r} (tracepack gives model.json back byte for byte; re-save it with torch)",
        )
    if _LONG_NUMBER.search(raw) is not None:
        _check_int_range(raw, source)
    if _SURROGATE_ESCAPE.search(raw) is None:
        return
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        lone = next((mt for mt in _PAIR.finditer(raw) if len(mt.group()) == 6), None)
        raise LegacyFormatError(
            "a string holds a lone UTF-16 surrogate, which no UTF-8 text can hold",
            source=source,
            where=f"byte {lone.start() if lone else 0}",
            expected="surrogates only in high-low pairs",
        ) from None


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


def _compact_sym_ints(arg: Any) -> list[str | int] | None:
    """``[{"as_name": "s"}, {"as_int": 3}]`` (an ``as_sym_ints`` list) as ``["s", 3]``; None when an
    element is anything else."""
    if type(arg) is not dict or len(arg) != 1 or type(arg.get("as_sym_ints")) is not list:
        return None
    out: list[str | int] = []
    for x in arg["as_sym_ints"]:
        if type(x) is not dict or len(x) != 1:
            return None
        v = x.get("as_name") if "as_name" in x else x.get("as_int")
        if not (("as_name" in x and type(v) is str) or ("as_int" in x and type(v) is int)):
            return None
        out.append(v)
    return out


def _argument_json_2(s: list[str], a: m.Argument) -> Any:
    """:func:`_argument_json` for layout 2 of the nodes extension (compact ``as_sym_ints`` lists)."""
    value = _argument_json(s, a)
    if isinstance(a, m.ArgGeneric) and a.variant and s[a.variant] == "as_sym_ints" and type(value) is dict:
        items = value["as_sym_ints"]
        if type(items) is not list or any(type(x) not in (str, int) for x in items):
            raise DecodeError(
                "an as_sym_ints argument is not a list of names and integers",
                where=f"$.strings[{a.json}]",
                expected='a list such as ["sym_size_int_2", 3] (layout 2 of the torch.export nodes)',
            )
        value = {"as_sym_ints": [{"as_name": x} if type(x) is str else {"as_int": x} for x in items]}
    return value


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


def _add_value(b: DocumentBuilder, name: str, meta: Any, form: ValueForm) -> None:
    """Add a tensor value typed when ``form`` rebuilds it exactly, else as its JSON."""
    decoded = decode_value(meta, form)
    if decoded is not None and encode_value(decoded[0], form) == meta:
        b.add_value(name, **decoded[0])
    else:
        b.add_value(name, json_form=meta)


def _value_json(s: list[str], v: m.Value, form: ValueForm) -> Any:
    if v.json:
        return json_value(s[v.json], f"$.strings[{v.json}]")
    shape: list[int | str] = [s[e] if e else d for d, e in zip(v.shape, v.sym_shape or [0] * len(v.shape), strict=True)]
    strides: list[int | str] = [
        s[e] if e else d for d, e in zip(v.strides, v.sym_strides or [0] * len(v.strides), strict=True)
    ]
    typed = {
        "dtype": s[v.dtype],
        "shape": shape,
        "strides": strides,
        "device": s[v.device],
        "requires_grad": v.requires_grad,
        "storage_offset": s[v.sym_storage_offset] if v.sym_storage_offset else v.storage_offset,
        "layout": s[v.layout],
    }
    return encode_value(typed, form)


def _check_program(obj: Any, source: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The program, its graph module and its graph, or a one-line error."""
    if type(obj) is not dict:
        raise LegacyFormatError(
            "top level is not an object", source=source, where="$", expected="a torch.export program"
        )
    version = schema_version_of(obj)
    if version is None:
        raise LegacyFormatError(
            "no schema_version", source=source, where="$.schema_version", expected="{major, minor} of torch's schema"
        )
    if version.major not in SUPPORTED_MAJORS:
        raise LegacyFormatError(
            f"torch.export schema {version} is not supported",
            source=source,
            where="$.schema_version",
            expected=f"major {', '.join(map(str, SUPPORTED_MAJORS))} (what {_RELEASES} wrote)",
        )
    try:
        gm = obj["graph_module"]
        graph = gm["graph"]
        if not _is_graph(graph):
            raise TypeError
    except (KeyError, TypeError):
        raise LegacyFormatError(
            "no graph_module.graph with nodes, inputs and outputs",
            source=source,
            where="$.graph_module.graph",
            expected="a torch.export program",
        ) from None
    return obj, gm, graph


def _is_graph(graph: Any) -> bool:
    return (
        type(graph) is dict
        and type(graph.get("nodes")) is list
        and type(graph.get("inputs")) is list
        and type(graph.get("outputs")) is list
    )


def import_model_json(data: bytes | str, *, source: str = "<model.json>", group_strings: bool = True) -> Document:
    """Convert a torch.export ``model.json`` into a Document (no torch needed).

    With ``group_strings`` (a program of at most :data:`GROUP_STRINGS_MAX_NODES` nodes), the string
    table comes grouped by field (:func:`tracepack.string_order.group_strings`), the order the
    ``torch-export-6`` dictionary was trained on; ETRecord methods keep the import's own order, which
    ``executorch-edge-2`` was trained on.

    Every schema major a torch release wrote is read (:data:`SUPPORTED_MAJORS`).
    Graphs nested in node arguments (``torch.cond``, ``map``)
    are imported into the same tables, their nodes named ``<node>/<graph>/<name>``; in
    the compact stack-trace layout proposed in torch PR #121675 (reverted, never released; any
    schema version) with ``co_fileinfo_ordered_list`` (file and line tables of its own, node stack traces
    as file indices and line numbers) fills the file and line tables.
    """
    from tracepack.io.guard import parse_json

    def parse() -> Document:
        obj = _loads(data, source)
        _check_exact_text(data, obj, source)
        _check_program(obj, source)
        importer = _Importer(obj, structured=True)
        doc = importer.run()
        if (importer.graphs or importer.co is not None) and _export(doc) != _dumps(obj):
            # Nested graphs and PR #121675 file tables are checked as a whole; keep them as JSON if they
            # do not come back exactly (every node is still checked on its own).
            doc = _Importer(obj, structured=False).run()
        return doc

    # JSON nested thousands deep, giant integers: measured only if the parse runs out of room
    doc = parse_json(parse, data, source, LegacyFormatError)
    if group_strings and len(doc.raw.graph.nodes) <= GROUP_STRINGS_MAX_NODES:
        return Document(string_order.group_strings(doc.raw, doc.version))
    return doc


# -- the proposed compact layout of torch PR #121675 (never released): co_fileinfo_ordered_list ---

_CO_PAIR = re.compile(r"(0|[1-9][0-9]*)([,:])(0|[1-9][0-9]*)")


def _co_tables(graph: dict[str, Any]) -> list[tuple[str, list[tuple[int, str, str]]]] | None:
    """PR #121675's file list as ``(file, [(line, name, text)])``, or None if absent or odd."""
    co = graph.get("co_fileinfo_ordered_list")
    if type(co) is not list or not co:
        return None
    out = []
    for entry in co:
        if type(entry) is not dict or list(entry) != ["file_name", "line_info_map"]:
            return None
        name, lines = entry["file_name"], entry["line_info_map"]
        if type(name) is not str or type(lines) is not dict:
            return None
        rows = []
        for key, info in lines.items():
            if not (type(key) is str and key.isdigit() and str(int(key)) == key):
                return None
            if type(info) is not dict or list(info) != ["name", "line"]:
                return None
            if type(info["name"]) is not str or type(info["line"]) is not str:
                return None
            rows.append((int(key), info["name"], info["line"]))
        out.append((name, rows))
    return out


def _co_frames(text: str, files: list[tuple[str, dict[int, tuple[str, str]]]]) -> list[FrameKey] | None:
    """A PR #121675 node stack trace (``file:line`` or ``file,line`` pairs joined by ``;``) as frames."""
    frames = []
    for part in text.split(";"):
        match = _CO_PAIR.fullmatch(part)
        if match is None:
            return None
        index, line = int(match.group(1)), int(match.group(3))
        if index >= len(files) or line not in files[index][1]:
            return None
        file, lines = files[index]
        name, code = lines[line]
        frames.append(FrameKey(file, line, name, code))
    return frames


# -- import --------------------------------------------------------------------------------------


class _Importer:
    """One pass over a program: nodes of every graph, values, arguments, tables."""

    def __init__(self, obj: dict[str, Any], *, structured: bool) -> None:
        self.obj = obj
        self.nested = self.structured = structured
        self.gm = obj["graph_module"]
        self.graph = self.gm["graph"]
        version = schema_version_of(obj)
        assert version is not None  # checked by _check_program
        self.version = version
        self.b = DocumentBuilder(producer="torch.export", producer_version=str(obj.get("torch_version", "")))
        self.b.add_metadata("torch.export/schema_version", str(version))
        # Every node of every graph (nested ones after the node whose argument holds them).
        self.raw_nodes: list[Any] = []
        self.prefixes: list[str] = []
        self.graphs: list[list[int]] = []
        self.typed: list[int] = []
        self.whole: dict[str, Any] = {}
        self.names: set[str] = set()
        self.fx_names: dict[str, GraphNames] = {}
        nodes = self._all_nodes(self.graph)
        orders = Counter(tuple(n) if type(n) is dict else () for n in nodes)
        self.keys = list(orders.most_common(1)[0][0]) if nodes else ["target", "inputs", "outputs", "metadata", "name"]
        inputs = Counter(
            tuple(a) if type(a) is dict else ()
            for n in nodes
            if type(n) is dict and type(n.get("inputs")) is list
            for a in n["inputs"]
        )
        self.input_keys = list(inputs.most_common(1)[0][0]) if inputs else ["name", "arg", "kind"]
        if self.input_keys not in (["name", "arg", "kind"], ["name", "arg"]):
            self.input_keys = ["name", "arg", "kind"]
        self.extra_keys = [k for k in self.keys if k not in _NODE_FIELDS]
        self.extra_defaults = {
            k: Counter(_dumps(n.get(k)) for n in nodes if type(n) is dict).most_common(1)[0][0] for k in self.extra_keys
        }
        self.co: list[tuple[str, dict[int, tuple[str, str]]]] | None = None
        values = self.graph.get("tensor_values")
        self.value_form = detect_form(values if type(values) is dict else {})
        self.co_rows: list[tuple[str, list[int]]] = []

    def _all_nodes(self, graph: dict[str, Any]) -> list[Any]:
        out: list[Any] = []
        for n in graph["nodes"]:
            out.append(n)
            if self.nested and type(n) is dict:
                for sub in _nested_graphs(n):
                    out.extend(self._all_nodes(sub["graph"]))
        return out

    def run(self) -> Document:
        b = self.b
        co = _co_tables(self.graph) if self.structured else None
        if co is not None:
            self.co = []
            for file, rows in co:
                self.co_rows.append((file, [b.frame(FrameKey(file, line, name, code)) for line, name, code in rows]))
                self.co.append((file, {line: (name, code) for line, name, code in rows}))
        main = self._graph(self.graph, "")
        b.set_graph(name="graph", inputs=main[0], outputs=main[1])
        skeleton = dict(self.obj)
        skeleton["graph_module"] = dict(self.gm)
        skeleton["graph_module"]["graph"] = self._skeleton(self.graph)
        if self.co is not None:
            skeleton["graph_module"]["graph"]["co_fileinfo_ordered_list"] = []
        signature = program_tables.signature_table(b.string, self.gm.get("signature"))
        if signature is not None:
            skeleton["graph_module"]["signature"] = dict(self.gm["signature"], input_specs=[], output_specs=[])
        calls = program_tables.module_call_table(b.string, self.gm.get("module_call_graph"))
        if calls is not None:
            skeleton["graph_module"]["module_call_graph"] = []
        b.add_extension(PROGRAM_EXTENSION, None, raw_json=_dumps(skeleton))
        doc = b.build()
        doc.raw.signature, doc.raw.module_calls = signature, calls
        layout: dict[str, Any] = {"keys": self.keys}
        nodes_extension = NODES_EXTENSION
        form = self.value_form
        known = known_hints(self.graph.get("sym_int_values"))
        reduced = derivable_hints(form.hints, known) if form.hints else None
        if reduced is not None:
            form = replace(form, hints=reduced, derived=True)
        if reduced is not None or self.compact_args:
            nodes_extension = NODES_EXTENSION_DERIVED
        if form.to_json():
            layout["values"] = form.to_json()
        if self.input_keys != ["name", "arg", "kind"]:
            layout["input_keys"] = self.input_keys
        if self.co is not None:
            frame_line = doc.raw.frames.line
            layout["co_fileinfo"] = [
                [doc.raw.lines.file[frame_line[f[0]]] if f else 0, [frame_line[i] for i in f]] for _, f in self.co_rows
            ]
            if any(not f for _, f in self.co_rows):
                del layout["co_fileinfo"]  # a file without lines has no row to point at: keep it verbatim
                skeleton["graph_module"]["graph"]["co_fileinfo_ordered_list"] = self.graph["co_fileinfo_ordered_list"]
                doc.raw.extensions[-1] = m.Extension(PROGRAM_EXTENSION, _dumps(skeleton))
        if self.nested and self.graphs:
            layout["graphs"] = self.graphs
        self._check(doc, layout, nodes_extension == NODES_EXTENSION_DERIVED)
        doc.raw.extensions.append(m.Extension(nodes_extension, _dumps(layout)))
        _share(doc.raw)
        return doc

    def _skeleton(self, graph: dict[str, Any], *, nested: bool = False) -> dict[str, Any]:
        """The graph without what the document holds: nodes, values, and the main graph's inputs and outputs."""
        out = dict(graph, nodes=[]) if nested else dict(graph, nodes=[], inputs=[], outputs=[])
        if type(graph.get("tensor_values")) is dict:
            out["tensor_values"] = {}
        return out

    def _graph(self, graph: dict[str, Any], prefix: str) -> tuple[list[m.Argument], list[m.Argument]]:
        """Add a graph's values and nodes (and its nested graphs'); return its typed inputs and outputs."""
        b = self.b
        values = graph.get("tensor_values")
        count = 0
        if type(values) is dict:
            for name, meta in values.items():
                _add_value(b, name, meta, self.value_form)
                count += 1
        inputs = [] if prefix else [_typed_argument(b, a) for a in graph["inputs"]]
        outputs = [] if prefix else [_typed_argument(b, a) for a in graph["outputs"]]
        start = len(self.raw_nodes)
        self.fx_names[prefix] = GraphNames(
            sym_ops_by_output=self.version.major >= 5,
            style="current" if (self.version.major, self.version.minor or 0) >= (8, 7) else "legacy",
        )
        self.fx_names[prefix].inputs(graph["inputs"])
        for n in graph["nodes"]:
            self._node(n, prefix)
        if prefix:
            self.graphs[self._graph_slot].extend([len(self.raw_nodes) - start, count])
        return inputs, outputs

    _graph_slot = 0

    def _node(self, n: Any, prefix: str) -> None:
        b = self.b
        i = len(self.raw_nodes)
        if type(n) is not dict:  # torch's schema has objects only; [null] would come back as [{}]
            where = f"$.graph_module.graph.nodes[{i}]" if not prefix else f"graph {prefix.rstrip('/')!r}, node {i}"
            raise LegacyFormatError(f"a node is {json.dumps(n)[:40]}", where=where, expected="a JSON object")
        self.raw_nodes.append(n)
        self.prefixes.append(prefix)
        if type(n) is dict and list(n) == self.keys and _plain_node(n, self.input_keys):
            name = self._name(n, i, prefix)
            subs: list[dict[str, Any]] = []
            try:
                b.add_node(
                    name,
                    n["target"],
                    inputs=[(a["name"], self._argument(a["arg"], subs), a.get("kind", 0)) for a in n["inputs"]],
                    outputs=[_typed_argument(b, a) for a in n["outputs"]],
                    meta=n["metadata"],
                    **self._co_stack(n["metadata"]),
                )
                self.names.add(name)
                self.typed.append(i)
                for sub in subs:
                    slot = len(self.graphs)
                    self.graphs.append([])
                    saved, self._graph_slot = self._graph_slot, slot
                    self._graph(sub["graph"], f"{name}/{sub['name']}/")
                    self._graph_slot = saved
                return
            except UsageError:  # a duplicate node name: keep the node verbatim
                pass
        b.add_raw_node(_generic_node(b, i, n if type(n) is dict else {}))
        self.whole[str(i)] = n

    def _name(self, n: dict[str, Any], i: int, prefix: str) -> str:
        if "name" in n:
            return f"{prefix}{n['name']}"
        # Schemas before 8 have no node names: the name torch.export.load gives the node.
        candidate = f"{prefix}{self.fx_names[prefix].node(n)}"
        return candidate if candidate not in self.names else f"{prefix}#{i}"

    def _co_stack(self, meta: dict[str, str]) -> dict[str, Any]:
        """A PR #121675 compact stack trace as the node's stack (the metadata keeps the compact text)."""
        if self.co is None or "stack_trace" not in meta:
            return {}
        frames = _co_frames(meta["stack_trace"], self.co)
        return {} if frames is None else {"stack_trace": frames}

    def _argument(self, arg: Any, subs: list[dict[str, Any]]) -> m.Argument:
        sub = _as_graph(arg) if self.nested else None
        if sub is None and self.nested and type(arg) is dict and list(arg) == ["as_graph"]:
            # Not {"name", "graph"}: as a generic argument the export would read it as a nested graph's
            # skeleton. The node is kept verbatim instead (UsageError: the caller's way back to that).
            raise UsageError("an as_graph argument that is not a nested graph")
        if sub is not None:
            subs.append(sub)
            inner: dict[str, Any] = {"name": sub["name"], "graph": self._skeleton(sub["graph"], nested=True)}
            if list(arg) != ["as_graph"]:  # schemas 1-2 write every union member, null but this one
                inner["union_keys"] = list(arg)
            return m.ArgGeneric(self.b.string("as_graph"), self.b.string(_dumps(inner)))
        compact = _compact_sym_ints(arg)
        if compact is not None:
            self.compact_args += 1
            return m.ArgGeneric(self.b.string("as_sym_ints"), self.b.string(_dumps(compact)))
        return _typed_argument(self.b, arg)

    compact_args = 0

    def _check(self, doc: Document, layout: dict[str, Any], layout_2: bool) -> None:
        """Rebuild every typed node; keep the ones that do not come back equal verbatim."""
        renderer = _MetaRenderer(doc)
        strings, stored = doc.raw.strings, doc.raw.graph.nodes
        argument = (lambda a: _argument_json_2(strings, a)) if layout_2 else None
        extras_of: dict[str, Any] = {}
        nested_holders = set()
        if self.nested:
            nested_holders = {i for i in self.typed if _nested_graphs(self.raw_nodes[i])}
        for i in self.typed:
            n = self.raw_nodes[i]
            extras = {k: n[k] for k in self.extra_keys}
            if any(_dumps(v) != self.extra_defaults[k] for k, v in extras.items()):
                extras_of[str(i)] = extras
            if i in nested_holders:
                continue  # checked with the whole file
            rebuilt = _node_json(
                strings,
                renderer,
                stored[i],
                self.keys,
                extras,
                prefix=self.prefixes[i],
                input_keys=self.input_keys,
                arg=argument,
            )
            if _dumps(rebuilt) != _dumps(n):
                self.whole[str(i)] = n
        layout["defaults"] = {k: json.loads(v) for k, v in self.extra_defaults.items()}
        layout["extras"] = extras_of
        layout["whole"] = self.whole


_NODE_FIELDS = ("target", "inputs", "outputs", "metadata", "name")


def _nested_graphs(n: Any) -> list[dict[str, Any]]:
    """The ``{"name", "graph"}`` of every ``as_graph`` input of a node."""
    if type(n) is not dict or type(n.get("inputs")) is not list:
        return []
    subs = (_as_graph(a.get("arg")) if type(a) is dict else None for a in n["inputs"])
    return [sub for sub in subs if sub is not None]


def _as_graph(arg: Any) -> dict[str, Any] | None:
    """The ``{"name", "graph"}`` of an ``{"as_graph": ...}`` argument, or None."""
    if type(arg) is not dict or "as_graph" not in arg or any(v is not None for k, v in arg.items() if k != "as_graph"):
        return None
    sub = arg["as_graph"]
    ok = type(sub) is dict and list(sub) == ["name", "graph"] and type(sub["name"]) is str and _is_graph(sub["graph"])
    return sub if ok else None


def _plain_node(n: dict[str, Any], input_keys: list[str]) -> bool:
    """Whether a node's fields have the types the typed form holds (a node whose first sibling set
    the key order may still lack a field the typed form needs: then it is kept as it is)."""
    if any(k not in n for k in ("target", "inputs", "outputs", "metadata")):
        return False
    meta = n["metadata"]
    kinds = "kind" in input_keys
    return (
        ("name" not in n or type(n["name"]) is str)
        and type(n["target"]) is str
        and type(meta) is dict
        and all(type(k) is str and type(v) is str for k, v in meta.items())
        and type(n["inputs"]) is list
        and type(n["outputs"]) is list
        and all(
            type(a) is dict
            and list(a) == input_keys
            and type(a["name"]) is str
            and (not kinds or (type(a["kind"]) is int and a["kind"] in (0, 1, 2)))
            for a in n["inputs"]
        )
    )


def _generic_node(b: DocumentBuilder, i: int, n: dict[str, Any]) -> m.Node:
    name = n.get("name")
    return m.Node(
        name=b.string(name if type(name) is str else f"<node {i}>"), target=b.string(str(n.get("target", "")))
    )


def _node_json(
    s: list[str],
    b: _MetaRenderer,
    node: m.Node,
    keys: list[str],
    extras: dict[str, Any],
    *,
    prefix: str,
    input_keys: list[str],
    arg: Any = None,
) -> dict[str, Any]:
    """Rebuild a node's torch JSON from its stored form, in torch's key order."""
    argument = arg or (lambda a: _argument_json(s, a))
    out: dict[str, Any] = {}
    kinds = "kind" in input_keys
    for k in keys:
        if k == "target":
            out[k] = s[node.target]
        elif k == "name":
            out[k] = s[node.name].removeprefix(prefix)
        elif k == "inputs":
            out[k] = [
                {"name": s[a.name], "arg": argument(a.arg), "kind": int(a.kind)}
                if kinds
                else {"name": s[a.name], "arg": argument(a.arg)}
                for a in node.inputs
            ]
        elif k == "outputs":
            out[k] = [_argument_json(s, a) for a in node.outputs]
        elif k == "metadata":
            out[k] = b.meta_of(node)
        else:
            out[k] = extras[k]
    return out


def _share(raw: m.Document) -> None:
    """The program's JSON with its strings interned (schema 1.2, ``Extension.template``), in place."""
    strings = raw.strings
    ids: dict[str, int] = {}
    for i, text in enumerate(strings):
        ids.setdefault(text, i)

    def intern(text: str) -> int:
        i = ids.get(text)
        if i is None:
            i = ids[text] = len(strings)
            strings.append(text)
        return i

    for i, e in enumerate(raw.extensions):
        if (e.name == PROGRAM_EXTENSION or e.name in _NODES_EXTENSIONS) and not e.template:
            parts = interned_json.split(e.json, intern)
            if parts is not None:
                raw.extensions[i] = m.Extension(e.name, "", parts[0], parts[1])


class _MetaRenderer:
    """Renders a stored node's metadata dict, lifted values included."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc

    def meta_of(self, node: m.Node) -> dict[str, str]:
        return self.doc.node_meta(node)


def _extension(doc: Document, name: str, *also: str) -> Any:
    for i, e in enumerate(doc.raw.extensions):
        if e.name == name or e.name in also:
            if e.template:
                return interned_json.fill_value(e.template, e.refs, doc.raw.strings, where=f"$.extensions[{i}]")
            return json_value(e.json, f"$.extensions[{i}].json")
    raise UsageError(f"the document has no {name!r} extension: it was not imported from a torch model.json")


def export_model_json(doc: Document) -> bytes:
    """Write the torch.export ``model.json`` a document was imported from, byte for byte."""
    if doc.extension("executorch/method") is not None:  # an ETRecord method: its debug handles back in
        from tracepack.torch.executorch.etrecord import restore_debug_handles

        doc = restore_debug_handles(doc)
    return _export(doc).encode("ascii")


def _export(doc: Document) -> str:
    from tracepack.errors import DecodeError
    from tracepack.io.guard import run

    # as deep as the import allowed: the same max_depth budget
    return run(lambda: _dumps(export_program(doc)), None, DecodeError, "$")


def export_program(doc: Document) -> Any:
    """The ``model.json`` a document was imported from, as the parsed JSON value (no text in between)."""
    derived = any(e.name == NODES_EXTENSION_DERIVED for e in doc.raw.extensions)
    nodes = _extension(doc, NODES_EXTENSION, NODES_EXTENSION_DERIVED)
    return _Exporter(doc, _extension(doc, PROGRAM_EXTENSION), nodes, derived=derived).run()


class _Exporter:
    def __init__(self, doc: Document, program: Any, layout: Any, *, derived: bool = False) -> None:
        self.doc = doc
        self.program = program
        self.s = doc.raw.strings
        self.renderer = _MetaRenderer(doc)
        self.keys = layout["keys"]
        self.input_keys = layout.get("input_keys", ["name", "arg", "kind"])
        self.defaults = layout["defaults"]
        self.extras_of = layout["extras"]
        self.whole = layout["whole"]
        self.graphs: list[list[int]] = layout.get("graphs", [])
        self.co = layout.get("co_fileinfo")
        self.value_form = replace(ValueForm.from_json(layout.get("values")), derived=derived)
        if derived:  # the program's sym_int_values hints, under the stored ones (derivable_hints' known)
            graph = program["graph_module"]["graph"] if type(program) is dict else None
            known = known_hints(graph.get("sym_int_values") if type(graph) is dict else None)
            self.value_form = replace(self.value_form, hints={**known, **self.value_form.hints})
        self.nested = "graphs" in layout
        self.node = 0
        self.value = 0
        self.graph_slot = 0

    def run(self) -> Any:
        g = self.doc.raw.graph
        gm = self.program["graph_module"]
        if self.doc.raw.signature is not None:
            gm["signature"].update(program_tables.signature_json(self.s, self.doc.raw.signature))
        if self.doc.raw.module_calls is not None:
            gm["module_call_graph"] = program_tables.module_calls_json(self.s, self.doc.raw.module_calls)
        graph = gm["graph"]
        total_nested = sum(c[0] for c in self.graphs)
        nested_values = sum(c[1] for c in self.graphs)
        self._fill(graph, len(g.nodes) - total_nested, len(g.values) - nested_values, "")
        graph["inputs"] = [_argument_json(self.s, a) for a in g.inputs]
        graph["outputs"] = [_argument_json(self.s, a) for a in g.outputs]
        if self.co is not None:
            graph["co_fileinfo_ordered_list"] = self._co_fileinfo()
        return self.program

    def _co_fileinfo(self) -> list[Any]:
        r, s = self.doc.raw, self.s
        out = []
        for file_row, line_rows in self.co:
            lines = {str(r.lines.line[i]): {"name": s[r.lines.name[i]], "line": s[r.lines.text[i]]} for i in line_rows}
            out.append({"file_name": s[r.files.name[file_row]], "line_info_map": lines})
        return out

    def _fill(self, graph: dict[str, Any], n_nodes: int, n_values: int, prefix: str) -> None:
        s, values = self.s, self.doc.raw.graph.values
        if "tensor_values" in graph:
            taken = values[self.value : self.value + n_values]
            graph["tensor_values"] = {s[v.name]: _value_json(s, v, self.value_form) for v in taken}
        self.value += n_values
        nodes = []
        stored = self.doc.raw.graph.nodes
        for _ in range(n_nodes):
            i = self.node
            self.node += 1
            kept = self.whole.get(str(i))
            if kept is not None:
                nodes.append(kept)
                continue
            extras = dict(self.defaults)
            extras.update(self.extras_of.get(str(i), {}))
            node = stored[i]
            name = s[node.name]
            nodes.append(
                _node_json(
                    s,
                    self.renderer,
                    node,
                    self.keys,
                    extras,
                    prefix=prefix,
                    input_keys=self.input_keys,
                    arg=lambda a, name=name: self._argument(a, name),
                )
            )
        graph["nodes"] = nodes

    def _argument(self, a: m.Argument, owner: str) -> Any:
        value = _argument_json_2(self.s, a) if self.value_form.derived else _argument_json(self.s, a)
        if self.nested and isinstance(a, m.ArgGeneric) and self.s[a.variant] == "as_graph":
            sub = value["as_graph"]
            keys = sub.pop("union_keys", None)
            if keys is not None:
                value = {k: sub if k == "as_graph" else None for k in keys}
            if self.graph_slot >= len(self.graphs):
                raise DecodeError("more nested graphs than the layout records", where="$.extensions")
            n_nodes, n_values = self.graphs[self.graph_slot]
            self.graph_slot += 1
            self._fill(sub["graph"], n_nodes, n_values, f"{owner}/{sub['name']}/")
        return value
