"""Train tracepack's built-in zstd dictionary on torch.export programs this project generates, and check it.

Three modes::

    python scripts/torch/train_dictionary.py                 # make dictionary: export, record, train (torch 2.13)
    python scripts/torch/train_dictionary.py --check         # make dictionary-check: retrain, compare (no torch)
    python scripts/torch/train_dictionary.py --check-corpus  # make dictionary-corpus-check: re-export, compare (torch)

Training (:data:`tracepack.dictionaries.TRAINING`, the newest torch.export dictionary):

1. Every model of ``dictionary_models.MODELS`` (not the benchmark's models: see that module) is exported
   with ``torch.export.export`` and its ``model.json`` kept, machine paths replaced by neutral ones and
   memory addresses numbered (``_sample_common``), in ``.bench/dictionary-corpus/<hash>/`` (exported once
   per version of ``dictionary_models.py``).
2. Those programs are the training inputs: written, in order, to ``scripts/torch/dictionary_corpus/NAME.tar.zst``
   (a plain tar, zstd-compressed; ``tar --zstd -xf`` opens it) with their sha256 in ``NAME.sha256``
   (``sha256sum -c`` checks the extracted files), and that record's own sha256 goes in the dictionary's
   ``DictionarySpec.inputs_sha256``. Both are committed with the dictionary.
3. Each program is imported and encoded, uncompressed, with the codecs of ``DictionarySpec.codecs`` (what
   ``convert`` weighs for it), and the member ``tracepack pack`` and ``tracepack.torch.save`` write for it
   with those of ``DictionarySpec.members``; those payloads, in that fixed order, are the samples.
4. zstd's fastCover trainer runs with fixed parameters (``size``, ``k``, ``d``, ``f``, one step, one thread)
   and the dictionary's id: the same inputs and the same tracepack code give the same bytes.

``--check`` needs no torch: for every dictionary with recorded inputs it takes the sources of the commit
that ships it (the commit that added its file, ``git log --diff-filter=A``; the working tree when that is
not committed yet or git has no history), checks the recorded inputs' hashes, retrains there and fails
unless the result equals the shipped file byte for byte. ``--check-corpus`` re-exports the training
programs with torch (2.13.0, Python 3.11, as recorded) and fails unless they hash as recorded.

A retrained dictionary is a new dictionary: give it a new id and file name in ``tracepack.dictionaries``
(files written with the old one name the old id, which later installs must still ship), see
docs/dictionaries.md.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import warnings
import zipfile
from pathlib import Path

from _sample_common import REPO_ROOT, SCRIPT_DIR, PathRewriter, check_clean, machine_prefixes, stable_ids

sys.path[:0] = [str(REPO_ROOT / "src"), str(REPO_ROOT / "generated" / "python")]

import zstandard  # noqa: E402 - after sys.path

import tracepack  # noqa: E402
from tracepack.container import HEADER_SIZE  # noqa: E402
from tracepack.dictionaries import BUILTIN, TRAINING, DictionarySpec, dictionary_path  # noqa: E402
from tracepack.torch.export.model_json import import_model_json  # noqa: E402

CACHE = REPO_ROOT / ".bench" / "dictionary-corpus"
CORPUS_DIR = SCRIPT_DIR / "dictionary_corpus"
Programs = list[tuple[str, bytes]]


def corpus_path(spec: DictionarySpec) -> Path:
    return CORPUS_DIR / f"{spec.name}.tar.zst"


def record_path(spec: DictionarySpec) -> Path:
    return REPO_ROOT / spec.inputs


# -- the training inputs -------------------------------------------------------------------------


def export_models(cache: Path) -> Programs:
    """The training programs' ``model.json`` bytes, in ``MODELS`` order (torch; exported once into ``cache``)."""
    import torch
    from dictionary_models import MODELS, export

    models_py = (SCRIPT_DIR / "dictionary_models.py").read_bytes()
    folder = cache / hashlib.sha256(models_py).hexdigest()[:12]
    folder.mkdir(parents=True, exist_ok=True)
    rewriter = PathRewriter(machine_prefixes(Path(torch.__file__).resolve().parent.parent))
    out = []
    for name, build in MODELS:
        path = folder / f"{name}.json"
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
        out.append((name, path.read_bytes()))
    return out


def write_corpus(programs: Programs, path: Path) -> None:
    """``programs`` as ``NAME.json`` files of a tar (no dates, owners or modes that vary), zstd -19."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in programs:
            info = tarfile.TarInfo(f"{name}.json")
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(zstandard.ZstdCompressor(level=19, write_checksum=True).compress(buf.getvalue()))


def read_corpus(path: Path) -> Programs:
    """The programs of a corpus file, in order."""
    raw = zstandard.ZstdDecompressor().decompress(path.read_bytes(), max_output_size=1 << 28)
    out = []
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r") as tar:
        for info in tar.getmembers():
            f = tar.extractfile(info)
            if not info.isfile() or f is None or not info.name.endswith(".json") or "/" in info.name:
                raise SystemExit(f"{path}: unexpected member {info.name!r}")
            out.append((info.name.removesuffix(".json"), f.read()))
    return out


def record(programs: Programs) -> str:
    """``sha256sum`` lines of the programs, in order."""
    return "".join(f"{hashlib.sha256(data).hexdigest()}  {name}.json\n" for name, data in programs)


# -- training ------------------------------------------------------------------------------------


def samples(programs: Programs, spec: DictionarySpec) -> list[bytes]:
    """Uncompressed tracepack payloads of every program, in a fixed order: the program in each of
    ``spec.codecs``, then the member ``tracepack pack`` writes for it in each of ``spec.members``."""
    from tracepack.torch import pt2

    out = []
    for name, data in programs:
        doc = import_model_json(data)
        for codec in spec.codecs:
            out.append(tracepack.dumps(doc, codec=codec, compression="none", block_checksums=False)[HEADER_SIZE:])
        if spec.members:
            member = pt2.split_program(json.loads(data), source=name, size=len(data))  # as pack_program does
            for codec in spec.members:
                out.append(
                    tracepack.dumps(member, codec=codec, compression="none", block_checksums=False)[HEADER_SIZE:]
                )
    return out


def train(spec: DictionarySpec, training: list[bytes]) -> bytes:
    trained = zstandard.train_dictionary(
        spec.size, training, k=spec.k, d=spec.d, f=spec.f, steps=1, threads=1, dict_id=spec.dict_id, level=19
    )
    return trained.as_bytes()


def _spec(name: str) -> DictionarySpec:
    found = [d for d in BUILTIN if d.name == name]
    if not found:
        raise SystemExit(f"no dictionary {name!r} in tracepack.dictionaries.BUILTIN")
    return found[0]


def _checked_inputs(spec: DictionarySpec) -> Programs:
    """The recorded training programs, after checking them against the record and the record against the spec."""
    rec = record_path(spec)
    if hashlib.sha256(rec.read_bytes()).hexdigest() != spec.inputs_sha256:
        raise SystemExit(f"{rec.relative_to(REPO_ROOT)}: its sha256 is not the one {spec.name}'s spec records")
    programs = read_corpus(corpus_path(spec))
    if record(programs) != rec.read_text(encoding="utf-8"):
        raise SystemExit(f"{corpus_path(spec).relative_to(REPO_ROOT)}: its programs do not hash as recorded")
    return programs


def check_here(spec: DictionarySpec) -> None:
    """Retrain ``spec`` from its recorded inputs with this tree's code; fail unless it is the shipped file."""
    programs = _checked_inputs(spec)
    training = samples(programs, spec)
    data = train(spec, training)
    target = dictionary_path(spec)
    print(f"{spec.name}: {len(programs)} programs as recorded, {len(training)} samples, sha256 {_sha(data)}")
    if not target.exists() or target.read_bytes() != data:
        raise SystemExit(f"{target.name}: retraining from the recorded inputs does not reproduce the shipped file")
    print(f"{target.name}: reproduced byte for byte")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def shipping_commit(spec: DictionarySpec) -> str | None:
    """The commit that added ``spec``'s file (None: not committed yet, or no git history here)."""
    rel = dictionary_path(spec).relative_to(REPO_ROOT)
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "log", "--diff-filter=A", "--format=%H", "--", str(rel)],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    commits = done.stdout.split()
    return commits[-1] if commits else None


def check(spec: DictionarySpec) -> None:
    """:func:`check_here` in the sources of the commit that ships ``spec`` (this tree if none), and this
    tree's file the one the spec pins."""
    shipped = dictionary_path(spec)
    if not shipped.exists() or _sha(shipped.read_bytes()) != spec.sha256:
        raise SystemExit(f"{shipped.name}: missing, or not the file whose sha256 {spec.name}'s spec pins")
    commit = shipping_commit(spec)
    if commit is None:
        print(f"{spec.name}: not committed yet (or no git history): checked with this working tree")
        check_here(spec)
        return
    print(f"{spec.name}: checked with the sources of {commit[:12]}, the commit that ships it")
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "archive", "--format=tar", commit], capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        script = Path(tmp) / "scripts" / "torch" / "train_dictionary.py"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"TRACEPACK_PURE_PYTHON": "1"}
        done = subprocess.run(
            [sys.executable, "-W", "ignore", str(script), "--check-here", spec.name], check=False, env=env
        )
        if done.returncode != 0:
            raise SystemExit(f"{spec.name}: not reproduced from the sources of {commit[:12]}")


def check_corpus(spec: DictionarySpec) -> None:
    """Export the training programs with torch and compare them with the recorded inputs."""
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        fresh = record(export_models(Path(tmp)))
    recorded = record_path(spec).read_text(encoding="utf-8")
    if spec.third_party:
        # Its third-party programs come from another exporter (spec.third_party); the first are this project's.
        recorded = "".join(recorded.splitlines(keepends=True)[: len(fresh.splitlines())])
        print(f"{spec.name}: its third-party programs are not re-exported here ({spec.third_party})")
    if fresh != recorded:
        theirs = dict(line.split("  ")[::-1] for line in recorded.splitlines())
        ours = dict(line.split("  ")[::-1] for line in fresh.splitlines())
        differ = sorted(n for n in theirs.keys() | ours.keys() if theirs.get(n) != ours.get(n))
        raise SystemExit(
            f"{spec.name}: torch {torch.__version__} (Python {sys.version_info[0]}.{sys.version_info[1]}) exports "
            f"other programs than recorded: {', '.join(differ)}"
        )
    print(f"{spec.name}: the {len(recorded.splitlines())} training programs export as recorded")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=CACHE, help="folder of the exported training programs")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="fail unless every recorded dictionary retrains")
    mode.add_argument("--check-corpus", action="store_true", help="fail unless torch exports the recorded inputs")
    mode.add_argument("--check-here", metavar="NAME", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.check_here:
        check_here(_spec(args.check_here))
        return
    recorded = [d for d in BUILTIN if d.inputs and not d.withdrawn]
    if args.check:
        if not recorded:
            raise SystemExit("no dictionary has recorded training inputs")
        for spec in recorded:
            check(spec)
        unrecorded = [
            d.name for d in BUILTIN if d.name.startswith("torch-export-") and not d.inputs and not d.withdrawn
        ]
        print(
            f"not checked (trained before inputs were recorded; shipped so their files read): {', '.join(unrecorded)}"
        )
        return
    if args.check_corpus:
        for spec in recorded:
            check_corpus(spec)
        return
    import torch

    if torch.__version__.split("+")[0] != "2.13.0" or sys.version_info[:2] != (3, 11):
        print(f"warning: trained with torch 2.13.0 and Python 3.11; this is {torch.__version__}, {sys.version}")
    spec = TRAINING
    if spec.third_party:
        raise SystemExit(
            f"{spec.name} has third-party programs: scripts/torch/dictionary_provenance.py --ship ZOO_DIR trains it "
            "(docs/dictionaries.md)"
        )
    programs = export_models(args.cache)
    write_corpus(programs, corpus_path(spec))
    text = record(programs)
    record_path(spec).write_text(text, encoding="utf-8")
    training = samples(programs, spec)
    data = train(spec, training)
    target = dictionary_path(spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    print(f"wrote {corpus_path(spec).relative_to(REPO_ROOT)} and {spec.inputs} (inputs_sha256 {_sha(text.encode())})")
    print(f"wrote {target.relative_to(REPO_ROOT)}: id {spec.dict_id}, {len(data)} bytes, sha256 {_sha(data)}, "
          f"{len(training)} samples")  # fmt: skip


if __name__ == "__main__":
    main()
