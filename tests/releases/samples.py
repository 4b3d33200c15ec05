"""The samples every torch release wrote (``tests/data/torch/releases/<version>/``) and what each
release read back from them (``readback.json``), written by ``make release-samples``."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
RELEASES_DIR = ROOT / "tests" / "data" / "torch" / "releases"
MANIFEST: dict[str, Any] = json.loads((RELEASES_DIR / "manifest.json").read_text(encoding="utf-8"))
VERSIONS: list[str] = sorted(MANIFEST["releases"], key=lambda v: [int(x) for x in v.split(".")])
NOT_FOUND = re.compile(r"Debug info for handle\(s\): debug_handles:\{(\d+)\}, was not found\.")


@cache
def readback(version: str) -> dict[str, Any]:
    """What torch ``version`` read from its own samples."""
    data: dict[str, Any] = json.loads((RELEASES_DIR / version / "readback.json").read_text(encoding="utf-8"))
    return data


def files(kind: str) -> list[tuple[str, str]]:
    """``(version, file name)`` of every sample of ``kind`` (``export``, ``torchscript``, ``lite``)."""
    return [(v, name) for v in VERSIONS for name, e in sorted(readback(v)["files"].items()) if e["kind"] == kind]


def lite_errors() -> list[tuple[str, str]]:
    """``(version, case)`` of every bad input the lite interpreter was given."""
    out = []
    for version, name in files("lite"):
        out.extend((version, case) for case in sorted(readback(version)["files"][name]["errors"]))
    return out


def path(version: str, name: str) -> Path:
    return RELEASES_DIR / version / name
