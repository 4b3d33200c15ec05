"""Converters generated from torch's own export schema (``torch/_export/serde/schema.yaml``).

torch describes the JSON of a ``.pt2``'s ``model.json`` in ``schema.yaml`` (written by torch's
``update_schema.py`` from ``torch/_export/serde/schema.py``, with ``SCHEMA_VERSION`` and a
checksum). ``torch.export.load`` turns the JSON into those dataclasses with a reflective
converter that resolves type hints for every object; this module reads the same description
and writes a converter specialised per class: one straight-line function per struct and
union, type checks inline, defaults as literals.

Three stages, none of which imports torch:

* :func:`parse_schema_yaml` reads torch's ``schema.yaml`` (the subset of YAML torch writes);
* :func:`spec_json` / :func:`load_spec` write and read the normalized description kept in
  ``schema/torch/torch-X.Y.json`` (``python -m tracepack.codegen torch-schema`` refreshes it
  from the installed torch), the source of the checked-in ``generated/`` code;
* :func:`render_module` writes the converter module. ``tracepack.torch`` binds it to the
  installed torch's schema classes; for a torch release whose schema has no checked-in
  module, it renders one on first use and caches it by checksum.

The generated module holds ``TYPES`` (the description as data, for error paths), and
``make(schema, tag)``, which returns ``{class name: converter}``; a converter takes the
JSON value (dicts, lists, str, int, float, bool, None) and returns what torch's
``_dict_to_dataclass`` returns for it, or raises (any exception: the caller then walks
``TYPES`` to name the JSON path that does not match).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracepack.errors import SchemaError

__all__ = [
    "SPEC_DIR",
    "Conventions",
    "TorchSpec",
    "TypeDef",
    "installed_schema_yaml",
    "load_spec",
    "load_specs",
    "module_name",
    "parse_schema_yaml",
    "parse_type",
    "render_index",
    "render_module",
    "spec_json",
]

#: Folder (below the repository's ``schema/``) of the normalized torch schema descriptions.
SPEC_DIR = "torch"
_SPEC_FILE = re.compile(r"^torch-(\d+)\.(\d+)\.json$")
_PRIMITIVES = ("int", "float", "str", "bool")


@dataclass(frozen=True)
class TypeDef:
    """One class of torch's schema: a struct, a union (one key of several) or an int enum."""

    name: str
    kind: str  # "struct", "union" or "enum"
    #: struct/union: ``(field, type, default literal or None)``; enum: ``(member, value, None)``.
    fields: tuple[tuple[str, str, str | None], ...]


@dataclass(frozen=True)
class TorchSpec:
    """torch's export schema: its version, checksum and classes, in torch's order."""

    version: tuple[int, int]
    treespec_version: int
    checksum: str
    types: tuple[TypeDef, ...]
    extra: dict[str, Any] = field(default_factory=dict)

    def by_name(self) -> dict[str, TypeDef]:
        return {t.name: t for t in self.types}


@dataclass(frozen=True)
class Conventions:
    """How a torch release's reflective converters treat values the schema types alone do not settle
    (measured from the installed torch by :func:`tracepack.torch.serde.conventions`). The defaults are
    torch 2.8 and newer's (2.7 not measured); torch 2.6's differ in all three."""

    #: ``_dict_to_dataclass`` applies ``float()`` to a float field (2.8+); before, it keeps what the
    #: JSON holds (an int stays an int; inf and nan are JSON's ``Infinity``/``NaN`` literals).
    coerce_floats: bool = True
    #: ``_dataclass_to_dict`` writes every field (2.8+); before, a field whose default is None is left
    #: out while it is None.
    write_none: bool = True
    #: ``_dataclass_to_dict`` writes inf and nan as the strings ``"Infinity"``, ``"-Infinity"``,
    #: ``"NaN"`` (2.8+); before, as floats (which ``json.dumps`` writes as literals).
    float_strings: bool = True


# -- torch's schema.yaml --------------------------------------------------------------------


def _scalar(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        body = text[1:-1]
        return body.replace("''", "'") if text[0] == "'" else json.loads(text)
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def _yaml_tree(text: str, source: str) -> dict[str, Any]:
    """Nested mappings and lists of scalars, by indentation: the YAML torch's writer produces."""
    root: dict[str, Any] = {}
    # Stack of (indent, container); a key whose value comes on the next lines waits in `pending`.
    stack: list[tuple[int, Any]] = [(0, root)]
    pending: tuple[int, dict[str, Any], str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        body = line.strip()
        if pending is not None:
            p_indent, p_parent, p_key = pending
            pending = None
            # A list may sit at its key's own indentation (``key:`` then ``- item``), as torch writes it.
            if indent > p_indent or (indent == p_indent and body.startswith("- ")):
                container: Any = [] if body.startswith("- ") else {}
                p_parent[p_key] = container
                stack.append((indent, container))
            else:
                p_parent[p_key] = None
        while stack and indent < stack[-1][0]:
            stack.pop()
        if len(stack) > 1 and type(stack[-1][1]) is list and not body.startswith("- "):
            stack.pop()  # the end of a list written at its key's indentation
        if not stack or indent != stack[-1][0]:
            raise SchemaError(f"unexpected indentation on line {number}", source=source)
        container = stack[-1][1]
        if body.startswith("- "):
            if type(container) is not list:
                raise SchemaError(f"a list item where a mapping was expected, line {number}", source=source)
            container.append(_scalar(body[2:]))
            continue
        if type(container) is not dict:
            raise SchemaError(f"a mapping key where a list item was expected, line {number}", source=source)
        key, sep, value = body.partition(":")
        if not sep:
            raise SchemaError(f"expected `key: value` on line {number}", source=source)
        key = key.strip()
        if value.strip():
            container[key] = _scalar(value)
        else:
            pending = (indent, container, key)
    if pending is not None:
        pending[1][pending[2]] = None
    return root


def parse_type(text: str) -> Any:
    """A schema type as a tree: ``"int"``, ``"Node"``, ``("list", t)``, ``("dict", t)``, ``("optional", t)``."""
    text = text.strip()
    if text.endswith(" | None"):
        return ("optional", parse_type(text[: -len(" | None")]))
    m = re.fullmatch(r"(\w+)\[(.*)\]", text)
    if m is None:
        if not re.fullmatch(r"\w+", text):
            raise SchemaError(f"unknown type syntax {text!r}")
        return text
    head, args = m.group(1).lower(), m.group(2)
    if head == "list":
        return ("list", parse_type(args))
    if head == "optional":
        return ("optional", parse_type(args))
    if head == "dict":
        depth, cut = 0, -1
        for i, ch in enumerate(args):
            depth += ch == "["
            depth -= ch == "]"
            if ch == "," and depth == 0:
                cut = i
                break
        if cut < 0 or args[:cut].strip() != "str":
            raise SchemaError(f"only Dict[str, T] is supported, not {text!r}")
        return ("dict", parse_type(args[cut + 1 :]))
    raise SchemaError(f"unknown type {text!r}")


def parse_schema_yaml(text: str, *, source: str = "schema.yaml") -> TorchSpec:
    """torch's ``schema.yaml`` as a :class:`TorchSpec`."""
    m = re.search(r"checksum<<([0-9a-f]+)>>", text)
    checksum = m.group(1) if m else hashlib.sha256(text.encode("utf-8")).hexdigest()
    tree = _yaml_tree(text, source)
    version = tree.pop("SCHEMA_VERSION", None)
    if type(version) is not list or len(version) != 2 or not all(type(v) is int for v in version):
        raise SchemaError("no SCHEMA_VERSION: [major, minor]", source=source)
    treespec = tree.pop("TREESPEC_VERSION", 0)
    types = []
    for name, body in tree.items():
        if type(body) is not dict or body.get("kind") not in ("struct", "union", "enum"):
            raise SchemaError(f"{name}: expected kind struct, union or enum", source=source)
        kind = body["kind"]
        fields = body.get("fields") or {}
        if type(fields) is not dict:
            raise SchemaError(f"{name}: fields is not a mapping", source=source)
        rows: list[tuple[str, str, str | None]] = []
        for fname, fbody in fields.items():
            if kind == "enum":
                if type(fbody) is not int:
                    raise SchemaError(f"{name}.{fname}: enum value is not an integer", source=source)
                rows.append((fname, str(fbody), None))
                continue
            if type(fbody) is not dict or type(fbody.get("type")) is not str:
                raise SchemaError(f"{name}.{fname}: no type", source=source)
            parse_type(fbody["type"])
            default = fbody.get("default")
            rows.append((fname, fbody["type"], None if default is None else str(default)))
        types.append(TypeDef(name, kind, tuple(rows)))
    spec = TorchSpec((version[0], version[1]), int(treespec), checksum, tuple(types))
    _check_refs(spec, source)
    return spec


def _refs(t: Any) -> list[str]:
    if isinstance(t, tuple):
        return _refs(t[1])
    return [] if t in _PRIMITIVES else [t]


def _check_refs(spec: TorchSpec, source: str) -> None:
    names = spec.by_name()
    for t in spec.types:
        if t.kind == "enum":
            continue
        for fname, ftype, _ in t.fields:
            for ref in _refs(parse_type(ftype)):
                if ref not in names:
                    raise SchemaError(f"{t.name}.{fname}: unknown type {ref!r}", source=source)


def installed_schema_yaml() -> Path | None:
    """The installed torch's ``torch/_export/serde/schema.yaml``, found without importing torch."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "_export" / "serde" / "schema.yaml"
        if path.is_file():
            return path
    return None


# -- the normalized description (schema/torch/torch-X.Y.json) -----------------------------------


def spec_json(spec: TorchSpec, *, torch_version: str) -> str:
    """The description as stable JSON text (the source of the checked-in generated code)."""
    head = {
        "about": (
            "torch's export schema (torch/_export/serde/schema.yaml) as tracepack's code generator reads it; "
            "refresh with `python -m tracepack.codegen torch-schema`"
        ),
        "schema_version": list(spec.version),
        "treespec_version": spec.treespec_version,
        "checksum": spec.checksum,
        "read_from": f"torch {torch_version}",
    }
    # One line per field: the file reads (and diffs) like the schema it describes.
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + [' "types": {']
    for i, t in enumerate(spec.types):
        rows = [[n, int(ty)] if t.kind == "enum" else [n, ty, d] for n, ty, d in t.fields]
        lines.append(f"  {json.dumps(t.name)}: {{")
        lines.append(f'   "kind": {json.dumps(t.kind)},')
        lines.append('   "fields": [')
        lines += [f"    {json.dumps(r)}{',' if j < len(rows) - 1 else ''}" for j, r in enumerate(rows)]
        lines.append("   ]")
        lines.append("  }" + ("," if i < len(spec.types) - 1 else ""))
    lines += [" }", "}"]
    return "\n".join(lines) + "\n"


def load_spec(path: Path, *, display: str | None = None) -> TorchSpec:
    """A description written by :func:`spec_json`."""
    source = display or path.name
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        types = []
        for name, t in body["types"].items():
            rows: tuple[tuple[str, str, str | None], ...]
            if t["kind"] == "enum":
                rows = tuple((str(n), str(int(v)), None) for n, v in t["fields"])
            else:
                rows = tuple((str(n), str(ty), None if d is None else str(d)) for n, ty, d in t["fields"])
            types.append(TypeDef(str(name), str(t["kind"]), rows))
        major, minor = body["schema_version"]
        spec = TorchSpec(
            (int(major), int(minor)),
            int(body["treespec_version"]),
            str(body["checksum"]),
            tuple(types),
            {"read_from": body.get("read_from", "")},
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SchemaError(f"not a torch schema description: {exc}", source=source) from None
    _check_refs(spec, source)
    return spec


def load_specs(schema_dir: str | Path) -> list[tuple[str, TorchSpec]]:
    """``(display path, spec)`` of every ``schema/torch/torch-X.Y.json``, oldest first."""
    folder = Path(schema_dir) / SPEC_DIR
    found = []
    for path in folder.iterdir() if folder.is_dir() else ():
        m = _SPEC_FILE.match(path.name)
        if m:
            found.append(((int(m.group(1)), int(m.group(2))), path))
    out = []
    for version, path in sorted(found):
        display = f"{Path(schema_dir).name}/{SPEC_DIR}/{path.name}"
        spec = load_spec(path, display=display)
        if spec.version != version:
            raise SchemaError(f"declares schema {spec.version} but is named for {version}", source=display)
        out.append((display, spec))
    return out


def module_name(version: tuple[int, int]) -> str:
    return f"v{version[0]}_{version[1]}"


def spec_sha256(spec: TorchSpec) -> str:
    return hashlib.sha256(spec_json(spec, torch_version="").encode("utf-8")).hexdigest()


# -- rendering ------------------------------------------------------------------------------------


class _Emitter:
    def __init__(self, spec: TorchSpec) -> None:
        self.types = spec.by_name()
        self.n = 0

    def tmp(self, prefix: str = "t") -> str:
        self.n += 1
        return f"_{prefix}{self.n}"

    def expr(self, t: Any, src: str) -> str:
        """An expression converting ``src`` (evaluated once) to ``t``, raising on a mismatch."""
        if isinstance(t, tuple):
            kind, inner = t
            v = self.tmp()
            if kind == "optional":
                return f"(None if ({v} := {src}) is None else {self.expr(inner, v)})"
            # (An assignment expression may not sit in a comprehension's iterable: helpers check containers.)
            if kind == "list":
                e = self.tmp("e")
                if inner in ("int", "str", "bool"):
                    return f"[{e} if type({e}) is {inner} else _bad() for {e} in _list({src})]"
                return f"[{self.expr(inner, e)} for {e} in _list({src})]"
            k, e = self.tmp("k"), self.tmp("e")
            return f"{{{k}: {self.expr(inner, e)} for {k}, {e} in _dict({src}).items()}}"
        v = self.tmp()
        if t in ("int", "str", "bool"):
            return f"({v} if type({v} := {src}) is {t} else _bad())"
        if t == "float":
            return f"({v} if type({v} := {src}) is float else _float({v}))"
        target = self.types[t]
        if target.kind == "enum":
            return f"({v} if type({v} := {src}) is int and {v} in _E_{t} else _bad())"
        return f"_c_{t}({src})"

    def struct(self, t: TypeDef) -> list[str]:
        lines = [f"    def _c_{t.name}(d: Any) -> Any:", "        if type(d) is not dict:", "            _bad()"]
        lines.append(f"        o = _new(_C_{t.name})")
        lines.append("        o.__dict__ = {")
        for fname, ftype, default in t.fields:
            conv = self.expr(parse_type(ftype), f"d[{fname!r}]")
            if default is None:
                lines.append(f"            {fname!r}: {conv},")
            else:
                lines.append(f"            {fname!r}: {conv} if {fname!r} in d else {_default_literal(default)},")
        lines.append("        }")
        lines.append("        return o")
        return lines

    def union(self, t: TypeDef) -> list[str]:
        lines = [
            f"    def _c_{t.name}(d: Any) -> Any:",
            "        if type(d) is not dict or len(d) != 1:",
            "            _bad()",
            "        ((k, v),) = d.items()",
            "        x: Any",
        ]
        for i, (fname, ftype, _) in enumerate(t.fields):
            word = "if" if i == 0 else "elif"
            lines.append(f"        {word} k == {fname!r}:")
            if fname == "as_none" and ftype == "bool":
                # torch 2.3-2.5 wrote ``as_none: []``; torch's own converter keeps whatever is there.
                lines.append("            x = v if type(v) is bool or v == [] else _bad()")
                continue
            lines.append(f"            x = {self.expr(parse_type(ftype), 'v')}")
        lines += ["        else:", "            _bad()", f"        o = _new(_C_{t.name})"]
        lines += [
            f"        od = _U_{t.name}[k].copy()",
            "        od[k] = x",
            "        o.__dict__ = od",
            "        return o",
        ]
        return lines


class _Dumper:
    """Emits the reverse direction: torch's schema dataclasses -> JSON values, as torch's
    ``_dataclass_to_dict`` gives them (floats inf/nan as the strings torch writes)."""

    def __init__(self, spec: TorchSpec, conventions: Conventions) -> None:
        self.types = spec.by_name()
        self.conventions = conventions
        self.n = 0

    def tmp(self, prefix: str) -> str:
        self.n += 1
        return f"_{prefix}{self.n}"

    def expr(self, t: Any, src: str) -> str:
        if isinstance(t, tuple):
            kind, inner = t
            v = self.tmp("t")
            if kind == "optional":
                return f"(None if ({v} := {src}) is None else {self.expr(inner, v)})"
            e = self.tmp("e")
            if kind == "list":
                if inner == "str":
                    return f"list({src})"
                return f"[{self.expr(inner, e)} for {e} in {src}]"
            k = self.tmp("k")
            return f"{{{k}: {self.expr(inner, e)} for {k}, {e} in {src}.items()}}"
        if t == "str" or (t in _PRIMITIVES and not self.conventions.float_strings):
            return src
        if t in _PRIMITIVES or self.types[t].kind == "enum":
            v = self.tmp("t")
            return f"({v} if type({v} := {src}) is not float else _jf({v}))"
        return f"_d_{t}({src})"

    def struct(self, t: TypeDef) -> list[str]:
        lines = [f"    def _d_{t.name}(o: Any) -> Any:", "        d = o.__dict__"]
        omitted = [] if self.conventions.write_none else [f for f, _, default in t.fields if default == "None"]
        if not omitted:
            lines.append("        return {")
            lines += [f"            {f!r}: {self.expr(parse_type(ft), f'd[{f!r}]')}," for f, ft, _ in t.fields]
            return [*lines, "        }"]
        lines.append("        r: dict[str, Any] = {}")  # field by field, in order: None-default fields only when set
        for f, ft, _ in t.fields:
            if f in omitted:
                lines += [
                    f"        if d[{f!r}] is not None:",
                    f"            r[{f!r}] = {self.expr(parse_type(ft), f'd[{f!r}]')}",
                ]
            else:
                lines.append(f"        r[{f!r}] = {self.expr(parse_type(ft), f'd[{f!r}]')}")
        return [*lines, "        return r"]

    def union(self, t: TypeDef) -> list[str]:
        lines = [f"    def _d_{t.name}(o: Any) -> Any:", "        d = o.__dict__", "        k = str(d['_type'])"]
        for i, (f, ft, _) in enumerate(t.fields):
            lines.append(f"        {'if' if i == 0 else 'elif'} k == {f!r}:")
            lines.append(f"            return {{{f!r}: {self.expr(parse_type(ft), f'd[{f!r}]')}}}")
        return [*lines, "        raise ValueError(k)"]


def _default_literal(default: str) -> str:
    """A field default as a Python expression: literals as written (a fresh ``[]`` per object), else a string."""
    try:
        value = ast.literal_eval(default)
    except (ValueError, SyntaxError):
        return repr(default)
    return repr(value)


def _header(spec: TorchSpec, source: str) -> list[str]:
    return [
        f"# @generated by tracepack.codegen from {source}",
        f"# torch's schema {spec.version[0]}.{spec.version[1]}, checksum {spec.checksum}",
        f"# sha256 of the description: {spec_sha256(spec)}",
        "# Do not edit: refresh the description and run `make generate`.",
    ]


def render_module(spec: TorchSpec, *, source: str, conventions: Conventions | None = None) -> str:
    """The converter module for ``spec`` (see the module docstring), following the ``conventions`` of
    the torch release it is for (the defaults: torch 2.8 and newer's)."""
    em = _Emitter(spec)
    conventions = conventions or Conventions()
    major, minor = spec.version
    out = _header(spec, source)
    if conventions != Conventions():
        out.append(f"# {conventions!r}")
    out += [
        f'"""Converters for torch\'s export schema {major}.{minor}: JSON values -> torch\'s schema dataclasses.',
        "",
        "``make(schema, tag)`` binds them to torch's ``torch._export.serde.schema`` module and its union tag",
        "factory; ``TYPES`` describes every class (for naming where a value does not match).",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from collections.abc import Callable",
        "from typing import Any, Final, NoReturn",
        "",
        '__all__ = ["CHECKSUM", "SCHEMA_VERSION", "TREESPEC_VERSION", "TYPES", "dumpers", "make"]',
        "",
        f"SCHEMA_VERSION: Final = ({major}, {minor})",
        f"TREESPEC_VERSION: Final = {spec.treespec_version}",
        f"CHECKSUM: Final = {spec.checksum!r}",
        "#: ``name: (kind, ((field, type, default or None), ...))``; enums: ``(member, value, None)``.",
        "TYPES: Final[dict[str, tuple[str, tuple[tuple[str, str, str | None], ...]]]] = {",
    ]
    for t in spec.types:
        out.append(f"    {t.name!r}: ({t.kind!r}, {t.fields!r}),")
    out += [
        "}",
        "",
        "",
        "class Mismatch(Exception):",
        '    """A value does not match the schema (the caller finds where)."""',
        "",
        "",
        "def _bad() -> NoReturn:",
        "    raise Mismatch",
        "",
        "",
        "def _list(x: Any) -> list[Any]:",
        "    if type(x) is not list:",
        "        _bad()",
        "    return x",
        "",
        "",
        "def _dict(x: Any) -> dict[str, Any]:",
        "    if type(x) is not dict:",
        "        _bad()",
        "    return x",
        "",
        "",
        *(
            [
                "def _float(x: Any) -> float:",
                "    # torch's converter applies float(): ints, and the strings json writes for inf and nan.",
                "    if type(x) is int or type(x) is str:",
                "        return float(x)",
                "    _bad()",
            ]
            if conventions.coerce_floats
            else [
                "def _float(x: Any) -> Any:",
                "    # torch's converter keeps what the JSON holds: an int stays an int (inf and nan are",
                "    # JSON literals, already floats).",
                "    if type(x) is int:",
                "        return x",
                "    _bad()",
            ]
        ),
        "",
        "",
        "def make(schema: Any, tag: Callable[[str, Any], Any]) -> dict[str, Callable[[Any], Any]]:",
        '    """``{class name: converter}`` for every struct and union, bound to torch\'s ``schema`` module."""',
        "    _new = object.__new__",
    ]
    for t in spec.types:
        if t.kind == "enum":
            values = ", ".join(v for _, v, _ in t.fields)
            out.append(f"    _E_{t.name} = frozenset(({values},))")
            continue
        out.append(f"    _C_{t.name} = schema.{t.name}")
        if t.kind == "union":
            blank = ", ".join(f"{n!r}: None" for n, _, _ in t.fields)
            tags = [n for n, _, _ in t.fields]
            out.append(f"    _U_{t.name} = {{k: {{{blank}, '_type': tag(k, _C_{t.name})}} for k in {tags!r}}}")
    for t in spec.types:
        if t.kind == "struct":
            out += ["", *em.struct(t)]
        elif t.kind == "union":
            out += ["", *em.union(t)]
    names = [t.name for t in spec.types if t.kind != "enum"]
    out += ["", "    return {", *[f"        {n!r}: _c_{n}," for n in names], "    }", ""]
    dumper = _Dumper(spec, conventions)
    out += [
        "",
        "def _jf(x: float) -> float | str:",
        "    # torch writes inf and nan as these strings (its JSON has allow_nan=False).",
        "    if x != x:  # noqa: PLR0124 - nan",
        '        return "NaN"',
        '    if x in (float("inf"), float("-inf")):',
        '        return "Infinity" if x > 0 else "-Infinity"',
        "    return x",
        "",
        "",
        "def dumpers() -> dict[str, Callable[[Any], Any]]:",
        '    """``{class name: dumper}``: torch\'s schema dataclasses -> JSON values, as torch\'s',
        '    ``_dataclass_to_dict`` gives them."""',
    ]
    for t in spec.types:
        if t.kind == "struct":
            out += ["", *dumper.struct(t)]
        elif t.kind == "union":
            out += ["", *dumper.union(t)]
    out += ["", "    return {", *[f"        {n!r}: _d_{n}," for n in names], "    }", ""]
    return "\n".join(out)


def render_index(entries: list[tuple[str, TorchSpec]]) -> str:
    """``tracepack_generated/torch_schema/__init__.py``: the checked-in schema versions and checksums."""
    sources = ", ".join(display for display, _ in entries) or "(none)"
    out = [
        f"# @generated by tracepack.codegen from {sources}",
        "# Do not edit: refresh the descriptions and run `make generate`.",
        '"""Converters generated from torch\'s export schema, one module per schema version (``v8_20``, ...)."""',
        "",
        "from typing import Final",
        "",
        '__all__ = ["CHECKED_IN"]',
        "",
        "#: ``(major, minor): (module name, torch's schema checksum)`` of every checked-in module.",
        "CHECKED_IN: Final[dict[tuple[int, int], tuple[str, str]]] = {",
    ]
    for _, spec in entries:
        out.append(f"    {spec.version!r}: ({module_name(spec.version)!r}, {spec.checksum!r}),")
    out += ["}", ""]
    return "\n".join(out)
