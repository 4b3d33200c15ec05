"""Train tracepack's built-in zstd dictionary on torch.export programs this project generates.

Run with a Python that has ``torch==2.13.0`` (``make dictionary`` does)::

    python scripts/torch/train_dictionary.py [--cache DIR] [--check]

1. Every model of ``dictionary_models.MODELS`` (not the benchmark's models: see that module) is
   exported with ``torch.export.export`` and its ``model.json`` written, machine paths replaced
   by neutral ones, to the cache folder (``.bench/dictionary-corpus``; exported once).
2. Each ``model.json`` is imported into a tracepack document and encoded, uncompressed, with
   every codec; those payloads are the training samples, in a fixed order.
3. zstd's fastCover trainer runs with fixed parameters (``k``, ``d``, ``f``, ``steps``, one
   thread) and the dictionary id of :data:`tracepack.dictionaries.TRAINING`, so the same torch
   and corpus give the same bytes; the dictionary is written to ``src/tracepack/data/zstd/``.

``--check`` trains in memory and fails unless the result equals the shipped file byte for byte.

A retrained dictionary is a new dictionary: give it a new id and file name in
``tracepack.dictionaries`` (files written with the old one name the old id, which later installs
must still ship), see docs/dictionaries.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

import torch
from _sample_common import REPO_ROOT, PathRewriter, check_clean, machine_prefixes
from dictionary_models import MODELS, export

sys.path[:0] = [str(REPO_ROOT / "src"), str(REPO_ROOT / "generated" / "python")]

import zstandard  # noqa: E402 - after sys.path

import tracepack  # noqa: E402
from tracepack.container import HEADER_SIZE  # noqa: E402
from tracepack.dictionaries import TRAINING, dictionary_path  # noqa: E402
from tracepack.torch.export.model_json import import_model_json  # noqa: E402

CACHE = REPO_ROOT / ".bench" / "dictionary-corpus"
#: A strict export's ``nn_module_stack`` keys and ``from_node`` graph ids are Python object ids, and
#: its targets print function addresses (``<function relu at 0x7f...>``): memory addresses, different
#: on every run. Each distinct one becomes ``140000000000000 + n`` / ``0x7f0000000000 + n`` (first
#: seen first). No other number in these programs has 13 digits or more.
_OBJECT_ID = re.compile(rb"(?<![0-9.])[1-9][0-9]{12,15}(?![0-9.])")
_ADDRESS = re.compile(rb"0x[0-9a-f]{9,16}\b")


def stable_ids(data: bytes) -> bytes:
    """``data`` with object ids and addresses numbered in order of appearance (deterministic)."""
    ids: dict[bytes, bytes] = {}
    data = _OBJECT_ID.sub(lambda m: ids.setdefault(m.group(), b"%d" % (140000000000000 + len(ids))), data)
    addresses: dict[bytes, bytes] = {}
    return _ADDRESS.sub(lambda m: addresses.setdefault(m.group(), b"0x%x" % (0x7F0000000000 + len(addresses))), data)


def export_models(cache: Path) -> list[bytes]:
    """The training programs' ``model.json`` bytes, exported once into ``cache``."""
    cache.mkdir(parents=True, exist_ok=True)
    rewriter = PathRewriter(machine_prefixes(Path(torch.__file__).resolve().parent.parent))
    out = []
    for name, build in MODELS:
        path = cache / f"{name}.json"
        if not path.exists():
            with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pt2 = Path(tmp) / f"{name}.pt2"
                torch.export.save(export(build), pt2)
                with zipfile.ZipFile(pt2) as archive:
                    (member,) = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
                    raw = archive.read(member)
            clean = stable_ids(rewriter.bytes(raw))
            check_clean(f"{name} model.json", clean)
            path.write_bytes(clean)
            print(f"[{name}] {len(json.loads(clean)['graph_module']['graph']['nodes'])} nodes, {len(clean)} bytes")
        out.append(path.read_bytes())
    return out


def samples(programs: list[bytes]) -> list[bytes]:
    """Uncompressed tracepack payloads of every program in every codec, in a fixed order."""
    out = []
    for data in programs:
        doc = import_model_json(data)
        for codec in TRAINING.codecs:
            out.append(tracepack.dumps(doc, codec=codec, compression="none")[HEADER_SIZE:])
    return out


def train(training: list[bytes]) -> bytes:
    spec = TRAINING
    trained = zstandard.train_dictionary(
        spec.size, training, k=spec.k, d=spec.d, f=spec.f, steps=1, threads=1, dict_id=spec.dict_id, level=19
    )
    return trained.as_bytes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=CACHE, help="folder of the exported training programs")
    parser.add_argument("--check", action="store_true", help="fail unless training gives the shipped file")
    args = parser.parse_args()
    if torch.__version__.split("+")[0] != "2.13.0":
        print(f"warning: the dictionary is trained with torch 2.13.0, this is {torch.__version__}")
    training = samples(export_models(args.cache))
    data = train(training)
    target = dictionary_path(TRAINING)
    digest = hashlib.sha256(data).hexdigest()
    print(f"{TRAINING.name}: id {TRAINING.dict_id}, {len(data)} bytes, sha256 {digest}, {len(training)} samples")
    if args.check:
        if not target.exists() or target.read_bytes() != data:
            raise SystemExit(
                f"{target.name}: training does not reproduce the shipped dictionary: the importer or the codecs "
                f"write other samples than at {TRAINING.trained_at or 'its training'} (check that commit out to "
                "reproduce it; ship a new dictionary when retraining pays, docs/dictionaries.md)"
            )
        print(f"{target.name}: reproduced byte for byte")
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    print(f"wrote {target.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
