"""The current schema version's typed model: the one place that names it.

Hand-written code imports the model from here (``from tracepack import model as m``),
so releasing a new schema version changes this file and the migrations only.
Older versions stay importable as ``tracepack_generated.vX_Y``.
"""

from __future__ import annotations

from tracepack_generated.v1_1 import SCHEMA_SHA256, SCHEMA_VERSION, convert, json_model, validate
from tracepack_generated.v1_1.model import *  # noqa: F403 - the model's public names are this module's

__all__ = ["CURRENT_VERSION", "convert", "json_model", "validate"]  # and every name of the model

#: The schema version this build writes.
CURRENT_VERSION: tuple[int, int] = SCHEMA_VERSION
assert SCHEMA_SHA256
