"""The schema compatibility checker: which version bump a schema change needs, per codec.

Loaders read every version ever released, so a schema change must never
break them silently. The checker compares two schema IRs
(:class:`tracepack.codegen.model.Schema`) and classifies every change by rule
(:data:`RULES`), each with the codecs it breaks (JSON keys by name,
MessagePack by position, FlatBuffers by id and fixed width) and the bump it
needs: ``none``, ``minor``, ``major`` or ``forbidden``. The version NEW
declares must be exactly the one the worst change needs.

The package is layered like the code generator, each module importing only
the ones before it:

``rules``
    the rule table: ids, bumps, codecs;
``diff``
    pairs the members of two schemas and lists :class:`Finding` s (pure);
``verdict``
    the needed bump, the declared one, and the ways out (pure);
``lock``
    ``schema/RELEASED.sha256``: released schemas never change (pure);
``cli``
    ``tracepack schema check OLD NEW`` and ``--all [DIR]``: reads files, prints.

The rules with worked examples: ``docs/schema-rules.md``.
"""

from tracepack.schema_check.diff import Finding, diff_schemas, is_promotion
from tracepack.schema_check.lock import LOCK_FILE, LockEntry, check_lock, lock_line, parse_lock
from tracepack.schema_check.rules import CODECS, RULES, Bump, Codec, Rule, worst
from tracepack.schema_check.verdict import Report, check_pair, declared_bump, next_version

__all__ = [
    "CODECS",
    "LOCK_FILE",
    "RULES",
    "Bump",
    "Codec",
    "Finding",
    "LockEntry",
    "Report",
    "Rule",
    "check_lock",
    "check_pair",
    "declared_bump",
    "diff_schemas",
    "is_promotion",
    "lock_line",
    "next_version",
    "parse_lock",
    "worst",
]
