"""``tracepack.torch.load``: torch.export.load's result, faster, and without running anything from the file.

What ``torch.export.load`` does, step by step, and what this loader does instead:

============================  ================================  =========================================
step                          torch.export.load                 tracepack.torch.load
============================  ================================  =========================================
model.json -> dataclasses     ``json.loads`` + a reflective     msgspec + converters generated from
                              converter (type hints per object) torch's ``schema.yaml`` (:mod:`.serde`)
packed archive                metadata lost (``tracepack`` dir  metadata merged back from the tracepack
                              ignored)                          member, as dicts (no JSON in between)
weights, constants            raw records; ``use_pickle``       raw records the same way; pickles through
                              records with ``torch.load(...,    ``torch.load(weights_only=True)`` only;
                              weights_only=False)``             refused otherwise
custom / opaque objects       torchbind / ``pickle.loads``      refused (:class:`UnsafePickleError` naming
                                                                the member) unless ``trust_pickles=True``
example inputs                ``weights_only=True``, falling    ``weights_only=True`` only
                              back to ``weights_only=False``
symbolic expressions          ``sympy.sympify`` (``eval``) of   checked against the expression grammar
                              every string, every time          torch writes, then parsed once per
                                                                distinct string (per load)
graph, fake tensors, meta     torch's GraphModuleDeserializer   the same code (results equal by design)
============================  ================================  =========================================

``trust_pickles=True`` restores torch's behaviour for files you trust (tensor subclasses
stored as pickles, torchbind and opaque constants): those pickles can run code.
"""

from __future__ import annotations

import gc
import importlib
import io
import os
import re
import struct
import tokenize
import zipfile
import zlib
from collections.abc import Callable
from typing import IO, Any

from tracepack.errors import InputError, LegacyFormatError, UnsafePickleError, VersionError
from tracepack.io.zip import check_member, open_zip, read_member
from tracepack.torch.serde import SUPPORTED_SCHEMA_MAJORS, SUPPORTED_TORCH, converters

__all__ = [
    "ArchiveMismatch",
    "ArchiveRefused",
    "MemberMissing",
    "SchemaMismatch",
    "load_pt2",
    "load_program_dict",
    "safe_sympy_text",
]


class ArchiveRefused(LegacyFormatError, RuntimeError):
    """An archive ``torch.export.load`` refuses with a ``RuntimeError`` (a member it needs is missing,
    the zip's format version is not one torch reads): also a ``RuntimeError``, for code written
    around ``torch.export.load``."""


class ArchiveMismatch(LegacyFormatError, ValueError):
    """An ``archive_version`` other than the one the installed torch writes: torch's ``ValueError``
    and message, also a ``ValueError``."""


class SchemaMismatch(VersionError, RuntimeError):
    """A program whose schema major is not the installed torch's (and not one tracepack upgrades):
    ``torch.export.load`` raises a ``RuntimeError`` for it (its deserializer's ``SerializeError``), so
    this is one too, besides a ``VersionError``."""

    @classmethod
    def of(cls, version: str, relation: str, installed_major: int, source: str) -> SchemaMismatch:
        """The one message both loaders raise: the file's schema ``version``, ``relation`` ("newer" or
        "older") than the installed torch's ``installed_major``, and what tracepack.torch supports."""
        return cls(
            f"written with torch export schema {version}, {relation} than this torch's {installed_major}.x; "
            f"tracepack.torch supports torch {SUPPORTED_TORCH} "
            f"(schema {', '.join(f'{m}.x' for m in SUPPORTED_SCHEMA_MAJORS)})",
            source=source,
            where="$.schema_version",
        )


class MemberMissing(LegacyFormatError, AssertionError):
    """A weights or constants config the program needs is not in the archive (torch:
    ``AssertionError("... not found in PT2 archive")``): also an ``AssertionError``."""


class OlderArchive(Exception):
    """Internal: the archive is one :mod:`tracepack.torch.upgrade` reads (a flat archive of torch
    2.1-2.7, or a program of an older schema); raised by :func:`load_pt2` only when asked to check."""


class ArchiveFormatError(LegacyFormatError, AssertionError):
    """An ``archive_format`` other than ``pt2`` (torch: ``AssertionError("Invalid archive format")``)."""


_MODEL = re.compile(r"models/([^/]+)\.json")


def _torch() -> Any:
    # Without torch: "tracepack.torch needs torch: pip install 'tracepack[torch]'", not a bare ModuleNotFoundError.
    from tracepack.torch import _torch as needs_torch

    return needs_torch()


# -- the archive ---------------------------------------------------------------------------------------


class _Zip:
    """A .pt2 opened for reading: member names relative to the top folder, bounded reads."""

    def __init__(self, f: str | os.PathLike[str] | IO[bytes], source: str) -> None:
        self.source = source
        self.zip, infos = open_zip(f, source=source, expected="a torch.export .pt2")
        names = [i.filename for i in infos if not i.is_dir()]
        tops = {n.split("/", 1)[0] for n in names}
        if len(tops) != 1 or not all("/" in n for n in names):
            raise LegacyFormatError("members are not under one top folder", source=source, expected="a .pt2")
        self.top = tops.pop()
        self.infos = {i.filename.split("/", 1)[1]: i for i in infos if not i.is_dir()}

    def where(self, rel: str) -> str:
        return f"{self.source}:{self.top}/{rel}"

    def has(self, rel: str) -> bool:
        return rel in self.infos

    def size(self, rel: str) -> int:
        return self.infos[rel].file_size

    def read(self, rel: str) -> bytes:
        return bytes(self.read_into(rel))

    def read_into(self, rel: str) -> bytearray:
        """The member's bytes in a fresh writable buffer (tensors are made on it without a copy),
        within the caller's ``max_decompressed`` and ``max_ratio`` budgets, checked before the
        buffer is allocated."""
        info = self.infos.get(rel)
        if info is None:
            raise LegacyFormatError("no such member", source=self.where(rel))
        check_member(info, self.where(rel))
        if info.compress_type != zipfile.ZIP_STORED:  # torch never writes one: read as its bytes come, not as declared
            return bytearray(read_member(self.zip, info, self.where(rel)))
        buf = bytearray(info.file_size)  # a stored member: its size is bounded by the archive (open_zip checked it)
        if self._read_stored(info, buf):
            return buf
        try:
            with self.zip.open(info) as f:
                got = f.readinto(buf)  # type: ignore[attr-defined]
                extra = f.read(1)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, RuntimeError) as exc:
            raise LegacyFormatError(f"cannot read member: {exc}", source=self.where(rel)) from None
        if got != info.file_size or extra:
            raise LegacyFormatError("member size does not match the zip directory", source=self.where(rel))
        return buf

    def _read_stored(self, info: zipfile.ZipInfo, buf: bytearray) -> bool:
        """An uncompressed member read straight into ``buf`` (what ``ZipFile.open`` does for one, without
        its per-member file object): the local header checked as zipfile checks it, the bytes read,
        their CRC-32 compared with the directory's. False where zipfile's own reader is needed (an
        encrypted member, a header that differs from the directory: it says what is wrong)."""
        fp = self.zip.fp
        if fp is None or info.flag_bits & 0x61:  # encrypted or patched: zipfile says it cannot
            return False
        fp.seek(info.header_offset)
        header = fp.read(30)
        if len(header) != 30 or header[:4] != b"PK\x03\x04":
            return False
        flags, method = struct.unpack("<HH", header[6:10])
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        if flags & 0x1 or method != zipfile.ZIP_STORED:
            return False
        try:
            name = fp.read(name_length).decode("utf-8" if flags & 0x800 else "cp437")
        except UnicodeDecodeError:
            return False
        if name != info.orig_filename:
            return False
        fp.seek(extra_length, io.SEEK_CUR)
        got = fp.readinto(buf)  # type: ignore[attr-defined]
        if got != info.file_size:
            raise LegacyFormatError("member size does not match the zip directory", source=self.where_info(info))
        if zlib.crc32(buf) != info.CRC:
            raise LegacyFormatError(
                f"cannot read member: Bad CRC-32 for file {info.filename!r}", source=self.where_info(info)
            )
        return True

    def where_info(self, info: zipfile.ZipInfo) -> str:
        return f"{self.source}:{info.filename}"

    def text(self, rel: str) -> str:
        try:
            return self.read(rel).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LegacyFormatError("not UTF-8 text", source=self.where(rel), where=f"byte {exc.start}") from None

    def close(self) -> None:
        self.zip.close()


def _json(data: bytes, where: str) -> Any:
    """model.json parsed within the ``max_depth`` and ``max_int_digits`` budgets (:mod:`tracepack.io.guard`:
    past them, one line naming the byte), its text UTF-8 JSON."""
    import json

    import msgspec

    from tracepack.io.guard import parse_json

    def parse() -> Any:
        try:
            return msgspec.json.decode(data)
        except msgspec.DecodeError:
            pass
        return json.loads(data)  # what msgspec refuses that json accepts (numbers out of range, NaN)

    try:
        return parse_json(parse, data, where, LegacyFormatError)
    except UnicodeDecodeError:
        try:  # msgspec's offset is not the file's: find the first byte that is not UTF-8
            bytes(data).decode("utf-8")
            at = 0
        except UnicodeDecodeError as exc:
            at = exc.start
        raise LegacyFormatError("not UTF-8 text", source=where, where=f"byte {at}") from None
    except json.JSONDecodeError as exc:
        raise LegacyFormatError(f"not valid JSON: {exc}", source=where) from None


# -- symbolic expressions ---------------------------------------------------------------------------

#: sympy classes torch's printers (``str`` and ``srepr``) write as calls.
_SYMPY_CALLS = frozenset(
    [
        "Symbol",
        "Dummy",
        "Integer",
        "Rational",
        "Float",
        "Mul",
        "Add",
        "Pow",
        "Max",
        "Min",
        "Abs",
        "Mod",
        "Eq",
        "Ne",
        "Lt",
        "Le",
        "Gt",
        "Ge",
        "StrictLessThan",
        "LessThan",
        "StrictGreaterThan",
        "GreaterThan",
        "Equality",
        "Unequality",
        "And",
        "Or",
        "Not",
        "Xor",
        "Piecewise",
        "ExprCondPair",
        "ITE",
        "floor",
        "ceiling",
        "sqrt",
        "sign",
    ]
)
#: Names that stand alone.
_SYMPY_CONSTANTS = frozenset(
    [
        "oo",
        "zoo",
        "nan",
        "true",
        "false",
        "True",
        "False",
        "None",
        "pi",
        "E",
        "I",
        "Infinity",
        "NegativeInfinity",
        "NaN",
        "ComplexInfinity",
        "BooleanTrue",
        "BooleanFalse",
        "Zero",
        "One",
        "NegativeOne",
        "Half",
    ]
)
_SYMBOL = re.compile(r"[a-z]+[0-9]+\Z")
_KEYWORD = re.compile(r"[a-z_]+\Z")
_LITERAL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*|[-+]?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?)\Z")
_NUMBER = re.compile(r"[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?\Z")
_OPS = frozenset(
    [
        "+",
        "-",
        "*",
        "/",
        "**",
        "//",
        "%",
        "(",
        ")",
        ",",
        "<",
        ">",
        "<=",
        ">=",
        "==",
        "!=",
        "&",
        "|",
        "~",
        "^",
        ">>",
        "<<",
    ]
)
_SKIP = (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER)


def safe_sympy_text(text: str, known: Callable[[str], bool]) -> bool:
    """Whether ``text`` is only an expression over symbols, numbers and known sympy/torch functions.

    ``sympy.sympify`` evaluates its input with Python's ``eval``, and torch hands it every
    ``expr_str`` of a model.json. What passes: numbers; the operators above; calls of the
    functions torch registers and of sympy's expression classes (as ``str`` and ``srepr``
    write them: ``Symbol('s0', positive=True, integer=True)``, ``FloorDiv(s0, 2)``), with
    keyword arguments; string literals that are a name or a number; symbol-shaped names
    (``s0``, ``u12``) and sympy's constants. No attribute access, subscripts, other names.
    """
    if len(text) > 100_000:
        return False
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in _SKIP]
    except (tokenize.TokenError, SyntaxError):
        return False
    for i, tok in enumerate(tokens):
        kind, word = tok.type, tok.string
        after = tokens[i + 1].string if i + 1 < len(tokens) else ""
        before = tokens[i - 1].string if i else ""
        if kind == tokenize.NUMBER:
            if not _NUMBER.match(word):
                return False
        elif kind == tokenize.NAME:
            if after == "(":
                ok = known(word) or word in _SYMPY_CALLS
            elif after == "=":
                ok = _KEYWORD.match(word) is not None and before in ("(", ",")
            else:
                ok = known(word) or word in _SYMPY_CONSTANTS or _SYMBOL.match(word) is not None
            if not ok:
                return False
        elif kind == tokenize.OP:
            if word == "=":
                if i == 0 or tokens[i - 1].type != tokenize.NAME:
                    return False
            elif word not in _OPS:
                return False
        elif kind == tokenize.STRING:
            if word[:1] not in "'\"" or word[:3] in ("'''", '"""') or not _LITERAL.match(word[1:-1]):
                return False
        else:
            return False
    return True


class _CachedSympy:
    """Stands in for the ``sympy`` module inside torch's ``_parse_sym_expr``: ``sympify`` is checked
    (:func:`safe_sympy_text`) and memoized per expression string; everything else is sympy's own.

    A cached expression is reused only while every symbol in it is still, by identity, what the
    deserializer's symbol table maps its name to, so the result is what a fresh parse would give.
    """

    def __init__(self, sympy: Any, source: str) -> None:
        self._sympy = sympy
        self._source = source
        self._cache: dict[str, tuple[Any, tuple[tuple[str, Any], ...]]] = {}
        self.parsed = 0
        self.reused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sympy, name)

    def sympify(self, text: Any, locals: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        if type(text) is not str or kwargs:
            return self._sympy.sympify(text, locals=locals, **kwargs)
        names = locals or {}
        hit = self._cache.get(text)
        if hit is not None:
            expr, deps = hit
            if all(names.get(n) is sym for n, sym in deps):
                self.reused += 1
                return expr
        if not safe_sympy_text(text, names.__contains__):
            raise LegacyFormatError(
                f"refused symbolic expression {text[:60]!r}",
                source=self._source,
                expected="an arithmetic expression over symbols (sympy would run it with eval)",
            )
        expr = self._sympy.sympify(text, locals=locals)
        self.parsed += 1
        symbols = getattr(expr, "free_symbols", ())
        self._cache[text] = (expr, tuple((str(s.name), s) for s in symbols))
        return expr


# -- weights and constants ---------------------------------------------------------------------------


def _refuse(where: str, what: str) -> UnsafePickleError:
    return UnsafePickleError(
        f"{what}: loading it can run code from the file",
        source=where,
        expected="tensors only; pass trust_pickles=True to tracepack.torch.load only for files you trust",
    )


def _weights_only(z: _Zip, rel: str, *, trust: bool, what: str) -> Any:
    """A pickled tensor (or tuple of them) through torch's data-only unpickler; refused if it needs more."""
    torch = _torch()
    data = z.read(rel)
    try:
        return torch.load(io.BytesIO(data), weights_only=True)
    except Exception as exc:
        if not trust:
            raise _refuse(z.where(rel), f"reading {what} needs more than torch's weights_only unpickler") from exc
    return torch.load(io.BytesIO(data), weights_only=False)


#: The zip format versions (``.data/version``) torch's PyTorchStreamReader reads (caffe2's
#: kMinSupportedFileFormatVersion and kMaxSupportedFileFormatVersion, 1 and 10 from torch 1.x through 2.15).
_ZIP_VERSIONS = range(1, 11)
_SPACE = " \t\n\v\f\r"


def _stoull(text: str) -> int | None:
    """``std::stoull(text)`` as torch's C++ reader parses ``.data/version``: leading white space, a sign,
    base-10 digits, anything after them ignored, a negative value wrapped to 64 bits. None where it
    raises (no digits); an out-of-range value is returned as it is (the caller refuses it)."""
    rest = text.lstrip(_SPACE)
    sign = 1
    if rest[:1] in ("+", "-"):
        sign = -1 if rest[0] == "-" else 1
        rest = rest[1:]
    digits = len(rest) - len(rest.lstrip("0123456789"))
    if digits == 0:
        return None
    value = int(rest[:digits])
    return value if sign == 1 or value >= 2**64 else (-value) % 2**64


def _check_archive(z: _Zip, c: Any, model: str) -> None:
    """What ``torch.export.load`` checks before it reads a program, in its order: the zip format
    version torch's C++ reader accepts, ``archive_format``, ``archive_version``, the program's example
    inputs member. Each refusal is a :class:`~tracepack.errors.LegacyFormatError` that is also the
    exception torch raises there."""
    rel = ".data/version" if z.has(".data/version") else "version"
    if not z.has(rel):
        raise ArchiveRefused(
            "no such member (torch's reader needs the zip format version)", source=z.where(".data/version")
        )
    version = _stoull(z.text(rel))
    if version is None or version not in _ZIP_VERSIONS:
        raise ArchiveRefused(
            f"zip format version {z.text(rel)[:20]!r} is not one torch reads",
            source=z.where(rel),
            expected=f"{_ZIP_VERSIONS.start} to {_ZIP_VERSIONS.stop - 1}",
        )
    if not z.has(c.ARCHIVE_FORMAT_PATH):
        raise ArchiveRefused("no such member", source=z.where(c.ARCHIVE_FORMAT_PATH), expected="a torch.export .pt2")
    if z.text(c.ARCHIVE_FORMAT_PATH) != c.ARCHIVE_FORMAT_VALUE:
        raise ArchiveFormatError(
            "not a pt2 archive (torch: Invalid archive format)",
            source=z.where(c.ARCHIVE_FORMAT_PATH),
            expected=c.ARCHIVE_FORMAT_VALUE,
        )
    if not z.has(c.ARCHIVE_VERSION_PATH):
        raise ArchiveRefused("no such member", source=z.where(c.ARCHIVE_VERSION_PATH), expected="a torch.export .pt2")
    found = z.text(c.ARCHIVE_VERSION_PATH)
    if found != c.ARCHIVE_VERSION_VALUE:
        raise ArchiveMismatch(
            f"Saved archive version {found[:40]} does not match our current archive version {c.ARCHIVE_VERSION_VALUE}.",
            source=z.where(c.ARCHIVE_VERSION_PATH),
        )
    inputs = c.SAMPLE_INPUTS_FILENAME_FORMAT.format(model)
    if not z.has(inputs):
        raise ArchiveRefused("no such member (torch reads every program's example inputs)", source=z.where(inputs))


def _payload_config(z: _Zip, rel: str) -> Any:
    return converters().convert("PayloadConfig", _json(z.read(rel), z.where(rel)), source=z.where(rel))


class _Records:
    """What reading a payload config's records looks up, once per load: each dtype code's dtype and
    item size, each device (torch's ``deserialize_device`` makes a new ``torch.device`` per record)."""

    def __init__(self, serde: Any) -> None:
        self.serde = serde
        self.torch = _torch()
        self.cpu = self.torch.device("cpu")
        self.dtypes: dict[Any, tuple[Any, int]] = {}
        self.devices: dict[tuple[Any, Any], Any] = {}

    def dtype(self, code: Any) -> tuple[Any, int]:
        found = self.dtypes.get(code)
        if found is None:
            dtype = self.serde.deserialize_scalar_type(code)
            found = self.dtypes[code] = (dtype, self.torch.empty((), dtype=dtype).element_size())
        return found

    def device(self, d: Any) -> Any:
        dd = d.__dict__
        key = (dd.get("type"), dd.get("index"))
        found = self.devices.get(key)
        if found is None:
            found = self.devices[key] = self.serde.deserialize_device(d)
        return found

    def ints(self, values: Any, torchs: Callable[[Any], Any]) -> tuple[int, ...]:
        """``deserialize_size``/``deserialize_stride``: the ``as_int`` of each (torch's function says
        what is wrong with anything else)."""
        out = tuple(v.__dict__.get("as_int") for v in values)
        if None in out or not all(type(x) is int for x in out):
            return tuple(torchs(values))
        return out


def _raw_tensors(z: _Zip, base: str, config: Any, serde: Any, records: _Records) -> dict[str, Any]:
    """``path_name -> flat tensor`` for the raw (not pickled) records, each read once (aliases share it)."""
    torch = records.torch
    out: dict[str, Any] = {}
    for meta in config.config.values():
        if meta.use_pickle or meta.path_name in out:
            continue
        rel = base + meta.path_name
        tm = meta.tensor_meta
        if tm is None:
            raise LegacyFormatError("a raw record without tensor_meta", source=z.where(rel))
        dtype, itemsize = records.dtype(tm.dtype)
        device = records.device(tm.device)
        if not z.has(rel):
            raise LegacyFormatError("no such member", source=z.where(rel))
        if z.size(rel) == 0:
            tensor = torch.zeros(records.ints(tm.sizes, serde.deserialize_size), dtype=dtype, device=device)
        else:
            buf = z.read_into(rel)
            if len(buf) % itemsize:
                raise LegacyFormatError(
                    f"{len(buf)} bytes is not a whole number of {dtype} elements", source=z.where(rel)
                )
            tensor = torch.frombuffer(buf, dtype=dtype) if buf else torch.empty(0, dtype=dtype)
            if device != records.cpu:
                tensor = tensor.to(device)
        if tm.requires_grad:
            tensor.requires_grad_(True)
        out[meta.path_name] = tensor
    return out


def _strided(flat: Any, tm: Any, serde: Any, where: str, records: _Records) -> Any:
    torch = records.torch
    try:
        return torch.as_strided(
            flat,
            size=records.ints(tm.sizes, serde.deserialize_size),
            stride=records.ints(tm.strides, serde.deserialize_stride),
            storage_offset=serde.deserialize_storage_offset(tm.storage_offset),
        )
    except RuntimeError as exc:
        raise LegacyFormatError(f"tensor does not fit its record: {exc}".splitlines()[0], source=where) from None


def _config_member(z: _Zip, c: Any, name: str, model: str) -> str:
    """The payload config member of ``model`` (torch 2.10 on); an older torch has no reader for it."""
    form = getattr(c, name, None)
    if form is None:
        raise VersionError(
            f"weights stored with payload configs (torch 2.10 and newer): torch {_torch().__version__} cannot "
            "load them (its torch.export.load cannot either); install a newer torch",
            source=z.where(f"data/weights/{model}_weights_config.json"),
        )
    return str(form.format(model))


def _state_dict(z: _Zip, model: str, serde: Any, c: Any, *, trust: bool) -> Any:
    legacy = f"{c.WEIGHTS_DIR}{model}.pt"
    if z.has(legacy):  # torch 2.8/2.9: one pickle, unpickled inside the deserializer (fake tensors need it)
        return z.read(legacy)
    rel = _config_member(z, c, "WEIGHTS_CONFIG_FILENAME_FORMAT", model)
    if not z.has(rel):
        raise MemberMissing("no weights config", source=z.where(rel), expected="a torch.export .pt2")
    config = _payload_config(z, rel)
    records = _Records(serde)
    flat = _raw_tensors(z, c.WEIGHTS_DIR, config, serde, records)
    torch = _torch()
    out: dict[str, Any] = {}
    for fqn, meta in config.config.items():
        member = c.WEIGHTS_DIR + meta.path_name
        if meta.use_pickle:
            out[fqn] = _weights_only(z, member, trust=trust, what=f"weight {fqn!r} stored as a pickle")
            continue
        tensor = _strided(flat[meta.path_name], meta.tensor_meta, serde, z.where(member), records)
        if meta.is_param:
            out[fqn] = torch.nn.Parameter(tensor, requires_grad=meta.tensor_meta.requires_grad)
        else:
            out[fqn] = tensor
    return out


def _constants(z: _Zip, model: str, serde: Any, c: Any, *, trust: bool) -> Any:
    legacy = f"{c.CONSTANTS_DIR}{model}.pt"
    if z.has(legacy):  # as the weights
        return z.read(legacy)
    rel = _config_member(z, c, "CONSTANTS_CONFIG_FILENAME_FORMAT", model)
    if not z.has(rel):
        raise MemberMissing("no constants config", source=z.where(rel), expected="a torch.export .pt2")
    config = _payload_config(z, rel)
    records = _Records(serde)
    flat = _raw_tensors(z, c.CONSTANTS_DIR, config, serde, records)
    torch = _torch()
    out: dict[str, Any] = {}
    for fqn, meta in config.config.items():
        path = meta.path_name
        member = c.CONSTANTS_DIR + path
        if path.startswith(c.TENSOR_CONSTANT_FILENAME_PREFIX):
            if meta.use_pickle:
                out[fqn] = _weights_only(z, member, trust=trust, what=f"constant {fqn!r} stored as a pickle")
            else:
                out[fqn] = _strided(flat[path], meta.tensor_meta, serde, z.where(member), records)
        elif path.startswith(c.CUSTOM_OBJ_FILENAME_PREFIX):
            if not trust:
                raise _refuse(z.where(member), f"constant {fqn!r} is a torchbind object")
            out[fqn] = torch._C._pickle_load_obj(z.read(member))
        elif path.startswith(getattr(c, "OPAQUE_OBJ_FILENAME_PREFIX", "opaque_obj_")):  # torch 2.13 on names it
            if not trust:
                raise _refuse(z.where(member), f"constant {fqn!r} is an opaque object (a plain pickle)")
            import pickle

            out[fqn] = pickle.loads(z.read(member))
        else:
            raise LegacyFormatError(f"unsupported constant record {path!r}", source=z.where(member))
    return out


# -- programs ----------------------------------------------------------------------------------------


def load_program_dict(program: Any, source: str) -> Any:
    """A parsed model.json as torch's ``schema.ExportedProgram``, after the version check."""
    torch_serde = importlib.import_module("torch._export.serde.schema")
    major = torch_serde.SCHEMA_VERSION[0]
    version = program.get("schema_version") if type(program) is dict else None
    if type(version) is dict and type(version.get("major")) is int:
        file_major = version["major"]
        if file_major != major and not (file_major == 0 and version.get("minor") == 0):
            relation = "newer" if file_major > major else "older"
            raise SchemaMismatch.of(f"{file_major}.{version.get('minor')}", relation, major, source)
    from tracepack.io.guard import run

    # as deep as the parse allowed (the max_depth budget): a walk that runs out of room retries with it
    return run(lambda: converters().convert("ExportedProgram", program, source=source), source, LegacyFormatError)


def _program(z: _Zip, model: str, *, older: bool = False) -> Any:
    from tracepack.torch import pt2

    rel = f"models/{model}.json"
    program = _json(z.read(rel), z.where(rel))
    if older:
        from tracepack.torch.export.schema_versions import schema_version_of
        from tracepack.torch.upgrade import installed_schema

        version = schema_version_of(program)
        if version is not None and version < installed_schema():
            raise OlderArchive
    tpk = f"{pt2.MEMBER_DIR}{model}.tpk"
    if z.has(tpk):
        import tracepack
        from tracepack.io.guard import run

        doc = tracepack.loads(z.read(tpk), source=z.where(tpk))
        program = run(
            lambda: pt2.merge_into(program, doc, source=z.where(rel), member=z.where(tpk)),
            z.where(rel),
            LegacyFormatError,
        )
    return program


def deserialize(serialized: Any, state_dict: Any, constants: Any, example_inputs: Any, *, source: str,
                expected_opset_version: dict[str, int] | None = None, trust_pickles: bool = False,
                inputs_source: str = "<example inputs>", sources: dict[str, str] | None = None) -> Any:  # fmt: skip
    """torch's ``ExportedProgramDeserializer().deserialize`` with the checked, cached sympy parse and the
    shorter roads of :mod:`tracepack.torch.deserializer`. ``example_inputs`` given as bytes (the
    archive's member) are unpickled inside the deserializer, as torch does, by :func:`unpickle_artifact`;
    so are ``state_dict`` and ``constants`` given as bytes (the flat layout's pickled members, whose
    tensors may be fake: torch 2.6-2.9 pickle them with ``_reconstruct_fake_tensor`` too).
    ``sources``: the member each of them was read from (``state_dict``, ``constants``), for errors."""
    from tracepack.torch.deserializer import patched

    serde = importlib.import_module("torch._export.serde.serialize")
    rebound = patched(serde)
    rebound.state.sympy = _CachedSympy(serde.sympy, source)
    at = sources or {}
    # torch's deserializer hands each member's bytes back as it got them: by identity, which member it is
    members = {
        id(example_inputs): ("example inputs", inputs_source),
        id(constants): ("the constants", at.get("constants", source)),
        id(state_dict): ("the weights", at.get("state_dict", source)),
    }

    def unpickle(data: Any) -> Any:
        what, where = members.get(id(data), ("example inputs", inputs_source))
        return unpickle_artifact(bytes(data), trust=trust_pickles, source=where, what=what)

    rebound.state.artifact = unpickle
    if not rebound.inputs_inside:  # this torch unpickles them itself (weights_only=False): never hand it bytes
        if isinstance(example_inputs, (bytes, bytearray)) and example_inputs:
            example_inputs = unpickle(example_inputs)
        if isinstance(state_dict, (bytes, bytearray)):
            state_dict = unpickle(state_dict) if state_dict else {}
        if isinstance(constants, (bytes, bytearray)):
            constants = unpickle(constants) if constants else {}
    try:
        return rebound.deserialize(serde.ExportedProgramDeserializer(expected_opset_version), serialized, state_dict,
                                   constants, example_inputs)  # fmt: skip
    except InputError:
        raise
    except MemoryError:
        raise
    except Exception as exc:  # torch's own errors on what the file holds: one line naming the place
        raise _torch_error(exc, serialized, source) from None
    finally:
        rebound.state.sympy = None
        rebound.state.artifact = None


def unpickle_artifact(data: bytes, *, trust: bool, source: str, what: str = "example inputs") -> Any:
    """A program's pickled example inputs (or, on the flat layout, its weights or constants: ``what``),
    unpickled while torch's deserializer is current.

    torch's data-only unpickler (``weights_only=True``), which also accepts torch's own
    ``_reconstruct_fake_tensor``: example inputs that are fake tensors (non-strict export with a fake
    mode) are stored as that call on a JSON tensor description, which the current deserializer makes
    into a fake tensor in its fake mode (symbolic expressions checked like every other). Anything
    else that unpickler refuses needs ``trust``, then loads as torch loads it (``weights_only=False``).
    """
    torch = _torch()
    serde = importlib.import_module("torch._export.serde.serialize")
    allowed = [f for f in (getattr(serde, "_reconstruct_fake_tensor", None),) if f is not None]
    safe_globals = getattr(torch.serialization, "safe_globals", None)
    try:
        if safe_globals is None or not allowed:
            return torch.load(io.BytesIO(data), weights_only=True)
        with safe_globals(allowed):
            return torch.load(io.BytesIO(data), weights_only=True)
    except Exception as exc:
        if not trust:
            raise _refuse(source, f"reading {what} needs more than torch's weights_only unpickler") from exc
    return torch.load(io.BytesIO(data), weights_only=False)


#: Where torch's deserializer (or the verifier ExportedProgram runs) was, by its function names,
#: when no part of the program it was reading is known (see :func:`_places`).
_PLACES = {
    "deserialize_signature": "$.graph_module.signature",
    "deserialize_input_spec": "$.graph_module.signature.input_specs",
    "deserialize_output_spec": "$.graph_module.signature.output_specs",
    "deserialize_range_constraints": "$.range_constraints",
    "deserialize_module_call_graph": "$.graph_module.module_call_graph",
    "deserialize_module_call_signature": "$.graph_module.module_call_graph",
    "_verify_exported_program_signature": "$.graph_module.signature",
}


def _torch_error(exc: BaseException, serialized: Any, source: str) -> LegacyFormatError:
    """torch's error on a program (``SerializeError`` for a node whose target is not an operator, a
    RuntimeError for sizes that do not fit, ...) as a LegacyFormatError naming the JSON path of what
    it was reading when it failed, and what torch said, in one line.

    The place is found by identity, not by torch's variable names: the innermost frame of the
    traceback whose arguments (or a ``serialized_node`` it is looping over) are a part of the
    program :func:`_places` knows (a node of any graph, nested ones too, a tensor or symbolic value,
    an input or output spec, a range constraint, a module call entry, a graph) names it; failing
    that, the function it was in (:data:`_PLACES`); failing that, ``$``. Whatever builds the program
    (torch's code, or a faster road through it) is named the same way."""
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    places = _places(serialized)
    frames = _innermost_first(chain)
    functions = {frame.f_code.co_name for frame in frames}
    root = chain[-1]
    where, node = "$", None
    for frame in frames:
        hit = _frame_place(frame, places)
        if hit is not None:
            where, node = hit
            break
        if frame.f_code.co_name in _PLACES:
            where = _PLACES[frame.f_code.co_name]
            break
    if node is not None and ("deserialize_operator" in functions or "to an operator" in str(root)):
        where += ".target"
    text = str(root).strip().splitlines()[0] if str(root).strip() else ""
    kind = f"{type(root).__name__}: {text[:200]}"
    if isinstance(root, RecursionError):
        deep = _deep_metadata(node) if node is not None else None
        if deep is not None:  # JSON text in the metadata (from_node) that torch parses
            key, depth = deep
            where += f".metadata.{key}"
            from tracepack.io import limits

            budget = limits.current().max_depth
            if depth > budget:
                return LegacyFormatError(
                    f"nested more than {budget:,} levels deep (hostile or damaged input?)",
                    source=source,
                    where=where,
                    expected=f"shallower nesting, {limits.hint('max_depth')}",
                )
        kind = "nested deeper than torch's deserializer reads" + (f" ({deep[1]:,} levels)" if deep else "")
    return LegacyFormatError(
        f"torch cannot load the program: {kind}",
        source=source,
        where=where,
        expected="a program torch's deserializer accepts",
    )


def _deep_metadata(node: Any) -> tuple[str, int] | None:
    """The node's metadata value nested deepest as JSON text, and its depth (None: none nests)."""
    from tracepack.io.guard import scan_json

    meta = getattr(node, "metadata", None)
    depths = [(k, scan_json(v).depth) for k, v in (meta.items() if isinstance(meta, dict) else ()) if type(v) is str]
    deepest = max(depths, key=lambda kv: kv[1], default=None)
    return deepest if deepest is not None and deepest[1] > 0 else None


def _innermost_first(chain: list[BaseException]) -> list[Any]:
    """The frames of an exception chain (outermost exception first), in reverse: the innermost frame
    of the innermost cause first, the frame that caught the outermost one last."""
    import traceback

    return [frame for link in chain for frame, _ in traceback.walk_tb(link.__traceback__)][::-1]


def _frame_place(frame: Any, places: dict[int, tuple[str, bool]]) -> tuple[str, Any] | None:
    """The JSON path of the part of the program ``frame`` was reading (its ``serialized_node``, then
    its arguments), and that part if it is a node; None: none of them is one."""
    code = frame.f_code
    local = frame.f_locals
    names = ["serialized_node", *code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]]
    for name in names:
        value = local.get(name)
        found = places.get(id(value)) if value is not None else None
        if found is not None:
            path, is_node = found
            return path, value if is_node else None
    return None


def _places(serialized: Any) -> dict[int, tuple[str, bool]]:
    """``id(part) -> (JSON path, is a node)`` for the parts of torch's ``schema.ExportedProgram`` its
    deserializer reads one at a time: every graph (nested ones in ``as_graph`` arguments too) with
    its nodes and named values, the signature's specs, the range constraints and module call graph
    entries. Walked without recursion (nested graphs are as deep as the file's budget allowed)."""
    import json

    out: dict[int, tuple[str, bool]] = {}
    gm = getattr(serialized, "graph_module", None)
    signature = getattr(gm, "signature", None)
    for table in ("input_specs", "output_specs"):
        for i, spec in enumerate(getattr(signature, table, None) or ()):
            out.setdefault(id(spec), (f"$.graph_module.signature.{table}[{i}]", False))
    for i, entry in enumerate(getattr(gm, "module_call_graph", None) or ()):
        out.setdefault(id(entry), (f"$.graph_module.module_call_graph[{i}]", False))
        call = getattr(entry, "signature", None)
        if call is not None:
            out.setdefault(id(call), (f"$.graph_module.module_call_graph[{i}].signature", False))
    constraints = getattr(serialized, "range_constraints", None)
    for key, value in constraints.items() if isinstance(constraints, dict) else ():
        out.setdefault(id(value), (f"$.range_constraints[{json.dumps(key)}]", False))
    todo = [(getattr(gm, "graph", None), "$.graph_module.graph")]
    while todo:
        graph, path = todo.pop()
        if graph is None or id(graph) in out:
            continue
        out[id(graph)] = (path, False)
        for table in ("tensor_values", "sym_int_values", "sym_float_values", "sym_bool_values", "custom_obj_values"):
            values = getattr(graph, table, None)
            for key, value in values.items() if isinstance(values, dict) else ():
                out.setdefault(id(value), (f"{path}.{table}[{json.dumps(key)}]", False))
        for i, node in enumerate(getattr(graph, "nodes", None) or ()):
            out.setdefault(id(node), (f"{path}.nodes[{i}]", True))
            for j, named in enumerate(getattr(node, "inputs", None) or ()):
                sub = getattr(getattr(named, "arg", None), "as_graph", None)
                todo.append((getattr(sub, "graph", None), f"{path}.nodes[{i}].inputs[{j}].arg.as_graph.graph"))
    return out


def load_pt2(
    f: str | os.PathLike[str] | IO[bytes],
    *,
    extra_files: dict[str, Any] | None = None,
    expected_opset_version: dict[str, int] | None = None,
    trust_pickles: bool = False,
    model: str = "model",
    older: bool = False,
) -> Any:
    """See :func:`tracepack.torch.load`. ``older``: raise :class:`OlderArchive` for an archive the upgrade
    reads instead (decided from what this load reads anyway: the zip directory and the program)."""
    _torch()  # first: without torch, say which extra installs it
    serde = importlib.import_module("torch._export.serde.serialize")
    source = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", "<stream>")
    try:
        c = importlib.import_module("torch.export.pt2_archive.constants")
    except ImportError:  # torch 2.6/2.7: only the flat archive, which tracepack.torch.load reads elsewhere
        c = None
    if isinstance(f, (str, os.PathLike)):
        from tracepack.io.files import check_regular

        check_regular(f, source=str(source))  # a FIFO, device or folder: refused before anything blocks
    try:
        z = _Zip(f, str(source))
    except LegacyFormatError:
        if older:
            raise OlderArchive from None  # perhaps a flat archive; the upgrade decides (and says what is wrong)
        raise
    if c is None:  # what is wrong with the file first: not a zip, not a program, or a newer torch's layout
        z.close()
        if any(_MODEL.fullmatch(rel) for rel in z.infos):
            raise VersionError(
                f"a .pt2 in the layout torch 2.8 and newer write (<name>/models/...): torch "
                f"{_torch().__version__} cannot load it (its torch.export.load cannot either); "
                "install torch 2.8 or newer",
                source=str(source),
            )
        raise LegacyFormatError(
            "no program", source=str(source), expected="a torch.export .pt2 (serialized_exported_program.json)"
        )
    # Loading makes hundreds of thousands of small objects and no garbage cycles worth collecting
    # midway: the cyclic collector's full passes over them cost up to a third of the time.
    collecting = gc.isenabled()
    gc.disable()
    try:
        models = sorted(m.group(1) for rel in z.infos if (m := _MODEL.fullmatch(rel)))
        if model not in models:
            held = f" (it holds {', '.join(repr(m) for m in models)}: pass model= to choose one)" if models else ""
            raise LegacyFormatError(
                f"no program named {model!r}{held}",
                source=z.where(f"models/{model}.json"),
                expected=f"a torch.export .pt2 (models/{model}.json)",
            )
        _check_archive(z, c, model)
        rel = f"models/{model}.json"
        # the parsed JSON is freed as soon as it is converted (it is as large as the dataclasses)
        serialized = load_program_dict(_program(z, model, older=older), z.where(rel))
        state_dict = _state_dict(z, model, serde, c, trust=trust_pickles)
        constants = _constants(z, model, serde, c, trust=trust_pickles)
        inputs_rel = c.SAMPLE_INPUTS_FILENAME_FORMAT.format(model)
        # Unpickled by the deserializer, as torch does: fake tensors in them are made in its fake mode.
        example_inputs = z.read(inputs_rel)
        if extra_files is not None:
            for rel_name in z.infos:
                if rel_name.startswith(c.EXTRA_DIR):
                    extra_files[rel_name[len(c.EXTRA_DIR) :]] = z.text(rel_name)
        program = deserialize(
            serialized,
            state_dict,
            constants,
            example_inputs,
            source=z.where(rel),
            expected_opset_version=expected_opset_version,
            trust_pickles=trust_pickles,
            inputs_source=z.where(inputs_rel),
            sources={
                "state_dict": z.where(f"{c.WEIGHTS_DIR}{model}.pt"),
                "constants": z.where(f"{c.CONSTANTS_DIR}{model}.pt"),
            },
        )
        # The decoded program goes before the collector is back: its first pass would walk it all.
        del serialized, state_dict, constants, example_inputs
        return program
    finally:
        if collecting:
            gc.enable()
        z.close()
