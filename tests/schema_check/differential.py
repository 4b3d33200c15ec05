"""The real cross-version result of a schema change, per codec: generate, encode, decode, compare.

For a schema pair OLD -> NEW this module

1. generates the code of both schemas (the same emitters ``make generate`` runs: the msgspec
   model, its JSON form and converters, the validator, the FlatBuffers codec) into a temporary
   package and imports it (:class:`Generated`, cached per schema);
2. builds sample documents of each schema from its IR alone (:func:`sample`): every table with
   rows, every enum value and union variant, integers at both ends of their range, floats that
   are not exact in ``f32``, NaN and infinities, optional values absent and present, fields at
   their default and not;
3. writes each sample with one schema's code and reads it with the other's (old files by the new
   reader, new files by the old reader), per codec, validating as the real readers do;
4. compares what was read with what the reader *should* see (:func:`port`): the same values,
   field for field, with renamed members followed through the renames the change intends,
   defaults for what the file lacks. The comparison knows nothing of the checker's rules.

A codec **breaks** when any read fails or reads something else, except an older reader failing
on a newer file that uses an enum value or union variant the older schema lacks (a loud
failure, which the rules allow): samples of the newer schema written for older readers avoid
those.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import struct as _struct
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgspec

from tracepack.codecs import _fbrt, columnar, fbcolumns
from tracepack.codegen.emit_fbs_python import emit_fbs_python
from tracepack.codegen.emit_python import emit_python
from tracepack.codegen.model import INT_RANGES, Field, Schema, Struct, TypeRef

__all__ = ["CODECS", "Generated", "Identity", "Outcome", "cross_check", "generated", "port", "sample"]

CODECS = ("json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns")

_ROOT = Path(tempfile.mkdtemp(prefix="tracepack-differential-"))
sys.path.insert(0, str(_ROOT))
_CACHE: dict[str, Generated] = {}


def _key(schema: Schema) -> str:
    bare = replace(schema, source="", sha256="", text="", doc="", status="", major=0, minor=0)
    return hashlib.sha256(repr(bare).encode()).hexdigest()[:16]


class Generated:
    """One schema's generated code, imported from a temporary package."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        name = f"tpdiff_{_key(schema)}"
        prefix = f"python/tracepack_generated/{schema.module_name}/"
        files = {**emit_python(schema), **emit_fbs_python(schema)}
        for rel, text in files.items():
            assert rel.startswith(prefix), rel
            path = _ROOT / name / rel[len(prefix) :]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        importlib.invalidate_caches()
        pkg = importlib.import_module(name)
        self.model = pkg.model
        self.json_model = pkg.json_model
        self.convert = pkg.convert
        self.validate = pkg.validate.validate
        self.fbcodec = importlib.import_module(f"{name}.fbcodec")
        self.root = getattr(self.model, schema.root)
        self._json = msgspec.json.Decoder(getattr(self.json_model, schema.root))
        self._msgpack = msgspec.msgpack.Decoder(self.root)

    def encode(self, codec: str, raw: Any) -> bytes:
        if codec == "json":
            return msgspec.json.encode(self.convert.to_json(raw))
        if codec == "msgpack":
            return msgspec.msgpack.encode(raw)
        if codec == "flatbuffers-rows":
            return bytes(self.fbcodec.encode(raw))
        if codec == "flatbuffers-columns":
            return fbcolumns.encode_model(raw, self.root)
        return columnar.encode_model(raw, self.root)

    def decode(self, codec: str, data: bytes) -> Any:
        """Decode and validate, as tracepack's readers do."""
        if codec == "json":
            raw = self.convert.from_json(self._json.decode(data))
        elif codec == "msgpack":
            raw = self._msgpack.decode(data)
        elif codec == "flatbuffers-rows":
            raw = self.fbcodec.decode(_fbrt.Reader(memoryview(data)))
        elif codec == "flatbuffers-columns":
            raw = fbcolumns.decode_model(data, self.root)
        else:
            raw = columnar.decode_model(data, self.root)
        self.validate(raw)
        return raw


_BY_ID: dict[int, tuple[Schema, Generated]] = {}


def generated(schema: Schema) -> Generated:
    """The generated code of ``schema`` (built once per distinct schema)."""
    hit = _BY_ID.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    key = _key(schema)
    if key not in _CACHE:
        _CACHE[key] = Generated(schema)
    _BY_ID[id(schema)] = (schema, _CACHE[key])
    return _CACHE[key]


# -- what a change means: which member of OLD each member of NEW is -------------------------------------


@dataclass(frozen=True)
class Identity:
    """Renames the change intends, NEW name -> OLD name; every other member keeps its name.

    ``types`` renames structs, enums and unions; ``members`` maps ``(type in NEW, member in NEW)``
    to the member's name in OLD, for fields, enum values and union variants alike.
    """

    types: tuple[tuple[str, str], ...] = ()
    members: tuple[tuple[tuple[str, str], str], ...] = ()

    def inverse(self) -> Identity:
        types = dict(self.types)
        return Identity(
            tuple((o, n) for n, o in self.types),
            tuple(((types.get(t, t), o), n) for (t, n), o in self.members),
        )

    def type_of(self, new: str) -> str:
        return dict(self.types).get(new, new)

    def member_of(self, new_type: str, new_member: str) -> str:
        return dict(self.members).get((new_type, new_member), new_member)


class Incompatible(Exception):
    """The value has no faithful form in the other schema."""


_SPECIAL_FLOATS = {"nan", "inf", "-inf"}


def _fits_f32(x: float) -> bool:
    if math.isnan(x) or math.isinf(x):
        return True
    try:
        return bool(_struct.unpack("<f", _struct.pack("<f", x))[0] == x)
    except OverflowError:
        return False


class _Port:
    """Rebuilds a value of schema A as the value a reader of schema B should see."""

    def __init__(self, a: Schema, b: Schema, gb: Generated, identity: Identity) -> None:
        self.a, self.b, self.gb, self.id = a, b, gb, identity

    def value(self, v: Any, ta: TypeRef, tb: TypeRef) -> Any:
        if ta.kind == "list" or tb.kind == "list":
            if ta.kind != tb.kind:
                raise Incompatible(f"{ta} -> {tb}")
            assert ta.item is not None
            assert tb.item is not None
            return [self.value(x, ta.item, tb.item) for x in v]
        if ta.kind in ("struct", "union", "enum") or tb.kind in ("struct", "union", "enum"):
            if ta.kind == "enum" and tb.is_int:
                return self.int(int(v), tb.name)
            if ta.is_int and tb.kind == "enum":
                return self.enum_number(int(v), tb.name)
            if ta.kind != tb.kind or self.id.type_of(tb.name) != ta.name:
                raise Incompatible(f"{ta} -> {tb}")
            if ta.kind == "struct":
                return self.struct(v, self.a.structs[ta.name], self.b.structs[tb.name])
            if ta.kind == "enum":
                return self.enum(v, ta.name, tb.name)
            return self.union(v, ta.name, tb.name)
        if ta.kind in ("str", "bytes") or tb.kind in ("str", "bytes"):
            if ta.kind != tb.kind:
                raise Incompatible(f"{ta} -> {tb}")
            return v
        # scalars
        if ta.name == "bool" or tb.name == "bool":
            if ta.name != tb.name:
                raise Incompatible(f"{ta} -> {tb}")
            return v
        if tb.is_int:
            if not ta.is_int:
                raise Incompatible(f"{ta} -> {tb}")
            return self.int(v, tb.name)
        # tb is a float
        x = float(v)
        if ta.is_int and x != v:
            raise Incompatible(f"{v} is not exact as a float")
        if ta.is_int and tb.name == "f32" and abs(v) > 2**24:
            raise Incompatible(f"{v} is not exact as f32")
        if tb.name == "f32" and not _fits_f32(x):
            raise Incompatible(f"{v} is not exact as f32")
        return x

    def int(self, v: int, name: str) -> int:
        lo, hi = INT_RANGES[name]
        if not lo <= v <= hi:
            raise Incompatible(f"{v} does not fit {name}")
        return v

    def enum_number(self, v: int, enum: str) -> Any:
        cls = getattr(self.gb.model, enum)
        if v not in {e.value for e in cls}:
            raise Incompatible(f"{v} is not a value of {enum}")
        return cls(v)

    def enum(self, v: Any, ea: str, eb: str) -> Any:
        name_a = self.a.enums[ea].values[[x.value for x in self.a.enums[ea].values].index(int(v))].name
        cls = getattr(self.gb.model, eb)
        for w in self.b.enums[eb].values:
            if self.id.member_of(eb, w.name) == name_a:
                return cls(w.value)
        raise Incompatible(f"{ea}.{name_a} has no counterpart")

    def union(self, v: Any, ua: str, ub: str) -> Any:
        va = next(x for x in self.a.unions[ua].variants if x.type == type(v).__name__)
        for w in self.b.unions[ub].variants:
            if self.id.member_of(ub, w.name) == va.name:
                return self.value(v, TypeRef("struct", va.type), TypeRef("struct", w.type))
        raise Incompatible(f"{ua}.{va.name} has no counterpart")

    def struct(self, v: Any, sa: Struct, sb: Struct) -> Any:
        by_name = {f.name: f for f in sa.fields}
        args = []
        for g in sb.fields:
            f = by_name.get(self.id.member_of(sb.name, g.name))
            if f is None:
                args.append(_default(g, self.gb, self.b))
                continue
            x = getattr(v, f.name)
            if x is None or (f.optional and not g.optional):
                if x is None and g.optional:
                    args.append(None)
                    continue
                if x is None:
                    raise Incompatible(f"{sb.name}.{g.name} is absent")
            self.meaning(x, f, g, sb.name)
            args.append(self.value(x, f.type, g.type))
        return getattr(self.gb.model, sb.name)(*args)

    def meaning(self, x: Any, f: Field, g: Field, struct: str) -> None:
        """A reference means the row it points at, not its number: read as a reference into another
        table (``ref`` changed), or a pooled column read as one value per row (``pool`` changed, or
        back), the same numbers stand for other data. Only null sentinels and empty lists mean the
        same on both sides."""
        if f.ref is not None and g.ref is not None:
            same_target = self.id.member_of(self.b.root_struct.name, g.ref) == f.ref
            null = f.null if f.null is not None else 0
            held = [r for r in (x if isinstance(x, list) else [x]) if not (null < 0 and r == null)]
            if not same_target and held:
                raise Incompatible(f"{struct}.{g.name}: rows of {f.ref} read as rows of {g.ref}")
        if f.pool != g.pool and isinstance(x, list) and x:
            raise Incompatible(f"{struct}.{g.name}: a {'pooled' if f.pool else 'row'} column read as the other kind")


def _default(f: Field, g: Generated, schema: Schema) -> Any:
    if f.optional:
        return None
    if not f.has_default:
        raise Incompatible(f"the file lacks {f.name}, which has no default")
    if f.type.kind == "list":
        return []
    if f.type.kind == "enum":
        e = schema.enums[f.type.name]
        return getattr(g.model, f.type.name)(e.value(str(f.default)).value)
    if f.type.kind == "scalar" and f.type.name in ("f32", "f64"):
        return float(f.default)  # type: ignore[arg-type]
    return f.default


def port(v: Any, a: Schema, b: Schema, identity: Identity) -> Any:
    """The value of ``v`` (a root of schema ``a``) as a reader of ``b`` should see it."""
    return _Port(a, b, generated(b), identity).struct(v, a.root_struct, b.root_struct)


# -- samples -----------------------------------------------------------------------------------------

_ROWS = 3
_STRINGS = ["", "a", "b", "c"]
#: Seed 3's string table: past 2**16, so references need more than a u16 (narrowing them shows).
_MANY_STRINGS = ["", *(f"s{i}" for i in range(1, 2**16 + 2))]


@dataclass
class _Sampler:
    schema: Schema
    g: Generated
    seed: int
    #: Enum values and union variants a sample may use: (type, member) -> allowed.
    allowed: Callable[[str, str], bool]
    #: Integer ranges narrower than a field's type, by ``id()`` of the field.
    limits: dict[int, tuple[int, int]]
    #: Whether seed 3 has a string table past 2**16 (references that need more than a u16).
    big: bool = False
    #: Every field with a default holds it, in every row: the columns the FlatBuffers column layout
    #: leaves out. Lists keep their items in seed 0; in seed ``s`` > 0 those of structs at depth
    #: ``s - 1`` (the root is at 0) are empty, their default, so the fields above them have rows.
    defaults: bool = False
    #: Seed 3's rows of tables that a narrow (8- or 16-bit) reference points into, by target name:
    #: past what the narrow type holds, so narrowing such a reference shows.
    big_tables: tuple[tuple[str, int], ...] = ()

    def empty(self, f: Field, depth: int) -> bool:
        """Whether a list field holds its default ``[]`` (see ``defaults``)."""
        return self.defaults and depth == self.seed - 1 and f.has_default and f.type.kind == "list"

    def scalar(self, f: Field | None, t: TypeRef, k: int) -> Any:
        """Value number ``k`` (0: the default, or a plain value) of a scalar type."""
        if f is not None and f.deprecated and f.type == t:
            return _zero(f, t, self)
        if (k % 4 == 0 or self.defaults) and f is not None and f.has_default and f.type.kind != "list":
            return _default(f, self.g, self.schema)
        if t.kind in ("str", "bytes"):
            s = ["", "text", "ünï"][k % 3]
            return s.encode() if t.kind == "bytes" else s
        if t.kind == "enum":
            values = [v for v in self.schema.enums[t.name].values if self.allowed(t.name, v.name)]
            v = values[k % len(values)]
            return getattr(self.g.model, t.name)(v.value)
        if t.name == "bool":
            return bool(k % 2)
        if t.is_int:
            lo, hi = self.limits.get(id(f), INT_RANGES[t.name]) if f is not None else INT_RANGES[t.name]
            return [lo if lo else 1, hi, lo, 7][k % 4]
        if t.name == "f32":  # values an f32 holds exactly
            return [0.5, float("nan"), float("-inf"), 1.5, -0.0, 65504.0][k % 6]
        return [0.1, float("nan"), float("-inf"), 1.5, -0.0, 3e300][k % 6]

    @property
    def strings(self) -> list[str]:
        return _MANY_STRINGS if self.seed == 3 and self.big else _STRINGS

    def ref(self, f: Field, k: int, n: int, own: bool) -> int:
        null = f.null if f.null is not None else 0
        if n == 0:  # the target is empty (a deprecated table, left out): only the null sentinel is valid
            if null < 0:
                return null
            raise ValueError(f"{f.name} must refer to a row of {f.ref}, which a valid sample leaves empty")
        if null < 0 and k % 3 == 2:
            return null
        if own and not f.trie:
            return (n - 1 - k) % n
        if f.trie:
            return max(0, k - 1)
        value = n - 1 - k % 3 if n > _ROWS + len(_STRINGS) else k % n
        return min(value, self.limits.get(id(f), (0, value))[1])

    def value(self, f: Field | None, t: TypeRef, depth: int, k: int, row: int = 0) -> Any:
        if t.kind == "struct":
            return self.struct(self.schema.structs[t.name], depth + 1, k, row)
        if t.kind == "union":
            u = self.schema.unions[t.name]
            variants = [v for v in u.variants if self.allowed(u.name, v.name)]
            v = variants[k % len(variants)]
            if depth > 8:  # a recursive schema: end with the variant of fewest fields
                v = min(variants, key=lambda v: len(self.schema.structs[v.type].fields))
            # The variant's own fields take the other digits of k, and 7 * seed: across the four seeds
            # each field of each variant gets each of k % 4 (its default, and three other values).
            return self.struct(self.schema.structs[v.type], depth + 1, k // len(variants) + 7 * self.seed)
        if t.kind == "list":
            assert t.item is not None
            if depth > 8:
                return []
            n = 3
            if t.item.kind == "union":
                n = max(3, len(self.schema.unions[t.item.name].variants))
            return [self.value(f, t.item, depth, k + i, i) for i in range(n)]
        return self.scalar(f, t, k)

    def struct(self, s: Struct, depth: int, k0: int, row: int = 0) -> Any:
        """A struct; ``row`` is its place in a list (tables in a list differ in their plain fields)."""
        cls = getattr(self.g.model, s.name)
        if s.table:
            return cls(*[self.column(s, f, row) for f in s.fields])
        args = []
        for f in s.fields:
            k = f.id + depth + k0  # k0 holds the seed, and which item of a list this is
            if f.optional and (k % 4 == 0 or depth > 8):
                args.append(None)
            elif f.deprecated:
                args.append(_zero(f, f.type, self))
            elif f.ref is not None and (k % 4 == 0 or self.defaults) and self.ref_default(f):
                args.append(_default(f, self.g, self.schema))
            elif f.ref is not None:
                n = self.sizes[f.ref]
                if f.type.kind == "list":
                    # 2 or 3 by field: a plain struct's lists need not have one length (a table's do)
                    args.append([self.ref(f, k + i, n, False) for i in range(3 - k % 2 if n else 0)])
                else:
                    args.append(self.ref(f, k, n, False))
            elif f.type.kind == "list" and (depth > 8 or k % 4 == 0 or self.empty(f, depth)):
                args.append([])  # empty: what writers that omit defaults leave out
            else:
                args.append(self.value(f, f.type, depth, k))
        return cls(*args)

    def ref_default(self, f: Field) -> bool:
        """Whether a reference field's default is a value a valid document may hold: a row of its
        target, or its null sentinel (a change can leave a default of -1 without the null it was)."""
        if not f.has_default:
            return False
        if not isinstance(f.default, int) or isinstance(f.default, bool):
            return True  # a list's []
        assert f.ref is not None
        return f.default == f.null or 0 <= f.default < self.sizes[f.ref]

    def column(self, s: Struct, f: Field, row: int = 0) -> Any:
        if f.type.kind != "list":
            if f.ref is not None and f.type.is_int:  # one reference for the whole table: a row of its target
                return self.ref(f, self.seed + f.id + row, self.sizes[f.ref], False)
            return self.value(f, f.type, 1, self.seed + f.id + row)
        assert f.type.item is not None
        if (f.deprecated or f.sparse) and (f.sparse or f.pool) and (f.deprecated or self.seed % 2 == 0):
            return []
        if f.deprecated:
            return [_zero_of(f.type.item, self) for _ in range(_ROWS)]
        if f.pool and self.seed == 3:
            return []  # a pool may be empty in a table with rows (sources without lines): at its default
        own = any(t.type.name == s.name for t in self.schema.ref_targets().values() if t.name == f.ref)
        n = 2 if f.pool else self.rows(s)
        if f.ref is not None:
            size = self.sizes[f.ref]
            return [self.ref(f, i if f.trie else self.seed + f.id + i, size, own) for i in range(n)]
        return [self.value(f, f.type.item, 1, self.seed + f.id + i) for i in range(n)]

    def rows(self, s: Struct) -> int:
        """Rows of a table: tables that references point into keep row 0; others are empty in seed 3."""
        referenced = {f.ref for t in self.schema.structs.values() for f in t.fields if f.ref is not None}
        targets = {t.type.name for name, t in self.schema.ref_targets().items() if name in referenced}
        if self.seed == 3:
            big = dict(self.big_tables)
            for name, t in self.schema.ref_targets().items():
                if t.type.name == s.name and name in big:
                    return big[name]
            if any(f.ref in big for f in s.fields):
                return _ROWS  # it refers into a big table: rows to hold the large references
        return _ROWS if s.name in targets or self.seed != 3 else 0

    @property
    def sizes(self) -> dict[str, int]:
        big = dict(self.big_tables) if self.seed == 3 else {}
        return {
            # A deprecated optional table is left out by root(): nothing to refer to. (The string
            # table is filled even when deprecated: root() takes it first.)
            name: 0
            if t.deprecated and t.optional and t.type.kind == "struct"
            else (len(self.strings) if t.type.kind == "list" else big.get(name, _ROWS))
            for name, t in self.schema.ref_targets().items()
        }

    def root(self) -> Any:
        s = self.schema.root_struct
        targets = self.schema.ref_targets()
        args = []
        for f in s.fields:
            if f.name in targets and f.type.kind == "list":
                args.append(list(self.strings))
            elif f.ref is not None:
                args.append(self.ref(f, self.seed + f.id, self.sizes[f.ref], False))
            elif f.optional and (self.seed + f.id) % 4 == 0 and f.name not in targets:
                args.append(None)
            elif f.deprecated:  # writers leave a deprecated field at its default, as in struct()
                args.append(_zero(f, f.type, self))
            elif self.empty(f, 0):
                args.append([])
            else:
                args.append(self.value(f, f.type, 0, self.seed + f.id))
        return getattr(self.g.model, s.name)(*args)


def _zero(f: Field, t: TypeRef, s: _Sampler) -> Any:
    """What a writer puts in a deprecated field: its default, or the zero value of its type."""
    if f.has_default:
        return [] if t.kind == "list" else _default(f, s.g, s.schema)
    if f.optional:
        return None
    return _zero_of(t, s)


def _zero_of(t: TypeRef, s: _Sampler) -> Any:
    if t.kind == "list":
        return []
    if t.kind in ("str", "bytes"):
        return b"" if t.kind == "bytes" else ""
    if t.kind == "enum":
        return getattr(s.g.model, t.name)(s.schema.enums[t.name].values[0].value)
    if t.kind == "scalar":
        return False if t.name == "bool" else 0.0 if t.name in ("f32", "f64") else 0
    return s.value(None, t, 9, 0)


_SAMPLES: dict[tuple[str, int, bool, bool, tuple[tuple[str, int], ...]], Any] = {}


def sample(
    schema: Schema,
    seed: int,
    allowed: Callable[[str, str], bool] | None = None,
    limits: dict[int, tuple[int, int]] | None = None,
    *,
    big: bool = False,
    defaults: bool = False,
    big_tables: tuple[tuple[str, int], ...] = (),
) -> Any:
    """A valid document of ``schema`` (see the module doc), varied by ``seed``; with ``defaults``,
    every field that has a default holds it."""
    if allowed is None and not limits:
        key = (_key(schema), seed, big, defaults, big_tables)
        if key not in _SAMPLES:
            _SAMPLES[key] = sample(schema, seed, lambda t, m: True, big=big, defaults=defaults, big_tables=big_tables)
        return _SAMPLES[key]
    g = generated(schema)
    raw = _Sampler(schema, g, seed, allowed or (lambda t, m: True), limits or {}, big, defaults, big_tables).root()
    g.validate(raw)
    return raw


# -- the cross-version reads -------------------------------------------------------------------------


@dataclass
class Outcome:
    """Per codec: whether it breaks, and the first read that shows it."""

    breaks: dict[str, bool]
    why: dict[str, str]

    @property
    def broken(self) -> set[str]:
        return {c for c, b in self.breaks.items() if b}


def _same(a: Any, b: Any) -> bool:
    return bool(msgspec.msgpack.encode(a) == msgspec.msgpack.encode(b))


def _counterparts(a: Schema, b: Schema, identity: Identity) -> Callable[[str, str], bool]:
    """Members of ``b`` (enum values, union variants) that exist in ``a``."""

    def allowed(t: str, member: str) -> bool:
        ta = identity.type_of(t)
        old = identity.member_of(t, member)
        if t in b.enums:
            return ta in a.enums and any(v.name == old for v in a.enums[ta].values)
        return ta in a.unions and any(v.name == old for v in a.unions[ta].variants)

    return allowed


def _old_ranges(a: Schema, b: Schema, identity: Identity) -> dict[int, tuple[int, int]]:
    """Integer fields of ``b`` whose counterpart in ``a`` holds fewer values: the common range.

    A newer writer that uses a promoted field's wider range writes a file older readers refuse,
    loudly; like a new enum value, that is allowed, so files for older readers stay in range."""
    out: dict[int, tuple[int, int]] = {}
    for sb in b.structs.values():
        sa = a.structs.get(identity.type_of(sb.name))
        if sa is None:
            continue
        by_name = {f.name: f for f in sa.fields}
        for g in sb.fields:
            f = by_name.get(identity.member_of(sb.name, g.name))
            if f is None:
                continue
            ta, tb = f.type.item or f.type, g.type.item or g.type
            if ta.is_int and tb.is_int:
                (lo, hi), (nlo, nhi) = INT_RANGES[ta.name], INT_RANGES[tb.name]
                out[id(g)] = (max(lo, nlo), min(hi, nhi))
    return out


SEEDS = (0, 1, 2, 3)
#: Samples at their defaults (see :func:`sample`), after the seeds' samples.
DEFAULT_SEEDS = (0, 1, 2, 3, 4)


def cross_check(old: Schema, new: Schema, identity: Identity = Identity()) -> Outcome:
    """Write with one schema, read with the other, both ways, in every codec."""
    go, gn = generated(old), generated(new)
    breaks = dict.fromkeys(CODECS, False)
    why: dict[str, str] = {}
    reads: list[tuple[str, Schema, Generated, Schema, Generated, Any, Identity]] = []
    # References need a string table past 2**16 only where a reference field is narrower than a u32.
    big = any(
        f.ref is not None and (f.type.item or f.type).name in ("u8", "u16", "i8", "i16")
        for schema in (old, new)
        for s in schema.structs.values()
        for f in s.fields
    )
    # ... and a referenced table past 2**8 or 2**16 rows where such a field points into a table.
    rows: dict[str, int] = {}
    for schema in (old, new):
        tables = {n for n, t in schema.ref_targets().items() if t.type.kind == "struct"}
        for s in schema.structs.values():
            for f in s.fields:
                width = (f.type.item or f.type).name
                if f.ref in tables and width in ("u8", "u16", "i8", "i16"):
                    rows[f.ref] = max(rows.get(f.ref, 0), (2**8 if width.endswith("8") else 2**16) + 2)
    big_tables = tuple(sorted(rows.items()))
    for seed, defaults in [(s, False) for s in SEEDS] + [(s, True) for s in DEFAULT_SEEDS]:
        older = sample(old, seed, big=big, defaults=defaults, big_tables=big_tables)
        reads.append(("old file, new reader", old, go, new, gn, older, identity))
        try:
            newer = sample(
                new,
                seed,
                _counterparts(old, new, identity),
                _old_ranges(old, new, identity),
                big=big,
                defaults=defaults,
                big_tables=big_tables,
            )
        except (IndexError, ZeroDivisionError):
            continue  # every value of some enum or union is new: nothing an older reader could read
        reads.append(("new file, old reader", new, gn, old, go, newer, identity.inverse()))
    for what, sa, ga, sb, gb, raw, ident in reads:
        try:
            expect: Any = port(raw, sa, sb, ident)
        except Incompatible as exc:
            expect = exc
        for codec in CODECS:
            if breaks[codec]:
                continue
            data = ga.encode(codec, raw)
            try:
                got = gb.decode(codec, data)
            except Exception as exc:  # any failure is the finding
                problem = f"{what}: {type(exc).__name__}: {str(exc)[:160]}"
            else:
                if isinstance(expect, Incompatible):
                    problem = f"{what}: read a value that has no counterpart ({expect})"
                elif _same(got, expect):
                    continue
                else:
                    problem = f"{what}: read something else than was written"
            breaks[codec] = True
            why[codec] = problem
    return Outcome(breaks, why)
