"""What users get without options (issue 26): ``tracepack convert``'s defaults against ``zstd -19 model.json``.

The defaults are :func:`tracepack.codecs.encode_best`: the codec ``convert`` picks, the zstd level for the
payload's size (:func:`tracepack.codecs.level_for`) and the built-in dictionary; ``tracepack pack`` and
``tracepack.torch.save`` write their member the same way. Per model, in one run:

* real models: 18 third-party exports (transformers, timm, torchvision, random weights) of
  ``scripts/torch/real_models.py`` in ``.bench/real/`` (``make real-models`` makes them, in a venv of
  their own); the defaults' file against ``zstd -19`` of the model's ``model.json``, per model (target
  <= 0.5x) and their geometric mean (target <= 0.40x); beside it (no target) today's defaults before
  issue 26 (level 3) and the size of the member ``tracepack.torch.save`` writes;
* the size ladder of ``bench_sizes`` (``.bench/sizes``, exported there): the same figures;
* speed: ``tracepack convert`` of the ladder's 10k-node program (``size_10k``) with the defaults against
  ``--level 3`` (the default before issue 26), whole command, CPU time of this process, interleaved
  (target: at most 1.5x slower);
* the sizes are the committed record's (``benchmarks/results/defaults.json``, written by
  ``python -m benchmarks.run defaults --record``), whose figures the README quotes (tests/readme checks).

The real set's dictionary is not trained on any of these models (docs/dictionaries.md). Skipped, with
a note saying how to make them, where the folders are missing.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import time
import zipfile
from pathlib import Path

import zstandard

import tracepack
from benchmarks.report import RESULTS, Figure, Report, recorded
from tracepack.codecs import encode_best

SECTION = "defaults"
ROOT = Path(__file__).resolve().parent.parent
REAL_DIR = ROOT / ".bench" / "real"
LADDER_DIR = ROOT / ".bench" / "sizes"
#: Targets of issue 26.
GEOMEAN_TARGET = 0.40
MODEL_TARGET = 0.5
CONVERT_SLOWDOWN = 1.5


def _model_json(path: Path) -> bytes:
    if path.suffix == ".json":
        return path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        (member,) = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
        return archive.read(member)


def _z19(data: bytes) -> int:
    return len(zstandard.ZstdCompressor(level=19).compress(data))


def _recorded(report: Report) -> None:
    """This run's sizes are the committed ones (``benchmarks/results/defaults.json``, which the README's
    figures are checked against by tests/readme): the sizes are the same bytes every run, so any
    difference means the code or the models changed and the record (and the docs) must be redone with
    ``python -m benchmarks.run defaults --record``. The convert timing is recorded but not compared."""
    committed = recorded(SECTION)
    ours = [f for f in report.figures if f.section == SECTION and f.unit != "s"]
    stale = [] if committed else [f"no {RESULTS.name}/{SECTION}.json"]
    for f in ours:
        row = committed.get(f.name)
        if row is None:
            stale.append(f"{f.name}: not recorded")
        elif not (math.isclose(row["value"], f.value, rel_tol=1e-9) and math.isclose(row["baseline"], f.baseline)):
            was, now = f"{row['value']:g} vs {row['baseline']:g}", f"{f.value:g} vs {f.baseline:g}"
            stale.append(f"{f.name}: recorded {was}, this run {now}")
    stale += [f"{name}: recorded, not in this run" for name in committed.keys() - {f.name for f in report.figures}]
    note = "; ".join(stale[:3]) + (f" (+{len(stale) - 3} more)" if len(stale) > 3 else "")
    report.add(
        Figure(SECTION, "recorded sizes (benchmarks/results) are this run's", 1 + len(stale), 1, "x",
               higher_is_better=False, target=1.0, note=note or "the record (and the README's figures) are this run's")
    )  # fmt: skip


def _set(report: Report, label: str, paths: list[Path]) -> None:
    from tracepack.torch.export.model_json import export_model_json, import_model_json
    from tracepack.torch.pt2 import pack_program

    ratios = []
    for path in paths:
        data = _model_json(path)
        doc = import_model_json(data)
        z_json = _z19(data)
        now = encode_best(doc)
        before = encode_best(doc, level=3)
        if export_model_json(tracepack.loads(now.data)) != data:
            raise AssertionError(f"{path.name}: model.json does not come back byte for byte")
        _, member = pack_program(data, source=path.name)
        ratios.append(len(now.data) / z_json)
        note = f"{now.describe()}; level 3 (before): {len(before.data) / z_json:.3f}x; save's member {len(member)} B"
        report.add(
            Figure(SECTION, f"{label} {path.stem} ({len(doc)} nodes): defaults vs zstd-19 model.json", len(now.data),
                   z_json, "B", higher_is_better=False, target=MODEL_TARGET, note=note)
        )  # fmt: skip
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    report.add(
        Figure(SECTION, f"{label}: geometric mean of defaults over {len(ratios)} models", geo, 1.0, "x",
               higher_is_better=False, target=GEOMEAN_TARGET, note=f"worst {max(ratios):.3f}x")
    )  # fmt: skip


def _convert_speed(report: Report, path: Path) -> None:
    from tracepack.cli import main

    out = ROOT / ".bench" / "defaults-convert.tpk"

    def convert(*extra: str) -> float:
        start = time.process_time()
        with contextlib.redirect_stdout(io.StringIO()):
            if main(["convert", str(path), str(out), "-f", *extra]) != 0:
                raise AssertionError(f"convert {path.name} failed")
        return time.process_time() - start

    best = {"before": math.inf, "now": math.inf}
    sizes = {}
    for _ in range(3):  # interleaved, so a change of the machine's load hits both alike
        for key, extra in (("before", ("--level", "3")), ("now", ())):
            best[key] = min(best[key], convert(*extra))
            sizes[key] = out.stat().st_size
    out.unlink()
    note = f"CPU time, whole command; files {sizes['now']} B vs {sizes['before']} B at level 3"
    report.add(
        Figure(SECTION, f"convert {path.stem}: defaults vs --level 3 (before)", best["now"], best["before"], "s",
               target=1 / CONVERT_SLOWDOWN, note=note)
    )  # fmt: skip


def run(report: Report) -> None:
    real = sorted(p for p in REAL_DIR.glob("*.json") if p.name != "manifest.json")
    if real:
        versions = json.loads((REAL_DIR / "manifest.json").read_text()).get("versions", {})
        print(f"(real models exported with {', '.join(f'{k} {v}' for k, v in versions.items())})")
        _set(report, "real", real)
    else:
        print(f"(no real models in {REAL_DIR}: `make real-models` exports them, in a venv of their own; skipped)")
    ladder = sorted(LADDER_DIR.glob("size_*.pt2"))
    if ladder:
        _set(report, "ladder", ladder)
    else:
        print(f"(no size ladder in {LADDER_DIR}: `python -m benchmarks.run sizes` exports it with torch; skipped)")
    big = LADDER_DIR / "size_10k.pt2"
    if big.exists():
        _convert_speed(report, big)
    if len(real) == 18 and len(ladder) == 14 and not report.recording:
        _recorded(report)
