"""Helpers shared by the torch sample exporters: path neutralisation and zip rewriting.

Samples are written on a developer's machine, so their stack traces and
source ranges name that machine's paths (the checkout, the virtualenv, the
temp dir, the home dir). Before anything is committed, every such prefix is
replaced, byte for byte, by a neutral one:

====================================  =================================================
machine prefix                        neutral prefix
====================================  =================================================
torch's site-packages                 ``/home/user/.venv/lib/pythonX.Y/site-packages/``
the interpreter's stdlib              ``/usr/lib/pythonX.Y/``
the virtualenv (``sys.prefix``)       ``/home/user/.venv/``
the repository root                   ``/home/user/project/``
this script's directory (if outside)  ``/home/user/project/scripts/torch/``
the temp dir                          ``/home/user/scratch/``
the home dir                          ``/home/user/``
====================================  =================================================

The longest prefix wins, in one pass, so a replacement is never rewritten again.
This module needs only the standard library; the exporters import torch.
"""

from __future__ import annotations

import os
import re
import struct
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

SCRIPT_DIR = Path(__file__).resolve().parent
REPO_ROOT = SCRIPT_DIR.parent.parent
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"

NEUTRAL_SITE = f"/home/user/.venv/lib/{PY}/site-packages/"
NEUTRAL_STDLIB = f"/usr/lib/{PY}/"
NEUTRAL_VENV = "/home/user/.venv/"
NEUTRAL_PROJECT = "/home/user/project/"
NEUTRAL_TMP = "/home/user/scratch/"
NEUTRAL_HOME = "/home/user/"

# Anything still starting like this after rewriting is a leak: the temp dirs, work trees and homes of the
# machines the samples are exported on (spelled from their names, so this file names no such path itself).
FORBIDDEN = tuple(f"/{name}/".encode() for name in ("tmp", "work", "root", "opt", "private", "var/folders"))


def _variants(path: str | os.PathLike[str]) -> set[str]:
    """``path`` as given, absolute and resolved, each with a trailing slash."""
    out = set()
    for p in {str(path), os.path.abspath(path), os.path.realpath(path)}:
        out.add(p.rstrip("/") + "/")
    return out


def machine_prefixes(site_packages: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Map every machine-specific path prefix of this run to its neutral replacement."""
    table: list[tuple[Iterable[str], str]] = []
    if site_packages is not None:
        table.append((_variants(site_packages), NEUTRAL_SITE))
    for key in ("purelib", "platlib"):
        table.append((_variants(sysconfig.get_paths()[key]), NEUTRAL_SITE))
    table.append((_variants(sysconfig.get_paths()["stdlib"]), NEUTRAL_STDLIB))
    table.append((_variants(sys.prefix), NEUTRAL_VENV))
    table.append((_variants(REPO_ROOT), NEUTRAL_PROJECT))
    try:
        SCRIPT_DIR.relative_to(REPO_ROOT)
    except ValueError:
        table.append((_variants(SCRIPT_DIR), NEUTRAL_PROJECT + "scripts/torch/"))
    table.append((_variants(tempfile.gettempdir()), NEUTRAL_TMP))
    table.append((_variants(Path.home()), NEUTRAL_HOME))
    mapping: dict[str, str] = {}
    for olds, new in table:
        for old in olds:
            if old not in {"/", new}:
                mapping.setdefault(old, new)
    return mapping


class PathRewriter:
    """One-pass, longest-prefix-first replacement of machine paths, with counts."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = {old.encode(): new.encode() for old, new in mapping.items()}
        alternatives = sorted(self.mapping, key=len, reverse=True)
        self.pattern = re.compile(b"|".join(re.escape(a) for a in alternatives))
        self.counts: dict[bytes, int] = {}

    def _sub(self, match: re.Match[bytes]) -> bytes:
        old = match.group()
        self.counts[old] = self.counts.get(old, 0) + 1
        return self.mapping[old]

    def bytes(self, data: bytes) -> bytes:
        return self.pattern.sub(self._sub, data)

    def text(self, text: str) -> str:
        return self.bytes(text.encode("utf-8")).decode("utf-8")

    def report(self, label: str) -> None:
        if not self.counts:
            print(f"[{label}] no machine paths found")
        for old, n in sorted(self.counts.items(), key=lambda kv: -kv[1]):
            print(f"[{label}] replaced {n:4d} x {old.decode()!r} -> {self.mapping[old].decode()!r}")
        self.counts.clear()


#: A strict export's ``nn_module_stack`` keys and ``from_node`` graph ids are Python object ids, and
#: its targets print function addresses (``<function relu at 0x7f...>``): memory addresses, different
#: on every run. Each distinct one becomes ``140000000000000 + n`` / ``0x7f0000000000 + n`` (first
#: seen first). No other number in these programs has 13 digits or more.
_OBJECT_ID = re.compile(rb"(?<![0-9.])[1-9][0-9]{12,15}(?![0-9.])")
_ADDRESS = re.compile(rb"0x[0-9a-f]{9,16}\b")


def stable_ids(data: bytes) -> bytes:
    """``data`` with object ids and addresses numbered in order of appearance (deterministic)."""
    ids: dict[bytes, bytes] = {}
    data = _OBJECT_ID.sub(lambda m: ids.setdefault(m.group(), b"%d" % (140000000000000 + len(ids))), data)
    addresses: dict[bytes, bytes] = {}
    return _ADDRESS.sub(lambda m: addresses.setdefault(m.group(), b"0x%x" % (0x7F0000000000 + len(addresses))), data)


#: A machine path left after rewriting: a ``FORBIDDEN`` prefix where a path starts, not inside a longer
#: path (transformers' ``models/opt/modeling_opt.py`` is no leak of ``/opt/``).
MACHINE_PATH = re.compile(rb"(?<![\w.-])(?:" + b"|".join(re.escape(p) for p in FORBIDDEN) + rb")")


def check_clean(label: str, data: bytes) -> None:
    """Fail if ``data`` still names a machine path (a ``FORBIDDEN`` prefix at the start of a path)."""
    leaks = sorted({m.group().decode() for m in MACHINE_PATH.finditer(data)})
    if leaks:
        raise SystemExit(f"{label}: machine paths remain after rewriting: {leaks}")


_ALIGN = 64  # torch's PyTorchStreamWriter aligns every record's data to 64 bytes


def rewrite_zip(src: Path, dst: Path, replace: dict[str, bytes]) -> None:
    """Copy the zip ``src`` to ``dst`` member by member, in order, swapping the
    contents of the members named in ``replace``. Members stay uncompressed and
    64-byte aligned with torch's ``FB`` padding extra field, as torch writes them."""
    with (
        zipfile.ZipFile(src) as zin,
        open(dst, "wb") as raw,
        zipfile.ZipFile(raw, "w", zipfile.ZIP_STORED) as zout,
    ):
        for info in zin.infolist():
            data = replace.get(info.filename, zin.read(info.filename))
            name = info.filename.encode("utf-8")
            offset = raw.tell()
            pad = (-(offset + 30 + len(name) + 4)) % _ALIGN
            out = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            out.compress_type = zipfile.ZIP_STORED
            out.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
            out.external_attr = info.external_attr
            zout.writestr(out, data)
    with zipfile.ZipFile(dst) as check:
        for info in check.infolist():
            start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
            if start % _ALIGN:
                raise SystemExit(f"{dst}: {info.filename} is not {_ALIGN}-byte aligned")


def python_zip_copy(src: Path, dst: Path, replace: dict[str, bytes]) -> None:
    """Copy a zip written by Python's zipfile member by member, swapping some contents."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = replace.get(info.filename, zin.read(info.filename))
            out = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            out.compress_type = info.compress_type
            out.external_attr = info.external_attr
            zout.writestr(out, data)


def torch_writer(src: Path) -> bool:
    """Whether torch's PyTorchStreamWriter wrote the zip: its ``FB`` padding is in the local
    headers only (the central directory has no extra field). torch 2.1-2.7's ``torch.export.save``
    wrote ``.pt2`` files with Python's zipfile instead."""
    raw = src.read_bytes()
    with zipfile.ZipFile(src) as archive:
        for info in archive.infolist():
            at = info.header_offset
            name_len, extra_len = struct.unpack("<HH", raw[at + 26 : at + 30])
            if not raw[at + 30 + name_len : at + 30 + name_len + extra_len].startswith(b"FB"):
                return False
    return True


def copy_zip(src: Path, dst: Path, replace: dict[str, bytes]) -> None:
    """Copy the zip ``src`` to ``dst`` as the writer that made it writes (:func:`rewrite_zip` for
    torch's, :func:`python_zip_copy` for Python's), swapping the members named in ``replace``."""
    if torch_writer(src):
        rewrite_zip(src, dst, replace)
    else:
        python_zip_copy(src, dst, replace)
