"""The FlatBuffers column layout (codec 4, spec §7) against the C++ reader: the sample's columns written again
with one column changed (its kind, count, values, a path twice, a blob column in place of a text one), each a
valid FlatBuffer, so that the checks of §7.4 on reading a column are met one by one. The C++ reader must give
what the Python reader gives on the same bytes: the same output, or the same exit code, class, place and message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import tracepack
from tests.cpp import harness
from tracepack import container
from tracepack.codecs import columnar as col
from tracepack.codecs import fbcolumns as fc
from tracepack.versions import generated

SAMPLE = harness.REPO / "src" / "tracepack" / "data" / "sample" / "model.json"
Columns = dict[str, tuple[int, Sequence[Any]]]
K = {name: i for i, name in enumerate(fc.KIND_NAMES)}


@cache
def _columns() -> tuple[tuple[str, tuple[int, tuple[Any, ...]]], ...]:
    s = fc._Shredder()
    s.shred(col._plan(generated((1, 2)).model.Document), [tracepack.load(SAMPLE).raw])
    return tuple((p, (k, tuple(v))) for p, (k, v) in s.values.items())


class _Twice:
    """A directory with one path written twice (a dict cannot hold it)."""

    def __init__(self, items: list[tuple[str, tuple[int, Sequence[Any]]]]) -> None:
        self.items = items

    def values(self) -> list[tuple[int, Sequence[Any]]]:
        return [v for _, v in self.items]

    def __iter__(self) -> Iterator[str]:
        return iter(p for p, _ in self.items)

    def __len__(self) -> int:
        return len(self.items)


def _set(path: str, kind: str, values: Callable[[list[Any]], list[Any]]) -> Callable[[Columns], None]:
    def change(cols: Columns) -> None:
        cols[path] = (K[kind], values(list(cols[path][1])))

    return change


def _drop(path: str) -> Callable[[Columns], None]:
    def change(cols: Columns) -> None:
        del cols[path]

    return change


NODES = "$.graph.nodes[]"
CASES: dict[str, Callable[[Columns], None]] = {
    "int as float64": _set(f"{NODES}.stack", "float64", lambda v: [float(x) for x in v]),
    "int as text": _set(f"{NODES}.stack", "text", lambda v: [str(x) for x in v]),
    "int as bool": _set(f"{NODES}.stack", "bool", lambda v: [bool(x) for x in v]),
    "int as int64": _set(f"{NODES}.stack", "int64", lambda v: v),
    "int as uint64": _set(f"{NODES}.stack", "uint64", lambda v: v),
    "negative ref": _set(f"{NODES}.stack", "int8", lambda v: [-1, *v[1:]]),
    "too few rows": _set(f"{NODES}.stack", "uint8", lambda v: v[:-1]),
    "too many rows": _set(f"{NODES}.stack", "uint8", lambda v: [*v, 0]),
    "version past uint16": _set("$.header.version.major", "int32", lambda v: [70000]),
    "version negative": _set("$.header.version.minor", "int64", lambda v: [-(1 << 40)]),
    "ref past uint32": _set(f"{NODES}.module", "uint64", lambda v: [*v[:-1], 1 << 33]),
    "enum unknown": _set(f"{NODES}.inputs[].kind", "uint8", lambda v: [*v[:5], 9, *v[6:]]),
    "enum negative": _set(f"{NODES}.inputs[].kind", "int8", lambda v: [-3, *v[1:]]),
    "enum as float": _set(f"{NODES}.inputs[].kind", "float64", lambda v: [float(x) for x in v]),
    "tag zero": _set(f"{NODES}.inputs[].arg#tag", "uint8", lambda v: [0, *v[1:]]),
    "tag unknown": _set(f"{NODES}.inputs[].arg#tag", "uint16", lambda v: [*v[:3], 300, *v[4:]]),
    "len negative": _set(f"{NODES}.inputs#len", "int8", lambda v: [-1, *v[1:]]),
    "len as text": _set(f"{NODES}.inputs#len", "text", lambda v: [str(x) for x in v]),
    "len too long": _set(f"{NODES}.inputs#len", "uint16", lambda v: [v[0] + 1000, *v[1:]]),
    "float as int": _set(f"{NODES}.inputs[].arg<6>.value", "uint8", lambda v: [1] * len(v)),
    "bool as int": _set("$.graph.values[].requires_grad", "uint8", lambda v: [int(x) for x in v]),
    "present as int": _set("$.signature#present", "uint8", lambda v: [1]),
    "string as int": _set("$.strings[]", "uint16", lambda v: list(range(len(v)))),
    "strings as blob": _set("$.strings[]", "blob", lambda v: [x.encode() for x in v]),
    "strings as blob, not UTF-8": _set("$.strings[]", "blob", lambda v: [x.encode() for x in v[:-1]] + [b"a\xffb"]),
    "strings as blob, a NUL": _set("$.strings[]", "blob", lambda v: [x.encode() for x in v[:-1]] + [b"a\0b"]),
    "magic as blob": _set("$.header.magic", "blob", lambda v: [b"tracepack"]),
    "magic wrong": _set("$.header.magic", "text", lambda v: ["tracepacK"]),
    "missing names": _drop(f"{NODES}.name"),
    "missing tags": _drop(f"{NODES}.inputs[].arg#tag"),
    "missing variant": _drop(f"{NODES}.inputs[].arg<2>.name"),
    "missing lengths": _drop(f"{NODES}.inputs#len"),
    "missing present": _drop("$.signature#present"),
    "missing magic": _drop("$.header.magic"),
    "missing strings": _drop("$.strings[]"),
    "unknown path": _set("$.graph.nodes[].no_such_field", "uint8", lambda v: [1] * 70),
}


def _payload(case: str) -> bytes:
    cols: Columns = dict(_columns())
    if case == "unknown path":
        cols["$.graph.nodes[].no_such_field"] = (K["uint8"], [1] * 70)
    else:
        CASES[case](cols)
    return fc._write(cols)


def _check(cpp_bin: Path, tmp_path: Path, payload: bytes) -> harness.Outcome:
    path = tmp_path / "v.tpk"
    path.write_bytes(container.pack(payload, schema_version=(1, 2), codec="flatbuffers-columns"))
    return harness.compare(cpp_bin, path)


@pytest.mark.parametrize("case", sorted(CASES))
def test_columns(cpp_bin: Path, tmp_path: Path, case: str) -> None:
    _check(cpp_bin, tmp_path, _payload(case))


def test_a_path_twice(cpp_bin: Path, tmp_path: Path) -> None:
    items = list(_columns())
    twice = _Twice([*items, items[5]])
    got = _check(cpp_bin, tmp_path, fc._write(twice))  # type: ignore[arg-type]
    assert got.code == 2


def test_unchanged_columns_print_as_python(cpp_bin: Path, tmp_path: Path) -> None:
    got = _check(cpp_bin, tmp_path, fc._write(dict(_columns())))
    assert got.code == 0
    assert got.stdout.startswith(b"{")


#: The cases the Python reader accepts (any integer kind that holds the values, a blob for strings, a missing
#: `#len` or `#present` column: its default, an unknown path: ignored); every other one is refused.
VALID = {
    "int as int64", "int as uint64", "strings as blob", "strings as blob, a NUL", "magic as blob",
    "missing lengths", "missing present", "unknown path",
}  # fmt: skip


def test_which_cases_are_refused(tmp_path: Path) -> None:
    codes = {case: harness.reference(_write_case(tmp_path, case)).code for case in CASES}
    assert {case for case, code in codes.items() if code == 0} == VALID, codes
    assert all(code == 2 for case, code in codes.items() if case not in VALID), codes


def _write_case(tmp_path: Path, case: str) -> Path:
    path = tmp_path / f"{len(case)}.tpk"
    path.write_bytes(container.pack(_payload(case), schema_version=(1, 2), codec="flatbuffers-columns"))
    return path
