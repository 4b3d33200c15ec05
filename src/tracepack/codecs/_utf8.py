"""Which string msgspec found not to be UTF-8, and why (spec §2.2: "a string is not valid UTF-8 (reason)").

msgspec up to 0.22 let invalid UTF-8 inside a string escape as the ``UnicodeDecodeError`` of that
string's bytes, whose ``reason`` ("invalid start byte", "unexpected end of data", ...) the spec's
message carries. msgspec 0.23 raises ``DecodeError("Invalid UTF-8 encoded string")`` instead, without
the bytes or the place. :func:`bad_utf8_reason` gives the same reason for both.

For the second kind it finds the string msgspec stopped at. msgspec validates only the strings it
decodes (a skipped member's are never looked at), so the first invalid string of the payload is not
always the one: each invalid string is tried alone (the others replaced by ASCII of the same length,
which leaves every other byte where it was) and the first one msgspec still refuses is it. The
strings before it that were skipped do not change what msgspec does; the ones after it are never
reached. Each try is a decode, and there are at most :data:`_TRIES` (a hostile payload with more
invalid strings gets the first one's reason).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import msgspec

from tracepack.io.guard import _MP_CONTAINERS, _MP_FIXED, _MP_SIZED

__all__ = ["bad_utf8_reason"]

#: Decodes tried to find the string msgspec stopped at.
_TRIES = 8
#: A JSON string token, quotes included (escapes skipped as pairs).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_ESCAPE = re.compile(rb'\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_SIMPLE = {b'"': b'"', b"\\": b"\\", b"/": b"/", b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r", b"t": b"\t"}
_NON_ASCII = bytes(0x78 if b >= 0x80 else b for b in range(256))  # every byte >= 0x80 -> "x"


def bad_utf8_reason(
    exc: BaseException, data: bytes | bytearray | memoryview, decode: Callable[[bytes], object], *, json: bool
) -> str | None:
    """The reason a string of ``data`` is not UTF-8 when ``exc`` (raised by ``decode(data)``) says one
    is not, else None. ``json`` says whether ``data`` is JSON text (else MessagePack)."""
    if isinstance(exc, UnicodeDecodeError):  # msgspec <= 0.22
        return exc.reason
    if not (isinstance(exc, msgspec.DecodeError) and str(exc).startswith("Invalid UTF-8")):
        return None
    view = bytes(data)
    # Escapes are ASCII, so a JSON string's raw bytes are UTF-8 exactly when its contents are.
    spans = [(a, b) for a, b in (_json_strings(view) if json else _msgpack_strings(view)) if _reason(view[a:b])]
    if not spans:  # not where this reading of the bytes looked: the first invalid byte's
        return _reason(view) or "invalid UTF-8"
    clean = bytearray(view)  # every invalid string replaced; each try puts one back
    for start, end in spans:
        clean[start:end] = view[start:end].translate(_NON_ASCII) if json else b"x" * (end - start)
    culprit = spans[0]
    for start, end in spans[:_TRIES]:
        trial = bytearray(clean)
        trial[start:end] = view[start:end]
        try:
            decode(bytes(trial))
        except (msgspec.DecodeError, UnicodeDecodeError) as again:
            if isinstance(again, UnicodeDecodeError) or str(again).startswith("Invalid UTF-8"):
                culprit = (start, end)
                break
        except Exception:  # any other answer: msgspec did not stop at this string
            continue
    start, end = culprit
    return _reason(_unescape(view[start:end]) if json else view[start:end]) or "invalid UTF-8"


def _reason(raw: bytes) -> str | None:
    try:
        str(raw, "utf-8")
    except UnicodeDecodeError as exc:
        return exc.reason
    return None


def _unescape(raw: bytes) -> bytes:
    """A JSON string's contents with its escapes replaced, as msgspec hands them to the UTF-8 check."""

    def one(m: re.Match[bytes]) -> bytes:
        if m.group(2) is not None:
            return _SIMPLE[m.group(2)]
        return chr(int(m.group(1), 16)).encode("utf-8", "surrogatepass")

    return _ESCAPE.sub(one, raw)


def _json_strings(view: bytes) -> Iterator[tuple[int, int]]:
    """The contents (quotes left out) of each string token of JSON text, in order."""
    for m in _JSON_STRING.finditer(view):
        yield m.start() + 1, m.end() - 1


def _msgpack_strings(view: bytes) -> Iterator[tuple[int, int]]:
    """The bytes of each ``str`` of a MessagePack value (map keys included), in order, as far as the
    value is well formed."""
    end = len(view)
    pos = 0
    pending = 1  # values still to read: containers add their items
    while pending and pos < end:
        pending -= 1
        lead = view[pos]
        if lead <= 0x7F or lead >= 0xE0:
            pos += 1
        elif lead <= 0x8F:
            pending += 2 * (lead & 0x0F)
            pos += 1
        elif lead <= 0x9F:
            pending += lead & 0x0F
            pos += 1
        elif lead <= 0xBF:
            size = lead & 0x1F
            yield pos + 1, min(end, pos + 1 + size)
            pos += 1 + size
        elif lead in _MP_FIXED:
            pos += 1 + _MP_FIXED[lead]
        elif lead in _MP_SIZED:
            width, extra = _MP_SIZED[lead]
            size = int.from_bytes(view[pos + 1 : pos + 1 + width], "big")
            body = pos + 1 + width + extra
            if 0xD9 <= lead <= 0xDB:
                yield body, min(end, body + size)
            pos = body + size
        elif lead in _MP_CONTAINERS:
            width, per = _MP_CONTAINERS[lead]
            pending += per * int.from_bytes(view[pos + 1 : pos + 1 + width], "big")
            pos += 1 + width
        else:
            return  # 0xC1 is never used
