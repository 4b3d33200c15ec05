"""The edge cases spec/ decides, each checked against the Python reader (the conformance suite holds the
same cases as vectors for every implementation; these tests say why, and fail where the code and the
spec part)."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tracepack import DocumentBuilder, Tensor
from tracepack.container import pack, unpack
from tracepack.errors import DecodeError, InputError
from tracepack.versions import CURRENT


def _doc() -> tracepack.Document:
    b = DocumentBuilder(producer="spec", producer_version="1")
    b.add_node("relu", "aten.relu", inputs=[("x", Tensor("x"))], outputs=[Tensor("y")])
    return b.build()


def _payload(codec: str, doc: tracepack.Document | None = None) -> bytes:
    data = tracepack.dumps(doc or _doc(), codec=codec, compression="none")
    return bytes(unpack(data)[1])


def _load(payload: bytes, codec: str, version: tuple[int, int] = CURRENT) -> tracepack.Document:
    return tracepack.loads(pack(payload, schema_version=version, codec=codec), source="t.tpk")


def _refused(payload: bytes, codec: str) -> InputError:
    with pytest.raises(InputError) as info:
        _load(payload, codec)
    return info.value


# -- §3 json -------------------------------------------------------------------------------------------


def test_json_duplicate_names_are_refused() -> None:
    """§3.2: a name twice in one object (even an ignored one, even spelled with an escape) is an error;
    msgspec alone would take the last one."""
    text = _payload("json")
    for dup in (
        text.replace(b'"major":1', b'"major":1,"major":1', 1),
        text.replace(b'"major":1', b'"major":1,"\\u006dajor":1', 1),
        text.replace(b'"magic":', b'"zz":1,"zz":2,"magic":', 1),
    ):
        assert dup != text
        err = _refused(dup, "json")
        assert type(err) is DecodeError
        assert err.where == "payload"
        assert "twice" in err.problem


def test_json_ignored_members_must_be_utf8() -> None:
    """§3.3: the whole text is UTF-8, ignored members included (msgspec skips their bytes)."""
    text = _payload("json")
    bad = text.replace(b'"magic":', b'"zz":"\xff","magic":', 1)
    err = _refused(bad, "json")
    assert type(err) is DecodeError
    assert err.where == "payload"
    assert "UTF-8" in err.problem
    surrogate = text.replace(b'"magic":', b'"zz":"\\ud800","magic":', 1)
    assert type(_refused(surrogate, "json")) is DecodeError


def test_json_ignored_members_are_ignored() -> None:
    text = _payload("json")
    extra = text.replace(b'"magic":', b'"zz":[1,{"a":null,"b":"\\u00e9"}],"magic":', 1)
    assert _load(extra, "json") == _doc()


def test_json_integer_minus_zero_is_positive_zero_for_floats() -> None:
    """§3.1: -0 is the integer 0, so a float field given -0 holds +0.0 (-0.0 is written with a fraction)."""
    b = DocumentBuilder()
    b.add_node("n", "t", inputs=[("f", -0.0)])
    doc = b.build()
    text = _payload("json", doc)
    assert b'"value":-0.0' in text
    signed = _load(text, "json").raw.graph.nodes[0].inputs[0].arg.value
    assert repr(signed) == "-0.0"
    unsigned = _load(text.replace(b'"value":-0.0', b'"value":-0'), "json").raw.graph.nodes[0].inputs[0].arg.value
    assert repr(unsigned) == "0.0"


@given(st.dictionaries(st.text(max_size=3), st.integers(), max_size=4))
def test_json_duplicate_check_agrees_with_the_standard_library(members: dict[str, int]) -> None:
    """Text whose objects have unique names passes the check, whatever the names; reference: json.loads."""
    from tracepack.codecs.json import check_text

    text = json.dumps(members).encode()
    check_text(text)
    if members:
        key = json.dumps(next(iter(members)))
        doubled = text[:-1] + b", " + key.encode() + b": 0}"
        with pytest.raises(DecodeError):
            check_text(doubled)


def test_msgpack_extra_trailing_fields_are_skipped_unchecked() -> None:
    """§4.2: elements past the fields a reader knows are skipped: well-formed, not UTF-8 checked."""
    raw = msgspec.msgpack.decode(_payload("msgpack"))
    raw[0][1].append(7)  # header.version gets a third element
    data = msgspec.msgpack.encode(raw)
    # A str of invalid UTF-8 as the extra element: a0-bf fixstr of one 0xff byte.
    patched = data.replace(b"\x93\x01\x02\x07", b"\x93\x01\x02\xa1\xff", 1)
    assert patched != data
    assert _load(patched, "msgpack") == _doc()


# -- §9 validation, §11 outputs --------------------------------------------------------------------------


def test_debug_handles_must_ascend() -> None:
    """§9.4.2 D6: readers find a handle by binary search, so an unsorted column is refused (it was
    accepted, and lookups then missed handles that are there)."""
    from tracepack.errors import IntegrityError

    b = DocumentBuilder()
    b.add_node("n", "t")
    for h in (3, 5, 9):
        b.add_debug_handle(h, op="op")
    raw = b.build_raw()
    raw.debug_handles.handle[1], raw.debug_handles.handle[2] = 9, 5
    data = msgspec.msgpack.encode(raw)
    with pytest.raises(IntegrityError) as info:
        _load(data, "msgpack")
    assert info.value.where == "$.debug_handles.handle[2]"
    raw.debug_handles.handle[1] = raw.debug_handles.handle[2] = 5  # equal handles: not ascending either
    with pytest.raises(IntegrityError):
        _load(msgspec.msgpack.encode(raw), "msgpack")


@pytest.mark.parametrize("word", ["#²", "#٣", "#-1", "#"])
def test_trace_index_is_ascii_digits(word: str, tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    """§11.3: `#I` is an index only for ASCII digits; other words are names (`#²` made int() fail: exit 1)."""
    from pathlib import Path

    from tracepack.cli import main

    path = Path(str(tmp_path)) / "t.tpk"
    path.write_bytes(tracepack.dumps(_doc()))
    assert main(["trace", str(path), word]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"no node named {word!r}" in err


# -- §6 columnar -------------------------------------------------------------------------------------


def _columnar_parts() -> dict[str, object]:
    return msgspec.msgpack.decode(_payload("columnar"))  # type: ignore[no-any-return]


def _with_extra_column(parts: dict[str, object], key: bytes, entry: bytes) -> bytes:
    """The payload with one more column (raw MessagePack key and entry) appended to its columns map."""
    columns = msgspec.msgpack.encode(parts["columns"])
    n = len(parts["columns"])  # type: ignore[arg-type]
    assert columns[0] == 0xDE  # a map16: every document has more than 15 columns
    head = msgspec.msgpack.encode({"format": parts["format"], "layout": parts["layout"]})
    return b"\x83" + head[1:] + b"\xa7columns" + b"\xde" + (n + 1).to_bytes(2, "big") + columns[3:] + key + entry


def test_columnar_repeated_keys_are_refused() -> None:
    """§6.1: msgspec kept the last of two equal keys in the payload map and in the columns map."""
    parts = _columnar_parts()
    head = msgspec.msgpack.encode(parts)
    err = _refused(b"\x84" + head[1:] + b"\xa6layout\x02", "columnar")
    assert type(err) is DecodeError
    assert err.where == "payload"
    number = next(k for k in parts["columns"] if isinstance(k, int))  # type: ignore[attr-defined]
    entry = msgspec.msgpack.encode(parts["columns"][number])  # type: ignore[index]
    err = _refused(_with_extra_column(parts, msgspec.msgpack.encode(number), entry), "columnar")
    assert type(err) is DecodeError
    assert err.where == "payload.columns"


@pytest.mark.parametrize(("depth", "ok"), [(999, True), (1000, True), (1001, False)])
def test_columnar_depth_budget_is_exact(depth: int, ok: bool) -> None:
    """§9.6: max_depth (1,000) counts every level, in columns no reader decodes too; the payload map is
    level 1, the columns map 2, a column's entry 3."""
    nested = b"\x91" * (depth - 4) + b"\x90"
    data = _with_extra_column(_columnar_parts(), b"\xa2zz", b"\x92\xa5plain" + nested)
    if ok:
        assert _load(data, "columnar") == _doc()
    else:
        err = _refused(data, "columnar")
        assert type(err) is DecodeError
        assert err.where == "payload"
        assert "nested" in err.problem


@pytest.mark.parametrize(("depth", "ok"), [(1000, True), (1001, False)])
def test_msgpack_and_json_depth_budget_is_exact(depth: int, ok: bool) -> None:
    """§9.6 for the other two: the root is level 1; the nesting sits in a member no reader knows."""
    raw = msgspec.msgpack.decode(_payload("msgpack"))
    raw[0][1].append(0)  # header.version (level 3) gets an extra element, then nested to `depth`
    mp = msgspec.msgpack.encode(raw).replace(b"\x93\x01\x02\x00", b"\x93\x01\x02" + b"\x91" * (depth - 4) + b"\x90", 1)
    text = _payload("json").replace(
        b'"major":1', b'"major":1,"zz":' + b"[" * (depth - 3) + b"]" * (depth - 3), 1
    )  # the root object is level 1, header 2, version 3
    for data, codec in ((mp, "msgpack"), (text, "json")):
        if ok:
            assert _load(data, codec) == _doc()
        else:
            err = _refused(data, codec)
            assert type(err) is DecodeError
            assert err.where == "payload"
            assert "nested" in err.problem


def test_error_format_json_is_one_line_naming_class_and_place(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """§12.2: `cat --error-format json` reports {"error": CLASS, "place": PLACE, "message": LINE}, one line;
    bytes that are no format at all are a ContainerError at byte 0, as tracepack.loads says (§1.3)."""
    from pathlib import Path

    from tracepack.cli import main

    folder = Path(str(tmp_path))
    for data, cls, place in (
        (b"", "ContainerError", "byte 0"),
        (b"not a container at all", "ContainerError", "byte 0"),
        (tracepack.dumps(_doc())[:47], "ContainerError", "byte 0"),
    ):
        path = folder / "bad.tpk"
        path.write_bytes(data)
        assert main(["cat", "--error-format", "json", str(path)]) == 2
        out = capsys.readouterr()
        assert out.out == ""
        assert out.err.count("\n") == 1
        report = json.loads(out.err)
        assert (report["error"], report["place"]) == (cls, place)
        assert report["message"].startswith(str(path))
        with pytest.raises(InputError) as info:
            tracepack.loads(data)
        assert type(info.value).__name__ == cls
        assert info.value.where == place
