"""Invalid UTF-8 inside a string gets spec §2.2's reason whichever msgspec decodes it.

msgspec <= 0.22 raised the string's own ``UnicodeDecodeError``; 0.23 raises ``DecodeError("Invalid
UTF-8 encoded string")`` with neither the bytes nor the place. ``bad_utf8_reason`` must name the same
reason for both: the one CPython's UTF-8 codec gives for the bytes of the first string msgspec
decodes (a skipped member's strings are never looked at). Each case runs with the installed msgspec
and with its answers rewritten as msgspec 0.23 words them.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tracepack.codecs._utf8 import bad_utf8_reason

Decode = Callable[[bytes], object]


class Positional(msgspec.Struct, array_like=True):
    n: int
    names: list[str]


class Keyed(msgspec.Struct):
    names: list[str]


def _reason(raw: bytes) -> str | None:
    try:
        str(raw, "utf-8")
    except UnicodeDecodeError as exc:
        return exc.reason
    return None


def _installed(decode: Decode) -> Decode:
    """``decode`` as the installed msgspec answers."""
    return decode


def _as_0_23(decode: Decode) -> Decode:
    """``decode`` answering invalid UTF-8 as msgspec 0.23 does."""

    def run(data: bytes) -> object:
        try:
            return decode(data)
        except UnicodeDecodeError:
            raise msgspec.DecodeError("Invalid UTF-8 encoded string") from None

    return run


RELEASES = pytest.mark.parametrize("as_release", [_installed, _as_0_23], ids=["installed", "as-0.23"])

# String bytes: printable ASCII (no quote or backslash, so JSON needs no escapes) and any byte >= 0x80.
_BYTE = st.one_of(st.integers(0x20, 0x7E).filter(lambda b: b not in b'"\\'), st.integers(0x80, 0xFF))
_STRINGS = st.lists(st.lists(_BYTE, max_size=6).map(bytes), max_size=5)


def _msgpack(skipped: list[bytes], names: list[bytes]) -> bytes:
    def arr(items: list[bytes]) -> bytes:
        return bytes([0x90 | len(items)]) + b"".join(bytes([0xA0 | len(s)]) + s for s in items)

    return b"\x82" + b"\xa2zz" + arr(skipped) + b"\xa5names" + arr(names)


def _json(skipped: list[bytes], names: list[bytes]) -> bytes:
    def arr(items: list[bytes]) -> bytes:
        return b"[" + b",".join(b'"' + s + b'"' for s in items) + b"]"

    return b'{"zz":' + arr(skipped) + b',"names":' + arr(names) + b"}"


@pytest.mark.parametrize("wire", ["msgpack", "json"])
@RELEASES
@given(skipped=_STRINGS, names=_STRINGS)
@example(skipped=[b"\xff"], names=[b"ok", b"a\xe2\x82"])  # skipped first, then a truncated one
@example(skipped=[], names=[b"\xc3(", b"\xff"])  # two bad ones: the first
def test_the_reason_is_the_first_decoded_strings(
    wire: str, as_release: Callable[[Decode], Decode], skipped: list[bytes], names: list[bytes]
) -> None:
    data = (_msgpack if wire == "msgpack" else _json)(skipped, names)
    module = msgspec.msgpack if wire == "msgpack" else msgspec.json
    decode = as_release(module.Decoder(Keyed).decode)
    expected = next((r for r in map(_reason, names) if r is not None), None)
    if expected is None:
        decode(data)  # the skipped member's strings are never checked
        return
    with pytest.raises((msgspec.DecodeError, UnicodeDecodeError)) as info:
        decode(data)
    assert bad_utf8_reason(info.value, data, decode, json=wire == "json") == expected


@RELEASES
def test_escapes_are_replaced_before_the_reason(as_release: Callable[[Decode], Decode]) -> None:
    # The lead byte's sequence ends at the escaped newline: "invalid continuation byte", not "unexpected end".
    data = b'[1,["a\xe2\\n"]]'
    decode = as_release(msgspec.json.Decoder(Positional).decode)
    with pytest.raises((msgspec.DecodeError, UnicodeDecodeError)) as info:
        decode(data)
    assert bad_utf8_reason(info.value, data, decode, json=True) == "invalid continuation byte"


def test_other_errors_are_not_about_utf8() -> None:
    decode = msgspec.msgpack.Decoder(Positional).decode
    data = b"\x92\xa1x\x90"  # n is a string
    with pytest.raises(msgspec.ValidationError) as info:
        decode(data)
    assert bad_utf8_reason(info.value, data, decode, json=False) is None
