"""Read the debug info of a TorchScript archive (``.pt`` / ``.ptl``) without torch.

Only the zip directory and the debug members are read: ``code/**.py`` (the
generated code ``debug_pkl`` byte offsets point into), ``code/**.py.debug_pkl``,
``callstack_debug_map.pkl`` and ``mobile_debug_handles.pkl``. ``data.pkl`` and
the tensors, which are object pickles, are never touched.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tracepack.errors import LegacyFormatError
from tracepack.io.zip import check_member, open_zip, read_member
from tracepack.torch.torchscript.debug_pkl import (
    CallstackDebugMap,
    DebugPkl,
    MobileDebugHandles,
    parse_callstack_debug_map,
    parse_debug_pkl,
    parse_mobile_debug_handles,
)
from tracepack.torch.torchscript.pickle_reader import DEFAULT_LIMITS, PickleLimits

__all__ = ["TorchScriptDebugInfo", "read_torchscript_debug_info"]

#: No cap of its own: members are held to the caller's ``max_decompressed`` budget
#: (:mod:`tracepack.io.limits`); ``max_member_bytes`` adds one.
DEFAULT_MAX_MEMBER_BYTES: int | None = None


@dataclass(frozen=True, slots=True)
class TorchScriptDebugInfo:
    """The debug members of one TorchScript archive, keyed by their path inside the
    archive's top folder (``"code/__torch__.py.debug_pkl"``)."""

    archive_name: str
    debug_pkls: dict[str, DebugPkl] = field(default_factory=dict)
    code: dict[str, str] = field(default_factory=dict)
    callstack_debug_map: CallstackDebugMap | None = None
    mobile_debug_handles: MobileDebugHandles | None = None
    version: str | None = None


def read_torchscript_debug_info(
    source: str | Path | bytes,
    *,
    name: str | None = None,
    limits: PickleLimits = DEFAULT_LIMITS,
    max_member_bytes: int | None = DEFAULT_MAX_MEMBER_BYTES,
) -> TorchScriptDebugInfo:
    """Read the debug info of the TorchScript zip at ``source`` (a path or the bytes).

    ``name`` labels errors (default: the path, or ``<bytes>``). Members are read within the
    caller's ``max_decompressed`` and ``max_ratio`` budgets (:mod:`tracepack.io.limits`), and
    ``max_member_bytes`` when given, as the zip declares them, before reading.
    """
    label = name or (str(source) if not isinstance(source, bytes) else "<bytes>")
    if isinstance(source, bytes):
        f: IO[bytes] = io.BytesIO(source)
    else:
        from tracepack.io.files import open_regular

        f = os.fdopen(open_regular(source, source=label), "rb")  # a FIFO or device: refused, never waited on
    try:
        archive, _ = open_zip(f, source=label, expected="a TorchScript archive (a zip file)")
    except BaseException:
        f.close()
        raise
    with f, archive:
        infos = archive.infolist()
        tops = {info.filename.split("/", 1)[0] for info in infos if "/" in info.filename}
        if len(tops) != 1:
            raise LegacyFormatError(
                f"expected one top-level folder, found {len(tops)}",
                source=label,
                expected="<name>/code/..., <name>/data.pkl, ...",
            )
        top = tops.pop()
        debug_pkls: dict[str, DebugPkl] = {}
        code: dict[str, str] = {}
        cmap: CallstackDebugMap | None = None
        handles: MobileDebugHandles | None = None
        version: str | None = None
        for info in infos:
            if "/" not in info.filename or info.is_dir():
                continue
            member = info.filename.split("/", 1)[1]
            where = f"{label}:{member}"
            wanted = (
                member.endswith((".debug_pkl", "callstack_debug_map.pkl", "mobile_debug_handles.pkl"))
                or (member.startswith("code/") and member.endswith(".py"))
                or member == "version"
            )
            if not wanted:
                continue
            if max_member_bytes is not None and info.file_size > max_member_bytes:
                raise LegacyFormatError(
                    f"member of {info.file_size} bytes exceeds the {max_member_bytes}-byte limit",
                    source=where,
                )
            check_member(info, where)
            data = read_member(archive, info, where)
            if member.endswith(".debug_pkl"):
                if member != "delegated_backends.debug_pkl":
                    debug_pkls[member] = parse_debug_pkl(data, source=where, limits=limits)
            elif member == "callstack_debug_map.pkl":
                cmap = parse_callstack_debug_map(data, source=where, limits=limits)
            elif member == "mobile_debug_handles.pkl":
                handles = parse_mobile_debug_handles(data, source=where, limits=limits)
            else:
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise LegacyFormatError(f"not UTF-8: {exc.reason}", source=where) from None
                if member == "version":
                    version = text.strip()
                else:
                    code[member] = text
        return TorchScriptDebugInfo(top, debug_pkls, code, cmap, handles, version)
