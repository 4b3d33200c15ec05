"""Hostile columnar payloads only ever raise TracepackError subclasses, with the column's path.

Damage comes two ways: bytes (bit flips, truncation) re-wrapped with a correct checksum so it
reaches the decoder, and structure (a column's values of the wrong type, out of range, too many
or too few, unknown encodings, variant ids and enum values, lengths that do not add up).
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from functools import cache
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracepack
from tests.columnar.helpers import pack, payload_of, repack, stored_values
from tests.golden import make_golden as mg
from tests.strategies import documents
from tracepack import container
from tracepack.codecs import columnar
from tracepack.container import HEADER_SIZE
from tracepack.errors import DecodeError, TracepackError
from tracepack.versions import CURRENT

pytestmark = pytest.mark.usefixtures("forms_impl")  # the reader with the C forms loop and with the Python one


@cache
def _golden_payload() -> bytes:
    return columnar.encode(mg.build_document().raw, CURRENT)


def _fix_checksums(blob: bytes | bytearray) -> bytes:
    fixed = bytes(blob[:40]) + struct.pack("<I", zlib.crc32(blob[HEADER_SIZE:])) + bytes(blob[44:])
    return fixed[:44] + struct.pack("<I", zlib.crc32(fixed[:44])) + fixed[48:]


def _read_everything(data: bytes) -> None:
    """``tracepack.loads``, then every node's every answer: only TracepackError, always one line."""
    try:
        back = tracepack.loads(data)
    except TracepackError as exc:
        message = str(exc)
        assert "\n" not in message
        return
    for node in back.nodes():
        try:
            _ = node.stack_trace, node.module_stack, node.meta, node.inputs, node.outputs
        except TracepackError as exc:
            message = str(exc)
            assert "\n" not in message


# -- bytes ---------------------------------------------------------------------------------------------


@given(doc=documents(max_nodes=5), data=st.data())
def test_random_bit_flips_only_raise_tracepack_errors(doc: tracepack.Document, data: st.DataObject) -> None:
    blob = bytearray(tracepack.dumps(doc, codec="columnar", compression="none"))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(HEADER_SIZE, len(blob) - 1))
        blob[pos] ^= 1 << data.draw(st.integers(0, 7))
    _read_everything(_fix_checksums(blob))


@given(data=st.data())
def test_random_damage_to_the_golden_payload(data: st.DataObject) -> None:
    payload = bytearray(_golden_payload())
    kind = data.draw(st.sampled_from(["flip", "truncate", "byte", "splice"]))
    if kind == "flip":
        for _ in range(data.draw(st.integers(1, 8))):
            payload[data.draw(st.integers(0, len(payload) - 1))] ^= 1 << data.draw(st.integers(0, 7))
    elif kind == "truncate":
        payload = payload[: data.draw(st.integers(0, len(payload) - 1))]
    elif kind == "byte":
        payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(
            st.sampled_from([0xC0, 0xC1, 0xC3, 0xDD, 0xDF, 0xFF, 0x7F])
        )
    else:
        at = data.draw(st.integers(0, len(payload)))
        payload[at:at] = data.draw(st.binary(min_size=1, max_size=16))
    _read_everything(container.pack(bytes(payload), schema_version=CURRENT, codec="columnar"))


# -- structure -------------------------------------------------------------------------------------------

_WRONG_VALUES = [
    "x",
    b"\x00",
    1.5,
    None,
    True,
    [1],
    {"a": 1},
    -1,
    -(2**63),
    2**64 - 1,
    2**32,
    99,
    0,
    msgspec.msgpack.Ext(5, b"x"),
]


@st.composite
def damaged_payloads(draw: st.DrawFn, payload: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``payload`` with one column damaged; returns it and the column's path."""
    columns = payload["columns"]
    path = draw(st.sampled_from(sorted(columns)))
    encoding, values = columns[path]
    kind = draw(st.sampled_from(["value", "drop", "add", "encoding", "entry", "delete", "grow", "swap"]))
    if kind == "value" and values:
        values[draw(st.integers(0, len(values) - 1))] = draw(st.sampled_from(_WRONG_VALUES))
    elif kind == "drop" and values:
        del values[draw(st.integers(0, len(values) - 1))]
    elif kind == "add":
        values.insert(draw(st.integers(0, len(values))), draw(st.sampled_from([values[0], *_WRONG_VALUES])))
    elif kind == "encoding":
        columns[path] = [draw(st.sampled_from(["delta", "plain", "zigzag", "", 1, None])), values]
    elif kind == "entry":
        columns[path] = draw(st.sampled_from([values, [encoding], [encoding, values, 1], "plain", 5, None, {}]))
    elif kind == "delete":
        del columns[path]
    elif kind == "grow" and values:
        i = draw(st.integers(0, len(values) - 1))
        if type(values[i]) is int:
            grown = values[i] + draw(st.sampled_from([1, -1, 2**31, -(2**31), 2**40, -(2**40)]))
            if -(2**63) <= grown < 2**64:  # what MessagePack can hold
                values[i] = grown
    elif kind == "swap":  # another column's values under this path
        other = draw(st.sampled_from(sorted(columns)))
        columns[path] = columns[other]
    return payload, path


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=200)
@given(data=st.data())
def test_damaged_columns_only_raise_decode_errors_naming_a_place(data: st.DataObject) -> None:
    payload, _ = data.draw(damaged_payloads(msgspec.msgpack.decode(_golden_payload())))
    where: str | None = "$"
    try:
        columnar.decode(repack(payload), CURRENT, source="d.tpk")
    except DecodeError as exc:
        where = exc.where
    assert where is not None
    assert where == "payload" or where.startswith("$")
    _read_everything(pack(payload, CURRENT))


@given(doc=documents(max_nodes=5), data=st.data())
def test_damaged_columns_of_any_document(doc: tracepack.Document, data: st.DataObject) -> None:
    payload, _ = data.draw(damaged_payloads(payload_of(doc.raw, CURRENT)))
    _read_everything(pack(payload, CURRENT))


# -- each check, with its message -----------------------------------------------------------------------


def _decode_error(payload: Any) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        columnar.decode(repack(payload), CURRENT, source="m.tpk")
    assert "\n" not in str(info.value)
    return info.value


def _golden() -> dict[str, Any]:
    """The golden payload's map, its columns keyed by path (layout 2 reads those as well as numbers)."""
    out: dict[str, Any] = msgspec.msgpack.decode(_golden_payload())
    paths = columnar.path_numbers()[0]
    out["columns"] = {paths[k] if type(k) is int else k: v for k, v in out["columns"].items()}
    return out


def _set(payload: dict[str, Any], path: str, row: int, value: Any) -> dict[str, Any]:
    payload["columns"][path][1][row] = value
    return payload


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("$.graph.nodes[].stack", "x", "row 2: Expected `int`, got `str`; expected integers in 0..4294967295"),
        ("$.graph.nodes[].stack", 2**32, "row 2: Expected `int` <= 4294967295; expected integers in 0..4294967295"),
        ("$.graph.nodes[].stack", -1, "row 2: Expected `int` >= 0; expected integers in 0..4294967295"),
        ("$.graph.nodes[].stack", True, "row 2: Expected `int`, got `bool`; expected integers in 0..4294967295"),
        ("$.strings[]", 7, "row 2: Expected `str`, got `int`; expected strings"),
        ("$.strings[]", b"x", "row 2: Expected `str`, got `bytes`; expected strings"),
        ("$.graph.values[].requires_grad", 1, "row 2: Expected `bool`, got `int`; expected booleans"),
        ("$.graph.nodes[].inputs[].arg<7>.values[]", "1.5", "row 2: Expected `float`, got `str`; expected numbers"),
        (
            "$.graph.nodes[].stack_style",
            2,
            "row 2: Invalid enum value 2; expected StackStyle values 0 (python), 1 (stripped)",
        ),
        ("$.graph.nodes[].inputs#len", -1, "row 2: Expected `int` >= 0; expected lengths (integers >= 0)"),
        ("$.header.producer#present", 1, "row 0: Expected `bool`, got `int`; expected booleans"),
        ("$.sources.file[]", -2, "row 2: Expected `int` >= -9223372036854775808"),
    ],
)
def test_a_bad_value_names_its_column_and_row(path: str, value: Any, message: str) -> None:
    payload = _golden()
    row = 0 if path.endswith("#present") else 2
    if path == "$.sources.file[]":  # i64 has no room to go wrong in MessagePack: test the u32 below it instead
        path, value, message = (
            "$.sources.line_count[]",
            -2,
            "row 2: Expected `int` >= 0; expected integers in 0..4294967295",
        )
    encoding, _ = payload["columns"][path]
    if encoding != columnar.PLAIN:
        payload["columns"][path] = ["plain", stored_values(payload["columns"][path])]
    exc = _decode_error(_set(payload, path, row, value))
    assert exc.where == path
    assert str(exc) == f"m.tpk: {path}: {message}"


def test_an_unknown_variant_id() -> None:
    path = "$.graph.nodes[].inputs[].arg#tag"
    exc = _decode_error(_set(_golden(), path, 1, 14))
    assert exc.where == path
    assert exc.problem == "row 1: Invalid enum value 14"
    assert exc.expected is not None
    assert exc.expected.startswith("variant ids 1 (ArgNone), 2 (ArgTensor), 3 (ArgTensors)")
    exc = _decode_error(_set(_golden(), path, 1, None))
    assert exc.problem == "row 1: Expected `int`, got `None`"


def test_delta_coded_sums_are_checked() -> None:
    payload = _golden()
    path = "$.graph.nodes[].name"
    assert payload["columns"][path][0] == columnar.DELTA
    payload["columns"][path][1][3] = 2**33
    exc = _decode_error(payload)
    assert exc.where == path
    assert exc.problem.endswith("(delta-coded)")
    assert exc.expected == "integers in 0..4294967295"
    payload = _golden()
    payload["columns"]["$.graph.nodes[].stack_style"] = ["delta", [1, 0, 0, 5]]
    payload["columns"]["$.graph.nodes[].stack_style"][1] += [0] * (len(mg.build_document().raw.graph.nodes) - 4)
    exc = _decode_error(payload)
    assert (exc.where, exc.problem) == ("$.graph.nodes[].stack_style", "row 3 holds 6 (delta-coded)")
    payload = _golden()
    payload["columns"]["$.graph.nodes[].inputs#len"][1] = [-1] * len(
        payload["columns"]["$.graph.nodes[].inputs#len"][1]
    )
    payload["columns"]["$.graph.nodes[].inputs#len"][0] = "delta"
    assert _decode_error(payload).problem == "row 0 holds -1 (delta-coded)"


def test_encodings() -> None:
    payload = _golden()
    payload["columns"]["$.strings[]"][0] = "delta"
    exc = _decode_error(payload)
    assert (exc.where, exc.problem, exc.expected) == (
        "$.strings[]",
        "delta encoding of a column that does not hold integers",
        "'plain'",
    )
    payload = _golden()
    payload["columns"]["$.strings[]"][0] = "rle"
    assert _decode_error(payload).problem == "unknown column encoding 'rle'"
    payload = _golden()
    payload["columns"]["$.graph.nodes[].inputs[].arg#tag"][0] = "delta"
    assert _decode_error(payload).where == "$.graph.nodes[].inputs[].arg#tag"


def test_lengths_must_match_the_rows() -> None:
    payload = _golden()
    payload["columns"]["$.graph.nodes[].stack"][1].append(0)
    exc = _decode_error(payload)
    assert (exc.where, exc.problem, exc.expected) == (
        "$.graph.nodes[].stack",
        "the column has 21 values",
        "20, one per row",
    )
    # A length more: the items' column is one short.
    payload = _golden()
    payload["columns"]["$.graph.nodes[].meta_keys#len"] = [
        "plain",
        [2, *_undelta_entry(payload, "$.graph.nodes[].meta_keys#len")[1:]],
    ]
    lens = payload["columns"]["$.graph.nodes[].meta_keys#len"][1]
    lens[0] += 1
    exc = _decode_error(payload)
    assert exc.where == "$.graph.nodes[].meta_keys[]"
    assert exc.problem.startswith("the column has ")


def test_a_column_that_is_not_a_list() -> None:
    payload = _golden()
    payload["columns"]["$.strings[]"][1] = {"a": 1}
    exc = _decode_error(payload)
    assert (exc.where, exc.problem) == ("$.strings[]", "not a list of values: Expected `array`, got `object`")
    payload = _golden()
    payload["columns"]["$.strings[]"] = ["plain"]
    with pytest.raises(DecodeError, match="not a columnar payload"):
        columnar.decode(repack(payload), CURRENT)
    payload = _golden()
    payload["columns"]["$.strings[]"][1] = [["nested"]]
    exc = _decode_error(payload)
    assert (exc.where, exc.problem) == ("$.strings[]", "row 0: Expected `str`, got `array`")


@pytest.mark.parametrize(
    ("change", "where", "problem"),
    [
        ({"format": "tracepack"}, "payload.format", "the format marker is 'tracepack'"),
        ({"layout": 4}, "payload.layout", "columnar layout 4 is not readable by this build"),
        ({"layout": 0}, "payload.layout", "columnar layout 0 is not readable by this build"),
        ({"layout": "1"}, "payload", "not a columnar payload: Expected `int`, got `str` - at `$.layout`"),
        ({"columns": [1]}, "payload", "not a columnar payload: Expected `object`, got `array` - at `$.columns`"),
    ],
)
def test_the_payload_map(change: dict[str, Any], where: str, problem: str) -> None:
    exc = _decode_error({**_golden(), **change})
    assert (exc.where, exc.problem) == (where, problem)


def test_not_a_map_at_all() -> None:
    for data in [
        b"",
        b"\xc1",
        msgspec.msgpack.encode([1, 2]),
        msgspec.msgpack.encode("tracepack-columnar"),
        b"\x91" * 100_000,
    ]:
        with pytest.raises(DecodeError) as info:
            columnar.decode(data, CURRENT)
        assert info.value.where == "payload"


def test_invalid_utf8_in_a_string_column() -> None:
    raw = bytearray(_golden_payload())
    at = raw.index(b"golden_graph")
    raw[at] = 0xFF
    with pytest.raises(DecodeError, match="not valid UTF-8"):
        columnar.decode(bytes(raw), CURRENT)


def test_rows_without_a_stored_column_are_capped() -> None:
    """A few bytes cannot ask for a billion rows of defaults."""
    item = type("Item", (msgspec.Struct,), {"__annotations__": {"a": int}, "a": 0}, array_like=True)
    empty = type("Empty", (msgspec.Struct,), {}, array_like=True)
    root = type(
        "Root", (msgspec.Struct,), {"__annotations__": {"items": list[item], "empties": list[empty]}}, array_like=True
    )
    data = columnar.encode_model(root([item(), item(5)], [empty()]), root)
    assert columnar.decode_model(data, root) == root([item(), item(5)], [empty()])
    for path in ("$.items#len", "$.empties#len"):
        payload = msgspec.msgpack.decode(data)
        payload["columns"] = {k: v for k, v in payload["columns"].items() if k in ("$.items#len", "$.empties#len")}
        payload["columns"][path] = ["plain", [10**12]]
        with pytest.raises(DecodeError) as info:
            columnar.decode_model(repack(payload), root)
        assert info.value.problem == "1000000000000 rows without a stored column"
        assert info.value.where in ("$.items[].a", "$.empties[]")


def _undelta(values: list[int]) -> list[int]:
    out, total = [], 0
    for v in values:
        total += v
        out.append(total)
    return out


def _undelta_entry(payload: dict[str, Any], path: str) -> list[int]:
    return stored_values(payload["columns"][path])


def test_column_numbers() -> None:
    """Layout 2 keys columns by number; names still read; an unknown number is a newer release's column."""
    payload: dict[str, Any] = msgspec.msgpack.decode(_golden_payload())
    expected = columnar.decode(_golden_payload(), CURRENT)
    assert all(type(k) is int for k in payload["columns"])
    paths, numbers = columnar.path_numbers()
    unknown = {**payload, "columns": {**payload["columns"], len(paths) + 7: ["plain", [1, 2]]}}
    assert columnar.decode(repack(unknown), CURRENT) == expected
    by_name = _golden()
    assert columnar.decode(repack(by_name), CURRENT) == expected
    with columnar.without_lag():  # what older builds wrote: layout 1 had no lag encoding
        old = payload_of(mg.build_document().raw, CURRENT)
    assert columnar.decode(repack({**old, "layout": 1}), CURRENT) == expected
    twice = {**payload, "columns": {**payload["columns"], "$.strings[]": by_name["columns"]["$.strings[]"]}}
    exc = _decode_error(twice)
    assert (exc.where, exc.problem) == ("payload.columns", "column $.strings[] is stored twice (by name and by number)")
    exc = _decode_error({**payload, "layout": 1})
    assert (exc.where, exc.problem) == ("payload.columns", f"column key {numbers['$.header.magic']} is not a path")
    negative = {**payload, "columns": {-1: ["plain", [1]], **payload["columns"]}}
    exc = _decode_error(negative)
    assert exc.where == "payload"
    assert "not a columnar payload" in exc.problem


def test_column_numbers_are_fixed() -> None:
    """Numbers of released versions never change: files name columns by them."""
    paths, numbers = columnar.path_numbers()
    released = [p for v in ((1, 0), (1, 1), (1, 2)) for p in columnar.column_paths(v)]
    assert set(paths[: len(set(released))]) == set(released)
    assert numbers["$.header.magic"] == 0
    head = "\n".join(paths[:236]).encode()
    assert hashlib.sha256(head).hexdigest() == "ca957338cc41a3439cc8a49710fbd6c1616c888da7f4b0e4a1687c52c673f14e"
