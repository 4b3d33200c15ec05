"""The C++ reader (``build/tracepack-cpp``, ``make cpp``) against the Python reader, on the same files.

For each codec (json, msgpack, flatbuffers-rows, columnar, flatbuffers-columns; uncompressed and zstd with the
built-in dictionary), on graphs of 1,050 and 10,500 nodes (the bundled sample stacked, benchmarks/corpus.py):

* a full read, what ``tracepack.load`` does (container, zstd, decode, validation, migration), C++ against
  Python, both in their own process with the file in memory, as CPU time (best round of
  :func:`benchmarks.report.best_time` and its C++ twin, ``build/tracepack-cpp-bench``);
* a full read and the canonical JSON of ``tracepack cat`` (spec §11), the same way;
* ``tracepack-cpp cat FILE`` against ``tracepack cat FILE`` as commands (wall time, interpreter start included).

Targets (issue 23), on the full read: the C++ reader faster than tracepack.load on every codec (ratio >= 1),
and at least 5x faster on the columnar and FlatBuffers layouts (flatbuffers-rows, columnar,
flatbuffers-columns). The other figures are reported without a target.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tracepack
from benchmarks.corpus import stacked_model_json
from benchmarks.report import Figure, Report, best_time
from tracepack.plain import to_plain

REPO = Path(__file__).resolve().parents[1]
BINARY = REPO / "build" / "tracepack-cpp"
BENCH = REPO / "build" / "tracepack-cpp-bench"
CODECS = ("json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns")
#: The full read's target, C++ against tracepack.load (x faster).
TARGETS = {"json": 1.0, "msgpack": 1.0, "flatbuffers-rows": 5.0, "columnar": 5.0, "flatbuffers-columns": 5.0}


def _cpp(path: Path) -> dict[str, float]:
    done = subprocess.run([str(BENCH), str(path)], capture_output=True, text=True, check=True, cwd=REPO)
    out: dict[str, float] = json.loads(done.stdout)
    return out


def _wall(args: list[str], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(args, stdout=subprocess.DEVNULL, check=True, cwd=REPO)
        best = min(best, time.perf_counter() - t0)
    return best


def run(report: Report) -> None:
    if not BENCH.exists():
        subprocess.run(["make", "--no-print-directory", "-s", "cpp"], cwd=REPO, check=True)
    from tracepack.torch.export.model_json import import_model_json

    with tempfile.TemporaryDirectory(prefix="tracepack-bench-cpp-") as tmp:
        for copies in (15, 150):
            doc = import_model_json(stacked_model_json(copies))
            nodes = len(doc)
            for codec in CODECS:
                for compression, zdict in (("none", None), ("zstd", "torch-export-7")):
                    path = Path(tmp) / f"{nodes}-{codec}-{compression}.tpk"
                    path.write_bytes(tracepack.dumps(doc, codec=codec, compression=compression, zstd_dict=zdict))
                    label = f"{codec}{'+zstd' if zdict else ''}, {nodes:,} nodes"
                    data = path.read_bytes()

                    def py_load(data: bytes = data) -> tracepack.Document:
                        return tracepack.loads(data)

                    def py_cat(data: bytes = data) -> str:
                        return json.dumps(to_plain(tracepack.loads(data)), ensure_ascii=False, indent=2) + "\n"

                    cpp = _cpp(path)
                    py_load_s = best_time(py_load, clock=time.process_time)
                    py_cat_s = best_time(py_cat, clock=time.process_time)
                    assert cpp["json_bytes"] == len(py_cat().encode())
                    report.add(
                        Figure(
                            "cpp",
                            f"C++ read vs tracepack.load: {label}",
                            cpp["load_s"],
                            py_load_s,
                            "s",
                            target=TARGETS[codec],
                        )
                    )
                    report.add(Figure("cpp", f"C++ read + cat JSON vs Python: {label}", cpp["cat_s"], py_cat_s, "s"))
                    if compression == "zstd":
                        c = _wall([str(BINARY), "cat", str(path)])
                        p = _wall([sys.executable, "-m", "tracepack", "cat", str(path)])
                        report.add(Figure("cpp", f"tracepack-cpp cat vs tracepack cat (commands): {label}", c, p, "s"))
