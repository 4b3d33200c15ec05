"""Export 18 real third-party models (transformers, timm, torchvision) for the size benchmark.

Run with a Python that has torch, torchvision, timm and transformers (``make real-models`` makes
one, ``.venv-real``; ``REAL_VENV=...`` names another)::

    python scripts/torch/real_models.py [OUT_DIR] [NAME ...] [--list]

No weights are downloaded: every model is built from its library's own code with random weights
(``torchvision.models.X(weights=None)``, ``timm.create_model(name, pretrained=False)``, a
``transformers`` config class with its standard or a small documented configuration), seeded, in
eval mode, and exported with ``torch.export.export`` (non-strict, static shapes). What tracepack
stores of a program (its graph, stack traces, module paths) does not depend on the weights' values.

Each program's ``model.json`` is written to ``OUT_DIR`` (default ``.bench/real/``, outside git) as
``<name>.json``, with this machine's paths replaced by neutral ones (``_sample_common.py``) and
memory addresses numbered in order of appearance (``_sample_common.stable_ids``), so two runs with
the same library versions give the same bytes; ``manifest.json`` lists each model's node count, size
and sha256 and the library versions. Models already in ``OUT_DIR`` are kept (delete one to redo it).

``benchmarks/bench_real.py`` (``make bench``, ``python -m benchmarks.run real``) reads the folder: the
defaults of ``tracepack convert`` and ``tracepack.torch.save`` against ``zstd -19 model.json``.
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
from pathlib import Path
from typing import Any

import torch
from _sample_common import REPO_ROOT, PathRewriter, check_clean, machine_prefixes, stable_ids

OUT = REPO_ROOT / ".bench" / "real"
SEED = 0


def _image(size: int = 224) -> tuple[Any, ...]:
    return (torch.randn(1, 3, size, size),)


Builder = Callable[[], tuple[Any, tuple[Any, ...], Any]]  # (module, example inputs, dynamic shapes or None)


def _torchvision(name: str, size: int = 224) -> Builder:
    def build() -> tuple[Any, tuple[Any, ...], Any]:
        import torchvision

        return getattr(torchvision.models, name)(weights=None), _image(size), None

    return build


def _timm(name: str, size: int = 224) -> Builder:
    def build() -> tuple[Any, tuple[Any, ...], Any]:
        import timm

        return timm.create_model(name, pretrained=False), _image(size), None

    return build


def hf(model: str, config: str, vocab: int, *, dynamic: bool = False, seq: int = 16, **options: Any) -> Builder:
    """A ``transformers`` model from its config class (defaults unless ``options``), on ``seq`` ids."""

    def build() -> tuple[Any, tuple[Any, ...], Any]:
        import transformers

        cfg = getattr(transformers, config)(**options)
        cfg.use_cache = False
        net = getattr(transformers, model)._from_config(cfg, attn_implementation="eager")
        shapes = ({1: torch.export.Dim("seq", min=2, max=128)},) if dynamic else None
        return _Logits(net), (torch.randint(0, vocab, (1, seq)),), shapes

    return build


class _Logits(torch.nn.Module):
    """A transformers model called on input ids, returning its first output (a tensor, not a ModelOutput)."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Any) -> Any:
        return self.model(input_ids=input_ids, return_dict=False)[0]


_SMALL_LM = {"hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4, "num_attention_heads": 4}

#: name -> builder of (module, example inputs). Six of each library; standard configurations where the
#: library has one (``bert-base``, ``gpt2``, ``t5-small``...), small ones for the decoder LMs.
MODELS: dict[str, Builder] = {
    "tv_resnet18": _torchvision("resnet18"),
    "tv_mobilenet_v3_small": _torchvision("mobilenet_v3_small"),
    "tv_efficientnet_b0": _torchvision("efficientnet_b0"),
    "tv_densenet121": _torchvision("densenet121"),
    "tv_swin_t": _torchvision("swin_t"),
    "tv_vit_b_16": _torchvision("vit_b_16"),
    "timm_vit_tiny_patch16_224": _timm("vit_tiny_patch16_224"),
    "timm_convnext_atto": _timm("convnext_atto"),
    "timm_mobilevit_xxs": _timm("mobilevit_xxs", 256),
    "timm_regnetx_002": _timm("regnetx_002"),
    "timm_mixer_s16_224": _timm("mixer_s16_224"),
    "timm_resnet26d": _timm("resnet26d"),
    "hf_bert": hf("BertModel", "BertConfig", 30522),
    "hf_gpt2": hf("GPT2Model", "GPT2Config", 50257),
    "hf_distilbert": hf("DistilBertModel", "DistilBertConfig", 30522),
    "hf_t5_encoder": hf("T5EncoderModel", "T5Config", 32128),
    "hf_llama_small": hf("LlamaModel", "LlamaConfig", 32000, vocab_size=32000, num_key_value_heads=2, **_SMALL_LM),
    "hf_qwen2_small": hf("Qwen2Model", "Qwen2Config", 32000, vocab_size=32000, num_key_value_heads=2, **_SMALL_LM),
}


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


def model_json(name: str, work: Path) -> bytes:
    """torch's ``model.json`` of model ``name``, as ``torch.export.save`` writes it."""
    torch.manual_seed(SEED)
    module, inputs, shapes = MODELS[name]()
    with torch.no_grad():
        program = torch.export.export(module.eval(), inputs, dynamic_shapes=shapes, strict=False)
    path = work / f"{name}.pt2"
    torch.export.save(program, path)
    with zipfile.ZipFile(path) as archive:
        (member,) = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
        data = archive.read(member)
    path.unlink()
    return data


def export(out: Path, names: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rewriter = PathRewriter(machine_prefixes(Path(torch.__file__).resolve().parent.parent))
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"models": {}}
    manifest["versions"] = versions()
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in names:
            path = out / f"{name}.json"
            if path.exists() and name in manifest["models"]:
                continue
            start = time.perf_counter()
            clean = stable_ids(rewriter.bytes(model_json(name, Path(tmp))))
            check_clean(f"{name} model.json", clean)
            if json.dumps(json.loads(clean)).encode() != clean:
                raise SystemExit(f"{name}: model.json is not in json.dumps' encoding")
            path.write_bytes(clean)
            nodes = len(json.loads(clean)["graph_module"]["graph"]["nodes"])
            manifest["models"][name] = {
                "file": path.name,
                "nodes": nodes,
                "bytes": len(clean),
                "sha256": hashlib.sha256(clean).hexdigest(),
            }
            took = time.perf_counter() - start
            print(f"[{name}] {nodes} nodes, model.json {len(clean)} bytes ({took:.1f} s)", flush=True)
    manifest["models"] = dict(sorted(manifest["models"].items()))
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, nargs="?", default=OUT, help=f"folder to write to (default {OUT})")
    parser.add_argument("names", nargs="*", help="models to export (default: all)")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    args = parser.parse_args()
    if args.list:
        print("\n".join(MODELS))
        return
    unknown = [n for n in args.names if n not in MODELS]
    if unknown:
        raise SystemExit(f"unknown model(s) {', '.join(unknown)}; --list lists them")
    export(args.out, args.names or list(MODELS))


if __name__ == "__main__":
    sys.exit(main())
