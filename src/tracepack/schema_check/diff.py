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
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tracepack.codegen.emit_fbs import fbs_field_ids
from tracepack.codegen.model import INT_RANGES, Enum, Field, Schema, Struct, TypeRef, Union
from tracepack.schema_check.rules import RULES, Bump, Codec

__all__ = ["Finding", "diff_schemas", "is_promotion"]

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

    @property
    def bump(self) -> Bump:
        return RULES[self.rule].bump

    @property
    def breaks(self) -> tuple[Codec, ...]:
        return RULES[self.rule].breaks


def _q(value: object) -> str:
    """A default or name as it is spelt in a schema file."""
    return json.dumps(value, ensure_ascii=False)


def is_promotion(old: TypeRef, new: TypeRef) -> bool:
    """Whether ``new`` holds every value of ``old`` in every codec that writes numbers as numbers.

    Integers widen (``u8`` -> ``u16`` -> ``u32`` -> ``u64``, ``i8`` -> ... -> ``i64``, and an
    unsigned type to any signed type whose range covers it), ``f32`` widens to ``f64``; lists
    promote when their items do. Integers never become floats: an ``i64`` above 2**53 would
    silently lose precision.
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

    def add(self, rule: str, where: str, detail: str, fix: str = "") -> None:
        assert rule in RULES, rule
        self.out.append(Finding(rule, where, detail, fix))

    # -- schema --------------------------------------------------------------------------------

    def schema(self, old: Schema, new: Schema) -> None:
        if old.name != new.name:
            self.add(
                "SCHEMA_NAME_CHANGED",
                "schema.name",
                f"{_q(old.name)} became {_q(new.name)}, the FlatBuffers namespace of every type",
                f"keep `name = {_q(old.name)}`",
            )
        if old.root != new.root:
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
        for name, o in old.items():
            n = new.get(name)
            if n is None:
                self.add(
                    f"{rule}_REMOVED",
                    name,
                    f"{kind} {name} was removed",
                    f"keep {kind} {name} (an unused type costs nothing on the wire)",
                )
            else:
                compare(o, n)
        for name in new:
            if name not in old:
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
                        f"value {v.value} became {n.value}: binary files store the number",
                        f"give `{e}.{v.name}` back value {v.value}",
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
                    f"value {v.value} was named `{v.name}`: JSON files spell the name",
                    f"keep the name `{e}.{v.name}`",
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
                if n.type != v.type:
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
                elif cand.type != v.type:
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
        if old.table != new.table:
            if new.table:
                self.add(
                    "CONSTRAINT_TIGHTENED",
                    s,
                    "became a table (`table = true`): columns of older files may differ in length",
                    f"keep {s} a plain struct",
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
                f"field {o.id} ({o.type}) was removed",
                f"keep `{s}.{o.name}` and mark it `deprecated = true` instead of removing it",
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
        if o.deprecated and not n.deprecated:
            self.add(
                "FIELD_DEPRECATED_REUSED",
                where,
                f"takes id {o.id} of the deprecated `{s}.{o.name}`",
                f"keep the deprecated `{s}.{o.name}` at id {o.id} and {after}",
            )
            return
        if o.type != n.type:
            self.add(
                "FIELD_ID_REUSED",
                where,
                f"takes id {o.id} of `{s}.{o.name}` ({o.type}) with another type, {n.type}",
                f"keep `{s}.{o.name}` at id {o.id} (deprecated if unused) and {after}",
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
        if o.type != n.type:
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
        if o.has_default and n.has_default and not self.same_default(o, n):
            self.add(
                "FIELD_DEFAULT_CHANGED",
                where,
                f"default {_q(o.default)} became {_q(n.default)}: files that omitted it would change meaning",
                f"restore `default = {_q(o.default)}` on `{where}`; for another default, add a new field "
                f"and deprecate `{where}`",
            )
        elif o.has_default and not n.has_default:
            self.add(
                "FIELD_DEFAULT_REMOVED",
                where,
                f"default {_q(o.default)} was removed: files that omitted the field no longer decode",
                f"restore `default = {_q(o.default)}` on `{where}`",
            )
        elif n.has_default and not o.has_default:
            self.add(
                "FIELD_DEFAULT_ADDED",
                where,
                f"got default {_q(n.default)}: writers omit it, older readers require it",
                f"keep `{where}` without a default",
            )
        if o.deprecated != n.deprecated:
            required = o.required or n.required
            if n.deprecated:
                self.add(
                    "REQUIRED_FIELD_DEPRECATED" if required else "FIELD_DEPRECATED",
                    where,
                    "deprecated" + (" while required: FlatBuffers writers stop writing it" if required else ""),
                    f"keep `{where}` in use: it has no default" if required else "",
                )
            else:
                self.add(
                    "REQUIRED_FIELD_UNDEPRECATED" if required else "FIELD_UNDEPRECATED",
                    where,
                    "in use again"
                    + (" while required: FlatBuffers files written meanwhile lack it" if required else ""),
                    f"leave `{where}` deprecated; add a new field with a default" if required else "",
                )
        self.constraints(where, o, n)

    def same_default(self, o: Field, n: Field) -> bool:
        """Whether two defaults mean the same; an enum default follows its value through a rename."""
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


def diff_schemas(old: Schema, new: Schema) -> list[Finding]:
    """Every change from ``old`` to ``new``, in schema order: the schema's own settings, then
    enums, unions and structs (old order, additions after), each member by id."""
    d = _Diff(old, new)
    d.schema(old, new)
    return d.out
