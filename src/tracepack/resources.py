"""Where the schema files this tracepack was built from are: inside the package when installed.

A wheel carries the schema files (``schema/``), their JSON Schema and FlatBuffers schema as data packages of
``tracepack_generated`` (see ``setup.py``); a source checkout has them in ``schema/``, ``generated/jsonschema/``
and ``generated/fbs/``. These functions find either, so ``tracepack schema check --all`` and readers of the
JSON Schema work the same installed and in a checkout.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tracepack.errors import SchemaError

__all__ = ["fbs_dir", "jsonschema_dir", "schema_dir"]

#: data package -> (folder in a source checkout, a file pattern it must hold)
_FOLDERS = {
    "schema": ("schema", "tracepack-*.toml"),
    "jsonschema": ("generated/jsonschema", "tracepack-*.schema.json"),
    "fbs": ("generated/fbs", "tracepack-*.fbs"),
}


def _find(kind: str) -> Path:
    checkout, pattern = _FOLDERS[kind]
    spec = importlib.util.find_spec(f"tracepack_generated.{kind}")
    places = [Path(p) for p in (spec.submodule_search_locations or [])] if spec is not None else []
    generated = importlib.util.find_spec("tracepack_generated")
    if generated is not None and generated.origin:
        # generated/python/tracepack_generated/__init__.py -> the checkout's root
        places.append(Path(generated.origin).resolve().parents[3] / checkout)
    for place in places:
        if any(place.glob(pattern)):
            return place
    raise SchemaError(f"no {pattern} files in this installation", where=f"tracepack_generated.{kind}")


def schema_dir() -> Path:
    """The folder of the schema files (``tracepack-X.Y.toml`` and ``RELEASED.sha256``)."""
    return _find("schema")


def jsonschema_dir() -> Path:
    """The folder of the generated JSON Schema files (``tracepack-X.Y.schema.json``)."""
    return _find("jsonschema")


def fbs_dir() -> Path:
    """The folder of the generated FlatBuffers schema files (``tracepack-X.Y.fbs``)."""
    return _find("fbs")
