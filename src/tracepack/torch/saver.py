"""``tracepack.torch.save``: an ExportedProgram straight to a packed ``.pt2``, in one call.

What ``torch.export.save`` followed by ``tracepack pack`` does, without the round trip:

* the program goes through torch's own ``ExportedProgramSerializer`` (the same code, so the
  same model.json), minus the self-check ``canonicalize`` runs on a deep copy whose result
  torch discards; the dataclasses become JSON values with the dumpers generated from torch's
  schema (equal to torch's reflective ``_dataclass_to_dict``);
* the nodes' debug metadata moves into the tracepack member while the program is still a
  dict (no JSON text parsed back), with pack's defaults (``keep``, ``strip``);
* weights, constants and their configs are written by torch's own packaging functions, into
  a member list that tracepack writes as torch does (stored, 64-byte aligned), the program
  deflated; the file is replaced atomically.

``tracepack unpack`` of the result gives the archive ``torch.export.save`` writes, member for
member (the random ``.data/serialization_id`` aside).
"""

from __future__ import annotations

import gc
import importlib
import io
import json
import logging
import os
import sys
import threading
import types
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ["save_pt2", "serialize_program"]

_LOCK = threading.Lock()
_PATCHED: dict[str, Any] = {}


def _serializer(serde: Any) -> Any:
    """torch's top-level ``serialize`` over a copy of its module's globals: ``canonicalize`` (a
    self-check on a deep copy, result unused) does nothing and ``_to_json_bytes`` hands back the
    dataclass (tracepack's generated dumper turns it into JSON values)."""
    with _LOCK:
        if "serialize" not in _PATCHED:
            g = dict(vars(serde))
            g["canonicalize"] = lambda ep, constants=None: ep
            g["_to_json_bytes"] = lambda obj: obj
            method = serde.ExportedProgramSerializer.serialize
            patched = types.FunctionType(method.__code__, g, method.__name__, method.__defaults__)
            patched.__kwdefaults__ = method.__kwdefaults__

            def make(*args: Any, **kwargs: Any) -> Any:
                s = serde.ExportedProgramSerializer(*args, **kwargs)
                s.serialize = types.MethodType(patched, s)
                return s

            g["ExportedProgramSerializer"] = make
            quiet = _without_debug_log(serde.GraphModuleSerializer.serialize_graph, g)
            if quiet is not None:
                graph_serializer = serde.GraphModuleSerializer

                def make_graph_serializer(*args: Any, **kwargs: Any) -> Any:
                    s = graph_serializer(*args, **kwargs)
                    if not serde.log.isEnabledFor(logging.DEBUG):
                        s.serialize_graph = types.MethodType(quiet, s)
                    return s

                g["GraphModuleSerializer"] = make_graph_serializer
            top = serde.serialize
            fn = types.FunctionType(top.__code__, g, top.__name__, top.__defaults__)
            fn.__kwdefaults__ = top.__kwdefaults__
            _PATCHED["serialize"] = fn
    return _PATCHED["serialize"]


#: What the direct path uses of torch's package writer (torch 2.10 on) and of its constants.
_PACKAGE_FUNCTIONS = ("_package_state_dict", "_package_constants", "_package_payload_config")
_CONSTANTS = (
    "WEIGHTS_CONFIG_FILENAME_FORMAT",
    "CONSTANTS_CONFIG_FILENAME_FORMAT",
    "MODELS_FILENAME_FORMAT",
    "SAMPLE_INPUTS_FILENAME_FORMAT",
    "EXTRA_DIR",
    "ARCHIVE_FORMAT_PATH",
    "ARCHIVE_FORMAT_VALUE",
    "ARCHIVE_VERSION_PATH",
    "ARCHIVE_VERSION_VALUE",
)


def _without_debug_log(fn: Any, g: dict[str, Any]) -> Any:
    """torch's ``serialize_graph`` without its ``log.debug(...)`` statements, compiled over ``g``, or
    None. torch formats the whole graph (``print_readable``: its Python code generated anew) as the
    argument of a debug log line, whether or not debug logging is on; used only while it is off."""
    import ast
    import inspect
    import textwrap

    try:
        source = textwrap.dedent(inspect.getsource(fn))
        filename = inspect.getsourcefile(fn) or "<torch>"
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    (func,) = tree.body
    if not isinstance(func, ast.FunctionDef) or func.decorator_list:
        return None

    def is_debug_log(stmt: ast.stmt) -> bool:
        return (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)
            and stmt.value.func.attr == "debug"
            and isinstance(stmt.value.func.value, ast.Name)
            and stmt.value.func.value.id == "log"
        )

    kept = [stmt for stmt in func.body if not is_debug_log(stmt)]
    if len(kept) == len(func.body) or not kept:
        return None
    func.body = kept
    ast.increment_lineno(tree, fn.__code__.co_firstlineno - 1)
    namespace: dict[str, Any] = {}
    exec(compile(tree, filename, "exec"), g, namespace)  # torch's own source, one statement fewer
    out = namespace[func.name]
    out.__qualname__ = fn.__qualname__
    return out


def _payload_config(w: Any, config: Any, member: str, package: Any) -> None:
    """torch's ``_package_payload_config`` (``json.dumps`` of its reflective ``_dataclass_to_dict``)
    with the dumper generated from torch's schema: the same text."""
    from tracepack.torch.serde import converters

    dumpers = converters().dumpers
    if "PayloadConfig" not in dumpers:
        package._package_payload_config(w, config, member)
        return
    w.write_string(member, json.dumps(dumpers["PayloadConfig"](config)))


def serialize_program(ep: Any, *, opset_version: dict[str, int] | None = None, pickle_protocol: int = 2) -> Any:
    """``(program as JSON values, example inputs bytes)`` as ``torch.export.save`` would write them."""
    from tracepack.torch.serde import converters

    serde = importlib.import_module("torch._export.serde.serialize")
    artifact = _serializer(serde)(
        ep, opset_version, pickle_protocol, serialize_state_dict=False, serialize_constants=False
    )
    program = converters().dump("ExportedProgram", artifact.exported_program)
    return program, artifact.example_inputs


class _Members:
    """Stands in for torch's ``PT2ArchiveWriter``: collects ``(name, bytes)`` in order."""

    def __init__(self) -> None:
        self.members: list[tuple[str, bytes]] = []
        self.names: set[str] = set()

    def write_bytes(self, name: str, data: bytes) -> None:
        if name in self.names:
            raise ValueError(f"duplicate archive member {name}")
        self.names.add(name)
        self.members.append((name, bytes(data)))

    def write_string(self, name: str, data: str) -> None:
        self.write_bytes(name, data.encode("utf-8"))

    def has_record(self, name: str) -> bool:
        return name in self.names

    def count_prefix(self, prefix: str) -> int:
        return sum(1 for n in self.names if n.startswith(prefix))


def save_pt2(
    ep: Any,
    f: str | os.PathLike[str] | IO[bytes],
    *,
    extra_files: dict[str, Any] | None = None,
    opset_version: dict[str, int] | None = None,
    pickle_protocol: int = 2,
    keep: Sequence[str] = (),
    strip: bool = False,
    durable: bool = False,
) -> None:
    """See :func:`tracepack.torch.save`."""
    torch = importlib.import_module("torch")
    if not isinstance(ep, torch.export.ExportedProgram):
        from tracepack.errors import UsageError

        raise UsageError(f"expected a torch.export.ExportedProgram, got {type(ep).__name__}")
    collecting = gc.isenabled()
    gc.disable()  # as in load: many small objects, no cycles worth collecting midway
    try:
        data = _archive(
            ep,
            f,
            extra_files=extra_files,
            opset_version=opset_version,
            pickle_protocol=pickle_protocol,
            keep=keep,
            strip=strip,
        )
    finally:
        if collecting:
            gc.enable()
    if isinstance(f, (str, os.PathLike)):
        from tracepack.container import atomic_write

        atomic_write(os.fspath(f), data, durable=durable)
    else:
        f.write(data)


def _archive(
    ep: Any,
    f: str | os.PathLike[str] | IO[bytes],
    *,
    extra_files: dict[str, Any] | None,
    opset_version: dict[str, int] | None,
    pickle_protocol: int,
    keep: Sequence[str],
    strip: bool,
) -> bytes:
    from tracepack.codecs import encode_best
    from tracepack.io.zip import write_archive
    from tracepack.torch import pt2

    package: Any = None
    c: Any = None
    try:
        package = importlib.import_module("torch.export.pt2_archive._package")
        c = importlib.import_module("torch.export.pt2_archive.constants")
    except ImportError:
        pass
    if not all(hasattr(package, n) for n in _PACKAGE_FUNCTIONS) or not all(hasattr(c, n) for n in _CONSTANTS):
        # torch 2.6/2.7 (the flat archive) and 2.8/2.9 (weights without payload configs) write another
        # layout: torch's own save (it has no pickle_protocol there), then pack.
        torch = importlib.import_module("torch")
        buf = io.BytesIO()
        torch.export.save(ep, buf, extra_files=extra_files, opset_version=opset_version)
        return pt2.pack_pt2(buf.getvalue(), source="<ExportedProgram>", keep=keep, strip=strip)
    model = "model"
    w = _Members()
    weights = package._package_state_dict(model, ep, w, pickle_protocol)
    _payload_config(w, weights, c.WEIGHTS_CONFIG_FILENAME_FORMAT.format(model), package)
    constants = package._package_constants(model, ep, w, pickle_protocol)
    _payload_config(w, constants, c.CONSTANTS_CONFIG_FILENAME_FORMAT.format(model), package)
    program, example_inputs = serialize_program(ep, opset_version=opset_version, pickle_protocol=pickle_protocol)
    doc = pt2.split_program(program, keep=keep, strip=strip, source="<ExportedProgram>")
    program_member = c.MODELS_FILENAME_FORMAT.format(model)
    w.write_bytes(program_member, json.dumps(program).encode("ascii"))
    w.write_bytes(f"{pt2.MEMBER_DIR}{model}.tpk", encode_best(doc).data)  # the member as pack writes it
    w.write_bytes(c.SAMPLE_INPUTS_FILENAME_FORMAT.format(model), example_inputs)
    for name, content in (extra_files or {}).items():
        w.write_string(f"{c.EXTRA_DIR}{name}", content if isinstance(content, str) else content.decode("utf-8"))
    w.write_string(c.ARCHIVE_FORMAT_PATH, c.ARCHIVE_FORMAT_VALUE)
    w.write_string(c.ARCHIVE_VERSION_PATH, c.ARCHIVE_VERSION_VALUE)
    w.write_string(".data/version", "6\n")
    w.write_string("byteorder", sys.byteorder)
    top = Path(os.fspath(f)).stem if isinstance(f, (str, os.PathLike)) else "archive"
    return write_archive([(f"{top}/{n}", d) for n, d in w.members], deflate={f"{top}/{program_member}"})
