"""The committed ExecuTorch samples and what ExecuTorch's Inspector and torch answered for them."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "data" / "executorch"
ETRECORD = DATA / "model.etrecord"
PTE = DATA / "model.pte"
ETDUMP = DATA / "model.etdp"
LOG = DATA / "kernel_failure.log"
MOBILE = DATA / "mobile.ptl"
MOBILE_STRIPPED = DATA / "mobile_stripped.ptl"
#: Inspector leaves these out of op association (ExecuTorch's RESERVED_FRAMEWORK_EVENT_NAMES and the
#: framework events the portable runtime writes with chain -1).
FRAMEWORK_EVENTS = {"Method::init", "Program::load_method", "Method::execute"}


@cache
def manifest() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "manifest.json").read_text())
    return data
