"""Seeded mutations: the same (seed bytes, seed number) always gives the same mutant.

Byte-level mutators (flips, interesting values, inserts, deletes, duplicated and spliced ranges,
truncation) for every surface; text-aware ones for JSON/TOML (huge and long integers, deep
nesting, lone surrogates, nulls and wrong types where values were); a "careful attacker" that
fixes the ``.tpk`` checksums after mutating, so that the payload's decoder is reached.
"""

from __future__ import annotations

import random
import re
import struct
import zlib
from collections.abc import Callable
from typing import Final

from tracepack import container

__all__ = ["MUTATORS", "fix_tpk_checksums", "mutate"]

_INTERESTING: Final = (0, 1, 0x7F, 0x80, 0xFF, 0x20, 0x0A, 0x22, 0x5B, 0x7B, 0x00)
_INTERESTING_WORDS: Final = (
    b"\x00\x00\x00\x00",
    b"\xff\xff\xff\xff",
    b"\xff\xff\xff\x7f",
    b"\x00\x00\x00\x80",
    b"\x00\x00\x01\x00",
    b"\x01\x00\x00\x00",
)
_JSON_VALUES: Final = (
    "null",
    "[]",
    "{}",
    '""',
    "true",
    "-1",
    "1e999",
    str(2**70),
    "9" * 4_301,
    '"\\ud800"',
    '"\\udfff x"',
    "[null]",
    '{"": null}',
    "[" * 5_000 + "]" * 5_000,
    '{"a":' * 3_000 + "1" + "}" * 3_000,
    "0.1e-99999",
    '"' + "a" * 70_000 + '"',
)
_TOML_VALUES: Final = (
    "[" * 3_000 + "]" * 3_000,
    str(2**70),
    "9" * 4_301,
    '"\\ud800"',
    "{ a = { b = { c = 1 } } }",
    "nan",
)


def _flip(r: random.Random, b: bytearray) -> None:
    if b:
        b[r.randrange(len(b))] ^= 1 << r.randrange(8)


def _interesting(r: random.Random, b: bytearray) -> None:
    if b:
        b[r.randrange(len(b))] = r.choice(_INTERESTING)


def _word(r: random.Random, b: bytearray) -> None:
    if len(b) >= 4:
        at = r.randrange(len(b) - 3)
        b[at : at + 4] = r.choice(_INTERESTING_WORDS)


def _insert(r: random.Random, b: bytearray) -> None:
    at = r.randrange(len(b) + 1)
    b[at:at] = bytes(r.randrange(256) for _ in range(r.randint(1, 16)))


def _delete(r: random.Random, b: bytearray) -> None:
    if b:
        at = r.randrange(len(b))
        del b[at : at + r.randint(1, 64)]


def _duplicate(r: random.Random, b: bytearray) -> None:
    if b:
        at = r.randrange(len(b))
        piece = b[at : at + r.randint(1, 256)]
        to = r.randrange(len(b) + 1)
        b[to:to] = piece * r.randint(1, 8)


def _truncate(r: random.Random, b: bytearray) -> None:
    del b[r.randrange(len(b) + 1) :]


def _json_value(r: random.Random, b: bytearray) -> None:
    """Replace one JSON scalar (a number, string, true/false/null) with a hostile value."""
    try:
        text = b.decode("utf-8", "surrogatepass") if b[:1] in (b"{", b"[") else None
    except UnicodeDecodeError:
        text = None
    if text is None:
        return _flip(r, b)
    spans = [m.span() for m in re.finditer(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null', text)]
    if not spans:
        return None
    start, end = r.choice(spans)
    text = text[:start] + r.choice(_JSON_VALUES) + text[end:]
    b[:] = text.encode("utf-8", "surrogatepass")
    return None


def _toml_value(r: random.Random, b: bytearray) -> None:
    lines = b.split(b"\n")
    candidates = [i for i, line in enumerate(lines) if b" = " in line]
    if not candidates:
        return _flip(r, b)
    i = r.choice(candidates)
    key = lines[i].split(b" = ", 1)[0]
    lines[i] = key + b" = " + r.choice(_TOML_VALUES).encode()
    b[:] = b"\n".join(lines)
    return None


MUTATORS: Final[dict[str, Callable[[random.Random, bytearray], None]]] = {
    "flip": _flip,
    "interesting": _interesting,
    "word": _word,
    "insert": _insert,
    "delete": _delete,
    "duplicate": _duplicate,
    "truncate": _truncate,
    "json": _json_value,
    "toml": _toml_value,
}


def fix_tpk_checksums(b: bytearray) -> None:
    """Recompute a mutated ``.tpk``'s payload length, CRCs and (uncompressed) raw length; with block
    checksums (header flag bit 0), the payload is what the header declared (as far as it goes) and a
    fresh block table follows it, in blocks of the size the old table had (16 KiB if unreadable)."""
    if len(b) < 48 or b[:4] != b"\x89TPK":
        return
    payload = bytes(b[48:])
    if struct.unpack_from("<H", b, 18)[0] & 1:
        declared = struct.unpack_from("<Q", b, 24)[0]
        payload = bytes(b[48 : 48 + declared])
        size = struct.unpack_from("<I", b, 48 + declared + 4)[0] if len(b) >= 48 + declared + 8 else 0
        b[48:] = payload + container.block_table(payload, size if size in container.BLOCK_SIZES else 1 << 14)
    struct.pack_into("<Q", b, 24, len(payload))
    if b[17] == 0:
        struct.pack_into("<Q", b, 32, len(payload))
    struct.pack_into("<I", b, 40, zlib.crc32(payload))
    struct.pack_into("<I", b, 44, zlib.crc32(bytes(b[:44])))


def mutate(data: bytes, seed: int, kinds: tuple[str, ...], *, splice: bytes | None = None) -> tuple[bytes, str]:
    """A mutant of ``data``: 1-4 mutations of the given kinds; returns it and what was done."""
    r = random.Random(seed)
    b = bytearray(data)
    done = []
    for _ in range(r.choice((1, 1, 1, 2, 2, 3, 4))):
        kind = r.choice(kinds)
        if kind == "splice" and splice:
            at = r.randrange(len(b) + 1)
            s = r.randrange(len(splice))
            b[at:] = splice[s:] if r.random() < 0.5 else splice[s : s + 512] + b[at:]
        elif kind in MUTATORS:
            MUTATORS[kind](r, b)
        done.append(kind)
    if data[:4] == b"\x89TPK" and r.random() < 0.6:
        fix_tpk_checksums(b)  # the careful attacker: get past the checksums to the decoder
        done.append("fixcrc")
    return bytes(b), "+".join(done)
