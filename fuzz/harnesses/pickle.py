"""The data-only pickle reader (:func:`tracepack.torch.torchscript.pickle_reader.read_pickle`), against
the standard library's unpickler as the reference.

The reference runs with every global, persistent id and extension refused (it can build plain values
only, so nothing in the input is ever imported or called). Where both accept a stream they must give
the same value (compared by ``repr``: NaN and shared objects compare as they print); tracepack may
refuse more (opcodes it does not take, its budgets), never give another value."""

from __future__ import annotations

import io
import pickle as std
import pickletools
from typing import Any, Final

from fuzz.common import Finding, contract

TARGETS: Final = ("tracepack.torch.torchscript.pickle_reader",)
DICT: Final = "pickle.dict"


class _DataOnly(std.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise std.UnpicklingError(f"global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise std.UnpicklingError("persistent id")


def _small_memo(data: bytes) -> bool:
    """Whether every memo index is small: the C unpickler sizes its memo array by the largest index (a
    ``LONG_BINPUT 671117668`` allocates gigabytes before anything else happens)."""
    try:
        return all(
            arg is None or type(arg) is not int or arg < (1 << 20)
            for op, arg, _ in pickletools.genops(data)
            if "PUT" in op.name or "GET" in op.name
        )
    except Exception:  # what pickletools cannot walk, the reference is not asked about
        return False


def _reference(data: bytes) -> tuple[bool, Any]:
    if not _small_memo(data):
        return False, None
    try:
        f = io.BytesIO(data)
        value = _DataOnly(f).load()
    except Exception:
        return False, None
    return f.tell() == len(data), value


def test_one_input(data: bytes) -> None:
    from tracepack.torch.torchscript.pickle_reader import PickleLimits, read_pickle

    # a lower object budget than the default keeps the comparison below cheap on memo-shared values
    value = contract(lambda: read_pickle(data, source="x.pkl", limits=PickleLimits(max_objects=50_000)))
    if value is None:
        return  # refused: tracepack may refuse more than the standard library, never give another value
    ok, want = _reference(data)
    if ok and repr(value) != repr(want):
        raise Finding(f"read_pickle gives {repr(value)[:200]}, the standard library {repr(want)[:200]}")


def seeds() -> list[tuple[str, bytes]]:
    from fuzz.common import small_archives, zip_members

    out = []
    for name, data in small_archives()[3:5]:
        for info, content in zip_members(data):
            if info.filename.endswith((".pkl", "constants.pkl")) and "debug" not in info.filename:
                out.append((f"{name}-{info.filename.rsplit('/', 1)[-1]}", content))
    value = {"a": [1, -1, 2**70, 1.5, None, True, False], "b": ("x", b"y", ()), "": [[], {}]}
    for protocol in range(6):
        out.append((f"stdlib-protocol-{protocol}", std.dumps(value, protocol=protocol)))
    shared = [("s",) * 2] * 3
    out.append(("stdlib-memo", std.dumps([shared, shared], protocol=2)))
    return out
