"""The minimal reproducers in ``repro/``: each one refused by its surface with one clear line,
or (:data:`HARMLESS`) accepted without doing what made it a hole.

``<surface>--<what>.<ext>``: written by ``python -m tests.hostile.repro.make_repro`` (which this
test also checks is what the folder holds), one per hole issue 12 found or the fuzzer turned up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.repro import make_repro
from tests.hostile.surfaces import SURFACES

REPRO = Path(__file__).parent / "repro"
FILES = sorted(p for p in REPRO.iterdir() if "--" in p.name)
#: Reproducers that are now accepted, because what made them holes cannot happen any more.
HARMLESS = {
    # `pack` copies the members of a plain-zipfile archive raw, compressed as they are: the bomb is
    # never expanded (the archive surface checks that pack's output is no larger than its input).
    "archive--bzip2-zip-bomb.pt2",
    # An empty symbolic expression: now kept as it is, and given back byte for byte.
    "model_json--empty-expr-str.json",
}


def test_the_folder_is_what_the_script_writes() -> None:
    assert {p.name: p.read_bytes() for p in FILES} == make_repro.files()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_reproducer_is_refused(path: Path, tmp_path: Path) -> None:
    surface = SURFACES[path.name.split("--", 1)[0]]
    assert surface.run(path.read_bytes(), tmp_path) == ("accepted" if path.name in HARMLESS else "refused")
