"""Hypothesis strategies for hostile inputs: a surface's seed, mutated by seeded mutators.

Hypothesis picks the seed file and the mutation seed, so a failure shrinks to the simplest seed
and the lowest mutation number that still fails, and the example database replays it.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tests.hostile.mutate import mutate
from tests.hostile.surfaces import SURFACES

__all__ = ["hostile_inputs"]


@st.composite
def hostile_inputs(draw: st.DrawFn, surface: str) -> bytes:
    """A mutant of one of ``surface``'s seeds (1-4 mutations of the kinds that surface takes)."""
    spec = SURFACES[surface]
    seeds = spec.seeds()
    _, data = seeds[draw(st.integers(0, len(seeds) - 1))]
    _, splice = seeds[draw(st.integers(0, len(seeds) - 1))]
    mutant, _how = mutate(data, draw(st.integers(0, 2**32 - 1)), spec.kinds, splice=splice)
    return mutant
