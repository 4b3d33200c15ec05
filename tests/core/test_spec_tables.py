"""The tables of spec/ that a reader needs verbatim, checked against the reference implementation."""

from __future__ import annotations

import re
from pathlib import Path

from tracepack.codecs import columnar
from tracepack.versions import RELEASED

SPEC = Path(__file__).resolve().parents[2] / "spec"


def _block_after(text: str, heading: str) -> list[str]:
    """The lines of the first fenced block after ``heading``."""
    rest = text[text.index(heading) :]
    m = re.search(r"```\n(.*?)```", rest, re.S)
    assert m is not None, heading
    return m.group(1).splitlines()


def test_columnar_path_numbers_are_the_implementations() -> None:
    """§6.3: number, first version, path of every released path, as columnar.path_numbers() numbers them."""
    lines = _block_after((SPEC / "06-columnar.md").read_text(), "## §6.3")
    rows = [line.split(" ", 2) for line in (ln.strip() for ln in lines)]
    paths, _numbers = columnar.path_numbers()
    assert [p for _, _, p in rows] == list(paths), "regenerate the §6.3 table from columnar.path_numbers()"
    assert [int(n) for n, _, _ in rows] == list(range(len(paths)))
    for _, version, path in rows:
        major, minor = map(int, version.split("."))
        first = min(v for v in RELEASED if path in columnar.column_paths(v))
        assert (major, minor) == first, path
