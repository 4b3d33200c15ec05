"""What a torch.export dictionary may be trained on, given the real-model benchmark (issue 26, item 2).

The size benchmark's 18 real models (``scripts/torch/real_models.py``, exported to ``.bench/real/``) must
not be in any shipped dictionary's training set, or its figures would measure the dictionary's memory of
them. Third-party programs of *other* architectures may be: they share library code (transformers'
masking and attention helpers, ``timm/layers``, ``torchvision/ops``) that any user's export has too. The
rule, checked here and by tests/core/test_dictionary_provenance.py:

1. **No benchmark architecture.** A training architecture's model file (the file of its non-torch,
   model-specific frames: ``transformers/models/X/*.py``, ``timm/models/*.py``, ``torchvision/models/*.py``)
   is none of a benchmark model's. That drops e.g. ``timm_resnet10t`` (``timm/models/resnet.py`` is
   ``resnet26d``'s), every ``timm_vit_*``, ``tv_resnet18``.
2. **No copies of one.** transformers copies code between models ("Copied from", modular files): an
   architecture whose model-file code lines are for the most part (:data:`COPY_SHARE`) lines of a
   benchmark model's file is a copy of it and is dropped too (``hf_roberta``/``hf_electra``/``hf_albert``
   of BERT, ``hf_mistral``/``hf_gemma`` of Llama).
3. **No benchmark line.** In the programs that remain, every stack-trace code line that is also a line of
   a benchmark model's file (``x = self.bn1(x)``, ``attn_output, attn_weights = attention_interface(``)
   is replaced by ``...`` before training (:func:`scrub`), so no such line can be in the dictionary.

The benchmark's lines are recorded as sha256 hashes (``dictionary_corpus/benchmark-lines.sha256``;
no third-party code is committed), written by ``--record`` from ``.bench/real``, so CI checks rule 3
on the shipped dictionaries without the models. ``--trial ZOO_DIR`` trains a candidate dictionary on
the eligible programs of the zoo (``scripts/zoo/export_zoo.py``) with the newest spec's parameters and
prints its figures on the real set against the default dictionary's (docs/dictionaries.md).

Standard library only, except ``--trial`` (tracepack and zstandard).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

SCRIPT_DIR = Path(__file__).resolve().parent
REPO_ROOT = SCRIPT_DIR.parent.parent
REAL_DIR = REPO_ROOT / ".bench" / "real"
RECORD = SCRIPT_DIR / "dictionary_corpus" / "benchmark-lines.sha256"
#: The benchmark's model files (paths inside site-packages), one a line.
FILES_RECORD = SCRIPT_DIR / "dictionary_corpus" / "benchmark-files.txt"
#: An architecture whose model-file lines are at least this share of benchmark lines is a copy (rule 2).
COPY_SHARE = 0.5
#: ``File "...", line N, in fn`` and the code line under it, as torch writes a node's ``stack_trace``.
FRAME = re.compile(r'File "([^"\n]+)", line (\d+), in ([^\n]+)\n    ([^\n]*)')
#: The model-specific files of the three libraries (a frame in one is a model's own code).
MODEL_FILE = re.compile(
    r"site-packages/((?:transformers/models/[^/]+|timm/models|torchvision/models(?:/[^/]+)?)/[^/]+\.py)$"
)
SCRUBBED = "..."


def line_hash(line: str) -> str:
    """The recorded form of a code line: sha256 of the line without its indentation."""
    return hashlib.sha256(line.strip().encode("utf-8")).hexdigest()


def _stack_traces(obj: object) -> Iterator[str]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key == "stack_trace" and isinstance(value, str):
                yield value
            else:
                yield from _stack_traces(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _stack_traces(value)


def model_frames(model_json: bytes) -> set[tuple[str, str]]:
    """(model file, code line) of every frame in a model-specific file of a program's stack traces."""
    out = set()
    for trace in _stack_traces(json.loads(model_json)):
        for m in FRAME.finditer(trace):
            found = MODEL_FILE.search(m.group(1))
            if found and m.group(4).strip():
                out.add((found.group(1), m.group(4).strip()))
    return out


def benchmark(programs: Iterable[bytes]) -> tuple[set[str], set[str]]:
    """The benchmark's model files and the hashes of their code lines."""
    files: set[str] = set()
    hashes: set[str] = set()
    for data in programs:
        for file, line in model_frames(data):
            files.add(file)
            hashes.add(line_hash(line))
    return files, hashes


def eligible(data: bytes, files: set[str], hashes: set[str]) -> str:
    """Why a training program breaks rule 1 or 2 ("" if it does not)."""
    frames = model_frames(data)
    same = sorted({f for f, _ in frames} & files)
    if same:
        return f"its model file {same[0]} is a benchmark model's"
    lines = {line for _, line in frames}
    shared = sum(line_hash(line) in hashes for line in lines)
    if lines and shared / len(lines) >= COPY_SHARE:
        return f"{shared} of its {len(lines)} model-file lines are a benchmark model's (a copy)"
    return ""


def scrub(model_json: bytes, hashes: set[str]) -> bytes:
    """``model_json`` with every stack-trace code line whose hash is in ``hashes`` replaced by ``...``
    (rule 3); the rest of the document is unchanged, and a program with no such line comes back as is."""

    def frame(m: re.Match[str]) -> str:
        if line_hash(m.group(4)) not in hashes:
            return m.group(0)
        return m.group(0)[: m.start(4) - m.start(0)] + SCRUBBED

    def walk(obj: object) -> object:
        if isinstance(obj, dict):
            return {
                k: FRAME.sub(frame, v) if k == "stack_trace" and isinstance(v, str) else walk(v) for k, v in obj.items()
            }
        if isinstance(obj, list):
            return [walk(v) for v in obj]
        return obj

    doc = json.loads(model_json)
    clean = walk(doc)
    return model_json if clean == doc else json.dumps(clean, ensure_ascii=False).encode("utf-8")


def dictionary_lines(data: bytes) -> set[str]:
    """Hashes of the text lines in a dictionary's content: each run of printable ASCII, and the run without
    its first byte (a printable MessagePack length byte before a string), split at newlines, indentation
    stripped. A code line the codecs store as a string of its own (NUL-separated or length-prefixed) or
    inside a whole stack trace is one of them; measured against a plain substring search of the
    benchmark's lines, it finds 44 of the 45 in a dictionary trained on unscrubbed copies of them."""
    out = set()
    for run in re.finditer(rb"[\x20-\x7e]+", data):
        text = run.group(0).decode("ascii")
        for candidate in (text, text[1:]):
            out.update(line_hash(part) for part in candidate.split("\n") if part.strip())
    return out


def recorded() -> set[str]:
    """The recorded hashes of the benchmark's model-file lines."""
    return {line.split()[0] for line in RECORD.read_text(encoding="utf-8").splitlines() if line.strip()}


def recorded_files() -> set[str]:
    """The recorded model files of the benchmark."""
    return {line.strip() for line in FILES_RECORD.read_text(encoding="utf-8").splitlines() if line.strip()}


def _real_programs(folder: Path) -> list[tuple[str, bytes]]:
    paths = sorted(p for p in folder.glob("*.json") if p.name != "manifest.json")
    if not paths:
        raise SystemExit(f"no real models in {folder}: `make real-models` exports them")
    return [(p.stem, p.read_bytes()) for p in paths]


def _zoo_programs(folder: Path) -> list[tuple[str, bytes]]:
    out = []
    for path in sorted(folder.glob("*.pt2")):
        with zipfile.ZipFile(path) as archive:
            (member,) = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
            out.append((path.stem, archive.read(member)))
    return out


def _ladder_programs(folder: Path) -> list[tuple[str, bytes]]:
    """The size ladder's programs (``.bench/sizes/size_*.pt2``, benchmarks/bench_sizes.py exports them)."""
    out = _zoo_programs(folder)
    if not out:
        raise SystemExit(f"no size ladder in {folder}: `python -m benchmarks.run sizes` exports it")
    return [(name, data) for name, data in out if name.startswith("size_")]


def trial(zoo: Path, real: Path, out: Path | None, ladder: Path | None = None) -> None:
    """Train a candidate on the torch-export corpus plus the zoo's eligible, scrubbed programs; print its
    figures on the real set (and the ladder) against the default dictionary's: the defaults' file
    (``encode_best``) against ``zstd -19 model.json``, and the total of the members ``tracepack.torch.save``
    writes (``split_program``, ``encode_best``)."""
    sys.path.insert(0, str(SCRIPT_DIR))
    import train_dictionary as td
    import zstandard

    from tracepack import dictionaries
    from tracepack.codecs import encode_best
    from tracepack.torch import pt2
    from tracepack.torch.export.model_json import import_model_json

    bench = _real_programs(real)
    files, hashes = benchmark(data for _, data in bench)
    if hashes != recorded():
        print(f"warning: {RECORD.name} is not {real}'s lines (rerun --record)")
    extra = []
    for name, data in _zoo_programs(zoo):
        why = eligible(data, files, hashes)
        if why:
            print(f"  left out {name}: {why}")
        else:
            extra.append((name, scrub(data, hashes)))
    spec = dictionaries.TRAINING
    base = td.read_corpus(td.corpus_path(spec))
    samples = td.samples(base + extra, spec)
    candidate = zstandard.ZstdCompressionDict(td.train(spec, samples))
    print(f"{len(base)} recorded + {len(extra)} zoo programs, {len(samples)} samples")
    default = dictionaries.get()
    sets = [("real", bench)] + ([("ladder", _ladder_programs(ladder))] if ladder else [])
    for label, programs in sets:
        ratios: dict[str, list[float]] = {"default": [], "candidate": []}
        members = {"default": 0, "candidate": 0}
        for name, data in programs:
            doc = import_model_json(data)
            member = pt2.split_program(json.loads(data), source=name, size=len(data))
            z19 = len(zstandard.ZstdCompressor(level=19).compress(data))
            for key, zdict in (("default", default), ("candidate", candidate)):
                ratios[key].append(len(encode_best(doc, zstd_dict=zdict).data) / z19)
                members[key] += len(encode_best(member, zstd_dict=zdict).data)
            print(f"  {label} {name:28s} {ratios['default'][-1]:.3f}x -> {ratios['candidate'][-1]:.3f}x")
        for key, values in ratios.items():
            geo = math.exp(sum(map(math.log, values)) / len(values))
            over = sum(v > 0.5 for v in values)
            print(f"{label}, {dictionaries.DEFAULT if key == 'default' else 'candidate'}: geometric mean "
                  f"{geo:.4f}x, worst {max(values):.3f}x, {over} above 0.5x; members {members[key]} B")  # fmt: skip
    leaked = dictionary_lines(candidate.as_bytes()) & hashes
    print(f"benchmark lines in the candidate: {len(leaked)}")
    if out is not None:
        out.write_bytes(candidate.as_bytes())


def _check_clean(name: str, data: bytes) -> None:
    """Fail if ``data`` names a machine path: one of ``_sample_common.FORBIDDEN`` starting a path (not
    inside one, as ``transformers/models/opt/`` holds ``/opt/``)."""
    from _sample_common import FORBIDDEN

    for prefix in FORBIDDEN:
        if re.search(rb"(?<![\w.-])" + re.escape(prefix), data):
            raise SystemExit(f"{name}: a machine path remains ({prefix.decode()})")


def ship(zoo: Path, real: Path) -> None:
    """Write the newest torch.export dictionary (:data:`tracepack.dictionaries.TRAINING`, one whose spec
    names ``third_party`` programs) and its recorded inputs: the programs of the previous recorded corpus
    (``TRAINING.base``), then the zoo's eligible programs, scrubbed, in name order (what ``--trial`` trains);
    ``make dictionary-check`` retrains it from that record."""
    sys.path.insert(0, str(SCRIPT_DIR))
    import train_dictionary as td

    from tracepack import dictionaries

    spec = dictionaries.TRAINING
    if not spec.third_party or not spec.base:
        raise SystemExit(f"{spec.name} has no third-party programs: `make dictionary` trains it")
    files, hashes = benchmark(data for _, data in _real_programs(real))
    if hashes != recorded() or files != recorded_files():
        raise SystemExit(f"{RECORD.name} is not {real}'s lines (rerun --record)")
    programs = td.read_corpus(td.corpus_path(td._spec(spec.base)))
    for name, data in _zoo_programs(zoo):
        if not eligible(data, files, hashes):
            clean = scrub(data, hashes)
            _check_clean(name, clean)
            programs.append((name, clean))
    names = [name for name, _ in programs]
    if len(set(names)) != len(names):
        raise SystemExit("two training programs have one name")
    td.write_corpus(programs, td.corpus_path(spec))
    text = td.record(programs)
    td.record_path(spec).write_text(text, encoding="utf-8")
    training = td.samples(programs, spec)
    data = td.train(spec, training)
    target = dictionaries.dictionary_path(spec)
    target.write_bytes(data)
    leaked = dictionary_lines(data) & hashes
    print(f"wrote {td.corpus_path(spec).relative_to(REPO_ROOT)} ({len(programs)} programs) and {spec.inputs} "
          f"(inputs_sha256 {hashlib.sha256(text.encode()).hexdigest()})")  # fmt: skip
    print(f"wrote {target.relative_to(REPO_ROOT)}: id {spec.dict_id}, {len(data)} bytes, sha256 "
          f"{hashlib.sha256(data).hexdigest()}, {len(training)} samples, {len(leaked)} benchmark lines")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", type=Path, default=REAL_DIR, help="folder of the real models (make real-models)")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", action="store_true", help=f"write {RECORD.name} from the real models")
    mode.add_argument("--trial", type=Path, metavar="ZOO_DIR", help="train and measure a candidate on the zoo")
    mode.add_argument("--ship", type=Path, metavar="ZOO_DIR", help="write the newest dictionary and its inputs")
    parser.add_argument("--ladder", type=Path, help="--trial: also measure the size ladder in this folder")
    parser.add_argument("-o", type=Path, help="--trial: write the candidate dictionary here")
    args = parser.parse_args()
    if args.record:
        files, hashes = benchmark(data for _, data in _real_programs(args.real))
        RECORD.write_text("".join(f"{h}\n" for h in sorted(hashes)), encoding="utf-8")
        FILES_RECORD.write_text("".join(f"{f}\n" for f in sorted(files)), encoding="utf-8")
        print(f"wrote {RECORD.relative_to(REPO_ROOT)}: {len(hashes)} lines, {FILES_RECORD.name}: {len(files)} files")
        return
    if args.ship:
        ship(args.ship, args.real)
        return
    trial(args.trial, args.real, args.o, args.ladder)


if __name__ == "__main__":
    main()
