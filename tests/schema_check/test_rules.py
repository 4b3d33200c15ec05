"""The checker flags every kind of change with the right rule, place, codecs and bump."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.schema_check.mutations import COMPATIBLE, EXPECTED, MUTATIONS, Mutation, base_schema, compatible_changes
from tracepack.codegen.model import Schema, TypeRef
from tracepack.schema_check import RULES, check_pair, diff_schemas, is_promotion

_ORDER = ("none", "minor", "major", "forbidden")


def _with_version(schema: Schema, version: tuple[int, int], status: str = "draft") -> Schema:
    return replace(schema, major=version[0], minor=version[1], status=status, source="new.toml")


def _expected_version(bump: str) -> tuple[int, int]:
    return {"none": (1, 0), "minor": (1, 1), "major": (2, 0)}[bump]


def test_every_rule_is_exercised_and_documented() -> None:
    covered = {rule for rules, _ in MUTATIONS.values() for rule in rules}
    assert covered == set(RULES) == set(EXPECTED)
    for rule_id, rule in RULES.items():
        assert (rule.bump, rule.breaks) == EXPECTED[rule_id], rule_id


@pytest.mark.parametrize("name", sorted(MUTATIONS))
@given(data=st.data())
def test_mutation_is_flagged(name: str, data: st.DataObject) -> None:
    rules, strategy = MUTATIONS[name]
    m: Mutation = data.draw(strategy)
    findings = diff_schemas(m.old, m.new)
    assert {(f.rule, f.where) for f in findings} == m.expect
    for f in findings:
        assert f.rule in rules
        assert (f.bump, f.breaks) == EXPECTED[f.rule]
        assert f.detail
        # Every change that needs more than a minor bump says how to avoid it.
        assert bool(f.fix) == (_ORDER.index(f.bump) > 1), f
    needed = max((EXPECTED[r][0] for r, _ in m.expect), key=_ORDER.index)
    right = check_pair(m.old, _with_version(m.new, _expected_version(needed) if needed != "forbidden" else (2, 0)))
    assert right.ok == (needed != "forbidden")
    assert right.needed == needed
    for wrong in [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (0, 9)]:
        if needed == "forbidden" or wrong != _expected_version(needed):
            report = check_pair(m.old, _with_version(m.new, wrong))
            assert not report.ok
            assert report.problems
            assert report.ways_out


@pytest.mark.parametrize("name", COMPATIBLE)
@given(data=st.data())
def test_compatible_mutation_passes_as_minor(name: str, data: st.DataObject) -> None:
    m: Mutation = data.draw(MUTATIONS[name][1])
    report = check_pair(m.old, _with_version(m.new, (1, 1)))
    assert report.needed == "minor"
    assert report.ok, report.problems


@given(m=compatible_changes())
def test_compatible_changes_together_need_a_minor_bump(m: Mutation) -> None:
    report = check_pair(m.old, _with_version(m.new, (1, 1)))
    assert {(f.rule, f.where) for f in report.findings} == m.expect
    assert all(f.bump == "minor" and not f.breaks for f in report.findings)
    assert report.ok
    assert report.expected_version == (1, 1)


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
    assert {(f.rule, f.where) for f in diff_schemas(m.old, reworded)} == m.expect


# -- the version verdict, message by message --------------------------------------------------------


def _minor_change() -> Mutation:
    s0 = base_schema()
    return Mutation(
        s0, replace(s0, structs={**s0.structs, "XNew": replace(s0.structs["ArgNone"], name="XNew")}), frozenset()
    )


def _major_change() -> Schema:
    s0 = base_schema()
    node = s0.structs["Node"]
    return replace(s0, structs={**s0.structs, "Node": replace(node, fields=node.fields[:-1])})


@pytest.mark.parametrize(
    ("new", "version", "problem", "ways"),
    [
        (
            "minor",
            (2, 0),
            "new.toml declares 2.0, a major bump, but the changes only need a minor bump: 1.1",
            ["declare version 1.1"],
        ),
        (
            "minor",
            (1, 0),
            "the changes need a minor bump to 1.1, but new.toml keeps version 1.0",
            ["declare version 1.1"],
        ),
        (
            "minor",
            (1, 3),
            "new.toml declares 1.3, which skips versions: the next minor version after 1.0 is 1.1",
            ["declare version 1.1"],
        ),
        (
            "minor",
            (0, 9),
            "the version goes down: new.toml declares 0.9, older than 1.0",
            ["declare version 1.1"],
        ),
        (
            "major",
            (1, 1),
            "the changes need a major bump to 2.0, but new.toml declares 1.1, a minor bump",
            [
                "keep `Node.meta_values` and mark it `deprecated = true` instead of removing it (FIELD_REMOVED)",
                "declare version 2.0",
            ],
        ),
        (
            "major",
            (2, 1),
            "new.toml declares 2.1, which skips versions: the next major version after 1.0 is 2.0",
            ["declare version 2.0"],
        ),
        (
            "none",
            (1, 1),
            "no change a reader can see, but new.toml declares 1.1 after 1.0: an unchanged schema keeps its version",
            ["keep version 1.0: do not release a schema without changes", "make the change version 1.1 is meant for"],
        ),
    ],
)
def test_version_verdict_messages(new: str, version: tuple[int, int], problem: str, ways: list[str]) -> None:
    s0 = base_schema()
    schema = {"none": s0, "minor": _minor_change().new, "major": _major_change()}[new]
    report = check_pair(s0, _with_version(schema, version))
    assert report.problems == (problem,)
    assert list(report.ways_out) == ways


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
    for version in [(1, 0), (1, 1), (2, 0)]:
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
        ("u32", "u32", False),
    ],
)
def test_promotions(old: str, new: str, promoted: bool) -> None:
    o, n = TypeRef("scalar", old), TypeRef("scalar", new)
    assert is_promotion(o, n) is promoted
    assert is_promotion(TypeRef("list", "list", o), TypeRef("list", "list", n)) is promoted
