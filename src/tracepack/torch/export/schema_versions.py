"""torch.export's schema versions: which release wrote which, and reading a program's version.

torch 2.1 and 2.2 wrote ``"schema_version": N`` (an int); from 2.3 on it is
``{"major": M, "minor": m}``. The table below was read from each release's
``torch/_export/serde/schema.py`` (``SCHEMA_VERSION``) by ``make release-samples``, which
records it next to every release's samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["OLDEST_MAJOR", "RELEASE_SCHEMA", "SchemaVersion", "schema_version_of"]

#: torch release -> the schema version its ``torch.export.save`` writes.
RELEASE_SCHEMA: dict[str, str] = {
    "2.1": "1",
    "2.2": "2",
    "2.3": "5.1",
    "2.4": "5.3",
    "2.5": "7.3",
    "2.6": "8.2",
    "2.7": "8.7",
    "2.8": "8.8",
    "2.10": "8.15",
    "2.12": "8.20",
    "2.13": "8.20",
    "2.14": "8.20",
    "2.15": "8.20",
}
OLDEST_MAJOR = 1
NEWEST_MAJOR = 8


@dataclass(frozen=True, slots=True, order=True)
class SchemaVersion:
    """A program's schema version; ``minor`` is ``None`` for the bare ints of torch 2.1/2.2."""

    major: int
    minor: int | None = None

    def __str__(self) -> str:
        return str(self.major) if self.minor is None else f"{self.major}.{self.minor}"

    def json(self) -> Any:
        return self.major if self.minor is None else {"major": self.major, "minor": self.minor}


def schema_version_of(program: Any) -> SchemaVersion | None:
    """The ``schema_version`` of a decoded program, or ``None`` if it has none torch wrote."""
    version = program.get("schema_version") if type(program) is dict else None
    if type(version) is int:
        return SchemaVersion(version)
    if type(version) is dict and type(version.get("major")) is int and type(version.get("minor")) is int:
        return SchemaVersion(version["major"], version["minor"])
    return None
