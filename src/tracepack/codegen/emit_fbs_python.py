"""Stage 3d: the FlatBuffers codec of one version, as Python (``tracepack_generated.vX_Y.fbcodec``).

flatc's own Python code (``vX_Y/fb/``, written by :mod:`tracepack.codegen.check`)
reads one field per method call; decoding a large graph through it is slow, and
its builder API is slower still. This emitter writes, from the IR, one encode
and one decode function per struct, union and vector type, each specialised to
its fields and calling the small runtime :mod:`tracepack.codecs._fbrt`. The
wire format is the one ``generated/fbs/tracepack-X.Y.fbs`` declares, slot for
slot (a union field takes two slots: ``<name>_type`` first), so FlatBuffers'
own code in any language reads it.

Conventions of the generated code:

* ``_S_<TYPE>``: the table's :class:`~tracepack.codecs._fbrt.TableSpec` (one
  kind per slot: a struct code, or ``O`` for an offset); ``SPECS`` maps struct
  names to them, for lazy readers;
* ``_e_<type>(w, o) -> int`` writes a table and returns its offset;
  ``_d_<type>(r, pos)`` reads one; ``_ev_`` / ``_dv_`` do vectors of them;
* a union ``U`` has ``_e_u(w, o) -> (type, offset)`` and ``_d_u(r, type, pos)``,
  and its vector wrapper table ``UBox``;
* every decode step that can fail adds its place (``.field``, ``[i]``) to the
  error on the way out, so errors read ``$.graph.nodes[3].inputs[0].arg``.
"""

from __future__ import annotations

from tracepack.codegen.emit_fbs import FBS_SCALARS, box_name, fbs_field_ids, fbs_path
from tracepack.codegen.emit_python import float_literal, header_lines
from tracepack.codegen.model import Field, Schema, Struct, TypeRef
from tracepack.errors import SchemaError

__all__ = ["emit_fbs_python", "share_vtables", "slot_table"]

_CODES = {
    "bool": "?",
    "u8": "B",
    "u16": "H",
    "u32": "I",
    "u64": "Q",
    "i8": "b",
    "i16": "h",
    "i32": "i",
    "i64": "q",
    "f32": "f",
    "f64": "d",
}
assert set(_CODES) == set(FBS_SCALARS)


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def _code(t: TypeRef, schema: Schema) -> str:
    """Struct code of a scalar or enum type."""
    if t.kind == "enum":
        return _CODES[schema.enums[t.name].type]
    return _CODES[t.name]


def _scalar_default(f: Field, schema: Schema) -> object:
    t = f.type
    if t.kind == "enum":
        return schema.enums[t.name].value(str(f.default)).value if f.has_default else 0
    if f.has_default:
        if t.name in ("f32", "f64"):
            return float(f.default)  # type: ignore[arg-type]
        return f.default
    return False if t.name == "bool" else 0.0 if t.name in ("f32", "f64") else 0


def slot_table(s: Struct, schema: Schema) -> list[tuple[str, str, object, Field]]:
    """``(slot name, kind, default, field)`` per FlatBuffers slot of ``s``."""
    ids = fbs_field_ids(s.fields)
    out: list[tuple[str, str, object, Field]] = []
    for f in s.fields:
        if f.type.kind == "union":
            out.append((f"{f.name}_type", "B", 0, f))
        if f.type.kind in ("scalar", "enum"):
            out.append((f.name, _code(f.type, schema), _scalar_default(f, schema), f))
        else:
            out.append((f.name, "O", 0, f))
        assert ids[f.name] == len(out) - 1
    return out


class _Emitter:
    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.out: list[str] = []
        self.vector_structs: set[str] = set()
        self.vector_unions: set[str] = set()
        for s in schema.structs.values():
            for f in s.fields:
                item = f.type.item
                if item is None:
                    continue
                if item.kind == "struct":
                    self.vector_structs.add(item.name)
                elif item.kind == "union":
                    self.vector_unions.add(item.name)
                elif item.kind == "bytes":
                    raise SchemaError(
                        "list[bytes] has no FlatBuffers form", where=f"$.structs.{s.name}.fields.{f.name}"
                    )

    # -- encode expressions ---------------------------------------------------------------

    def _enc_object(self, t: TypeRef, x: str) -> str:
        if t.kind == "list":
            assert t.item is not None
            it = t.item
            if it.kind in ("scalar", "enum"):
                return f'w.scalars("{_code(it, self.schema)}", {x})'
            if it.kind == "str":
                return f"w.strings({x})"
            if it.kind == "struct":
                return f"_ev_{_snake(it.name)}(w, {x})"
            return f"_ev_{_snake(box_name(it.name))}(w, {x})"
        if t.kind == "str":
            return f"w.string({x})"
        if t.kind == "bytes":
            return f"w.bytes_({x})"
        return f"_e_{_snake(t.name)}(w, {x})"

    def emit_encoder(self, s: Struct) -> None:
        slots = slot_table(s, self.schema)
        fn = _snake(s.name)
        out = self.out
        out += ["", "", f"def _e_{fn}(w: rt.Writer, o: m.{s.name}) -> int:"]
        values: list[str] = []
        const = 0
        terms: list[str] = []
        for i, (_, kind, default, f) in enumerate(slots):
            x = f"o.{f.name}"
            if f.deprecated:
                # Like FlatBuffers' own builders, which have no setter for a deprecated field: never
                # written; readers see its default (or the type's zero value).
                values.append("0")
                continue
            if f.type.kind == "union":
                if kind == "B":
                    continue  # the value slot below writes both
                if f.optional:
                    out.append(f"    t{i}, a{i} = _e_{_snake(f.type.name)}(w, {x}) if {x} is not None else (0, 0)")
                    terms.append(f"(t{i} != 0) << {i - 1} | (a{i} != 0) << {i}")
                else:
                    out.append(f"    t{i}, a{i} = _e_{_snake(f.type.name)}(w, {x})")
                    const |= 3 << (i - 1)
                values += [f"t{i}", f"a{i}"]
            elif kind == "O":
                expr = self._enc_object(f.type, x)
                if f.optional:
                    out.append(f"    a{i} = {expr} if {x} is not None else 0")
                    terms.append(f"(a{i} != 0) << {i}")
                elif f.required:
                    out.append(f"    a{i} = {expr}")
                    const |= 1 << i
                else:
                    test = x if f.type.kind == "list" else f"{x} != {f.default!r}"
                    out.append(f"    a{i} = {expr} if {test} else 0")
                    terms.append(f"(a{i} != 0) << {i}")
                values.append(f"a{i}")
            else:
                values.append(x)
                if kind in ("f", "d"):
                    const |= 1 << i  # always written: -0.0 and NaN payloads survive
                elif kind == "?":
                    terms.append(f"bool({x}) << {i}" if default is False else f"(not {x}) << {i}")
                else:
                    terms.append(f"({x} != {default!r}) << {i}")
        mask = " | ".join(([str(const)] if const or not terms else []) + terms)
        tail = ", " if len(values) == 1 else ""
        # Tables of integers only are shared by content (floats are not: 0.0 == -0.0).
        write = "leaf" if all(k in "?BbHhIiQq" for _, k, _, _ in slots) else "table"
        out.append(f"    return w.{write}(_S_{fn.upper()}, {mask}, ({', '.join(values)}{tail}))")

    # -- decode expressions ---------------------------------------------------------------

    def _dec_object(self, t: TypeRef, p: str) -> str:
        if t.kind == "list":
            assert t.item is not None
            it = t.item
            if it.kind == "scalar":
                return f'r.scalars({p}, "{_code(it, self.schema)}")'
            if it.kind == "enum":
                return f'[_en_{_snake(it.name)}(x) for x in r.scalars({p}, "{_code(it, self.schema)}")]'
            if it.kind == "str":
                return f"r.strings({p})"
            if it.kind == "struct":
                return f"_dv_{_snake(it.name)}(r, {p})"
            return f"_dv_{_snake(box_name(it.name))}(r, {p})"
        if t.kind == "str":
            return f"r.string({p})"
        if t.kind == "bytes":
            return f"r.bytes_({p})"
        return f"_d_{_snake(t.name)}(r, {p})"

    def emit_decoder(self, s: Struct) -> None:
        slots = slot_table(s, self.schema)
        fn = _snake(s.name)
        out = self.out
        out += ["", "", f"def _d_{fn}(r: rt.Reader, pos: int) -> m.{s.name}:"]
        if not slots:
            out += [f"    r.fields(pos, _S_{fn.upper()})", f"    return m.{s.name}()"]
            return
        out.append(f"    v = r.fields(pos, _S_{fn.upper()})")
        args: list[str] = []
        steps: list[str] = []
        for i, (_, kind, _default, f) in enumerate(slots):
            t = f.type
            if t.kind == "union":
                if kind == "B":
                    continue
                expr = f"_d_{_snake(t.name)}(r, v[{i - 1}], v[{i}])"
                if f.optional:
                    expr = f"{expr} if v[{i - 1}] else None"
            elif t.kind == "enum":
                expr = f"_en_{_snake(t.name)}(v[{i}])"
            elif kind != "O":
                args.append(f"v[{i}]")
                continue
            elif f.optional:
                expr = f"{self._dec_object(t, f'v[{i}]')} if v[{i}] else None"
            elif f.required and f.deprecated:  # never written (see the encoder): its zero value
                zero = {"list": "[]", "str": '""', "bytes": 'b""'}[t.kind]
                expr = f"{self._dec_object(t, f'v[{i}]')} if v[{i}] else {zero}"
            elif f.required:
                expr = self._dec_object(t, f"rt.need(v[{i}])")
            else:
                default = "[]" if t.kind == "list" else repr(f.default)
                expr = f"{self._dec_object(t, f'v[{i}]')} if v[{i}] else {default}"
            steps += [f'        at = ".{f.name}"', f"        a{i} = {expr}"]
            args.append(f"a{i}")
        if steps:
            out += ['    at = ""', "    try:", *steps]
            out += ["    except Exception as e:", "        raise rt.bad(e, at) from None"]
        out.append(f"    return m.{s.name}({', '.join(args)})")

    # -- vectors, unions, enums -----------------------------------------------------------

    def emit_vector(self, item: str, item_type: str) -> None:
        fn = _snake(item)
        self.out += [
            "",
            "",
            f"def _ev_{fn}(w: rt.Writer, items: list[{item_type}]) -> int:",
            f"    return w.offsets([_e_{fn}(w, x) for x in items])",
            "",
            "",
            f"def _dv_{fn}(r: rt.Reader, pos: int) -> list[{item_type}]:",
            "    positions = r.tables(pos)",
            f"    out: list[{item_type}] = []",
            "    try:",
            "        for p in positions:",
            f"            out.append(_d_{fn}(r, p))",
            "    except Exception as e:",
            '        raise rt.bad(e, f"[{len(out)}]") from None',
            "    return out",
        ]

    def emit_union(self, name: str) -> None:
        u = self.schema.unions[name]
        fn = _snake(name)
        const = fn.upper()
        enc = ", ".join(f"m.{v.type}: ({v.id}, _e_{_snake(v.type)})" for v in u.variants)
        dec = ", ".join(f"{v.id}: _d_{_snake(v.type)}" for v in u.variants)
        self.out += [
            "",
            "",
            f"_U_{const}_ENC: Final[dict[type, tuple[int, Callable[[rt.Writer, Any], int]]]] = {{{enc}}}",
            f"_U_{const}_DEC: Final[dict[int, Callable[[rt.Reader, int], m.{name}]]] = {{{dec}}}",
            "",
            "",
            f"def _e_{fn}(w: rt.Writer, o: m.{name}) -> tuple[int, int]:",
            f"    tag, write = _U_{const}_ENC[type(o)]",
            "    return tag, write(w, o)",
            "",
            "",
            f"def _d_{fn}(r: rt.Reader, tag: int, pos: int) -> m.{name}:",
            f"    read = _U_{const}_DEC.get(tag)",
            "    if read is None:",
            f'        problem = f"{{tag}} is not a variant of union {name}" if tag else "required union is missing"',
            "        raise rt.Bad(problem)",
            "    return read(r, rt.need(pos))",
        ]
        if name in self.vector_unions:
            box = _snake(box_name(name))
            self.out += [
                "",
                "",
                f"def _e_{box}(w: rt.Writer, o: m.{name}) -> int:",
                f"    tag, at = _e_{fn}(w, o)",
                f"    return w.table(_S_{box.upper()}, 3, (tag, at))",
                "",
                "",
                f"def _d_{box}(r: rt.Reader, pos: int) -> m.{name}:",
                f"    v = r.fields(pos, _S_{box.upper()})",
                "    try:",
                f"        return _d_{fn}(r, v[0], v[1])",
                "    except Exception as e:",
                '        raise rt.bad(e, "") from None',
            ]
            self.emit_vector(box_name(name), f"m.{name}")

    def emit_enum(self, name: str) -> None:
        e = self.schema.enums[name]
        fn = _snake(name)
        items = ", ".join(f"{v.value}: m.{name}.{v.name.upper()}" for v in e.values)
        self.out += [
            "",
            "",
            f"_E_{fn.upper()}: Final[dict[int, m.{name}]] = {{{items}}}",
            "",
            "",
            f"def _en_{fn}(value: int) -> m.{name}:",
            f"    e = _E_{fn.upper()}.get(value)",
            "    if e is None:",
            f'        raise rt.Bad(f"{{value}} is not a value of enum {name}")',
            "    return e",
        ]

    def _metadata(self) -> list[str]:
        """What lazy readers need from the IR: columnar tables, their columns, and every ``ref``."""
        schema = self.schema
        tables: list[str] = []
        columns: list[str] = []
        for f in schema.root_struct.fields:
            if f.type.kind != "struct" or not schema.structs[f.type.name].table:
                continue
            s = schema.structs[f.type.name]
            row = s.row_column
            assert row is not None
            tables.append(f"    {f.name!r}: ({s.name!r}, {row.name!r}, {f.optional}),")
        for s in schema.structs.values():
            if not s.table:
                continue
            items = []
            for f in s.fields:
                if f.type.kind == "list" and f.type.item is not None and f.type.item.kind in ("scalar", "enum"):
                    role = "pool" if f.pool else "sparse" if f.sparse else "row"
                    items.append(f"{f.name!r}: ({_code(f.type.item, schema)!r}, {role!r})")
            columns.append(f"    {s.name!r}: {{{', '.join(items)}}},")
        refs = [
            f"    ({s.name!r}, {f.name!r}): ({f.ref!r}, {f.null or 0}, {f.trie}),"
            for s in schema.structs.values()
            for f in s.fields
            if f.ref is not None
        ]
        return [
            "",
            "#: Columnar tables of the root: field -> (struct, the column whose length is the row count,",
            "#: whether the field is optional: absent, the table has no rows).",
            "TABLES: Final[dict[str, tuple[str, str, bool]]] = {",
            *tables,
            "}",
            "#: Numeric columns of each columnar table: field -> (element struct code, row | sparse | pool).",
            "COLUMNS: Final[dict[str, dict[str, tuple[str, str]]]] = {",
            *columns,
            "}",
            "#: Every reference: (struct, field) -> (root field it indexes, lowest sentinel, is a trie parent).",
            "REFS: Final[dict[tuple[str, str], tuple[str, int, bool]]] = {",
            *refs,
            "}",
        ]

    def _writers(self) -> list[str]:
        """``FIELD_WRITERS``: every object field's writer (after the functions it names)."""
        schema = self.schema
        writers = []
        for s in schema.structs.values():
            for f in s.fields:
                if f.type.kind in ("scalar", "enum", "union") or f.deprecated:
                    continue
                expr = self._enc_object(f.type, "x")
                if expr.startswith("_e") and expr.endswith("(w, x)"):
                    expr = expr.removesuffix("(w, x)")  # a generated writer itself
                else:
                    expr = f"lambda w, x: {expr}"
                writers.append(f"    ({s.name!r}, {f.name!r}): {expr},")
        return [
            "",
            "",
            "#: How each object field (not a scalar, enum or union) is written on its own: (struct, field) ->",
            "#: ``writer(w, value) -> offset``. For measuring what each table and column costs (``tracepack.sizes``).",
            "FIELD_WRITERS: Final[dict[tuple[str, str], Callable[[rt.Writer, Any], int]]] = {",
            *writers,
            "}",
        ]

    def emit(self) -> str:
        schema = self.schema
        root = schema.root
        out = self.out
        out += header_lines(schema)
        out += [
            f'"""tracepack schema {schema.version}: the FlatBuffers codec, generated from the IR.',
            "",
            f"The wire format is ``generated/{fbs_path(schema)}``, slot for slot; the runtime is",
            "``tracepack.codecs._fbrt``. Use it through ``tracepack.codecs.flatbuffers``.",
            '"""',
            "",
            "from __future__ import annotations",
            "",
            "from collections.abc import Callable",
            "from typing import Any, Final",
            "",
            "from tracepack.codecs import _fbrt as rt",
            "",
            "from . import model as m",
            "",
            "__all__ = [",
            '    "COLUMNS",',
            '    "DECODERS",',
            '    "FIELD_WRITERS",',
            '    "FILE_IDENTIFIER",',
            '    "REFS",',
            '    "SHARE_VTABLES",',
            '    "SPECS",',
            '    "TABLES",',
            '    "decode",',
            '    "encode",',
            "]",
            "",
            f"FILE_IDENTIFIER: Final = {schema.file_identifier.encode('ascii')!r}",
            "#: Whether tables share vtables (1.0, 1.1) or each has its own right before it (1.2 on).",
            f"SHARE_VTABLES: Final = {share_vtables(schema)}",
            "",
        ]
        specs: list[tuple[str, str]] = []
        for s in schema.structs.values():
            specs.append((s.name, _snake(s.name).upper()))
            slots = slot_table(s, schema)
            kinds = "".join(k for _, k, _, _ in slots)
            defaults = "".join(f"{float_literal(d) if isinstance(d, float) else repr(d)}, " for _, _, d, _ in slots)
            names = "".join(f"{n!r}, " for n, _, _, _ in slots)
            out.append(f"_S_{specs[-1][1]} = rt.TableSpec({s.name!r}, {kinds!r}, ({defaults}), ({names}))")
        for u in sorted(self.vector_unions):
            box = box_name(u)
            specs.append((box, _snake(box).upper()))
            out.append(f"_S_{specs[-1][1]} = rt.TableSpec({box!r}, 'BO', (0, 0), ('value_type', 'value'))")
        out += self._metadata()
        out += [
            "",
            "#: Table spec of every table type, by name (lazy readers find fields with ``spec.slots``).",
            "SPECS: Final[dict[str, rt.TableSpec]] = {",
            *[f"    {name!r}: _S_{const}," for name, const in specs],
            "}",
            "",
            "",
            f"def encode(doc: m.{root}) -> bytes:",
            '    """The FlatBuffer of ``doc`` (without the side index; see ``tracepack.codecs.flatbuffers``)."""',
            "    w = rt.Writer(share_vtables=SHARE_VTABLES)",
            f"    return w.finish(_e_{_snake(root)}(w, doc), FILE_IDENTIFIER)",
            "",
            "",
            f"def decode(r: rt.Reader) -> m.{root}:",
            '    """Decode the whole document; raises ``rt.Bad`` with its place."""',
            f"    return _d_{_snake(root)}(r, r.root(FILE_IDENTIFIER))",
        ]
        for e in schema.enums:
            self.emit_enum(e)
        for s in schema.structs.values():
            self.emit_encoder(s)
            self.emit_decoder(s)
            if s.name in self.vector_structs:
                self.emit_vector(s.name, f"m.{s.name}")
        for u in schema.unions:
            self.emit_union(u)
        out += [
            "",
            "",
            "#: Decoder of every struct, by name: ``DECODERS[name](reader, position)``.",
            "DECODERS: Final[dict[str, Callable[[rt.Reader, int], Any]]] = {",
            *[f"    {s.name!r}: _d_{_snake(s.name)}," for s in schema.structs.values()],
            "}",
        ]
        out += self._writers()
        return "\n".join(out) + "\n"


def share_vtables(schema: Schema) -> bool:
    """Whether the version's writer shares vtables between tables (1.0 and 1.1: their files stay byte
    for byte as they were), or writes each table's own vtable right before it (1.2 on: see
    :class:`tracepack.codecs._fbrt.Writer`). Either is standard FlatBuffers, and every reader reads both."""
    return (schema.major, schema.minor) < (1, 2)


def _emit_fb_init(schema: Schema) -> str:
    return "\n".join(
        [
            *header_lines(schema),
            f'"""flatc\'s Python code for ``generated/{fbs_path(schema)}`` (``flatc --python --gen-onefile``).',
            "",
            "``tables`` is flatc's output as it writes it: for checking that FlatBuffers' own reader and builder",
            "agree with ours (tests), never used by tracepack itself, and not held to the project's lint rules.",
            '"""',
            "",
        ]
    )


def emit_fbs_python(schema: Schema) -> dict[str, str]:
    """Return ``{relative path: text}``: ``vX_Y/fbcodec.py`` and ``vX_Y/fb/__init__.py``."""
    pkg = f"python/tracepack_generated/{schema.module_name}"
    return {
        f"{pkg}/fbcodec.py": _Emitter(schema).emit(),
        f"{pkg}/fb/__init__.py": _emit_fb_init(schema),
    }
