"""Export real third-party programs as whole ``.pt2`` archives for the load benchmark.

Run with a Python that has torch, torchvision, timm and transformers (tracepack never needs them)::

    python scripts/torch/real_programs.py [OUT_DIR] [NAME ...] [--list]

``benchmarks/bench_torch_load.py`` (``make bench``) times ``tracepack.torch.load`` against
``torch.export.load`` on every archive it finds in ``OUT_DIR`` (default ``.bench/real-pt2/``,
outside git) and prints this command when the folder is missing.

The models are the 18 of the size benchmark's real set (six each of torchvision, timm and
transformers; built from the libraries' own code with random, seeded weights: nothing is downloaded,
what a load costs does not depend on the weights' values), exported non-strict with static shapes,
plus ``hf_llama_9k_dyn``: a transformers Llama with a small hidden size and 112 layers exported with a
dynamic sequence length (about 9,000 nodes, the dynamic-shape program of issue 27).

Each archive is what ``torch.export.save`` wrote, with its ``model.json`` member's machine paths
replaced by neutral ones (``_sample_common.py``); every other member is copied as it is (64-byte
aligned, stored). Archives already in ``OUT_DIR`` are kept (delete one to redo it). The torch that
exports must write an export schema the loading torch reads (schema 8.x: torch 2.12-2.15).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch
from _sample_common import REPO_ROOT, PathRewriter, check_clean, machine_prefixes, rewrite_zip
from real_models import MODELS as REAL_SET
from real_models import SEED, Builder, hf

OUT = REPO_ROOT / ".bench" / "real-pt2"

_TINY_DEEP_LM = {
    "vocab_size": 1000,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 112,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
}

#: The size benchmark's 18 (scripts/torch/real_models.py) and one deep dynamic-shape program.
MODELS: dict[str, Builder] = {
    **REAL_SET,
    "hf_llama_9k_dyn": hf("LlamaModel", "LlamaConfig", 1000, dynamic=True, **_TINY_DEEP_LM),
}


def export_one(name: str, out: Path, work: Path, rewriter: PathRewriter) -> dict[str, Any]:
    start = time.perf_counter()
    torch.manual_seed(SEED)
    module, inputs, shapes = MODELS[name]()
    with torch.no_grad():
        program = torch.export.export(module.eval(), inputs, dynamic_shapes=shapes, strict=False)
    raw_path = work / f"{name}.pt2"
    torch.export.save(program, raw_path)
    with zipfile.ZipFile(raw_path) as archive:
        (member,) = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
        raw = archive.read(member)
    clean = rewriter.bytes(raw)
    check_clean(f"{name} model.json", clean)
    dst = out / f"{name}.pt2"
    tmp = dst.with_name(f".{dst.name}.tmp")
    rewrite_zip(raw_path, tmp, {member: clean})
    tmp.replace(dst)
    raw_path.unlink()
    nodes = len(json.loads(clean)["graph_module"]["graph"]["nodes"])
    took = time.perf_counter() - start
    print(f"[{name}] {nodes} nodes, {dst.stat().st_size} bytes ({took:.1f} s)", flush=True)
    return {"name": name, "file": dst.name, "nodes": nodes, "bytes": dst.stat().st_size}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, default=OUT)
    parser.add_argument("names", nargs="*", help="models to export (default: all)")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(MODELS))
        return 0
    unknown = [n for n in args.names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s): {', '.join(unknown)}")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    rewriter = PathRewriter(machine_prefixes(Path(torch.__file__).resolve().parent.parent))
    versions = {"torch": torch.__version__}
    for lib in ("torchvision", "timm", "transformers"):
        versions[lib] = str(getattr(__import__(lib), "__version__", "?"))
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"models": {}}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in args.names or list(MODELS):
            if (out / f"{name}.pt2").exists():
                continue
            row = export_one(name, out, Path(tmp), rewriter)
            manifest["models"][name] = row
            manifest["versions"] = versions
            manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
