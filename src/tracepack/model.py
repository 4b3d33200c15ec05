"""The current schema version's typed model: the one place that names it.

Hand-written code imports the model from here (``from tracepack import model as m``),
so releasing a new schema version changes this file and the migrations only.
Older versions stay importable as ``tracepack_generated.vX_Y``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracepack_generated.v1_2 import SCHEMA_SHA256, SCHEMA_VERSION
from tracepack_generated.v1_2.model import *  # noqa: F403 - the model's public names are this module's

if TYPE_CHECKING:
    from tracepack_generated.v1_2 import convert, json_model, validate

__all__ = ["CURRENT_VERSION", "convert", "json_model", "validate"]  # and every name of the model

#: The schema version this build writes.
CURRENT_VERSION: tuple[int, int] = SCHEMA_VERSION
assert SCHEMA_SHA256


def __getattr__(name: str) -> Any:
    # PEP 562: the model's companions load on first use (reading one node lazily needs none of them).
    if name in ("convert", "json_model", "validate"):
        import importlib

        return importlib.import_module(f"tracepack_generated.v1_2.{name}")
    raise AttributeError(f"module 'tracepack.model' has no attribute {name!r}")
