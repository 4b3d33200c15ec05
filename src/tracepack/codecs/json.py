"""The JSON codec: keyed, readable and diffable (enums by name, defaults omitted).

Reading follows spec/03-json.md: msgspec decodes and checks the typed document; the whole text must
then also be UTF-8 (ignored members included) and no object may repeat a name (spec §3.2, §3.3),
which one pass of the standard library's parser checks.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import msgspec

from tracepack.codecs._errors import decode_error
from tracepack.codecs._utf8 import bad_utf8_reason
from tracepack.errors import DecodeError
from tracepack.versions import generated

__all__ = ["decode", "encode"]

_encoder = msgspec.json.Encoder()


@cache
def _decoder(version: tuple[int, int]) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(generated(version).json_model.Document)


def encode(raw: Any, version: tuple[int, int]) -> bytes:
    """Encode a document of the generated model of ``version`` as JSON (one line, UTF-8)."""
    return _encoder.encode(generated(version).convert.to_json(raw))


class _Duplicate(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _unique(pairs: list[tuple[str, Any]]) -> None:
    """An object's members, refused when a name occurs twice (the value itself is not needed)."""
    if len(pairs) > 1 and len({k for k, _ in pairs}) != len(pairs):
        seen: set[str] = set()
        raise _Duplicate(next(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]


def check_text(data: bytes | memoryview, *, source: str | None = None) -> None:
    """Refuse JSON text that is not UTF-8 throughout or whose objects repeat a name (spec §3.2, §3.3).

    Run after msgspec accepted the text, so it is valid JSON: only what msgspec does not look at (the
    bytes of ignored members, repeated names, which it takes as the last one) is left to find."""
    try:
        text = str(data, "utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(
            f"not valid UTF-8 at byte {exc.start} ({exc.reason})", source=source, where="payload"
        ) from None
    try:
        json.loads(text, object_pairs_hook=_unique)
    except _Duplicate as exc:
        raise DecodeError(
            f"an object has the name {exc.name!r} twice", source=source, where="payload", expected="each name once"
        ) from None


def decode(data: bytes | memoryview, version: tuple[int, int], *, source: str | None = None) -> Any:
    """Decode JSON into the generated model of ``version``."""
    gen = generated(version)
    try:
        keyed = _decoder(version).decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
        reason = bad_utf8_reason(exc, data, _decoder(version).decode, json=True)
        if reason is not None:
            raise DecodeError(f"a string is not valid UTF-8 ({reason})", source=source, where="payload") from None
        raise decode_error(exc, source=source, root=gen.json_model.Document, codec="JSON") from None
    check_text(data, source=source)
    try:
        return gen.convert.from_json(keyed)
    except ValueError as exc:  # a u64 above its range (JSON integers have no size)
        raise DecodeError(str(exc), source=source, where="payload", expected="integers in 0..2**64-1") from None
