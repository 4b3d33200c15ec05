"""The crafted campaign's inputs: every hostile class of issue 24, made at every place it applies.

Nothing here is random. Each class walks the seeds and crafts one input per place and per kind of
damage, so a run names exactly what was tried (``Case.label``) and the same inputs come every time:

``memory``
    zip64 lies in every zip reader: for every member of every archive seed (``.pt2`` in both
    layouts and packed, TorchScript ``.pt``/``.ptl``, mobile ``.ptl``, ETRecord), its central
    directory or local header declares ``0xFFFFFFFF`` bytes (the zip64 marker) without a zip64
    record, or a zip64 record declares 2^62 bytes; the directory's own offset and size lie too.
    ``.pte`` programs get the same lies in their segment table.
``hang``
    inputs that are not regular files (a FIFO nobody writes to, a folder, a character device): one
    case per kind; the runner gives it to every command at every input position.
``extension``
    crafted torch extensions in a schema-valid ``.tpk``: at every JSON path of every extension the
    torch bridge reads (``torch.export/program``, ``torch.export/nodes``/``nodes-2``,
    ``tracepack.pt2/layout``, ``torchscript/archive``, ``torchscript/mobile-render``,
    ``executorch/method``), each other JSON type, the key deleted, and a wrong-typed item added; plus
    every typed tensor value field given a string that is not what it names (a dtype that is not a
    dtype, a device ``cpu:x``, ``sym_shape`` longer or shorter than ``shape``, ...).
``type``
    type confusion at every field of torch's ``model.json`` schema (the generated ``torch_schema``
    ``TYPES`` name them): at the first place each field occurs in each seed, each other JSON type
    and the field deleted; every member of every union the seeds hold, with a value of every type.
``deep``
    deep nesting at every nesting point: each array and object of each seed replaced by arrays
    nested to just under and just over the ``max_depth`` budget, and arrays and objects nested
    100,000 deep; JSON text in strings (``from_node``, ``custom``, treespecs) nested the same way.
``number``
    every number replaced by a 5,000-digit integer (both signs), 2^64, -2^63-1, ``1e400``,
    ``NaN``, ``Infinity``.
``text``
    every string (values and object keys) given a lone surrogate escape (``\\ud800``), invalid UTF-8
    bytes, an encoded surrogate (``\\xed\\xa0\\x80``), an overlong encoding, a NUL escape.

:func:`cases` yields them; ``scope="quick"`` takes a fixed, evenly spread slice of each class
(``make test``), ``"full"`` everything (``make campaign``).
"""

from __future__ import annotations

import functools
import io
import json
import struct
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = ["CLASSES", "Case", "Seed", "cases", "model_json_seeds", "schema_fields"]

ROOT: Final = Path(__file__).resolve().parents[2]
TORCH_DATA: Final = ROOT / "tests/data/torch"
ET_DATA: Final = ROOT / "tests/data/executorch"
SAMPLE_PT2: Final = ROOT / "src/tracepack/data/sample/tiny_transformer.pt2"
CLASSES: Final = ("memory", "hang", "extension", "type", "deep", "number", "text")
_MARK: Final = "tracepack-campaign-mark"
_MARK_TEXT: Final = json.dumps(_MARK).encode()


@dataclass(frozen=True)
class Case:
    """One crafted input: its class, what it is (how the runner feeds it), where and how it was made."""

    klass: str
    #: ``model.json``, ``pt2``, ``tpk``, ``ts`` (TorchScript), ``etrecord``, ``pte``, or for ``hang``
    #: ``fifo``, ``folder``, ``chardev``.
    kind: str
    label: str
    data: bytes = b""
    #: The seed it was made from (``Seed.name``): the runner wraps a model.json in its archive.
    seed: str = ""
    #: The field of torch's schema it changes (``Class.field``), where it is one.
    field: str = ""


@dataclass(frozen=True)
class Seed:
    """A model.json seed and the archive it came from."""

    name: str
    archive: Path
    member: str
    text: bytes

    @property
    def obj(self) -> Any:
        return json.loads(self.text)


# -- seeds -----------------------------------------------------------------------------------------


def _program_member(z: zipfile.ZipFile) -> str:
    for n in z.namelist():
        if n.endswith("/models/model.json") or n == "serialized_exported_program.json":
            return n
    raise AssertionError("no program member")  # pragma: no cover - the seeds are committed


@functools.cache
def model_json_seeds() -> tuple[Seed, ...]:
    """Small programs of every schema family torch releases wrote: 2.13 (schema 8.20, symbolic
    sizes; nested ``torch.cond`` graphs), a program with ``from_node`` provenance, and the flat
    archives of torch 2.1 (schema 1, wrapped values), 2.2 (schema 2, all-member unions), 2.5 (7.3)."""
    picks = [
        ("2.13/dynamic", TORCH_DATA / "releases/2.13/dynamic.pt2"),
        ("2.13/cond", TORCH_DATA / "releases/2.13/cond.pt2"),
        ("corpus/helpers", TORCH_DATA / "corpus/helpers.pt2"),
        ("2.1/dynamic", TORCH_DATA / "releases/2.1/dynamic.pt2"),
        ("2.2/dynamic", TORCH_DATA / "releases/2.2/dynamic.pt2"),
        ("2.5/cond", TORCH_DATA / "releases/2.5/cond.pt2"),
    ]
    out = []
    for name, path in picks:
        with zipfile.ZipFile(path) as z:
            member = _program_member(z)
            out.append(Seed(name, path, member, z.read(member)))
    return tuple(out)


def seed_by_name(name: str) -> Seed:
    return next(s for s in model_json_seeds() if s.name == name)


def wrap(seed: Seed, program: bytes) -> bytes:
    """The seed's archive with its program member replaced (every other member as it was)."""
    out = io.BytesIO()
    with zipfile.ZipFile(seed.archive) as z, zipfile.ZipFile(out, "w") as w:
        for info in z.infolist():
            w.writestr(info, program if info.filename == seed.member else z.read(info))
    return out.getvalue()


# -- torch's model.json schema, walked with a value ------------------------------------------------


@functools.cache
def schema_types() -> dict[str, tuple[str, tuple[tuple[str, str, str | None], ...]]]:
    """``TYPES`` of the newest generated torch schema module (every class, field and type)."""
    import importlib
    import pkgutil

    import tracepack_generated.torch_schema as pkg

    names = sorted(
        (m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name.startswith("v")),
        key=lambda n: tuple(int(p) for p in n[1:].split("_")),
    )
    return importlib.import_module(f"{pkg.__name__}.{names[-1]}").TYPES  # type: ignore[no-any-return]


def schema_fields() -> set[str]:
    """Every ``Class.field`` of the schema a ``model.json`` can hold (reachable from ExportedProgram)."""
    types = schema_types()
    seen: set[str] = set()
    out: set[str] = set()
    todo = ["ExportedProgram"]
    while todo:
        name = todo.pop()
        if name in seen or name not in types:
            continue
        seen.add(name)
        kind, fields = types[name]
        if kind == "enum":
            continue
        for fname, ftype, _ in fields:
            out.add(f"{name}.{fname}")
            todo.extend(_type_names(ftype))
    return out


def _type_names(t: str) -> list[str]:
    import re

    return [w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", t) if w not in ("List", "Dict", "Optional", "str")]


def _inner(t: str, head: str) -> str | None:
    return t[len(head) + 1 : -1] if t.startswith(head + "[") and t.endswith("]") else None


@dataclass(frozen=True)
class Spot:
    """One place in a parsed model.json: its path, its shape (indices and map keys folded), its
    schema type and field, its value; ``key``: the place is an object key, not a value."""

    path: tuple[str | int, ...]
    shape: tuple[str, ...]
    typ: str | None
    field: str | None
    value: Any
    key: bool = False


def walk(value: Any, typ: str | None = "ExportedProgram") -> Iterator[Spot]:
    """Every place of a model.json, typed by torch's schema where it knows the place."""
    types = schema_types()
    stack: list[tuple[Any, str | None, tuple[str | int, ...], tuple[str, ...], str | None]] = [
        (value, typ, (), (), None)
    ]
    while stack:
        v, t, path, shape, fld = stack.pop()
        if t is not None and (opt := _inner(t, "Optional")) is not None:
            t = opt
        yield Spot(path, shape, t, fld, v)
        if type(v) is list:
            item = _inner(t, "List") if t else None
            for i, x in reversed(list(enumerate(v))):
                stack.append((x, item, (*path, i), (*shape, "[]"), fld))
        elif type(v) is dict:
            mapped = _inner(t, "Dict") if t else None
            if mapped is not None:
                item = mapped.split(", ", 1)[1]
                for k, x in reversed(list(v.items())):
                    stack.append((x, item, (*path, k), (*shape, "{}"), fld))
                    yield Spot((*path, k), (*shape, "{}"), "str", fld, k, key=True)
                continue
            known = types.get(t or "")
            fields = {f: ft for f, ft, _ in known[1]} if known and known[0] != "enum" else {}
            for k, x in reversed(list(v.items())):
                stack.append((x, fields.get(k), (*path, k), (*shape, k), f"{t}.{k}" if k in fields else None))
                yield Spot((*path, k), (*shape, k), "str", None, k, key=True)


def render(text: bytes, path: tuple[str | int, ...], fragment: bytes | None, *, key: bool = False) -> bytes:
    """``text`` (a model.json) with the value at ``path`` replaced by the raw JSON ``fragment``
    (None: the key deleted); ``key``: the object key at ``path`` renamed to the string ``fragment``.
    Laid out as torch writes it (``json.dumps`` defaults), so only the damage differs."""
    obj = json.loads(text)
    parent = obj
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if key:
        assert isinstance(parent, dict)
        assert isinstance(last, str)
        parent_items = [(_MARK if k == last else k, v) for k, v in parent.items()]
        parent.clear()
        parent.update(parent_items)
    elif fragment is None:
        del parent[last]
    else:
        parent[last] = _MARK
    out = json.dumps(obj).encode("ascii")
    return out if fragment is None and not key else out.replace(_MARK_TEXT, fragment or b'""', 1)


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if type(v) is bool:
        return "bool"
    if type(v) is int:
        return "int"
    if type(v) is float:
        return "float"
    if type(v) is str:
        return "string"
    return "array" if type(v) is list else "object"


#: One value of each JSON type, by the type's name.
_TYPED: Final = {
    "null": b"null",
    "bool": b"true",
    "int": b"0",
    "float": b"0.5",
    "string": b'"x"',
    "array": b"[]",
    "object": b"{}",
    "array-of-null": b"[null]",
    "object-of-null": b'{"x": null}',
}


def _json_seeds_cases(klass: str) -> Iterator[Case]:
    seen: set[tuple[int, tuple[str, ...]]] = set()
    for seed in model_json_seeds():
        obj = seed.obj
        # type confusion and deep nesting take another road per schema family (the importer reads each
        # family's forms); strings and numbers are read alike in all of them
        family = _family(obj) if klass in ("type", "deep") else 0
        for spot in walk(obj):
            if not spot.path:
                continue
            shape = spot.shape + (("<key>",) if spot.key else ())
            # older schema families: each field once (their all-member unions repeat every field)
            mark = (family, (spot.field,) if family not in (0, 8) and spot.field else shape)
            if mark in seen:
                continue
            seen.add(mark)
            where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in spot.path)
            field = f" ({spot.field})" if spot.field else ""
            for how, fragment in _fragments(klass, spot):
                data = render(seed.text, spot.path, fragment, key=spot.key and fragment is not None)
                label = f"{seed.name} {where}{field} <- {how}"
                yield Case(klass, "model.json", label, data, seed.name, spot.field or "")
        if klass == "type":
            yield from _union_members(seed, family, seen)
    if klass in ("deep", "number", "text"):
        yield from _etrecord_json_cases(klass)


def _etrecord_json_cases(klass: str) -> Iterator[Case]:
    """The JSON members of an ETRecord (its programs, debug handle and delegate maps, graph id), each
    replaced by JSON of the class: nested past the budget, a huge integer, a string that is not UTF-8."""
    data = (ET_DATA / "model.etrecord").read_bytes()
    fragments = {
        "deep": [("arrays nested 100,000 deep", b"[" * 100_000 + b"]" * 100_000),
                 ("objects nested 100,000 deep", b'{"a": ' * 100_000 + b"1" + b"}" * 100_000)],
        "number": [("a 5,000-digit integer", b"9" * 5000), ("an object holding one", b'{"forward": {"0": ' + b"9" * 5000 + b"}}")],
        "text": [("invalid UTF-8", b'{"forward": {"\xff": 1}}'),
                 ("a lone surrogate", b'{"forward": {"\\ud800": 1}}')],
    }[klass]  # fmt: skip
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        infos = z.infolist()
        members = {i.filename: z.read(i) for i in infos}
    for name, body in members.items():
        if body[:1] not in (b"{", b"[") and name != "export_graph_id":
            continue
        for how, fragment in fragments:
            out = io.BytesIO()
            with zipfile.ZipFile(out, "w") as w:
                for info in infos:
                    w.writestr(info, fragment if info.filename == name else members[info.filename])
            yield Case(klass, "etrecord", f"model.etrecord:{name} <- {how}", out.getvalue())


def _family(obj: Any) -> int:
    v = obj.get("schema_version") if type(obj) is dict else None
    return v.get("major", 0) if type(v) is dict else v if type(v) is int else 0


def _fragments(klass: str, spot: Spot) -> list[tuple[str, bytes | None]]:
    v = spot.value
    if klass == "type":
        if spot.key:
            return []
        own = _kind(v)
        out: list[tuple[str, bytes | None]] = [(n, frag) for n, frag in _TYPED.items() if n.split("-")[0] != own]
        if own == "array" and v:
            out.append(("array-item-wrong", json.dumps([*v, {"x": [None]}]).encode()))
        if len(spot.path) and not isinstance(spot.path[-1], int):
            out.append(("missing", None))
        return out
    if klass == "deep":
        if spot.key or type(v) not in (list, dict):
            if spot.typ == "str" and not spot.key and spot.field is None and spot.path[-1] in _JSON_TEXT_KEYS:
                return [
                    (f"JSON text nested {n:,} deep", json.dumps("[" * n + "]" * n).encode()) for n in (990, 100_000)
                ]
            if isinstance(spot.path[-1], str) and spot.path[-1] in ("in_spec", "out_spec") and type(v) is str:
                return [(f"treespec nested {n:,} deep", json.dumps("[" * n + "]" * n).encode()) for n in (990, 100_000)]
            return []
        depth = len(spot.path)
        under = max(1, 1000 - depth - 2)
        return [
            (f"arrays nested {under} deep (total just under the budget)", b"[" * under + b"]" * under),
            (f"arrays nested {1001 - depth + 2} deep (past the budget)", b"[" * (1003 - depth) + b"]" * (1003 - depth)),
            ("arrays nested 100,000 deep", b"[" * 100_000 + b"]" * 100_000),
            ("objects nested 100,000 deep", b'{"a": ' * 100_000 + b"1" + b"}" * 100_000),
        ]
    if klass == "number":
        if spot.key or type(v) not in (int, float) or type(v) is bool:
            if type(v) is str and not spot.key and spot.path[-1] == "expr_str":
                return [
                    ("expr_str Integer of 5,000 digits", json.dumps(f"Integer({'9' * 5000})").encode()),
                    ("expr_str 5,000-digit literal", json.dumps("9" * 5000).encode()),
                ]
            return []
        return [
            ("5,000-digit integer", b"9" * 5000),
            ("-5,000-digit integer", b"-" + b"9" * 5000),
            ("2^64", str(2**64).encode()),
            ("-2^63-1", str(-(2**63) - 1).encode()),
            ("1e400", b"1e400"),
            ("NaN", b"NaN"),
            ("Infinity", b"Infinity"),
            ("-0.0", b"-0.0"),
        ]
    if klass == "text":
        if type(v) is not str:
            return []
        body = json.dumps(v)[1:-1].encode("ascii")
        return [
            ("lone surrogate escape \\ud800", b'"' + body + b'\\ud800"'),
            ("lone low surrogate escape \\udc00 first", b'"\\udc00' + body + b'"'),
            ("invalid UTF-8 byte 0xff", b'"' + body + b'\xff"'),
            ("UTF-8-encoded surrogate", b'"' + body + b'\xed\xa0\x80"'),
            ("overlong UTF-8", b'"\xc0\xaf' + body + b'"'),
            ("NUL escape", b'"' + body + b'\\u0000"'),
            ("raw UTF-8 (not torch's ASCII escapes)", b'"' + body + "\u00e9".encode() + b'"'),
        ]
    raise ValueError(klass)


#: Metadata strings that hold JSON text (read back with a JSON parser).
_JSON_TEXT_KEYS: Final = frozenset({"from_node", "custom"})


def _union_members(seed: Seed, family: int, seen: set[tuple[int, tuple[str, ...]]]) -> Iterator[Case]:
    """Every member of every union the seed holds, set at the union's first place, with one value of
    each JSON type: the fields of torch's schema the seeds never use get their turn too."""
    types = schema_types()
    done: set[str] = set()
    for spot in walk(seed.obj):
        if spot.typ and spot.value in ([], {}) and (_inner(spot.typ, "List") or _inner(spot.typ, "Dict")):
            yield from _synthesized(seed, seed.text, spot.path, spot.typ, _SYNTHESIZED)  # an empty list or map
            continue
        if spot.key or spot.typ is None or spot.typ in done or type(spot.value) is not dict or not spot.path:
            continue
        known = types.get(spot.typ)
        if known is None or known[0] != "union":
            continue
        done.add(spot.typ)
        mark = (0, ("<union>", spot.typ))
        if mark in seen:
            continue
        seen.add(mark)
        where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in spot.path)
        for member, mtype, _ in known[1]:
            for how, frag in _TYPED.items():
                data = render(seed.text, spot.path, b'{"' + member.encode() + b'": ' + frag + b"}")
                label = f"{seed.name} {where} ({spot.typ}) <- {{{member} ({mtype}): {how}}}"
                yield Case("type", "model.json", label, data, seed.name, f"{spot.typ}.{member}")
        yield from _synthesized(seed, seed.text, spot.path, spot.typ, _SYNTHESIZED)


#: Fields of torch's schema already given every type inside a synthesized union member.
_SYNTHESIZED: set[str] = set()


def _default(t: str, depth: int = 0) -> Any:
    """A value of torch's schema type ``t`` with every field present (lists of one item, maps of one
    entry, a union's first member, an enum's first value; nesting stops after a few levels)."""
    types = schema_types()
    if (inner := _inner(t, "Optional")) is not None:
        return _default(inner, depth)
    if (inner := _inner(t, "List")) is not None:
        return [] if depth > 3 else [_default(inner, depth + 1)]
    if (inner := _inner(t, "Dict")) is not None:
        return {} if depth > 3 else {"k": _default(inner.split(", ", 1)[1], depth + 1)}
    scalar = {"int": 1, "float": 1.5, "str": "x", "bool": True}
    if t in scalar:
        return scalar[t]
    kind, fields = types[t]
    if kind == "enum":
        return int(fields[0][1])
    if kind == "union":
        return {fields[0][0]: _default(fields[0][1], depth + 1)}
    return {f: _default(ft, depth + 1) for f, ft, _ in fields}


def _synthesized(seed: Seed, text: bytes, path: tuple[str | int, ...], typ: str, done: set[str]) -> Iterator[Case]:
    """The value at ``path`` (of schema type ``typ``: each member of a union, or a list or map filled
    with one item) set to a value with every field present, and each field of it (and of the unions
    nested in it, each member in turn) not reached yet given every other type."""
    types = schema_types()
    where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
    known = types.get(typ)
    values = [{m: _default(mt)} for m, mt, _ in known[1]] if known and known[0] == "union" else [_default(typ)]
    for value in values:
        base = render(text, path, json.dumps(value).encode())
        for spot in walk(value, typ):
            if not spot.path or spot.key:
                continue
            inner_path = (*path, *spot.path)
            known = types.get(spot.typ or "")
            if known is not None and known[0] == "union" and type(spot.value) is dict and f"<{spot.typ}>" not in done:
                done.add(f"<{spot.typ}>")
                yield from _synthesized(seed, base, inner_path, spot.typ or "", done)
            if spot.field is None or spot.field in done:
                continue
            done.add(spot.field)
            inner = where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in spot.path)
            own = _kind(spot.value)
            for how, frag in _TYPED.items():
                if how.split("-")[0] != own:
                    label = f"{seed.name} {inner} ({spot.field}, synthesized) <- {how}"
                    yield Case("type", "model.json", label, render(base, inner_path, frag), seed.name, spot.field)


# -- crafted .tpk extensions -----------------------------------------------------------------------


@functools.cache
def _tpk_seeds() -> tuple[tuple[str, str, Any], ...]:
    """``(name, kind, Document)``: documents whose extensions the torch bridge reads back."""
    from tracepack.torch.archives import import_archive
    from tracepack.torch.export.model_json import import_model_json

    out: list[tuple[str, str, Any]] = []
    for seed in model_json_seeds():
        out.append((seed.name, "model.json", import_model_json(seed.text, source=seed.name)))
    from tracepack.torch import pt2

    packed = pt2.pack_pt2(SAMPLE_PT2.read_bytes(), source="sample.pt2")
    with zipfile.ZipFile(io.BytesIO(packed)) as z:
        tpk = next(n for n in z.namelist() if n.endswith(".tpk"))
        import tracepack

        out.append(("sample.pt2 packed member", "packed", tracepack.loads(z.read(tpk))))
    for name, path in (
        ("transformer_traced.pt", TORCH_DATA / "corpus/transformer_traced.pt"),
        ("mobile.ptl", ET_DATA / "mobile.ptl"),
    ):
        out.append((name, "ts", import_archive(str(path), path.read_bytes())))
    from tracepack.torch.executorch.etrecord import import_etrecord

    for method, doc in import_etrecord((ET_DATA / "model.etrecord").read_bytes(), source="model.etrecord").items():
        out.append((f"model.etrecord:{method}", "etrecord", doc))
    return tuple(out)


def _extension_json(doc: Any, i: int) -> Any:
    from tracepack import interned_json
    from tracepack.document import json_value

    e = doc.raw.extensions[i]
    if e.template:
        return interned_json.fill_value(e.template, e.refs, doc.raw.strings, where=f"$.extensions[{i}]")
    return json_value(e.json, f"$.extensions[{i}].json")


def _with_extension(doc: Any, i: int, text: str) -> bytes:
    import tracepack
    from tracepack import model as m
    from tracepack.document import Document

    raw = tracepack.loads(tracepack.dumps(doc, codec="msgpack", compression="none")).raw
    raw.extensions[i] = m.Extension(raw.extensions[i].name, text)
    return tracepack.dumps(Document(raw), codec="msgpack", compression="none")


def _extension_cases() -> Iterator[Case]:
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for name, origin, doc in _tpk_seeds():
        for i, e in enumerate(doc.raw.extensions):
            value = _extension_json(doc, i)
            text = json.dumps(value).encode("ascii")
            spots = list(walk(value, None))
            for spot in spots:
                mark = (e.name, spot.shape + (("<key>",) if spot.key else ()))
                if spot.key or mark in seen:
                    continue
                seen.add(mark)
                where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in spot.path)
                own = _kind(spot.value)
                frags: list[tuple[str, bytes | None]] = [(k, f) for k, f in _TYPED.items() if k.split("-")[0] != own]
                if spot.path and not isinstance(spot.path[-1], int):
                    frags.append(("missing", None))
                if own == "array":
                    frags.append(("an item more of the wrong type", json.dumps([*spot.value, {"x": None}]).encode()))
                if own in ("array", "object"):  # deep nesting at every nesting point of the extension
                    under = max(1, 1000 - len(spot.path) - 4)
                    frags += [
                        (f"arrays nested {under} deep (just under the budget)", b"[" * under + b"]" * under),
                        ("arrays nested 100,000 deep", b"[" * 100_000 + b"]" * 100_000),
                    ]
                if own == "int":
                    frags += [("-1", b"-1"), ("2^63", str(2**63).encode()), ("huge", b"9" * 30)]
                if own == "string":
                    frags += [("an unknown string", b'"no such thing"')]
                for how, frag in frags:
                    if not spot.path:
                        if frag is None:
                            continue
                        out = frag
                    else:
                        out = render(text, spot.path, frag)
                    label = f"{name} extension {e.name} {where} <- {how}"
                    yield Case(
                        "extension", "tpk", label, _with_extension(doc, i, out.decode("utf-8")), f"{origin}:{name}"
                    )
        if origin == "model.json":
            yield from _value_cases(name, doc)


def _value_cases(name: str, doc: Any) -> Iterator[Case]:
    """Every typed tensor value field given what it cannot be (the first typed value, and the first
    with a symbolic size)."""
    import tracepack
    from tracepack.document import Document

    values = doc.raw.graph.values
    picks = {i for i in (next((i for i, v in enumerate(values) if not v.json), None),) if i is not None}
    picks |= {next((i for i, v in enumerate(values) if v.sym_shape), -1)} - {-1}
    strings: dict[str, list[tuple[str, str]]] = {
        "dtype": [("not a dtype", "NOTADTYPE"), ("empty", ""), ("a torch spelling", "float32")],
        "device": [
            ("cpu:x", "cpu:x"),
            ("cpu:", "cpu:"),
            ("cpu:-1", "cpu:-1"),
            ("a huge index", "cpu:" + "9" * 30),
            ("two colons", "cuda:0:1"),
            ("empty", ""),
        ],
        "layout": [("not a layout", "NoSuchLayout"), ("Strided spelled out", "Strided")],
    }
    for i in sorted(picks):
        for field, bad in strings.items():
            for how, text in bad:
                raw = tracepack.loads(tracepack.dumps(doc, codec="msgpack", compression="none")).raw
                raw.strings.append(text)
                setattr(raw.graph.values[i], field, len(raw.strings) - 1)
                data = tracepack.dumps(Document(raw), codec="msgpack", compression="none")
                yield Case("extension", "tpk", f"{name} values[{i}].{field} <- {how}", data, f"model.json:{name}")
        v = values[i]
        lists = {
            "sym_shape": [
                ("one longer than shape", [0] * (len(v.shape) + 1)),
                ("one shorter", [0] * max(len(v.shape) - 1, 0)),
            ],
            "sym_strides": [("one longer than strides", [0] * (len(v.strides) + 1))],
            "shape": [("one longer than sym_shape", [*v.shape, 1]) if v.sym_shape else ("empty", [])],
            "strides": [("one longer than sym_strides", [*v.strides, 1]) if v.sym_strides else ("empty", [])],
        }
        for field, bad_lists in lists.items():
            for how, items in bad_lists:
                raw = tracepack.loads(tracepack.dumps(doc, codec="msgpack", compression="none")).raw
                setattr(raw.graph.values[i], field, items)
                data = tracepack.dumps(Document(raw), codec="msgpack", compression="none")
                yield Case("extension", "tpk", f"{name} values[{i}].{field} <- {how}", data, f"model.json:{name}")
        for how, text in (
            ("not JSON", "[[["),
            ("an array", "[1]"),
            ("nested 100,000 deep", "[" * 100_000 + "]" * 100_000),
        ):
            raw = tracepack.loads(tracepack.dumps(doc, codec="msgpack", compression="none")).raw
            raw.strings.append(text)
            raw.graph.values[i].json = len(raw.strings) - 1
            data = tracepack.dumps(Document(raw), codec="msgpack", compression="none")
            yield Case("extension", "tpk", f"{name} values[{i}].json <- {how}", data, f"model.json:{name}")


# -- zip64 lies --------------------------------------------------------------------------------------


@functools.cache
def zip_seeds() -> tuple[tuple[str, str, bytes], ...]:
    """``(name, kind, bytes)`` of every zip layout a reader opens."""
    from tracepack.torch import pt2

    sample = SAMPLE_PT2.read_bytes()
    return (
        ("sample.pt2", "pt2", sample),
        ("2.5/cond.pt2 (flat)", "pt2", (TORCH_DATA / "releases/2.5/cond.pt2").read_bytes()),
        ("sample.pt2 packed", "pt2", pt2.pack_pt2(sample, source="sample.pt2")),
        ("script_string_table.pt", "ts", (TORCH_DATA / "script_string_table.pt").read_bytes()),
        ("lite_debug.ptl", "ts", (TORCH_DATA / "lite_debug.ptl").read_bytes()),
        ("mobile.ptl", "ts", (ET_DATA / "mobile.ptl").read_bytes()),
        ("model.etrecord", "etrecord", (ET_DATA / "model.etrecord").read_bytes()),
    )


_U32: Final = 0xFFFFFFFF


def _central_entries(data: bytes) -> tuple[int, int, list[tuple[int, str, int]]]:
    """``(end record offset, directory offset, [(entry offset, member name, local header offset)])``."""
    end = data.rfind(b"PK\x05\x06")
    count, _, offset = struct.unpack_from("<HII", data, end + 10)
    entries = []
    p = offset
    for _ in range(count):
        assert data[p : p + 4] == b"PK\x01\x02"
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, p + 28)
        (local,) = struct.unpack_from("<I", data, p + 42)
        entries.append((p, data[p + 46 : p + 46 + name_len].decode("utf-8", "replace"), local))
        p += 46 + name_len + extra_len + comment_len
    return end, offset, entries


def _zip64_lie(data: bytes, entry: int, declared: int) -> bytes:
    """The central entry at ``entry`` given a zip64 extra field declaring ``declared`` bytes for both
    sizes (its 32-bit fields set to the marker); the directory grows by the 20 bytes of the field."""
    b = bytearray(data)
    name_len, extra_len, _ = struct.unpack_from("<HHH", b, entry + 28)
    struct.pack_into("<II", b, entry + 20, _U32, _U32)
    at = entry + 46 + name_len + extra_len
    b[at:at] = struct.pack("<HHQQ", 1, 16, declared, declared)
    struct.pack_into("<H", b, entry + 30, extra_len + 20)
    end = b.rfind(b"PK\x05\x06")
    (size,) = struct.unpack_from("<I", b, end + 12)
    struct.pack_into("<I", b, end + 12, size + 20)
    return bytes(b)


def _zip_cases() -> Iterator[Case]:
    for name, kind, data in zip_seeds():
        end, _, entries = _central_entries(data)
        for entry, member, local in entries:
            lies: list[tuple[str, bytes]] = []
            for field, at in (("file_size", 24), ("compress_size", 20)):
                b = bytearray(data)
                struct.pack_into("<I", b, entry + at, _U32)
                lies.append((f"central {field} 0xFFFFFFFF, no zip64 record", bytes(b)))
            b = bytearray(data)
            struct.pack_into("<II", b, entry + 20, _U32, _U32)
            lies.append(("central sizes 0xFFFFFFFF, no zip64 record", bytes(b)))
            b = bytearray(data)
            struct.pack_into("<I", b, entry + 42, _U32)
            lies.append(("central header offset 0xFFFFFFFF, no zip64 record", bytes(b)))
            b = bytearray(data)
            struct.pack_into("<II", b, local + 18, _U32, _U32)
            lies.append(("local header sizes 0xFFFFFFFF", bytes(b)))
            lies.append(("zip64 record declaring 2^62 bytes", _zip64_lie(data, entry, 1 << 62)))
            lies.append(("zip64 record declaring 3 GiB", _zip64_lie(data, entry, 3 << 30)))
            for how, lie in lies:
                yield Case("memory", kind, f"{name}:{member} <- {how}", lie)
        for how, at, value in (
            ("directory size 0xFFFFFFFF", end + 12, _U32),
            ("directory offset 0xFFFFFFFF", end + 16, _U32),
        ):
            b = bytearray(data)
            struct.pack_into("<I", b, at, value)
            yield Case("memory", kind, f"{name} end record <- {how}", bytes(b))
        b = bytearray(data)
        struct.pack_into("<HH", b, end + 8, 0xFFFF, 0xFFFF)
        yield Case("memory", kind, f"{name} end record <- entry counts 0xFFFF", bytes(b))
    yield from _pte_cases()


def _pte_cases() -> Iterator[Case]:
    """A ``.pte``'s extended header (``eh00``: program size, segment base offset and size) lying."""
    for name in ("model.pte", "delegate.pte"):
        data = (ET_DATA / name).read_bytes()
        at = data.find(b"eh00")
        if at < 0:  # pragma: no cover - the samples have one
            continue
        for i, field in enumerate(("program size", "segment base offset", "segment data size")):
            pos = at + 8 + 8 * i
            if pos + 8 > len(data):
                continue
            for how, value in (("0xFFFFFFFF", _U32), ("2^63", 1 << 63), ("2^64-1", (1 << 64) - 1)):
                b = bytearray(data)
                struct.pack_into("<Q", b, pos, value)
                yield Case("memory", "pte", f"{name} header {field} <- {how}", bytes(b))


# -- the whole campaign ------------------------------------------------------------------------------


def _hang_cases() -> Iterator[Case]:
    for kind in ("fifo", "folder", "chardev"):
        yield Case("hang", kind, f"a {kind} as every input of every command")


_MAKERS: Final[dict[str, Callable[[], Iterator[Case]]]] = {
    "memory": _zip_cases,
    "hang": _hang_cases,
    "extension": _extension_cases,
    "type": lambda: _json_seeds_cases("type"),
    "deep": lambda: _json_seeds_cases("deep"),
    "number": lambda: _json_seeds_cases("number"),
    "text": lambda: _json_seeds_cases("text"),
}


def cases(scope: str = "full", classes: tuple[str, ...] = CLASSES, *, every: int = 23) -> Iterator[Case]:
    """The campaign's inputs, class by class; ``scope="quick"`` keeps every ``every``-th input of each
    class (always its first), and every ``hang`` case."""
    for klass in classes:
        for n, case in enumerate(_MAKERS[klass]()):
            if scope == "full" or klass == "hang" or n % every == 0:
                yield case
