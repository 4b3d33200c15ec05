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

:func:`load_upgraded` returns it.

``tracepack upgrade OLD NEW`` (:func:`upgrade_file`, :func:`upgrade_pt2`) writes a file today's
torch loads with ``torch.export.load``. Archives of both layouts are **streamed**: only the
program members are rewritten (steps 1-3), every weight, constant and sample-input member is
copied raw (by the kernel where it can), so memory follows the graph, not the weights.
torch 2.8 kept a program's weights (and constants) as one ``torch.save`` archive,
``data/weights/<model>.pt``, which torch 2.9+ still reads, but only whole into memory, with a
warning ("You are loading weight from the legacy format") and, if ``weights_only`` fails, by a
full unpickle. The upgrade rewrites it as torch 2.9+'s ``torch.export.save`` does: one
``weight_<n>`` member per storage (the storage's bytes, copied raw from inside the nested archive)
and ``<model>_weights_config.json`` (dtype, sizes, strides, offset of each tensor), read from the
nested ``data.pkl`` by torch's ``weights_only`` unpickler with every storage on the ``meta``
device (no tensor data is read). A flat archive (torch 2.1-2.7) becomes the ``<top>/models/``
archive ``torch.export.save`` of its upgraded program writes: its ``serialized_state_dict.pt``
and ``serialized_constants.pt`` (nested ``torch.save`` archives too) rewritten the same way, its
example inputs copied raw as the sample inputs (checked by the same unpickler first: torch's
loader would fall back to a full unpickle), ``extra_files/`` as ``extra/``, and the archive's
version members (:func:`_write_flat`). ``through_torch=True`` loads the program (steps 1-5) and
saves it with ``torch.export.save`` instead, holding the weights in memory.

Pickled payloads torch 2.9+'s configs name (``use_pickle`` weights and tensor constants,
torchbind ``custom_obj_<n>`` and opaque ``opaque_obj_<n>`` constants), which ``torch.export.load``
unpickles in full, are checked before they are copied (:func:`_check_pickled_payloads`): a plain
tensor that torch's ``weights_only`` unpickler reads on ``meta`` storages passes, anything else is
refused naming the member, unless ``trust_pickles=True`` (CLI ``--trust-pickles``, the flag
:func:`tracepack.torch.load` takes).
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import io
import json
import os
from typing import IO, Any, cast

import msgspec

from tracepack.errors import LegacyFormatError, UnsafePickleError, VersionError
from tracepack.io import guard
from tracepack.io.files import read_input
from tracepack.io.zip import Archive, ArchiveWriter, Member, open_archive, open_archive_file
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
    "upgrade_pt2_file",
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
    version = _version_of(archive.read(member, limit=pt2.MAX_PROGRAM_BYTES), f"{archive.source}:{member}")
    return version is not None and version < installed_schema()


class _Head(msgspec.Struct):
    schema_version: Any = None


def _version_of(raw: bytes, source: str) -> SchemaVersion | None:
    """The program's ``schema_version``, read without building the rest of it (msgspec skips the
    other members of the top object), or ``None``; held to the ``max_depth`` and ``max_int_digits``
    budgets like every parse (msgspec's skip recurses too): past them, a LegacyFormatError."""

    def parse() -> Any:
        try:
            return {"schema_version": msgspec.json.decode(raw, type=_Head).schema_version}
        except msgspec.DecodeError:  # not an object, or what msgspec refuses (json may still read it)
            pass
        return json.loads(raw)

    try:
        return schema_version_of(guard.parse_json(parse, raw, source, LegacyFormatError))
    except LegacyFormatError:
        raise
    except ValueError:  # not JSON, not UTF-8: the loader says what is wrong in its words
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
    gm = program.get("graph_module") if type(program) is dict else None
    todo = [gm.get("graph") if type(gm) is dict else None]
    while todo:
        graph = todo.pop(0)
        nodes = graph.get("nodes") if type(graph) is dict else None
        for node in nodes if type(nodes) is list else []:  # what is not a graph: torch's loader says so
            if type(node) is not dict:
                continue
            target = node.get("target")
            if type(target) is str and _resolve(target) is None:
                return str(node.get("name", "?")), target
            inputs = node.get("inputs")
            for inp in inputs if type(inputs) is list else []:
                arg = inp.get("arg") if type(inp) is dict else None
                if type(arg) is dict and type(arg.get("as_graph")) is dict:
                    todo.append(arg["as_graph"].get("graph"))
    return None


#: An ``nn_module_stack`` entry whose module path nests parentheses, as torch 2.1's strict export wrote them.
_NESTED_PATH = "k,getattr(getattr(L['self'].a, '0').b, '0'),torch.nn.Linear"
_SPLITS_NESTED: list[bool] = []


def _check_module_paths(program: Any, *, where: str) -> None:
    """Refuse, in one line, a node whose ``nn_module_stack`` the installed torch's deserializer cannot
    split: torch 2.6's splits module paths with a regular expression that fails on nested parentheses
    (``getattr(getattr(L['self'].blocks, '0').ff, '0')``: torch 2.1's strict export); torch 2.8 and
    newer split them. Checked with torch's own ``deserialize_metadata``, only on a torch that fails."""
    serde = importlib.import_module("torch._export.serde.serialize")
    deserializer = serde.GraphModuleDeserializer()
    if not _SPLITS_NESTED:
        try:
            deserializer.deserialize_metadata({"nn_module_stack": _NESTED_PATH})
            _SPLITS_NESTED.append(True)
        except Exception:
            _SPLITS_NESTED.append(False)
    if _SPLITS_NESTED[0]:
        return
    gm = program.get("graph_module") if type(program) is dict else None
    todo: list[tuple[Any, str]] = [(gm.get("graph") if type(gm) is dict else None, "$.graph_module.graph")]
    checked: set[str] = set()
    while todo:
        graph, at = todo.pop(0)
        nodes = graph.get("nodes") if type(graph) is dict else None
        for i, node in enumerate(nodes if type(nodes) is list else []):
            metadata = node.get("metadata") if type(node) is dict else None
            text = metadata.get("nn_module_stack") if type(metadata) is dict else None
            if type(text) is str and text not in checked:
                try:
                    deserializer.deserialize_metadata({"nn_module_stack": text})
                except Exception:
                    raise VersionError(
                        f"torch {_torch().__version__}'s deserializer cannot split this nn_module_stack (a "
                        "module path nesting parentheses, as torch 2.1's strict export wrote them); torch 2.8 "
                        "and newer read it",
                        source=where,
                        where=f"{at}.nodes[{i}].metadata.nn_module_stack",
                    ) from None
                checked.add(text)
            inputs = node.get("inputs") if type(node) is dict else None
            for j, inp in enumerate(inputs if type(inputs) is list else []):
                arg = inp.get("arg") if type(inp) is dict else None
                if type(arg) is dict and type(arg.get("as_graph")) is dict:
                    todo.append((arg["as_graph"].get("graph"), f"{at}.nodes[{i}].inputs[{j}].arg.as_graph.graph"))


def _first(archive: Archive, names: tuple[str, ...]) -> str | None:
    """The first of ``names`` the archive holds."""
    return next((name for name in names if name in archive.names()), None)


def load_upgraded(
    data: bytes,
    *,
    source: str,
    trust_pickles: bool = False,
    extra_files: dict[str, Any] | None = None,
    expected_opset_version: dict[str, int] | None = None,
) -> Any:
    """The ExportedProgram of the ``.pt2`` ``data`` (any release's), in the installed torch; the
    archive's extra files go into ``extra_files`` (as :func:`tracepack.torch.load` fills it). The
    upgrade walks the program as deep as it nests: held to the ``max_depth`` budget (guard.run)."""
    return guard.run(
        lambda: _load_upgraded(data, source, trust_pickles, extra_files, expected_opset_version),
        source,
        LegacyFormatError,
    )


def _load_upgraded(
    data: bytes,
    source: str,
    trust_pickles: bool,
    extra_files: dict[str, Any] | None,
    expected_opset_version: dict[str, int] | None,
) -> Any:
    from tracepack.torch import pt2

    with open_archive(data, source=source) as archive:
        layout = layouts.layout_of(archive)
        if layout is None:
            raise LegacyFormatError("not a torch.export archive", source=source, expected="a .pt2")
        member, raw = pt2.read_program(archive)
        where = f"{source}:{member}"
        try:
            program = guard.parse_json(lambda: json.loads(raw), raw, where, LegacyFormatError)
        except LegacyFormatError:
            raise
        except ValueError as exc:
            raise LegacyFormatError(f"not JSON: {exc}", source=where) from None
        if layout == "package":
            return _load_package(
                data,
                program,
                source=source,
                where=where,
                trust_pickles=trust_pickles,
                extra_files=extra_files,
                expected_opset_version=expected_opset_version,
            )
        # The weights and constants too: non-strict export with a fake mode pickles fake tensors in them.
        weights_name = _first(archive, layouts.FLAT_STATE_DICT)
        constants_name = _first(archive, ("serialized_constants.pt", "serialized_constants.json"))
        state_dict = archive.read(weights_name) if weights_name else None
        constants = archive.read(constants_name) if constants_name else None
        # Unpickled inside torch's deserializer (loader.deserialize), as torch does: example inputs that are
        # fake tensors (pickled as _reconstruct_fake_tensor) are made in its fake mode, which needs it current.
        inputs_name = layouts.FLAT_EXAMPLE_INPUTS
        example_inputs = archive.read(inputs_name) if _first(archive, (inputs_name,)) else None
        if extra_files is not None:  # torch 2.1-2.7 wrote extra_files/<name>
            for name in archive.names():
                if name.startswith(_FLAT_EXTRA):
                    try:
                        extra_files[name[len(_FLAT_EXTRA) :]] = archive.read(name).decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise LegacyFormatError(f"not UTF-8 text: {exc}", source=f"{source}:{name}") from None
    return _deserialize(
        program,
        state_dict or {},
        constants or {},
        example_inputs,
        where=where,
        expected_opset_version=expected_opset_version,
        trust_pickles=trust_pickles,
        inputs_source=f"{source}:{inputs_name}",
        sources={"state_dict": f"{source}:{weights_name}", "constants": f"{source}:{constants_name}"},
    )


def load_if_old(
    f: str | os.PathLike[str] | IO[bytes],
    *,
    trust_pickles: bool = False,
    extra_files: dict[str, Any] | None = None,
    expected_opset_version: dict[str, int] | None = None,
) -> Any:
    """The upgraded program when ``f`` needs the upgrade (:func:`needs_upgrade`), else ``None``
    (a seekable stream is left where it was).

    A path is opened as an archive in place: only its program member is read to decide, so a
    current ``.pt2`` of any size costs no copy, and a FIFO or device is refused, never waited on.
    """
    options: dict[str, Any] = {"extra_files": extra_files, "expected_opset_version": expected_opset_version}
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
        return load_upgraded(read_input(name), source=name, trust_pickles=trust_pickles, **options)
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
    return load_upgraded(data, source=name, trust_pickles=trust_pickles, **options) if old else None


def _load_package(
    data: bytes,
    program: Any,
    *,
    source: str,
    where: str,
    trust_pickles: bool = False,
    extra_files: dict[str, Any] | None = None,
    expected_opset_version: dict[str, int] | None = None,
) -> Any:
    """A ``<top>/models/`` archive (torch 2.6+, schema 8.x): the program upgraded to the installed
    torch's minor in place, the weights read by tracepack's loader."""
    from tracepack.torch import pt2
    from tracepack.torch.loader import load_pt2

    upgraded = _upgraded(program, where=where)
    with open_archive(data, source=source) as archive:
        rebuilt = pt2.replace_program(archive, json.dumps(upgraded).encode())
    stream = io.BytesIO(rebuilt)
    stream.name = source  # errors name the file, not "<stream>"
    return load_pt2(
        stream, trust_pickles=trust_pickles, extra_files=extra_files, expected_opset_version=expected_opset_version
    )


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


def _deserialize(
    program: Any,
    state_dict: Any,
    constants: Any,
    example_inputs: Any,
    *,
    where: str,
    expected_opset_version: dict[str, int] | None = None,
    trust_pickles: bool = False,
    inputs_source: str = "<example inputs>",
    sources: dict[str, str] | None = None,
) -> Any:
    """The upgraded ``program`` built by torch's deserializer. ``state_dict``, ``constants`` and
    ``example_inputs`` may be the archive's pickled members (bytes, named in ``sources`` and
    ``inputs_source``): unpickled inside the deserializer, data-only unless ``trust_pickles``."""
    target = installed_schema()
    version = schema_version_of(program)
    if version is not None and version.major > target.major:  # what tracepack.torch.load says of any archive
        from tracepack.torch.loader import SchemaMismatch

        raise SchemaMismatch.of(str(version), "newer", target.major, where)
    # a flat archive of the installed torch's own schema (torch 2.6/2.7): as torch reads it
    upgraded = program if version == target else upgrade_program(program, source=where, target=target)
    missing = missing_operator(upgraded)
    if missing is not None:
        node, op = missing
        raise VersionError(f"operator {op} (node {node}) does not exist in torch {_torch().__version__}", source=where)
    _check_module_paths(upgraded, where=where)
    from tracepack.torch.serde import converters

    # The converters generated from the installed torch's schema (torch's reflective one is ~10x slower).
    serialized = converters().convert("ExportedProgram", _fitted(upgraded, where=where), source=where)
    if isinstance(example_inputs, dict) or example_inputs is None:
        example_inputs = None
    from tracepack.torch.loader import deserialize

    # torch's deserializer, with the expression check before sympy (which would eval every expr_str).
    return deserialize(
        serialized,
        state_dict,
        constants,
        example_inputs,
        source=where,
        expected_opset_version=expected_opset_version,
        trust_pickles=trust_pickles,
        inputs_source=inputs_source,
        sources=sources,
    )


def upgrade_pt2(data: bytes, *, source: str, through_torch: bool = False, trust_pickles: bool = False) -> bytes:
    """The ``.pt2`` ``data`` (any torch release's) upgraded for the installed torch: a file its
    ``torch.export.load`` reads. The archive (either layout) is rewritten member by member (see
    the module docstring); with ``through_torch`` it is loaded and saved again with
    ``torch.export.save``. Every pickled member the output keeps is checked first (torch's
    ``weights_only`` unpickler, ``meta`` storages) and torchbind/opaque objects are refused:
    ``torch.export.load`` unpickles them in full. ``trust_pickles=True`` copies them unchecked
    (streamed) or loads them as torch does (``through_torch``): only for files you trust."""
    if not through_torch:
        with open_archive(data, source=source) as archive:
            if _streamable(archive):
                out = io.BytesIO()
                _write_streamed(archive, out, trust_pickles=trust_pickles)
                return out.getvalue()
    extra: dict[str, Any] = {}
    program = load_upgraded(data, source=source, trust_pickles=trust_pickles, extra_files=extra)
    buffer = io.BytesIO()
    _torch().export.save(program, buffer, extra_files=extra or None)
    return buffer.getvalue()


def upgrade_file(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """:func:`upgrade_pt2_file` (kept for callers of the earlier name)."""
    upgrade_pt2_file(src, dst)


def upgrade_pt2_file(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    overwrite: bool = True,
    durable: bool = False,
    source: str | None = None,
    through_torch: bool = False,
    trust_pickles: bool = False,
) -> tuple[int, int]:
    """:func:`upgrade_pt2` from file to file (written atomically; synced to disk when ``durable``);
    returns (input, output) bytes. An archive of any size is streamed: its weights are copied
    raw, never read into memory (unless ``through_torch``, or with a torch before 2.10, which cannot read
    the streamed layout: :func:`torch_reads_streamed`)."""
    from tracepack.io.files import atomic_output

    name = source or os.fspath(src)
    with open_archive_file(src, source=name) as archive:
        if not through_torch and _streamable(archive):
            with atomic_output(dst, overwrite=overwrite, durable=durable) as f:
                _write_streamed(archive, f, trust_pickles=trust_pickles)
                size = f.tell()
            return os.stat(src).st_size, size
    out = upgrade_pt2(read_input(name), source=name, through_torch=True, trust_pickles=trust_pickles)
    with atomic_output(dst, overwrite=overwrite, durable=durable) as f:
        f.write(out)
    return os.stat(src).st_size, len(out)


# -- the streamed upgrade ---------------------------------------------------------------------------

_WEIGHTS = ("weights", "weight_", "{}_weights_config.json")
_CONSTANTS = ("constants", "tensor_", "{}_constants_config.json")
#: The top folder ``torch.export.save`` gives an archive written to a stream (what the
#: through-torch upgrade writes); a streamed flat archive gets the same.
_FLAT_TOP = "archive"
#: torch 2.1-2.7's ``extra_files/<name>`` is torch 2.8+'s ``<top>/extra/<name>``.
_FLAT_EXTRA = "extra_files/"
#: ``.data/version`` of a ``<top>/models/`` archive: ``PT2ArchiveWriter`` sets its stream
#: writer's minimum version to 6.
_PT2_FILE_VERSION = b"6\n"

#: A member the streamed upgrade writes: ``(name, nested archive, member of it)`` is copied raw
#: from the nested archive; ``(name, None, bytes)`` is written.
_Part = tuple[str, "Archive | None", "str | bytes"]


def _streamable(archive: Archive) -> bool:
    return layouts.layout_of(archive) in ("package", "flat") and torch_reads_streamed()


def torch_reads_streamed() -> bool:
    """Whether the installed torch's ``torch.export.load`` reads what the streamed upgrade writes:
    torch 2.10+'s layout (a record per storage and payload configs, its schema's ``PayloadConfig``).
    With an older torch (2.6-2.8 measured), the upgrade goes through torch instead."""
    schema = importlib.import_module("torch._export.serde.schema")
    return hasattr(schema, "PayloadConfig") and hasattr(schema, "PayloadMeta")


def _upgraded_programs(archive: Archive, programs: list[tuple[str, str]]) -> dict[str, bytes]:
    """Program member -> its upgraded model.json (a packed archive's metadata merged back first)."""
    from tracepack.torch import pt2

    merged = pt2._merged_programs(archive) if pt2.is_packed(archive) else {}
    replace: dict[str, bytes] = {}
    for member, _ in programs:
        where = f"{archive.source}:{member}"
        raw = merged.get(member)
        if raw is None:
            raw = archive.read(member, limit=pt2.MAX_PROGRAM_BYTES)
        try:
            program = guard.parse_json(lambda: json.loads(raw), raw, where, LegacyFormatError)  # noqa: B023
        except LegacyFormatError:
            raise
        except ValueError as exc:
            raise LegacyFormatError(f"not JSON: {exc}", source=where) from None
        if type(program) is not dict:
            raise LegacyFormatError("the program is not a JSON object", source=where)
        replace[member] = json.dumps(_upgraded(program, where=where)).encode()
    return replace


def _write_streamed(archive: Archive, out: IO[bytes], *, trust_pickles: bool = False) -> None:
    """Write ``archive`` upgraded to ``out``: programs upgraded, nested ``torch.save`` weight and
    constant archives (torch 2.1-2.8) rewritten as storages + config, sample inputs and every
    pickled payload of torch 2.9+'s configs (``use_pickle`` weights and constants, torchbind and
    opaque objects) checked (:func:`_check_pickled_payloads`; not with ``trust_pickles``), the
    rest raw. A flat archive becomes a ``<top>/models/`` one."""
    from tracepack.torch import pt2

    programs = pt2._check_pt2(archive)
    replace = _upgraded_programs(archive, programs)
    if layouts.layout_of(archive) == "flat":
        _write_flat(archive, out, replace[layouts.FLAT_PROGRAM], trust_pickles=trust_pickles)
        return
    drop = {pt2._tpk_name(archive, model) for _, model in programs}
    names = set(archive.names())
    if len(names) != len(archive.names()):  # which one torch reads is not ours to guess
        repeated = next(n for n, count in collections.Counter(archive.names()).items() if count > 1)
        raise LegacyFormatError("the member name is repeated", source=f"{archive.source}:{repeated}")
    top = str(archive.top)
    with contextlib.ExitStack() as stack:
        legacy: dict[str, list[_Part]] = {}
        for _, model in programs:
            for kind in (_WEIGHTS, _CONSTANTS):
                name = layouts.side_member(archive, f"data/{kind[0]}/", f"{model}.pt")
                if name in names:
                    config = layouts.side_member(archive, f"data/{kind[0]}/", kind[2].format(model))
                    if config in names:  # the rewrite writes that config: the output would hold two
                        raise LegacyFormatError(
                            f"both {kind[0]} layouts: the legacy archive and a config",
                            source=f"{archive.source}:{config}",
                            expected=f"one of {name} (torch 2.8) or the config (torch 2.9+)",
                        )
                    legacy[name] = _legacy_payload(archive, stack, name, model, kind, top=top)
            inputs = layouts.side_member(archive, "data/sample_inputs/", f"{model}.pt")
            if trust_pickles:
                continue
            if inputs in names:
                _check_sample_inputs(archive, stack, inputs)
            for kind in (_WEIGHTS, _CONSTANTS):
                config = layouts.side_member(archive, f"data/{kind[0]}/", kind[2].format(model))
                if config in names:
                    _check_pickled_payloads(archive, stack, config, kind)
        with ArchiveWriter(out) as w:
            for m in archive.members:
                if m.name in drop:
                    continue
                if m.name in replace:
                    w.add(m, replace[m.name])
                elif m.name in legacy:
                    _write_parts(w, legacy[m.name], m)
                else:
                    w.copy(archive, m.name, m)


def _write_parts(w: ArchiveWriter, parts: list[_Part], like: Member) -> None:
    for new, nested, what in parts:
        member = Member(new, like.date_time, like.external_attr, 0)
        if nested is None:
            w.add(member, bytes(what))  # type: ignore[arg-type]
        else:
            w.copy(nested, str(what), member)


def _write_flat(archive: Archive, out: IO[bytes], program: bytes, *, trust_pickles: bool = False) -> None:
    """A flat archive (torch 2.1-2.7) as the ``<top>/models/`` archive ``torch.export.save`` of
    its upgraded program writes: ``model.json`` (the upgraded program), one ``weight_<n>`` /
    ``tensor_<n>`` member per storage of ``serialized_state_dict.pt`` / ``serialized_constants.pt``
    (copied raw from inside them) and their configs, ``serialized_example_inputs.pt`` (checked,
    copied raw) as the sample inputs, ``extra_files/<name>`` as ``extra/<name>``, and the archive
    version members. Any other member is refused: nothing is dropped unseen."""
    from tracepack.torch import pt2

    top, model = _FLAT_TOP, "model"
    names = archive.names()
    skip = {layouts.FLAT_PROGRAM, "version", pt2._tpk_name(archive, model)}
    state_dict = next((n for n in layouts.FLAT_STATE_DICT if n in names), None)
    found = {"weights": state_dict, "constants": None, "inputs": None}
    for name in names:
        if name in skip or name == state_dict or name.endswith("/") or name.startswith(_FLAT_EXTRA):
            continue
        if name in (layouts.FLAT_CONSTANTS, "serialized_constants.json"):
            found["constants"] = name
        elif name == layouts.FLAT_EXAMPLE_INPUTS:
            found["inputs"] = name
        else:
            raise LegacyFormatError(
                "not a member torch 2.1-2.7's torch.export.save writes",
                source=f"{archive.source}:{name}",
                expected="serialized_*, version or extra_files/<name>",
            )
    stamp = archive.members[0]
    with contextlib.ExitStack() as stack:
        parts: list[_Part] = []
        for kind, key in ((_WEIGHTS, "weights"), (_CONSTANTS, "constants")):
            nested_name = found[key]
            if nested_name is not None:
                parts += _legacy_payload(archive, stack, nested_name, model, kind, top=top)
            else:  # torch 2.1/2.2 wrote no constants: an empty config, as torch.export.save writes
                config = f"{top}/data/{kind[0]}/{kind[2].format(model)}"
                parts.append((config, None, json.dumps({"config": {}}).encode()))
        inputs = found["inputs"]
        if inputs is not None and not trust_pickles:
            _check_sample_inputs(archive, stack, inputs)
        with ArchiveWriter(out) as w:
            _write_parts(w, parts, stamp)
            w.add(Member(f"{top}/models/{model}.json", stamp.date_time, stamp.external_attr, 0), program)
            sample = Member(f"{top}/data/sample_inputs/{model}.pt", stamp.date_time, stamp.external_attr, 0)
            if inputs is not None:
                w.copy(archive, inputs, sample)
            else:
                w.add(sample, b"")  # torch 2.1/2.2 kept no example inputs: torch writes an empty member
            for m in archive.members:
                if m.name.startswith(_FLAT_EXTRA) and not m.name.endswith("/"):
                    w.copy(archive, m.name, Member(f"{top}/extra/{m.name[len(_FLAT_EXTRA) :]}", *_stamp(m)))
            for name, value in _package_markers(program):
                w.add(Member(f"{top}/{name}", stamp.date_time, stamp.external_attr, 0), value)


def _stamp(m: Member) -> tuple[tuple[int, int, int, int, int, int], int, int]:
    return m.date_time, m.external_attr, 0


def _package_markers(program: bytes) -> list[tuple[str, bytes]]:
    """The members torch's ``PT2ArchiveWriter`` ends a ``<top>/models/`` archive with (its
    ``.data/serialization_id``, random in torch, is derived from the program here)."""
    import hashlib

    constants: Any = importlib.import_module("torch.export.pt2_archive.constants")
    digest = int.from_bytes(hashlib.sha256(program).digest()[:16], "big")
    return [
        (constants.ARCHIVE_FORMAT_PATH, constants.ARCHIVE_FORMAT_VALUE.encode()),
        (constants.ARCHIVE_VERSION_PATH, constants.ARCHIVE_VERSION_VALUE.encode()),
        (".data/version", _PT2_FILE_VERSION),
        ("byteorder", b"little"),
        (".data/serialization_id", f"{digest:040d}".encode()),
    ]


def _nested_file(archive: Archive, stack: contextlib.ExitStack, name: str) -> IO[bytes]:
    """Member ``name`` (a zip of its own) as a file: read in place when stored (as torch writes
    it), else decompressed, a chunk at a time under the ratio budget, into a temporary file (a
    flat archive rewritten by ``zipfile`` with deflate): never whole in memory either way."""
    import shutil
    import tempfile
    import zipfile

    from tracepack.io.zip import MEMBER_ERRORS

    if archive.compress_type(name) == zipfile.ZIP_STORED:
        return archive.member_file(name)
    spool = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 - closed by the caller's ExitStack
    with archive.open_member(name) as member:
        try:
            shutil.copyfileobj(member, spool, 1 << 20)
        except MEMBER_ERRORS as exc:
            raise LegacyFormatError(f"cannot read member: {exc}", source=f"{archive.source}:{name}") from None
    spool.seek(0)
    return cast(IO[bytes], spool)


def _meta_unpickle(archive: Archive, stack: contextlib.ExitStack, name: str) -> tuple[Any, Any, str, dict[int, Any]]:
    """The ``torch.save`` archive stored as member ``name``, unpickled by torch's ``weights_only``
    unpickler with every storage on the ``meta`` device (nothing executed, no tensor data read):
    ``(object, nested archive, its top folder, StorageImpl -> (key, location, bytes))``."""
    torch = _torch()
    unpickling: Any = importlib.import_module("torch._weights_only_unpickler")
    where = f"{archive.source}:{name}"
    nested = stack.enter_context(Archive(_nested_file(archive, stack, name), source=where))
    top = nested.top
    if len(set(nested.names())) != len(nested.names()):  # which one would torch read?
        raise LegacyFormatError("a member name is repeated", source=where, expected="a torch.save archive")
    if top is None or f"{top}/data.pkl" not in nested.names():
        raise LegacyFormatError("not a torch.save archive", source=where, expected="<name>/data.pkl")
    if f"{top}/byteorder" in nested.names() and nested.read(f"{top}/byteorder", limit=16) != b"little":
        raise LegacyFormatError("the weights are not little-endian", source=where, expected="byteorder little")
    storages: dict[int, tuple[str, str, int]] = {}  # StorageImpl -> (key, location, bytes)
    by_key: dict[str, Any] = {}

    def persistent_load(saved_id: Any) -> Any:
        if type(saved_id) is not tuple or len(saved_id) != 5 or saved_id[0] != "storage":
            raise ValueError(f"unexpected persistent id {str(saved_id)[:80]}")
        _, storage_type, key, location, numel = saved_id
        typed = by_key.get(str(key))
        if typed is None:
            dtype = torch.uint8 if storage_type is torch.UntypedStorage else storage_type.dtype
            nbytes = int(numel) * torch._utils._element_size(dtype)
            untyped = torch.UntypedStorage(nbytes, device="meta")
            storages[untyped._cdata] = (str(key), str(location), nbytes)
            typed = by_key[str(key)] = torch.storage.TypedStorage(wrap_storage=untyped, dtype=dtype, _internal=True)
        return typed

    pickled = nested.read(f"{top}/data.pkl", limit=256 << 20)
    try:
        unpickler = unpickling.Unpickler(io.BytesIO(pickled), encoding="utf-8")
        unpickler.persistent_load = persistent_load
        value = unpickler.load()
    except Exception as exc:  # torch raises UnpicklingError/RuntimeError with long texts
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UnsafePickleError(
            f"cannot be read with torch's weights_only unpickler: {first}", source=f"{where}:{top}/data.pkl"
        ) from None
    return value, nested, top, storages


def _check_sample_inputs(archive: Archive, stack: contextlib.ExitStack, name: str) -> None:
    """The sample inputs member (copied raw) must be what torch's ``weights_only`` loader reads:
    torch's own loader falls back to a full unpickle when it is not."""
    if archive.info(name).file_size == 0:
        return
    value, _, top, _ = _meta_unpickle(archive, stack, name)
    if not isinstance(value, (tuple, dict)):
        raise LegacyFormatError("the sample inputs are not a tuple", source=f"{archive.source}:{name}:{top}/data.pkl")


#: What the streamed upgrade says of a pickled payload it will not copy: its own way out.
_TRUST = "tensors only; pass --trust-pickles (trust_pickles=True) only for a file you trust: torch.export.load runs it"


def _refuse_pickle(where: str, what: str) -> UnsafePickleError:
    return UnsafePickleError(
        f"{what}: torch.export.load of the upgrade would run code from it", source=where, expected=_TRUST
    )


def _check_pickled_payloads(
    archive: Archive, stack: contextlib.ExitStack, config_name: str, kind: tuple[str, str, str]
) -> None:
    """Every pickled payload a torch 2.9+ weights or constants config (``config_name``) names,
    which the streamed upgrade copies raw and ``torch.export.load`` then unpickles in full
    (``torch.load(weights_only=False)``, ``torch._C._pickle_load_obj``, ``pickle.loads``):

    * a ``use_pickle`` weight or ``tensor_<n>`` constant must be a ``torch.save`` archive of one
      tensor that torch's ``weights_only`` unpickler reads, on ``meta`` storages
      (:func:`_meta_unpickle`: nothing executed, no tensor data read);
    * a torchbind (``custom_obj_<n>``) or opaque (``opaque_obj_<n>``) constant, or any other
      record ``torch.export.load`` would hand to a full unpickler, is refused.

    Each refusal is one line naming the member (:class:`~tracepack.errors.UnsafePickleError`)."""
    torch = _torch()
    where = f"{archive.source}:{config_name}"
    raw = archive.read(config_name, limit=256 << 20)
    try:
        config = guard.parse_json(lambda: json.loads(raw), raw, where, LegacyFormatError)
    except LegacyFormatError:
        raise
    except ValueError as exc:
        raise LegacyFormatError(f"not JSON: {exc}", source=where) from None
    entries = config.get("config") if type(config) is dict else None
    if type(entries) is not dict:
        raise LegacyFormatError("not a payload config", source=where, expected='{"config": {fqn: payload}}')
    folder, prefix, _ = kind
    names = archive.names()
    for fqn, entry in entries.items():
        path_name = entry.get("path_name") if type(entry) is dict else None
        if type(path_name) is not str:
            raise LegacyFormatError(
                f"payload {str(fqn)[:80]!r} has no path_name", source=where, expected="a payload record"
            )
        constant = prefix == _CONSTANTS[1]
        custom = constant and path_name.startswith("custom_obj_")
        opaque = constant and path_name.startswith("opaque_obj_")
        if not (entry.get("use_pickle") or custom or opaque):
            continue  # raw bytes, read by torch as a storage (never unpickled)
        member = layouts.side_member(archive, f"data/{folder}/", path_name)
        what = f"{'constant' if constant else 'weight'} {str(fqn)[:80]!r}"
        if custom:
            raise _refuse_pickle(f"{archive.source}:{member}", f"{what} is a torchbind object (custom_obj)")
        if opaque:
            raise _refuse_pickle(f"{archive.source}:{member}", f"{what} is an opaque object (a plain pickle)")
        if constant and not path_name.startswith(prefix):
            raise LegacyFormatError(
                f"{what}: unsupported constant record {path_name[:80]!r}",
                source=where,
                expected="tensor_<n>, custom_obj_<n> or opaque_obj_<n>",
            )
        if not path_name or "/" in path_name or "\\" in path_name or path_name in (".", ".."):
            raise LegacyFormatError(
                f"{what}: path_name {path_name[:80]!r} is not a member name", source=where, expected=f"{prefix}<n>"
            )
        count = names.count(member)
        if count != 1:
            raise LegacyFormatError(
                f"{what}: {'no such member' if not count else 'the member is repeated'}",
                source=f"{archive.source}:{member}",
            )
        try:
            value, _, top, _ = _meta_unpickle(archive, stack, member)
        except UnsafePickleError as exc:
            raise _refuse_pickle(
                f"{archive.source}:{member}",
                f"{what} stored as a pickle needs more than torch's weights_only unpickler",
            ) from exc
        if not isinstance(value, torch.Tensor):
            raise _refuse_pickle(
                f"{archive.source}:{member}:{top}/data.pkl",
                f"{what} stored as a pickle is {type(value).__name__}, not a tensor",
            )


def _legacy_payload(
    archive: Archive, stack: contextlib.ExitStack, name: str, model: str, kind: tuple[str, str, str], *, top: str
) -> list[_Part]:
    """A nested ``torch.save`` archive of a dict of tensors (torch 2.8's ``data/<kind>/<model>.pt``,
    torch 2.1-2.7's ``serialized_state_dict.pt`` / ``serialized_constants.pt``) as torch 2.9+
    writes it below ``top``: ``(new member, nested archive, storage member)`` for every storage,
    then ``(config member, None, JSON)``. Only the nested ``data.pkl`` is read
    (:func:`_meta_unpickle`)."""
    torch = _torch()
    schema: Any = importlib.import_module("torch._export.serde.schema")
    serialize: Any = importlib.import_module("torch._export.serde.serialize")

    where = f"{archive.source}:{name}"
    folder, prefix, config_name = kind
    config: dict[str, Any] = {}
    out: list[_Part] = []
    tensors: Any = {}
    nested: Archive | None = None
    nested_top = "archive"
    storages: dict[int, tuple[str, str, int]] = {}
    if archive.info(name).file_size:  # torch wrote an empty member for nothing to save
        tensors, nested, nested_top, storages = _meta_unpickle(archive, stack, name)
    if type(tensors) not in (dict, collections.OrderedDict) or not all(
        type(k) is str and isinstance(v, torch.Tensor) for k, v in tensors.items()
    ):
        raise LegacyFormatError("not a dict of tensors", source=f"{where}:{nested_top}/data.pkl")
    files: dict[str, str] = {}  # storage key -> new member's path name
    for fqn, tensor in tensors.items():
        pickled = f"{where}:{nested_top}/data.pkl"
        if tensor.layout != torch.strided:
            raise LegacyFormatError(
                f"tensor {fqn!r} is {str(tensor.layout).removeprefix('torch.')}: only strided tensors are "
                "streamed (through_torch / --through-torch loads it into torch)",
                source=pickled,
            )
        entry = storages.get(tensor.untyped_storage()._cdata)
        if entry is None:
            raise LegacyFormatError(f"tensor {fqn!r} has no stored data", source=pickled, expected="a storage")
        key, location, nbytes = entry
        path_name = files.get(key)
        if path_name is None:
            path_name = files[key] = f"{prefix}{len(files)}"
            record = f"{nested_top}/data/{key}"
            assert nested is not None  # a tensor was unpickled from it
            size = nested.info(record).file_size
            if size != nbytes:
                raise LegacyFormatError(
                    f"storage of {size} bytes, its tensors need {nbytes}", source=f"{where}:{record}"
                )
            out.append((f"{top}/data/{folder}/{path_name}", nested, record))
        meta = serialize.serialize_tensor_meta(tensor)
        device = torch.device(location)
        meta.device = schema.Device(type=device.type, index=device.index)
        config[fqn] = schema.PayloadMeta(
            path_name=path_name, is_param=isinstance(tensor, torch.nn.Parameter), use_pickle=False, tensor_meta=meta
        )
    text = json.dumps(serialize._dataclass_to_dict(schema.PayloadConfig(config=config))).encode()
    out.append((f"{top}/data/{folder}/{config_name.format(model)}", None, text))
    return out
