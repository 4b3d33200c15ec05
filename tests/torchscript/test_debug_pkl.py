"""debug_pkl (both forms), callstack_debug_map.pkl and mobile_debug_handles.pkl, without torch."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import zipfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepack.errors import EncodeError, LegacyFormatError, UnsafePickleError
from tracepack.torch.torchscript.archive import read_torchscript_debug_info
from tracepack.torch.torchscript.debug_pkl import (
    FORMAT_WITH_STRING_TABLE,
    CallstackDebugMap,
    DebugPkl,
    DebugPklForm,
    InlinedCallStack,
    SourceRangeRow,
    debug_pkl_from_value,
    parse_callstack_debug_map,
    parse_debug_pkl,
    parse_mobile_debug_handles,
    read_torchscript_pickle,
    split_source_lines,
    write_debug_pkl,
)
from tracepack.torch.torchscript.pickle_writer import IntList, write_pickle

DATA = Path(__file__).resolve().parent.parent / "data" / "torch"
ARCHIVES = ["script_legacy.pt", "script_string_table.pt", "traced_string_table.pt", "lite_debug.ptl"]


@cache
def members(archive: str) -> dict[str, bytes]:
    """The archive's members, keyed without the archive's top folder."""
    with zipfile.ZipFile(DATA / archive) as z:
        return {name.split("/", 1)[1]: z.read(name) for name in z.namelist()}


@cache
def expected() -> dict[str, dict[str, dict[str, object]]]:
    return json.loads((DATA / "torchscript_expected.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def debug_members(archive: str) -> dict[str, bytes]:
    return {k: v for k, v in members(archive).items() if k.endswith(".debug_pkl")}


# -- strategies --------------------------------------------------------------------------

int64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
texts = st.sampled_from(["", "a\n", "def f(x):\n    return x\n", "no newline"]) | st.text(max_size=60)
rows = st.builds(
    SourceRangeRow,
    byte_offset=int64,
    text=texts,
    filename=st.none() | st.sampled_from(["", "<string>", "/home/user/m.py"]) | st.text(max_size=20),
    starting_line=int64,
    start=int64,
    end=int64,
    tag=int64,
)


def in_string_table(row: SourceRangeRow) -> SourceRangeRow:
    """The string-table form cannot hold a ``None`` filename: torch writes ``""``."""
    return row if row.filename is not None else dataclasses.replace(row, filename="")


# -- round trips -------------------------------------------------------------------------


@given(rows=st.lists(rows, max_size=25))
def test_legacy_round_trip(rows: list[SourceRangeRow]) -> None:
    parsed = parse_debug_pkl(write_debug_pkl(rows, DebugPklForm.LEGACY))
    assert parsed.form is DebugPklForm.LEGACY
    assert list(parsed.rows) == rows


@given(rows=st.lists(rows, max_size=25))
def test_string_table_round_trip(rows: list[SourceRangeRow]) -> None:
    parsed = parse_debug_pkl(write_debug_pkl(rows, DebugPklForm.STRING_TABLE))
    assert parsed.form is DebugPklForm.STRING_TABLE
    assert list(parsed.rows) == [in_string_table(r) for r in rows]
    assert parsed.texts[0] == ""
    assert len(set(parsed.texts)) == len(parsed.texts)  # every line stored once


@given(rows=st.lists(rows, min_size=1, max_size=12), data=st.data())
def test_source_numbers_round_trip(rows: list[SourceRangeRow], data: st.DataObject) -> None:
    # Give rows with equal sources arbitrary (but consistent) source numbers.
    numbers: dict[tuple[str, str | None, int], int] = {}
    sources = []
    for row in rows:
        key = (row.text, row.filename, row.starting_line)
        if key not in numbers or data.draw(st.booleans()):
            numbers[key] = len(set(numbers.values()) | set(sources))
        sources.append(numbers[key])
    renumber = {n: i for i, n in enumerate(dict.fromkeys(sources))}
    want = tuple(renumber[n] for n in sources)
    for form in DebugPklForm:
        raw = write_debug_pkl(rows, form, sources=sources)
        parsed = parse_debug_pkl(raw)
        assert parsed.sources == want
        assert write_debug_pkl(parsed.rows, form, sources=parsed.sources) == raw


def test_rows_sharing_a_source_share_the_text_object() -> None:
    rows = [SourceRangeRow(i, "def f():\n    pass\n", "m.py", 3, i, i + 1, i) for i in range(4)]
    for form in DebugPklForm:
        parsed = parse_debug_pkl(write_debug_pkl(rows, form))
        assert len({id(r.text) for r in parsed.rows}) == 1
        assert parsed.sources == (0, 0, 0, 0)


def test_split_source_lines() -> None:
    assert split_source_lines("") == []
    assert split_source_lines("a") == ["a"]
    assert split_source_lines("a\n") == ["a\n", ""]
    assert split_source_lines("a\nb\n") == ["a\n", "b\n", ""]
    assert split_source_lines("a\n\nb") == ["a\n", "\n", "b"]


def test_writer_rejects_what_torch_cannot_hold() -> None:
    with pytest.raises(EncodeError, match="int64"):
        write_debug_pkl([SourceRangeRow(1 << 63, "", None, 0, 0, 0, 0)], DebugPklForm.LEGACY)
    with pytest.raises(EncodeError, match="not valid Unicode"):
        write_debug_pkl([SourceRangeRow(0, "\ud800", None, 0, 0, 0, 0)], DebugPklForm.LEGACY)
    with pytest.raises(EncodeError, match="tag is not an int"):
        write_debug_pkl([SourceRangeRow(0, "", None, 0, 0, 0, "1")], DebugPklForm.LEGACY)  # type: ignore[arg-type]
    rows = [SourceRangeRow(0, "a", None, 0, 0, 0, 0), SourceRangeRow(0, "b", None, 0, 0, 0, 0)]
    with pytest.raises(EncodeError, match="different sources"):
        write_debug_pkl(rows, DebugPklForm.LEGACY, sources=[0, 0])
    with pytest.raises(EncodeError, match="source numbers for"):
        write_debug_pkl([], DebugPklForm.LEGACY, sources=[0])
    with pytest.raises(EncodeError, match="cannot pickle a float"):
        write_pickle((1.5,))  # type: ignore[arg-type]


def test_writer_uses_torch_opcodes_only() -> None:
    raw = write_debug_pkl(
        [SourceRangeRow(70000, "x\n" * 300, "f.py", -5, 1 << 40, 0, 2)] * 2, DebugPklForm.STRING_TABLE
    )
    assert raw.startswith(b"\x80\x02")
    assert raw.endswith(b".")
    assert b"ctorch.jit._pickle\nbuild_intlist\n" in raw
    assert raw.count(b"build_intlist") == 1


# -- the committed torch samples ---------------------------------------------------------


@pytest.mark.parametrize("archive", ARCHIVES)
def test_samples_parse_to_the_expected_rows(archive: str) -> None:
    want = expected()[archive]
    found = 0
    for member, raw in debug_members(archive).items():
        parsed = parse_debug_pkl(raw, source=member)
        entry = want[member]
        assert parsed.form.value == entry["form"]
        assert list(parsed.sources) == entry["sources"]
        table = entry["texts"]
        assert isinstance(table, list)
        rows = [
            [r.byte_offset, table.index(r.text), r.filename, r.starting_line, r.start, r.end, r.tag]
            for r in parsed.rows
        ]
        assert rows == entry["rows"]
        found += 1
    assert found == sum(1 for m in want if m.endswith(".debug_pkl"))


@pytest.mark.parametrize("archive", ARCHIVES)
def test_samples_rewrite_byte_identically(archive: str) -> None:
    for member, raw in debug_members(archive).items():
        parsed = parse_debug_pkl(raw, source=member)
        assert write_debug_pkl(parsed.rows, parsed.form, sources=parsed.sources) == raw, member


def test_legacy_and_string_table_samples_agree() -> None:
    legacy = debug_members("script_legacy.pt")
    table = debug_members("script_string_table.pt")
    assert legacy.keys() == table.keys()
    for member in legacy:
        a = parse_debug_pkl(legacy[member])
        b = parse_debug_pkl(table[member])
        assert a.form is DebugPklForm.LEGACY
        assert b.form is DebugPklForm.STRING_TABLE
        assert a.rows == b.rows
        assert a.sources == b.sources


def test_sample_contents_make_sense() -> None:
    rows = parse_debug_pkl(debug_members("script_string_table.pt")["code/__torch__.py.debug_pkl"]).rows
    assert rows[0] == SourceRangeRow(0, "", "", 0, 0, 0, 0)  # torch's empty range, tag 0
    user = [r for r in rows if r.filename == "/home/user/project/scripts/torch/export_torchscript_sample.py"]
    assert user
    for r in user:
        assert 0 <= r.start <= r.end <= len(r.text)
        assert r.text.endswith("\n")
    assert any("return self.head(self.blocks(self.embed(x)))" in r.text for r in user)
    assert any("½·x·" in r.text for r in rows)  # non-ASCII text survives
    traced = [r for raw in debug_members("traced_string_table.pt").values() for r in parse_debug_pkl(raw).rows]
    # A traced module's "source" is the tracer's Python stack: paths inside the text.
    assert any("/home/user/.venv/lib/python3.11/site-packages/torch/" in r.text for r in traced)
    # ... and filename/starting_line name its innermost frame, which opens the text.
    for r in traced:
        if r.text:
            assert r.text.startswith(f"{r.filename}({r.starting_line}): ")


def test_tags_are_unique_per_archive_and_cover_the_callstacks() -> None:
    files = members("lite_debug.ptl")
    tags: dict[int, SourceRangeRow] = {}
    for member, raw in debug_members("lite_debug.ptl").items():
        for row in parse_debug_pkl(raw, source=member).rows:
            first = tags.setdefault(row.tag, row)
            # One tag, one range, across all files of the archive.
            assert (first.text, first.filename, first.start, first.end) == (
                row.text,
                row.filename,
                row.start,
                row.end,
            )
    cmap = parse_callstack_debug_map(files["callstack_debug_map.pkl"])
    handles = parse_mobile_debug_handles(files["mobile_debug_handles.pkl"])
    assert handles.bytecode_version == 8
    assert [f.name for f in handles.functions] == ["__torch__.TinyScript.forward"]
    seen = {row.debug_handle for row in cmap.rows}
    assert set(handles.functions[0].handles) == seen
    for row in cmap.rows:
        assert row.source_range_tag in tags
        for frame in row.callstack.frames() if row.callstack else []:
            assert frame.source_range_tag in tags


def test_callstack_tails_are_shared() -> None:
    cmap = parse_callstack_debug_map(members("lite_debug.ptl")["callstack_debug_map.pkl"])
    stacks = [row.callstack for row in cmap.rows if row.callstack is not None]
    deepest = max(stacks, key=lambda s: len(s.frames()))
    names = [f.function_name for f in deepest.frames()]
    assert names[-3:] == ["_gated", "_activation", "_gelu_tanh"]
    assert deepest.frames()[0].module is not None
    assert deepest.frames()[0].module.instance_name == "blocks"
    # Frames that the pickle shared through its memo are one object here.
    frames: list[InlinedCallStack] = [f for s in stacks for f in s.frames()]
    assert len({id(f) for f in frames}) < len(frames) / 3
    # Equal frames are never built twice when the pickle shared them.
    tails = {id(s.frames()[-1]) for s in stacks if s.frames()[-1].function_name == "_gelu_tanh"}
    assert len(tails) <= 2  # one per Block instance


def test_expected_callstacks() -> None:
    cmap = parse_callstack_debug_map(members("lite_debug.ptl")["callstack_debug_map.pkl"])
    want = expected()["lite_debug.ptl"]["callstack_debug_map.pkl"]["rows"]
    got = []
    for row in cmap.rows:
        frames = []
        for f in row.callstack.frames() if row.callstack else []:
            info = None if f.module is None else [f.module.type_name, f.module.instance_name]
            frames.append([info, f.source_range_tag, f.function_name])
        got.append([row.debug_handle, row.source_range_tag, row.node_name, frames])
    assert got == want


def test_empty_delegated_backends() -> None:
    parsed = parse_debug_pkl(members("lite_debug.ptl")["delegated_backends.debug_pkl"])
    assert parsed == DebugPkl(DebugPklForm.STRING_TABLE, (), (), ("",))


# -- shape errors name the row -----------------------------------------------------------


def table_pkl(texts: tuple[object, ...], rows: tuple[object, ...]) -> bytes:
    return write_pickle((FORMAT_WITH_STRING_TABLE, texts, rows))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (write_pickle(5), "debug_pkl holds a int"),
        (write_pickle(((0, ("a", "b"), 0),)), "row 0: range is a tuple of 2"),
        (write_pickle(((0, (("a", "b", 0), 0, 0), 0), (1, 2))), "row 1: row is a tuple of 2"),
        (write_pickle(((0, (("a", 7, 0), 0, 0), 0),)), "row 0: source text/filename must be strings"),
        (write_pickle(((0, (("a", None, "1"), 0, 0), 0),)), "row 0: starting_line must be an int"),
        (write_pickle(((0, (("a", None, 1), 0, 0), None),)), "row 0: byte_offset, start, end and tag"),
        (table_pkl(("x",), ()), "does not start with the empty string"),
        (table_pkl(("", 5), ()), "not a tuple of strings"),
        (table_pkl(("",), ((0, ((IntList([3]), 0, 0), 0, 0), 0),)), "row 0: line index 3 outside"),
        (table_pkl(("",), ((0, ((IntList([0]), 9, 0), 0, 0), 0),)), "row 0: filename index 9 outside"),
        (table_pkl(("",), ((0, (("s", 0, 0), 0, 0), 0),)), "row 0: line_indices is a str"),
        (table_pkl(("",), ((0, ((IntList([]), "0", 0), 0, 0), 0),)), "filename_index and starting_line"),
    ],
)
def test_shape_errors(raw: bytes, fragment: str) -> None:
    with pytest.raises(LegacyFormatError) as info:
        parse_debug_pkl(raw, source="x.debug_pkl")
    assert fragment in str(info.value)
    assert str(info.value).startswith("x.debug_pkl: ")


def test_string_table_expansion_is_bounded() -> None:
    line = "y" * 999 + "\n"
    raw = table_pkl(("", line), tuple((i, ((IntList([1] * 500), 0, 0), 0, 0), 0) for i in range(20)))
    assert len(raw) < 30_000  # 30 kB that would expand to 10 M characters
    with pytest.raises(LegacyFormatError, match="expands past"):
        parse_debug_pkl(raw, max_text_chars=5_000_000)
    assert len(parse_debug_pkl(raw, max_text_chars=10_000_000).rows) == 20


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (5, "callstack_debug_map holds a int"),
        (((1, 2, "n"),), "row 0: row is a tuple of 3"),
        (((1, 2, 3, None),), "row 0: debug_handle/tag must be ints"),
        (((1, 2, "n", (None, 1, None)),), "row 0: call stack frame is a tuple of 3"),
        (((1, 2, "n", (("a",), 1, None, "f")),), "module info is not"),
        (((1, 2, "n", (None, "1", None, "f")),), "call stack tag must be an int"),
        (((1, 2, "n", None), (1, 2, "n", (None, 1, 5, "f"))), "row 1: call stack frame is a int"),
    ],
)
def test_callstack_shape_errors(value: object, fragment: str) -> None:
    with pytest.raises(LegacyFormatError) as info:
        parse_callstack_debug_map(write_pickle(value))  # type: ignore[arg-type]
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ((), "not (bytecode_version"),
        ((8, ("f", ())), "function 0: entry is a tuple of 2"),
        ((8, ("f", (("function_debug_handles", (IntList([1]),)),)), 5), "function 1"),
        ((8, ("f", (("function_debug_handles", (("x",),)),))), "debug handles must be ints"),
    ],
)
def test_mobile_handles_shape_errors(value: object, fragment: str) -> None:
    with pytest.raises(LegacyFormatError) as info:
        parse_mobile_debug_handles(write_pickle(value))  # type: ignore[arg-type]
    assert fragment in str(info.value)


def test_from_value_and_plain_reader() -> None:
    raw = members("script_string_table.pt")["code/__torch__.py.debug_pkl"]
    value = read_torchscript_pickle(raw)
    assert isinstance(value, tuple)
    assert value[0] == FORMAT_WITH_STRING_TABLE
    assert debug_pkl_from_value(value) == parse_debug_pkl(raw)


# -- hostile input: truncations and bit flips of the real samples --------------------------

PARSERS: dict[str, Callable[[bytes], object]] = {
    "debug_pkl": parse_debug_pkl,
    "callstack": parse_callstack_debug_map,
    "handles": parse_mobile_debug_handles,
}


def hostile_cases() -> list[tuple[str, str, str]]:
    cases = [
        ("script_legacy.pt", "code/__torch__/torch/nn/modules/linear.py.debug_pkl", "debug_pkl"),
        ("script_legacy.pt", "code/__torch__/torch/nn/modules/normalization.py.debug_pkl", "debug_pkl"),
        ("script_string_table.pt", "code/__torch__/torch/nn/modules/linear.py.debug_pkl", "debug_pkl"),
        ("script_string_table.pt", "code/__torch__.py.debug_pkl", "debug_pkl"),
        ("lite_debug.ptl", "callstack_debug_map.pkl", "callstack"),
        ("lite_debug.ptl", "mobile_debug_handles.pkl", "handles"),
    ]
    return cases


@pytest.mark.parametrize(("archive", "member", "kind"), hostile_cases())
def test_every_truncation_raises_format_error(archive: str, member: str, kind: str) -> None:
    raw = members(archive)[member]
    parse = PARSERS[kind]
    parse(raw)
    for cut in range(len(raw)):
        with pytest.raises(LegacyFormatError):
            parse(raw[:cut])


@pytest.mark.parametrize(("archive", "member", "kind"), hostile_cases())
def test_bit_flips_only_raise_format_errors(archive: str, member: str, kind: str) -> None:
    raw = members(archive)[member]
    parse = PARSERS[kind]
    rng = random.Random(f"{archive}/{member}")
    positions = range(len(raw)) if len(raw) <= 400 else rng.sample(range(len(raw)), 400)
    for pos in positions:
        for bit in range(8) if len(raw) <= 400 else (rng.randrange(8),):
            data = bytearray(raw)
            data[pos] ^= 1 << bit
            with contextlib.suppress(LegacyFormatError):
                parse(bytes(data))


@given(data=st.data())
def test_random_multi_flips_only_raise_format_errors(data: st.DataObject) -> None:
    archive, member, kind = data.draw(st.sampled_from(hostile_cases()))
    raw = bytearray(members(archive)[member])
    for _ in range(data.draw(st.integers(1, 6))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(LegacyFormatError):
        PARSERS[kind](bytes(raw))


def test_callstack_map_type() -> None:
    assert isinstance(parse_callstack_debug_map(write_pickle(())), CallstackDebugMap)


# -- whole archives ----------------------------------------------------------------------


@pytest.mark.parametrize("archive", ARCHIVES)
def test_read_torchscript_debug_info(archive: str) -> None:
    info = read_torchscript_debug_info(DATA / archive)
    assert info.archive_name == archive.rsplit(".", 1)[0]
    assert info.version == "3"
    want = {m for m in expected()[archive] if m.endswith(".debug_pkl") and m != "delegated_backends.debug_pkl"}
    assert set(info.debug_pkls) == want
    for member, parsed in info.debug_pkls.items():
        code = info.code[member.removesuffix(".debug_pkl")].encode("utf-8")
        assert all(0 <= row.byte_offset <= len(code) for row in parsed.rows)
    lite = archive.endswith(".ptl")
    assert (info.callstack_debug_map is not None) is lite
    assert (info.mobile_debug_handles is not None) is lite
    same_bytes = read_torchscript_debug_info((DATA / archive).read_bytes())
    assert same_bytes.debug_pkls == info.debug_pkls


def test_read_torchscript_debug_info_errors(tmp_path: Path) -> None:
    with pytest.raises(LegacyFormatError, match=r"not a readable zip archive: .*; expected a TorchScript archive"):
        read_torchscript_debug_info(b"not a zip", name="x.pt")
    raw = (DATA / "script_legacy.pt").read_bytes()
    with pytest.raises(LegacyFormatError, match="exceeds the 100-byte limit"):
        read_torchscript_debug_info(raw, max_member_bytes=100)
    two = tmp_path / "two.pt"
    with zipfile.ZipFile(two, "w") as z:
        z.writestr("a/version", "3\n")
        z.writestr("b/version", "3\n")
    with pytest.raises(LegacyFormatError, match="one top-level folder"):
        read_torchscript_debug_info(two)
    bad = tmp_path / "bad.pt"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("m/code/__torch__.py.debug_pkl", b"\x80\x02cos\nsystem\n.")
    with pytest.raises(UnsafePickleError, match=r"bad\.pt:code/__torch__\.py\.debug_pkl: at byte 2"):
        read_torchscript_debug_info(bad)
