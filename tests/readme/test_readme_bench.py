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
from benchmarks.bench_sizes import LADDER
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
        f"| builder throughput, 10-frame stacks (CPU time of this process, not a ratio) | "
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


# -- against torch itself -------------------------------------------------------------------------------------


def _torch_models() -> list[tuple[str, int]]:
    """The corpus's export programs, as (stem, nodes), largest first."""
    models = []
    for row in _record("torch"):
        m = re.fullmatch(r"(\S+) \((\d+) nodes\): zstd -19 of model\.json", row["name"])
        if m:
            models.append((m.group(1), int(m.group(2))))
    return sorted(models, key=lambda m: (-m[1], m[0]))


def torch_table_rows() -> list[str]:
    rows = []
    targets: dict[str, set[float]] = {k: set() for k in ("size", "best", "decode", "encode", "memory")}
    for stem, nodes in _torch_models():
        name = re.escape(f"{stem} ({nodes} nodes)")
        size = _row("torch", rf"{name}: msgpack vs model\.json")
        best = _row("torch", rf"{name}: best codec\+zstd-19 vs zstd-19 model\.json")
        codec = re.match(r"([\w-]+), built-in dictionary", best["note"])
        assert codec is not None, best["note"]
        decode = _row("torch", rf"{name}: decode to typed objects")
        decode_c = _row("torch", rf"{name}: decode to typed objects \(columnar\)")
        encode = _row("torch", rf"{name}: encode")
        memory = _row("torch", rf"{name}: memory of the decoded document")
        for key, row in (("size", size), ("best", best), ("decode", decode), ("encode", encode), ("memory", memory)):
            if row["target"] is not None:
                targets[key].add(row["target"])
        cells = [
            f"`{stem}`, {nodes:,} nodes",
            f"{size['ratio']:.2f}x{_missed(size)}",
            f"{best['ratio']:.2f}x ({codec.group(1)}){_missed(best)}",
            f"{decode['ratio']:.0f}x (columnar {decode_c['ratio']:.0f}x){_missed(decode) or _missed(decode_c)}",
            f"{encode['ratio']:.0f}x{_missed(encode)}",
            f"{memory['ratio']:.2f}x{_missed(memory)}",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    assert targets == {"size": {0.2}, "best": {0.5, 0.6}, "decode": {50}, "encode": {10}, "memory": {0.3}}, targets
    rows.append(
        "| targets | <= 0.2x from 1,000 nodes | <= 0.5x from 100 nodes, <= 0.6x below | >= 50x (columnar: from "
        "10,000 nodes) | >= 10x | <= 0.3x |"
    )
    return rows


def why_decode_sentence() -> str:
    """The "Why" section's decode figure: MessagePack decode against torch's own serde, over the corpus."""
    ratios = [
        _row("torch", rf"{re.escape(f'{s} ({n} nodes)')}: decode to typed objects")["ratio"] for s, n in _torch_models()
    ]
    return (
        f"decoding into typed objects is {min(ratios):.0f}x-{max(ratios):.0f}x faster than torch's own Python serde "
        f"(`json.loads` plus its reflective `_dict_to_dataclass`) on the exported corpus"
    )


def torchscript_sentence() -> str:
    clauses = []
    for row in _record("torch"):
        m = re.fullmatch(r"(\S+\.ptl?): tracepack vs debug_pkl \(legacy\)", row["name"])
        if not m:
            continue
        name = re.escape(m.group(1))
        table = _row("torch", rf"{name}: tracepack vs debug_pkl \(string_table\)")
        zstd = _row("torch", rf"{name}: tracepack\+zstd-19 vs debug_pkl \(string table\)")
        clauses.append(f"`{m.group(1)}` {row['ratio']:.2f}x / {table['ratio']:.2f}x ({zstd['ratio']:.2f}x)")
    assert len(clauses) >= 3
    return "(legacy layout / string-table layout; with zstd -19, against the string-table layout): " + ", ".join(
        clauses
    )


# -- size at every graph size -----------------------------------------------------------------------------------


def _ladder(what: str) -> list[tuple[int, Row]]:
    """(nodes, row) of ``what`` on every rung of the ladder."""
    out = []
    for stem in LADDER:
        row, m = _one("sizes", rf"{re.escape(stem)} \((\d+) nodes\): {what}")
        out.append((int(m.group(1)), row))
    return out


def sizes_sentences() -> list[str]:
    uncompressed = _ladder(r"best codec uncompressed vs model\.json")
    columns = _ladder(r"flatbuffers-columns\+zstd-19\+dict vs zstd-19 model\.json")
    encode, decode = _ladder("encode vs today"), _ladder("decode vs today")
    # the forms loops in Python: timed on the rungs whose best codec is columnar (the one with C loops)
    python = [r for r in _record("sizes") if r["name"].endswith(": encode vs today, pure Python")]
    geo = _row("sizes", rf"geometric mean of best codec\+zstd-19 over {len(LADDER)} models")
    from_ = min(n for n, _ in uncompressed if n >= 100)
    assert {r["target"] for _, r in columns} == {1.0}
    sentences = [
        f"the best codec uncompressed is {_span([r['ratio'] for n, r in uncompressed if n >= 100])} of `model.json` "
        f"from {from_:,} nodes on",
        f"FlatBuffers (the column layout, `--codec flatbuffers`) + zstd -19 with the built-in dictionary is "
        f"{_span([r['ratio'] for _, r in columns])} of `zstd -19 model.json` at every size (target 1.0x)",
        f"the best codec + zstd -19 {geo['value']:.3f}x (geometric mean over the {len(LADDER)} rungs)",
        f"{_span([r['ratio'] for _, r in encode])} and {_span([r['ratio'] for _, r in decode])} of their speed "
        f"(target: no more than 20% slower; {sum(not r['ok'] for _, r in encode + decode)} of "
        f"{len(encode) + len(decode)} figures under it)",
    ]
    if python:
        sentences.append(f"with its Python loops alone, writing is {_span([r['ratio'] for r in python])}")
    return sentences


# -- the tests ------------------------------------------------------------------------------------------------

QUOTED: dict[str, Callable[[], list[str]]] = {
    "core table": core_table_rows,
    "verifier": verifier_sentences,
    "torch table": torch_table_rows,
    "torchscript": lambda: [torchscript_sentence()],
    "why decode": lambda: [why_decode_sentence()],
    "sizes": sizes_sentences,
}


@pytest.mark.parametrize("part", sorted(QUOTED))
def test_the_readme_quotes_the_record(part: str) -> None:
    flat = _flat(_readme())
    for text in QUOTED[part]():
        assert _flat(text) in flat, f"README.md should say: {text}"


@pytest.mark.parametrize("section", ["core", "flatbuffers", "torch", "sizes"])
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


def test_the_torch_record_is_the_whole_corpus() -> None:
    """Every export program and TorchScript file of the corpus, and the 10k-node model, are in the record."""
    corpus = ROOT / "tests" / "data" / "torch" / "corpus"
    stems = {stem for stem, _ in _torch_models()}
    assert stems == {p.stem for p in corpus.glob("*.pt2")} | {"big"}
    scripted = {
        m.group(1)
        for r in _record("torch")
        if (m := re.fullmatch(r"(\S+): tracepack vs debug_pkl \(legacy\)", r["name"]))
    }
    assert scripted == {p.name for p in corpus.iterdir() if p.suffix in (".pt", ".ptl")}


def test_no_stale_caveat() -> None:
    """The torch table is measured with the built-in dictionary now: the old caveat is gone."""
    assert "measured before the built-in dictionary" not in _flat(_readme())
