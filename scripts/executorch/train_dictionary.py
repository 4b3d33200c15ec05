"""Train the built-in ExecuTorch zstd dictionary from the corpus ``dictionary_corpus.py`` made.

Run with the project's own Python (no torch or executorch needed: the corpus is ETRecords)::

    python scripts/executorch/train_dictionary.py [--corpus DIR] [--check]

Every ETRecord of the corpus folder (``.bench/executorch-dictionary-corpus``, file names in sorted
order) is imported with :func:`tracepack.torch.executorch.etrecord.import_etrecord`, and each method's
document encoded uncompressed with MessagePack and columnar; those payloads are the training samples. zstd's fastCover
trainer runs with the fixed parameters and id of :data:`tracepack.dictionaries.EXECUTORCH_TRAINING`, one
thread, so the same corpus and the same tracepack code give the same bytes. ``--check`` trains in memory
and fails unless the result equals the shipped file (docs/dictionaries.md).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO_ROOT / "src"), str(REPO_ROOT / "generated" / "python"), str(REPO_ROOT / "scripts" / "torch")]

import zstandard  # noqa: E402 - after sys.path
from _sample_common import check_clean  # noqa: E402 - the exporters' one machine-path rule

import tracepack  # noqa: E402
from tracepack.container import HEADER_SIZE  # noqa: E402
from tracepack.dictionaries import EXECUTORCH_TRAINING, DictionarySpec, dictionary_path  # noqa: E402
from tracepack.torch.executorch.etrecord import import_etrecord  # noqa: E402

CORPUS = REPO_ROOT / ".bench" / "executorch-dictionary-corpus"
#: The codecs an ETRecord's method is written with compressed (``tracepack convert`` keeps the smaller of the
#: two); FlatBuffers and JSON payloads are left out of training: a 512 KiB dictionary holds more of these two.
CODECS = ("msgpack", "columnar")


def samples(corpus: Path) -> list[bytes]:
    """Uncompressed payloads of every method of every ETRecord in ``corpus``, every codec, fixed order."""
    records = sorted(corpus.glob("*.etrecord"))
    if not records:
        raise SystemExit(f"{corpus}: no ETRecords; make them with scripts/executorch/dictionary_corpus.py")
    out = []
    for path in records:
        data = path.read_bytes()
        check_clean(path.name, data)  # no machine path may reach a shipped dictionary
        for doc in import_etrecord(data, source=path.name).values():
            for codec in CODECS:
                out.append(tracepack.dumps(doc, codec=codec, compression="none")[HEADER_SIZE:])
    return out


def train(training: list[bytes], spec: DictionarySpec = EXECUTORCH_TRAINING) -> bytes:
    trained = zstandard.train_dictionary(
        spec.size, training, k=spec.k, d=spec.d, f=spec.f, steps=1, threads=1, dict_id=spec.dict_id, level=19
    )
    return trained.as_bytes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="folder of the training ETRecords")
    parser.add_argument("--check", action="store_true", help="fail unless training gives the shipped file")
    args = parser.parse_args()
    training = samples(args.corpus)
    data = train(training)
    spec = EXECUTORCH_TRAINING
    target = dictionary_path(spec)
    digest = hashlib.sha256(data).hexdigest()
    print(f"{spec.name}: id {spec.dict_id}, {len(data)} bytes, sha256 {digest}, {len(training)} samples")
    if args.check:
        if not target.exists() or target.read_bytes() != data:
            raise SystemExit(
                f"{target.name}: training does not reproduce the shipped dictionary: the corpus, the importer or "
                f"the codecs differ from {spec.trained_at or 'its training'} (docs/dictionaries.md)"
            )
        print(f"{target.name}: reproduced byte for byte")
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    print(f"wrote {target.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
