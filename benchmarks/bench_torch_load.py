"""tracepack.torch.load / save against torch.export.load / save (issues 9 and 27), torch 2.13 itself, in one run.

Programs: the corpus (``tests/data/torch/corpus``: static transformers and CNN, ``dynamic``,
``cond``), the ~1k- and ~10k-node transformers ``mid`` and ``big`` and the size ladder's
dynamic-shape rungs ``size_130_dyn`` and ``size_1k_dyn`` (exported once into ``.bench/corpus`` by
``scripts/torch/export_corpus.py``), and the real third-party programs of ``.bench/real-pt2``
(18 torchvision, timm and transformers models and a 9,036-node dynamic-shape Llama;
``make real-programs REAL_PYTHON=...`` exports them, this section says so when the folder is
missing).

Every time is this process's CPU time (``time.process_time``: the machine is shared), the two sides
of a figure timed alternately in the same run (A B A B ...), best of the rounds.

* load: ``tracepack.torch.load`` against ``torch.export.load`` of the same plain file. Targets:
  >= 10x from 1,000 nodes (static and dynamic shapes), >= 3x on static graphs of >= 100 nodes,
  >= 1.5x on dynamic shapes, >= 1x on every other;
* load against the same loader without the shorter roads of issue 27 (``replay`` and ``nodes`` of
  ``tracepack.torch.deserializer``): >= 1x (never slower than before them);
* load against the floor: what building the program's objects costs at least, measured on the
  loaded program itself: for every graph module of the program (nested ``torch.cond`` branches
  too), a copy of its graph (``Graph.node_copy`` of every node), every node value's fake tensor
  made again the cheapest way torch has (a meta ``empty_strided`` in the program's fake mode,
  wrapped), and ``GraphModule`` of it (its Python code generated and compiled).
  Target: <= 2x of the floor on static programs of the corpus and the exported transformers;
* the 9,036-node dynamic-shape Llama: load <= 1.5 s (CPU);
* corpus and exported transformers also: the packed file's load, peak memory (<= 1x of torch's),
  save against ``torch.export.save`` + pack (>= 2x), the packed program member's size (<= 0.3x).

Skipped, with a note, when torch is not installed.
"""

from __future__ import annotations

import gc
import importlib.util
import io
import subprocess
import sys
import time
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.report import Figure, Report, best_time, peak_memory

SECTION = "torch-load"
ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "torch" / "corpus"
GENERATED = ROOT / ".bench" / "corpus"
REAL = ROOT / ".bench" / "real-pt2"
#: Load targets apply from this many nodes on (smaller graphs: "never slower").
MIN_NODES = 100
#: ... and the 10x target from this many.
BIG = 1_000
#: Models of ``scripts/torch/export_corpus.py`` exported once into ``.bench/corpus``: the ~1k and ~10k
#: node transformers (static), and the size ladder's dynamic-shape rungs of ~130 and ~1k nodes.
EXPORTED = ("mid", "big", "size_130_dyn", "size_1k_dyn")
#: The dynamic-shape program of issue 27, and its target (CPU seconds).
LLAMA = "hf_llama_9k_dyn"
LLAMA_SECONDS = 1.5


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


def _real() -> list[Path]:
    found = sorted(REAL.glob("*.pt2"))
    if not found:
        print(
            f"(no real programs in {REAL.relative_to(ROOT)}: they are exported with a Python that has torch "
            "2.12-2.15, torchvision, timm and transformers, e.g. `make real-programs "
            "REAL_PYTHON=/path/to/venv/bin/python`; skipped)",
            flush=True,
        )
    return found


def _program_member(data: bytes) -> zipfile.ZipInfo:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        (info,) = [i for i in z.infolist() if i.filename.endswith("/models/model.json")]
        return info


def alternate(fns: dict[str, Callable[[], Any]], *, rounds: int, min_time: float) -> dict[str, float]:
    """Best CPU time of each function, the functions run in turn in every round (A B C A B C ...)."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            best[name] = min(best[name], best_time(fn, repeat=1, min_time=min_time, clock=time.process_time))
    return best


def floor(ep: Any) -> Callable[[], Any]:
    """What building ``ep``'s objects costs at least (see the module docs), as a function to time: every
    graph module of the program (nested ones, ``torch.cond`` branches, too) built again from a copy of
    its graph, with every node value's fake tensor made again."""
    torch: Any = importlib.import_module("torch")
    fake = importlib.import_module("torch._subclasses.fake_tensor")
    pytree = importlib.import_module("torch.utils._pytree")

    def copy_fake(v: Any) -> Any:
        if not isinstance(v, fake.FakeTensor):
            return v
        with fake.in_kernel_invocation_manager(v.fake_mode):
            elem = torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
        out = fake.FakeTensor(v.fake_mode, elem, v.device)
        if v.requires_grad:
            out.requires_grad_(True)
        return out

    def rebuild(gm: Any) -> Any:
        graph = torch.fx.Graph()
        env: dict[Any, Any] = {}
        attrs: dict[str, Any] = {}
        for n in gm.graph.nodes:
            new = env[n] = graph.node_copy(n, env.__getitem__)
            if "val" in n.meta:
                new.meta["val"] = pytree.tree_map(copy_fake, n.meta["val"])
            if n.op in ("get_attr", "call_module"):
                obj = gm
                for part in str(n.target).split("."):
                    obj = getattr(obj, part)
                attrs[str(n.target)] = rebuild(obj) if isinstance(obj, torch.fx.GraphModule) else obj
        return torch.fx.GraphModule(attrs, graph)

    return lambda: rebuild(ep.graph_module)


def _count(ep: Any) -> int:
    torch: Any = importlib.import_module("torch")
    return sum(len(m.graph.nodes) for m in ep.graph_module.modules() if isinstance(m, torch.fx.GraphModule))


def _load_figures(path: Path, report: Report, *, static_floor_target: bool) -> tuple[Any, str, int, bool]:
    """The load figures of one program; returns (program, name, nodes, dynamic)."""
    torch: Any = importlib.import_module("torch")

    import tracepack.torch as tt
    from tracepack.torch import deserializer

    data = path.read_bytes()
    ep = torch.export.load(io.BytesIO(data))
    nodes = _count(ep)
    dynamic = bool(ep.range_constraints)
    name = f"{path.stem} ({nodes} nodes, {'dynamic' if dynamic else 'static'})"
    if nodes >= BIG:
        target = 10.0
    elif nodes >= MIN_NODES:
        target = 1.5 if dynamic else 3.0
    else:
        target = 1.0
    big = nodes > 2000 or len(data) > 50_000_000
    rounds, min_time = (2, 0.0) if big else (5, 0.3)

    def before() -> Any:
        deserializer.SKIP = frozenset({"replay", "nodes"})
        try:
            return tt.load(io.BytesIO(data))
        finally:
            deserializer.SKIP = frozenset()

    times = alternate(
        {
            "torch": lambda: torch.export.load(io.BytesIO(data)),
            "ours": lambda: tt.load(io.BytesIO(data)),
            "before": before,
            "floor": floor(tt.load(io.BytesIO(data))),
        },
        rounds=rounds,
        min_time=min_time,
    )
    report.add(Figure(SECTION, f"{name}: load plain", times["ours"], times["torch"], "s", target=target))
    report.add(
        Figure(SECTION, f"{name}: load vs without replay+nodes", times["ours"], times["before"], "s", target=1.0,
               note="the same loader with the replay and nodes roads off")
    )  # fmt: skip
    report.add(
        Figure(SECTION, f"{name}: load vs floor", times["ours"], times["floor"], "s", higher_is_better=False,
               target=2.0 if static_floor_target and not dynamic else None,
               note="floor: graph copy + fake tensors + GraphModule")
    )  # fmt: skip
    if path.stem == LLAMA:
        report.add(
            Figure(SECTION, f"{name}: load CPU time", times["ours"], LLAMA_SECONDS, "s", higher_is_better=False,
                   target=1.0, note=f"target {LLAMA_SECONDS} s")
        )  # fmt: skip
    return ep, name, nodes, dynamic


def _model(path: Path, report: Report) -> None:
    # By name: type checking the benchmarks must not need torch installed (`make check` runs without it).
    torch: Any = importlib.import_module("torch")

    import tracepack.torch as tt
    from tracepack.torch import pt2

    ep, name, nodes, dynamic = _load_figures(path, report, static_floor_target=True)
    data = path.read_bytes()
    target = None if nodes < MIN_NODES else (1.5 if dynamic else 3.0)
    big = nodes > 2000
    repeat, min_time = (1, 0.0) if big else (5, 0.3)
    packed = pt2.pack_pt2(data, source=path.name)

    times = alternate(
        {"torch": lambda: torch.export.load(io.BytesIO(packed)), "ours": lambda: tt.load(io.BytesIO(packed))},
        rounds=2 if big else 5,
        min_time=min_time,
    )
    report.add(
        Figure(SECTION, f"{name}: load packed", times["ours"], times["torch"], "s", target=target or 1.0,
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

    t_save_torch = best_time(theirs, repeat=repeat, min_time=min_time, clock=time.process_time)
    t_save_ours = best_time(ours, repeat=repeat, min_time=min_time, clock=time.process_time)
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
            gc.collect()
        for path in _real():
            _load_figures(path, report, static_floor_target=False)
            gc.collect()
    print(f"(torch-load section took {time.perf_counter() - start:.1f} s)")
