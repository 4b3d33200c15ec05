"""``max_depth`` is exact for every parser, lowered or not (issue 12): JSON, MessagePack and
TOML input nested deeper than the budget is refused, and input as deep as the budget is read.
The depth is checked against a reference computed here from what a plain parser returns."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
import tomllib
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tests.hostile.depth_strategies import nested_values, toml_text
from tracepack.codegen.model import load_schema_text
from tracepack.errors import DecodeError, SchemaError
from tracepack.io import guard, limits

ROOT = Path(__file__).resolve().parents[2]


def reference_depth(value: object) -> int:
    """Levels of arrays/maps (a scalar 0, ``[]`` 1), by plain recursion over the parsed value."""
    if isinstance(value, dict):
        return 1 + max((reference_depth(v) for v in value.values()), default=0)
    if isinstance(value, (list, tuple)):
        return 1 + max((reference_depth(v) for v in value), default=0)
    return 0


def _refused(parse: object) -> bool:
    try:
        parse()  # type: ignore[operator]
    except (DecodeError, SchemaError) as exc:
        if "max_depth" in str(exc):
            return True
    return False


@given(value=nested_values(), spread=st.integers(-3, 3))
def test_msgpack_depth_refusal_matches_the_reference(value: object, spread: int) -> None:
    data = msgspec.msgpack.encode(value)
    depth = reference_depth(value)
    assert guard.scan_msgpack(data) == (depth, None)
    budget = max(1, depth + spread)
    with limits.raised(max_depth=budget):
        refused = _refused(lambda: guard.run(lambda: msgspec.msgpack.decode(data), "v.bin", DecodeError, msgpack=data))
    assert refused == (depth > budget)
    if refused:
        _, at = guard.scan_msgpack(data, limit=budget)
        assert at is not None
        assert data[at] in range(0x80, 0xA0) or data[at] in (0xDC, 0xDD, 0xDE, 0xDF)  # an array or map starts there


@given(value=nested_values(), spread=st.integers(-3, 3))
def test_json_depth_refusal_matches_the_reference(value: object, spread: int) -> None:
    text = json.dumps(value)
    depth = reference_depth(json.loads(text))
    budget = max(1, depth + spread)
    with limits.raised(max_depth=budget):
        refused = _refused(lambda: guard.parse_json(lambda: json.loads(text), text, "v.json", DecodeError))
    assert refused == (depth > budget)


@given(doc=toml_text(), spread=st.integers(-3, 3))
def test_toml_depth_refusal_matches_the_reference(doc: tuple[str, object], spread: int) -> None:
    text, table = doc
    assert tomllib.loads(text) == table
    depth = reference_depth(table)  # the document's own table is a level
    budget = max(1, depth + spread)
    with limits.raised(max_depth=budget):
        refused = _refused(lambda: load_schema_text(text, source="s.toml"))
    assert refused == (depth > budget)


def test_scan_msgpack_on_damaged_input_stays_bounded() -> None:
    assert guard.scan_msgpack(b"") == (0, None)
    assert guard.scan_msgpack(b"\x91" * 50) == (50, None)  # truncated: measured as far as it goes
    assert guard.scan_msgpack(b"\x91" * 50, limit=10) == (11, 10)
    assert guard.scan_msgpack(b"\xc1\x91\x91") == (0, None)
    assert guard.scan_msgpack(b"\xdd\xff\xff\xff\xff\x90") == (2, None)


@pytest.mark.parametrize("codec", ["msgpack", "json"])
def test_a_lowered_budget_is_exact_on_a_real_document(codec: str) -> None:
    from tracepack import container
    from tracepack.torch.export.model_json import import_model_json

    model = import_model_json((ROOT / "src/tracepack/data/sample/model.json").read_bytes(), source="model.json")
    data = tracepack.dumps(model, codec=codec, compression="none")
    payload = bytes(container.unpack(data, source="m.tpk")[1])
    plain = msgspec.msgpack.decode(payload) if codec == "msgpack" else json.loads(payload)
    depth = reference_depth(plain)
    assert depth > 3
    with limits.raised(max_depth=depth - 1), pytest.raises(DecodeError, match="max_depth") as err:
        tracepack.loads(data, source="m.tpk")
    assert str(err.value).startswith("m.tpk: ")
    with limits.raised(max_depth=depth):
        assert tracepack.loads(data, source="m.tpk") == model


@given(value=nested_values(), spread=st.integers(-3, 3), protocol=st.integers(0, 4))
def test_pickle_depth_refusal_matches_the_reference(value: object, spread: int, protocol: int) -> None:
    """The data-only pickle reader counts depth as it reads (iteratively): a lowered ``max_depth``
    budget applies to it exactly. Pickles written by the standard library (lists, dicts, scalars)."""
    import pickle

    from tracepack.errors import LegacyFormatError
    from tracepack.torch.torchscript.pickle_reader import read_pickle

    data = pickle.dumps(value, protocol=protocol)
    depth = reference_depth(value)
    budget = max(1, depth + spread)
    with limits.raised(max_depth=budget):
        if depth > budget:
            with pytest.raises(LegacyFormatError, match="max_depth") as err:
                read_pickle(data, source="v.pkl")
            assert str(err.value).startswith("v.pkl: at byte ")
        else:
            assert read_pickle(data, source="v.pkl") == value
