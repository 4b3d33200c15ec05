"""Hypothesis strategies for hostile inputs: a surface's seed, mutated by seeded mutators.

Hypothesis picks the seed file and the mutation seed, so a failure shrinks to the simplest seed
and the lowest mutation number that still fails, and the example database replays it.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tests.hostile.mutate import mutate
from tests.hostile.surfaces import SURFACES

__all__ = ["hostile_inputs", "json_values"]


@st.composite
def hostile_inputs(draw: st.DrawFn, surface: str) -> bytes:
    """A mutant of one of ``surface``'s seeds (1-4 mutations of the kinds that surface takes)."""
    spec = SURFACES[surface]
    seeds = spec.seeds()
    _, data = seeds[draw(st.integers(0, len(seeds) - 1))]
    _, splice = seeds[draw(st.integers(0, len(seeds) - 1))]
    mutant, _how = mutate(data, draw(st.integers(0, 2**32 - 1)), spec.kinds, splice=splice)
    return mutant


def json_values() -> st.SearchStrategy[object]:
    """JSON values of any shape: nested lists and objects, strings full of brackets, quotes and
    escapes, integers long and short (signed), floats with exponents."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**60), max_value=10**60),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(alphabet=st.sampled_from('[]{}"\\,:0123456789eE.-+ a\n\u00e9\U0001f600')),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)),
        max_leaves=40,
    )
