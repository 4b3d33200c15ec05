"""torch's export schema classes from JSON values, with converters generated from torch's own schema.

:func:`converters` picks the generated module for the installed torch's schema
(``tracepack_generated.torch_schema.vX_Y`` when its checksum matches torch's
``schema.yaml``; otherwise one rendered on first use from that ``schema.yaml`` and
cached per checksum in the user's cache folder) and binds it to torch's
``torch._export.serde.schema`` classes, after checking that every class has the
fields the description lists, in that order.

:func:`to_dataclass` converts; a value that does not match the schema raises
:class:`~tracepack.errors.LegacyFormatError` naming the JSON path
(``$.graph_module.graph.nodes[3].inputs[0]``) and what was expected there.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from tracepack.codegen.torch_schema import Conventions
from tracepack.errors import LegacyFormatError, VersionError

__all__ = [
    "SUPPORTED_SCHEMA_MAJORS",
    "SUPPORTED_TORCH",
    "Converters",
    "cache_dir",
    "conventions",
    "converters",
    "to_dataclass",
]

#: The torch releases tracepack.torch supports, and the export schema majors they write.
SUPPORTED_TORCH = "2.6 through 2.15"
SUPPORTED_SCHEMA_MAJORS = (8,)

_LOCK = threading.Lock()
_BOUND: dict[str, Converters] = {}


def cache_dir() -> Path:
    """Where converters generated on first use are kept: ``$TRACEPACK_CACHE_DIR``, else the user's cache."""
    env = os.environ.get("TRACEPACK_CACHE_DIR")
    if env:
        return Path(env)
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "tracepack"


class Converters:
    """Generated converters bound to the installed torch's schema classes."""

    def __init__(self, module: ModuleType, schema: Any, origin: str, conventions: Conventions | None = None) -> None:
        self.module = module
        self.schema = schema
        self.origin = origin
        #: the installed torch's conventions the module follows
        self.conventions = conventions or Conventions()
        self.version: tuple[int, int] = (int(module.SCHEMA_VERSION[0]), int(module.SCHEMA_VERSION[1]))
        self.types: dict[str, tuple[str, tuple[tuple[str, str, str | None], ...]]] = module.TYPES
        _check_classes(self.types, schema, origin)
        union = importlib.import_module("torch._export.serde.union")
        self.by_name: dict[str, Callable[[Any], Any]] = module.make(schema, union._UnionTag.create)
        self.dumpers: dict[str, Callable[[Any], Any]] = module.dumpers()

    def dump(self, name: str, obj: Any) -> Any:
        """torch's schema dataclass ``obj`` (of class ``name``) as JSON values, as torch's
        ``_dataclass_to_dict`` gives them."""
        return self.dumpers[name](obj)

    def convert(self, name: str, data: Any, *, source: str, where: str = "$") -> Any:
        """``data`` (JSON values) as torch's schema class ``name``; a mismatch names its JSON path."""
        try:
            return self.by_name[name](data)
        except RecursionError:
            raise LegacyFormatError("nested too deeply", source=source, where=where) from None
        except Exception as exc:
            found = _locate(self.types, name, data, where)
            if found is None:  # pragma: no cover - the fast path and the walk disagree: a bug
                raise
            path, expected, got = found
            raise LegacyFormatError(
                f"does not match torch's export schema {self.version[0]}.{self.version[1]} ({got})",
                source=source,
                where=path,
                expected=expected,
            ) from exc


def _check_classes(types: dict[str, Any], schema: Any, origin: str) -> None:
    for name, (kind, fields) in types.items():
        cls = getattr(schema, name, None)
        if cls is None:
            raise VersionError(f"torch's schema module has no class {name}", source=origin)
        if kind == "enum":
            have = {m.name: m.value for m in cls}
            if have != {n: int(v) for n, v, _ in fields}:
                raise VersionError(f"torch's {name} members differ from the generated schema", source=origin)
            continue
        names = [f.name for f in dataclasses.fields(cls)]
        if names != [f for f, _, _ in fields] or hasattr(cls, "__slots__"):
            raise VersionError(f"torch's {name} fields differ from the generated schema", source=origin)


# -- locating a mismatch -------------------------------------------------------------------------


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array"}.get(
        type(value), "an object"
    )


def _parse(t: str) -> Any:
    from tracepack.codegen.torch_schema import parse_type

    return parse_type(t)


def _locate(types: dict[str, Any], name: str, data: Any, where: str) -> tuple[str, str, str] | None:
    """``(JSON path, expected, found)`` of the first place ``data`` does not match ``name``."""
    stack: list[tuple[Any, Any, str]] = [(name, data, where)]
    while stack:
        t, v, path = stack.pop()
        if isinstance(t, tuple):
            kind, inner = t
            if kind == "optional":
                if v is not None:
                    stack.append((inner, v, path))
            elif kind == "list":
                if type(v) is not list:
                    return path, "an array", f"found {_describe(v)}"
                stack += [(inner, e, f"{path}[{i}]") for i, e in reversed(list(enumerate(v)))]
            else:
                if type(v) is not dict:
                    return path, "an object", f"found {_describe(v)}"
                stack += [(inner, e, f"{path}.{k}") for k, e in reversed(list(v.items()))]
            continue
        if t in ("int", "str", "bool"):
            want = {"int": int, "str": str, "bool": bool}[t]
            if type(v) is not want:
                return path, {"int": "an integer", "str": "a string", "bool": "a boolean"}[t], f"found {_describe(v)}"
            continue
        if t == "float":
            try:
                if type(v) not in (float, int, str):
                    raise ValueError
                float(v)
            except ValueError:
                return path, "a number", f"found {_describe(v)}"
            continue
        kind, fields = types[t]
        if kind == "enum":
            values = sorted(int(x) for _, x, _ in fields)
            if type(v) is not int or v not in values:
                return path, f"a {t} code ({', '.join(map(str, values))})", f"found {v!r}"[:80]
            continue
        if type(v) is not dict:
            return path, f"a {t} object", f"found {_describe(v)}"
        if kind == "union":
            tags = {f: ft for f, ft, _ in fields}
            if len(v) != 1:
                return path, f"a {t}: an object with one of the keys {', '.join(tags)}", f"found {len(v)} keys"
            ((k, inner),) = v.items()
            if k not in tags:
                return path, f"a {t}: one of the keys {', '.join(tags)}", f"found key {k!r}"[:120]
            if not (k == "as_none" and tags[k] == "bool" and inner == []):  # torch 2.3-2.5's "none"
                stack.append((_parse(tags[k]), inner, f"{path}.{k}"))
            continue
        todo = []
        for f, ft, default in fields:
            if f not in v:
                if default is None:
                    return f"{path}.{f}", f"field {f} of {t}", "missing"
                continue
            todo.append((_parse(ft), v[f], f"{path}.{f}"))
        stack += reversed(todo)
    return None


# -- finding and binding the generated module ------------------------------------------------------


def _installed() -> tuple[ModuleType, str, Path]:
    """torch's schema module, the checksum of its ``schema.yaml``, and that file."""
    schema = importlib.import_module("torch._export.serde.schema")
    path = Path(schema.__file__ or "").with_name("schema.yaml")
    from tracepack.codegen.torch_schema import parse_schema_yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise VersionError(f"cannot read torch's export schema: {exc.strerror}", source=str(path)) from None
    spec = parse_schema_yaml(text, source="torch/_export/serde/schema.yaml")
    if tuple(spec.version) != tuple(schema.SCHEMA_VERSION):
        raise VersionError(
            f"torch's schema.yaml says {spec.version}, its schema module {schema.SCHEMA_VERSION}",
            source="torch/_export/serde/schema.yaml",
        )
    return schema, spec.checksum, path


def _generated_module(version: tuple[int, int], checksum: str) -> ModuleType | None:
    from tracepack_generated import torch_schema

    entry = torch_schema.CHECKED_IN.get(version)
    if entry is None or entry[1] != checksum:
        return None
    return importlib.import_module(f"tracepack_generated.torch_schema.{entry[0]}")


def conventions() -> Conventions:
    """The installed torch's :class:`~tracepack.codegen.torch_schema.Conventions`, measured on its own
    ``_dict_to_dataclass`` and ``_dataclass_to_dict``."""
    serialize = importlib.import_module("torch._export.serde.serialize")
    schema = importlib.import_module("torch._export.serde.schema")
    return Conventions(
        coerce_floats=type(serialize._dict_to_dataclass(float, 1)) is float,
        write_none="index" in serialize._dataclass_to_dict(schema.Device(type="cpu")),
        float_strings=serialize._dataclass_to_dict(float("inf")) == "Infinity",
    )


def _rendered_module(path: Path, checksum: str, conventions: Conventions) -> tuple[ModuleType, str]:
    """Render the converters for an installed schema.yaml without a checked-in module; cache the file.

    The cached file is named after the sha256 of its own text, so a different torch schema or a
    different tracepack generator makes a new file, and a file that does not hash to its name is
    rewritten. A cache folder that cannot be written is not an error: the module lives in memory.
    """
    from tracepack.codegen.torch_schema import module_name, parse_schema_yaml, render_module

    spec = parse_schema_yaml(path.read_text(encoding="utf-8"), source="torch/_export/serde/schema.yaml")
    source = render_module(
        spec, source=f"torch/_export/serde/schema.yaml (checksum {checksum})", conventions=conventions
    )
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:20]
    name = f"tracepack_torch_schema_{module_name(spec.version)}_{digest}"
    target = cache_dir() / "torch_schema" / f"{name}.py"
    try:
        if not target.is_file() or target.read_bytes() != source.encode("utf-8"):
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            tmp.write_text(source, encoding="utf-8")
            os.replace(tmp, target)
        found = importlib.util.spec_from_file_location(name, target)
        if found is None or found.loader is None:  # pragma: no cover - a .py file always has a loader
            raise OSError
        module = importlib.util.module_from_spec(found)
        found.loader.exec_module(module)
        return module, str(target)
    except OSError:
        module = ModuleType(name)
        exec(compile(source, name, "exec"), module.__dict__)  # tracepack's own generated text
        return module, f"<{name}>"


def converters() -> Converters:
    """The converters for the installed torch (bound once per process)."""
    with _LOCK:
        bound = _BOUND.get("torch")
        if bound is None:
            schema, checksum, path = _installed()
            version = (int(schema.SCHEMA_VERSION[0]), int(schema.SCHEMA_VERSION[1]))
            if version[0] not in SUPPORTED_SCHEMA_MAJORS:
                raise VersionError(
                    f"this torch writes export schema {version[0]}.{version[1]}; tracepack.torch supports "
                    f"torch {SUPPORTED_TORCH} (schema {', '.join(f'{m}.x' for m in SUPPORTED_SCHEMA_MAJORS)})",
                    source="torch",
                )
            found = conventions()
            # the checked-in modules follow the default conventions (torch 2.8 and newer's)
            module = _generated_module(version, checksum) if found == Conventions() else None
            if module is not None:
                bound = Converters(module, schema, module.__name__)
            else:
                rendered, origin = _rendered_module(path, checksum, found)
                bound = Converters(rendered, schema, origin, found)
            _BOUND["torch"] = bound
        return bound


def to_dataclass(name: str, data: Any, *, source: str, where: str = "$") -> Any:
    """``data`` as torch's schema class ``name`` (see :meth:`Converters.convert`)."""
    return converters().convert(name, data, source=source, where=where)
