"""Write small TorchScript archives whose debug pickles tracepack's tests read.

Run with a Python that has ``torch==2.13.0`` (tracepack itself never needs torch)::

    python scripts/torch/export_torchscript_sample.py

It writes, to ``tests/data/torch/``:

``script_legacy.pt``
    ``torch.jit.script`` + ``torch.jit.save`` with the legacy ``debug_pkl`` form
    (``torch._C._set_should_use_format_with_string_table(False)``);
``script_string_table.pt``
    the same module, string-table form (torch's default);
``traced_string_table.pt``
    ``torch.jit.trace`` of the same model (its source ranges are the tracer's
    Python stack, so paths appear inside the text too);
``lite_debug.ptl``
    ``_save_for_lite_interpreter(..., _save_mobile_debug_info=True)``, which adds
    ``mobile_debug_handles.pkl`` and ``callstack_debug_map.pkl``;
``torchscript_expected.json``
    the rows tracepack's reader must find in each debug pickle (checked here
    against torch: the legacy and string-table archives must give the same rows,
    and torch must load every rewritten archive and print the neutral paths).

Machine paths inside the debug pickles are replaced by neutral prefixes (see
``_sample_common.py``): each ``debug_pkl`` is parsed with
``tracepack.torch.torchscript.debug_pkl``, its strings are rewritten, and it is pickled
again with tracepack's writer, which reproduces torch's bytes exactly (checked
on the unmodified pickles first). The archives are then rebuilt member by member
with torch's 64-byte alignment, and ``torch.jit.load`` must accept them.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

import torch
from _sample_common import REPO_ROOT, PathRewriter, check_clean, machine_prefixes, rewrite_zip
from torch import nn

sys.path[:0] = [str(REPO_ROOT / "src"), str(REPO_ROOT / "generated" / "python")]

from tracepack.torch.torchscript.debug_pkl import (  # noqa: E402 - after the sys.path line
    CallstackDebugRow,
    SourceRangeRow,
    parse_callstack_debug_map,
    parse_debug_pkl,
    parse_mobile_debug_handles,
    write_debug_pkl,
)

DIM = 8

# -- a small TorchScript-able model: nested modules, a Sequential, a 3-deep helper chain --


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    inner = 0.7978845608 * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + torch.tanh(inner))  # ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))


def _activation(x: torch.Tensor) -> torch.Tensor:
    return _gelu_tanh(x)


def _gated(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    return _activation(x) * torch.sigmoid(gate)


class GatedActivation(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value, gate = x.chunk(2, dim=-1)
        return _gated(value, gate)


class FeedForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(DIM, 2 * DIM), GatedActivation(), nn.Linear(DIM, DIM))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.ff = FeedForward()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.ff(self.norm(x))


class TinyScript(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, DIM)
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(DIM, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.embed(x)))


# -- writing and rewriting ---------------------------------------------------------------


def rewrite_debug_pkl(name: str, raw: bytes, rewriter: PathRewriter) -> bytes:
    """Parse, neutralise paths, write back; check our writer reproduces torch's bytes."""
    parsed = parse_debug_pkl(raw, source=name)
    if write_debug_pkl(parsed.rows, parsed.form, sources=parsed.sources) != raw:
        raise SystemExit(f"{name}: tracepack's writer does not reproduce torch's bytes")
    rows = [
        dataclasses.replace(
            row,
            text=rewriter.text(row.text),
            filename=None if row.filename is None else rewriter.text(row.filename),
        )
        for row in parsed.rows
    ]
    out = write_debug_pkl(rows, parsed.form, sources=parsed.sources)
    again = parse_debug_pkl(out, source=name)
    if list(again.rows) != rows or again.sources != parsed.sources:
        raise SystemExit(f"{name}: rewritten debug_pkl does not read back")
    return out


def neutralise(src: Path, dst: Path, rewriter: PathRewriter) -> None:
    replace: dict[str, bytes] = {}
    with zipfile.ZipFile(src) as archive:
        for name in archive.namelist():
            data = archive.read(name)
            if name.endswith(".debug_pkl"):
                new = rewrite_debug_pkl(name, data, rewriter)
                if new != data:
                    replace[name] = new
            check_clean(name, replace.get(name, data))
    rewrite_zip(src, dst, replace)
    rewriter.report(dst.name)
    check_clean(dst.name, dst.read_bytes())


def row_json(row: SourceRangeRow, texts: dict[str, int]) -> list[object]:
    """``[byte_offset, text_index, filename, starting_line, start, end, tag]``;
    ``text_index`` points into the member's ``texts`` (distinct texts, first-use order)."""
    index = texts.setdefault(row.text, len(texts))
    return [row.byte_offset, index, row.filename, row.starting_line, row.start, row.end, row.tag]


def expected_for(path: Path) -> dict[str, object]:
    """What tracepack must read from ``path`` (also checks torch and tracepack agree)."""
    out: dict[str, object] = {}
    with zipfile.ZipFile(path) as archive:
        for name in sorted(archive.namelist()):
            member = name.split("/", 1)[1]
            data = archive.read(name)
            if name.endswith(".debug_pkl"):
                parsed = parse_debug_pkl(data, source=name)
                texts: dict[str, int] = {}
                rows = [row_json(r, texts) for r in parsed.rows]
                out[member] = {
                    "form": parsed.form.value,
                    "sources": list(parsed.sources),
                    "texts": list(texts),
                    "rows": rows,
                }
            elif name.endswith("callstack_debug_map.pkl"):
                cmap = parse_callstack_debug_map(data, source=name)
                out[member] = {"rows": [_cs_row_json(r) for r in cmap.rows]}
            elif name.endswith("mobile_debug_handles.pkl"):
                handles = parse_mobile_debug_handles(data, source=name)
                out[member] = {
                    "bytecode_version": handles.bytecode_version,
                    "functions": [[f.name, list(f.handles)] for f in handles.functions],
                }
    return out


def _cs_row_json(row: CallstackDebugRow) -> list[object]:
    frames: list[object] = []
    for frame in row.callstack.frames() if row.callstack is not None else []:
        module = frame.module
        info = None if module is None else [module.type_name, module.instance_name]
        frames.append([info, frame.source_range_tag, frame.function_name])
    return [row.debug_handle, row.source_range_tag, row.node_name, frames]


def verify_torch_loads(path: Path, example: torch.Tensor, want: torch.Tensor, lite: bool) -> None:
    loaded = torch.jit.load(str(path))
    got = loaded(example)
    if not torch.allclose(got, want):
        raise SystemExit(f"{path.name}: reloaded module computes something else")
    # The inlined graph prints each node's source range, read from the debug_pkl.
    graph = str(loaded.inlined_graph)
    if "/home/user/" not in graph:
        raise SystemExit(f"{path.name}: torch did not read the rewritten source ranges")
    check_clean(f"{path.name} graph as torch prints it", graph.encode())
    if lite:
        from torch.jit.mobile import _load_for_lite_interpreter

        mobile = _load_for_lite_interpreter(str(path))
        if not torch.allclose(mobile(example), want):
            raise SystemExit(f"{path.name}: lite interpreter computes something else")
    print(f"[{path.name}] torch.jit.load OK; source ranges read: {graph.count('/home/user/')}")


def save(module: torch.jit.ScriptModule, path: Path, string_table: bool, lite: bool) -> None:
    torch._C._set_should_use_format_with_string_table(string_table)
    try:
        if lite:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                module._save_for_lite_interpreter(str(path), _save_mobile_debug_info=True)
        else:
            torch.jit.save(module, str(path))
    finally:
        torch._C._set_should_use_format_with_string_table(True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO_ROOT / "tests" / "data" / "torch",
        help="directory for the .pt/.ptl files and torchscript_expected.json",
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    model = TinyScript().eval()
    example = torch.randn(2, 3, 4)
    want = model(example)
    scripted = torch.jit.script(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(model, (example,), check_trace=False)

    rewriter = PathRewriter(machine_prefixes(Path(torch.__file__).resolve().parent.parent))
    plan = [
        ("script_legacy.pt", scripted, False, False),
        ("script_string_table.pt", scripted, True, False),
        ("traced_string_table.pt", traced, True, False),
        ("lite_debug.ptl", scripted, True, True),
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    expected: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, module, string_table, lite in plan:
            raw = Path(tmp) / name
            save(module, raw, string_table, lite)
            dst = args.out / name
            neutralise(raw, dst, rewriter)
            verify_torch_loads(dst, example, want, lite)
            expected[name] = expected_for(dst)
            print(f"wrote {dst.relative_to(REPO_ROOT)} ({dst.stat().st_size} bytes)")

    legacy = expected["script_legacy.pt"]
    table = expected["script_string_table.pt"]
    if not isinstance(legacy, dict) or not isinstance(table, dict):
        raise SystemExit("internal error: expected dicts")
    for member, content in legacy.items():
        same = content["rows"] == table[member]["rows"] and content["texts"] == table[member]["texts"]
        if member.endswith(".debug_pkl") and not same:
            raise SystemExit(f"{member}: legacy and string-table forms disagree")
    print("legacy and string-table archives give identical rows")
    buf = io.StringIO()
    json.dump(expected, buf, indent=None, ensure_ascii=False, sort_keys=True)
    buf.write("\n")
    text = buf.getvalue()
    check_clean("torchscript_expected.json", text.encode())
    path = args.out / "torchscript_expected.json"
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path.relative_to(REPO_ROOT)} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
