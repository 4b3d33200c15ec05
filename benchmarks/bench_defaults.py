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
* the README's figures of the real set and the ladder are this run's.

The real set's dictionary is not trained on any of these models (docs/dictionaries.md). Skipped, with
a note saying how to make them, where the folders are missing.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import time
import zipfile
from pathlib import Path

import zstandard

import tracepack
from benchmarks.report import Figure, Report
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


#: The README's figures of this section: README text -> (set, which figure), checked against the run.
README_FIGURES = re.compile(
    r"the geometric mean is (?P<real_geo>[0-9.]+)x and the worst (?P<real_worst>[0-9.]+)x; on the size ladder "
    r"\(8 to 10,245-node exports, static and dynamic\) (?P<ladder_geo>[0-9.]+)x"
)


def _readme(report: Report, figures: dict[str, float]) -> None:
    """The README's figures (``README_FIGURES``) are this run's, as printed (3 decimals)."""
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    m = README_FIGURES.search(text)
    stale = ["the README's sentence is gone"] if m is None else []
    for key, value in figures.items():
        if m is not None and m.group(key) != f"{value:.3f}":
            stale.append(f"{key}: README {m.group(key)}x, this run {value:.3f}x")
    note = "; ".join(stale) or "the README's figures are this run's"
    report.add(
        Figure(SECTION, "README: defaults' figures as measured", 1 + len(stale), 1, "x", higher_is_better=False,
               target=1.0, note=note)
    )  # fmt: skip


def _set(report: Report, label: str, paths: list[Path]) -> tuple[float, float]:
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
    return geo, max(ratios)


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
    figures: dict[str, float] = {}
    real = sorted(p for p in REAL_DIR.glob("*.json") if p.name != "manifest.json")
    if real:
        versions = json.loads((REAL_DIR / "manifest.json").read_text()).get("versions", {})
        print(f"(real models exported with {', '.join(f'{k} {v}' for k, v in versions.items())})")
        figures["real_geo"], figures["real_worst"] = _set(report, "real", real)
    else:
        print(f"(no real models in {REAL_DIR}: `make real-models` exports them, in a venv of their own; skipped)")
    ladder = sorted(LADDER_DIR.glob("size_*.pt2"))
    if ladder:
        figures["ladder_geo"], _ = _set(report, "ladder", ladder)
    else:
        print(f"(no size ladder in {LADDER_DIR}: `python -m benchmarks.run sizes` exports it with torch; skipped)")
    if len(real) == 18 and len(ladder) == 14:
        _readme(report, figures)
    big = LADDER_DIR / "size_10k.pt2"
    if big.exists():
        _convert_speed(report, big)
