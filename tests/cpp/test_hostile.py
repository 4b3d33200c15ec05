"""Crafted hostile vectors, one defect each: nesting past the depth budget, lengths that promise more than the
payload holds, every malformed JSON and MessagePack form the decoders meet at a typed place and in a skipped
value, union tags of every wrong kind, FlatBuffers shared objects past the element budget. The C++ reader
refuses each as the Python reader does (class, place, message), accepts what it accepts, and prints the same.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import pytest

import tracepack
from tests.cpp import harness
from tracepack import container

SAMPLE = harness.REPO / "src" / "tracepack" / "data" / "sample" / "model.json"


@cache
def _doc() -> tracepack.Document:
    return tracepack.load(SAMPLE)


@cache
def _payload(codec: str) -> bytes:
    return tracepack.dumps(_doc(), codec=codec, compression="none")[48:]


def _check(cpp_bin: Path, tmp_path: Path, payload: bytes, codec: str) -> harness.Outcome:
    path = tmp_path / "v.tpk"
    path.write_bytes(container.pack(payload, schema_version=(1, 2), codec=codec))
    return harness.compare(cpp_bin, path)


# --- JSON: every malformed form, at a typed place (a node's name) and in an ignored member ------------------

JSON_VALUES = [
    b"tru", b"nul", b"fals", b"truex", b"-", b"-x", b".5", b"5.", b"5.e3", b"1e", b"1e+", b"01", b"-01", b"0x10",
    b'"\\x"', b'"\\u12g4"', b'"\\udc00"', b'"\\ud800\\u0041"', b'"\\ud800x"', b'"\\ud800"', b'"a\x01b"', b'"a\xffb"',
    b"[1,]", b"[1 2]", b"{,}", b'{"a" 1}', b"{1:1}", b'{"a":1,}', b'{"a":1 "b":2}', b"[", b"{", b'"abc', b"NaN",
    b"Infinity", b"1e400", b"-1e400", b"1e-400", b"9" * 30, b"-" + b"9" * 30, b"9" * 4300, b"9" * 4301, b"-" + b"9" * 4300,
    b"4294967296", b"-1", b"-0", b"1.0", b"1E2", b"null", b"true", b'"x"', b"[]", b"{}", b"1.5",
]  # fmt: skip


@pytest.mark.parametrize("where", ["typed", "ignored"])
@pytest.mark.parametrize("value", JSON_VALUES, ids=lambda v: repr(v[:12]))
def test_json_values(cpp_bin: Path, tmp_path: Path, where: str, value: bytes) -> None:
    payload = _payload("json")
    if where == "typed":
        bad = payload.replace(b'"nodes":[{"name":', b'"nodes":[{"name":' + value + b',"target":0,"zz":', 1)
    else:
        bad = payload.replace(b'{"header":', b'{"zz":' + value + b',"header":', 1)
    assert bad != payload
    _check(cpp_bin, tmp_path, bad, "json")


JSON_DOCS: dict[str, Callable[[Any], None]] = {
    "root is an array": lambda d: d.clear(),
    "no header": lambda d: d.pop("header"),
    "kind not a string": lambda d: d["graph"]["nodes"][1]["inputs"][0].__setitem__("arg", {"kind": [1, {"a": 2}]}),
    "kind unknown": lambda d: d["graph"]["nodes"][1]["inputs"][0].__setitem__("arg", {"kind": "complex"}),
    "kind missing": lambda d: d["graph"]["nodes"][1]["inputs"][0].__setitem__("arg", {"name": 3}),
    "kind last": lambda d: d["graph"]["nodes"][1]["inputs"][0].__setitem__("arg", {"name": 3, "kind": "tensor"}),
    "kind last, bad field": lambda d: d["graph"]["nodes"][1]["inputs"][0].__setitem__(
        "arg", {"name": "x", "kind": "tensor"}
    ),
    "float names": lambda d: d["graph"]["nodes"][1]["inputs"][0].__setitem__(
        "arg", {"kind": "floats", "values": [1, -0.0, "NaN", "Infinity", "-Infinity", 2.5e-300]}
    ),
    "float name wrong": lambda d: d["graph"]["nodes"][1]["inputs"][0].__setitem__(
        "arg", {"kind": "float", "value": "inf"}
    ),
    "float is a list": lambda d: d["graph"]["nodes"][1]["inputs"][0].__setitem__("arg", {"kind": "float", "value": []}),
    "enum unknown": lambda d: d["graph"]["nodes"][0].__setitem__("stack_style", "compact"),
    "enum a number": lambda d: d["graph"]["nodes"][0].__setitem__("stack_style", 1),
    "optional null": lambda d: d["header"].__setitem__("producer", None),
    "optional wrong": lambda d: d["header"].__setitem__("producer", 5),
    "list of str wrong": lambda d: d["strings"].append(5),
    "bool a number": lambda d: d["graph"]["values"][0].__setitem__("requires_grad", 1),
    "reference out of range": lambda d: d["graph"]["nodes"][0].__setitem__("stack", 10**6),
}


@pytest.mark.parametrize("case", sorted(JSON_DOCS))
def test_json_documents(cpp_bin: Path, tmp_path: Path, case: str) -> None:
    doc = msgspec.json.decode(_payload("json"))
    JSON_DOCS[case](doc)
    _check(cpp_bin, tmp_path, msgspec.json.encode(doc), "json")


@pytest.mark.parametrize("depth", [998, 999, 1000, 1001, 100_000])
def test_json_depth(cpp_bin: Path, tmp_path: Path, depth: int) -> None:
    """The root object is level 1: an ignored member nesting DEPTH arrays reaches level DEPTH + 1."""
    payload = _payload("json").replace(b'{"header":', b'{"zz":' + b"[" * depth + b"]" * depth + b',"header":', 1)
    got = _check(cpp_bin, tmp_path, payload, "json")
    assert got.code == (0 if depth < 1000 else 2)


# --- MessagePack -------------------------------------------------------------------------------------------


def _mp_replace(path: list[int], value: Any) -> bytes:
    doc = msgspec.msgpack.decode(_payload("msgpack"))
    at = doc
    for k in path[:-1]:
        at = at[k]
    at[path[-1]] = value
    return msgspec.msgpack.encode(doc)


MP_RAW = {
    "nil": b"\xc0", "true": b"\xc3", "0xc1": b"\xc1", "fixstr": b"\xa1x", "str8 short": b"\xd9\x05ab",
    "str32 4 GiB": b"\xdb\xff\xff\xff\xff", "bin8": b"\xc4\x01x", "ext": b"\xd4\x01\x00", "ext8 short": b"\xc7\x09\x01",
    "float32": b"\xca\x3f\xc0\x00\x00", "float64 short": b"\xcb\x3f", "uint64 max": b"\xcf" + b"\xff" * 8,
    "int64 min": b"\xd3\x80" + b"\x00" * 7, "int8 -1": b"\xd0\xff", "uint32 2**32-1": b"\xce\xff\xff\xff\xff",
    "uint8": b"\xcc\x07", "negative fixint": b"\xe0", "fixarray": b"\x91\x01", "array32 4G": b"\xdd\xff\xff\xff\xff",
    "map": b"\x81\x01\x02", "map32 4G": b"\xdf\xff\xff\xff\xff", "empty": b"",
}  # fmt: skip
#: msgpack paths (positions) of one value of each kind in the sample document.
MP_PLACES = {
    "node name (u32)": [10, 3, 0, 0],
    "stack style (enum)": [10, 3, 0, 5],
    "string (str)": [1, 3],
    "argument (union)": [10, 3, 1, 2, 0, 1],
    "union tag": [10, 3, 1, 2, 0, 1, 0],
    "producer (optional)": [0, 2],
    "line number (i64)": [3, 1, 1],
}


def _raw_at(path: list[int], raw: bytes) -> bytes:
    marker = "\x00MARKER\x00"
    encoded = _mp_replace(path, marker)
    packed_marker = msgspec.msgpack.encode(marker)
    assert encoded.count(packed_marker) == 1
    return encoded.replace(packed_marker, raw)


@pytest.mark.parametrize("place", sorted(MP_PLACES))
@pytest.mark.parametrize("raw", sorted(MP_RAW))
def test_msgpack_values(cpp_bin: Path, tmp_path: Path, place: str, raw: str) -> None:
    _check(cpp_bin, tmp_path, _raw_at(MP_PLACES[place], MP_RAW[raw]), "msgpack")


@pytest.mark.parametrize("raw", sorted(MP_RAW))
def test_msgpack_skipped_values(cpp_bin: Path, tmp_path: Path, raw: str) -> None:
    """A trailing field of the root (a newer minor's) is skipped: its bytes must still be well formed."""
    payload = _payload("msgpack")
    assert payload[:3] == b"\xdc\x00\x10"
    _check(cpp_bin, tmp_path, b"\xdc\x00\x11" + payload[3:] + MP_RAW[raw], "msgpack")


@pytest.mark.parametrize("depth", [999, 1000, 1001, 100_000])
def test_msgpack_depth(cpp_bin: Path, tmp_path: Path, depth: int) -> None:
    """The root array is level 1: a trailing field of DEPTH - 1 nested arrays reaches level DEPTH."""
    payload = _payload("msgpack")
    got = _check(cpp_bin, tmp_path, b"\xdc\x00\x11" + payload[3:] + b"\x91" * (depth - 2) + b"\x90", "msgpack")
    assert got.code == (0 if depth <= 1000 else 2)


@pytest.mark.parametrize("length", [0, 1, 2, 5, 10])
def test_msgpack_short_structs(cpp_bin: Path, tmp_path: Path, length: int) -> None:
    doc = msgspec.msgpack.decode(_payload("msgpack"))
    doc[10][3][0] = doc[10][3][0][:length]
    doc[10][3][1][2][0][1] = doc[10][3][1][2][0][1][: max(length - 1, 0)]
    _check(cpp_bin, tmp_path, msgspec.msgpack.encode(doc), "msgpack")


# --- FlatBuffers: shared objects past the element budget ----------------------------------------------------


@pytest.mark.parametrize("copies", [10, 100_000])
def test_flatbuffers_shared_objects(
    cpp_bin: Path, tmp_path: Path, copies: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every node offset pointing to one node whose lists are long: a small buffer that would decode to a huge
    document. Past 2 x the buffer's bytes + 1024 elements it is refused (spec §5.1)."""
    from tracepack.codecs import flatbuffers
    from tracepack.versions import generated

    fbcodec = flatbuffers.codec_module((1, 2))
    one = generated((1, 2)).model.Node(name=1, target=1, meta_keys=[1] * 2000, meta_values=[1] * 2000)

    def shared(w: Any, items: list[Any]) -> int:
        return int(w.offsets([fbcodec._e_node(w, one)] * copies))

    monkeypatch.setattr(fbcodec, "_ev_node", shared)
    payload = flatbuffers.encode(_doc().raw, (1, 2))
    got = _check(cpp_bin, tmp_path, payload, "flatbuffers-rows")
    assert got.code == (2 if copies > 100 else 0)


# --- columnar: the payload map and every check of a column -------------------------------------------------


def _columnar() -> dict[Any, Any]:
    out: dict[Any, Any] = msgspec.msgpack.decode(_payload("columnar"))
    return out


def _number(path: str) -> int:
    from tracepack.codecs.columnar import path_numbers

    return path_numbers()[1][path]


COLUMNAR_PAYLOADS: dict[str, Callable[[dict[Any, Any]], Any]] = {
    "not a map": lambda d: [1, 2],
    "format an int": lambda d: d.__setitem__("format", 1),
    "format another": lambda d: d.__setitem__("format", "tracepack-rows"),
    "format None": lambda d: d.__setitem__("format", None),
    "layout a string": lambda d: d.__setitem__("layout", "2"),
    "layout 3": lambda d: d.__setitem__("layout", 3),
    "layout -1": lambda d: d.__setitem__("layout", -1),
    "layout 2**64-1": lambda d: d.__setitem__("layout", 2**64 - 1),
    "no columns": lambda d: d.pop("columns"),
    "no format": lambda d: d.pop("format"),
    "no layout": lambda d: d.pop("layout"),
    "an extra key": lambda d: d.__setitem__("zz", [1, {"a": [2]}]),
    "an int key at the top": lambda d: d.__setitem__(5, 1),
    "columns a list": lambda d: d.__setitem__("columns", [1]),
    "columns None": lambda d: d.__setitem__("columns", None),
    "a negative key": lambda d: d["columns"].__setitem__(-1, ["plain", []]),
    "a float key": lambda d: d["columns"].__setitem__(1.5, ["plain", []]),
    "an entry of 3": lambda d: d["columns"].__setitem__(0, ["plain", [], 1]),
    "an entry of 1": lambda d: d["columns"].__setitem__(0, ["plain"]),
    "an encoding that is an int": lambda d: d["columns"].__setitem__(0, [1, []]),
    "an entry that is a str": lambda d: d["columns"].__setitem__(0, "x"),
    "an unknown number": lambda d: d["columns"].__setitem__(10**6, ["plain", []]),
    "an unknown path": lambda d: d["columns"].__setitem__("$.zz", ["plain", [1]]),
    "a path by name and number": lambda d: d["columns"].__setitem__("$.header.magic", ["plain", ["tracepack"]]),
    "a path by name only": lambda d: d["columns"].__setitem__("$.header.magic", d["columns"].pop(0)),
    "layout 1 with numbers": lambda d: d.__setitem__("layout", 1),
    "layout 1 with paths": lambda d: d.update(
        layout=1, columns={__import__("tracepack.codecs.columnar").codecs.columnar.path_numbers()[0][k]: v
                           for k, v in d["columns"].items()}
    ),
}  # fmt: skip


def columnar_payload(case: str) -> bytes:
    doc = _columnar()
    replaced = COLUMNAR_PAYLOADS[case](doc)
    return msgspec.msgpack.encode(doc if replaced is None else replaced)


@pytest.mark.parametrize("case", sorted(COLUMNAR_PAYLOADS))
def test_columnar_payloads(cpp_bin: Path, tmp_path: Path, case: str) -> None:
    _check(cpp_bin, tmp_path, columnar_payload(case), "columnar")


#: (column path, entry) pairs, each one defect (or none) in one column.
COLUMNS: dict[str, tuple[str, Any]] = {
    "unknown encoding": ("$.graph.nodes[].stack", ["zzz", [0]]),
    "forms on integers": ("$.graph.nodes[].stack", ["forms", [[], [], [], [], []]]),
    "delta on strings": ("$.strings[]", ["delta", [0]]),
    "delta on booleans": ("$.graph.values[].requires_grad", ["delta", [0]]),
    "delta on tags": ("$.graph.nodes[].inputs[].arg#tag", ["delta", [2]]),
    "values not a list": ("$.graph.nodes[].stack", ["plain", 5]),
    "values a map": ("$.graph.nodes[].stack", ["plain", {"a": 1}]),
    "too few values": ("$.graph.nodes[].stack", ["plain", [0]]),
    "a string among ints": ("$.graph.nodes[].stack", ["plain", [0, "x"]]),
    "a negative u32": ("$.graph.nodes[].stack", ["plain", [0, -1]]),
    "a u32 past its range": ("$.graph.nodes[].stack", ["plain", [0, 2**32]]),
    "delta below the range": ("$.graph.nodes[].stack", ["delta", [0, 5, -10, 2**33]]),
    "delta above the range": ("$.graph.nodes[].stack", ["delta", [2**33, -(2**33), 2**32]]),
    "delta of strings": ("$.graph.nodes[].stack", ["delta", [0, "x"]]),
    "an unknown enum value": ("$.graph.nodes[].stack_style", ["plain", [0, 7]]),
    "an enum of the wrong type": ("$.graph.nodes[].stack_style", ["plain", [0, "x"]]),
    "an unknown enum value, delta": ("$.graph.nodes[].stack_style", ["delta", [0, 1, 1]]),
    "an unknown variant": ("$.graph.nodes[].inputs[].arg#tag", ["plain", [99]]),
    "a nil variant": ("$.graph.nodes[].inputs[].arg#tag", ["plain", [None]]),
    "a str variant": ("$.graph.nodes[].inputs[].arg#tag", ["plain", ["x"]]),
    "a negative length": ("$.graph.nodes[].inputs#len", ["delta", [1, -5]]),
    "a length of strings": ("$.graph.nodes[].inputs#len", ["plain", ["x"]]),
    "huge lengths": ("$.graph.nodes[].inputs#len", ["plain", [2**64 - 1, 2**64 - 1]]),
    "a boolean of ints": ("$.graph.values[].requires_grad", ["plain", [1]]),
    "a present flag of ints": ("$.header.producer#present", ["plain", [1]]),
    "no producer": ("$.header.producer#present", ["plain", [False]]),
    "a float of strings": ("$.graph.nodes[].inputs[].arg<6>.value", ["plain", ["x"]]),
    "a string of ints": ("$.strings[]", ["plain", [1]]),
    "a string not UTF-8": ("$.header.magic", ["plain", [b"\xff".decode("latin1")]]),
    "forms: not five": ("$.strings[]", ["forms", [[], []]]),
    "forms: not lists": ("$.strings[]", ["forms", [1, 2, 3, 4, 5]]),
    "forms: a bad step": ("$.strings[]", ["forms", [[""], ["x"], [0], [0], [0]]]),
    "forms: lengths differ": ("$.strings[]", ["forms", [[""], [0, 1], [0], [0], [0]]]),
    "forms: too few literals": ("$.strings[]", ["forms", [[""], [], [], [], []]]),
    "forms: a form past the rows": ("$.strings[]", ["forms", [None, [10**9], [0], [0], [0]]]),
    "forms: a step of 0": ("$.strings[]", ["forms", [None, [1, 0], [0, 0], [0, 0], [0, 0]]]),
    "forms: a literal in a form row": ("$.strings[]", ["forms", [None, [2], [0], [0], [0]]]),
    "forms: an affix that is a form": ("$.strings[]", ["forms", [None, [1], [1], [0], [0]]]),
    "forms: an affix past the literals": ("$.strings[]", ["forms", [None, [1], [10**6], [0], [0]]]),
    "forms: a negative number": ("$.strings[]", ["forms", [None, [1], [0], [0], [-5]]]),
    "forms: a number past 10**18": ("$.strings[]", ["forms", [None, [1], [0], [0], [10**18]]]),
    "forms: numbers past 64 bits": ("$.strings[]", ["forms", [None, [1, 1], [0, 0], [0, 0], [2**63 - 1, 2**63 - 1]]]),
    "forms: a good one": ("$.strings[]", ["forms", [None, [1, 1], [0, 0], [0, 0], [5, 0]]]),
    "forms: long affixes": ("$.strings[]", ["forms", [None, [1], [0], [0], [0]]]),
}  # fmt: skip


def columnar_column(case: str) -> bytes:
    """The sample's columnar payload with one column replaced as ``COLUMNS[case]`` says."""
    doc = _columnar()
    path, entry = COLUMNS[case]
    entry = list(entry)
    if entry[0] == "forms" and isinstance(entry[1], list) and entry[1] and entry[1][0] is None:
        # the string table's own strings as literals (row 1 emptied for a form), the affixes after them
        old = doc["columns"][_number("$.strings[]")]
        strings = old[1] if old[0] == "plain" else tracepack.load(SAMPLE).strings
        literals = list(strings)
        if case != "forms: a literal in a form row":
            literals[1] = ""
            literals[2] = "" if case != "forms: a step of 0" else literals[2]
        literals.append("x" * (300 if case == "forms: long affixes" else 3))
        forms = list(entry[1])
        if forms[2] == [0]:
            forms[2] = [len(literals) - 1]
        elif forms[2] == [0, 0]:
            forms[2] = [len(literals) - 1] * 2
        if forms[3] == [0]:
            forms[3] = [len(literals) - 1]
        elif forms[3] == [0, 0]:
            forms[3] = [len(literals) - 1] * 2
        forms[0] = literals
        entry = ["forms", forms]
    doc["columns"][_number(path)] = entry
    if case == "a string not UTF-8":
        return msgspec.msgpack.encode(doc).replace(b"\xa2\xc3\xbf", b"\xa1\xff")
    return msgspec.msgpack.encode(doc)


@pytest.mark.parametrize("case", sorted(COLUMNS))
def test_columnar_columns(cpp_bin: Path, tmp_path: Path, case: str) -> None:
    _check(cpp_bin, tmp_path, columnar_column(case), "columnar")


@pytest.mark.parametrize(
    "path",
    [
        "$.graph.nodes[].name",
        "$.graph.nodes[].stack",
        "$.graph.nodes[].inputs#len",
        "$.graph.nodes[].inputs[].arg#tag",
        "$.header.producer#present",
        "$.strings#len",
    ],
)
def test_columnar_missing_columns(cpp_bin: Path, tmp_path: Path, path: str) -> None:
    """A column left out: its field's default in every row, or refused (a field without one)."""
    doc = _columnar()
    doc["columns"].pop(_number(path), None)
    _check(cpp_bin, tmp_path, msgspec.msgpack.encode(doc), "columnar")


def test_columnar_number_table() -> None:
    """Layout 2's numbers in the generated C++ are the reference's (spec §6.3)."""
    import re

    from tracepack.codecs.columnar import column_paths, path_numbers
    from tracepack.codegen.check import load_schemas
    from tracepack.codegen.emit_cpp import column_numbers
    from tracepack.codegen.emit_cpp import column_paths as cpp_paths

    text = (harness.REPO / "generated" / "cpp" / "tracepack" / "versions.cpp").read_text(encoding="utf-8")
    table = re.findall(r'^    "([^"]+)",  // (\d+)$', text, flags=re.M)
    assert [p for p, _ in table] == list(path_numbers()[0])
    schemas = load_schemas(harness.REPO / "schema")
    assert column_numbers(schemas) == list(path_numbers()[0])
    for schema in schemas:
        assert cpp_paths(schema) == column_paths((schema.major, schema.minor))
