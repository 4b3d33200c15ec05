"""torch bridge targets (issue 4), against torch 2.13 itself, on the corpus of real exported models.

Per ``.pt2`` of the corpus (``tests/data/torch/corpus`` plus the 10k-node ``big``, exported once
into ``.bench/corpus`` by ``scripts/torch/export_corpus.py``):

* size: each codec with and without zstd -19 against ``model.json`` and zstd -19 of it; the best
  codec + zstd -19 (with the built-in dictionary) must be <= 0.5x of zstd -19 of ``model.json``
  from 100 nodes, 0.6x below (``bench_sizes.py`` has the size ladder); the default codec,
  MessagePack, uncompressed <= 0.2x of ``model.json`` from 1,000 nodes;
* decode: ``tracepack.loads`` to the typed document against torch's own
  ``_dict_to_dataclass(ExportedProgram, json.loads(...))``, for MessagePack (target >= 50x) and
  columnar (target >= 50x on the 10k-node model, reported on the small ones); columnar's decode
  against MessagePack's (reported);
* encode: ``tracepack.dumps`` against torch's ``_to_json_bytes`` of the same program, for MessagePack
  (target >= 10x) and columnar (reported), and columnar's against MessagePack's (reported);
* memory: peak of the decoded document against ``json.loads`` of ``model.json`` (target <= 0.3x).

Times are CPU time of this process (``time.process_time``) on both sides: the figures compare
CPU-bound work, which other processes on a shared machine would otherwise skew.

Per TorchScript archive: the ``debug_pkl`` bytes in both layouts against the tracepack document.
Skipped, with a note, when torch is not installed.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import subprocess
import sys
import time
import zipfile
from functools import partial
from pathlib import Path
from typing import Any

import zstandard

import tracepack
from benchmarks.report import Figure, Report, best_time, peak_memory
from tracepack import dictionaries
from tracepack.codecs import TORCH_CANDIDATES
from tracepack.torch.archives import debug_pkl_bytes, import_archive
from tracepack.torch.export.model_json import import_model_json
from tracepack.torch.torchscript.debug_pkl import DebugPklForm

SECTION = "torch"
ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "torch" / "corpus"
GENERATED = ROOT / ".bench" / "corpus"


def _z19(data: bytes) -> int:
    return len(zstandard.ZstdCompressor(level=19).compress(data))


def _model_json(path: Path) -> bytes:
    with zipfile.ZipFile(path) as archive:
        (member,) = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
        return archive.read(member)


def _big() -> Path | None:
    """The 10k-node model, exported with torch once and kept in ``.bench/corpus``."""
    path = GENERATED / "big.pt2"
    if not path.exists():
        script = ROOT / "scripts" / "torch" / "export_corpus.py"
        print(f"(exporting {path.name} with torch: about a minute)", flush=True)
        done = subprocess.run([sys.executable, "-W", "ignore", str(script), str(GENERATED), "big"], check=False)
        if done.returncode != 0 or not path.exists():
            print("(could not export the 10k-node model: skipped)")
            return None
    return path


#: Codecs in the size table; MessagePack is the default (the uncompressed target is on it).
SIZE_CODECS = ("msgpack", "columnar", "json", "flatbuffers-rows", "flatbuffers-columns")
#: MessagePack's uncompressed target (<= 0.2x of model.json) applies from this many nodes on; the
#: compressed size targets apply at every size (``bench_sizes.py``: 0.5x from 100 nodes, 0.6x below).
SIZE_TARGET_MIN_NODES = 1_000


def _size(report: Report, name: str, data: bytes, doc: tracepack.Document) -> None:
    z_json = _z19(data)
    sized = len(doc) >= SIZE_TARGET_MIN_NODES
    small = "" if sized else f"(no target under {SIZE_TARGET_MIN_NODES} nodes)"
    report.add(Figure(SECTION, f"{name}: zstd -19 of model.json", z_json, len(data), "B", higher_is_better=False))
    packed_sizes: dict[str, int] = {}
    for codec in SIZE_CODECS:
        blob = tracepack.dumps(doc, codec=codec, compression="none")
        packed = len(tracepack.dumps(doc, codec=codec, compression="zstd", level=19))
        packed_sizes[codec] = packed
        if codec == "columnar" and tracepack.loads(blob) != doc:  # the figure is worth nothing otherwise
            raise AssertionError(f"{name}: the columnar codec does not round-trip the document")
        report.add(
            Figure(SECTION, f"{name}: {codec} vs model.json", len(blob), len(data), "B", higher_is_better=False,
                   target=0.2 if codec == "msgpack" and sized else None, note=small if codec == "msgpack" else "")
        )  # fmt: skip
        report.add(
            Figure(SECTION, f"{name}: {codec}+zstd-19 vs zstd-19 model.json", packed, z_json, "B",
                   higher_is_better=False)
        )  # fmt: skip
    with_dict = {
        c: len(tracepack.dumps(doc, codec=c, level=19, zstd_dict=dictionaries.DEFAULT)) for c in TORCH_CANDIDATES
    }  # the codecs `convert` chooses among
    best = min(with_dict, key=lambda c: with_dict[c])
    report.add(
        Figure(SECTION, f"{name}: best codec+zstd-19 vs zstd-19 model.json", with_dict[best], z_json, "B",
               higher_is_better=False, target=0.5 if len(doc) >= 100 else 0.6,
               note=f"{best}, built-in dictionary (without: {min(packed_sizes.values()) / z_json:.2f}x)")
    )  # fmt: skip


#: Codecs timed against torch (decode and encode); MessagePack's figures keep their names.
SPEED_CODECS = ("msgpack", "columnar")
#: Columnar is for big models: its decode target (>= 50x) applies from this many nodes; on small
#: models its fixed cost per column path dominates, and its figures are reported only.
COLUMNAR_TARGET_NODES = 10_000


def _label(codec: str) -> str:
    return "" if codec == "msgpack" else f" ({codec})"


def _speed(report: Report, name: str, data: bytes, doc: tracepack.Document) -> None:
    # What is alive before the timings (other models, torch's modules) is frozen out of the
    # collector's way, for both sides alike: only the objects a decode makes are traced.
    gc.collect()
    gc.freeze()
    try:
        _timed(report, name, data, doc)
    finally:
        gc.unfreeze()


def _timed(report: Report, name: str, data: bytes, doc: tracepack.Document) -> None:
    serde = importlib.import_module("torch._export.serde.serialize")
    program_cls = serde.ExportedProgram
    small = len(data) < 1 << 20
    repeat, min_time = (5, 0.2) if small else (3, 0.0)
    cpu = time.process_time  # CPU time of this process on both sides: other processes' load does not count
    t_torch = best_time(lambda: serde._dict_to_dataclass(program_cls, json.loads(data)), repeat=3 if small else 1,
                        min_time=min_time, clock=cpu)  # fmt: skip
    t_decode: dict[str, float] = {}
    for codec in SPEED_CODECS:
        blob = tracepack.dumps(doc, codec=codec, compression="none")
        t_decode[codec] = best_time(partial(tracepack.loads, blob), repeat=repeat, min_time=min_time, clock=cpu)
        targeted = codec == "msgpack" or len(doc) >= COLUMNAR_TARGET_NODES
        report.add(
            Figure(SECTION, f"{name}: decode to typed objects{_label(codec)}", t_decode[codec], t_torch, "s",
                   target=50 if targeted else None, note="tracepack.loads vs torch _dict_to_dataclass(json.loads)")
        )  # fmt: skip
    report.add(
        Figure(SECTION, f"{name}: decode: columnar vs msgpack", t_decode["columnar"], t_decode["msgpack"], "s",
               note="tracepack.loads of each; ratio < 1 means slower than msgpack")
    )  # fmt: skip
    program = serde._dict_to_dataclass(program_cls, json.loads(data))
    t_torch_enc = best_time(lambda: serde._to_json_bytes(program), repeat=3 if small else 1,
                            min_time=min_time, clock=cpu)  # fmt: skip
    t_encode: dict[str, float] = {}
    for codec in SPEED_CODECS:
        encode = partial(tracepack.dumps, doc, codec=codec, compression="none")
        t_encode[codec] = best_time(encode, repeat=repeat, min_time=min_time, clock=cpu)
        report.add(
            Figure(SECTION, f"{name}: encode{_label(codec)}", t_encode[codec], t_torch_enc, "s",
                   target=10 if codec == "msgpack" else None, note="tracepack.dumps vs torch _to_json_bytes")
        )  # fmt: skip
    report.add(
        Figure(SECTION, f"{name}: encode: columnar vs msgpack", t_encode["columnar"], t_encode["msgpack"], "s",
               note="tracepack.dumps of each; ratio < 1 means slower than msgpack")
    )  # fmt: skip
    packed = tracepack.dumps(doc, codec="msgpack", compression="none")
    peak_tp, kept = peak_memory(lambda: tracepack.loads(packed))
    del kept
    peak_json, kept_json = peak_memory(lambda: json.loads(data))
    del kept_json
    report.add(
        Figure(SECTION, f"{name}: memory of the decoded document", peak_tp, peak_json, "B", target=0.3,
               higher_is_better=False, note="tracemalloc peak vs json.loads(model.json)")
    )  # fmt: skip


def _torchscript(report: Report, path: Path) -> None:
    doc = import_archive(str(path), path.read_bytes())
    sizes: dict[str, int] = {}
    for layout in (DebugPklForm.LEGACY, DebugPklForm.STRING_TABLE):
        sizes[layout.value] = sum(len(debug_pkl_bytes(doc, f, layout)) for f in doc.raw.debug_files)
    tpk = len(tracepack.dumps(doc, codec="msgpack", compression="none"))
    tpk_z = len(tracepack.dumps(doc, codec="msgpack", compression="zstd", level=19))
    for form, size in sizes.items():
        report.add(
            Figure(SECTION, f"{path.name}: tracepack vs debug_pkl ({form})", tpk, size, "B", higher_is_better=False,
                   note=f"{len(doc.raw.debug_files)} code files")
        )  # fmt: skip
    report.add(
        Figure(SECTION, f"{path.name}: tracepack+zstd-19 vs debug_pkl (string table)", tpk_z, sizes["string_table"],
               "B", higher_is_better=False)
    )  # fmt: skip


def run(report: Report) -> None:
    if importlib.util.find_spec("torch") is None:
        print("(torch is not installed: the torch section is skipped; `make venv-torch` installs it)")
        return
    start = time.perf_counter()
    models: list[Path] = sorted(CORPUS.glob("*.pt2"))
    big = _big()
    if big is not None:
        models.append(big)
    for path in models:
        data = _model_json(path)
        doc: Any = import_model_json(data)
        name = f"{path.stem} ({len(doc)} nodes)"
        _size(report, name, data, doc)
        _speed(report, name, data, doc)
    for path in sorted(p for p in CORPUS.iterdir() if p.suffix in (".pt", ".ptl")):
        _torchscript(report, path)
    print(f"(torch section took {time.perf_counter() - start:.1f} s)")
