"""Hypothesis strategies for hostile inputs: a surface's seed, mutated by seeded mutators.

Hypothesis picks the seed file and the mutation seed, so a failure shrinks to the simplest seed
and the lowest mutation number that still fails, and the example database replays it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.hostile.mutate import mutate
from tests.hostile.surfaces import SURFACES

__all__ = ["hostile_inputs", "json_values", "payload_configs"]


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


#: ``path_name`` values of a torch 2.9+ payload record: the sample's own, ones naming no member or
#: another folder, and the prefixes torch.export.load hands to a full unpickler.
_PATH_NAMES = ["weight_0", "weight_1", "weight_99", "", ".", "..", "../constants/x", "/weight_0", "a\\b"]
_PATH_NAMES += ["custom_obj_0", "opaque_obj_0", "tensor_0"]


@st.composite
def payload_configs(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    """A weights/constants payload config (``{"config": {fqn: record}}``) made from ``base`` (a
    real one): records dropped, their ``path_name`` and ``use_pickle`` changed to any value a
    hostile file may hold (any truthy ``use_pickle`` is a pickle to torch), or replaced whole."""
    records = dict(base["config"])
    for fqn in list(records):
        record = dict(records[fqn])
        change = draw(st.integers(0, 5))
        if change == 1:
            record["path_name"] = draw(st.sampled_from(_PATH_NAMES))
        elif change == 2:
            record["use_pickle"] = draw(st.sampled_from([True, False, 1, 0, "yes", "", None, [1]]))
        elif change == 3:
            record["path_name"] = draw(st.sampled_from(_PATH_NAMES))
            record["use_pickle"] = True
        elif change == 4:
            del records[fqn]
            continue
        elif change == 5 and draw(st.booleans()):
            records[fqn] = draw(st.one_of(st.none(), st.integers(), st.just({"use_pickle": True})))
            continue
        records[fqn] = record
    if draw(st.integers(0, 20)) == 0:
        return {"config": draw(st.one_of(st.none(), st.lists(st.integers(), max_size=2)))}
    return {"config": records}
