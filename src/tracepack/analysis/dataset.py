"""The tables of many programs as one incremental Parquet dataset (``tracepack export --format parquet``).

Layout (``docs/tables.md`` has every column)::

    DIR/_tracepack_tables.json      what this folder is: format, tables version, every table's columns
    DIR/models/KEY.parquet          one row: the program's model name, content hash, producer, sizes
    DIR/nodes/KEY.parquet           its nodes;  traces/, frames/, modules/: its other tables
    DIR/_tracepack_index.json       a cache of which KEY holds which model (rebuilt from models/ if lost)

One file per program and table: adding a model adds files, dropping one removes them, and nothing else
is rewritten. ``KEY`` is the first 32 hex digits of ``sha256(model NUL program)``, ``program`` the
sha256 of the input file's bytes, so a program is found again, unchanged, by its content. Every table
folder is a plain Parquet dataset: DuckDB (``'DIR/nodes/*.parquet'``), pandas and pyarrow
(``'DIR/nodes'``), Polars and Spark read it as it is; files whose names start with ``_`` or ``.`` are
not data, as those readers already assume.

Commit rule: a program's ``models`` file is written last, each file atomically (a temporary file
renamed into place), so a program is in the dataset exactly when its ``models`` file is. A run that
stops half-way (a crash, a kill) can leave files of other tables without one; the next run removes
them before it trusts anything (:meth:`Dataset.recover`), and never skips a program on their account.
Dropping a program removes its ``models`` file first, for the same reason.

The tables are versioned like the format (:data:`TABLES_VERSION`, ``MAJOR.MINOR``): a minor version only
adds columns, at the end of a table, that may be null; anything else is a new major. A reader reads every
minor of its major (columns it does not know are left alone, missing ones are null) and refuses another
major; a writer adds to a dataset of its own major and an older or equal minor (then records its own
minor), and refuses a newer one, whose columns it would leave out.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracepack.errors import InputError, UsageError, VersionError

__all__ = [
    "COLUMNS",
    "FLAT_TABLES",
    "METADATA",
    "TABLES_VERSION",
    "Dataset",
    "Part",
    "part_key",
    "pyarrow_tables",
    "read_table",
]

#: The tables' version (``MAJOR.MINOR``). 1.0 was the flat layout (``DIR/nodes.parquet``, one file per
#: table for all models, no ``program`` column); 2.0 is this dataset.
TABLES_VERSION = (2, 0)
FORMAT = "tracepack-tables"
METADATA = "_tracepack_tables.json"
INDEX = "_tracepack_index.json"
LOCK = "_tracepack.lock"

_MODEL = (("model", "string"), ("program", "string"))

#: table -> (column, pyarrow type) in order, version 2.0.
COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "models": (
        *_MODEL,
        ("producer", "string"),
        ("producer_version", "string"),
        ("schema_version", "string"),
        ("nodes", "int64"),
        ("bytes", "int64"),
        ("packed_bytes", "int64"),
    ),
    "nodes": (
        *_MODEL,
        ("index", "int64"),
        ("name", "string"),
        ("op", "string"),
        ("op_name", "string"),
        ("module", "int64"),
        ("module_path", "string"),
        ("module_type", "string"),
        ("trace", "int64"),
        ("file", "string"),
        ("line", "int64"),
        ("function", "string"),
    ),
    "traces": (*_MODEL, ("trace", "int64"), ("frames", "int64"), ("text", "string")),
    "frames": (
        *_MODEL,
        ("trace", "int64"),
        ("depth", "int64"),
        ("file", "string"),
        ("line", "int64"),
        ("function", "string"),
        ("code", "string"),
    ),
    "modules": (
        *_MODEL,
        ("module", "int64"),
        ("parent", "int64"),
        ("depth", "int64"),
        ("key", "string"),
        ("path", "string"),
        ("type", "string"),
        ("method", "string"),
    ),
}
#: The tables in the order a program's files are written: ``models`` last (it commits the program).
WRITE_ORDER = ("nodes", "traces", "frames", "modules", "models")
#: The files of the 1.0 layout.
FLAT_TABLES = tuple(f"{name}.parquet" for name in COLUMNS)


def version_text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def part_key(model: str, program: str) -> str:
    """The file name (without ``.parquet``) of the program ``program`` exported as ``model``."""
    return hashlib.sha256(f"{model}\0{program}".encode()).hexdigest()[:32]


def _pyarrow() -> Any:
    try:
        pa = importlib.import_module("pyarrow")
        importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise UsageError("writing Parquet needs pyarrow: pip install 'tracepack[parquet]'", where="export") from None
    return pa


def arrow_schema(table: str) -> Any:
    pa = _pyarrow()
    meta = {b"tracepack.tables_version": version_text(TABLES_VERSION).encode()}
    return pa.schema([(col, getattr(pa, kind)()) for col, kind in COLUMNS[table]], metadata=meta)


def pyarrow_tables(columns: Mapping[str, Mapping[str, list[Any]]]) -> dict[str, Any]:
    """Each table's columns (plain lists, every column of :data:`COLUMNS`) as a pyarrow Table."""
    pa = _pyarrow()
    out = {}
    for name, cols in COLUMNS.items():
        given = columns[name]
        out[name] = pa.table({col: given[col] for col, _ in cols}, schema=arrow_schema(name))
    return out


def parquet_bytes(table: Any) -> bytes:
    """A pyarrow Table as Parquet file bytes (zstd), the same bytes for the same rows."""
    pa = _pyarrow()
    sink = pa.BufferOutputStream()
    pa.parquet.write_table(table, sink, compression="zstd")
    return bytes(sink.getvalue().to_pybytes())


@dataclass
class Part:
    """One program in the dataset: its files' ``key``, ``model`` name, content hash and rows per table."""

    key: str
    model: str
    program: str
    rows: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"model": self.model, "program": self.program, "rows": self.rows}


def write_part(folder: str | os.PathLike[str], key: str, tables: Mapping[str, Any], *, durable: bool = False) -> None:
    """Write a program's tables (pyarrow Tables) as ``folder/TABLE/KEY.parquet``, each atomically,
    ``models`` last: the program is committed when that file takes its name."""
    from tracepack.io.files import write_atomic

    root = Path(folder)
    for name in WRITE_ORDER:
        (root / name).mkdir(exist_ok=True)
        write_atomic(root / name / f"{key}.parquet", parquet_bytes(tables[name]), durable=durable)


def _read_json(path: Path) -> Any:
    from tracepack.io.guard import parse_json

    try:
        data = path.read_bytes()
        return parse_json(lambda: json.loads(data), data, str(path), UsageError)
    except InputError:
        raise  # nested or numbered past the budgets, said with the byte offset
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the dataset's metadata: {exc}", source=str(path)) from None


def check_version(found: tuple[int, int], *, writing: bool, source: str) -> None:
    """Refuse a dataset of another major, and (``writing``) of a newer minor."""
    ours = version_text(TABLES_VERSION)
    theirs = version_text(found)
    if found[0] != TABLES_VERSION[0]:
        newer = found[0] > TABLES_VERSION[0]
        raise VersionError(
            f"tables version {theirs} is {'newer' if newer else 'older'} than this tracepack's {ours}",
            source=source,
            expected="upgrade tracepack to read it" if newer else "export it again with -f (replaces it)",
        )
    if writing and found[1] > TABLES_VERSION[1]:
        raise VersionError(
            f"tables version {theirs} was written by a newer tracepack (this one writes {ours}, without the "
            "columns added since)",
            source=source,
            expected="upgrade tracepack to add to it",
        )


def _parse_version(value: Any, source: str) -> tuple[int, int]:
    major, dot, minor = str(value).partition(".")
    if not (dot and major.isdigit() and minor.isdigit()):
        raise VersionError(f"tables version {value!r}", source=source, expected="MAJOR.MINOR")
    return int(major), int(minor)


class Dataset:
    """A folder of tables (see the module's docstring): open it with :meth:`open`."""

    def __init__(self, path: Path, version: tuple[int, int]) -> None:
        self.path = path
        self.version = version
        self._lock: Any = None

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, create: bool = False, replace: bool = False, durable: bool = False
    ) -> Dataset:
        """The dataset at ``path``; ``create``: make it when the folder is missing or empty (else a
        UsageError); ``replace``: a folder of 1.0 tables (``DIR/nodes.parquet``) is replaced, else refused."""
        root = Path(path)
        meta_path = root / METADATA
        if root.exists() and not root.is_dir():
            raise UsageError("exists and is not a folder", source=str(root), where="-o")
        if meta_path.exists():
            meta = _read_json(meta_path)
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise UsageError("not a tracepack tables dataset", source=str(meta_path), expected=f"format {FORMAT!r}")
            version = _parse_version(meta.get("version"), str(meta_path))
            if not (replace and version[0] < TABLES_VERSION[0]):
                check_version(version, writing=create, source=str(root))
                return cls(root, version)
            for name in COLUMNS:  # an older major, replaced (-f): its tables go
                shutil.rmtree(root / name, ignore_errors=True)
            for name in (INDEX, METADATA):
                with contextlib.suppress(FileNotFoundError):
                    (root / name).unlink()
        flat = [root / name for name in FLAT_TABLES if (root / name).exists()]
        if flat:
            if not replace:
                raise UsageError(
                    f"{flat[0]} exists: tables of version 1.0 (one file per table); pass -f/--force to replace "
                    "them with a dataset of version 2.0",
                    where="export",
                )
            for old in flat:
                old.unlink()
        if not create:
            raise UsageError(
                "no tables here", source=str(root), expected=f"a folder `tracepack export` wrote ({METADATA})"
            )
        if root.exists() and any(p.name not in (*COLUMNS, LOCK) for p in root.iterdir()):
            raise UsageError("is a folder that holds other files", source=str(root), expected="a new or empty folder")
        root.mkdir(parents=True, exist_ok=True)
        dataset = cls(root, TABLES_VERSION)
        dataset._write_metadata(durable=durable)
        return dataset

    # -- metadata, lock, index -------------------------------------------------------------------

    def _write_metadata(self, *, durable: bool = False) -> None:
        from tracepack import __version__
        from tracepack.io.files import write_atomic

        meta = {
            "format": FORMAT,
            "version": version_text(TABLES_VERSION),
            "written_by": f"tracepack {__version__}",
            "layout": "TABLE/KEY.parquet, one file per program and table; KEY = sha256(model NUL program)[:32]; "
            "program = sha256 of the input's bytes; a program is in the dataset when its models file is",
            "tables": {name: [list(c) for c in cols] for name, cols in COLUMNS.items()},
        }
        write_atomic(self.path / METADATA, (json.dumps(meta, indent=1) + "\n").encode(), durable=durable)
        self.version = TABLES_VERSION

    def upgrade_metadata(self, *, durable: bool = False) -> None:
        """Record this tracepack's minor version when it is newer than the dataset's (before writing)."""
        if self.version != TABLES_VERSION:
            self._write_metadata(durable=durable)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the dataset's lock (one writer at a time; a second one is refused, not made to wait)."""
        try:
            import fcntl
        except ImportError:  # no advisory locks here (Windows): one writer is the caller's business
            yield
            return
        fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise UsageError(
                    "another tracepack export is writing this dataset", source=str(self.path), expected="one at a time"
                ) from None
            yield
        finally:
            os.close(fd)

    def _keys(self, table: str) -> set[str]:
        folder = self.path / table
        if not folder.is_dir():
            return set()
        return {
            p.name[: -len(".parquet")]
            for p in folder.iterdir()
            if p.name.endswith(".parquet") and p.name[0] not in "._"
        }

    def parts(self) -> dict[str, Part]:
        """The programs in the dataset (those with a ``models`` file), by key: from the index where it
        agrees with the folder, from the files themselves where it does not."""
        keys = self._keys("models")
        index: dict[str, Part] = {}
        # The index is a cache: unreadable (even nested past the stack), it is rebuilt from the files.
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            raw = json.loads((self.path / INDEX).read_bytes())
            for key, p in raw["parts"].items():
                if key in keys:
                    index[key] = Part(
                        key, str(p["model"]), str(p["program"]), {k: int(v) for k, v in p["rows"].items()}
                    )
        missing = sorted(keys - set(index))
        if missing:
            pq = importlib.import_module("pyarrow.parquet")

            for key in missing:
                t = pq.read_table(self.path / "models" / f"{key}.parquet", columns=["model", "program"])
                model, program = t.column("model")[0].as_py(), t.column("program")[0].as_py()
                rows = {name: self._rows(name, key) for name in COLUMNS}
                index[key] = Part(key, model, program, rows)
        return index

    def _rows(self, table: str, key: str) -> int:
        pq = importlib.import_module("pyarrow.parquet")

        path = self.path / table / f"{key}.parquet"
        return int(pq.read_metadata(path).num_rows) if path.exists() else 0

    def save_index(self, parts: Mapping[str, Part], *, durable: bool = False) -> None:
        from tracepack.io.files import write_atomic

        value = {"parts": {k: parts[k].as_json() for k in sorted(parts)}}
        write_atomic(self.path / INDEX, json.dumps(value, separators=(",", ":")).encode(), durable=durable)

    # -- repair and removal ----------------------------------------------------------------------

    def recover(self) -> list[Path]:
        """Remove the files of programs that were never committed (a run stopped between a program's
        files and its ``models`` file): the files removed."""
        committed = self._keys("models")
        removed = []
        for name in COLUMNS:
            if name == "models":
                continue
            for key in sorted(self._keys(name) - committed):
                path = self.path / name / f"{key}.parquet"
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                removed.append(path)
        return removed

    def drop(self, keys: Iterable[str]) -> int:
        """Remove programs: each one's ``models`` file first (it leaves the dataset then), then the rest."""
        n = 0
        for key in keys:
            for name in ("models", *WRITE_ORDER[:-1]):
                with contextlib.suppress(FileNotFoundError):
                    (self.path / name / f"{key}.parquet").unlink()
            n += 1
        return n


def read_table(path: str | os.PathLike[str], table: str) -> Any:
    """One table of the dataset at ``path`` as a pyarrow Table, committed programs only, in the columns
    of this tracepack's version (a newer minor's extra columns are left out, an older one's missing
    columns are null)."""
    pads = importlib.import_module("pyarrow.dataset")

    dataset = Dataset.open(path)
    keys = set(dataset.parts())
    folder = Path(path) / table
    files = sorted(str(folder / f"{k}.parquet") for k in keys if (folder / f"{k}.parquet").exists())
    schema = arrow_schema(table)
    if not files:
        return schema.empty_table()
    return pads.dataset(files, schema=schema, format="parquet").to_table()
