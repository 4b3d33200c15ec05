"""The ``lag`` encoding of integer columns (columnar layout 3, spec §6.4.4): each value as its difference
from the value K rows before it.

The reference the codec is checked against is ``stored_values`` (tests/columnar/helpers.py), a loop
written from the spec's words, and the torch samples' real metadata (tests/data/torch).
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tests.columnar.helpers import pack, payload_of, repack, stored_values
from tests.golden import make_golden as mg
from tests.strategies import documents
from tracepack.codecs import columnar
from tracepack.errors import DecodeError
from tracepack.versions import CURRENT

_TORCH = Path(__file__).resolve().parent.parent / "data" / "torch"

_i64 = st.integers(-(2**63), 2**63 - 1)


def _periodic(draw: st.DrawFn) -> list[int]:
    """Rows of a fixed-shape list shredded into one column: a period of constants and counters."""
    period = draw(st.integers(1, 10))
    starts = draw(st.lists(st.integers(-5, 10**6), min_size=period, max_size=period))
    steps = draw(st.lists(st.integers(0, 3), min_size=period, max_size=period))
    rows = draw(st.integers(0, 300))
    return [starts[i % period] + steps[i % period] * (i // period) for i in range(rows)]


_columns = st.one_of(st.lists(_i64, max_size=80), st.composite(_periodic)(), st.lists(st.integers(0, 2**64 - 1)))


@given(values=_columns)
def test_any_integer_column_round_trips(values: list[int]) -> None:
    """Whatever the writer chooses for a column (plain, delta or lag), the reader gives the values back."""
    w = columnar._Writer()
    w.put("$.t", values, integer=True)
    if not values:
        assert not w.columns
        return
    encoding, raw = w.columns["$.t"]
    entry = [encoding, msgspec.msgpack.decode(raw)]
    assert stored_values(entry) == values  # the spec's sums, computed here
    got = columnar._Reader(w.columns, 1 << 40, None, w.layout).column(
        "$.t", len(values), columnar._INT_LIST, "", delta=True
    )
    assert got is not None
    assert got[0] == values
    assert w.lagged == (encoding == columnar.LAG)
    if encoding == columnar.LAG:
        assert len(values) >= 16
        assert entry[1][0] in range(2, 9)


@given(lag=st.integers(1, columnar.LAG_MAX), deltas=st.lists(st.integers(-(10**6), 10**6), max_size=200))
def test_the_reader_sums_each_lane(lag: int, deltas: list[int]) -> None:
    """Any lag of 1..64 a writer may choose reads as the spec's sums."""
    columns = {"$.t": (columnar.LAG, msgspec.Raw(msgspec.msgpack.encode([lag, deltas])))}
    got = columnar._Reader(columns, 1 << 40, None, 3).column("$.t", len(deltas), columnar._INT_LIST, "", delta=True)
    assert got == (stored_values([columnar.LAG, [lag, deltas]]), True)


@given(doc=documents())
def test_documents_read_alike_with_and_without_lag(doc: tracepack.Document) -> None:
    """A layout 3 payload and the layout 2 one builds before it wrote decode to the same document."""
    with_lag = columnar.encode(doc.raw, CURRENT)
    with columnar.without_lag():
        plain = columnar.encode(doc.raw, CURRENT)
    assert msgspec.msgpack.decode(plain)["layout"] == columnar.LAYOUT
    assert columnar.decode(with_lag, CURRENT) == columnar.decode(plain, CURRENT) == doc.raw
    if msgspec.msgpack.decode(with_lag)["layout"] == columnar.LAYOUT:
        assert with_lag == plain


@pytest.mark.parametrize("name", ["transformer.pt2", "cnn.pt2", "dynamic.pt2"])
def test_torch_metadata_values_are_lagged(name: str) -> None:
    """On a torch program every node has the same metadata keys (stack trace, module stack, torch_fn):
    the values column repeats with that period and is written with it (the programs torch 2.13 exported
    for the committed corpus)."""
    from tracepack.torch.export.model_json import import_model_json

    with zipfile.ZipFile(_TORCH / "corpus" / name) as archive:
        (member,) = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
        doc = import_model_json(archive.read(member))
    columns = payload_of(doc.raw, CURRENT)["columns"]
    lens = stored_values(columns["$.graph.nodes[].meta_keys#len"])
    period = max(set(lens), key=lens.count)
    encoding, values = columns["$.graph.nodes[].meta_values[]"]
    assert (encoding, values[0]) == (columnar.LAG, period)
    flat = [v for node in doc.raw.graph.nodes for v in node.meta_values]
    assert stored_values([encoding, values]) == flat
    plain = msgspec.msgpack.encode(flat)
    assert len(msgspec.msgpack.encode(values)) < len(plain)


# -- hostile lag columns: one line, the column's path ---------------------------------------------------


def _golden_with(path: str, entry: Any, layout: int = columnar.LAG_LAYOUT) -> dict[str, Any]:
    with columnar.without_lag():  # no other lag column: the one under test is the only one
        payload = payload_of(mg.build_document().raw, CURRENT)
    payload["layout"] = layout
    payload["columns"][path] = entry
    return payload


def _error(payload: dict[str, Any]) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        columnar.decode(repack(payload), CURRENT, source="m.tpk")
    assert "\n" not in str(info.value)
    return info.value


def _names() -> list[int]:
    payload = payload_of(mg.build_document().raw, CURRENT)
    return stored_values(payload["columns"]["$.graph.nodes[].name"])


@pytest.mark.parametrize(
    ("entry", "layout", "problem", "expected"),
    [
        (
            lambda v: ["lag", [2, columnar._lag_deltas(v, 2)]],
            2,
            "lag encoding in a columnar layout 2 payload",
            "layout 3",
        ),
        (lambda v: ["lag", [0, v]], 3, "not a lag column: Expected `int` >= 1 - at `$[0]`", None),
        (lambda v: ["lag", [65, v]], 3, "not a lag column: Expected `int` <= 64 - at `$[0]`", None),
        (lambda v: ["lag", v], 3, "not a lag column: ", None),
        (lambda v: ["lag", [2, v[:-1]]], 3, "the column has ", "one per row"),
        (lambda v: ["lag", [2, [*v[:-1], 2**40]]], 3, "holds ", "integers in 0..4294967295"),
        (lambda v: ["lagged", [2, v]], 3, "unknown column encoding 'lagged'", "'plain', 'delta' or 'lag'"),
    ],
)
def test_bad_lag_columns(entry: Any, layout: int, problem: str, expected: str | None) -> None:
    path = "$.graph.nodes[].name"
    exc = _error(_golden_with(path, entry(_names()), layout))
    assert exc.where == path
    assert exc.problem.startswith(problem) or problem in exc.problem, exc.problem
    if expected is not None:
        assert exc.expected is not None
        assert exc.expected.endswith(expected), exc.expected


def test_lag_only_on_integer_columns() -> None:
    path = "$.strings[]"
    exc = _error(_golden_with(path, ["lag", [2, [0] * len(mg.build_document().raw.strings)]]))
    assert (exc.where, exc.problem) == (path, "lag encoding of a column that does not hold integers")
    exc = _error(_golden_with(path, ["lag", [2, [0] * len(mg.build_document().raw.strings)]], layout=2))
    assert exc.problem == "lag encoding in a columnar layout 2 payload"


def test_a_layout_3_file_reads_through_tracepack_loads() -> None:
    """The container and the document reader take layout 3 as the codec does; a layout this build does not
    know is refused in one line at ``payload.layout`` (what builds before layout 3 say of it)."""
    doc = mg.build_document()
    lagged = _golden_with("$.graph.nodes[].name", ["lag", [3, columnar._lag_deltas(_names(), 3)]])
    assert tracepack.loads(pack(lagged, CURRENT)).raw == doc.raw
    with pytest.raises(tracepack.errors.DecodeError) as info:
        tracepack.loads(pack({**lagged, "layout": 4}, CURRENT))
    assert info.value.where == "payload.layout"
    assert "columnar layout 4 is not readable by this build" in str(info.value)
