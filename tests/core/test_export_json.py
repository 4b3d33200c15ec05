"""torch.export model.json <-> tracepack, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tracepack import LegacyFormatError
from tracepack.demo import sample_model_json
from tracepack.torch.export.model_json import export_model_json, import_model_json

DATA = Path(__file__).parent.parent / "data" / "torch"
SAMPLES = {
    "sample": sample_model_json,
    "strict": (DATA / "export_strict_model.json").read_bytes,
}


@pytest.mark.parametrize("name", SAMPLES)
@pytest.mark.parametrize("codec", ["json", "msgpack"])
def test_real_samples_round_trip_byte_for_byte(name: str, codec: str) -> None:
    data = SAMPLES[name]()
    doc = import_model_json(data)
    back = tracepack.loads(tracepack.dumps(doc, codec=codec))
    assert export_model_json(back) == data


@pytest.mark.parametrize("name", SAMPLES)
def test_real_samples_lift_every_trace(name: str) -> None:
    data = SAMPLES[name]()
    model = json.loads(data)
    doc = import_model_json(data)
    for raw_node, node in zip(model["graph_module"]["graph"]["nodes"], doc.nodes(), strict=True):
        assert node.name == raw_node["name"]
        assert node.meta == raw_node["metadata"]
        if "stack_trace" in raw_node["metadata"]:
            assert node.raw.stack != 0, "a real torch stack trace was not interned"
            assert node.stack_trace == raw_node["metadata"]["stack_trace"]
        if "nn_module_stack" in raw_node["metadata"]:
            assert node.raw.module != 0
    assert not any(v.json for v in doc.raw.graph.values), "a real tensor value fell back to JSON"


_json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=8)
)
_json = st.recursive(
    _json_leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3), max_leaves=8
)


@given(data=st.data())
def test_odd_nodes_still_round_trip(data: st.DataObject) -> None:
    """Whatever a node holds (odd argument kinds, extra keys, non-string metadata), the file comes back exact
    or, for an integer no codec can store, is refused in one line."""
    model = json.loads(sample_model_json())
    nodes = model["graph_module"]["graph"]["nodes"]
    for _ in range(data.draw(st.integers(1, 4))):
        node = nodes[data.draw(st.integers(0, len(nodes) - 1))]
        what = data.draw(st.sampled_from(["arg", "extra", "meta", "hop", "kind", "dup"]))
        if what == "arg" and node["inputs"]:
            node["inputs"][0]["arg"] = {
                data.draw(st.sampled_from(["as_int", "as_float", "as_strange", "as_ints"])): data.draw(_json)
            }
        elif what == "extra":
            node[data.draw(st.text(min_size=1, max_size=5))] = data.draw(_json)
        elif what == "meta":
            node["metadata"][data.draw(st.sampled_from(["stack_trace", "nn_module_stack", "x"]))] = data.draw(
                st.text() | _json
            )
        elif what == "hop":
            node["is_hop_single_tensor_return"] = data.draw(_json)
        elif what == "kind" and node["inputs"]:
            node["inputs"][0]["kind"] = data.draw(_json)
        elif what == "dup":
            node["name"] = nodes[0]["name"]
    text = json.dumps(model).encode()
    if _outside_int64(model):
        # No codec stores such an integer (torch's schema has int64 only): refused in one line, never mangled.
        with pytest.raises(LegacyFormatError, match=r"^<model.json>: byte \d+: integer -?\d+ does not fit in 64 bits"):
            import_model_json(text)
        return
    doc = import_model_json(text)
    assert export_model_json(tracepack.loads(tracepack.dumps(doc))) == text


@pytest.mark.parametrize("field", ["target", "inputs", "outputs", "metadata"])
@pytest.mark.parametrize("share", [1, 2])
def test_nodes_missing_a_field_come_back_exact(field: str, share: int) -> None:
    """Nodes without a field the typed form needs, also when most nodes lack it (so the usual key order
    has no such key: the fuzzer's spliced model.json #101000722 crashed the importer with KeyError),
    are kept as they are and come back byte for byte."""
    model = json.loads(sample_model_json())
    for node in model["graph_module"]["graph"]["nodes"][::share]:
        del node[field]
    text = json.dumps(model).encode()
    doc = import_model_json(text)
    assert export_model_json(tracepack.loads(tracepack.dumps(doc))) == text


def _outside_int64(value: object) -> bool:
    if isinstance(value, dict):
        return any(_outside_int64(v) for v in value.values())
    if isinstance(value, list):
        return any(_outside_int64(v) for v in value)
    return type(value) is int and not -(2**63) <= value < 2**63


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"[1, 2]", "$: top level is not an object"),
        (b'{"graph_module": {}}', "$.schema_version: no schema_version"),
        (
            b'{"schema_version": {"major": 8, "minor": 1}, "graph_module": {"graph": {}}}',
            "$.graph_module.graph: no graph_module.graph",
        ),
        (b'{"a": "\xff"}', "not UTF-8 text"),
    ],
)
def test_bad_model_json(text: bytes, message: str) -> None:
    with pytest.raises(LegacyFormatError) as info:
        import_model_json(text, source="m.json")
    assert message in str(info.value)
    assert str(info.value).startswith("m.json: ")


def test_expand_needs_an_imported_document() -> None:
    b = tracepack.DocumentBuilder()
    with pytest.raises(tracepack.UsageError, match=r"was not imported from a torch model\.json"):
        export_model_json(b.build())


# -- older torch.export schemas -------------------------------------------------------------------
#
# Programs of schemas 1-8 as torch 2.1-2.15 really wrote them are tested in tests/releases/
# (samples in tests/data/torch/releases/, each checked against what its release read back).
#
# -- the compact stack-trace layout of torch PR #121675 ---------------------------------------------
#
# A commit on torch's main once added `co_fileinfo_ordered_list` (file and line tables) with node
# traces as file-index:line pairs, then was reverted: no release wrote it (torch 2.4's schema 5.3
# is a different layout). tracepack reads it as that proposed layout, whatever the version field says.


def co_fileinfo(model: dict[str, Any], sep: str = ":") -> dict[str, Any]:
    """The sample in PR #121675's proposed compact form: file and line tables, traces as file:line pairs."""
    from tracepack.traces import parse_stack_trace

    files: dict[str, dict[str, dict[str, str]]] = {}
    graph = model["graph_module"]["graph"]
    for node in graph["nodes"]:
        parsed = parse_stack_trace(node["metadata"]["stack_trace"])
        assert parsed is not None
        pairs = []
        for f in parsed[0]:
            lines = files.setdefault(f.file, {})
            lines.setdefault(str(f.line), {"name": f.name, "line": f.text})
            pairs.append(f"{list(files).index(f.file)}{sep}{f.line}")
        node["metadata"]["stack_trace"] = ";".join(pairs)
    graph["co_fileinfo_ordered_list"] = [{"file_name": f, "line_info_map": lines} for f, lines in files.items()]
    return model


@pytest.mark.parametrize("sep", [":", ","])
def test_proposed_compact_layout_file_tables(sep: str) -> None:
    original = json.loads(sample_model_json())["graph_module"]["graph"]["nodes"]
    model = co_fileinfo(json.loads(sample_model_json()), sep)
    data = json.dumps(model).encode()
    doc = import_model_json(data)
    assert export_model_json(tracepack.loads(tracepack.dumps(doc))) == data
    program = next(e.json for e in doc.raw.extensions if e.name == "torch.export/program")
    assert "line_info_map" not in program, "the file list was kept as JSON instead of in the tables"
    co = model["graph_module"]["graph"]["co_fileinfo_ordered_list"]
    assert [doc.strings[i] for i in doc.raw.files.name[1 : len(co) + 1]] == [c["file_name"] for c in co]
    assert len(doc.raw.lines.line) - 1 == sum(len(c["line_info_map"]) for c in co)
    for raw, node, full in zip(model["graph_module"]["graph"]["nodes"], doc.nodes(), original, strict=True):
        assert node.meta == raw["metadata"]  # the compact text, as in the file
        assert node.stack_trace == full["metadata"]["stack_trace"]  # the trace it stands for


def test_proposed_compact_layout_odd_traces_stay_verbatim() -> None:
    model = co_fileinfo(json.loads(sample_model_json()))
    nodes = model["graph_module"]["graph"]["nodes"]
    nodes[0]["metadata"]["stack_trace"] = "99:1"  # no such file
    nodes[1]["metadata"]["stack_trace"] = "not a compact trace"
    model["graph_module"]["graph"]["co_fileinfo_ordered_list"][0]["line_info_map"]["007"] = {"name": "f", "line": ""}
    data = json.dumps(model).encode()
    assert export_model_json(import_model_json(data)) == data


def test_nested_graphs_share_the_tables() -> None:
    """A torch.cond-like node: its branch graphs' nodes are document nodes, named under the node."""
    model = json.loads(sample_model_json())
    nodes = model["graph_module"]["graph"]["nodes"]
    branch = {"inputs": [], "outputs": [], "nodes": nodes[:5], "tensor_values": {}, "is_single_tensor_return": False}
    holder = dict(
        nodes[6], inputs=[{"name": "", "arg": {"as_graph": {"name": "true_graph_0", "graph": branch}}, "kind": 1}]
    )
    nodes.insert(7, holder | {"name": "cond"})
    data = json.dumps(model).encode()
    doc = import_model_json(data)
    assert export_model_json(tracepack.loads(tracepack.dumps(doc))) == data
    inner = doc.node(f"cond/true_graph_0/{nodes[2]['name']}")
    assert inner.stack_trace == nodes[2]["metadata"]["stack_trace"]
    assert inner.raw.stack == doc.node(nodes[2]["name"]).raw.stack  # one interned stack for both


@pytest.mark.parametrize(
    "odd",
    [
        {"name": "true_graph_0", "grap`": {}},  # the fuzzer's: a key changed
        {"name": "true_graph_0", "graph": 7},
        {"name": 1, "graph": {"nodes": []}},
        None,
        [],
    ],
)
def test_an_as_graph_argument_that_is_not_a_graph_comes_back_exact(odd: Any) -> None:
    """Beside a real nested graph, an ``as_graph`` argument that is not ``{"name", "graph"}`` keeps its node
    verbatim (the export read it as a nested graph's skeleton: KeyError; found by the model_json harness)."""
    model = json.loads(sample_model_json())
    nodes = model["graph_module"]["graph"]["nodes"]
    branch = {"inputs": [], "outputs": [], "nodes": nodes[:5], "tensor_values": {}, "is_single_tensor_return": False}
    holder = dict(
        nodes[6], inputs=[{"name": "", "arg": {"as_graph": {"name": "true_graph_0", "graph": branch}}, "kind": 1}]
    )
    nodes.insert(7, holder | {"name": "cond"})
    nodes.insert(8, dict(holder, name="odd", inputs=[{"name": "", "arg": {"as_graph": odd}, "kind": 1}]))
    data = json.dumps(model).encode()
    doc = import_model_json(data)
    assert export_model_json(doc) == data
    assert export_model_json(tracepack.loads(tracepack.dumps(doc))) == data
    assert doc.node("cond/true_graph_0/" + nodes[2]["name"]).stack_trace == nodes[2]["metadata"]["stack_trace"]
