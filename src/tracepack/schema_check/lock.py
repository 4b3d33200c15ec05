"""The lock file of released schemas: ``schema/RELEASED.sha256``.

One line per released version, oldest first::

    1.0 <sha256 of the file's bytes> tracepack-1.0.toml

A released schema is immutable: files written with it must stay readable
forever, so its bytes must never change. :func:`check_lock` fails when a
released schema's sha256 differs from its line, when a released schema has
no line, and when a line names a file that is missing or not released.
Blank lines and ``#`` comments are allowed. Pure functions: the caller reads
the files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tracepack.codegen.model import Schema
from tracepack.errors import SchemaError

__all__ = ["LOCK_FILE", "LockEntry", "check_lock", "lock_line", "parse_lock"]

#: The lock file's name, in the schema folder.
LOCK_FILE = "RELEASED.sha256"

_LINE = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*) ([0-9a-f]{64}) (tracepack-[0-9]+\.[0-9]+\.toml)$")


@dataclass(frozen=True)
class LockEntry:
    """One line of the lock file."""

    version: tuple[int, int]
    sha256: str
    file: str
    line: int


def lock_line(schema: Schema, file: str) -> str:
    """The lock line of a released ``schema`` stored as ``file`` (a bare file name)."""
    return f"{schema.version} {schema.sha256} {file}"


def parse_lock(text: str, *, source: str) -> list[LockEntry]:
    """Parse a lock file; raise :class:`SchemaError` naming the first malformed line."""
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            raise SchemaError(
                f"malformed lock line {line[:80]!r}",
                source=source,
                where=f"line {number}",
                expected="`MAJOR.MINOR <sha256, 64 lowercase hex digits> tracepack-MAJOR.MINOR.toml`",
            )
        entries.append(LockEntry((int(m.group(1)), int(m.group(2))), m.group(3), m.group(4), number))
    return entries


def check_lock(
    entries: list[LockEntry] | None, schemas: dict[str, Schema], *, lock: str
) -> tuple[list[str], list[str]]:
    """Check ``entries`` (``None``: no lock file) against ``schemas`` (bare file name -> schema).

    Returns ``(problems, ways out)``; both empty when every released schema is locked and
    unchanged. ``lock`` names the lock file in messages.
    """
    problems: list[str] = []
    ways: list[str] = []
    by_file: dict[str, LockEntry] = {}
    seen_versions: dict[tuple[int, int], LockEntry] = {}
    for e in entries or []:
        where = f"{lock} line {e.line}"
        first = seen_versions.get(e.version) or by_file.get(e.file)
        if first is not None:
            problems.append(f"{where}: locks {e.file} ({e.version[0]}.{e.version[1]}) again (line {first.line})")
            ways.append(f"remove {where}")
            continue
        seen_versions[e.version] = by_file[e.file] = e
        schema = schemas.get(e.file)
        if schema is None:
            problems.append(f"{where}: locks {e.file}, which does not exist")
            ways.append(f"restore {e.file} from git: released schemas are never deleted")
        elif (schema.major, schema.minor) != e.version:
            problems.append(
                f"{where}: locks {e.file} as {e.version[0]}.{e.version[1]}, but it declares {schema.version}"
            )
            ways.append(f"restore {schema.source} from git: a released schema keeps its version")
        elif schema.status != "released":
            problems.append(f"{schema.source}: is a draft, but {where} locks it as released")
            ways.append(f'restore `status = "released"` in {schema.source}: a release cannot be taken back')
        elif schema.sha256 != e.sha256:
            problems.append(
                f"{schema.source}: released schemas are immutable, but its sha256 is {schema.sha256}, "
                f"not {e.sha256} as {where} locks"
            )
            ways.append(
                f"restore the released bytes of {schema.source} (`git log -p -- {schema.source}` shows the change); "
                "make the change in the next version's schema instead"
            )
    for file, schema in schemas.items():
        if schema.status == "released" and file not in by_file:
            have = "has no line for it" if entries is not None else "does not exist"
            problems.append(f"{schema.source}: released as {schema.version}, but {lock} {have}")
            ways.append(f"add this line to {lock}: `{lock_line(schema, file)}`")
    return problems, ways
