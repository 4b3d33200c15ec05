"""Documents as flat tables for analytics across many models (``tracepack export --format parquet``).

One row per item, every row tagged with the ``model`` it came from (the file name given), so one query
covers a whole model zoo. The tables (``docs/tables.md`` has every column):

``models``   model, producer, producer_version, schema_version, nodes
``nodes``    model, index, name, op, module, module_path, module_type, trace, file, line, function
             (``file``/``line``/``function``: the innermost frame outside installed packages)
``traces``   model, trace, frames, text: each distinct stack that a node or debug handle uses, rendered
``frames``   model, trace, depth, file, line, function, code: the frames of each trace, outermost first
``modules``  model, module, parent, depth, key, path, type, method: the module trie

``trace`` and ``module`` are row numbers of the document's stack and module tries: they join ``nodes``
to ``traces``/``frames`` and to ``modules`` within one model. Writing Parquet needs ``pyarrow`` (the
``parquet`` extra); :func:`collect` itself needs nothing.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tracepack.document import Document
from tracepack.errors import UsageError
from tracepack.query import is_library_file, module_path

__all__ = ["TABLES", "collect", "write_parquet"]

#: table -> (column, type) in order; types are pyarrow's names.
TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "models": (
        ("model", "string"),
        ("producer", "string"),
        ("producer_version", "string"),
        ("schema_version", "string"),
        ("nodes", "int64"),
    ),
    "nodes": (
        ("model", "string"),
        ("index", "int64"),
        ("name", "string"),
        ("op", "string"),
        ("module", "int64"),
        ("module_path", "string"),
        ("module_type", "string"),
        ("trace", "int64"),
        ("file", "string"),
        ("line", "int64"),
        ("function", "string"),
    ),
    "traces": (("model", "string"), ("trace", "int64"), ("frames", "int64"), ("text", "string")),
    "frames": (
        ("model", "string"),
        ("trace", "int64"),
        ("depth", "int64"),
        ("file", "string"),
        ("line", "int64"),
        ("function", "string"),
        ("code", "string"),
    ),
    "modules": (
        ("model", "string"),
        ("module", "int64"),
        ("parent", "int64"),
        ("depth", "int64"),
        ("key", "string"),
        ("path", "string"),
        ("type", "string"),
        ("method", "string"),
    ),
}

Columns = dict[str, list[Any]]


def _empty() -> dict[str, Columns]:
    return {name: {col: [] for col, _ in cols} for name, cols in TABLES.items()}


def _add(table: Columns, **row: Any) -> None:
    for col, values in table.items():
        values.append(row[col])


def _add_document(out: dict[str, Columns], model: str, doc: Document) -> None:
    raw = doc.raw
    producer = raw.header.producer
    _add(
        out["models"],
        model=model,
        producer=None if producer is None else producer.name,
        producer_version=None if producer is None else producer.version,
        schema_version=f"{doc.version[0]}.{doc.version[1]}",
        nodes=len(doc),
    )
    traces: dict[int, int] = {}  # stack row -> style, first use
    for node in doc.nodes():
        n = node.raw
        frames = node.frames
        keys = node.modules
        user = next((f for f in reversed(frames) if not is_library_file(f.file)), None)
        _add(
            out["nodes"],
            model=model,
            index=node.index,
            name=node.name,
            op=node.target,
            module=n.module,
            module_path=module_path(keys),
            module_type=next((k.type for k in reversed(keys) if k.path), keys[-1].type if keys else ""),
            trace=n.stack,
            file=None if user is None else user.file,
            line=None if user is None else user.line,
            function=None if user is None else user.name,
        )
        if n.stack:
            traces.setdefault(n.stack, int(n.stack_style))
    for stack in raw.debug_handles.stack:
        if stack:
            traces.setdefault(stack, 0)
    for stack in sorted(traces):
        frames = doc.frames(stack)
        _add(out["traces"], model=model, trace=stack, frames=len(frames), text=doc.stack_trace(stack, traces[stack]))
        for depth, f in enumerate(frames):
            _add(
                out["frames"],
                model=model,
                trace=stack,
                depth=depth,
                file=f.file,
                line=f.line,
                function=f.name,
                code=f.text,
            )
    t, s = raw.modules, raw.strings
    depths = [0] * len(t.parent)
    for row in range(1, len(t.parent)):
        depths[row] = depths[t.parent[row]] + 1 if t.parent[row] else 1
        _add(
            out["modules"],
            model=model,
            module=row,
            parent=t.parent[row],
            depth=depths[row],
            key=s[t.key[row]],
            path=s[t.path[row]],
            type=s[t.type[row]],
            method=s[t.method[row]] if t.method else "",
        )


def collect(documents: Iterable[tuple[str, Document]]) -> dict[str, Columns]:
    """The tables of ``(model name, document)`` pairs, as columns of plain Python values."""
    out = _empty()
    seen: set[str] = set()
    for model, doc in documents:
        if model in seen:
            raise UsageError(f"model {model!r} is given twice", where="export")
        seen.add(model)
        _add_document(out, model, doc)
    return out


def _pyarrow() -> Any:
    try:
        pyarrow = importlib.import_module("pyarrow")
        importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise UsageError("writing Parquet needs pyarrow: pip install 'tracepack[parquet]'", where="export") from None
    return pyarrow


def write_parquet(
    tables: dict[str, Columns], folder: str | os.PathLike[str], *, durable: bool = False
) -> dict[str, int]:
    """Write each table to ``folder/<table>.parquet`` (atomically; synced to disk when ``durable``);
    return the rows per table."""
    pa = _pyarrow()
    from tracepack.container import atomic_write

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    rows = {}
    for name, columns in tables.items():
        schema = pa.schema([(col, getattr(pa, kind)()) for col, kind in TABLES[name]])
        table = pa.table(columns, schema=schema)
        sink = pa.BufferOutputStream()
        pa.parquet.write_table(table, sink, compression="zstd")
        atomic_write(out / f"{name}.parquet", sink.getvalue().to_pybytes(), durable=durable)
        rows[name] = table.num_rows
    return rows
