"""Schema 1.1 <-> 1.2.

1.2 only adds (docs/schema-rules.md, rule 1):

* ``Extension.template`` and ``Extension.refs``: an extension's JSON with its string values
  interned in the string table (:mod:`tracepack.interned_json`);
* ``Document.signature`` and ``Document.module_calls``: a torch.export program's signature and
  module call graph as typed tables (:mod:`tracepack.program_tables`), taken out of the program's
  JSON (the ``torch.export/program`` extension).

``upgrade`` is the additive one (:mod:`tracepack.migrations._additive`): a 1.1 document is a 1.2
one whose extensions are plain JSON text and which has neither table.

``downgrade`` loses nothing: an extension stored as a template goes back to plain JSON text, the
template filled in (exactly the text :meth:`tracepack.Document.extension` shows), and the tables go
back into the program's JSON where the torch bridge took them from; strings only they referred to
stay in the string table, where 1.1 allows unreferenced strings. Then the additive step drops the
(now default) fields. It refuses, with a :class:`~tracepack.errors.VersionError` naming the place,
only what fails validation anyway: a template that does not fill in (not JSON, or its string values
and refs do not match), tables without a program to go into, an unknown argument form.
"""

from __future__ import annotations

from typing import Any

import msgspec
from tracepack_generated.v1_1 import model as old
from tracepack_generated.v1_2 import model as new

from tracepack import interned_json, program_tables
from tracepack.errors import DecodeError, VersionError
from tracepack.migrations._additive import AdditiveStep

__all__ = ["ADDED_FIELDS", "FROM", "TO", "downgrade", "upgrade"]

FROM = (1, 1)
TO = (1, 2)
#: Fields 1.2 added (a downgrade puts what they hold back into the fields 1.1 has).
ADDED_FIELDS: tuple[str, ...] = ("Extension.template", "Extension.refs", "Document.signature", "Document.module_calls")

_STEP = AdditiveStep(old, new, FROM, TO, ADDED_FIELDS)
upgrade = _STEP.upgrade


def plain_extensions(raw: new.Document) -> new.Document:
    """``raw`` with every extension as plain JSON text (shares everything else with ``raw``)."""
    if not any(e.template or e.refs for e in raw.extensions):
        return raw
    out = []
    for i, e in enumerate(raw.extensions):
        if not (e.template or e.refs):
            out.append(e)
            continue
        if e.json:
            raise VersionError(
                "an extension holds both JSON text and a template",
                where=f"$.extensions[{i}]",
                expected="an empty `json` when `template` is set",
            )
        try:
            text = interned_json.fill(e.template, e.refs, raw.strings, where=f"$.extensions[{i}]")
        except DecodeError as exc:
            raise VersionError(
                f"extension {e.name!r} does not fill in: {exc.problem}", where=exc.where, expected=exc.expected
            ) from None
        out.append(new.Extension(e.name, text))
    return msgspec.structs.replace(raw, extensions=out)


def downgrade(raw: Any) -> Any:
    """A 1.2 document as 1.1: templated extensions back to JSON text, the program's tables back into its
    JSON; nothing lost."""
    plain = plain_extensions(raw)
    try:
        plain = program_tables.inline(plain)
    except DecodeError as exc:
        raise VersionError(
            f"the program's tables do not go back into its JSON: {exc.problem}", where=exc.where, expected=exc.expected
        ) from None
    return _STEP.downgrade(plain)
