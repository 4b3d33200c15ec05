"""The checker's per-codec verdicts agree with what the codecs really do, change by change.

For every mutation of :mod:`tests.schema_check.mutations` (every rule of the checker, chains of
three releases included), code is generated for both schemas and documents are written with one
and read with the other, both ways, in JSON, MessagePack, FlatBuffers and columnar
(:mod:`tests.schema_check.differential`). The codecs the checker says break must be exactly the
codecs where a read failed or read something else: no more, no fewer.

The default run draws a few cases per mutation (over 100 in all); ``DIFFERENTIAL_EXAMPLES=50``
(``make schema-fuzz``) draws more.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.schema_check.differential import CODECS, cross_check
from tests.schema_check.mutations import MUTATIONS, Chain, Mutation, valid
from tests.schema_check.test_rules import findings_of

EXAMPLES = int(os.environ.get("DIFFERENTIAL_EXAMPLES", "3"))


@pytest.mark.parametrize("name", sorted(MUTATIONS))
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_verdict_per_codec_is_what_the_codecs_do(name: str, data: st.DataObject) -> None:
    m: Mutation | None = valid(data.draw(MUTATIONS[name][1]))
    assume(m is not None)  # a few draws break a rule of the language; the checker never sees those
    assert m is not None
    findings = findings_of(m)
    said = {c for f in findings for c in f.breaks}
    real = cross_check(m.old, m.new, m.identity)
    for codec in CODECS:
        if codec in said and codec not in real.broken:
            blame = [f"{f.rule} {f.where}" for f in findings if codec in f.breaks]
            pytest.fail(f"{codec}: the checker says {blame} break it, but every cross-version read works")
        if codec in real.broken and codec not in said:
            pytest.fail(f"{codec}: {real.why[codec]}, but the checker says no change breaks it: {findings}")
    if isinstance(m, Chain):
        assert any(f.bump == "forbidden" for f in findings)
