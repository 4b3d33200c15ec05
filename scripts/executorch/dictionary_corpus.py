"""Make the training corpus of the built-in ExecuTorch zstd dictionary (run by hand, with executorch).

Needs torch 2.13.0 and executorch 1.5.1 (the environment of ``make_samples.py``, not the project's, not
CI)::

    make executorch-dictionary ET_PYTHON=../et-venv/bin/python

Each model of ``scripts/torch/dictionary_models.py`` (the torch dictionary's training models: MLPs, VGG-style
conv nets, an unrolled GRU, MLP-Mixers, torch's TransformerEncoder, a small U-Net), plus the two of
:data:`EXTRA` below (an embedding bag and a 1-d conv tagger, so that edge programs with embeddings are
seen), is exported, lowered with ``to_edge`` and ``to_executorch`` (and, for a few, with the XNNPACK
partitioner, so that delegate maps are seen), and its ETRecord written to the corpus folder
(``.bench/executorch-dictionary-corpus``) with only the members tracepack reads (the pickled weights are
dropped). None of them is the model of the committed samples or of the benchmark (``tinylm.py`` of
``make_samples.py``); ``tests/executorch/test_dictionary.py`` checks that no source line of it is in the
dictionary.

As in ``make_samples.py``, the export runs from ``/home/user/project`` (a link to a temporary folder
holding the models' source and a link to the environment), so the recorded paths are the ones an
ExecuTorch user's project has, with nothing to rewrite; memory addresses a strict export records (module
keys, graph ids) are numbered in order of appearance, as ``train_dictionary.py`` does. The dictionary
itself is trained from this folder by ``scripts/executorch/train_dictionary.py`` in the project's own
environment (``make executorch-dictionary`` runs both).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / ".bench" / "executorch-dictionary-corpus"
PROJECT = Path("/home/user/project")
#: ETRecord members kept (everything tracepack reads; weights are pickles it never reads).
_KEEP_SUFFIXES = ("_state_dict", "_constants", "_example_inputs")
#: Models lowered to XNNPACK as well (a delegate call and its map in the ETRecord).
DELEGATED = ("mlp3_dyn", "mixer4_dyn", "vgg2")

EXTRA_SOURCE = '''\
import torch
from torch import nn


class BagClassifier(nn.Module):
    """Mean of token embeddings, two dense layers."""

    def __init__(self, vocab: int = 40, width: int = 10) -> None:
        super().__init__()
        self.table = nn.Embedding(vocab, width)
        self.hidden = nn.Linear(width, width)
        self.logits = nn.Linear(width, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pooled = self.table(ids).mean(dim=1)
        return torch.log_softmax(self.logits(torch.tanh(self.hidden(pooled))), dim=-1)


class ConvTagger(nn.Module):
    """Embeddings, a 1-d convolution over the sequence, a tag per position."""

    def __init__(self, vocab: int = 30, width: int = 8, tags: int = 5) -> None:
        super().__init__()
        self.vocab_embedding = nn.Embedding(vocab, width)
        self.context = nn.Conv1d(width, width, kernel_size=3, padding=1)
        self.norm = nn.LayerNorm(width)
        self.tagger = nn.Linear(width, tags)

    def forward(self, seq: torch.Tensor) -> torch.Tensor:
        e = self.vocab_embedding(seq)
        c = torch.relu(self.context(e.transpose(1, 2))).transpose(1, 2)
        return torch.softmax(self.tagger(self.norm(e + c)), dim=-1)
'''

_OBJECT_ID = re.compile(rb"(?<![0-9.])[1-9][0-9]{12,15}(?![0-9.])")
_ADDRESS = re.compile(rb"0x[0-9a-f]{9,16}\b")


def _stable_ids(data: bytes, ids: dict[bytes, bytes], addresses: dict[bytes, bytes]) -> bytes:
    data = _OBJECT_ID.sub(lambda m: ids.setdefault(m.group(), b"%d" % (140000000000000 + len(ids))), data)
    return _ADDRESS.sub(lambda m: addresses.setdefault(m.group(), b"0x%x" % (0x7F0000000000 + len(addresses))), data)


def _models() -> list[tuple[str, Any]]:
    import torch
    from dictionary_models import MODELS  # type: ignore[import-not-found]  # copied into the project folder
    from et_extra_models import BagClassifier, ConvTagger  # type: ignore[import-not-found]
    from torch.export import Dim

    def bag() -> tuple[Any, ...]:
        return BagClassifier(), (torch.randint(0, 40, (3, 7)),), None, False

    def tagger() -> tuple[Any, ...]:
        return ConvTagger(), (torch.randint(0, 30, (2, 9)),), {"seq": {0: Dim("b", min=1, max=64)}}, False

    return [*MODELS, ("bag", bag), ("tagger_dyn", tagger)]


def _record(path: Path, out: Path) -> int:
    """Copy the ETRecord's JSON members (no weights) to ``out``, addresses numbered; its edge node count."""
    import json

    ids: dict[bytes, bytes] = {}
    addresses: dict[bytes, bytes] = {}
    nodes = 0
    with zipfile.ZipFile(path) as z, zipfile.ZipFile(out, "w") as w:
        for info in z.infolist():
            if info.filename.endswith(_KEEP_SUFFIXES):
                continue
            data = _stable_ids(z.read(info), ids, addresses)
            if info.filename.startswith("edge_dialect_exported_program/"):
                nodes += len(json.loads(data)["graph_module"]["graph"]["nodes"])
            w.writestr(zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return nodes


def inside(out: Path) -> None:
    import warnings

    import torch
    from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower

    out.mkdir(parents=True, exist_ok=True)
    for name, build in _models():
        torch.manual_seed(1234)
        module, args, shapes, strict = build()
        variants = [(name, False)] + ([(name + "_xnnpack", True)] if name in DELEGATED else [])
        for label, delegated in variants:
            target = out / f"{label}.etrecord"
            if target.exists():
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ep = torch.export.export(module.eval(), args, dynamic_shapes=shapes, strict=strict)
                    if delegated:
                        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

                        edge = to_edge_transform_and_lower(
                            ep, partitioner=[XnnpackPartitioner()], generate_etrecord=True
                        )
                    else:
                        edge = to_edge(ep, generate_etrecord=True)
                    et = edge.to_executorch(ExecutorchBackendConfig(emit_stacktrace=False))
                    with tempfile.TemporaryDirectory() as tmp:
                        raw = Path(tmp) / "r.etrecord"
                        et.get_etrecord().save(str(raw))
                        nodes = _record(raw, target)
            except Exception as exc:  # a model ExecuTorch cannot lower is left out (printed, deterministic)
                print(f"[{label}] skipped: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            print(f"[{label}] {nodes} edge nodes, {target.stat().st_size} bytes")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(CORPUS))
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = Path(args.out).resolve()
    if args.inside:
        sys.path.insert(0, str(PROJECT))
        inside(out)
        return 0
    if PROJECT.exists() or PROJECT.is_symlink():
        raise SystemExit(f"{PROJECT} exists; this script links it to a temporary folder and needs it free")
    with tempfile.TemporaryDirectory(prefix="et-dict-") as tmp:
        work = Path(tmp)
        shutil.copy(ROOT / "scripts" / "torch" / "dictionary_models.py", work / "dictionary_models.py")
        (work / "et_extra_models.py").write_text(EXTRA_SOURCE)
        (work / ".venv").symlink_to(Path(sys.prefix))
        PROJECT.parent.mkdir(parents=True, exist_ok=True)
        PROJECT.symlink_to(work)
        try:
            python = PROJECT / ".venv" / "bin" / "python"
            cmd = [str(python), str(Path(__file__).resolve()), "--out", str(out), "--inside"]
            return subprocess.run(cmd, cwd=str(PROJECT), check=False).returncode
        finally:
            PROJECT.unlink()


if __name__ == "__main__":
    raise SystemExit(main())
