"""Finding and reading: ``nodes``, ``diff``, ``cat``, ``export``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tracepack.cli._common import (
    EXIT_OK,
    EXIT_PARTIAL,
    STDIO,
    add_error_format,
    add_force,
    add_fsync,
    add_jobs,
    add_json,
    display,
    jobs_option,
    load_any,
    print_json,
    progress,
    read,
    write_output,
    zstd_dict,
)
from tracepack.errors import TracepackError, UsageError

EXIT_DIFFERENT = 1  # `diff --exit-code`, as git diff and diff(1) have it


def _where(f: tuple[str, int, str, str] | None) -> str:
    return "-" if f is None else f"{f[0]}:{f[1]}"


def cmd_nodes(args: argparse.Namespace) -> int:
    """``tracepack nodes FILE... [--op OP] [--module PATH] [--source FILE[:LINE]] [--match RE] [--json]``."""
    from tracepack.query import NodeFilter, find_nodes

    where = NodeFilter(op=args.op, module=args.module, source=args.source, match=args.match)
    zdict = zstd_dict(args.zstd_dict)
    rows: list[dict[str, Any]] = []
    many = len(args.files) > 1
    for path in progress(args.files, total=len(args.files), desc="nodes"):
        try:
            doc = load_any(path, zstd_dict=zdict)
            found = list(find_nodes(doc, where))
        except TracepackError as exc:
            raise exc.with_source(display(path)) from None
        if not found:
            _why_nothing(doc, where, display(path))
        if args.json:
            rows += [{"file": display(path), **r.as_json()} for r in found]
            continue
        for r in found:
            prefix = f"{display(path)}: " if many else ""
            print(f"{prefix}{r.name}\t{r.target}\t{r.module or '(root)'}\t{_where(r.user_source or r.source)}")
    if args.json:
        print_json(rows)
    return EXIT_OK


def _why_nothing(doc: Any, where: Any, name: str) -> None:
    """Nothing matched: when a filter names an op or module the file does not have, say so on stderr,
    with the close ones (the output itself stays empty, as grep's does)."""
    from tracepack.errors import did_you_mean
    from tracepack.query import module_path, rows_of

    rows = list(rows_of(doc))
    if not rows:
        what = "a TorchScript archive without mobile debug info: its source ranges are in `tracepack cat`"
        print(
            f"tracepack: {name}: no graph nodes and no debug handles"
            + (f" ({what})" if doc.raw.ranges.start[1:] else ""),
            file=sys.stderr,
        )
        return
    notes = []
    if where.op is not None:
        from tracepack.analysis.ops import op_matches, op_words, profiler_name

        targets = {n.target for n in rows}
        if not any(op_matches(where.op, t) for t in targets):
            ops = {w for t in targets for w in (t, profiler_name(t), *op_words(t))}
            notes.append(f"no op {where.op!r}{did_you_mean(where.op, sorted(ops))}")
    if where.module:
        paths = {module_path(n.modules) for n in rows}
        prefixes = {".".join(p.split(".")[:k]) for p in paths for k in range(1, p.count(".") + 2)}
        if where.module not in prefixes:
            notes.append(f"no module {where.module!r}{did_you_mean(where.module, sorted(prefixes))}")
    for note in notes:
        print(f"tracepack: {name}: {note}", file=sys.stderr)


def cmd_diff(args: argparse.Namespace) -> int:
    """``tracepack diff A B [--by name|structure] [--json] [--exit-code]``."""
    from tracepack.diff import diff_documents, format_diff

    if args.a == STDIO and args.b == STDIO:
        raise UsageError("only one of A and B can be standard input", where="diff")
    zdict = zstd_dict(args.zstd_dict)
    d = diff_documents(load_any(args.a, zstd_dict=zdict), load_any(args.b, zstd_dict=zdict), by=args.by)
    if args.json:
        print_json({"a": display(args.a), "b": display(args.b), **d.as_json()})
    else:
        print("\n".join(format_diff(d, display(args.a), display(args.b))))
    return EXIT_DIFFERENT if args.exit_code and not d.same else EXIT_OK


def cmd_cat(args: argparse.Namespace) -> int:
    """``tracepack cat FILE... [--raw] [-o OUT]``: plain JSON (strings resolved), or the bare payload."""
    if args.raw:
        return _cat_raw(args)
    from tracepack.plain import to_plain

    zdict = zstd_dict(args.zstd_dict)
    docs = []
    for path in args.files:
        try:
            docs.append(to_plain(load_any(path, zstd_dict=zdict)))
        except TracepackError as exc:
            raise exc.with_source(display(path)) from None
    value: Any = docs[0] if len(docs) == 1 else docs
    text = json.dumps(value, ensure_ascii=False, indent=None if args.compact else 2) + "\n"
    write_output(args.output, text.encode(), force=args.force, durable=args.fsync)
    return EXIT_OK


def _cat_raw(args: argparse.Namespace) -> int:
    from tracepack.container import unpack

    if len(args.files) != 1:
        raise UsageError("--raw takes one file", where="cat")
    path = args.files[0]
    data = read(path)
    _, payload = unpack(data, source=display(path), zstd_dict=zstd_dict(args.zstd_dict))
    if args.output == STDIO and sys.stdout.isatty() and not bytes(payload[:1]) == b"{":
        raise UsageError("the payload is binary: not writing it to a terminal (redirect it, or use -o FILE)")
    write_output(args.output, bytes(payload), force=args.force, durable=args.fsync)
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    """``tracepack export --format parquet FILE... -o DIR``: the tables of many programs, as an incremental
    Parquet dataset (one file per program and table; programs already there are skipped)."""
    from tracepack.analysis.zoo import export_tables

    files = list(args.files)
    if args.files_from is not None:
        files += [
            line.strip() for line in read(args.files_from).decode("utf-8", "replace").splitlines() if line.strip()
        ]
    if not files and not args.drop and not args.prune:
        raise UsageError("nothing to do", where="export", expected="FILE..., --files-from, --drop or --prune")
    if args.address is not None and args.engine != "ray":
        raise UsageError("--address is for --engine ray", where="export")

    def failed(outcome: Any) -> None:
        if outcome.status == "failed":
            print(f"tracepack: {outcome.error}", file=sys.stderr)

    summary = export_tables(
        files,
        args.output,
        jobs=jobs_option(args),
        engine=args.engine,
        address=args.address,
        drop=args.drop or (),
        prune=args.prune,
        replace=args.force,
        durable=args.fsync,
        zstd_dict=args.zstd_dict,
        progress=lambda stream, n: progress(stream, total=n, desc="export"),
        on_outcome=failed,
    )
    if args.json:
        print_json(summary.as_json())
    else:
        rows = ", ".join(f"{name} {n}" for name, n in summary.rows.items())
        what = f"{summary.converted} converted, {summary.unchanged} unchanged, {summary.dropped} dropped"
        if summary.failed:
            what += f", {len(summary.failed)} failed"
        print(f"wrote {args.output}: {summary.models} model(s) ({what}); rows: {rows}")
    return EXIT_PARTIAL if summary.failed else EXIT_OK


def register(sub: Any) -> None:
    """Add this module's commands to the ``tracepack`` parser."""
    n = sub.add_parser(
        "nodes",
        help="list or find nodes by op, module path, source line or name",
        description="List the nodes of one or more files (any format tracepack reads), or those that match every "
        "filter given. Each line: name, op, module path, and the innermost source line outside installed packages.",
    )
    n.add_argument("files", nargs="+", metavar="FILE", help="a .tpk, model.json, .pt2 or TorchScript file; - for stdin")
    n.add_argument(
        "--op",
        help="the node's op, as any torch tool spells it: linear, aten.linear, aten::linear (torch.profiler), "
        "aten::linear.default, torch.ops.aten.linear.default",
    )
    n.add_argument("--module", metavar="PATH", help="a module path (blocks.0.attn): nodes in it or its submodules")
    n.add_argument("--source", metavar="FILE[:LINE]", help="nodes with a frame at this file (and line) in their stack")
    n.add_argument("--match", metavar="RE", help="a regular expression searched for in the node's name")
    n.add_argument("--zstd-dict", metavar="FILE", help="the dictionary the files were compressed with")
    add_json(n)
    n.set_defaults(func=cmd_nodes)

    d = sub.add_parser(
        "diff",
        help="compare two graphs: nodes added, removed, changed (op, args, module, stack)",
        description="Compare the graphs of A and B (any formats, codecs and versions): nodes added, removed and "
        "changed (op, args, module path, stack), paired by name or, with --by structure, by position and kind.",
    )
    d.add_argument("a", metavar="A")
    d.add_argument("b", metavar="B")
    d.add_argument("--by", choices=["name", "structure"], default="name", help="how nodes are paired (default name)")
    d.add_argument("--exit-code", action="store_true", help="exit with 1 when the graphs differ (as git diff does)")
    d.add_argument("--zstd-dict", metavar="FILE", help="the dictionary the files were compressed with")
    add_json(d)
    d.set_defaults(func=cmd_diff)

    c = sub.add_parser(
        "cat",
        help="print a document as plain JSON with its strings resolved (--raw: the bare payload)",
        description="Print the document as plain JSON, as jq expects it: the json codec's shape with every string "
        "reference replaced by its text. --raw writes the container's payload instead, decompressed, byte for "
        "byte, for flatc --json, msgpack tools and the like. See docs/cli.md.",
    )
    c.add_argument("files", nargs="+", metavar="FILE", help="any format tracepack reads; - for stdin")
    c.add_argument("--raw", action="store_true", help="the bare payload of a .tpk, decompressed")
    c.add_argument("-o", "--output", default=STDIO, metavar="OUT", help="write here instead of standard output")
    c.add_argument("--compact", action="store_true", help="JSON on one line")
    c.add_argument("--zstd-dict", metavar="FILE", help="the dictionary the file was compressed with")
    add_error_format(c)
    add_force(c)
    add_fsync(c)
    c.set_defaults(func=cmd_cat)

    e = sub.add_parser(
        "export",
        help="write nodes, frames, modules and traces of many models as a Parquet dataset (DuckDB, pandas, Polars)",
        description="Write the nodes, frames, modules and traces of every FILE into the Parquet dataset DIR, one "
        "row per item, with the model's name (the path given) in each row, for DuckDB, pandas, Polars or Spark. "
        "Incremental: a program already in DIR (same name, same content hash) is skipped, a changed one "
        "replaced. Runs on every core (-j), or on a Ray cluster (--engine ray). A failing input is reported "
        "on one line and the rest go on (exit 3). Needs the parquet extra: pip install 'tracepack[parquet]'. "
        "See docs/tables.md.",
    )
    e.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="any format tracepack reads: paths, glob patterns (quoted: expanded here) or URLs fsspec reads",
    )
    e.add_argument("--files-from", metavar="LIST", help="also the inputs named in LIST, one a line (- for stdin)")
    e.add_argument("--format", choices=["parquet"], default="parquet", help="table format (default parquet)")
    e.add_argument("-o", "--output", required=True, metavar="DIR", help="the dataset's folder (made if missing)")
    add_jobs(e)
    e.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="local: worker processes on this machine (default); ray: a Ray Data job (pip install 'tracepack[ray]')",
    )
    e.add_argument(
        "--address", metavar="ADDR", help="with --engine ray: the cluster (ray.init's address; default: a local Ray)"
    )
    e.add_argument("--drop", metavar="MODEL", action="append", help="remove this model's rows from DIR (repeatable)")
    e.add_argument("--prune", action="store_true", help="remove every model of DIR that is not among the inputs")
    e.add_argument("--zstd-dict", metavar="FILE", help="the dictionary the files were compressed with")
    e.add_argument(
        "-f", "--force", action="store_true", help="start afresh: convert every input again (replaces 1.0 tables too)"
    )
    add_fsync(e)
    add_json(e)
    e.set_defaults(func=cmd_export)
