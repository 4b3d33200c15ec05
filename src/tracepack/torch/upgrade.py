"""Load a ``.pt2`` any torch release wrote in today's torch, and write it anew (needs torch).

``torch.export.load`` in torch 2.13 refuses programs of another schema major (torch 2.1-2.5)
and cannot read the flat archives of torch 2.1-2.7 once their schema is old. Here:

1. the program is read from either archive layout (:mod:`tracepack.torch.export.layouts`; a
   ``tracepack pack``ed archive has its metadata merged back);
2. it is upgraded to the installed torch's schema by tracepack's migration chain
   (:func:`tracepack.torch.export.upgrade.upgrade_program`; no torch involved);
3. every operator it calls must exist in the installed torch: the first missing one is named
   in a one-line :class:`~tracepack.errors.VersionError`;
4. the weights, constants and example inputs are read with ``torch.load(weights_only=True)``
   (never a full unpickle: a file that needs one is refused, naming the member);
5. torch's own deserializer builds the ``ExportedProgram``.

:func:`load_upgraded` returns it; :func:`upgrade_file` (``tracepack upgrade OLD NEW``) saves it
with ``torch.export.save``, a file today's torch loads with ``torch.export.load``.
"""

from __future__ import annotations

import importlib
import io
import json
import os
from typing import IO, Any

import msgspec

from tracepack.errors import LegacyFormatError, UnsafePickleError, VersionError
from tracepack.io.files import read_input
from tracepack.io.zip import Archive, open_archive, open_archive_file
from tracepack.torch.export import layouts
from tracepack.torch.export.schema_versions import SchemaVersion, schema_version_of
from tracepack.torch.export.upgrade import upgrade_program

__all__ = [
    "installed_schema",
    "load_if_old",
    "load_upgraded",
    "missing_operator",
    "needs_upgrade",
    "upgrade_file",
    "upgrade_pt2",
]


def _torch() -> Any:
    return importlib.import_module("torch")


def installed_schema() -> SchemaVersion:
    """The schema version the installed torch reads and writes."""
    major, minor = importlib.import_module("torch._export.serde.schema").SCHEMA_VERSION
    return SchemaVersion(int(major), int(minor))


def needs_upgrade(data: bytes, *, source: str) -> bool:
    """Whether the ``.pt2`` ``data`` must go through the upgrade (a flat archive, or an older major)."""
    with open_archive(data, source=source) as archive:
        return _archive_needs_upgrade(archive)


def _archive_needs_upgrade(archive: Archive) -> bool:
    """:func:`needs_upgrade` of an open archive: reads the program member only, never the weights."""
    from tracepack.torch import pt2

    layout = layouts.layout_of(archive)
    if layout is None:
        return False
    if layout == "flat":
        return True
    # The program member as stored: a packed one keeps schema_version (only debug strings move out),
    # so nothing is merged back to decide.
    programs = pt2._check_pt2(archive)
    member = next((name for name, model in programs if model == "model"), programs[0][0])
    version = _version_of(archive.read(member, limit=pt2.MAX_PROGRAM_BYTES))
    return version is not None and version < installed_schema()


class _Head(msgspec.Struct):
    schema_version: Any = None


def _version_of(raw: bytes) -> SchemaVersion | None:
    """The program's ``schema_version``, read without building the rest of it (msgspec skips the
    other members of the top object), or ``None``."""
    try:
        return schema_version_of({"schema_version": msgspec.json.decode(raw, type=_Head).schema_version})
    except msgspec.DecodeError:  # not an object, or what msgspec refuses (json may still read it)
        pass
    try:
        return schema_version_of(json.loads(raw))
    except (ValueError, RecursionError):
        return None


def _resolve(target: str) -> Any:
    """The torch callable a serialized target names, or None."""
    torch = _torch()
    if target.startswith("torch.ops."):
        obj: Any = torch.ops
        for part in target.split(".")[2:]:
            try:
                obj = getattr(obj, part)
            except (AttributeError, RuntimeError):
                return None
        return obj
    module, _, name = target.rpartition(".")
    if module in ("_operator", "operator", "math", "builtins", "torch", "torch.sym_float"):
        try:
            return getattr(importlib.import_module(module), name, None)
        except ImportError:
            return None
    return None if not module else True  # other callables: torch's deserializer decides


def missing_operator(program: Any) -> tuple[str, str] | None:
    """``(node, target)`` of the first node whose operator the installed torch does not have."""
    todo = [program["graph_module"]["graph"]]
    while todo:
        graph = todo.pop(0)
        for node in graph.get("nodes") or []:
            target = node.get("target")
            if type(target) is str and _resolve(target) is None:
                return str(node.get("name", "?")), target
            for inp in node.get("inputs") or []:
                arg = inp.get("arg")
                if type(arg) is dict and type(arg.get("as_graph")) is dict:
                    todo.append(arg["as_graph"]["graph"])
    return None


def _weights_only(archive: Archive, names: tuple[str, ...], what: str) -> Any:
    """The first of ``names`` in the archive, read with ``torch.load(weights_only=True)``."""
    torch = _torch()
    for name in names:
        if name in archive.names():
            data = archive.read(name)
            if not data:
                return {}
            try:
                return torch.load(io.BytesIO(data), weights_only=True)
            except Exception as exc:  # torch raises UnpicklingError/RuntimeError with long texts
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise UnsafePickleError(
                    f"{what} cannot be read with torch.load(weights_only=True): {first}",
                    source=f"{archive.source}:{name}",
                ) from None
    return None


def load_upgraded(data: bytes, *, source: str) -> Any:
    """The ExportedProgram of the ``.pt2`` ``data`` (any release's), in the installed torch."""
    from tracepack.torch import pt2

    with open_archive(data, source=source) as archive:
        layout = layouts.layout_of(archive)
        if layout is None:
            raise LegacyFormatError("not a torch.export archive", source=source, expected="a .pt2")
        member, raw = pt2.read_program(archive)
        where = f"{source}:{member}"
        try:
            program = json.loads(raw)
        except ValueError as exc:
            raise LegacyFormatError(f"not JSON: {exc}", source=where) from None
        if layout == "package":
            return _load_package(data, program, source=source, where=where)
        state_dict = _weights_only(archive, layouts.FLAT_STATE_DICT, "the weights")
        constants = _weights_only(archive, ("serialized_constants.pt", "serialized_constants.json"), "the constants")
        example_inputs = _weights_only(archive, (layouts.FLAT_EXAMPLE_INPUTS,), "the example inputs")
    return _deserialize(program, state_dict or {}, constants or {}, example_inputs, where=where)


def load_if_old(f: str | os.PathLike[str] | IO[bytes]) -> Any:
    """The upgraded program when ``f`` needs the upgrade (:func:`needs_upgrade`), else ``None``
    (a seekable stream is left where it was).

    A path is opened as an archive in place: only its program member is read to decide, so a
    current ``.pt2`` of any size costs no copy, and a FIFO or device is refused, never waited on.
    """
    if isinstance(f, (str, os.PathLike)):
        name = os.fspath(f)
        try:
            archive = open_archive_file(name)  # a FIFO, device or missing file: one line naming it
        except LegacyFormatError:
            return None  # not an archive: the loader says so in its words
        with archive:
            try:
                if not _archive_needs_upgrade(archive):
                    return None
            except LegacyFormatError:
                return None
        return load_upgraded(read_input(name), source=name)
    if not f.seekable():
        return None
    name = str(getattr(f, "name", "<stream>"))
    start = f.tell()
    data = f.read()
    f.seek(start)
    try:
        old = needs_upgrade(data, source=name)
    except LegacyFormatError:
        return None  # not an archive: the loader says so in its words
    return load_upgraded(data, source=name) if old else None


def _load_package(data: bytes, program: Any, *, source: str, where: str) -> Any:
    """A ``<top>/models/`` archive (torch 2.6+, schema 8.x): the program upgraded to the installed
    torch's minor in place, the weights read by tracepack's loader."""
    from tracepack.torch import pt2
    from tracepack.torch.loader import load_pt2

    upgraded = _upgraded(program, where=where)
    with open_archive(data, source=source) as archive:
        rebuilt = pt2.replace_program(archive, json.dumps(upgraded).encode())
    return load_pt2(io.BytesIO(rebuilt))


def _upgraded(program: Any, *, where: str) -> Any:
    """``program`` in the installed torch's schema, every operator it calls present."""
    upgraded = upgrade_program(program, source=where, target=installed_schema())
    missing = missing_operator(upgraded)
    if missing is not None:
        node, op = missing
        raise VersionError(f"operator {op} (node {node}) does not exist in torch {_torch().__version__}", source=where)
    return upgraded


#: Fields the upgrade chain fills in that an older torch of the same major derives itself: dropped
#: (whatever their value) where the installed torch's schema has no such field.
_DERIVED = {("Node", "name"), ("ExportedProgram", "torch_version")}


def _fitted(program: Any, *, where: str) -> Any:
    """``program`` without the fields the installed torch's schema lacks (torch 2.6/2.7 have fewer
    than the 8.x layout the upgrade chain writes): dropped when they hold their empty default or
    are derived (:data:`_DERIVED`); any other value is a :class:`VersionError` naming its place."""
    from tracepack.codegen.torch_schema import parse_type
    from tracepack.torch.serde import converters

    types = converters().types
    stack: list[tuple[Any, Any, str]] = [("ExportedProgram", program, "$")]
    while stack:
        t, v, path = stack.pop()
        if v is None:
            continue
        if isinstance(t, tuple):
            kind, inner = t
            if kind == "optional":
                stack.append((inner, v, path))
            elif kind == "list" and type(v) is list:
                stack += [(inner, e, f"{path}[{i}]") for i, e in enumerate(v)]
            elif kind == "dict" and type(v) is dict:
                stack += [(inner, e, f"{path}.{k}") for k, e in v.items()]
            continue
        if t not in types or type(v) is not dict:
            continue
        kind, fields = types[t]
        known = {f: ft for f, ft, _ in fields}
        if kind == "union":
            stack += [(parse_type(known[k]), e, f"{path}.{k}") for k, e in v.items() if k in known]
            continue
        if kind != "struct":
            continue
        for k in [k for k in v if k not in known]:
            value = v[k]
            if (t, k) in _DERIVED or value is None or value is False or value in ([], {}, ""):
                del v[k]
                continue
            raise VersionError(
                f"{t}.{k} is not in torch {_torch().__version__}'s export schema "
                f"{installed_schema()}: a newer torch is needed to load this program",
                source=where,
                where=f"{path}.{k}",
            )
        stack += [(parse_type(known[k]), e, f"{path}.{k}") for k, e in v.items()]
    return program


def _deserialize(program: Any, state_dict: Any, constants: Any, example_inputs: Any, *, where: str) -> Any:
    target = installed_schema()
    if schema_version_of(program) == target:
        upgraded = program  # a flat archive of the installed torch's own schema (torch 2.6/2.7): as torch reads it
    else:
        upgraded = upgrade_program(program, source=where, target=target)
    missing = missing_operator(upgraded)
    if missing is not None:
        node, op = missing
        raise VersionError(f"operator {op} (node {node}) does not exist in torch {_torch().__version__}", source=where)
    from tracepack.torch.serde import converters

    # The converters generated from the installed torch's schema (torch's reflective one is ~10x slower).
    serialized = converters().convert("ExportedProgram", _fitted(upgraded, where=where), source=where)
    if isinstance(example_inputs, dict) or example_inputs is None:
        example_inputs = None
    from tracepack.torch.loader import deserialize

    # torch's deserializer, with the expression check before sympy (which would eval every expr_str).
    return deserialize(serialized, state_dict, constants, example_inputs, source=where)


def upgrade_pt2(data: bytes, *, source: str) -> bytes:
    """The ``.pt2`` ``data`` (any torch release's) rewritten with ``torch.export.save`` by the
    installed torch: a file its ``torch.export.load`` reads."""
    program = load_upgraded(data, source=source)
    buffer = io.BytesIO()
    _torch().export.save(program, buffer)
    return buffer.getvalue()


def upgrade_file(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """:func:`upgrade_pt2` from file ``src`` to file ``dst`` (written atomically)."""
    from tracepack.container import atomic_write

    name = os.fspath(src)
    atomic_write(os.fspath(dst), upgrade_pt2(read_input(name), source=name))
