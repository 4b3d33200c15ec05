"""The tracepack error hierarchy.

Every error carries *where* it happened: the source (a file name, or ``<bytes>``
for in-memory input), a location inside it (a byte offset, a JSON-path-like
``$.graph.nodes[3].stack``, a zip member, a pickle opcode position) and what
was expected there. ``str(err)`` is always a single line::

    model.tpk: at byte 0: bad magic b'PK\\x03\\x04'; expected a tracepack container

The CLI prints exactly that line on stderr and exits with ``err.exit_code``:

====================  ==========  ==========================================
class                 exit code   raised for
====================  ==========  ==========================================
TracepackError        1           base class; internal errors
InputError            2           anything wrong with what the user gave us
  ContainerError      2           the ``.tpk`` header: magic, truncation,
                                  checksum, size limits, unknown codec
  VersionError        2           a schema/container/legacy version we cannot
                                  read (or write, for ``--to-version``)
  DecodeError         2           a payload that does not match the schema
    IntegrityError    2           references out of range, trie cycles,
                                  duplicate table entries
  LegacyFormatError   2           torch ``model.json`` / ``.pt2`` / ``.pt``
                                  / pickle problems
    UnsafePickleError 2           a pickle that tries to import or call
  SchemaError         2           a schema file that is not valid
  UsageError          2           bad arguments to an API or CLI command
    NotFoundError     2           a lookup by name, index or handle that
                                  finds nothing (also a ``KeyError``)
EncodeError           1           we could not encode a document
====================  ==========  ==========================================

Every error about bad input *bytes* (``ContainerError``, ``VersionError``, ``DecodeError``,
``LegacyFormatError``, ``SchemaError`` and their subclasses) is also a :class:`ValueError`, as
``json``, ``msgspec`` and ``pickle`` users expect: ``except ValueError`` around ``tracepack.loads``
catches every damaged or foreign file. ``UsageError`` (bad arguments from the caller's code, not the
file) is not a ``ValueError``: its ``NotFoundError`` is a ``KeyError``, and a lookup that misses is
not a damaged file. Code that wants everything the user can fix catches ``InputError``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "ContainerError",
    "DecodeError",
    "EncodeError",
    "InputError",
    "IntegrityError",
    "LegacyFormatError",
    "NOT_DECODE_ERRORS",
    "NotFoundError",
    "SchemaError",
    "TracepackError",
    "UnsafePickleError",
    "UsageError",
    "VersionError",
]


class TracepackError(Exception):
    """Base class of every error tracepack raises on purpose.

    ``source`` names the input (file path or ``<bytes>``), ``where`` the place
    inside it, ``problem`` what is wrong and ``expected`` what should have been
    there. All four end up, in that order, in the one-line message.
    """

    exit_code: int = 1

    def __init__(
        self,
        problem: str,
        *,
        source: str | None = None,
        where: str | None = None,
        expected: str | None = None,
    ) -> None:
        self.problem = problem
        self.source = source
        self.where = where
        self.expected = expected
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.source:
            parts.append(self.source)
        if self.where:
            parts.append(self.where)
        text = self.problem if self.expected is None else f"{self.problem}; expected {self.expected}"
        parts.append(text)
        # Errors are one line, always: fold any newline a wrapped message brought in.
        return ": ".join(parts).replace("\r", "\\r").replace("\n", "\\n")

    def with_source(self, source: str) -> TracepackError:
        """Return this error with ``source`` filled in if it was not known yet."""
        if self.source is None:
            self.source = source
            self.args = (self._render(),)
        return self

    def __str__(self) -> str:
        return self._render()


class InputError(TracepackError):
    """The input is wrong: the user can fix it. Exit code 2."""

    exit_code = 2


class ContainerError(InputError, ValueError):
    """The ``.tpk`` container is damaged: magic, header, length, checksum, limits (a ``ValueError``)."""


class VersionError(InputError, ValueError):
    """A version this build cannot read or write (a ``ValueError``)."""


class DecodeError(InputError, ValueError):
    """A payload does not match the schema it claims.

    Also a :class:`ValueError`, as decoding errors are in the standard library and msgspec, so
    ``except ValueError`` around a decode catches it.
    """


class IntegrityError(DecodeError):
    """A decoded document breaks an invariant: reference out of range, trie cycle, duplicate."""


class LegacyFormatError(InputError, ValueError):
    """A torch artifact (``model.json``, ``.pt2``, ``.pt``, ``debug_pkl``) we cannot read (a ``ValueError``)."""


class UnsafePickleError(LegacyFormatError):
    """A pickle asked for something a data-only reader never does (import, call, build)."""


class SchemaError(InputError, ValueError):
    """A schema file (``schema/*.toml``) is invalid (a ``ValueError``)."""


class UsageError(InputError):
    """Bad arguments: wrong option values, a node that does not exist, and so on.

    Not a ``ValueError`` (see the module docstring): the caller's arguments, not the file's bytes."""


class NotFoundError(UsageError, KeyError):
    """A lookup that finds nothing: a node name or index, a debug handle.

    Also a :class:`KeyError`, so ``except KeyError`` works as it does around a ``dict``; ``key`` is what
    was looked up, and the message suggests close names where there are any ("did you mean ...").
    """

    def __init__(
        self,
        problem: str,
        *,
        key: object = None,
        source: str | None = None,
        where: str | None = None,
        expected: str | None = None,
    ) -> None:
        self.key = key
        super().__init__(problem, source=source, where=where, expected=expected)


def did_you_mean(name: str, candidates: Iterable[str], *, n: int = 3) -> str:
    """`` (did you mean 'a', 'b'?)`` for the close matches of ``name`` among ``candidates``, else ``""``."""
    close = difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.6)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


#: The errors about input bytes that are ``ValueError``s besides :class:`DecodeError` (since issue 26): code
#: that turns a ``ValueError`` of a library into one of tracepack's re-raises these first, unchanged.
NOT_DECODE_ERRORS: tuple[type[InputError], ...] = (ContainerError, VersionError, LegacyFormatError, SchemaError)


class EncodeError(TracepackError):
    """A document could not be encoded (a bug, or a value the target cannot hold)."""
