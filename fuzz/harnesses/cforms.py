"""The columnar codec's ``forms`` loops in C (``tracepack.codecs._cforms``), differentially.

The input drives an :class:`atheris.FuzzedDataProvider`-style reader (:class:`fuzz.common.Provider`):

* the writer: ``forms(values)`` and ``numbered(values)`` in C must give exactly what the Python
  reference loops give (``columnar._forms_py``, the regular expression) for any list of strings;
* the reader: a forms column (the five lists, MessagePack-encoded as a payload holds them) read by
  ``columnar._Reader.forms`` with the C loops and with the Python loops must give the same strings,
  or refuse with the same error;
* ``unforms`` called with integers no decoder makes (negative, past 64 bits, lengths that differ):
  ``None`` or the strings, or the documented TypeError/ValueError/OverflowError, never a crash.

Run with the sanitizer-instrumented ``_cforms`` (``NATIVE``): a read out of bounds is an ASan report."""

from __future__ import annotations

from typing import Any, Final

from fuzz.common import Finding, Provider

TARGETS: Final = ("tracepack.codecs.columnar",)
NATIVE: Final = True
_ALPHABET: Final = "ab_.:;/0123456789 \t\n\u00e9\u4e2d\U0001f600"


def _strings(p: Provider, most: int) -> list[str]:
    out = []
    for _ in range(p.int(0, most)):
        if p.bool():  # a name with numbers, the writer's common case
            out.append(
                p.pick(("add_", "layer.", "x", "", "l__self__."))
                + str(p.int(0, 10**20))
                + p.pick(("", "_a", ".w", " "))
            )
        else:
            out.append("".join(p.pick(_ALPHABET) for _ in range(p.int(0, 300 if p.int(0, 9) == 0 else 12))))
    return out


def _ints(p: Provider, most: int, lo: int, hi: int) -> list[int]:
    return [p.int(lo, hi) for _ in range(p.int(0, most))]


def _read(raw: bytes, n: int, *, c: bool) -> Any:
    import msgspec

    from tracepack.codecs import columnar
    from tracepack.errors import DecodeError

    reader = columnar._Reader({}, 1 << 20, "m.tpk")
    try:
        if c:
            return reader.forms("$.col", n, msgspec.Raw(raw))
        with columnar.python_loops():
            return reader.forms("$.col", n, msgspec.Raw(raw))
    except DecodeError as exc:
        return str(exc)


def test_one_input(data: bytes) -> None:
    import msgspec

    from tracepack.codecs import _cforms, columnar

    p = Provider(data)
    mode = p.int(0, 2)
    if mode == 0:
        values = _strings(p, 40)
        affix = columnar._FORM_AFFIX_MAX
        if _cforms.forms(values, affix) != columnar._forms_py(values):
            raise Finding(f"C and Python forms differ on {values!r}")
        want = sum(1 for s in values if len(s) <= affix and columnar._FORM.fullmatch(s) is not None)
        if _cforms.numbered(values, affix) != want:
            raise Finding(f"C and Python count numbered strings differently in {values!r}")
        return
    literals = _strings(p, 12)
    small = p.bool()
    lo, hi = (0, 16) if small else (0, 2**64 - 1)  # inclusive: msgpack holds up to 2**64 - 1
    k = p.int(0, 10)
    lists = [_ints(p, k, lo, hi) if p.bool() else [p.int(lo, hi) for _ in range(k)] for _ in range(3)]
    residuals = [p.int(-(2**63), 2**63 - 1) if not small else p.int(-3, 5) for _ in range(k)]
    n = p.int(0, len(literals) + 1)
    if mode == 1:
        raw = msgspec.msgpack.encode([literals, *lists, residuals])
        c, py = _read(raw, n, c=True), _read(raw, n, c=False)
        if c != py:
            raise Finding(f"the C and Python forms readers differ: {c!r} vs {py!r}")
        return
    wide = [[p.int(-(2**70), 2**70) for _ in range(p.int(0, 6))] for _ in range(4)]
    try:
        got = _cforms.unforms(literals, *wide, n, columnar._FORM_NUMBER_LIMIT, columnar._FORM_AFFIX_MAX)
    except (TypeError, ValueError, OverflowError):
        return
    if got is not None and (len(got) != n or not all(type(s) is str for s in got)):
        raise Finding(f"unforms gave {got!r} for {n} rows")


def seeds() -> list[tuple[str, bytes]]:
    import random

    r = random.Random(24)
    return [(f"random-{i}", r.randbytes(r.choice((16, 64, 256, 1024)))) for i in range(24)]
