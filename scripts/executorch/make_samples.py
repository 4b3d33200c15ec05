"""Make the ExecuTorch and TorchScript-mobile samples under tests/data/executorch/ (run once, by hand).

Needs torch 2.13.0 and executorch 1.5.1 in a separate virtual environment (they are not part of the
project's own environment, nor of CI)::

    python3 -m venv ../et-venv && ../et-venv/bin/pip install torch==2.13.0 executorch==1.5.1
    make executorch-samples ET_PYTHON=../et-venv/bin/python

What it writes (every file path the tools record is under /home/user/project/: see main()):

* ``model.etrecord``: the ETRecord (``to_edge(..., generate_etrecord=True)``) of a small model (embedding,
  nested blocks, linear), its source at /home/user/project/tinylm.py;
* ``model.pte``: the ExecuTorch program, ``emit_stacktrace=True``;
* ``model.etdp``: an ETDump of one run by the portable runtime (ExecuTorch's pybindings);
* ``kernel_failure.log``: what the runtime printed when that program ran with an out-of-range token;
* ``mobile.ptl`` / ``mobile_stripped.ptl``: the same model for the lite interpreter, with mobile debug
  info and with its debug maps removed, and ``mobile_error.txt`` / ``mobile_stripped_error.txt``: what
  the lite interpreter raised for the bad input, with and without them;
* ``manifest.json``: what ExecuTorch's Inspector answered for every event of the ETDump and what its
  debug-handle mapping gives for every instruction (handles, node names, stack traces, nn_module_stack,
  op types), ExecuTorch's own debug handle per edge node, and the .pte's instruction list.

The tests compare tracepack's answers with this manifest and with torch's own text.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "torch"))
from _sample_common import check_clean  # noqa: E402 - the exporters' one machine-path rule

OUT = ROOT / "tests" / "data" / "executorch"
NEUTRAL = "/home/user/project/"


def model_source() -> str:
    return """\
import torch


class Block(torch.nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(dim, dim)
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        y = torch.relu(y)
        return self.norm(x + y)


class TinyLM(torch.nn.Module):
    def __init__(self, vocab: int = 16, dim: int = 8, blocks: int = 2) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.blocks = torch.nn.Sequential(*[Block(dim) for _ in range(blocks)])
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        x = self.blocks(x)
        return torch.softmax(self.head(x), dim=-1)
"""


PROJECT = Path(NEUTRAL)


def main() -> int:
    """Re-run under /home/user/project/.venv/bin/python, so every path the tools record is neutral.

    Nothing is rewritten afterwards: /home/user/project is a symbolic link to a temporary folder holding
    the model's source and a link to the ExecuTorch environment, and Python records the paths it was
    given (the link's), so the artifacts are byte for byte what ExecuTorch and torch wrote.
    """
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--blocks", type=int, default=2, help="model depth (default 2; `make bench` makes a ~10k-node one with 1000)"
    )
    parser.add_argument("--no-mobile", action="store_true", help="skip the TorchScript mobile samples")
    parser.add_argument(
        "--profiler",
        action="store_true",
        help="make the torch.profiler samples instead (profile_model.pt2, profile_trace*.json, "
        "profile_manifest.json); needs torch 2.13 only: run it with the project's .venv python",
    )
    parser.add_argument(
        "--intermediates",
        action="store_true",
        help="run the committed model.pte again logging intermediate outputs: model_debug.etdp and "
        "debug_manifest.json (what Inspector read from it and the debug buffer)",
    )
    parser.add_argument(
        "--delegate",
        action="store_true",
        help="make the XNNPACK-delegated samples instead (delegate.etrecord, .pte, .etdp, delegate_manifest.json)",
    )
    args = parser.parse_args()
    out = Path(args.out).resolve()
    if args.inside:
        sys.path.insert(0, str(PROJECT))
        if args.profiler:
            make_profile(out)
        elif args.intermediates:
            make_intermediates(out)
        elif args.delegate:
            make_delegate(out, blocks=args.blocks)
        else:
            make(out, blocks=args.blocks, mobile=not args.no_mobile)
        return 0
    if PROJECT.exists() or PROJECT.is_symlink():
        raise SystemExit(f"{PROJECT} exists; this script links it to a temporary folder and needs it free")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="et-samples-") as tmp:
        work = Path(tmp)
        (work / "tinylm.py").write_text(model_source())
        (work / ".venv").symlink_to(Path(sys.prefix))
        PROJECT.parent.mkdir(parents=True, exist_ok=True)
        PROJECT.symlink_to(work)
        try:
            python = PROJECT / ".venv" / "bin" / "python"
            cmd = [str(python), str(Path(__file__).resolve()), "--out", str(out), "--inside"]
            cmd += ["--blocks", str(args.blocks)] + (["--no-mobile"] if args.no_mobile else [])
            cmd += ["--delegate"] if args.delegate else []
            cmd += ["--profiler"] if args.profiler else []
            cmd += ["--intermediates"] if args.intermediates else []
            return subprocess.run(cmd, cwd=str(PROJECT), check=False).returncode
        finally:
            PROJECT.unlink()


def make(out: Path, *, blocks: int = 2, mobile: bool = True) -> None:
    import executorch
    import tinylm  # type: ignore[import-not-found]  # /home/user/project/tinylm.py
    import torch
    from executorch.devtools import Inspector
    from executorch.devtools.etrecord import parse_etrecord
    from executorch.devtools.inspector._inspector_utils import (
        EDGE_DIALECT_GRAPH_KEY,
        create_debug_handle_to_op_node_mapping,
        gen_graphs_from_etrecord,
    )
    from executorch.exir import ExecutorchBackendConfig, to_edge

    torch.manual_seed(0)
    model = tinylm.TinyLM(blocks=blocks).eval()
    tokens = torch.tensor([[1, 2, 3, 4]])
    ep = torch.export.export(model, (tokens,))
    edge = to_edge(ep, generate_etrecord=True)  # the edge program is recorded before to_executorch runs
    et = edge.to_executorch(ExecutorchBackendConfig(emit_stacktrace=True))
    buffer = bytes(et.buffer)
    et.get_etrecord().save(str(out / "model.etrecord"))
    pte = out / "model.pte"
    pte.write_bytes(buffer)

    # -- run it: ETDump of a good run, the runtime's log of a bad one ----------------------------
    etdump = out / "model.etdp"
    run = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(pte), str(etdump), "good"], capture_output=True, text=True, check=False
    )
    if run.returncode != 0:
        raise SystemExit(f"the portable runtime failed: {run.stderr[-2000:]}")
    bad = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(pte), "-", "bad"],
        capture_output=True,
        text=True,
        check=False,
    )
    log_lines = [ln for ln in (bad.stdout + bad.stderr).splitlines() if re.match(r"\[\w+\.cpp:\d+\]|\w*Error", ln)]
    if not any("KernelCall failed" in ln for ln in log_lines):
        raise SystemExit(f"the bad run printed no KernelCall failure:\n{bad.stderr[-3000:]}")
    (out / "kernel_failure.log").write_text("\n".join(log_lines) + "\n")

    # -- what Inspector answers ------------------------------------------------------------------
    rec = parse_etrecord(str(out / "model.etrecord"))
    inspector = Inspector(etdump_path=str(out / "model.etdp"), etrecord=str(out / "model.etrecord"))
    events = []
    for block in inspector.event_blocks:
        for ev in block.events:
            events.append(
                {
                    "block": block.name,
                    "name": ev.name,
                    "instruction_id": ev._instruction_id,
                    "debug_handles": ev.debug_handles,
                    "stack_traces": ev.stack_traces,
                    "module_hierarchy": {k: _plain(v) for k, v in ev.module_hierarchy.items()},
                    "op_types": ev.op_types,
                    "is_delegated_op": ev.is_delegated_op,
                    "times": _plain(ev.perf_data.raw if ev.perf_data is not None else None),
                }
            )
    graphs = gen_graphs_from_etrecord(rec)
    by_handle = create_debug_handle_to_op_node_mapping(graphs[EDGE_DIALECT_GRAPH_KEY])
    instructions = {}
    for method, table in rec._debug_handle_map.items():
        rows = {}
        for instr, handles in table.items():
            hs = handles if isinstance(handles, list) else [handles]
            nodes = []
            for h in hs:
                for node in by_handle.get(h, []):
                    meta = node.metadata or {}
                    nodes.append(
                        {
                            "handle": h,
                            "name": node.name,
                            "op": node.op,
                            "stack_trace": meta.get("stack_trace"),
                            "nn_module_stack": _plain(meta.get("nn_module_stack")),
                        }
                    )
            rows[instr] = {"handles": hs, "nodes": nodes}
        instructions[method] = rows
    edge_programs = rec.edge_dialect_program
    if not isinstance(edge_programs, dict):
        edge_programs = {"forward": edge_programs}
    edge_handles = {
        method: {n.name: n.meta.get("debug_handle") for n in prog.graph.nodes if n.op not in ("placeholder", "output")}
        for method, prog in edge_programs.items()
    }
    plan = et.executorch_program.execution_plan[0]
    pte_instr = []
    for ci, chain in enumerate(plan.chains):
        for ii, ins in enumerate(chain.instructions):
            arg = ins.instr_args
            kind = type(arg).__name__
            op = None
            if kind == "KernelCall":
                o = plan.operators[arg.op_index]
                op = f"{o.name}.{o.overload}" if o.overload else o.name
            frames = None
            if chain.stacktrace is not None:
                frames = [[f.filename, f.lineno, f.name, f.context] for f in chain.stacktrace[ii].items]
            pte_instr.append({"chain": ci, "instruction": ii, "kind": kind, "op": op, "frames": frames})

    mobile_answers = _mobile(out, model) if mobile else None
    manifest = {
        "made_by": "scripts/executorch/make_samples.py",
        "torch": torch.__version__,
        "executorch": getattr(executorch, "__version__", "1.5.1"),
        "etrecord_members": sorted(zipfile.ZipFile(out / "model.etrecord").namelist()),
        "debug_handle_map": rec._debug_handle_map,
        "inspector_events": events,
        "instructions": instructions,
        "edge_debug_handles": edge_handles,
        "pte": {"method": plan.name, "instructions": pte_instr},
        "kernel_failure": log_lines,
        "mobile": mobile_answers,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    _check_neutral(out, sorted(p.name for p in out.iterdir()))
    print(f"wrote samples to {out}")


def _check_neutral(out: Path, names: list[str]) -> None:
    """Fail if a sample names the real path behind the neutral project folder or any machine path."""
    real = os.path.realpath(PROJECT).encode()
    for name in names:
        data = (out / name).read_bytes()
        if real != NEUTRAL.rstrip("/").encode() and real in data:
            raise SystemExit(f"{name} holds a machine path ({real.decode()})")
        check_clean(name, data)


_DEBUG_RUNNER = r"""
import sys, torch
from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer
pte, dump, buffer = sys.argv[1:]
data = open(pte, "rb").read()
m = _load_for_executorch_from_buffer(data, enable_etdump=True, debug_buffer_size=1 << 20)
m.run_method("forward", (torch.tensor([[1, 2, 3, 4]]),))
m.write_etdump_result_to_file(dump, buffer)
"""


def make_intermediates(out: Path) -> None:
    """An ETDump with debug events: the committed ``model.pte`` run with a debug buffer, so the runtime
    logs every instruction's output (``model_debug.etdp``; the 1 MiB debug buffer with the tensors' data
    is not kept), and what Inspector made of them (``debug_manifest.json``: per event, its instruction
    and the dtype and shape of each tensor of its ``debug_data``)."""
    import executorch
    import torch
    from executorch.devtools import Inspector

    with tempfile.TemporaryDirectory() as tmp:
        buffer = Path(tmp) / "debug.bin"
        run = subprocess.run(
            [sys.executable, "-c", _DEBUG_RUNNER, str(out / "model.pte"), str(out / "model_debug.etdp"), str(buffer)],
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode != 0:
            raise SystemExit(f"the runtime failed: {run.stderr[-2000:]}")
        inspector = Inspector(
            etdump_path=str(out / "model_debug.etdp"),
            etrecord=str(out / "model.etrecord"),
            debug_buffer_path=str(buffer),
        )
        events = []
        for block in inspector.event_blocks:
            for ev in block.events:
                data = ev.debug_data if isinstance(ev.debug_data, list) else [ev.debug_data]
                tensors = [
                    {"dtype": str(t.dtype).removeprefix("torch."), "sizes": list(t.shape)}
                    for t in data
                    if isinstance(t, torch.Tensor)
                ]
                events.append(
                    {"block": block.name, "name": ev.name, "instruction_id": ev._instruction_id, "debug_data": tensors}
                )
    manifest = {
        "made_by": "scripts/executorch/make_samples.py --intermediates",
        "torch": torch.__version__,
        "executorch": getattr(executorch, "__version__", "1.5.1"),
        "inspector_events": events,
    }
    (out / "debug_manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    _check_neutral(out, ["model_debug.etdp", "debug_manifest.json"])
    print(f"wrote the intermediate-output samples to {out}")


def make_profile(out: Path) -> None:
    """torch.profiler Chrome traces of the exported model run as ``ExportedProgram.module()``, and what
    torch itself maps each op event to.

    * ``profile_model.pt2``: the exported program (``torch.export.save``);
    * ``profile_trace.json``: ``export_chrome_trace`` of one run with torch's
      ``torch.fx.experimental._config.enrich_profiler_metadata`` on: the module's generated code wraps
      the graph in a ``## fx_graph_module_<hash>.py ##`` event and each node in ``## <index> ##``;
    * ``profile_trace_plain.json``: the same run without it (what a plain profile holds: op events only);
    * ``profile_manifest.json``: per op event of the enriched trace (its ``Ev Idx``), the ``node_name``
      and ``stack_trace`` torch's own ``map_recorded_events_to_aten_ops_with_stack_trace`` gives it
      (it needs the in-process registry of the generated code, which the file does not carry), and per
      node of the exported graph its ``stack_trace`` and ``nn_module_stack``.
    """
    import tinylm  # type: ignore[import-not-found]  # /home/user/project/tinylm.py
    import torch
    import torch.fx.experimental._config as fx_config
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._utils import map_recorded_events_to_aten_ops_with_stack_trace

    torch.manual_seed(0)
    model = tinylm.TinyLM().eval()
    tokens = torch.tensor([[1, 2, 3, 4]])
    ep = torch.export.export(model, (tokens,))
    torch.export.save(ep, str(out / "profile_model.pt2"))
    for name, enrich in (("profile_trace_plain.json", False), ("profile_trace.json", True)):
        fx_config.enrich_profiler_metadata = enrich
        module = ep.module()
        module(tokens)  # warm up: first-call work stays out of the trace
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            module(tokens)
        prof.export_chrome_trace(str(PROJECT / name))  # its traceName is the path it was written to
        (out / name).write_bytes((PROJECT / name).read_bytes())
    fx_config.enrich_profiler_metadata = False
    trace = json.loads((out / "profile_trace.json").read_text())
    map_recorded_events_to_aten_ops_with_stack_trace(trace)  # adds args node_name / stack_trace in place
    torch_says = {
        str(e["args"]["Ev Idx"]): {
            "name": e["name"],
            "node_name": e["args"]["node_name"],
            "stack_trace": e["args"].get("stack_trace"),
        }
        for e in trace["traceEvents"]
        if isinstance(e.get("args"), dict) and "node_name" in e["args"] and "Ev Idx" in e["args"]
    }
    if not torch_says:
        raise SystemExit("torch mapped no profiler event to a node: enrich_profiler_metadata did nothing")
    nodes = {
        n.name: {
            "op": str(n.target),
            "stack_trace": n.meta.get("stack_trace"),
            "nn_module_stack": _plain(n.meta.get("nn_module_stack")),
        }
        for n in ep.graph.nodes
        if n.op == "call_function"
    }
    manifest = {
        "made_by": "scripts/executorch/make_samples.py --profiler",
        "torch": torch.__version__,
        "torch_event_nodes": torch_says,
        "nodes": nodes,
    }
    (out / "profile_manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    names = ["profile_model.pt2", "profile_trace.json", "profile_trace_plain.json", "profile_manifest.json"]
    _check_neutral(out, names)
    print(f"wrote the profiler samples to {out}")


def make_delegate(out: Path, *, blocks: int = 2) -> None:
    """The same model with its linear layers lowered to XNNPACK: ETRecord (with ``delegate_map``), .pte,
    an ETDump of one run, and what Inspector answered for every event, delegated ones included."""
    import executorch
    import tinylm  # type: ignore[import-not-found]  # /home/user/project/tinylm.py
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.devtools import Inspector
    from executorch.devtools.etrecord import parse_etrecord
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower

    torch.manual_seed(0)
    model = tinylm.TinyLM(blocks=blocks).eval()
    tokens = torch.tensor([[1, 2, 3, 4]])
    ep = torch.export.export(model, (tokens,))
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()], generate_etrecord=True)
    # emit_stacktrace=True fails in ExecuTorch 1.5.1 once a delegate splits a node's instructions
    # ("Each instruction should have corresponding stacktrace"): this .pte carries none.
    et = edge.to_executorch(ExecutorchBackendConfig(emit_stacktrace=False))
    et.get_etrecord().save(str(out / "delegate.etrecord"))
    (out / "delegate.pte").write_bytes(bytes(et.buffer))
    run = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(out / "delegate.pte"), str(out / "delegate.etdp"), "good"],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        raise SystemExit(f"the runtime failed: {run.stderr[-2000:]}")
    rec = parse_etrecord(str(out / "delegate.etrecord"))
    inspector = Inspector(etdump_path=str(out / "delegate.etdp"), etrecord=str(out / "delegate.etrecord"))
    events = []
    for block in inspector.event_blocks:
        for ev in block.events:
            events.append(
                {
                    "block": block.name,
                    "name": ev.name,
                    "instruction_id": ev._instruction_id,
                    "delegate_debug_identifier": ev.delegate_debug_identifier,
                    "is_delegated_op": ev.is_delegated_op,
                    "delegate_backend_name": ev.delegate_backend_name,
                    "debug_handles": ev.debug_handles,
                    "stack_traces": ev.stack_traces,
                    "module_hierarchy": {k: _plain(v) for k, v in ev.module_hierarchy.items()},
                    "op_types": ev.op_types,
                }
            )
    manifest = {
        "made_by": "scripts/executorch/make_samples.py --delegate",
        "torch": torch.__version__,
        "executorch": getattr(executorch, "__version__", "1.5.1"),
        "etrecord_members": sorted(zipfile.ZipFile(out / "delegate.etrecord").namelist()),
        "debug_handle_map": rec._debug_handle_map,
        "delegate_map": _plain(rec._delegate_map),
        "inspector_events": events,
    }
    (out / "delegate_manifest.json").write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    _check_neutral(out, ["delegate.etrecord", "delegate.pte", "delegate.etdp", "delegate_manifest.json"])
    print(f"wrote the delegate samples to {out}")


_RUNNER = r"""
import sys, torch
from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer
pte, dump, mode = sys.argv[1:]
data = open(pte, "rb").read()  # the runtime keeps pointing into this buffer: keep it alive
m = _load_for_executorch_from_buffer(data, enable_etdump=True)
tokens = torch.tensor([[1, 2, 3, 4]]) if mode == "good" else torch.tensor([[1, 2, 99, 4]])
try:
    m.run_method("forward", (tokens,))
finally:
    if dump != "-":
        m.write_etdump_result_to_file(dump)
"""


def _mobile(out: Path, model: Any) -> dict[str, Any]:
    """A lite-interpreter archive with debug info, one without its debug maps, and what each raises."""
    import torch
    from torch.jit.mobile import _load_for_lite_interpreter

    scripted = torch.jit.script(model)
    path = out / "mobile.ptl"
    scripted._save_for_lite_interpreter(str(path), _save_mobile_debug_info=True)
    full = path.read_bytes()
    src = zipfile.ZipFile(io.BytesIO(full))
    stripped = io.BytesIO()
    with zipfile.ZipFile(stripped, "w") as dst:
        for info in src.infolist():
            if info.filename.endswith(("callstack_debug_map.pkl", ".debug_pkl")):
                continue
            dst.writestr(info, src.read(info.filename))
    (out / "mobile_stripped.ptl").write_bytes(stripped.getvalue())
    bad = torch.tensor([[1, 2, 99, 4]])
    answers = {}
    for name in ("mobile.ptl", "mobile_stripped.ptl"):
        m = _load_for_lite_interpreter(str(out / name))
        try:
            m(bad)
        except Exception as exc:  # the lite interpreter's own error text is the sample
            text = str(exc)
        else:
            raise SystemExit(f"{name} ran the bad input without an error")
        stem = name.removesuffix(".ptl")
        (out / f"{stem}_error.txt").write_text(text)
        answers[name] = {"error_file": f"{stem}_error.txt", "handles": [int(h) for h in re.findall(r"\{(\d+)\}", text)]}
    return answers


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


if __name__ == "__main__":
    sys.exit(main())
