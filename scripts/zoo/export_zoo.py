"""Export a zoo of real third-party programs (transformers, timm, torchvision) for the zoo benchmark.

Run with a Python that has torch, torchvision, timm and transformers (not the project's .venv)::

    python scripts/zoo/export_zoo.py [OUT_DIR] [--list] [--only SUBSTRING]

No weights are downloaded: every model is built from its library's own code with random weights
(``transformers`` config classes with small documented sizes, ``timm.create_model(...,
pretrained=False)``, ``torchvision.models.X(weights=None)``), seeded, in eval mode, and exported with
``torch.export.export`` (non-strict). The grid is architectures x sizes x input shapes x static or
dynamic shapes (batch, and sequence length for the language models): :func:`programs` lists it;
a combination torch cannot export (some models refuse a dynamic dimension) is reported and left out,
the same way on every run. Weights are kept small (hidden sizes 32-128, 1-3 layers, 10 classes), so
the whole folder is a few hundred MB.

Each program is written to ``OUT_DIR`` (default ``.bench/zoo/``, outside git) as ``<name>.pt2``, as
``torch.export.save`` writes it, with this machine's paths in ``model.json`` replaced by neutral ones
(``scripts/torch/_sample_common.py``) and memory addresses numbered in order of appearance, so two
runs with the same library versions write the same bytes; ``manifest.json`` lists each program's node
count, size and sha256, the programs left out and why, and the library versions. Programs already in
``OUT_DIR`` are kept (delete one to redo it).

``benchmarks/bench_zoo.py`` (``make bench``, ``python -m benchmarks.run zoo``) reads the folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "torch"))

import torch
from _sample_common import REPO_ROOT, PathRewriter, check_clean, machine_prefixes, rewrite_zip, stable_ids
from torch.export import Dim

OUT = REPO_ROOT / ".bench" / "zoo"
SEED = 0


class _Logits(torch.nn.Module):
    """A transformers model called on input ids, returning its first output (a tensor, not a ModelOutput)."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Any) -> Any:
        return self.model(input_ids=input_ids, return_dict=False)[0]


VOCAB = 1000


def _hf(model: str, config: str, **options: Any) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        import transformers

        cfg = getattr(transformers, config)(**options)
        cfg.use_cache = False
        for key in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"):
            if isinstance(getattr(cfg, key, None), int):
                setattr(cfg, key, 0)
        net = getattr(transformers, model)._from_config(cfg, attn_implementation="eager")
        return _Logits(net)

    return build


def _bert_like(layers: int, hidden: int) -> dict[str, Any]:
    return {
        "vocab_size": VOCAB,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 2,
        "max_position_embeddings": 128,
    }


def _decoder(layers: int, hidden: int) -> dict[str, Any]:
    return {**_bert_like(layers, hidden), "num_key_value_heads": 1}


#: family -> (size name -> builder); every language model takes input ids of shape (batch, sequence).
LANGUAGE: dict[str, Callable[[int, int], Callable[[], torch.nn.Module]]] = {
    "bert": lambda n, h: _hf("BertModel", "BertConfig", **_bert_like(n, h)),
    "roberta": lambda n, h: _hf("RobertaModel", "RobertaConfig", **_bert_like(n, h)),
    "distilbert": lambda n, h: _hf(
        "DistilBertModel", "DistilBertConfig", vocab_size=VOCAB, dim=h, hidden_dim=2 * h, n_layers=n, n_heads=2
    ),
    "albert": lambda n, h: _hf("AlbertModel", "AlbertConfig", embedding_size=32, **_bert_like(n, h)),
    "electra": lambda n, h: _hf("ElectraModel", "ElectraConfig", embedding_size=32, **_bert_like(n, h)),
    "gpt2": lambda n, h: _hf(
        "GPT2Model", "GPT2Config", vocab_size=VOCAB, n_embd=h, n_layer=n, n_head=2, n_positions=128
    ),
    "opt": lambda n, h: _hf(
        "OPTModel",
        "OPTConfig",
        vocab_size=VOCAB,
        hidden_size=h,
        ffn_dim=2 * h,
        num_hidden_layers=n,
        num_attention_heads=2,
        word_embed_proj_dim=h,
        max_position_embeddings=128,
    ),
    "gpt_neox": lambda n, h: _hf("GPTNeoXModel", "GPTNeoXConfig", **_bert_like(n, h)),
    "llama": lambda n, h: _hf("LlamaModel", "LlamaConfig", **_decoder(n, h)),
    "qwen2": lambda n, h: _hf("Qwen2Model", "Qwen2Config", **_decoder(n, h)),
    "mistral": lambda n, h: _hf("MistralModel", "MistralConfig", **_decoder(n, h)),
    "phi": lambda n, h: _hf("PhiModel", "PhiConfig", **_decoder(n, h)),
    "gemma": lambda n, h: _hf("GemmaModel", "GemmaConfig", head_dim=h // 2, **_decoder(n, h)),
    "t5": lambda n, h: _hf(
        "T5EncoderModel", "T5Config", vocab_size=VOCAB, d_model=h, d_ff=2 * h, num_layers=n, num_heads=2, d_kv=h // 2
    ),
}
LANGUAGE_SIZES = {"l1h32": (1, 32), "l2h64": (2, 64), "l3h128": (3, 128)}
#: (batch, sequence) of the example inputs
LANGUAGE_SHAPES = {"b1s8": (1, 8), "b2s16": (2, 16), "b4s32": (4, 32)}


def _timm(name: str, **options: Any) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        import timm

        return timm.create_model(name, pretrained=False, num_classes=10, **options)  # type: ignore[no-any-return]

    return build


def _torchvision(name: str, **options: Any) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        import torchvision

        return getattr(torchvision.models, name)(weights=None, num_classes=10, **options)  # type: ignore[no-any-return]

    return build


#: name -> builder (the size is part of the architecture's name); every vision model takes (batch, 3, H, W).
VISION: dict[str, Callable[[], torch.nn.Module]] = {
    "timm_resnet10t": _timm("resnet10t"),
    "timm_resnet14t": _timm("resnet14t"),
    "timm_mobilenetv3_small_050": _timm("mobilenetv3_small_050"),
    "timm_mobilenetv3_small_075": _timm("mobilenetv3_small_075"),
    "timm_lcnet_050": _timm("lcnet_050"),
    "timm_lcnet_075": _timm("lcnet_075"),
    "timm_convnext_atto": _timm("convnext_atto"),
    "timm_ghostnet_050": _timm("ghostnet_050"),
    "timm_vit_d2": _timm("vit_tiny_patch16_224", img_size=64, depth=2, dynamic_img_size=True),
    "timm_vit_d4": _timm("vit_tiny_patch16_224", img_size=64, depth=4, dynamic_img_size=True),
    "timm_regnetx_002": _timm("regnetx_002"),
    "tv_squeezenet1_1": _torchvision("squeezenet1_1"),
    "tv_shufflenet_v2_x0_5": _torchvision("shufflenet_v2_x0_5"),
    "tv_mnasnet0_5": _torchvision("mnasnet0_5"),
    "tv_mobilenet_v3_small": _torchvision("mobilenet_v3_small"),
    "tv_mobilenet_v2": _torchvision("mobilenet_v2", width_mult=0.5),
    "tv_resnet18": _torchvision("resnet18"),
}
#: (batch, image side) of the example inputs
VISION_SHAPES = {"b1i64": (1, 64), "b2i96": (2, 96), "b4i128": (4, 128)}
#: The example inputs of the dynamic-shape exports (torch specializes a dimension of size 1).
DYNAMIC_EXAMPLE = "b2s16", "b2i96"


@dataclass(frozen=True)
class Program:
    name: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[], tuple[Any, ...]]
    #: the dynamic_shapes argument of torch.export.export (None: static)
    dynamic: Callable[[], Any] | None


def _ids(batch: int, seq: int) -> Callable[[], tuple[Any, ...]]:
    return lambda: (torch.randint(0, VOCAB, (batch, seq)),)


def _images(batch: int, side: int) -> Callable[[], tuple[Any, ...]]:
    return lambda: (torch.randn(batch, 3, side, side),)


def programs() -> list[Program]:
    """The whole grid, in a fixed order: each size with each static shape, and once with dynamic shapes
    (batch and sequence for the language models, batch for the vision models)."""
    out = []
    seq_dims = lambda: ({0: Dim("batch", min=1, max=64), 1: Dim("seq", min=2, max=64)},)  # noqa: E731
    batch_dim = lambda: ({0: Dim("batch", min=1, max=64)},)  # noqa: E731
    for family, make in LANGUAGE.items():
        for size, (layers, hidden) in LANGUAGE_SIZES.items():
            build = make(layers, hidden)
            for shape, (batch, seq) in LANGUAGE_SHAPES.items():
                out.append(Program(f"hf_{family}-{size}-{shape}", build, _ids(batch, seq), None))
            batch, seq = LANGUAGE_SHAPES[DYNAMIC_EXAMPLE[0]]
            out.append(Program(f"hf_{family}-{size}-dyn", build, _ids(batch, seq), seq_dims))
    for arch, build in VISION.items():
        for shape, (batch, side) in VISION_SHAPES.items():
            out.append(Program(f"{arch}-{shape}", build, _images(batch, side), None))
        batch, side = VISION_SHAPES[DYNAMIC_EXAMPLE[1]]
        out.append(Program(f"{arch}-dyn", build, _images(batch, side), batch_dim))
    return out


def versions() -> dict[str, str]:
    import timm
    import torchvision
    import transformers

    return {
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "timm": timm.__version__,
        "transformers": transformers.__version__,
    }


def export_one(program: Program, out: Path, work: Path, rewriter: PathRewriter) -> dict[str, Any]:
    torch.manual_seed(SEED)
    module = program.build().eval()
    inputs = program.inputs()
    dynamic = None if program.dynamic is None else program.dynamic()
    with torch.no_grad():
        exported = torch.export.export(module, inputs, dynamic_shapes=dynamic, strict=False)
    raw_path = work / f"{program.name}.pt2"
    torch.export.save(exported, raw_path)
    with zipfile.ZipFile(raw_path) as archive:
        (member,) = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
        raw = archive.read(member)
    clean = stable_ids(rewriter.bytes(raw))
    check_clean(f"{program.name} model.json", clean)
    dst = out / f"{program.name}.pt2"
    tmp = out / f".{program.name}.pt2.tmp"
    rewrite_zip(raw_path, tmp, {member: clean})
    raw_path.unlink()
    check_clean(dst.name, tmp.read_bytes())
    tmp.replace(dst)
    data = dst.read_bytes()
    return {
        "file": dst.name,
        "nodes": len(json.loads(clean)["graph_module"]["graph"]["nodes"]),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def export(out: Path, only: str | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rewriter = PathRewriter(machine_prefixes(Path(torch.__file__).resolve().parent.parent))
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest.setdefault("programs", {})
    manifest.setdefault("left_out", {})
    manifest["versions"] = versions()
    todo = [p for p in programs() if only is None or only in p.name]
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, program in enumerate(todo, 1):
            if (out / f"{program.name}.pt2").exists() and program.name in manifest["programs"]:
                continue
            if program.name in manifest["left_out"]:
                continue
            start = time.perf_counter()
            try:
                row = export_one(program, out, Path(tmp), rewriter)
            except Exception as exc:  # torch refuses this combination: say so, leave it out
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                manifest["left_out"][program.name] = why
                print(f"[{i}/{len(todo)}] {program.name}: left out ({why})", flush=True)
                continue
            manifest["programs"][program.name] = row
            took = time.perf_counter() - start
            print(
                f"[{i}/{len(todo)}] {program.name}: {row['nodes']} nodes, {row['bytes']} bytes ({took:.1f} s)",
                flush=True,
            )
            if i % 10 == 0:
                manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    total = sum(r["bytes"] for r in manifest["programs"].values())
    print(f"{len(manifest['programs'])} programs ({total / 1e6:.0f} MB), {len(manifest['left_out'])} left out: {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, nargs="?", default=OUT, help=f"folder to write to (default {OUT})")
    parser.add_argument("--list", action="store_true", help="list the programs and exit")
    parser.add_argument("--only", metavar="TEXT", help="only the programs whose name contains TEXT")
    args = parser.parse_args()
    if args.list:
        print("\n".join(p.name for p in programs()))
        return
    export(args.out, args.only)


if __name__ == "__main__":
    main()
