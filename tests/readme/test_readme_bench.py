"""The README's bench figures (the "## Benchmarks" section, outside the defaults paragraph that
test_readme_figures.py checks) are the recorded runs': ``benchmarks/results/{core,flatbuffers,torch,sizes}.json``,
what ``python -m benchmarks.run SECTION --record`` wrote. Each quoted table and sentence is computed here from
its record, formatted as the README prints it, so a figure typed from memory, or left behind when a section is
recorded again, fails; the failure message is the text the README should hold.

The "Why" section's sample table and ratios are computed by running the demo (test_readme.py,
test_readme_facts.py); its 10k-node figure is the defaults record's (test_readme_figures.py).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import pytest

from benchmarks.bench_flatbuffers import NODES as FLATBUFFERS_NODES
from benchmarks.report import RESULTS, format_value
from tests.readme.transcript import ROOT

Row = dict[str, Any]


def _record(section: str) -> list[Row]:
    rows: list[Row] = json.loads((RESULTS / f"{section}.json").read_text(encoding="utf-8"))
    assert rows, section
    assert {r["section"] for r in rows} == {section}
    return rows


def _one(section: str, pattern: str) -> tuple[Row, re.Match[str]]:
    """The one row of ``section`` whose name matches ``pattern`` (a full match), and the match."""
    found = [(r, m) for r in _record(section) if (m := re.fullmatch(pattern, r["name"]))]
    assert len(found) == 1, f"{section}: {len(found)} rows match {pattern!r}"
    return found[0]


def _row(section: str, pattern: str) -> Row:
    return _one(section, pattern)[0]


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _missed(row: Row) -> str:
    """What the README adds to a figure whose recorded run missed its target."""
    return "" if row["ok"] else " (missed in the recorded run)"


def _span(values: list[float], digits: int = 2) -> str:
    """``0.52x-0.59x`` (or ``0.30x`` when both ends print alike)."""
    lo, hi = f"{min(values):.{digits}f}x", f"{max(values):.{digits}f}x"
    return lo if lo == hi else f"{lo}-{hi}"


def _k(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else f"{n:,}"


# -- the core table ("figure | result | target") -----------------------------------------------------------


def core_table_rows() -> list[str]:
    debug, m = _one("core", r"debug info, (\d+) nodes: interned vs one string per node")
    decode, d = _one("core", r"decode (\d+) nodes to typed objects \(\+validation\)")
    memory, mm = _one("core", r"memory: (\d+)k nodes, (\d+) stacks, all traces rendered")
    distinct = _row("core", "rendered trace objects per distinct stack")
    builder = _row("core", r"builder: \d+k nodes/s, 10-frame stacks")
    a = _row("flatbuffers", r"\(a\) open \+ one node's stack trace vs full decode")
    ac = _row("flatbuffers", r"\(a\) column layout: open \+ one node's stack trace vs full decode")
    peak = _row("flatbuffers", r"\(b\) lazy open \+ one trace: peak traced memory vs file")
    rss = _row("flatbuffers", r"\(b\) lazy open \+ one trace: RSS growth vs file")
    full = _row("flatbuffers", r"\(c\) full decode: flatbuffers-rows vs msgpack")
    nodes, stacks = int(mm.group(1)) * 1000, int(mm.group(2))
    assert distinct["baseline"] == stacks
    assert peak["baseline"] == rss["baseline"]
    per_stack = "one per stack" if distinct["value"] == stacks else f"{distinct['value']:,.0f} for {stacks:,} stacks"
    assert builder["unit"] == "s"
    assert builder["target"] == 1.0
    rate, rate_target = 1 / builder["value"], 1 / builder["baseline"]
    return [
        f"| debug info of {int(m.group(1)):,} nodes: interned tables vs one string per node (uncompressed) | "
        f"{debug['ratio']:.2f}x ({format_value(debug['value'], 'B')} vs {format_value(debug['baseline'], 'B')})"
        f"{_missed(debug)} | <= {debug['target']:g}x |",
        f"| decode {int(d.group(1)):,} nodes into typed, validated objects vs `json.loads` + reflective dataclasses | "
        f"{decode['ratio']:.0f}x faster{_missed(decode)} | >= {decode['target']:g}x |",
        f"| memory: {_k(nodes)} nodes sharing {_k(stacks)} stacks, loaded and every trace rendered, vs `json.loads` "
        f"of per-node strings | {memory['ratio']:.2f}x{_missed(memory)} | <= {memory['target']:g}x |",
        f"| distinct rendered trace strings for {_k(nodes)} nodes sharing {_k(stacks)} stacks | "
        f"{distinct['value']:,.0f} ({per_stack}){_missed(distinct)} | one per stack |",
        f"| builder throughput, 10-frame stacks (wall clock, not a ratio: the machine's load moves it) | "
        f"{rate / 1000:.0f}k nodes/s{_missed(builder)} | >= {rate_target / 1000:.0f}k nodes/s |",
        f"| FlatBuffers, {_k(FLATBUFFERS_NODES)} nodes: `tracepack.open` + one node's stack trace vs a full decode | "
        f"{a['ratio']:,.0f}x faster ({format_value(a['value'], 's')} vs {format_value(a['baseline'], 's')})"
        f"{_missed(a)} | >= {a['target']:g}x |",
        f"| the same in the column layout (`--codec flatbuffers`) | {ac['ratio']:,.0f}x faster "
        f"({format_value(ac['value'], 's')} vs {format_value(ac['baseline'], 's')}){_missed(ac)} | "
        f">= {ac['target']:g}x |",
        f"| FlatBuffers lazy open + one trace: peak traced memory / RSS growth vs file size "
        f"({format_value(peak['baseline'], 'B')}) | {peak['ratio']:.3f}x / {rss['ratio']:.2f}x"
        f"{_missed(peak) or _missed(rss)} | <= {peak['target']:g}x |",
        f"| FlatBuffers full decode vs MessagePack full decode ({_k(FLATBUFFERS_NODES)} nodes) | {full['ratio']:.2f}x "
        f"({format_value(full['value'], 's')} vs {format_value(full['baseline'], 's')}) | (reported) |",
    ]


def verifier_sentences() -> list[str]:
    opened = _row("flatbuffers", r"\(d\) verifier: open \(header, root, tables\) vs full verify")
    lookup = _row("flatbuffers", r"\(d\) verifier: checked node lookup by name vs full verify")
    assert opened["baseline"] == lookup["baseline"]
    return [
        f"column lengths ({format_value(opened['value'], 's')} on the {_k(FLATBUFFERS_NODES)}-node file)",
        f"a checked node lookup by name takes {format_value(lookup['value'], 's')}",
        f"`LazyDocument.verify()` is the optional one-time linear pass ({format_value(opened['baseline'], 's')} for "
        f"{_k(FLATBUFFERS_NODES)} nodes)",
    ]


# -- the tests ------------------------------------------------------------------------------------------------

QUOTED: dict[str, Callable[[], list[str]]] = {
    "core table": core_table_rows,
    "verifier": verifier_sentences,
}


@pytest.mark.parametrize("part", sorted(QUOTED))
def test_the_readme_quotes_the_record(part: str) -> None:
    flat = _flat(_readme())
    for text in QUOTED[part]():
        assert _flat(text) in flat, f"README.md should say: {text}"


@pytest.mark.parametrize("section", ["core", "flatbuffers"])
def test_each_record_is_consistent(section: str) -> None:
    """Each row's ratio and verdict are its value's and baseline's (the record was not edited by hand)."""
    for row in _record(section):
        if row["higher_is_better"]:
            ratio = row["baseline"] / row["value"] if row["value"] else math.inf
        else:
            ratio = row["value"] / row["baseline"] if row["baseline"] else math.inf
        assert math.isclose(row["ratio"], ratio), row["name"]
        if row["target"] is None:
            assert row["ok"], row["name"]
        else:
            ok = ratio >= row["target"] if row["higher_is_better"] else ratio <= row["target"]
            assert row["ok"] == ok, row["name"]
