"""The short hostile run of ``make test`` (``make fuzz`` runs the long one): every surface, every outcome right.

Each surface gets a fixed, seeded batch of mutants (the same inputs on every run) and a hypothesis
search of its own; an input is right when tracepack accepts it and answers consistently, or
refuses it with a one-line InputError, within the time limit.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.hostile.fuzz import GOOD, run
from tests.hostile.strategies import hostile_inputs
from tests.hostile.surfaces import SURFACES

CASES = 40


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_seeded_batch(surface: str) -> None:
    report = run(CASES, seed=12, surfaces=[surface])
    assert set(report.outcomes) <= GOOD, "\n".join(report.bad)
    assert sum(report.outcomes.values()) == CASES


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_hypothesis_search(surface: str) -> None:
    run_surface = SURFACES[surface].run

    @settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], max_examples=25)
    @given(data=hostile_inputs(surface))
    def check(data: bytes) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            assert run_surface(data, Path(tmp)) in GOOD

    check()
