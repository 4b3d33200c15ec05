"""The crafted campaign's quick slice in ``make test`` (``make campaign`` runs all of it): every class of
issue 24, an evenly spread fixed slice of its inputs, through every entry point that reads them, each
in a worker held to a 2 GiB address space and a time limit. Every outcome must be ``refused`` (one
line, nothing written) or ``accepted`` (and given back unchanged where there is something to compare)."""

from __future__ import annotations

import pytest

from tests.hostile import crafted
from tests.hostile.campaign import BAD, run

#: Every N-th input of each class (its first always): about 260 inputs and 1,000 runs in all.
EVERY = 43


@pytest.mark.parametrize("klass", crafted.CLASSES)
def test_quick_slice(klass: str) -> None:
    report = run("quick", (klass,), every=EVERY, timeout=60.0)
    assert report.inputs[klass] > 0
    assert not report.bad, "\n".join(report.bad[:20])
    assert all(report.total(outcome) == 0 for outcome in BAD)
