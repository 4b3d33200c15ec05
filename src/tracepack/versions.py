"""Which schema versions this build reads and writes, and their generated code.

Rules (README, "Reading other versions"):

* a document of a **known** version is decoded with that version's generated
  model and migrated in memory to the current version;
* a document of a **newer minor** of a known major is decoded with the newest
  known minor of that major: minor versions only add fields with defaults,
  which the older model skips (keyed JSON ignores unknown keys, positional
  MessagePack ignores trailing fields);
* a document of an **unknown major** is refused with a VersionError naming
  both versions.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType

from tracepack_generated import VERSIONS

from tracepack.errors import VersionError

__all__ = ["CURRENT", "VERSIONS", "generated", "reader_version"]

#: The version this build writes.
CURRENT: tuple[int, int] = (VERSIONS[-1][0], VERSIONS[-1][1])


@cache
def generated(version: tuple[int, int]) -> ModuleType:
    """The generated package of ``version`` (``tracepack_generated.vX_Y``)."""
    if version not in VERSIONS:
        raise VersionError(f"schema {version[0]}.{version[1]} has no generated code in this build")
    return importlib.import_module(f"tracepack_generated.v{version[0]}_{version[1]}")


def reader_version(version: tuple[int, int], *, source: str | None = None) -> tuple[int, int]:
    """The known version whose model decodes a document written with ``version``."""
    if version in VERSIONS:
        return version
    same_major = [v for v in VERSIONS if v[0] == version[0]]
    newest = f"{VERSIONS[-1][0]}.{VERSIONS[-1][1]}"
    if same_major and version > same_major[-1]:
        return same_major[-1]
    raise VersionError(
        f"schema version {version[0]}.{version[1]} is not readable by this build",
        source=source,
        where="header",
        expected=f"one of {', '.join(f'{a}.{b}' for a, b in VERSIONS)} or a newer minor of a known major "
        f"(this build writes {newest})",
    )
