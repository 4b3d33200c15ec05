"""The JSON codec: keyed, readable and diffable (enums by name, defaults omitted)."""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec

from tracepack.codecs._errors import decode_error
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


def decode(data: bytes | memoryview, version: tuple[int, int], *, source: str | None = None) -> Any:
    """Decode JSON into the generated model of ``version``."""
    gen = generated(version)
    try:
        keyed = _decoder(version).decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise decode_error(exc, source=source, root=gen.json_model.Document, codec="JSON") from None
    except UnicodeDecodeError as exc:  # msgspec lets invalid UTF-8 inside strings through as this
        raise DecodeError(f"a string is not valid UTF-8 ({exc.reason})", source=source, where="payload") from None
    try:
        return gen.convert.from_json(keyed)
    except ValueError as exc:  # a u64 above its range (JSON integers have no size)
        raise DecodeError(str(exc), source=source, where="payload", expected="integers in 0..2**64-1") from None
