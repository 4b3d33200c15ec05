"""Write one torch release's sample set and record what that release reads back.

Run inside a virtualenv that has the torch release to sample (and nothing of
tracepack: only torch and the standard library are used)::

    python scripts/torch/releases/make_samples.py OUT_DIR [--scratch DIR]

``make release-samples`` (``build_all.py``) does this for every release, each in
its own virtualenv. ``OUT_DIR`` (``tests/data/torch/releases/<version>/``) gets:

``<name>.pt2``
    ``torch.export.save`` of ``mlp`` (nested modules), ``transformer`` (getitem
    nodes from ``chunk``), ``cnn`` (conv + batch norm, eval), ``dynamic`` (dynamic
    batch: symbolic sizes, ``sym_size`` nodes) and ``cond`` (``torch.cond``, where
    the release exports it);
``script.pt`` / ``traced.pt`` / ``lite.ptl``
    ``torch.jit.script`` / ``torch.jit.trace`` of ``ScriptNet`` and the lite
    interpreter file with mobile debug info;
``readback.json``
    what this release itself reads from those files: for every ``.pt2`` the fx
    nodes of ``torch.export.load`` (name, op, target, args, stack trace,
    ``nn_module_stack``), the graph signature, and the outputs on the recorded
    inputs; for the TorchScript files the outputs, and for ``lite.ptl`` the lite
    interpreter's error text on bad inputs, with the debug maps in the file and
    with them stripped (``Debug info for handle(s): ... was not found.``).

Every machine path inside the files (stack traces, ``debug_pkl`` source ranges)
and inside the recorded text is rewritten to a neutral prefix
(``/home/user/project/``, ``/home/user/.venv/lib/python3.11/site-packages/``,
see ``_sample_common.py``) before anything is read back, so the release reads
the very bytes that are committed.
"""

import argparse
import json
import pickletools
import shutil
import struct
import sys
import tempfile
import traceback
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import models  # noqa: E402
import torch  # noqa: E402
from _sample_common import PathRewriter, check_clean, copy_zip, machine_prefixes  # noqa: E402

RELEASE = ".".join(torch.__version__.split("+")[0].split(".")[:2])

# -- JSON forms of what torch gives back -----------------------------------------------------------


def tensor_json(t: Any) -> Any:
    if isinstance(t, torch.Tensor):
        return {
            "dtype": str(t.dtype).replace("torch.", ""),
            "shape": list(t.shape),
            "values": t.detach().reshape(-1).tolist(),
        }
    if isinstance(t, (list, tuple)):
        return [tensor_json(x) for x in t]
    return repr(t)


def type_name(t: Any) -> str:
    if isinstance(t, str):
        return t
    return f"{getattr(t, '__module__', '?')}.{getattr(t, '__qualname__', repr(t))}"


def target_name(t: Any) -> str:
    if isinstance(t, str):
        return t
    if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(t)
    name = getattr(t, "__name__", None)
    module = getattr(t, "__module__", None)
    if name and module:
        return f"{module}.{name}"
    return str(t)


def arg_json(a: Any) -> Any:
    if isinstance(a, torch.fx.Node):
        return {"node": a.name}
    if isinstance(a, (list, tuple)):
        return [arg_json(x) for x in a]
    if isinstance(a, dict):
        return {str(k): arg_json(v) for k, v in a.items()}
    if isinstance(a, (bool, int, float, str)) or a is None:
        return a
    return repr(a)


def graph_json(graph: Any) -> list[dict[str, Any]]:
    out = []
    for node in graph.nodes:
        meta = node.meta
        stack = meta.get("nn_module_stack")
        entry: dict[str, Any] = {
            "name": node.name,
            "op": node.op,
            "target": target_name(node.target),
            "args": arg_json(node.args),
            "kwargs": arg_json(node.kwargs),
            "stack_trace": meta.get("stack_trace"),
            "nn_module_stack": None if stack is None else [[k, v[0], type_name(v[1])] for k, v in stack.items()],
        }
        sfs = meta.get("source_fn_stack")
        if sfs is not None:
            entry["source_fn_stack"] = [[a, target_name(b)] for a, b in sfs]
        val = meta.get("val")
        if isinstance(val, torch.Tensor):
            entry["val"] = {"dtype": str(val.dtype).replace("torch.", ""), "shape": [str(s) for s in val.shape]}
        elif val is not None and not isinstance(val, (list, tuple)):
            entry["val"] = {"value": str(val)}
        out.append(entry)
    return out


def submodule_graphs(gm: Any) -> dict[str, Any]:
    out = {}
    for name, sub in gm.named_children():
        if isinstance(sub, torch.fx.GraphModule):
            out[name] = graph_json(sub.graph)
            out.update({f"{name}.{k}": v for k, v in submodule_graphs(sub).items()})
    return out


# -- path rewriting ----------------------------------------------------------------------------------

_STRING_OPS = {"BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8"}


def rewrite_pickle_strings(data: bytes, fix: Callable[[str], str]) -> bytes:
    """``data`` with every unicode string opcode's text passed through ``fix``; nothing else moves
    (the memo refers to positions on the stack, not in the bytes)."""
    ops = list(pickletools.genops(data))
    out = bytearray()
    last = 0
    for i, (op, arg, pos) in enumerate(ops):
        if op.name not in _STRING_OPS or not isinstance(arg, str):
            continue
        new = fix(arg)
        if new == arg:
            continue
        end = ops[i + 1][2] if i + 1 < len(ops) else len(data)
        raw = new.encode("utf-8", "surrogatepass")
        out += data[last:pos]
        if op.name == "SHORT_BINUNICODE" and len(raw) < 256:
            out += b"\x8c" + bytes([len(raw)]) + raw
        else:
            out += b"X" + struct.pack("<I", len(raw)) + raw
        last = end
    out += data[last:]
    return bytes(out)


def neutralise(src: Path, dst: Path, rewriter: PathRewriter) -> None:
    replace: dict[str, bytes] = {}
    with zipfile.ZipFile(src) as archive:
        for info in archive.infolist():
            name = info.filename
            data = archive.read(name)
            new = data
            if name.endswith(".json"):
                new = rewriter.bytes(data)
            elif name.endswith((".debug_pkl", ".pkl")) and b"/" in data:
                new = rewrite_pickle_strings(data, rewriter.text)
            if new != data:
                replace[name] = new
            check_clean(f"{dst.name}:{name}", new)
    copy_zip(src, dst, replace)
    check_clean(dst.name, dst.read_bytes())


# -- torch.export --------------------------------------------------------------------------------------


def export(model: Any, args: tuple[Any, ...], dynamic_batch: bool) -> Any:
    if not dynamic_batch:
        return torch.export.export(model, args)
    Dim = getattr(torch.export, "Dim", None)
    if Dim is not None:
        batch = Dim("batch", min=2, max=64)
        return torch.export.export(model, args, dynamic_shapes={"x": {0: batch}})
    from torch.export import dynamic_dim  # torch 2.1

    return torch.export.export(model, args, constraints=[dynamic_dim(args[0], 0) >= 2])


def run_program(ep: Any, args: tuple[Any, ...]) -> Any:
    module = getattr(ep, "module", None)
    with torch.no_grad():
        if module is not None:
            try:
                return module()(*args)
            except TypeError:
                pass
        return ep(*args)


def export_cases() -> Iterator[tuple[str, Any, list[tuple[Any, ...]], bool]]:
    torch.manual_seed(0)
    yield "mlp", models.MLP().eval(), [(torch.randn(2, 4),)], False
    yield "transformer", models.Transformer().eval(), [(torch.randn(1, 5, models.DIM),)], False
    yield "cnn", models.CNN().eval(), [(torch.randn(1, 3, 6, 6),)], False
    yield "dynamic", models.Dynamic().eval(), [(torch.randn(3, models.DIM),), (torch.randn(5, models.DIM),)], True
    yield "cond", models.CondBranches().eval(), [(torch.randn(2, models.DIM),), (-torch.ones(2, models.DIM),)], False


def schema_version() -> str | None:
    try:
        from torch._export.serde import schema
    except ImportError:
        return None
    version = getattr(schema, "SCHEMA_VERSION", None)
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version)
    return None if version is None else str(version)


def do_exports(out: Path, tmp: Path, rewriter: PathRewriter, record: dict[str, Any]) -> None:
    for name, model, inputs, dynamic in export_cases():
        entry: dict[str, Any] = {"kind": "export", "inputs": [tensor_json(list(a)) for a in inputs]}
        record["files"][f"{name}.pt2"] = entry
        try:
            with torch.no_grad():
                eager = [tensor_json(model(*a)) for a in inputs]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ep = export(model, inputs[0], dynamic)
            raw = tmp / f"{name}.pt2"
            torch.export.save(ep, str(raw))
        except Exception as exc:  # a release without the feature: recorded, not fatal
            entry.update(skipped=rewriter.text(f"{type(exc).__name__}: {exc}".splitlines()[0][:300]))
            record["files"].pop(f"{name}.pt2")
            record["skipped"][f"{name}.pt2"] = entry["skipped"]
            print(f"[{RELEASE}] {name}: not exported: {entry['skipped']}")
            continue
        dst = out / f"{name}.pt2"
        neutralise(raw, dst, rewriter)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = torch.export.load(str(dst))
        with zipfile.ZipFile(dst) as archive:
            entry["members"] = archive.namelist()
        entry["eager_outputs"] = eager
        entry["outputs"] = [tensor_json(run_program(loaded, a)) for a in inputs]
        entry["nodes"] = graph_json(loaded.graph)
        subs = submodule_graphs(loaded.graph_module)
        if subs:
            entry["subgraphs"] = subs
        entry["graph_signature"] = rewriter.text(str(loaded.graph_signature))
        entry["range_constraints"] = {str(k): str(v) for k, v in loaded.range_constraints.items()}
        entry["state_dict"] = sorted(loaded.state_dict)
        print(f"[{RELEASE}] {name}.pt2: {len(entry['nodes'])} nodes, {dst.stat().st_size} bytes")


# -- TorchScript ---------------------------------------------------------------------------------------


def save_script(module: Any, path: Path, lite: bool) -> None:
    if lite:
        module._save_for_lite_interpreter(str(path), _save_mobile_debug_info=True)
    else:
        torch.jit.save(module, str(path))


def strip_members(src: Path, dst: Path, drop: tuple[str, ...]) -> list[str]:
    """``src`` without the members whose names end with one of ``drop``; returns those dropped."""
    dropped = []
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            if info.filename.endswith(drop):
                dropped.append(info.filename.split("/", 1)[1])
                continue
            zout.writestr(info, zin.read(info.filename))
    return dropped


def lite_error(path: Path, args: tuple[Any, ...], rewriter: PathRewriter) -> str | None:
    from torch.jit.mobile import _load_for_lite_interpreter

    mobile = _load_for_lite_interpreter(str(path))
    try:
        mobile(*args)
    except Exception as exc:  # the text is what is recorded
        return rewriter.text(str(exc))
    return None


def do_torchscript(out: Path, tmp: Path, rewriter: PathRewriter, record: dict[str, Any]) -> None:
    torch.manual_seed(1)
    model = models.ScriptNet().eval()
    x = torch.randn(2, 4)
    g = torch.randn(2, models.DIM)
    with torch.no_grad():
        eager = tensor_json(model(x, g))
    scripted = torch.jit.script(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(model, (x, g), check_trace=False)
    bad = {
        "bad_x_features": (torch.randn(2, 5), g),
        "bad_g_features": (x, torch.randn(2, 3)),
        "bad_x_dtype": (x.double(), g),
    }
    for name, module, lite in (
        ("script.pt", scripted, False),
        ("traced.pt", traced, False),
        ("lite.ptl", scripted, True),
    ):
        raw = tmp / name
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            save_script(module, raw, lite)
        dst = out / name
        neutralise(raw, dst, rewriter)
        entry: dict[str, Any] = {"kind": "lite" if lite else "torchscript", "inputs": tensor_json([x, g])}
        entry["eager_outputs"] = eager
        loaded = torch.jit.load(str(dst))
        with torch.no_grad():
            entry["outputs"] = tensor_json(loaded(x, g))
        entry["inlined_graph"] = rewriter.text(str(loaded.inlined_graph))
        if lite:
            from torch.jit.mobile import _load_for_lite_interpreter

            mobile = _load_for_lite_interpreter(str(dst))
            entry["lite_outputs"] = tensor_json(mobile(x, g))
            stripped = tmp / "stripped.ptl"
            entry["stripped_members"] = strip_members(dst, stripped, ("callstack_debug_map.pkl",))
            errors = {}
            for case, args in bad.items():
                errors[case] = {
                    "inputs": tensor_json(list(args)),
                    "with_debug_maps": lite_error(dst, args, rewriter),
                    "maps_stripped": lite_error(stripped, args, rewriter),
                }
            entry["errors"] = errors
        check_clean(name, json.dumps(entry).encode())
        record["files"][name] = entry
        print(f"[{RELEASE}] {name}: {dst.stat().st_size} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the release's sample folder")
    parser.add_argument("--scratch", type=Path, help="also copy the release's schema files here")
    args = parser.parse_args()
    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rewriter = PathRewriter(machine_prefixes(Path(torch.__file__).resolve().parent.parent))
    record: dict[str, Any] = {
        "torch": torch.__version__.split("+")[0],
        "release": RELEASE,
        "python": ".".join(str(v) for v in sys.version_info[:3]),
        "schema_version": schema_version(),
        "files": {},
        "skipped": {},
    }
    if args.scratch:
        serde = Path(torch.__file__).parent / "_export" / "serde"
        args.scratch.mkdir(parents=True, exist_ok=True)
        for member in ("schema.py", "schema.yaml", "serialize.py", "upgrade.py"):
            if (serde / member).exists():
                shutil.copy(serde / member, args.scratch / member)
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        do_exports(out, tmp, rewriter, record)
        try:
            do_torchscript(out, tmp, rewriter, record)
        except Exception:
            record["skipped"]["torchscript"] = rewriter.text(traceback.format_exc().splitlines()[-1])
            traceback.print_exc()
    text = json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"
    check_clean("readback.json", text.encode())
    (out / "readback.json").write_text(text, encoding="utf-8")
    total = sum(p.stat().st_size for p in out.iterdir())
    print(f"[{RELEASE}] wrote {len(list(out.iterdir()))} files, {total} bytes, schema {record['schema_version']}")


if __name__ == "__main__":
    main()
