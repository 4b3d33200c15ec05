"""Size at every graph size (issue 10): tracepack against ``zstd -19`` of torch's own ``model.json``.

The ladder is ``scripts/torch/export_corpus.py``'s ``size_*`` entries (about 10, 30, 60, 130, 450,
1k and 10k nodes, each with static and dynamic shapes), exported once with torch 2.13 into
``.bench/sizes``. The built-in dictionary (``dictionaries.DEFAULT``) was trained on other models
(``scripts/torch/dictionary_models.py``): no model of the ladder is in its training set.

Per model, in one run: ``zstd -19`` of ``model.json`` (the baseline), and every codec uncompressed,
with ``zstd -19`` and with ``zstd -19`` + the built-in dictionary. Targets:

* best codec + zstd <= 0.5x of zstd -19 of model.json at >= 100 nodes, <= 0.6x below (the best codec is
  the one ``convert`` writes, :func:`tracepack.codecs.choose`: the smallest, or a faster one within 5%);
  the geometric mean over the ladder <= 0.5x;
* FlatBuffers + zstd <= 1.0x at every size: the column layout (``flatbuffers-columns``, codec id 4,
  lazily readable; what ``--codec flatbuffers`` writes); the row layout (``flatbuffers-rows``, id 2) is
  shown beside it, without a target;
  the column layout's encode and decode no more than 20% slower than the row layout's (timed
  interleaved, the payload alone);
* the best codec uncompressed <= 0.1x of model.json at >= 100 nodes;
* writing and reading the best codec no more than 20% slower than today, the builds before the size
  work (issue 10): the same program without 1.2's typed signature and interned extensions, string
  columns plain (``columnar.plain_strings()``), no dictionary; encode+compress and
  decompress+decode at zstd level 3, best CPU time of this process over rounds that time every
  side in turn. The same code writes and reads both sides, so what is timed is what the size work
  adds (a faster shared path speeds both up alike). Also against main before schema 1.2 (``forms`` strings, dictionary
  ``torch-export-2``): what 1.2's tables and dictionary add, with the same target.

Also a byte-for-byte check: ``export_model_json`` of the decoded best file is the input.
Skipped, with a note, when torch is not installed and the ladder has not been exported.
"""

from __future__ import annotations

import gc
import importlib.util
import math
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import zstandard

import tracepack
from benchmarks.report import Figure, Report, best_time
from tracepack import dictionaries, migrations
from tracepack.codecs import TORCH_CANDIDATES, choose, columnar
from tracepack.versions import CURRENT

SECTION = "sizes"
ROOT = Path(__file__).resolve().parent.parent
LADDER_DIR = ROOT / ".bench" / "sizes"
#: The ladder, smallest first (``export_corpus.SIZES``), each static and dynamic.
RUNGS = ("size_10", "size_30", "size_60", "size_130", "size_450", "size_1k", "size_10k")
LADDER = tuple(n for rung in RUNGS for n in (rung, f"{rung}_dyn"))
#: Codecs tracepack writes a torch document with; the best is the smallest of them.
CODECS = ("columnar", "msgpack", "flatbuffers-columns", "flatbuffers-rows", "json")
BEST_CANDIDATES = TORCH_CANDIDATES  # what convert weighs, fastest first: codecs.choose picks the "best"
#: The candidates before the FlatBuffers column layout (the speed figures' "before" side writes the best of these).
BEFORE_CANDIDATES = ("columnar", "msgpack")


def _z19(data: bytes, zdict: zstandard.ZstdCompressionDict | None = None) -> int:
    cctx = zstandard.ZstdCompressor(level=19, dict_data=zdict) if zdict else zstandard.ZstdCompressor(level=19)
    return len(cctx.compress(data))


def _model_json(path: Path) -> bytes:
    with zipfile.ZipFile(path) as archive:
        (member,) = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
        return archive.read(member)


def ladder() -> list[Path]:
    """The ladder's ``.pt2`` files, exported with torch first if missing (a few minutes, once)."""
    missing = [n for n in LADDER if not (LADDER_DIR / f"{n}.pt2").exists()]
    if missing and importlib.util.find_spec("torch") is not None:
        print(f"(exporting {len(missing)} ladder models with torch into {LADDER_DIR}: a few minutes)", flush=True)
        script = ROOT / "scripts" / "torch" / "export_corpus.py"
        subprocess.run([sys.executable, "-W", "ignore", str(script), str(LADDER_DIR), *missing], check=False)
    return [LADDER_DIR / f"{n}.pt2" for n in LADDER if (LADDER_DIR / f"{n}.pt2").exists()]


def _target(nodes: int) -> float:
    return 0.5 if nodes >= 100 else 0.6


def run(report: Report) -> None:
    from tracepack.torch.export.model_json import export_model_json, import_model_json

    paths = ladder()
    if not paths:
        print("(the size ladder is not exported and torch is not installed: skipped; `make venv-torch`)")
        return
    zdict = dictionaries.get(dictionaries.DEFAULT)
    ratios: list[float] = []
    for path in paths:
        data = _model_json(path)
        doc = import_model_json(data)
        name = f"{path.stem} ({len(doc)} nodes)"
        z_json = _z19(data)
        report.add(Figure(SECTION, f"{name}: zstd -19 of model.json", z_json, len(data), "B", higher_is_better=False))
        # The bare payloads (no block table: zstd files have none), compressed here.
        raw = {c: tracepack.dumps(doc, codec=c, compression="none", block_checksums=False) for c in CODECS}
        packed = {c: _z19(raw[c][48:], zdict) + 48 for c in CODECS}
        plain = {c: _z19(raw[c][48:]) + 48 for c in CODECS}
        for codec in CODECS:
            note = f"without the dictionary {plain[codec] / z_json:.2f}x"
            if codec == "flatbuffers-rows":
                note += "; the row layout: the column layout (flatbuffers-columns, --codec flatbuffers) is the target"
            report.add(
                Figure(SECTION, f"{name}: {codec}+zstd-19+dict vs zstd-19 model.json", packed[codec], z_json, "B",
                       higher_is_better=False, target=1.0 if codec == "flatbuffers-columns" else None, note=note)
            )  # fmt: skip
        _flatbuffers_layouts(report, name, doc, z_json, zdict)
        _flatbuffers_columns_speed(report, name, doc)
        best = choose({c: packed[c] for c in BEST_CANDIDATES})  # as convert picks (within 5%, the faster)
        ratios.append(packed[best] / z_json)
        report.add(
            Figure(SECTION, f"{name}: best codec+zstd-19 vs zstd-19 model.json", packed[best], z_json, "B",
                   higher_is_better=False, target=_target(len(doc)), note=best)
        )  # fmt: skip
        smallest = min(BEST_CANDIDATES, key=lambda c: len(raw[c]))
        report.add(
            Figure(SECTION, f"{name}: best codec uncompressed vs model.json", len(raw[smallest]), len(data), "B",
                   higher_is_better=False, target=0.1 if len(doc) >= 100 else None, note=smallest)
        )  # fmt: skip
        written = tracepack.dumps(doc, codec=best, compression="zstd", level=19, zstd_dict=zdict)
        if export_model_json(tracepack.loads(written)) != data:
            raise AssertionError(f"{name}: model.json does not come back byte for byte")
        _speed(report, name, doc, best, zdict, before_codec=min(BEFORE_CANDIDATES, key=lambda c: packed[c]))
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    report.add(
        Figure(SECTION, f"geometric mean of best codec+zstd-19 over {len(ratios)} models", geo, 1.0, "x",
               higher_is_better=False, target=0.5)
    )  # fmt: skip


def raw_in(raw: Any, version: tuple[int, int]) -> Any:
    """``raw`` (a document of this build's version) in ``version``'s model: migrated down or up; a draft
    without its migration yet by its fields (newer minors only add fields with defaults); None when the
    document cannot be written in ``version`` without losing information."""
    from tracepack import migrations
    from tracepack.codecs import flatbuffers as fbc
    from tracepack.codecs import msgpack as mpc
    from tracepack.errors import TracepackError

    if version == CURRENT:
        return raw
    try:
        if version < CURRENT:
            return migrations.downgrade(raw, CURRENT, version)
        out = migrations.upgrade(raw, CURRENT, version)
    except TracepackError:
        if version < CURRENT:
            return None
        out = mpc.decode(mpc.encode(raw, CURRENT), version)
    out.header.version = fbc.codec_module(version).m.Version(*version)
    return out


def _flatbuffers_layouts(
    report: Report, name: str, doc: tracepack.Document, z_json: int, zdict: zstandard.ZstdCompressionDict
) -> None:
    """FlatBuffers + zstd -19 (+ dictionary) in the newest version's layout (its own vtable per table, 1.2
    on) against 1.1's (shared vtables), both against zstd -19 of model.json; and the payload's encode and
    full decode, newest layout against 1.1's, CPU time, every side in turn per round (:func:`_interleaved`;
    the same program: in 1.1 as 1.1 holds it, the signature and module call graph in the program's JSON;
    in the newest version as this build writes it)."""
    from tracepack.codecs import flatbuffers as fbc
    from tracepack.versions import VERSIONS

    newest, old = max(VERSIONS), (1, 1)
    raw_old, raw_new = raw_in(doc.raw, old), raw_in(doc.raw, newest)
    if newest <= old or raw_old is None or raw_new is None:
        return
    before, after = fbc.encode(raw_old, old), fbc.encode(raw_new, newest)
    label = f"{newest[0]}.{newest[1]}"
    report.add(
        Figure(SECTION, f"{name}: flatbuffers-rows {label} layout+zstd-19+dict vs zstd-19 model.json",
               _z19(after, zdict), z_json, "B", higher_is_better=False,
               note=f"1.1 layout {_z19(before, zdict) / z_json:.2f}x; uncompressed {len(after)} B vs {len(before)} B")
    )  # fmt: skip
    small = len(doc) < 2000
    rounds, min_time = (7, 0.1) if small else (5, 0.0)
    t_enc0, t_enc, t_dec0, t_dec = _interleaved(
        [
            partial(fbc.encode, raw_old, old),
            partial(fbc.encode, raw_new, newest),
            partial(fbc.decode, before, old),
            partial(fbc.decode, after, newest),
        ],
        rounds=rounds,
        min_time=min_time,
    )
    note = f"flatbuffers-rows payload, {label} layout vs 1.1's; CPU time; ratio < 1 means slower"
    for what, t, t0 in (("encode", t_enc, t_enc0), ("decode", t_dec, t_dec0)):
        report.add(
            Figure(SECTION, f"{name}: flatbuffers-rows {what} vs 1.1 layout", t, t0, "s", target=1 / 1.2, note=note)
        )


def _flatbuffers_columns_speed(report: Report, name: str, doc: tracepack.Document) -> None:
    """The column layout's payload encode and full decode against the row layout's, in CPU time, every
    side in turn in each round (:func:`_interleaved`)."""
    from tracepack.codecs import fbcolumns
    from tracepack.codecs import flatbuffers as fbc

    raw = doc.raw
    rows, cols = fbc.encode(raw, CURRENT), fbcolumns.encode(raw, CURRENT)
    if fbcolumns.decode(cols, CURRENT) != raw or fbc.decode(rows, CURRENT) != raw:
        raise AssertionError(f"{name}: a FlatBuffers layout does not decode to its document")
    rounds, min_time = (7, 0.05) if len(doc) < 2000 else (5, 0.0)
    best = _interleaved(
        [
            partial(fbcolumns.encode, raw, CURRENT),
            partial(fbc.encode, raw, CURRENT),
            partial(fbcolumns.decode, cols, CURRENT),
            partial(fbc.decode, rows, CURRENT),
        ],
        rounds=rounds,
        min_time=min_time,
    )
    times = {"encode": (best[0], best[1]), "decode": (best[2], best[3])}
    note = "flatbuffers-columns vs flatbuffers-rows payload, CPU time; ratio < 1 means slower"
    for what, (t, t0) in times.items():
        report.add(Figure(SECTION, f"{name}: flatbuffers-columns {what} vs row layout", t, t0, "s", target=1 / 1.2,
                          note=note))  # fmt: skip


def _as_main(doc: tracepack.Document) -> tracepack.Document:
    """The document as main's importer made it before schema 1.2: the program's signature and module call
    graph in its JSON, extensions as plain text (the 1.2 -> 1.1 migration, then back up: nothing typed)."""
    down = migrations.downgrade(doc.raw, CURRENT, (1, 1))
    return tracepack.Document(migrations.upgrade(down, (1, 1), CURRENT))


def _interleaved(fns: list[Callable[[], Any]], *, rounds: int, min_time: float) -> list[float]:
    """Best CPU time of each of ``fns`` over ``rounds`` rounds, each round timing every one in turn (each
    looped until ``min_time``), so that a change of the machine's load during the run hits all alike."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], best_time(fn, repeat=1, min_time=min_time, clock=time.process_time))
    return best


def _speed(
    report: Report,
    name: str,
    doc: tracepack.Document,
    codec: str,
    zdict: zstandard.ZstdCompressionDict,
    *,
    before_codec: str | None = None,
) -> None:
    """Writing and reading the best codec as this build does (schema 1.2 tables, ``forms`` string columns,
    the built-in dictionary), at zstd level 3 (the API default), in CPU time, every side in turn in each
    round (:func:`_interleaved`), against:

    * today, the builds before the size work: the program without 1.2's tables and interned extensions,
      plain string columns, no dictionary (what ``tracepack.dumps`` wrote before issue 10);
    * main before schema 1.2: the same program without 1.2's tables, ``forms`` string columns, main's
      dictionary (torch-export-2).

    ``before_codec`` (default ``codec``) is what the two older sides write: the best of columnar and
    MessagePack, the candidates before the FlatBuffers column layout, when that layout is the best now."""
    gc.collect()
    gc.freeze()  # what is alive already is kept out of the collector's way, for both sides alike
    try:
        small = len(doc) < 2000
        rounds, min_time = (7, 0.1) if small else (5, 0.0)
        old = _as_main(doc)
        then = before_codec or codec
        main_dict = dictionaries.get("torch-export-2")
        with columnar.plain_strings():
            before = tracepack.dumps(old, codec=then)
        main = tracepack.dumps(old, codec=then, zstd_dict=main_dict)
        now = tracepack.dumps(doc, codec=codec, zstd_dict=zdict)
        if tracepack.loads(before) != old or tracepack.loads(main) != old or tracepack.loads(now) != doc:
            raise AssertionError(f"{name}: a timed file does not decode to its document")

        def encode_before() -> bytes:
            with columnar.plain_strings():
                return tracepack.dumps(old, codec=then)

        t_enc0, t_encm, t_enc, t_dec0, t_decm, t_dec = _interleaved(
            [
                encode_before,
                partial(tracepack.dumps, old, codec=then, zstd_dict=main_dict),
                partial(tracepack.dumps, doc, codec=codec, zstd_dict=zdict),
                partial(tracepack.loads, before),
                partial(tracepack.loads, main),
                partial(tracepack.loads, now),
            ],
            rounds=rounds,
            min_time=min_time,
        )
    finally:
        gc.unfreeze()
    codecs = codec if then == codec else f"{codec} (before: {then})"
    note = f"{codecs}: as written now vs before the size work (plain strings, no 1.2 tables, no dictionary)"
    note += "; CPU time; < 1 means slower"
    report.add(Figure(SECTION, f"{name}: encode vs today", t_enc, t_enc0, "s", target=1 / 1.2, note=note))
    report.add(Figure(SECTION, f"{name}: decode vs today", t_dec, t_dec0, "s", target=1 / 1.2, note=note))
    if codec == "columnar" and columnar._cforms is not None:
        # the same files written and read with the forms loops in Python (an install without the C module)
        with columnar.python_loops():
            t_encp, t_decp = _interleaved(
                [partial(tracepack.dumps, doc, codec=codec, zstd_dict=zdict), partial(tracepack.loads, now)],
                rounds=rounds,
                min_time=min_time,
            )
        note = "columnar with the forms loops in Python (no C module: TRACEPACK_PURE_PYTHON=1); no target"
        report.add(Figure(SECTION, f"{name}: encode vs today, pure Python", t_encp, t_enc0, "s", note=note))
        report.add(Figure(SECTION, f"{name}: decode vs today, pure Python", t_decp, t_dec0, "s", note=note))
    note = f"{codecs}: 1.2 tables + torch-export-3 vs main (no 1.2 tables, torch-export-2); CPU time; < 1 means slower"
    report.add(Figure(SECTION, f"{name}: encode vs main", t_enc, t_encm, "s", target=1 / 1.2, note=note))
    report.add(Figure(SECTION, f"{name}: decode vs main", t_dec, t_decm, "s", target=1 / 1.2, note=note))
