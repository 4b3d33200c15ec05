"""Turn msgspec's errors into tracepack's, with readable places.

msgspec reports places in positional (array-like) data as indices:
``$[10][3][12][0]``. :func:`named_path` walks the generated model's types to
spell the same place with field names: ``$.graph.nodes[12].name``.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec.inspect as mi

from tracepack.errors import DecodeError

__all__ = ["decode_error", "named_path"]

_STEP = re.compile(r"\[(\d+)\]|\.([A-Za-z_][A-Za-z0-9_]*)|\[\.\.\.\]")


def named_path(path: str, root: type) -> str:
    """Rewrite a msgspec path over positional structs with field names."""
    if not path.startswith("$"):
        return path
    t: Any = mi.type_info(root)
    out = ["$"]
    for m in _STEP.finditer(path, 1):
        index, key = m.group(1), m.group(2)
        while isinstance(t, mi.UnionType):
            structs = [x for x in t.types if isinstance(x, mi.StructType)]
            t = structs[0] if len(structs) == 1 else None
        if key is not None:
            out.append(f".{key}")
            t = _field_type(t, key)
        elif index is None:
            out.append("[...]")
            t = None
        elif isinstance(t, mi.StructType) and t.array_like:
            pos = int(index) - (1 if t.tag is not None else 0)
            if 0 <= pos < len(t.fields):
                out.append(f".{t.fields[pos].name}")
                t = t.fields[pos].type
            else:
                out.append(f"[{index}]")
                t = None
        else:
            out.append(f"[{index}]")
            t = getattr(t, "item_type", None)
    return "".join(out)


def _field_type(t: Any, key: str) -> Any:
    if isinstance(t, mi.StructType):
        for f in t.fields:
            if f.encode_name == key:
                return f.type
    return None


def decode_error(exc: Exception, *, source: str | None, root: type, codec: str) -> DecodeError:
    """A DecodeError for a msgspec failure decoding ``root`` with ``codec``."""
    text = str(exc)
    message, sep, path = text.rpartition(" - at ")
    if not sep:
        return DecodeError(f"not valid {codec}: {text}", source=source, where="payload")
    where = named_path(path.strip("`"), root)
    return DecodeError(message, source=source, where=where)
