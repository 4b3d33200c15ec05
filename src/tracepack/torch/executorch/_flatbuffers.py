"""flatc's generated readers of ExecuTorch's schemas (``tracepack_generated.executorch``), loaded on use.

They need the FlatBuffers runtime (``pip install 'tracepack[executorch]'``); without it, reading a
``.pte`` or ETDump says so in one line. Every read is guarded: flatc's accessors trust the buffer, so
any exception they raise on a damaged file becomes a :class:`~tracepack.errors.DecodeError` naming the
file and what was being read.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from tracepack.errors import NOT_DECODE_ERRORS, DecodeError, InputError

__all__ = ["generated", "guarded"]

T = TypeVar("T")


def generated(name: str) -> ModuleType:
    """``tracepack_generated.executorch.<name>`` (``program`` or ``etdump``)."""
    try:
        importlib.import_module("flatbuffers")
    except ModuleNotFoundError:
        raise InputError(
            "reading ExecuTorch FlatBuffers files needs the FlatBuffers runtime: pip install 'tracepack[executorch]'"
        ) from None
    return importlib.import_module(f"tracepack_generated.executorch.{name}")


def guarded(fn: Callable[[], T], *, source: str, where: str, expected: str) -> T:
    """Run a read through flatc's accessors; a malformed buffer becomes a one-line DecodeError."""
    try:
        return fn()
    except NOT_DECODE_ERRORS:
        raise  # tracepack's own (a SchemaError from the plan, ...), as it said it
    except (IndexError, struct.error, ValueError, TypeError, AttributeError, UnicodeDecodeError, OverflowError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DecodeError(
            f"malformed FlatBuffers data ({text})", source=source, where=where, expected=expected
        ) from None


def as_text(value: Any) -> str:
    """A FlatBuffers string accessor's value (bytes or None) as text."""
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
