"""Compare two schema IRs and list every change as a :class:`Finding`.

Pure functions over :class:`tracepack.codegen.model.Schema`; no file I/O.

How members are paired across the two versions (the same way every codec
would, had it to choose):

* types (structs, enums, unions) by **name**;
* fields by **name** first; a field whose name is gone is paired with the new
  field at its **id**, if that field's name is new: a *rename* when the type
  is the same, an *id reuse* otherwise (FlatBuffers' ``--conform`` draws the
  same line: "renaming a field is allowed", "field renamed to different type"
  is not);
* enum values by name, then by number; union variants by name, then by id
  (a variant at the same id with the same struct type is a rename).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tracepack.codegen.emit_fbs import fbs_field_ids
from tracepack.codegen.model import INT_RANGES, Enum, Field, Schema, Struct, TypeRef, Union
from tracepack.schema_check.rules import CODECS, RULES, Bump, Codec

__all__ = ["Finding", "diff_schemas", "is_promotion", "retired_reuse"]

_T = TypeVar("_T", Struct, Enum, Union)


@dataclass(frozen=True)
class Finding:
    """One change between two schema versions.

    ``where`` names the member exactly (``Node.stack``, ``StackStyle.python``,
    ``Argument.tensor``, ``Node``, ``schema.root``); ``detail`` says what changed and
    what it does; ``fix`` how to make the change without the bump ("" when nothing
    needs fixing).
    """

    rule: str
    where: str
    detail: str
    fix: str = ""
    #: The codecs this change breaks when that depends on the schema (a default that is never
    #: stored, a float that is always written); ``None``: the rule's codecs.
    codecs: tuple[Codec, ...] | None = None

    @property
    def bump(self) -> Bump:
        bump = RULES[self.rule].bump
        # A change that can break files but breaks none here (e.g. renaming an enum value that is
        # only ever a default, which JSON omits) is compatible.
        return "minor" if bump == "major" and self.codecs == () else bump

    @property
    def breaks(self) -> tuple[Codec, ...]:
        return RULES[self.rule].breaks if self.codecs is None else self.codecs


def _q(value: object) -> str:
    """A default or name as it is spelt in a schema file."""
    return json.dumps(value, ensure_ascii=False)


def is_promotion(old: TypeRef, new: TypeRef) -> bool:
    """Whether ``new`` holds every value of ``old`` in every codec that writes numbers as numbers.

    Integers widen (``u8`` -> ``u16`` -> ``u32`` -> ``u64``, ``i8`` -> ... -> ``i64``, and an
    unsigned type to any signed type whose range covers it), ``f32`` widens to ``f64``; lists
    promote when their items do. Integers never become floats: newer writers write every value as
    a float, which older readers of an integer refuse in every codec (and an ``i64`` above 2**53
    would lose precision).
    """
    if old.kind == "list" and new.kind == "list":
        assert old.item is not None
        assert new.item is not None
        return is_promotion(old.item, new.item)
    if old == new:
        return False
    if old.is_int and new.is_int:
        lo, hi = INT_RANGES[old.name]
        nlo, nhi = INT_RANGES[new.name]
        return nlo <= lo and hi <= nhi
    return old.kind == new.kind == "scalar" and (old.name, new.name) == ("f32", "f64")


class _Diff:
    def __init__(self, old: Schema, new: Schema) -> None:
        self.old, self.new = old, new
        self.out: list[Finding] = []
        self.renames: dict[str, str] = {}

    def add(self, rule: str, where: str, detail: str, fix: str = "", codecs: tuple[Codec, ...] | None = None) -> None:
        assert rule in RULES, rule
        if codecs is not None:
            codecs = tuple(c for c in RULES[rule].breaks if c in codecs)
            if RULES[rule].bump == "major" and not codecs:
                fix = ""
        self.out.append(Finding(rule, where, detail, fix, codecs))

    # -- schema --------------------------------------------------------------------------------

    def schema(self, old: Schema, new: Schema) -> None:
        self.renames = _type_renames(old, new)
        if old.name != new.name:
            self.add(
                "SCHEMA_NAME_CHANGED",
                "schema.name",
                f"{_q(old.name)} became {_q(new.name)}: generated code (the FlatBuffers namespace) changes, "
                "no byte of any codec does",
            )
        if old.root != new.root and self.renames.get(new.root) != old.root:
            self.add(
                "ROOT_CHANGED",
                "schema.root",
                f"{_q(old.root)} became {_q(new.root)}: every file is decoded as another type",
                f"keep `root = {_q(old.root)}`",
            )
        if old.file_identifier != new.file_identifier:
            self.add(
                "FILE_IDENTIFIER_CHANGED",
                "schema.file_identifier",
                f"{_q(old.file_identifier)} became {_q(new.file_identifier)}: FlatBuffers readers check it",
                f"keep `file_identifier = {_q(old.file_identifier)}`",
            )
        self.types("enum", old.enums, new.enums, self.enum)
        self.types("union", old.unions, new.unions, self.union)
        self.types("struct", old.structs, new.structs, self.struct)

    def types(self, kind: str, old: dict[str, _T], new: dict[str, _T], compare: Callable[[_T, _T], None]) -> None:
        rule = kind.upper()
        renamed = {was: now for now, was in self.renames.items() if now in new and was in old}
        for name, o in old.items():
            n = new.get(name)
            if n is None and name in renamed:
                now = renamed[name]
                self.add(
                    f"{rule}_RENAMED",
                    now,
                    f"{kind} {name} is now {now}, and every use follows: no codec writes type names",
                )
                compare(o, new[now])
                continue
            if n is None:
                self.add(f"{rule}_REMOVED", name, f"{kind} {name} was removed: no codec writes type names")
            else:
                compare(o, n)
        for name in new:
            if name not in old and name not in self.renames:
                self.add(f"{rule}_ADDED", name, f"new {kind} {name}")

    # -- enums ---------------------------------------------------------------------------------

    def enum(self, old: Enum, new: Enum) -> None:
        e = old.name
        if old.type != new.type:
            self.add(
                "ENUM_TYPE_CHANGED",
                e,
                f"enum {e} is stored as {new.type}, was {old.type}",
                f"keep enum {e} as `type = {_q(old.type)}`",
            )
        old_names = {v.name for v in old.values}
        new_by_name = {v.name: v for v in new.values}
        new_by_value = {v.value: v for v in new.values}
        paired: set[str] = set()
        for v in old.values:
            n = new_by_name.get(v.name)
            if n is not None:
                paired.add(n.name)
                if n.value != v.value:
                    self.add(
                        "ENUM_VALUE_RENUMBERED",
                        f"{e}.{v.name}",
                        f"value {v.value} became {n.value}: binary files store the number"
                        + self.enum_use_note(old.name, new.name, v.name, n.name),
                        f"give `{e}.{v.name}` back value {v.value}",
                        codecs=self.enum_codecs(old.name, new.name, v.name, n.name, ("msgpack", "columnar")),
                    )
                self.deprecation("ENUM_VALUE", f"{e}.{n.name}", v.deprecated, n.deprecated)
                continue
            cand = new_by_value.get(v.value)
            if cand is not None and cand.name not in old_names:
                paired.add(cand.name)
                if v.deprecated and not cand.deprecated:
                    self.add(
                        "ENUM_VALUE_DEPRECATED_REUSED",
                        f"{e}.{cand.name}",
                        f"takes value {v.value} of the deprecated `{e}.{v.name}`",
                        f"keep the deprecated `{e}.{v.name} = {v.value}` and give `{e}.{cand.name}` an unused value",
                    )
                    continue
                self.add(
                    "ENUM_VALUE_RENAMED",
                    f"{e}.{cand.name}",
                    f"value {v.value} was named `{v.name}`: JSON files spell the name"
                    + self.enum_use_note(old.name, new.name, v.name, cand.name),
                    f"keep the name `{e}.{v.name}`",
                    codecs=self.enum_codecs(old.name, new.name, v.name, cand.name, ()),
                )
                self.deprecation("ENUM_VALUE", f"{e}.{cand.name}", v.deprecated, cand.deprecated)
                continue
            self.add(
                "ENUM_VALUE_REMOVED",
                f"{e}.{v.name}",
                f"value {v.value} was removed: files that use it no longer decode",
                f"keep `{e}.{v.name}` and mark it `deprecated = true` instead of removing it",
            )
        for n in new.values:
            if n.name not in paired:
                self.add("ENUM_VALUE_ADDED", f"{e}.{n.name}", f"new value {n.value}")

    # -- unions --------------------------------------------------------------------------------

    def union(self, old: Union, new: Union) -> None:
        u = old.name
        old_names = {v.name for v in old.variants}
        new_by_name = {v.name: v for v in new.variants}
        new_by_id = {v.id: v for v in new.variants}
        paired: set[str] = set()
        for v in old.variants:
            n = new_by_name.get(v.name)
            if n is not None:
                paired.add(n.name)
                if n.id != v.id:
                    self.add(
                        "UNION_VARIANT_ID_CHANGED",
                        f"{u}.{v.name}",
                        f"id {v.id} became {n.id}: binary files tag variants by id",
                        f"give `{u}.{v.name}` back id {v.id}",
                    )
                if self.renames.get(n.type, n.type) != v.type:
                    self.add(
                        "UNION_VARIANT_TYPE_CHANGED",
                        f"{u}.{v.name}",
                        f"holds {n.type}, was {v.type}",
                        f"keep `{u}.{v.name}` as {v.type}; add a new variant for {n.type}",
                    )
                self.deprecation("UNION_VARIANT", f"{u}.{n.name}", v.deprecated, n.deprecated)
                continue
            cand = new_by_id.get(v.id)
            if cand is not None and cand.name not in old_names:
                paired.add(cand.name)
                if v.deprecated and not cand.deprecated:
                    self.add(
                        "UNION_VARIANT_DEPRECATED_REUSED",
                        f"{u}.{cand.name}",
                        f"takes id {v.id} of the deprecated `{u}.{v.name}`",
                        f"keep the deprecated `{u}.{v.name}` at id {v.id} and give `{u}.{cand.name}` an unused id",
                    )
                elif self.renames.get(cand.type, cand.type) != v.type:
                    self.add(
                        "UNION_VARIANT_ID_REUSED",
                        f"{u}.{cand.name}",
                        f"takes id {v.id} of `{u}.{v.name}` ({v.type}) with another type, {cand.type}",
                        f"keep `{u}.{v.name}` at id {v.id} (deprecated if unused) "
                        f"and give `{u}.{cand.name}` an unused id",
                    )
                else:
                    self.add(
                        "UNION_VARIANT_RENAMED",
                        f"{u}.{cand.name}",
                        f"variant {v.id} was named `{v.name}`: JSON files tag variants by name",
                        f"keep the name `{u}.{v.name}`",
                    )
                    self.deprecation("UNION_VARIANT", f"{u}.{cand.name}", v.deprecated, cand.deprecated)
                continue
            self.add(
                "UNION_VARIANT_REMOVED",
                f"{u}.{v.name}",
                f"variant {v.id} ({v.type}) was removed: files that use it no longer decode",
                f"keep `{u}.{v.name}` and mark it `deprecated = true` instead of removing it",
            )
        for n in new.variants:
            if n.name not in paired:
                self.add("UNION_VARIANT_ADDED", f"{u}.{n.name}", f"new variant {n.id} ({n.type})")

    def deprecation(self, kind: str, where: str, old: bool, new: bool) -> None:
        if old != new:
            self.add(
                f"{kind}_{'DEPRECATED' if new else 'UNDEPRECATED'}", where, "deprecated" if new else "in use again"
            )

    # -- structs -------------------------------------------------------------------------------

    def struct(self, old: Struct, new: Struct) -> None:
        s = old.name
        if (old.variant_of is None) != (new.variant_of is None):
            plain = _plain_uses(self.old, old.name) + _plain_uses(self.new, new.name)
            if plain:
                # columnar shreds an optional tagged struct like a one-variant union (`#tag`), so an
                # optional plain use changes its columns too.
                optional = any(
                    f.optional and f.type.kind == "struct" and f.type.name in (old.name, new.name)
                    for schema in (self.old, self.new)
                    for t in schema.structs.values()
                    for f in t.fields
                )
                became = new.variant_of is not None
                union = (new.variant_of or old.variant_of or ("?", "?", 0))[0]
                self.add(
                    "STRUCT_BECAME_VARIANT" if became else "STRUCT_NO_LONGER_VARIANT",
                    new.name,
                    ("became" if became else "is no longer")
                    + f" a variant of {union} while {', '.join(sorted(set(plain)))} holds it as a plain value: "
                    "MessagePack writes a variant's id before its fields wherever the struct appears",
                    f"give {union} a new struct for the variant (a copy of {new.name})"
                    if became
                    else f"keep {new.name} a variant of {union} (deprecated)",
                    codecs=("msgpack", *_COLUMNS) if optional else ("msgpack",),
                )
        if old.table != new.table:
            if new.table:
                # One row-aligned column has nothing to differ from: older files stay valid.
                single = len(new.columns) < 2
                self.add(
                    "CONSTRAINT_TIGHTENED",
                    s,
                    "became a table (`table = true`): "
                    + (
                        "one column, which no other must match"
                        if single
                        else "columns of older files may differ in length"
                    ),
                    f"keep {s} a plain struct",
                    codecs=() if single else None,
                )
            else:
                self.add(
                    "CONSTRAINT_LOOSENED",
                    s,
                    "is no longer a table: older readers check that its columns have one length",
                    f"keep `table = true` on {s}",
                )
        old_names = {f.name for f in old.fields}
        new_by_name = {f.name: f for f in new.fields}
        new_by_id = {f.id: f for f in new.fields}
        old_fb, new_fb = fbs_field_ids(old.fields), fbs_field_ids(new.fields)
        paired: set[str] = set()
        for o in old.fields:
            n = new_by_name.get(o.name)
            if n is not None:
                paired.add(n.name)
                if n.id != o.id:
                    self.add(
                        "FIELD_ID_CHANGED",
                        f"{s}.{o.name}",
                        f"id {o.id} became {n.id}: MessagePack reads it by position, FlatBuffers by id",
                        f"give `{s}.{o.name}` back id {o.id} (new fields go after the last id)",
                    )
                else:
                    self.fb_id(s, o, n, old_fb, new_fb)
                self.field(s, o, n)
                continue
            cand = new_by_id.get(o.id)
            if cand is not None and cand.name not in old_names:
                paired.add(cand.name)
                self.reused_or_renamed(s, o, cand, old_fb, new_fb)
                continue
            self.add(
                "FIELD_REMOVED",
                f"{s}.{o.name}",
                f"field {o.id} ({o.type}) was removed"
                + (
                    ""
                    if o.required
                    else ": readers of either version fill in its default, but its id and name are retired for good"
                ),
                f"keep `{s}.{o.name}` and mark it `deprecated = true` instead of removing it",
                # Older readers fill in what newer files lack when it has a default; ids that move
                # are findings of their own.
                codecs=None if o.required else (),
            )
        last = len(old.fields)
        for n in new.fields:
            if n.name in paired:
                continue
            where = f"{s}.{n.name}"
            if n.required:
                self.add(
                    "FIELD_ADDED_WITHOUT_DEFAULT",
                    where,
                    f"new required field {n.id} ({n.type}): files written before lack it",
                    f"give `{where}` a default"
                    + (" (or `optional = true`)" if n.type.kind in ("struct", "union") else ""),
                )
            elif new.table and n.type.kind == "list" and not n.sparse and not n.pool:
                self.add(
                    "COLUMN_ADDED_NOT_SPARSE",
                    where,
                    f"new column {n.id} is empty in older files, whose tables have rows",
                    f"mark `{where}` `sparse = true`",
                )
            else:
                self.add(
                    "FIELD_ADDED",
                    where,
                    f"new field {n.id} ({n.type}) with "
                    + ("`optional = true`" if n.optional else f"default {_q(n.default)}")
                    + ("" if n.id >= last else " (the ids it moved are listed apart)"),
                )

    def fb_id(self, s: str, o: Field, n: Field, old_fb: dict[str, int], new_fb: dict[str, int]) -> None:
        if old_fb[o.name] != new_fb[n.name]:
            self.add(
                "FIELD_FB_ID_CHANGED",
                f"{s}.{n.name}",
                f"FlatBuffers id {old_fb[o.name]} became {new_fb[n.name]}: a union field before it takes two ids",
                f"keep the fields before `{s}.{n.name}` as they were; append new fields after the last id",
            )

    def reused_or_renamed(self, s: str, o: Field, n: Field, old_fb: dict[str, int], new_fb: dict[str, int]) -> None:
        where = f"{s}.{n.name}"
        after = f"give `{where}` a new id after the last one"
        # Positional codecs read one field as the other; codecs that key by name only miss a
        # required field that one side's files lack.
        codecs: tuple[Codec, ...] = ("msgpack", "flatbuffers-rows")
        if o.required or n.required:
            codecs += ("json", *_COLUMNS)
        if o.deprecated and not n.deprecated:
            self.add(
                "FIELD_DEPRECATED_REUSED",
                where,
                f"takes id {o.id} of the deprecated `{s}.{o.name}`",
                f"keep the deprecated `{s}.{o.name}` at id {o.id} and {after}",
                codecs=codecs,
            )
            return
        if o.type != self.norm(n.type):
            self.add(
                "FIELD_ID_REUSED",
                where,
                f"takes id {o.id} of `{s}.{o.name}` ({o.type}) with another type, {n.type}",
                f"keep `{s}.{o.name}` at id {o.id} (deprecated if unused) and {after}",
                codecs=codecs,
            )
            return
        self.add(
            "FIELD_RENAMED",
            where,
            f"field {o.id} was named `{o.name}`: JSON files key it by name",
            f"keep the name `{s}.{o.name}`",
        )
        self.fb_id(s, o, n, old_fb, new_fb)
        self.field(s, o, n)

    def field(self, s: str, o: Field, n: Field) -> None:
        """Compare two versions of one field (paired by name, or a rename)."""
        where = f"{s}.{n.name}"
        if o.type != self.norm(n.type):
            if not is_promotion(o.type, n.type):
                self.add(
                    "FIELD_TYPE_CHANGED",
                    where,
                    f"type {o.type} became {n.type}",
                    f"keep `{where}` as {o.type}; add a new field of type {n.type} and deprecate `{where}`",
                )
                return  # defaults and constraints of another type are not comparable
            self.add(
                "FIELD_TYPE_PROMOTED",
                where,
                f"type {o.type} widened to {n.type}: JSON and MessagePack read old values, FlatBuffers does not",
                f"keep `{where}` as {o.type}; add a new field of type {n.type} and deprecate `{where}`",
            )
        if o.optional != n.optional:
            if n.optional:
                self.add(
                    "FIELD_MADE_OPTIONAL",
                    where,
                    "became optional: older readers reject files without it",
                    f"keep `{where}` required",
                )
            else:
                self.add(
                    "FIELD_MADE_REQUIRED",
                    where,
                    "is no longer optional: files written without it no longer decode",
                    f"keep `optional = true` on `{where}`",
                )
        # A row column of a table that always has rows is never empty: its default is never omitted.
        stored = self.never_empty(s, o, n)
        if o.has_default and n.has_default and not self.same_default(o, n):
            fb = _fb_omits(n)
            self.add(
                "FIELD_DEFAULT_CHANGED",
                where,
                f"default {_q(o.default)} became {_q(n.default)}: files that omitted it would change meaning"
                + ("" if fb else " (FlatBuffers always writes floats)"),
                f"restore `default = {_q(o.default)}` on `{where}`; for another default, add a new field "
                f"and deprecate `{where}`",
                codecs=_omitters(fb),
            )
        elif o.has_default and not n.has_default:
            fb = _fb_omits(o) and not _fb_zero_default(o, self.old)
            self.add(
                "FIELD_DEFAULT_REMOVED",
                where,
                f"default {_q(o.default)} was removed: files that omitted the field no longer decode"
                + (_ALWAYS_ROWS if stored else ""),
                f"restore `default = {_q(o.default)}` on `{where}`",
                codecs=() if stored else _omitters(fb),
            )
        elif n.has_default and not o.has_default:
            fb = _fb_omits(n) and not _fb_zero_default(n, self.new)
            self.add(
                "FIELD_DEFAULT_ADDED",
                where,
                f"got default {_q(n.default)}: writers omit it, older readers require it"
                + (_ALWAYS_ROWS if stored else ""),
                f"keep `{where}` without a default",
                codecs=() if stored else _omitters(fb),
            )
        if o.deprecated != n.deprecated:
            required = o.required or n.required
            # FlatBuffers readers see an unwritten scalar as 0, what a deprecated one holds; a string or
            # list they require is missing.
            fb_codecs: tuple[Codec, ...] = () if n.type.kind in ("scalar", "enum") else ("flatbuffers-rows",)
            if n.deprecated:
                self.add(
                    "REQUIRED_FIELD_DEPRECATED" if required else "FIELD_DEPRECATED",
                    where,
                    "deprecated" + (" while required: FlatBuffers writers stop writing it" if required else ""),
                    f"keep `{where}` in use: it has no default" if required else "",
                    codecs=fb_codecs if required else None,
                )
            else:
                self.add(
                    "REQUIRED_FIELD_UNDEPRECATED" if required else "FIELD_UNDEPRECATED",
                    where,
                    "in use again"
                    + (" while required: FlatBuffers files written meanwhile lack it" if required else ""),
                    f"leave `{where}` deprecated; add a new field with a default" if required else "",
                    codecs=fb_codecs if required else None,
                )
        self.constraints(where, o, n)

    def same_default(self, o: Field, n: Field) -> bool:
        """Whether two defaults mean the same; an enum default follows its value through a rename.

        Floats compare by their bits (as codecs store them): NaN is the same as NaN, 0.0 is not -0.0.
        """
        if isinstance(o.default, float) or isinstance(n.default, float):
            if isinstance(o.default, bool) or isinstance(n.default, bool):
                return False
            return _bits(o.default) == _bits(n.default)
        if o.default == n.default or o.type.kind != "enum":
            return o.default == n.default
        old_enum, new_enum = self.old.enums.get(o.type.name), self.new.enums.get(n.type.name)
        if old_enum is None or new_enum is None:
            return False
        old_names, new_names = {v.name for v in old_enum.values}, {v.name for v in new_enum.values}
        if o.default in new_names or n.default in old_names:
            return False  # both names exist on both sides: two different values
        try:
            return old_enum.value(str(o.default)).value == new_enum.value(str(n.default)).value
        except KeyError:
            return False

    def constraints(self, where: str, o: Field, n: Field) -> None:
        def tightened(what: str, fix: str) -> None:
            self.add("CONSTRAINT_TIGHTENED", where, f"{what}: files written before may fail validation", fix)

        def loosened(what: str, fix: str) -> None:
            self.add("CONSTRAINT_LOOSENED", where, f"{what}: older readers reject what writers may now write", fix)

        if o.ref != n.ref:
            if o.ref is None:
                tightened(f"`ref = {_q(n.ref)}` added", f"drop `ref` from `{where}`")
            elif n.ref is None:
                loosened(f"`ref = {_q(o.ref)}` removed", f"keep `ref = {_q(o.ref)}` on `{where}`")
            else:
                self.add(
                    "CONSTRAINT_CHANGED",
                    where,
                    f"`ref` changed from {_q(o.ref)} to {_q(n.ref)}: stored indices point into another table",
                    f"keep `ref = {_q(o.ref)}` on `{where}`",
                )
        elif o.ref is not None and o.null != n.null:
            before, after = o.null or 0, n.null or 0
            spelt = "no sentinel" if n.null is None else f"`null = {n.null}`"
            fix = f"keep `null = {o.null}` on `{where}`" if o.null is not None else f"drop `null` from `{where}`"
            if after > before:
                tightened(f"{spelt} allows fewer sentinels than `null = {o.null}`", fix)
            else:
                was = "no sentinel" if o.null is None else f"`null = {o.null}`"
                loosened(f"{spelt} allows more sentinels than {was}", fix)
        for flag, stricter in (("trie", True), ("sparse", False)):
            was, now = getattr(o, flag), getattr(n, flag)
            if was == now:
                continue
            spelt = f"`{flag} = {'true' if now else 'false'}`"
            fix = f"keep `{flag} = {'true' if was else 'false'}` on `{where}`"
            if now == stricter:
                tightened(f"{spelt} set", fix)
            else:
                loosened(f"{spelt} set", fix)
        if o.pool != n.pool:
            self.add(
                "CONSTRAINT_CHANGED",
                where,
                f"`pool = {'true' if n.pool else 'false'}` set: the column changes between row-aligned and pooled",
                f"keep `pool = {'true' if o.pool else 'false'}` on `{where}`",
            )

    def never_empty(self, s: str, o: Field, n: Field) -> bool:
        """Whether a list field is a row column of a table that always has rows (a table that
        references point into keeps row 0), in both versions: its default ``[]`` is never written."""
        return all(
            schema.structs[name].table
            and f.type.kind == "list"
            and not f.sparse
            and not f.pool
            and _always_has_rows(schema, name)
            for schema, name, f in ((self.old, s, o), (self.new, self.renamed(s), n))
        )

    def renamed(self, old_type: str) -> str:
        return next((now for now, was in self.renames.items() if was == old_type), old_type)

    def norm(self, t: TypeRef) -> TypeRef:
        """A type of NEW spelt with OLD's type names (renamed types followed back)."""
        if t.item is not None:
            return TypeRef(t.kind, t.name, self.norm(t.item))
        return TypeRef(t.kind, self.renames.get(t.name, t.name)) if t.kind in _NAMED else t

    def enum_codecs(
        self, old_enum: str, new_enum: str, old_value: str, new_value: str, always: tuple[Codec, ...]
    ) -> tuple[Codec, ...]:
        """Codecs that store an enum value: ``always`` (codecs that write every value) when the enum is
        used at all, plus JSON and FlatBuffers unless the value is only ever a field's default (which
        they omit), plus the FlatBuffers column layout unless it is only ever the default of fields
        that have one row (a column whose every row holds the default is left out; one that mixes
        it with other values is written whole)."""
        old_uses, new_uses = _enum_uses(self.old, old_enum), _enum_uses(self.new, new_enum)
        if not old_uses and not new_uses:
            return ()
        stored = _stored(old_uses, old_value) or _stored(new_uses, new_value)
        many = _stored(old_uses, old_value, _many_rows(self.old)) or _stored(new_uses, new_value, _many_rows(self.new))
        out = (*always, "json", "flatbuffers-rows") if stored else always
        return (*out, "flatbuffers-columns") if stored or many else out

    def enum_use_note(self, old_enum: str, new_enum: str, old_value: str, new_value: str) -> str:
        old_uses, new_uses = _enum_uses(self.old, old_enum), _enum_uses(self.new, new_enum)
        if not old_uses and not new_uses:
            return " (no field uses the enum: nothing is stored)"
        if not (_stored(old_uses, old_value) or _stored(new_uses, new_value)):
            return " (it is only ever a default, which JSON and FlatBuffers omit)"
        return ""


_NAMED = ("struct", "enum", "union")
#: The column codecs: fields by path (name), enum values and variants by number.
_COLUMNS: tuple[Codec, ...] = ("columnar", "flatbuffers-columns")


def _omitters(fb: bool) -> tuple[Codec, ...]:
    """Codecs that leave out a field holding its default: JSON, the FlatBuffers column layout (when
    every row holds it, floats and zeros included) and, when ``fb``, FlatBuffers."""
    return ("json", "flatbuffers-rows", "flatbuffers-columns") if fb else ("json", "flatbuffers-columns")


_ALWAYS_ROWS = " (but a row column of a table that references point into is never empty: nothing is omitted)"


def _bits(value: object) -> bytes:
    return struct.pack("<d", float(value))  # type: ignore[arg-type]


def _always_has_rows(schema: Schema, table: str) -> bool:
    """Whether validation makes ``table`` keep row 0: a root table that some ``ref`` points into."""
    referenced = {f.ref for s in schema.structs.values() for f in s.fields if f.ref is not None}
    return any(
        f.type.kind == "struct" and f.type.name == table and not f.optional and name in referenced
        for name, f in schema.ref_targets().items()
    )


def _fb_omits(f: Field) -> bool:
    """Whether the FlatBuffers writer leaves a field out when it holds its default (floats never are)."""
    return not (f.type.kind == "scalar" and f.type.name in ("f32", "f64"))


def _fb_zero_default(f: Field, schema: Schema) -> bool:
    """Whether a scalar default is stored as 0: what FlatBuffers readers assume for a field without one."""
    if f.type.kind == "enum":
        try:
            return schema.enums[f.type.name].value(str(f.default)).value == 0
        except KeyError:
            return False
    return f.type.kind == "scalar" and f.default in (0, False) and not isinstance(f.default, str)


def _enum_uses(schema: Schema, enum: str) -> list[Field]:
    return [
        f
        for s in schema.structs.values()
        for f in s.fields
        if (f.type.kind == "enum" and f.type.name == enum) or (f.type.item is not None and f.type.item.name == enum)
    ]


def _stored(uses: list[Field], value: str, many: frozenset[int] = frozenset()) -> bool:
    """Whether a codec that omits defaults ever writes ``value`` of an enum with these uses (fields
    whose ``id()`` is in ``many`` write it too: see :func:`_many_rows`)."""
    return any(f.type.kind == "list" or not f.has_default or f.default != value or id(f) in many for f in uses)


def _many_rows(schema: Schema) -> frozenset[int]:
    """``id()`` of every field that some path of ``schema`` reaches under a list: a column of more
    than one row, which the FlatBuffers column layout writes whole (defaults included) unless every
    row holds the default. Every other field has one row per document (the root's fields, and
    fields reached through structs, optional values and unions only)."""
    out: set[int] = set()
    seen: set[tuple[str, bool]] = set()

    def walk(struct: str, many: bool) -> None:
        if (struct, many) in seen or struct not in schema.structs:
            return
        seen.add((struct, many))
        for f in schema.structs[struct].fields:
            if many:
                out.add(id(f))
            t, under = f.type, many
            while t.item is not None:
                t, under = t.item, True
            if t.kind == "struct":
                walk(t.name, under)
            elif t.kind == "union" and t.name in schema.unions:
                for v in schema.unions[t.name].variants:
                    walk(v.type, under)

    walk(schema.root, False)
    return frozenset(out)


def _plain_uses(schema: Schema, struct: str) -> list[str]:
    """Fields that hold ``struct`` directly (not through a union)."""
    return [
        f"{s.name}.{f.name}"
        for s in schema.structs.values()
        for f in s.fields
        if (f.type.kind == "struct" and f.type.name == struct)
        or (f.type.item is not None and f.type.item.kind == "struct" and f.type.item.name == struct)
    ]


def _type_renames(old: Schema, new: Schema) -> dict[str, str]:
    """Types of NEW that are types of OLD under another name: NEW name -> OLD name.

    A type is renamed when a member that holds it (a field paired by name, a variant paired by
    name, the root) holds a type whose old name is gone in NEW and whose new name is new, of the
    same kind. Followed to a fixpoint, so types nested in renamed types are found too.
    """
    old_kinds = {**dict.fromkeys(old.structs, "struct"), **dict.fromkeys(old.enums, "enum")}
    old_kinds.update(dict.fromkeys(old.unions, "union"))
    new_kinds = {**dict.fromkeys(new.structs, "struct"), **dict.fromkeys(new.enums, "enum")}
    new_kinds.update(dict.fromkeys(new.unions, "union"))
    renames: dict[str, str] = {}

    def pair(a: str, b: str) -> bool:
        if a == b or a in new_kinds or b in old_kinds or old_kinds.get(a) != new_kinds.get(b):
            return False
        if b in renames or a in renames.values():
            return False
        renames[b] = a
        return True

    def base(t: TypeRef) -> TypeRef:
        return t.item if t.item is not None else t

    changed = pair(old.root, new.root)
    while True:
        for o in old.structs.values():
            n = new.structs.get(o.name) or new.structs.get(next((b for b, a in renames.items() if a == o.name), ""))
            if n is None:
                continue
            by_name = {f.name: f for f in n.fields}
            for f in o.fields:
                g = by_name.get(f.name)
                if g is not None and base(f.type).kind in _NAMED and (f.type.item is None) == (g.type.item is None):
                    changed |= pair(base(f.type).name, base(g.type).name)
        for ou in old.unions.values():
            nu = new.unions.get(ou.name) or new.unions.get(next((b for b, a in renames.items() if a == ou.name), ""))
            if nu is None:
                continue
            by_variant = {v.name: v for v in nu.variants}
            for v in ou.variants:
                w = by_variant.get(v.name)
                if w is not None:
                    changed |= pair(v.type, w.type)
        if not changed:
            return renames
        changed = False


def diff_schemas(old: Schema, new: Schema) -> list[Finding]:
    """Every change from ``old`` to ``new``, in schema order: the schema's own settings, then
    enums, unions and structs (old order, additions after), each member by id."""
    d = _Diff(old, new)
    d.schema(old, new)
    return d.out


def _members(schema: Schema, kind: str, owner: str) -> tuple[set[str], set[int]]:
    """Names and numbers (field ids, enum values, variant ids) of ``owner``'s members."""
    if kind == "field":
        s = schema.structs.get(owner)
        return ({f.name for f in s.fields}, {f.id for f in s.fields}) if s else (set(), set())
    if kind == "enum":
        e = schema.enums.get(owner)
        return ({v.name for v in e.values}, {v.value for v in e.values}) if e else (set(), set())
    u = schema.unions.get(owner)
    return ({v.name for v in u.variants}, {v.id for v in u.variants}) if u else (set(), set())


#: finding -> (member kind, how the member is matched across the gap, the reuse rule).
_REUSES = {
    "FIELD_RENAMED": ("field", "number", "FIELD_ID_REUSED"),
    "FIELD_TYPE_CHANGED": ("field", "name", "FIELD_NAME_REUSED"),
    "FIELD_TYPE_PROMOTED": ("field", "name", "FIELD_NAME_REUSED"),
    "ENUM_VALUE_RENAMED": ("enum", "number", "ENUM_VALUE_NUMBER_REUSED"),
    "ENUM_VALUE_RENUMBERED": ("enum", "name", "ENUM_VALUE_NAME_REUSED"),
    "UNION_VARIANT_RENAMED": ("union", "number", "UNION_VARIANT_ID_REUSED"),
    "UNION_VARIANT_ID_CHANGED": ("union", "name", "UNION_VARIANT_ID_REUSED"),
    "UNION_VARIANT_TYPE_CHANGED": ("union", "name", "UNION_VARIANT_ID_REUSED"),
}


def retired_reuse(findings: list[Finding], old: Schema, previous: Schema, new: Schema) -> list[Finding]:
    """``findings`` of ``old`` -> ``new`` with every reuse across a release that retired it made a reuse.

    A change between ``old`` and ``new`` at a member that ``previous`` (a release in between) does
    not have is no rename or retyping that readers could follow: the member was retired and its
    number or name given to something else. Such a finding becomes the forbidden reuse rule.
    """
    out = []
    for f in findings:
        reuse = _REUSES.get(f.rule)
        owner, _, member = f.where.partition(".")
        if reuse is None or not member:
            out.append(f)
            continue
        kind, key, rule = reuse
        names, numbers = _members(previous, kind, owner)
        if key == "name":
            gone = member not in names
        else:
            number = _member_number(new, kind, owner, member)
            gone = number is not None and number not in numbers
        if not gone:
            out.append(f)
            continue
        out.append(
            Finding(
                rule,
                f.where,
                f"{f.detail}; {previous.version} has no such {'name' if key == 'name' else 'number'}: "
                f"it was retired, and {new.version} gives it to something else",
                f"give `{f.where}` a {'name' if key == 'name' else 'number'} no release has used "
                "(`check --all` reads every release: none may have used it)",
                _reuse_codecs(kind, owner, member, old, new, key=key),
            )
        )
    # A reused member is another member: what else changed at it is part of the reuse.
    reused = {f.where for f in out if f.rule in _REUSE_RULES}
    return [f for f in out if f.rule in _REUSE_RULES or f.where not in reused]


_REUSE_RULES = {rule for _, _, rule in _REUSES.values()} | {"FIELD_ID_REUSED"}


def _reuse_codecs(
    kind: str, owner: str, member: str, old: Schema, new: Schema, *, key: str
) -> tuple[Codec, ...] | None:
    """Which codecs a field reuse breaks: positional ones when the id is the same, those that key by
    name when the name is, and any codec when a required field is missing from one side's files."""
    if kind != "field" or owner not in old.structs or owner not in new.structs:
        return None
    n = new.structs[owner].field(member)
    o = next((f for f in old.structs[owner].fields if (f.name == member if key == "name" else f.id == n.id)), None)
    if o is None:
        return None
    codecs: set[Codec] = set()
    if o.id == n.id:
        codecs |= {"msgpack", "flatbuffers-rows"}
    if o.name == n.name or o.required or n.required:
        codecs.add("json")
        # The column codecs key a field's values by path, and the paths follow the type's shape
        # (`P` for a value, `P#len`/`P[]` for a list, `P.f` for a struct, `P#tag`/`P<id>` for a
        # union): under another shape the old columns are not the new field's, which reads its
        # default from old files (and older readers theirs from new files).
        if _shape(o.type) == _shape(n.type) or o.required or n.required:
            codecs |= set(_COLUMNS)
    if o.required or n.required:
        codecs |= {"msgpack", "flatbuffers-rows"}
    return tuple(c for c in CODECS if c in codecs)


def _shape(t: TypeRef) -> str:
    """The shape of a field's column paths in the column codecs: a list, a struct, a union or a value."""
    return t.kind if t.kind in ("list", "struct", "union") else "value"


def _member_number(schema: Schema, kind: str, owner: str, member: str) -> int | None:
    if kind == "field" and owner in schema.structs:
        return next((f.id for f in schema.structs[owner].fields if f.name == member), None)
    if kind == "enum" and owner in schema.enums:
        return next((v.value for v in schema.enums[owner].values if v.name == member), None)
    if kind == "union" and owner in schema.unions:
        return next((v.id for v in schema.unions[owner].variants if v.name == member), None)
    return None
