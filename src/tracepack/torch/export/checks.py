"""Typed checks of what the ``model.json`` exporter reads from a document, before it uses any of it.

A ``.tpk`` whose schema is valid can still hold extensions its importer never wrote: a crafted file's
``torch.export/nodes`` layout may be ``[]``, its ``keys`` an integer, a typed tensor value's dtype a
string that names no dtype. The exporter (:func:`tracepack.torch.export.model_json.export_program`,
``tracepack expand``, ``tracepack.torch.from_document``) checks each extension it reads against the
shape its importer writes, and each typed value against what it can spell back, so such a file is one
line naming the extension (or value) and the JSON path inside it, a
:class:`~tracepack.errors.DecodeError`, instead of a KeyError or TypeError from deep inside.

The checks follow the exporter's reads, no more: a value the exporter copies without looking inside
(a node kept whole, the program's fields it does not rebuild) is left as it is, and comes back as it
was stored.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, NoReturn

from tracepack import model as m
from tracepack.errors import DecodeError
from tracepack.torch.export.values import DTYPE_CODES, LAYOUT_CODES, ValueForm

__all__ = ["Extension", "check_layout", "check_nested_graph", "check_program", "check_value", "value_form"]

#: The node fields the exporter rebuilds from a node's typed form (any other key of ``keys`` is an extra).
NODE_FIELDS: Final = ("target", "inputs", "outputs", "metadata", "name")
_INPUT_KEYS: Final = (["name", "arg", "kind"], ["name", "arg"])
_HINT_KINDS: Final = ("as_int", "as_float", "as_bool")
_DEVICE = re.compile(r"([^:]*)(?::(-?[0-9]{1,19}))?\Z")
_I64: Final = 1 << 63


def _describe(value: Any) -> str:
    """What a JSON value is, in words, with a short sample (of a scalar; a container by its size)."""
    if value is None:
        return "null"
    if type(value) in (list, dict):
        kind, unit = ("array", "item") if type(value) is list else ("object", "key")
        return f"an empty {kind}" if not value else f"an {kind} of {len(value)} {unit}{'s' if len(value) > 1 else ''}"
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(type(value), "a value")
    text = json.dumps(value[:41] if type(value) is str else value)
    return f"{kind} ({text[:40]}{'...' if len(text) > 40 else ''})"


class Extension:
    """Checks of one extension's JSON value: a failure names the extension and the JSON path."""

    def __init__(self, name: str, index: int | None) -> None:
        self.name = name
        self.index = index

    def fail(self, path: str, problem: str, expected: str) -> NoReturn:
        at = f"$.extensions[{self.index}]" if self.index is not None else "extension"
        raise DecodeError(problem, where=f"{at} ({self.name}) {path}", expected=expected)

    def obj(self, value: Any, path: str, expected: str = "an object") -> dict[str, Any]:
        if type(value) is not dict:
            self.fail(path, f"is {_describe(value)}", expected)
        return value

    def array(self, value: Any, path: str, expected: str = "an array") -> list[Any]:
        if type(value) is not list:
            self.fail(path, f"is {_describe(value)}", expected)
        return value

    def strings(self, value: Any, path: str, expected: str = "an array of strings") -> list[str]:
        items = self.array(value, path, expected)
        for i, x in enumerate(items):
            if type(x) is not str:
                self.fail(f"{path}[{i}]", f"is {_describe(x)}", expected)
        return items

    def count(self, value: Any, path: str, expected: str = "a count (an integer from 0)") -> int:
        if type(value) is not int or value < 0:
            self.fail(path, f"is {_describe(value)}", expected)
        return value


# -- torch.export/program ---------------------------------------------------------------------------


def check_program(value: Any, at: Extension, *, signature: bool) -> dict[str, Any]:
    """The program skeleton: an object whose ``graph_module`` holds a ``graph`` object (and a
    ``signature`` object when the document's signature table fills it)."""
    program = at.obj(value, "$", "the torch.export program (an object with graph_module)")
    if "graph_module" not in program:
        at.fail("$", "has no graph_module", "the torch.export program (an object with graph_module)")
    gm = at.obj(program["graph_module"], "$.graph_module")
    if "graph" not in gm:
        at.fail("$.graph_module", "has no graph", "an object with graph")
    at.obj(gm["graph"], "$.graph_module.graph")
    if signature:
        if "signature" not in gm:
            at.fail("$.graph_module", "has no signature", "an object with signature (the document has a signature)")
        at.obj(gm["signature"], "$.graph_module.signature")
    return program


# -- torch.export/nodes, torch.export/nodes-2 ------------------------------------------------------


def check_layout(value: Any, at: Extension, raw: m.Document) -> dict[str, Any]:
    """The nodes layout: which keys a node has and in what order, the extra keys' defaults and
    exceptions, the nodes kept whole, the nested graphs' sizes, the value form, PR #121675's file
    tables. Every index it holds is checked against the document."""
    layout = at.obj(value, "$", "the nodes layout (an object with keys, defaults, extras, whole)")
    for key in ("keys", "defaults", "extras", "whole"):
        if key not in layout:
            at.fail("$", f"has no {key}", "the nodes layout (an object with keys, defaults, extras, whole)")
    keys = at.strings(layout["keys"], "$.keys", "the node fields in order (an array of strings)")
    if len(set(keys)) != len(keys):
        at.fail("$.keys", "names a field twice", "each node field once")
    defaults = at.obj(layout["defaults"], "$.defaults")
    for k in keys:
        if k not in NODE_FIELDS and k not in defaults:
            at.fail("$.defaults", f"has no default for the extra node field {k!r}", "a default for every extra field")
    if "input_keys" in layout and layout["input_keys"] not in _INPUT_KEYS:
        at.fail("$.input_keys", f"is {_describe(layout['input_keys'])}", '["name", "arg", "kind"] or ["name", "arg"]')
    nodes = len(raw.graph.nodes)
    extras = at.obj(layout["extras"], "$.extras")
    for k, v in extras.items():
        _node_index(at, k, f"$.extras[{json.dumps(k)}]", nodes)
        at.obj(v, f"$.extras[{json.dumps(k)}]", "the node's extra fields (an object)")
    for k in at.obj(layout["whole"], "$.whole"):
        _node_index(at, k, f"$.whole[{json.dumps(k)}]", nodes)
    if "graphs" in layout:
        graphs = at.array(layout["graphs"], "$.graphs", "the nested graphs' node and value counts")
        total = [0, 0]
        for i, pair in enumerate(graphs):
            if type(pair) is not list or len(pair) != 2:
                at.fail(f"$.graphs[{i}]", f"is {_describe(pair)}", "[nodes, values] of a nested graph")
            for j in (0, 1):
                total[j] += at.count(pair[j], f"$.graphs[{i}][{j}]")
        if total[0] > nodes or total[1] > len(raw.graph.values):
            at.fail(
                "$.graphs",
                f"counts {total[0]} nodes and {total[1]} values in nested graphs, the document holds "
                f"{nodes} and {len(raw.graph.values)}",
                "at most the document's nodes and values",
            )
    if "co_fileinfo" in layout:
        rows = at.array(layout["co_fileinfo"], "$.co_fileinfo", "PR #121675's file rows")
        for i, row in enumerate(rows):
            if type(row) is not list or len(row) != 2:
                at.fail(f"$.co_fileinfo[{i}]", f"is {_describe(row)}", "[file row, [line rows]]")
            _row(at, row[0], f"$.co_fileinfo[{i}][0]", len(raw.files.name), "files")
            for j, line in enumerate(at.array(row[1], f"$.co_fileinfo[{i}][1]", "line rows")):
                _row(at, line, f"$.co_fileinfo[{i}][1][{j}]", len(raw.lines.line), "lines")
    if "values" in layout:
        value_form(layout["values"], at, "$.values")
    return layout


def _node_index(at: Extension, key: str, path: str, nodes: int) -> None:
    if not (key.isdigit() and key.isascii() and int(key) < nodes and str(int(key)) == key):
        at.fail(path, f"names node {key[:20]!r}", f"a node index below {nodes}")


def _row(at: Extension, value: Any, path: str, rows: int, table: str) -> None:
    if type(value) is not int or not 0 <= value < rows:
        at.fail(path, f"is {_describe(value)}", f"a row of the {table} table (below {rows})")


def value_form(value: Any, at: Extension, path: str) -> ValueForm:
    """A :class:`ValueForm` as the importer writes it (``ValueForm.to_json``), checked."""
    form = at.obj(value, path, "the value form (an object)")
    for key in ("wrapped", "device_index", "offset_int"):
        if key in form and type(form[key]) is not bool:
            at.fail(f"{path}.{key}", f"is {_describe(form[key])}", "true or false")
    for key in ("sym_members", "hint_members"):
        if key in form:
            members = at.strings(form[key], f"{path}.{key}", "union members (an array of strings)")
            if len(set(members)) != len(members):
                at.fail(f"{path}.{key}", "names a member twice", "each union member once")
    if "hints" in form:
        for expr, hint in at.obj(form["hints"], f"{path}.hints", "hints by expression (an object)").items():
            ok = (
                hint is None
                or (type(hint) is int and form.get("hint_members") == [])
                or (type(hint) is dict and len(hint) == 1 and next(iter(hint)) in _HINT_KINDS)
            )
            if not ok:
                at.fail(f"{path}.hints[{json.dumps(expr)[:40]}]", f"is {_describe(hint)}", 'null or {"as_int": n}')
    return ValueForm.from_json(form)


def check_nested_graph(value: Any, at: Extension, where: str) -> dict[str, Any]:
    """A nested graph's skeleton as an ``as_graph`` argument stores it: ``{"name", "graph"[, "union_keys"]}``."""
    sub = at.obj(value, where, 'a nested graph ({"name", "graph"})')
    if type(sub.get("name")) is not str:
        at.fail(f"{where}.name", f"is {_describe(sub.get('name'))}", "the nested graph's name (a string)")
    at.obj(sub.get("graph"), f"{where}.graph", "the nested graph (an object)")
    if "union_keys" in sub:
        keys = at.strings(sub["union_keys"], f"{where}.union_keys", "the union's members (an array of strings)")
        if "as_graph" not in keys or len(set(keys)) != len(keys):
            at.fail(f"{where}.union_keys", f"is {_describe(keys)}", "each union member once, as_graph among them")
    return sub


# -- typed tensor values -------------------------------------------------------------------------


def check_value(s: list[str], v: m.Value, index: int) -> None:
    """A typed tensor value the exporter spells back: a dtype and layout it knows, a device ``type``
    or ``type:index``, symbolic sizes and strides (when given) one per size and stride."""
    where = f"$.graph.values[{index}]"
    if s[v.dtype] not in DTYPE_CODES:
        raise DecodeError(
            f"dtype {s[v.dtype][:40]!r} is not a torch export dtype",
            where=f"{where}.dtype",
            expected=f"one of {', '.join(sorted(DTYPE_CODES))}",
        )
    if v.layout and s[v.layout] not in LAYOUT_CODES:
        raise DecodeError(
            f"layout {s[v.layout][:40]!r} is not a torch export layout",
            where=f"{where}.layout",
            expected=f"the default (strided) or one of {', '.join(sorted(LAYOUT_CODES))}",
        )
    device = _DEVICE.match(s[v.device])
    if device is None or (device.group(2) is not None and not -_I64 <= int(device.group(2)) < _I64):
        raise DecodeError(
            f"device {s[v.device][:40]!r}",
            where=f"{where}.device",
            expected="a device type, or type:index with a 64-bit integer index (cpu, cuda:0)",
        )
    for sym, plain, name in ((v.sym_shape, v.shape, "shape"), (v.sym_strides, v.strides, "strides")):
        if sym and len(sym) != len(plain):
            raise DecodeError(
                f"{len(sym)} symbolic {name} entries for {len(plain)} {name} entries",
                where=f"{where}.sym_{name}",
                expected=f"none, or one per {name} entry",
            )
