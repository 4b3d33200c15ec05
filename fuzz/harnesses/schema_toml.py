"""Schema files (TOML): parsed and resolved (:func:`tracepack.codegen.model.load_schema_text`), then
compared with the released 1.0 schema as ``tracepack schema check`` does
(:func:`tracepack.schema_check.verdict.check_pair`)."""

from __future__ import annotations

import re
from functools import cache
from typing import Any, Final

from fuzz.common import ROOT, contract

TARGETS: Final = (
    "tracepack.codegen.parse",
    "tracepack.codegen.model",
    "tracepack.schema_check.diff",
    "tracepack.schema_check.verdict",
    "tracepack.schema_check.rules",
)
DICT: Final = "schema_toml.dict"


@cache
def _released() -> Any:
    from tracepack.codegen.model import load_schema

    return load_schema(ROOT / "schema/tracepack-1.0.toml", display="tracepack-1.0.toml")


def test_one_input(data: bytes) -> None:
    from tracepack.codegen.model import load_schema_text
    from tracepack.schema_check.verdict import check_pair

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return  # load_schema refuses it before parsing (not UTF-8 at byte N)
    schema = contract(lambda: load_schema_text(text, source="new.toml"))
    if schema is not None:
        contract(lambda: check_pair(_released(), schema))


def _short_docs(text: str) -> str:
    text = re.sub(r'(?ms)^doc = """.*?"""\n', 'doc = "d"\n', text)
    text = re.sub(r"(?m)^doc = .*\n", 'doc = "d"\n', text)
    return re.sub(r"(?m)^#.*\n", "", text)


def seeds() -> list[tuple[str, bytes]]:
    out = [(p.name, _short_docs(p.read_text()).encode()) for p in sorted((ROOT / "schema").glob("*.toml"))]
    out.append(("small.toml", (ROOT / "fuzz/crafted/small_schema.toml").read_bytes()))
    return out
