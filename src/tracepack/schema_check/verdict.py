"""The version verdict: which bump a change needs, and whether NEW declares exactly that.

Pure functions over two schema IRs. The needed bump is the worst bump of
any finding (:func:`tracepack.schema_check.rules.worst`); the declared bump
is read off the two version numbers. They must match exactly:

* ``major`` -> ``(M+1).0``; ``minor`` -> ``M.(m+1)``; ``none`` -> the same version;
* declaring more than needed is a failure too (a major bump makes every
  reader refuse the new files for nothing), and so is skipping numbers, going
  down, or giving an unchanged schema a new version;
* a ``forbidden`` finding fails whatever the version says.

Each failure comes with its ways out: how to make each offending change
compatibly, or which version to declare.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tracepack.codegen.model import Schema
from tracepack.schema_check.diff import Finding, diff_schemas, retired_reuse
from tracepack.schema_check.rules import BUMP_ORDER, Bump, worst

__all__ = ["Report", "check_history", "check_pair", "declared_bump", "next_version"]

Version = tuple[int, int]


def next_version(version: Version, bump: Bump) -> Version:
    """The version after ``version`` for a change that needs ``bump``."""
    major, minor = version
    if bump == "major":
        return (major + 1, 0)
    if bump == "minor":
        return (major, minor + 1)
    return version


def declared_bump(old: Version, new: Version) -> Literal["down", "none", "minor", "major"]:
    """``none``, ``minor``, ``major`` or ``down``: the bump ``new`` declares over ``old``."""
    if new < old:
        return "down"
    if new == old:
        return "none"
    return "minor" if new[0] == old[0] else "major"


def _v(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


@dataclass(frozen=True)
class Report:
    """The outcome of checking NEW against OLD."""

    old_source: str
    old_version: Version
    old_status: str
    new_source: str
    new_version: Version
    new_status: str
    findings: tuple[Finding, ...]
    #: Why the check fails (empty when it passes).
    problems: tuple[str, ...]
    #: What would make it pass, most specific first.
    ways_out: tuple[str, ...]
    #: How the ways out combine, e.g. "1-2 together keep 1.1 right, or 3" ("" when each one is enough).
    ways_note: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def needed(self) -> Bump:
        """The worst bump of any finding (``forbidden`` when any change is)."""
        return worst([f.bump for f in self.findings])

    @property
    def expected_version(self) -> Version | None:
        """The version NEW should declare; ``None`` when a forbidden change makes none right."""
        if self.needed == "forbidden":
            return None
        return next_version(self.old_version, self.needed)


def _version_verdict(
    new_source: str, old: Version, new: Version, findings: list[Finding]
) -> tuple[list[str], list[str]]:
    needed = worst([f.bump for f in findings])
    expected = next_version(old, needed)
    if new == expected:
        return [], []
    declared = declared_bump(old, new)
    ov, nv, ev = _v(old), _v(new), _v(expected)
    declare = f"declare version {ev}"
    if declared == "down":
        return [f"the version goes down: {new_source} declares {nv}, older than {ov}"], [declare]
    if needed == "none":
        problem = f"no change a reader can see, but {new_source} declares {nv} after {ov}"
        return [f"{problem}: an unchanged schema keeps its version"], [
            f"keep version {ov}: do not release a schema without changes",
            f"make the change version {nv} is meant for",
        ]
    if declared == needed:
        problem = f"{new_source} declares {nv}, which skips versions"
        return [f"{problem}: the next {needed} version after {ov} is {ev}"], [declare]
    if BUMP_ORDER.index(declared) > BUMP_ORDER.index(needed):
        problem = f"{new_source} declares {nv}, a {declared} bump"
        return [f"{problem}, but the changes only need a {needed} bump: {ev}"], [declare]
    said = f"keeps version {ov}" if declared == "none" else f"declares {nv}, a {declared} bump"
    # Fixing every major change makes a declared minor bump right; a kept version needs more.
    ways = [f"{f.fix} ({f.rule})" for f in findings if declared == "minor" and f.bump == "major" and f.fix]
    return [f"the changes need a {needed} bump to {ev}, but {new_source} {said}"], [*ways, declare]


def check_pair(old: Schema, new: Schema) -> Report:
    """Compare ``new`` with ``old`` and judge the version ``new`` declares."""
    findings = diff_schemas(old, new)
    forbidden = [f for f in findings if f.bump == "forbidden"]
    problems: list[str]
    ways: list[str]
    note = ""
    if forbidden:
        # No version makes these right; the version is judged again once they are fixed.
        problems = [f"{f.rule} at {f.where} is forbidden in every version" for f in forbidden]
        ways = [f"{f.fix} ({f.rule})" for f in forbidden]
        note = "every one of them" if len(ways) > 1 else ""
    else:
        problems, ways = _version_verdict(new.source, (old.major, old.minor), (new.major, new.minor), findings)
        if len(ways) > 1 and ways[-1].startswith("declare version "):
            fixes = "1" if len(ways) == 2 else f"1-{len(ways) - 1} together"
            note = f"{fixes} to keep {new.major}.{new.minor}, or {len(ways)}"
    return Report(
        old_source=old.source,
        old_version=(old.major, old.minor),
        old_status=old.status,
        new_source=new.source,
        new_version=(new.major, new.minor),
        new_status=new.status,
        findings=tuple(findings),
        problems=tuple(problems),
        ways_out=tuple(ways),
        ways_note=note,
    )


def check_history(earlier: list[Schema], previous: Schema, new: Schema) -> list[Report]:
    """``new`` against every release before ``previous`` (which :func:`check_pair` compares).

    Pairs hide what happens across releases: a field removed in one release and its id (or name,
    or an enum number, or a variant id) given to something else in a later one looks like an
    addition next to its predecessor. Against each earlier release this reports

    * every forbidden change, whatever the majors (no version makes a reuse right);
    * a member that ``previous`` lacks but an earlier release had, back under another name or type
      (:func:`tracepack.schema_check.diff.retired_reuse`): forbidden;
    * against a release of the same major, every change that needs a major bump (files of that
      release must stay readable by every later minor).

    Each report lists only those findings; reports without any are left out.
    """
    out: list[Report] = []
    for old in earlier:
        findings = retired_reuse(diff_schemas(old, new), old, previous, new)
        same_major = old.major == new.major
        kept = [f for f in findings if f.bump == "forbidden" or (same_major and f.bump == "major")]
        if not kept:
            continue
        problems = [
            f"{f.rule} at {f.where} is forbidden in every version ({new.source} against {old.version})"
            if f.bump == "forbidden"
            else f"{f.rule} at {f.where}: {new.source} cannot read files of {old.version}, of the same major"
            for f in kept
        ]
        out.append(
            Report(
                old_source=old.source,
                old_version=(old.major, old.minor),
                old_status=old.status,
                new_source=new.source,
                new_version=(new.major, new.minor),
                new_status=new.status,
                findings=tuple(kept),
                problems=tuple(problems),
                ways_out=tuple(f"{f.fix} ({f.rule})" for f in kept if f.fix),
                ways_note="every one of them" if len(kept) > 1 else "",
            )
        )
    return out
