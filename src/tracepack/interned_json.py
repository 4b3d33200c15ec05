"""JSON text with its strings interned: an extension's ``template`` and ``refs`` (schema 1.2).

An extension's data is JSON text. Stored as a *template* -- the same JSON with every string value
(object keys stay) replaced by ``""`` -- plus the string values in document order as rows of the
document's string table, the strings it shares with the rest of the document (value names,
module paths, parameter names) are stored once, and what is left, the template, repeats itself
entry after entry, which compression takes for almost nothing.

The text comes back as Python's ``json.dumps`` writes it (its defaults: ASCII escapes, ``", "``
and ``": "``), so :func:`split` interns only text that ``json.dumps`` of its own parse gives back
exactly; anything else stays plain text. Document order is the order ``json.loads`` builds
objects in (keys in the text's order, a list's items in order, depth first).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from tracepack.errors import DecodeError

__all__ = ["fill", "fill_value", "split"]


def _walk(value: Any, leaf: Callable[[str], str]) -> Any:
    """``value`` with every string value (not object keys) replaced by ``leaf(it)``, in document order.

    Iterative (no recursion limit): containers are rebuilt after their items."""
    if type(value) is str:
        return leaf(value)
    if type(value) is not dict and type(value) is not list:
        return value
    root: list[Any] = [None]
    # Each entry: (container being filled, its items left in reverse order, where it goes).
    stack: list[tuple[Any, list[Any], Any, Any]] = []

    def push(v: Any, parent: Any, key: Any) -> None:
        if type(v) is dict:
            out: Any = {}
            stack.append((out, list(reversed(v.items())), parent, key))
        else:
            out = []
            stack.append((out, [(None, x) for x in reversed(v)], parent, key))
        if type(parent) is dict:
            parent[key] = out
        elif parent is root:
            root[0] = out
        else:
            parent.append(out)

    push(value, root, 0)
    while stack:
        out, items, _parent, _key = stack[-1]
        if not items:
            stack.pop()
            continue
        k, v = items.pop()
        t = type(v)
        if t is dict or t is list:
            push(v, out, k)
            continue
        item = leaf(v) if t is str else v
        if type(out) is dict:
            out[k] = item
        else:
            out.append(item)
    return root[0]


def split(text: str, intern: Callable[[str], int]) -> tuple[str, list[int]] | None:
    """``text`` as a template and the string-table rows of its string values (interned with
    ``intern``), or None when the text is not exactly what ``json.dumps`` writes for it."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    try:
        if json.dumps(value) != text:
            return None
    except (ValueError, RecursionError):
        return None
    refs: list[int] = []

    def leaf(s: str) -> str:
        refs.append(intern(s))
        return ""

    template = json.dumps(_walk(value, leaf))
    return template, refs


def fill_value(template: str, refs: Sequence[int], strings: Sequence[str], *, where: str = "$.extensions") -> Any:
    """The JSON value of a template with its string values filled in from ``refs`` (parsed within the
    budgets of :mod:`tracepack.io.guard`, as all stored JSON is)."""
    from tracepack.io.guard import parse_json

    try:
        value = parse_json(lambda: json.loads(template), template, None, DecodeError, f"{where}.template")
    except json.JSONDecodeError:
        raise DecodeError("the template is not JSON", where=f"{where}.template", expected="JSON text") from None
    it = iter(refs)
    count = 0

    def leaf(_: str) -> str:
        nonlocal count
        count += 1
        try:
            i = next(it)
        except StopIteration:
            raise DecodeError(
                f"the template has more string values than its {len(refs)} refs",
                where=f"{where}.refs",
                expected="one ref per string value of the template",
            ) from None
        if not 0 <= i < len(strings):
            raise DecodeError(
                f"ref {i} is outside the string table ({len(strings)} strings)", where=f"{where}.refs[{count - 1}]"
            )
        return strings[i]

    filled = _walk(value, leaf)
    if count != len(refs):
        raise DecodeError(
            f"the template has {count} string values but {len(refs)} refs",
            where=f"{where}.refs",
            expected="one ref per string value of the template",
        )
    return filled


def fill(template: str, refs: Sequence[int], strings: Sequence[str], *, where: str = "$.extensions") -> str:
    """The JSON text of a template with its string values filled in (``json.dumps``' form)."""
    return json.dumps(fill_value(template, refs, strings, where=where))
