"""tracepack.torch.load / save against torch.export.load / save (issue 9), torch 2.13 itself, in one run.

Per ``.pt2`` of the corpus (``tests/data/torch/corpus`` plus ``mid``, ~1k nodes, ``big``, ~10k
nodes, and the dynamic-shape ``size_130_dyn`` and ``size_1k_dyn``, ~130 and ~1k nodes, exported once
into ``.bench/corpus`` by ``scripts/torch/export_corpus.py``):

* load: ``tracepack.torch.load`` against ``torch.export.load`` of the same plain file (target
  >= 3x on static graphs of >= 100 nodes, >= 1.5x on dynamic shapes, >= 1x on every other),
  and of the packed file (the same targets: torch loads it without its debug metadata,
  tracepack with it);
* peak memory of both loads (Python allocations traced while loading; target <= 1x);
* save: ``tracepack.torch.save`` against ``torch.export.save`` followed by ``pack`` (target >= 2x);
* size: the packed program member (as stored) against the original model.json (target <= 0.3x
  from 100 nodes).

Skipped, with a note, when torch is not installed.
"""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

from benchmarks.report import Figure, Report, best_time, peak_memory

SECTION = "torch-load"
ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "torch" / "corpus"
GENERATED = ROOT / ".bench" / "corpus"
#: Load targets apply from this many nodes on (smaller graphs: "never slower").
MIN_NODES = 100
#: Models of ``scripts/torch/export_corpus.py`` exported once into ``.bench/corpus``: the ~1k and ~10k
#: node transformers (static), and the size ladder's dynamic-shape rungs of ~130 and ~1k nodes.
EXPORTED = ("mid", "big", "size_130_dyn", "size_1k_dyn")


def _exported(name: str) -> Path | None:
    """A model of ``scripts/torch/export_corpus.py`` too big to commit, exported once into ``.bench``."""
    path = GENERATED / f"{name}.pt2"
    if not path.exists():
        script = ROOT / "scripts" / "torch" / "export_corpus.py"
        print(f"(exporting {path.name} with torch)", flush=True)
        done = subprocess.run([sys.executable, "-W", "ignore", str(script), str(GENERATED), name], check=False)
        if done.returncode != 0 or not path.exists():
            print(f"(could not export {name}: skipped)")
            return None
    return path


def _program_member(data: bytes) -> zipfile.ZipInfo:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        (info,) = [i for i in z.infolist() if i.filename.endswith("/models/model.json")]
        return info


def _model(path: Path, report: Report) -> None:
    # By name: type checking the benchmarks must not need torch installed (`make check` runs without it).
    torch: Any = importlib.import_module("torch")

    import tracepack.torch as tt
    from tracepack.torch import pt2

    data = path.read_bytes()
    ep = torch.export.load(io.BytesIO(data))
    nodes = sum(len(m.graph.nodes) for m in ep.graph_module.modules() if isinstance(m, torch.fx.GraphModule))
    dynamic = bool(ep.range_constraints)
    kind = "dynamic" if dynamic else "static"
    name = f"{path.stem} ({nodes} nodes, {kind})"
    target = None if nodes < MIN_NODES else (1.5 if dynamic else 3.0)
    big = nodes > 2000
    repeat, min_time = (1, 0.0) if big else (5, 0.3)
    packed = pt2.pack_pt2(data, source=path.name)

    t_torch = best_time(lambda: torch.export.load(io.BytesIO(data)), repeat=repeat, min_time=min_time)
    t_ours = best_time(lambda: tt.load(io.BytesIO(data)), repeat=repeat, min_time=min_time)
    report.add(Figure(SECTION, f"{name}: load plain", t_ours, t_torch, "s", target=target or 1.0))
    t_torch_p = best_time(lambda: torch.export.load(io.BytesIO(packed)), repeat=repeat, min_time=min_time)
    t_ours_p = best_time(lambda: tt.load(io.BytesIO(packed)), repeat=repeat, min_time=min_time)
    report.add(
        Figure(SECTION, f"{name}: load packed", t_ours_p, t_torch_p, "s", target=target or 1.0,
               note="torch without debug metadata, tracepack with it")
    )  # fmt: skip

    peak_torch, kept = peak_memory(lambda: torch.export.load(io.BytesIO(data)))
    del kept
    peak_ours, kept = peak_memory(lambda: tt.load(io.BytesIO(data)))
    del kept
    report.add(
        Figure(SECTION, f"{name}: load peak memory", peak_ours, peak_torch, "B", target=1.0, higher_is_better=False)
    )

    def theirs() -> bytes:
        buf = io.BytesIO()
        torch.export.save(ep, buf)
        return pt2.pack_pt2(buf.getvalue(), source="bench")

    def ours() -> bytes:
        buf = io.BytesIO()
        tt.save(ep, buf)
        return buf.getvalue()

    t_save_torch = best_time(theirs, repeat=repeat, min_time=min_time)
    t_save_ours = best_time(ours, repeat=repeat, min_time=min_time)
    report.add(Figure(SECTION, f"{name}: save vs torch save + pack", t_save_ours, t_save_torch, "s", target=2.0))

    original = _program_member(data).file_size
    stored = _program_member(ours()).compress_size
    report.add(
        Figure(SECTION, f"{name}: packed model.json member", stored, original, "B", higher_is_better=False,
               target=0.3 if nodes >= MIN_NODES else None, note="stored (deflated), defaults")
    )  # fmt: skip


def run(report: Report) -> None:
    if importlib.util.find_spec("torch") is None:
        print("(torch is not installed: the torch-load section is skipped; `make venv-torch` installs it)")
        return
    start = time.perf_counter()
    models = sorted(CORPUS.glob("*.pt2"))
    models += [p for name in EXPORTED if (p := _exported(name)) is not None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in models:
            _model(path, report)
    print(f"(torch-load section took {time.perf_counter() - start:.1f} s)")
