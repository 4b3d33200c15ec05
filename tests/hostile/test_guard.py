"""The JSON pre-scan of tracepack.io.guard: exact depth and integer lengths, nothing global touched."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

import tracepack
from tests.hostile.strategies import json_values
from tracepack.errors import DecodeError, LegacyFormatError
from tracepack.io import guard, limits
from tracepack.torch.export.model_json import export_model_json, import_model_json

MODEL_JSON = Path(__file__).resolve().parents[2] / "src/tracepack/data/sample/model.json"


def _depth(value: Any) -> int:
    todo, deepest = [(value, 1)], 0
    while todo:
        v, d = todo.pop()
        if isinstance(v, (list, dict)):
            deepest = max(deepest, d)
            todo += [(x, d + 1) for x in (v.values() if isinstance(v, dict) else v)]
    return deepest


def _ints(value: Any) -> list[int]:
    todo, out = [value], []
    while todo:
        v = todo.pop()
        if isinstance(v, (list, dict)):
            todo += list(v.values() if isinstance(v, dict) else v)
        elif type(v) is int:
            out.append(len(str(abs(v))))
    return out


@given(json_values())
def test_scan_measures_what_json_parses(value: Any) -> None:
    """json.loads is the reference: the scan's depth and longest integer are the parsed value's."""
    for text in (json.dumps(value), json.dumps(value, indent=1, ensure_ascii=False)):
        shape = guard.scan_json(text)
        assert shape.depth == _depth(value)
        assert shape.longest_int == max(_ints(value), default=0)
        assert guard.scan_json(text.encode("utf-8")) == shape


def test_deep_json_is_refused_before_parsing_with_its_offset() -> None:
    text = b'{"a": [1, ' + b"[" * 1500 + b"]" * 1500 + b"]}"
    with pytest.raises(DecodeError, match="max_depth") as err, guard.reading("d.json", DecodeError, json_text=text):
        pytest.fail("the parse must not run")
    assert str(err.value).startswith(
        "d.json: byte 1008: nested more than 1,000 levels"
    )  # level 1,001: the 999th of the run
    with limits.raised(max_depth=2000), guard.reading("d.json", DecodeError, json_text=text):
        assert _depth(json.loads(text)) == 1502


def test_a_long_integer_is_refused_with_its_offset_and_floats_are_not() -> None:
    text = b'[1.5, "' + b"9" * 5000 + b'", 1e-' + b"9" * 5000 + b", -" + b"7" * 4301 + b"]"
    with (
        pytest.raises(DecodeError, match="max_int_digits") as err,
        guard.reading("n.json", DecodeError, json_text=text),
    ):
        pytest.fail("the parse must not run")
    assert f"byte {text.index(b'-7') + 1}:" in str(err.value)
    assert "an integer of more than 4,300 digits" in str(err.value)
    with limits.raised(max_int_digits=5000), guard.reading("n.json", DecodeError, json_text=text):
        assert json.loads(text)[-1] == -int("7" * 4301)  # the interpreter's limit raised for the parse
    assert sys.get_int_max_str_digits() == 4300


def test_a_real_import_changes_nothing_global(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(sys, "setrecursionlimit", lambda n: calls.append(("recursion", n)))
    monkeypatch.setattr(sys, "set_int_max_str_digits", lambda n: calls.append(("digits", n)))
    doc = import_model_json(MODEL_JSON.read_bytes(), source="model.json")
    for codec in ("json", "msgpack", "columnar", "flatbuffers-rows", "flatbuffers-columns"):
        again = tracepack.loads(tracepack.dumps(doc, codec=codec))
        assert export_model_json(again) == MODEL_JSON.read_bytes()
    assert calls == []


def test_a_raised_limit_is_never_lowered_under_another_parse() -> None:
    """Two threads: one parses msgpack-like input needing a raised limit; another's parse ends
    meanwhile. The first keeps its limit until it ends, then the interpreter's comes back."""
    base = sys.getrecursionlimit()
    inside, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def long_parse() -> None:
        with limits.raised(max_depth=3000), guard.reading("a", DecodeError):
            inside.set()
            release.wait(10)
            seen.append(sys.getrecursionlimit())

    t = threading.Thread(target=long_parse)
    t.start()
    assert inside.wait(10)
    with limits.raised(max_depth=1500), guard.reading("b", DecodeError):
        assert sys.getrecursionlimit() >= 3000
    assert sys.getrecursionlimit() >= 3000  # b ended: a still needs its limit
    release.set()
    t.join()
    assert seen[0] >= 3000
    assert sys.getrecursionlimit() == base


def test_model_json_over_budget_names_the_byte() -> None:
    data = MODEL_JSON.read_bytes().replace(
        b'"graph_module": {', b'"deep": ' + b"[" * 1200 + b"]" * 1200 + b', "graph_module": {', 1
    )
    with pytest.raises(LegacyFormatError, match=r"^deep\.json: byte \d+: nested more than 1,000 levels"):
        import_model_json(data, source="deep.json")
