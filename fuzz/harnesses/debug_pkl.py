"""TorchScript debug pickles: ``*.debug_pkl`` (both of torch's layouts), the lite interpreter's
``callstack_debug_map.pkl`` and ``mobile_debug_handles.pkl``, each through its parser
(:mod:`tracepack.torch.torchscript.debug_pkl`). One byte chooses the parser; every parser must return
or refuse."""

from __future__ import annotations

from typing import Final

from fuzz.common import contract

TARGETS: Final = ("tracepack.torch.torchscript.debug_pkl", "tracepack.torch.torchscript.pickle_reader")
DICT: Final = "pickle.dict"
_KINDS: Final = (".debug_pkl", "callstack_debug_map.pkl", "mobile_debug_handles.pkl")


def test_one_input(data: bytes) -> None:
    from tracepack.torch.torchscript import debug_pkl

    if not data:
        return
    parse = (debug_pkl.parse_debug_pkl, debug_pkl.parse_callstack_debug_map, debug_pkl.parse_mobile_debug_handles)
    contract(lambda: parse[data[0] % 3](data[1:], source="x.pkl"))


def seeds() -> list[tuple[str, bytes]]:
    from fuzz.common import ROOT, small_archives, zip_members

    out = []
    archives = [*small_archives()[3:5], ("legacy.pt", (ROOT / "tests/data/torch/script_legacy.pt").read_bytes())]
    for name, data in archives:
        for info, content in zip_members(data):
            for i, kind in enumerate(_KINDS):
                if info.filename.endswith(kind):
                    out.append((f"{name}-{info.filename.rsplit('/', 1)[-1]}", bytes([i]) + content))
    return out
