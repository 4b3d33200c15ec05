"""One module per entry point. Each defines:

``TARGETS``
    the modules whose branches the harness exists to reach (coverage is reported for them);
``test_one_input(data)``
    feeds ``data`` to the entry point under the contract (:func:`fuzz.common.contract`): it returns
    when tracepack accepted the input and answered consistently, or refused it with a one-line
    :class:`~tracepack.errors.InputError`; anything else escapes, and is a finding;
``seeds()``
    ``(name, bytes)`` pairs the committed corpus is minimised from;

and may define ``custom_mutator(data, max_size, seed)`` (structure-aware mutation), ``DICT`` (a file
of ``fuzz/dicts/``), ``TORCH = True`` (needs torch: runs in the torch venv) and ``NATIVE = True``
(reaches the C loops: run with the sanitizer-instrumented ``_cforms``) or ``CPP = True`` with ``SOURCE``
(a C++ libFuzzer harness, built and run natively; ``test_one_input`` is then its Python side).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Final

__all__ = ["HARNESSES", "load"]

#: Every harness, in the order ``make fuzz-cov`` runs them.
HARNESSES: Final = (
    "container",
    "codec_json",
    "codec_msgpack",
    "codec_fbrows",
    "codec_columnar",
    "codec_fbcolumns",
    "cforms",
    "lazy_rows",
    "lazy_columns",
    "cpp_reader",
    "model_json",
    "model_json_export",
    "zip",
    "archive",
    "pickle",
    "debug_pkl",
    "etdump",
    "pte",
    "etrecord",
    "runtime_text",
    "schema_toml",
    "upgrade",
    "torch_load",
)


def load(name: str) -> ModuleType:
    if name not in HARNESSES:
        raise SystemExit(f"unknown harness {name!r}; one of: {', '.join(HARNESSES)}")
    return importlib.import_module(f"fuzz.harnesses.{name}")
