"""Tensor values (``TensorMeta``) in the forms every torch release wrote, typed both ways.

A value is stored typed (dtype, sizes, strides, device, requires_grad, storage offset,
layout; a symbolic size as its expression string) whatever release wrote it; its JSON comes
back byte for byte from the typed fields plus the program's :class:`ValueForm`, which says
how that release spelled them:

===========  ==================================================================================
torch        form
===========  ==================================================================================
2.1          ``{"meta": {...}}``; every union written with all its members (``null`` but one);
             ``SymExpr.hint`` an int; ``storage_offset`` an int
2.2          no ``meta`` wrapper; all-member unions; ``hint`` an all-member ``SymExprHint``
2.3-2.6      one-member unions; ``hint`` ``{"as_int": n}``; a device without an index has no
             ``index`` key; ``storage_offset`` a ``SymInt``
2.7+         the device's ``index`` is always written (``null`` when none)
===========  ==================================================================================

Symbolic sizes carry the hint torch recorded (``s0`` with hint 3): hints are kept per
expression for the whole program (:attr:`ValueForm.hints`); a value whose hints disagree with
that table is kept as JSON instead, so nothing is ever rebuilt differently.

Most hints follow from others: ``Mul(Integer(16), Symbol('s27', ...))`` has 16 times the hint of
``Symbol('s27', ...)``. :func:`derivable_hints` drops every ``{"as_int": n}`` hint that
:func:`derive_hint` computes back exactly from the hints left (sympy's ``srepr`` spelling of
``Integer``, ``Add``, ``Mul``, ``Pow``, ``FloorDiv`` and ``Mod``, evaluated on the integers, no
sympy needed); such a table is marked :attr:`ValueForm.derived` (by its container: the torch.export
importer names the extension that holds it differently), and a hint missing from it is derived
when the value is spelled back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "DTYPES",
    "LAYOUTS",
    "ValueForm",
    "decode_value",
    "derivable_hints",
    "derive_hint",
    "detect_form",
    "encode_value",
    "known_hints",
]

# torch's ScalarType codes (torch/_export/serde/schema.py) <-> names stored in Value.dtype.
DTYPES = {
    0: "UNKNOWN", 1: "BYTE", 2: "CHAR", 3: "SHORT", 4: "INT", 5: "LONG", 6: "HALF", 7: "FLOAT", 8: "DOUBLE",
    9: "COMPLEXHALF", 10: "COMPLEXFLOAT", 11: "COMPLEXDOUBLE", 12: "BOOL", 13: "BFLOAT16", 28: "UINT16",
    29: "FLOAT8E4M3FN", 30: "FLOAT8E5M2", 31: "FLOAT8E4M3FNUZ", 32: "FLOAT8E5M2FNUZ",
}  # fmt: skip
DTYPE_CODES = {v: k for k, v in DTYPES.items()}
# torch's Layout codes <-> names stored in Value.layout (Strided, the default, is stored as "").
LAYOUTS = {0: "Unknown", 1: "SparseCoo", 2: "SparseCsr", 3: "SparseCsc", 4: "SparseBsr", 5: "SparseBsc", 6: "_mkldnn"}
LAYOUT_CODES = {v: k for k, v in LAYOUTS.items()}
STRIDED = 7
TENSOR_KEYS = ["dtype", "sizes", "requires_grad", "device", "strides", "storage_offset", "layout"]


@dataclass(frozen=True, slots=True)
class ValueForm:
    """How one program spells its tensor values (see the module docstring)."""

    wrapped: bool = False
    #: ``None``: one-member unions; else the member order of an all-member ``SymInt``.
    sym_members: tuple[str, ...] | None = None
    #: ``None``: ``{"as_int": n}`` (or no hint); ``()``: a bare int; else all-member ``SymExprHint`` order.
    hint_members: tuple[str, ...] | None = None
    device_index: bool = True
    offset_int: bool = False
    hints: dict[str, Any] = field(default_factory=dict)
    #: Whether :attr:`hints` leaves out the hints :func:`derive_hint` computes (see the module docstring).
    derived: bool = False

    def hint(self, expr: str) -> Any:
        """The hint of ``expr``: stored, else derived when :attr:`derived` (None: no hint); a
        :attr:`derived` form's reader puts the hints it knows otherwise under the stored ones
        (:func:`known_hints`)."""
        if expr in self.hints or not self.derived:
            return self.hints.get(expr)
        value = derive_hint(expr, self.hints)
        hint = None if value is None else {"as_int": value}
        self.hints[expr] = hint  # remembered: the next value with this expression looks it up
        return hint

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.wrapped:
            out["wrapped"] = True
        if self.sym_members is not None:
            out["sym_members"] = list(self.sym_members)
        if self.hint_members is not None:
            out["hint_members"] = list(self.hint_members)
        if not self.device_index:
            out["device_index"] = False
        if self.offset_int:
            out["offset_int"] = True
        if self.hints:
            out["hints"] = self.hints
        return out

    @classmethod
    def from_json(cls, value: Any) -> ValueForm:
        if type(value) is not dict:
            return cls()
        sym = value.get("sym_members")
        hint = value.get("hint_members")
        return cls(
            wrapped=bool(value.get("wrapped", False)),
            sym_members=None if sym is None else tuple(sym),
            hint_members=None if hint is None else tuple(hint),
            device_index=bool(value.get("device_index", True)),
            offset_int=bool(value.get("offset_int", False)),
            hints=dict(value.get("hints") or {}),
        )


#: The forms tried, in order, on a program's first value.
_CANDIDATES = [
    ValueForm(),
    ValueForm(device_index=False),
    ValueForm(sym_members=("as_expr", "as_int"), hint_members=("as_int", "as_float", "as_bool"), offset_int=True),
    ValueForm(wrapped=True, sym_members=("as_expr", "as_int"), hint_members=(), offset_int=True),
]


def detect_form(values: dict[str, Any]) -> ValueForm:
    """The form of a program's ``tensor_values``: the candidate that rebuilds the most of them
    (the first value decides ties); the hints are collected from every value."""
    items = list(values.values())
    best, best_count = ValueForm(), -1
    for form in _CANDIDATES:
        count = sum(1 for meta in items[:64] if _roundtrips(meta, form))
        if count > best_count:
            best, best_count = form, count
    hints: dict[str, Any] = {}
    for meta in items:
        decoded = decode_value(meta, best)
        if decoded is not None:
            for expr, hint in decoded[1].items():
                hints.setdefault(expr, hint)
    return replace(best, hints=hints)


def _roundtrips(meta: Any, form: ValueForm) -> bool:
    decoded = decode_value(meta, form)
    return decoded is not None and encode_value(decoded[0], replace(form, hints=decoded[1])) == meta


# -- decode ---------------------------------------------------------------------------------------------


def _member(value: Any, members: tuple[str, ...] | None) -> tuple[str, Any] | None:
    """The (key, value) a union sets, in ``form``'s spelling; None if not that spelling."""
    if type(value) is not dict:
        return None
    if members is None:
        if len(value) != 1:
            return None
        ((k, v),) = value.items()
        return k, v
    if tuple(value) != members:
        return None
    chosen = [(k, v) for k, v in value.items() if v is not None]
    return chosen[0] if len(chosen) == 1 else None


def _hint_of(hint: Any, form: ValueForm) -> tuple[bool, Any]:
    """``(ok, hint)``: the hint as a plain value (``None``: no hint)."""
    if hint is None:
        return True, None
    if form.hint_members == ():
        return (type(hint) is int), hint
    got = _member(hint, form.hint_members)
    if got is None or got[0] not in ("as_int", "as_float", "as_bool"):
        return False, None
    return True, {got[0]: got[1]}


def _sym(value: Any, form: ValueForm, hints: dict[str, Any]) -> int | str | None:
    got = _member(value, form.sym_members)
    if got is None:
        return None
    kind, v = got
    if kind == "as_int" and type(v) is int:
        return int(v)
    if kind == "as_expr" and type(v) is dict and list(v) == ["expr_str", "hint"] and type(v["expr_str"]) is str:
        if not v["expr_str"]:
            return None  # "" interns as string 0, which reads back as "no expression": kept verbatim instead
        ok, hint = _hint_of(v["hint"], form)
        if not ok or hints.setdefault(v["expr_str"], hint) != hint:
            return None
        return str(v["expr_str"])
    return None


def _device(d: Any, form: ValueForm) -> str | None:
    if type(d) is not dict or type(d.get("type")) is not str or ":" in d["type"]:
        return None
    if list(d) == ["type", "index"]:
        if d["index"] is None and form.device_index:
            return str(d["type"])
        if type(d["index"]) is int:
            return f"{d['type']}:{d['index']}"
    if list(d) == ["type"] and not form.device_index:
        return str(d["type"])
    return None


def decode_value(meta: Any, form: ValueForm) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(typed fields for DocumentBuilder.add_value, hints)`` or None when ``meta`` is not in ``form``."""
    if form.wrapped:
        if type(meta) is not dict or list(meta) != ["meta"]:
            return None
        meta = meta["meta"]
    if type(meta) is not dict or list(meta) != TENSOR_KEYS:
        return None
    if type(meta["sizes"]) is not list or type(meta["strides"]) is not list:
        return None
    hints: dict[str, Any] = {}
    sizes = [_sym(x, form, hints) for x in meta["sizes"]]
    strides = [_sym(x, form, hints) for x in meta["strides"]]
    offset = meta["storage_offset"] if form.offset_int else _sym(meta["storage_offset"], form, hints)
    device = _device(meta["device"], form)
    layout = meta["layout"]
    ok = (
        None not in sizes
        and None not in strides
        and device is not None
        and (type(offset) is int or (type(offset) is str and not form.offset_int))
        and type(meta["dtype"]) is int
        and meta["dtype"] in DTYPES
        and type(layout) is int
        and (layout == STRIDED or layout in LAYOUTS)
        and type(meta["requires_grad"]) is bool
    )
    if not ok:
        return None
    typed = {
        "dtype": DTYPES[meta["dtype"]],
        "shape": sizes,
        "strides": strides,
        "device": device,
        "requires_grad": meta["requires_grad"],
        "storage_offset": offset,
        "layout": LAYOUTS.get(layout, ""),
    }
    return typed, hints


# -- encode ---------------------------------------------------------------------------------------------


def _sym_json(v: int | str, form: ValueForm) -> Any:
    if isinstance(v, int):
        member: tuple[str, Any] = ("as_int", v)
    else:
        member = ("as_expr", {"expr_str": v, "hint": _hint_json(form.hint(v), form)})
    if form.sym_members is None:
        return {member[0]: member[1]}
    return {k: member[1] if k == member[0] else None for k in form.sym_members}


def _hint_json(hint: Any, form: ValueForm) -> Any:
    if hint is None or form.hint_members == ():
        return hint
    ((kind, value),) = hint.items()
    if form.hint_members is None:
        return {kind: value}
    return {k: value if k == kind else None for k in form.hint_members}


def encode_value(typed: dict[str, Any], form: ValueForm) -> Any:
    """The JSON of a typed value in ``form`` (inverse of :func:`decode_value`)."""
    kind, _, index = typed["device"].partition(":")
    device: dict[str, Any] = {"type": kind, "index": int(index) if index else None}
    if not form.device_index and not index:
        device = {"type": kind}
    offset = typed["storage_offset"]
    meta = {
        "dtype": DTYPE_CODES[typed["dtype"]],
        "sizes": [_sym_json(x, form) for x in typed["shape"]],
        "requires_grad": typed["requires_grad"],
        "device": device,
        "strides": [_sym_json(x, form) for x in typed["strides"]],
        "storage_offset": offset if form.offset_int else _sym_json(offset, form),
        "layout": LAYOUT_CODES[typed["layout"]] if typed["layout"] else STRIDED,
    }
    return {"meta": meta} if form.wrapped else meta


# -- derived hints --------------------------------------------------------------------------------------

_TOKEN = re.compile(r"(Integer|Symbol|Add|Mul|Pow|FloorDiv|Mod)\(")
_INTEGER = re.compile(r"Integer\((-?[0-9]{1,18})\)")
_SYMBOL = re.compile(r"Symbol\('[A-Za-z_][A-Za-z0-9_]*'(, [a-z_]+=(True|False))*\)")
_MAX_DEPTH = 32
_MAX_INT = 1 << 62


class _NotDerivable(Exception):
    pass


def _int_hint(hint: Any) -> int | None:
    if type(hint) is dict and len(hint) == 1 and type(hint.get("as_int")) is int:
        return int(hint["as_int"])
    return None


def _eval(text: str, at: int, hints: dict[str, Any], depth: int) -> tuple[int, int]:
    """``(value, end)`` of the srepr expression starting at ``at``; a stored hint wins over evaluation."""
    if depth > _MAX_DEPTH:
        raise _NotDerivable
    integer = _INTEGER.match(text, at)
    if integer is not None:
        return int(integer.group(1)), integer.end()
    symbol = _SYMBOL.match(text, at)
    if symbol is not None:
        value = _int_hint(hints.get(symbol.group()))
        if value is None:
            raise _NotDerivable
        return value, symbol.end()
    head = _TOKEN.match(text, at)
    if head is None or head.group(1) in ("Integer", "Symbol"):
        raise _NotDerivable
    args: list[int] = []
    pos = head.end()
    while True:
        value, pos = _eval(text, pos, hints, depth + 1)
        args.append(value)
        if text.startswith(", ", pos):
            pos += 2
            continue
        if text.startswith(")", pos):
            pos += 1
            break
        raise _NotDerivable
    stored = _int_hint(hints.get(text[at:pos]))
    if stored is not None:
        return stored, pos
    return _apply(head.group(1), args), pos


def _apply(op: str, args: list[int]) -> int:
    if op == "Add" and len(args) >= 2:
        result = sum(args)
    elif op == "Mul" and len(args) >= 2:
        result = 1
        for a in args:
            result *= a
            if abs(result) > _MAX_INT:
                raise _NotDerivable
    elif op == "Pow" and len(args) == 2 and 0 <= args[1] <= 64 and abs(args[0]) <= _MAX_INT:
        result = 1
        for _ in range(args[1]):
            result *= args[0]
            if abs(result) > _MAX_INT:
                raise _NotDerivable
    elif op in ("FloorDiv", "Mod") and len(args) == 2 and args[1] > 0:
        result = args[0] // args[1] if op == "FloorDiv" else args[0] % args[1]
    else:
        raise _NotDerivable
    if abs(result) > _MAX_INT:
        raise _NotDerivable
    return result


def derive_hint(expr: str, hints: dict[str, Any]) -> int | None:
    """The integer hint of a sympy ``srepr`` expression computed from ``hints`` (each symbol's, or
    any sub-expression's stored one); None when it cannot be computed."""
    try:
        value, end = _eval(expr, 0, hints, 0)
    except _NotDerivable:
        return None
    return value if end == len(expr) else None


def derivable_hints(hints: dict[str, Any], known: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """``hints`` without the ones :func:`derive_hint` gives back exactly from what is left (in the same
    order) over ``known`` (hints the reader has anyway, e.g. the program's ``sym_int_values``: a hint
    equal to its ``known`` one is left out too), or None when none can be left out."""
    base = known or {}
    kept = dict(hints)
    for expr, hint in hints.items():
        value = _int_hint(hint)
        if value is None:
            continue
        del kept[expr]
        if _read_back(expr, {**base, **kept}) != value:
            kept[expr] = hint
    if len(kept) == len(hints):
        return None
    kept = {k: v for k, v in hints.items() if k in kept}
    every = {**base, **kept}
    if any(k not in kept and _read_back(k, every) != _int_hint(v) for k, v in hints.items()):
        return None
    return kept


def _read_back(expr: str, table: dict[str, Any]) -> int | None:
    """The hint a reader gets for ``expr`` (as :meth:`ValueForm.hint`): the table's, else derived."""
    return _int_hint(table[expr]) if expr in table else derive_hint(expr, table)


def known_hints(sym_int_values: Any) -> dict[str, Any]:
    """The ``{"as_int": n}`` hint of each expression a program's ``sym_int_values`` spells
    (``{"as_expr": {"expr_str": e, "hint": {"as_int": n}}}``); anything else is skipped."""
    out: dict[str, Any] = {}
    if type(sym_int_values) is not dict:
        return out
    for v in sym_int_values.values():
        expr = v.get("as_expr") if type(v) is dict and len(v) == 1 else None
        if type(expr) is not dict or type(expr.get("expr_str")) is not str:
            continue
        value = _int_hint(expr.get("hint"))
        if value is not None:
            out.setdefault(expr["expr_str"], {"as_int": value})
    return out
