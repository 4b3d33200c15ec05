"""The checker flags every kind of change with the right rule, place, codecs and bump."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.schema_check.mutations import (
    COMPATIBLE,
    EXPECTED,
    MUTATIONS,
    Chain,
    Mutation,
    base_schema,
    compatible_changes,
)
from tracepack.codegen.model import Schema, TypeRef
from tracepack.schema_check import RULES, Finding, check_pair, diff_schemas, is_promotion
from tracepack.schema_check.diff import retired_reuse

_ORDER = ("none", "minor", "major", "forbidden")


def _with_version(schema: Schema, version: tuple[int, int], status: str = "draft") -> Schema:
    return replace(schema, major=version[0], minor=version[1], status=status, source="new.toml")


def _base() -> tuple[int, int]:
    """The version of the schema the mutations start from: the newest release, whatever it is."""
    return base_schema().major, base_schema().minor


def _expected_version(bump: str) -> tuple[int, int]:
    major, minor = _base()
    return {"none": (major, minor), "minor": (major, minor + 1), "major": (major + 1, 0)}[bump]


def _v(template: str) -> str:
    """``template`` with {old}, {minor}, {major}, {skip_minor}, {skip_major}, {down} as versions."""
    major, minor = _base()
    return template.format(
        old=f"{major}.{minor}",
        minor=f"{major}.{minor + 1}",
        major=f"{major + 1}.0",
        skip_minor=f"{major}.{minor + 3}",
        skip_major=f"{major + 1}.1",
        down=f"{major - 1}.9",
        kv_last=base_schema().structs["KeyValue"].fields[-1].name,
    )


def _vt(name: str) -> tuple[int, int]:
    major, minor = _base()
    return {
        "old": (major, minor),
        "minor": (major, minor + 1),
        "major": (major + 1, 0),
        "skip_minor": (major, minor + 3),
        "skip_major": (major + 1, 1),
        "down": (major - 1, 9),
    }[name]


def test_every_rule_is_exercised_and_documented() -> None:
    covered = {rule for rules, _ in MUTATIONS.values() for rule in rules}
    assert covered == set(RULES) == set(EXPECTED)
    for rule_id, rule in RULES.items():
        assert (rule.bump, rule.breaks) == EXPECTED[rule_id], rule_id


def findings_of(m: Mutation) -> list[Finding]:
    """What the checker reports for ``m``: NEW against OLD, through MIDDLE for a chain."""
    findings = diff_schemas(m.old, m.new)
    if isinstance(m, Chain):
        assert m.middle is not None
        return retired_reuse(findings, m.old, m.middle, m.new)
    return findings


@pytest.mark.parametrize("name", sorted(MUTATIONS))
@given(data=st.data())
def test_mutation_is_flagged(name: str, data: st.DataObject) -> None:
    rules, strategy = MUTATIONS[name]
    m: Mutation = data.draw(strategy)
    findings = findings_of(m)
    assert {(f.rule, f.where) for f in findings} == m.expect
    for f in findings:
        assert f.rule in rules
        bump, codecs = EXPECTED[f.rule]
        # Where the codecs a change breaks depend on the schema (a value that is only ever a
        # default, a float that is always written), a finding names fewer: never others.
        assert set(f.breaks) <= set(codecs), f
        assert f.bump == (bump if f.breaks or bump != "major" or not codecs else "minor"), f
        assert f.detail
        # Every change that needs more than a minor bump says how to avoid it.
        assert bool(f.fix) == (_ORDER.index(f.bump) > 1), f
    if isinstance(m, Chain):
        return  # the verdict on a version is check_pair's, against MIDDLE
    needed = max((f.bump for f in findings), key=_ORDER.index, default="none")
    right = check_pair(m.old, _with_version(m.new, _expected_version(needed) if needed != "forbidden" else (2, 0)))
    assert right.ok == (needed != "forbidden")
    assert right.needed == needed
    for wrong in [_vt(n) for n in ("old", "minor", "skip_minor", "major", "skip_major", "down")]:
        if needed == "forbidden" or wrong != _expected_version(needed):
            report = check_pair(m.old, _with_version(m.new, wrong))
            assert not report.ok, wrong
            assert report.problems
            assert report.ways_out


@pytest.mark.parametrize("name", COMPATIBLE)
@given(data=st.data())
def test_compatible_mutation_passes_as_minor(name: str, data: st.DataObject) -> None:
    m: Mutation = data.draw(MUTATIONS[name][1])
    report = check_pair(m.old, _with_version(m.new, _vt("minor")))
    assert report.needed == "minor"
    assert report.ok, report.problems


@given(m=compatible_changes())
def test_compatible_changes_together_need_a_minor_bump(m: Mutation) -> None:
    report = check_pair(m.old, _with_version(m.new, _vt("minor")))
    assert {(f.rule, f.where) for f in report.findings} == m.expect
    assert all(f.bump == "minor" and not f.breaks for f in report.findings)
    assert report.ok
    assert report.expected_version == _vt("minor")


def test_reflexive_on_the_released_schema() -> None:
    s = base_schema()
    assert diff_schemas(s, s) == []
    report = check_pair(s, s)
    assert report.ok
    assert report.needed == "none"


@pytest.mark.parametrize("name", sorted(MUTATIONS))
@given(data=st.data())
def test_reflexive_on_mutated_schemas(name: str, data: st.DataObject) -> None:
    m: Mutation = data.draw(MUTATIONS[name][1])
    assert diff_schemas(m.new, m.new) == []
    assert diff_schemas(m.old, m.old) == []


@pytest.mark.parametrize("name", sorted(MUTATIONS))
@given(data=st.data())
def test_docs_are_not_changes(name: str, data: st.DataObject) -> None:
    """Rewording documentation never needs a version."""
    m: Mutation = data.draw(MUTATIONS[name][1])
    reworded = replace(
        m.new,
        doc="reworded",
        structs={k: replace(s, doc="reworded") for k, s in m.new.structs.items()},
        enums={k: replace(e, doc="reworded") for k, e in m.new.enums.items()},
    )
    assert {(f.rule, f.where) for f in findings_of(replace(m, new=reworded))} == m.expect


# -- the version verdict, message by message --------------------------------------------------------


def _minor_change() -> Mutation:
    s0 = base_schema()
    return Mutation(
        s0, replace(s0, structs={**s0.structs, "XNew": replace(s0.structs["ArgNone"], name="XNew")}), frozenset()
    )


def _major_change() -> Schema:
    """The last field of KeyValue, a required one, removed: older readers miss it."""
    s0 = base_schema()
    kv = s0.structs["KeyValue"]
    return replace(s0, structs={**s0.structs, "KeyValue": replace(kv, fields=kv.fields[:-1])})


@pytest.mark.parametrize(
    ("new", "version", "problem", "ways"),
    [
        (
            "minor",
            "major",
            "new.toml declares {major}, a major bump, but the changes only need a minor bump: {minor}",
            ["declare version {minor}"],
        ),
        (
            "minor",
            "old",
            "the changes need a minor bump to {minor}, but new.toml keeps version {old}",
            ["declare version {minor}"],
        ),
        (
            "minor",
            "skip_minor",
            "new.toml declares {skip_minor}, which skips versions: the next minor version after {old} is {minor}",
            ["declare version {minor}"],
        ),
        (
            "minor",
            "down",
            "the version goes down: new.toml declares {down}, older than {old}",
            ["declare version {minor}"],
        ),
        (
            "major",
            "minor",
            "the changes need a major bump to {major}, but new.toml declares {minor}, a minor bump",
            [
                "keep `KeyValue.{kv_last}` and mark it `deprecated = true` instead of removing it (FIELD_REMOVED)",
                "declare version {major}",
            ],
        ),
        (
            "major",
            "skip_major",
            "new.toml declares {skip_major}, which skips versions: the next major version after {old} is {major}",
            ["declare version {major}"],
        ),
        (
            "none",
            "minor",
            "no change a reader can see, but new.toml declares {minor} after {old}: an unchanged schema keeps its "
            "version",
            [
                "keep version {old}: do not release a schema without changes",
                "make the change version {minor} is meant for",
            ],
        ),
    ],
)
def test_version_verdict_messages(new: str, version: str, problem: str, ways: list[str]) -> None:
    s0 = base_schema()
    schema = {"none": s0, "minor": _minor_change().new, "major": _major_change()}[new]
    report = check_pair(s0, _with_version(schema, _vt(version)))
    assert report.problems == (_v(problem),)
    assert list(report.ways_out) == [_v(w) for w in ways]


def test_forbidden_changes_fail_whatever_the_version() -> None:
    s0 = base_schema()
    node = s0.structs["Node"]
    f = node.field("stack_style")
    changed = replace(
        s0,
        structs={
            **s0.structs,
            "Node": replace(node, fields=tuple(replace(g, default="python") if g is f else g for g in node.fields)),
        },
    )
    for version in [_vt("old"), _vt("minor"), _vt("major")]:
        report = check_pair(s0, _with_version(changed, version))
        assert report.problems == ("FIELD_DEFAULT_CHANGED at Node.stack_style is forbidden in every version",)
        assert report.ways_out == (
            'restore `default = "stripped"` on `Node.stack_style`; for another default, add a new field and '
            "deprecate `Node.stack_style` (FIELD_DEFAULT_CHANGED)",
        )
        assert report.expected_version is None


def test_enum_default_follows_a_renamed_value() -> None:
    """Renaming `StackStyle.stripped` and the default that names it is a rename, not a new default."""
    s0 = base_schema()
    e = s0.enums["StackStyle"]
    enum = replace(e, values=tuple(replace(v, name="strip") if v.name == "stripped" else v for v in e.values))
    node = s0.structs["Node"]
    fields = tuple(replace(f, default="strip") if f.name == "stack_style" else f for f in node.fields)
    new = replace(
        s0, enums={**s0.enums, "StackStyle": enum}, structs={**s0.structs, "Node": replace(node, fields=fields)}
    )
    assert [(f.rule, f.where) for f in diff_schemas(s0, new)] == [("ENUM_VALUE_RENAMED", "StackStyle.strip")]


@pytest.mark.parametrize(
    ("old", "new", "promoted"),
    [
        ("u8", "u16", True),
        ("u16", "u64", True),
        ("u32", "i64", True),
        ("u32", "i32", False),
        ("i32", "i64", True),
        ("i64", "i32", False),
        ("i8", "u64", False),
        ("f32", "f64", True),
        ("f64", "f32", False),
        ("i32", "f64", False),
        ("u8", "f32", False),
        ("i64", "f64", False),
        ("u32", "u32", False),
    ],
)
def test_promotions(old: str, new: str, promoted: bool) -> None:
    o, n = TypeRef("scalar", old), TypeRef("scalar", new)
    assert is_promotion(o, n) is promoted
    assert is_promotion(TypeRef("list", "list", o), TypeRef("list", "list", n)) is promoted
