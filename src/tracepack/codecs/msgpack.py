"""The MessagePack codec: positional structs, the compact general-purpose codec."""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec

from tracepack.codecs._errors import decode_error
from tracepack.codecs._utf8 import bad_utf8_reason
from tracepack.errors import DecodeError
from tracepack.versions import generated

__all__ = ["decode", "encode"]

_encoder = msgspec.msgpack.Encoder()


@cache
def _decoder(version: tuple[int, int]) -> msgspec.msgpack.Decoder[Any]:
    return msgspec.msgpack.Decoder(generated(version).model.Document)


def encode(raw: Any, version: tuple[int, int]) -> bytes:
    """Encode a document of the generated model of ``version``."""
    return _encoder.encode(raw)


def decode(data: bytes | memoryview, version: tuple[int, int], *, source: str | None = None) -> Any:
    """Decode into the generated model of ``version``."""
    try:
        return _decoder(version).decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
        reason = bad_utf8_reason(exc, data, _decoder(version).decode, json=False)
        if reason is not None:
            raise DecodeError(f"a string is not valid UTF-8 ({reason})", source=source, where="payload") from None
        raise decode_error(exc, source=source, root=generated(version).model.Document, codec="MessagePack") from None
