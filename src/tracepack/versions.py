"""Which schema versions this build reads and writes, and their generated code.

Rules (docs/schema-rules.md, "Reading newer files"):

* writers write **released** versions only: :data:`CURRENT` is the newest
  release. A draft schema (``status = "draft"``) has generated code as soon as
  it exists (``make generate``), so tests can exercise it, but it is neither
  written nor used to read files until it is released;
* a document of a **known** release is decoded with that version's generated
  model and migrated in memory to the current version;
* a document of a **newer minor** of a known major (a draft's version
  included) is decoded with the newest released minor of that major: minor
  versions only add fields with defaults, which the older model skips (keyed
  JSON ignores unknown keys, positional MessagePack ignores trailing fields,
  FlatBuffers readers unknown field ids);
* a document of an **unknown major** is refused with a VersionError naming
  both versions.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType

from tracepack_generated import RELEASED, VERSIONS

from tracepack.errors import DecodeError, VersionError

__all__ = [
    "CURRENT",
    "RELEASED",
    "VERSIONS",
    "current_version",
    "from_newer_file",
    "generated",
    "reader_version",
]


def current_version(released: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    """The version a build with these releases writes: the newest release."""
    if not released:
        raise VersionError("no released schema version has generated code; release one and run `make generate`")
    return max(released)


#: The version this build writes: the newest *released* schema (never a draft).
CURRENT: tuple[int, int] = current_version(RELEASED)


@cache
def generated(version: tuple[int, int]) -> ModuleType:
    """The generated package of ``version`` (``tracepack_generated.vX_Y``; drafts included)."""
    if version not in VERSIONS:
        raise VersionError(f"schema {version[0]}.{version[1]} has no generated code in this build")
    return importlib.import_module(f"tracepack_generated.v{version[0]}_{version[1]}")


def reader_version(
    version: tuple[int, int],
    *,
    source: str | None = None,
    released: tuple[tuple[int, int], ...] = RELEASED,
) -> tuple[int, int]:
    """The released version whose model decodes a document written with ``version``."""
    if version in released:
        return version
    same_major = sorted(v for v in released if v[0] == version[0])
    if same_major and version > same_major[-1]:
        return same_major[-1]
    newest = current_version(released)
    raise VersionError(
        f"schema version {version[0]}.{version[1]} is not readable by this build",
        source=source,
        where="header",
        expected=f"one of {', '.join(f'{a}.{b}' for a, b in released)} or a newer minor of a known major "
        f"(this build writes {newest[0]}.{newest[1]})",
    )


def from_newer_file(exc: DecodeError, written: tuple[int, int], reader: tuple[int, int]) -> DecodeError:
    """``exc`` from reading a newer minor, saying so: the file may use what was added since (an enum
    value, a union variant), which this build cannot know (docs/schema-rules.md, "Reading newer files").
    Every reader (eager and lazy) words it the same."""
    note = (
        f" (the file is schema {written[0]}.{written[1]}, newer than {reader[0]}.{reader[1]}, the newest this build "
        "reads: it may use something added since; a newer tracepack reads it)"
    )
    return type(exc)(exc.problem + note, source=exc.source, where=exc.where, expected=exc.expected)
