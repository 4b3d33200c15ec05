"""Core commands: ``convert``, ``inspect``, ``trace``, ``expand``, ``demo``."""

from __future__ import annotations

import argparse
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracepack.cli._common import (
    EXIT_OK,
    STDIO,
    Stages,
    add_error_format,
    add_force,
    add_fsync,
    add_jobs,
    add_json,
    check_output,
    display,
    load_any,
    load_archive_file,
    optional,
    parse_version,
    print_json,
    read,
    report,
    write_output,
    zstd_dict,
)
from tracepack.codecs import AUTO, TORCH_CANDIDATES, encode_best
from tracepack.errors import TracepackError, UsageError


def _convert_targets(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(input, output) pairs: ``SRC DST``, or ``SRC... DIR`` (each into DIR/<name>.tpk), as cp does."""
    *sources, dst = args.paths
    if not sources:
        raise UsageError("expected SRC... DST", where="convert")
    if len(sources) == 1 and not Path(dst).is_dir():
        return [(sources[0], dst)]
    if not Path(dst).is_dir():
        raise UsageError(f"{len(sources)} inputs need a folder to write into", source=dst, expected="a folder")
    if STDIO in sources:
        raise UsageError("- (standard input) converts alone: tracepack convert - OUT.tpk", where="convert")
    pairs = [(src, str(Path(dst) / (Path(src).name.split(".")[0] + ".tpk"))) for src in sources]
    outs = [o for _, o in pairs]
    if len(set(outs)) != len(outs):
        dup = next(o for o in outs if outs.count(o) > 1)
        raise UsageError(f"two inputs would both be written to {dup}", where="convert")
    return pairs


def cmd_convert(args: argparse.Namespace) -> int:
    pairs = _convert_targets(args)
    for _, out in pairs:  # refuse before any work, not half-way through
        check_output(out, force=args.force)
    if len(pairs) > 1:  # every core (-j), one line per failing input, the rest go on
        from tracepack.cli._many import run_many

        return run_many(pairs, _convert, args, desc="convert")
    ((src, dst),) = pairs
    info, text = _convert(src, dst, args)
    report(dst, text, info, as_json=args.json)
    return EXIT_OK


def _convert(src: str, dst: str, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """Convert ``src`` into ``dst``: what was written (``--json``'s form) and the line that says so."""
    from tracepack.codecs import resolve
    from tracepack.container import MAGIC
    from tracepack.formats import read_document

    with Stages(display(src), 4) as stages:
        stages.step("reading")
        doc = load_archive_file(src)  # a .pt2 / .pt of any size: member by member, never its weights
        raw = b"" if doc is not None else read(src)
        input_bytes = os.stat(src).st_size if doc is not None else len(raw)
        is_tpk = raw[: len(MAGIC)] == MAGIC
        zdict = None if args.zstd_dict == "none" else zstd_dict(args.zstd_dict)
        stages.step("decoding")
        if doc is None:
            doc = read_document(raw, source=display(src), zstd_dict=zdict if is_tpk else None)
        torch_input = not is_tpk
        # --codec flatbuffers is the column layout: reported (and in inspect) as flatbuffers-columns.
        # Torch inputs: codecs.encode_best weighs the candidates (the smallest file, or a faster codec's
        # within 5% of it), at the level for the payload's size, with the built-in dictionary.
        codecs = [resolve(args.codec)] if args.codec else list(TORCH_CANDIDATES) if torch_input else ["msgpack"]
        chosen_dict: Any = zdict
        if torch_input and args.zstd_dict is None:
            chosen_dict = AUTO  # built in: readers need no file
        version = parse_version(args.to_version)
        stages.step(f"encoding ({', '.join(codecs)})")
        encoded = encode_best(
            doc,
            codecs=codecs,
            compression=args.compression,
            level=args.level,
            zstd_dict=chosen_dict,
            version=version,
            block_checksums=args.block_checksums,
        )
        data = encoded.data
        stages.step("writing")
        write_output(dst, data, force=args.force, durable=args.fsync)
    info = {"input": display(src), "output": dst, "bytes": len(data), "input_bytes": input_bytes, "nodes": len(doc)}
    info |= {"codec": encoded.codec, "compression": args.compression, "zstd_dict_id": encoded.dict_id}
    info |= {"level": encoded.level, "block_checksums": encoded.block_checksums}
    return info, f"wrote {dst}: {len(data)} bytes ({encoded.describe()})"


def _as_written(doc: Any, written: tuple[int, int]) -> tuple[Any, tuple[int, int]]:
    """The document in the schema version its file was written with, when this build has that release: a
    file of an older release is measured as it is laid out, not as the current version would write it."""
    from tracepack import migrations
    from tracepack.errors import TracepackError
    from tracepack.versions import RELEASED

    if written == doc.version or written not in RELEASED:
        return doc.raw, doc.version
    try:
        return migrations.downgrade(doc.raw, doc.version, written), written
    except TracepackError:
        return doc.raw, doc.version


def _breakdown(raw: Any, codec: str, version: tuple[int, int]) -> dict[str, int]:
    """Encoded bytes per top-level table, with the file's codec family."""
    import msgspec

    enc: Callable[[Any], bytes] = msgspec.msgpack.encode if codec != "json" else msgspec.json.encode
    out = {}
    for name in raw.__struct_fields__:
        value = getattr(raw, name)
        if codec == "json":
            from tracepack.versions import generated

            conv = generated(version).convert
            value = msgspec.to_builtins(getattr(conv.to_json(raw), name))
        out[name] = len(enc(value))
    return out


def cmd_inspect(args: argparse.Namespace) -> int:
    infos = [_inspect(path, args) for path in args.files]
    if args.json:
        print_json(infos[0] if len(infos) == 1 else infos)
    return EXIT_OK


def _inspect(path: str, args: argparse.Namespace) -> dict[str, Any]:
    import tracepack
    from tracepack.container import read_header

    data = read(path)
    name = display(path)
    if data[1:4] != b"TPK":  # an ExecuTorch ETRecord, .pte or ETDump has its own summary
        from tracepack.runtime.describe import describe_executorch, render_description

        summary = describe_executorch(data, source=name)
        if summary is not None:
            if not args.json:
                print("\n".join(render_description(summary)))
            return summary
    header = read_header(data, source=name)
    doc = tracepack.loads(data, source=name, zstd_dict=zstd_dict(args.zstd_dict))
    written_raw, written = _as_written(doc, header.schema_version)
    sizes = doc.table_sizes()
    raw_version = header.schema_version
    info: dict[str, Any] = {
        "file": name,
        "file_bytes": len(data),
        "container_version": header.container_version,
        "schema_version": f"{raw_version[0]}.{raw_version[1]}",
        "codec": header.codec,
        "compression": header.compression,
        "zstd_dict_id": header.dict_id,
        "flags": header.flags,
        "block_checksums": header.block_checksums,
        "payload_bytes": header.payload_length,
        "raw_bytes": header.raw_length,
        "producer": None
        if doc.raw.header.producer is None
        else {"name": doc.raw.header.producer.name, "version": doc.raw.header.producer.version},
        "nodes": len(doc),
        "rows": sizes,
        "bytes": _breakdown(written_raw, header.codec, written),
    }
    if header.block_checksums:  # the table was checked by loads above
        info["block_size"], info["blocks"] = struct.unpack_from("<IQ", data, header.block_table_at + 4)
    from tracepack import dictionaries
    from tracepack.sizes import column_sizes, table_sizes

    # Compressed per table and column, with the file's dictionary (given, or built in).
    zdict = zstd_dict(args.zstd_dict) or (dictionaries.by_id(header.dict_id) if header.dict_id else None)
    columns = column_sizes(written_raw, header.codec, written, zstd_dict=zdict)
    compressed = table_sizes(columns)
    info["compressed_bytes"] = {t: c for t, (_, c) in compressed.items()}
    if header.codec in ("flatbuffers-rows", "flatbuffers-columns"):  # the FlatBuffers bytes, not a MessagePack stand-in
        info["bytes"] = {t: b for t, (b, _) in compressed.items()}
    info["columns"] = [
        {"table": c.table, "column": c.column, "bytes": c.raw_bytes, "compressed_bytes": c.compressed_bytes}
        for c in columns
    ]
    if args.json:
        return info
    print(f"{name}: tracepack container v{header.container_version}, schema {info['schema_version']}")
    print(f"  codec {header.codec}, compression {header.compression}", end="")
    print(f" (dictionary {header.dict_id})" if header.dict_id else "")
    print(f"  {len(data)} bytes on disk, payload {header.payload_length} stored / {header.raw_length} raw")
    if header.block_checksums:
        size, count = info["block_size"], info["blocks"]
        print(f"  flags {header.flags:#x}: block checksums, {count} blocks of {size} bytes (lazy reads verify each)")
    else:
        print(f"  flags {header.flags:#x}: whole-payload checksum only")
    if info["producer"]:
        print(f"  producer {info['producer']['name']} {info['producer']['version']}")
    print(f"  {len(doc)} nodes")
    print(f"  {'table':<14} {'rows':>10} {'bytes':>12} {'zstd-19':>10}")
    for table, nbytes in info["bytes"].items():
        rows = sizes.get(table, "")
        packed = compressed.get(table, (0, 0))[1]
        print(f"  {table:<14} {rows!s:>10} {nbytes:>12} {packed:>10}")
    what = {"columnar": "columns", "flatbuffers-rows": "columns (FlatBuffers)", "flatbuffers-columns": "columns"}.get(
        header.codec, "columns (MessagePack)"
    )
    print(f"  (zstd-19: each table's {what} compressed on its own{', with the dictionary' if zdict else ''})")
    if args.columns:
        print(f"  {'column':<58} {'bytes':>10} {'zstd-19':>10}")
        for c in sorted(columns, key=lambda c: -c.compressed_bytes):
            label = f"{c.table}.{c.column}" if c.column else c.table
            print(f"  {label:<58} {c.raw_bytes:>10} {c.compressed_bytes:>10}")
    return info


def cmd_trace(args: argparse.Namespace) -> int:
    path = args.file
    # "#I" is an index when I is ASCII digits (spec §11.3); any other word, "#²" and "#-1" included, is a name
    keys: list[str | int] = [
        int(k[1:]) if k.startswith("#") and k[1:].isascii() and k[1:].isdigit() else k for k in args.nodes
    ]
    found: list[dict[str, Any]] = []
    try:
        if path != STDIO and _is_plain_flatbuffers(path):
            # Random access: map the file and render these nodes, without decoding the rest.
            import tracepack

            with tracepack.open(path) as lazy_doc:
                found += [_node_json(lazy_doc.node(key)) for key in keys]
        else:
            doc = load_any(path, zstd_dict=zstd_dict(args.zstd_dict))
            found += [_node_json(doc.node(key)) for key in keys]
    except TracepackError as exc:
        raise exc.with_source(display(path)) from None
    if args.json:
        print_json(found[0] if len(found) == 1 else found)
    else:
        for node in found:
            _print_node(node)
    return EXIT_OK


def _node_json(node: Any) -> dict[str, Any]:
    return {
        "index": node.index,
        "name": node.name,
        "target": node.target,
        "stack_trace": node.stack_trace,
        "frames": [{"file": f.file, "line": f.line, "function": f.name, "text": f.text} for f in node.frames],
        "nn_module_stack": node.module_stack,
        "module_hierarchy": node.module_hierarchy or None,
    }


def _print_node(node: dict[str, Any]) -> None:
    trace, module = node["stack_trace"], node["nn_module_stack"]
    print(f"node {node['name']} ({node['target']})")
    print("stack trace:")
    print(trace if trace is not None else "  (none)")
    print("module hierarchy:")
    print(f"  nn_module_stack: {module if module is not None else '(none)'}")
    print(f"  {node['module_hierarchy'] or '(none)'}")


def _is_plain_flatbuffers(path: str) -> bool:
    """Whether ``path`` is an uncompressed FlatBuffers .tpk (read lazily)."""
    from tracepack.container import HEADER_SIZE, read_header
    from tracepack.io.files import peek

    try:
        header = read_header(peek(path, HEADER_SIZE), source=path)  # a FIFO peeks as b"": never waited on
    except TracepackError:
        return False  # the full reader reports what is wrong
    from tracepack.lazy import LAZY_CODECS

    return header.codec in LAZY_CODECS and header.compression == "none"


def cmd_expand(args: argparse.Namespace) -> int:
    check_output(args.out, force=args.force)
    try:
        return _expand(args)
    except TracepackError as exc:  # what the document holds is wrong: name it (an archive's own errors name it)
        raise exc.with_source(display(args.file)) from None


def _expand(args: argparse.Namespace) -> int:
    from tracepack.torch.export import model_json as export_json

    doc = load_any(args.file, zstd_dict=zstd_dict(args.zstd_dict))
    if args.archive is not None:
        archives = optional("tracepack.torch.archives")
        if archives is None:
            raise UsageError("rebuilding archives is not part of this build", where="--archive")
        if args.out != "-":  # file to file: the weights stream through, never whole in memory
            size = archives.expand_archive_file(
                doc, args.archive, args.out, debug_format=args.debug_format, overwrite=args.force, durable=args.fsync
            )
            info = {"input": display(args.file), "output": args.out, "bytes": size}
            report(args.out, f"wrote {args.out}: {size} bytes", info, as_json=args.json)
            return EXIT_OK
        data = archives.expand_archive(doc, args.archive, debug_format=args.debug_format)
    else:
        data = export_json.export_model_json(doc)
    write_output(args.out, data, force=args.force, durable=args.fsync)
    info = {"input": display(args.file), "output": args.out, "bytes": len(data)}
    report(args.out, f"wrote {args.out}: {len(data)} bytes", info, as_json=args.json)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from tracepack.demo import run_demo

    return run_demo(quick=args.quick)


def register(sub: Any) -> None:
    """Add this module's commands to the ``tracepack`` parser."""
    from tracepack.codecs import WRITE_NAMES
    from tracepack.container import COMPRESSIONS

    c = sub.add_parser(
        "convert",
        help="convert a model.json, .pt2, .pt or .tpk into a .tpk",
        usage="tracepack convert [options] SRC DST\n       tracepack convert [options] SRC... FOLDER",
    )
    c.add_argument(
        "paths",
        nargs="+",
        metavar="SRC... DST",
        help="inputs (.tpk, torch.export model.json or .pt2, TorchScript .pt; - for stdin) and the output .tpk "
        "(- for stdout), or a folder for several inputs (each written as <name>.tpk); written atomically",
    )
    c.add_argument(
        "--codec",
        choices=list(WRITE_NAMES),
        default=None,
        help="payload codec; flatbuffers is the FlatBuffers column layout (flatbuffers-columns, codec id 4), "
        "flatbuffers-rows the row layout (id 2) (default: for torch inputs the smallest of msgpack, columnar and "
        "flatbuffers-columns, or the faster one when within 5%% of it and the smallest is over 4 KiB; else msgpack)",
    )
    c.add_argument("--compression", choices=list(COMPRESSIONS), default="zstd", help="default zstd")
    c.add_argument(
        "--level",
        type=int,
        default=None,
        help="zstd level, -7..22 (default: by payload size, 19 up to 1 MiB, 9 up to 16 MiB, 3 beyond)",
    )
    c.add_argument(
        "--zstd-dict",
        metavar="FILE|NAME",
        help="a zstd dictionary file or built-in name to compress with; `none` for none "
        "(default: torch inputs use the newest built-in one, which readers need no file for)",
    )
    c.add_argument("--to-version", metavar="X.Y", help="write an older released schema version (if lossless)")
    add_jobs(c)
    g = c.add_mutually_exclusive_group()
    g.add_argument(
        "--block-checksums",
        dest="block_checksums",
        action="store_true",
        default=None,
        help="add a CRC-32 per 16 KiB block of the payload (container flag bit 0), so that a lazy lookup "
        "(tracepack trace, tracepack.open) verifies only the blocks it reads. Default: on for uncompressed "
        "FlatBuffers (--codec flatbuffers|flatbuffers-rows --compression none), off otherwise",
    )
    g.add_argument(
        "--no-block-checksums",
        dest="block_checksums",
        action="store_false",
        help="no block table: the header's whole-payload CRC-32 only (what builds before block checksums read)",
    )
    add_force(c)
    add_fsync(c)
    add_json(c)
    c.set_defaults(func=cmd_convert)

    i = sub.add_parser(
        "inspect", help="show a .tpk's header, version, codec, rows, bytes and compressed bytes per table and column"
    )
    i.add_argument("files", nargs="+", metavar="FILE", help=".tpk files; - for stdin")
    add_json(i)
    i.add_argument("--columns", action="store_true", help="also list every column, largest compressed first")
    i.add_argument("--zstd-dict", metavar="FILE", help="the dictionary the file was compressed with")
    i.set_defaults(func=cmd_inspect)

    t = sub.add_parser("trace", help="print one node's stack trace and module hierarchy")
    t.add_argument("file", help="a .tpk (uncompressed FlatBuffers files are read lazily) or a model.json")
    t.add_argument("nodes", nargs="+", metavar="NODE", help="node name, or #INDEX (several may be given)")
    t.add_argument("--zstd-dict", metavar="FILE", help="the dictionary the file was compressed with")
    add_error_format(t)
    add_json(t)
    t.set_defaults(func=cmd_trace)

    e = sub.add_parser("expand", help="write the legacy torch file back (model.json byte for byte)")
    e.add_argument("file", help="a .tpk converted from a torch artifact")
    e.add_argument("out", help="output path (written atomically; - for stdout)")
    e.add_argument("--archive", metavar="ORIGINAL", help="for TorchScript: the original .pt to rebuild around")
    e.add_argument("--debug-format", choices=["legacy", "table"], default=None, help="debug_pkl layout to write")
    e.add_argument("--zstd-dict", metavar="FILE", help="the dictionary the file was compressed with")
    add_force(e)
    add_fsync(e)
    add_json(e)
    e.set_defaults(func=cmd_expand)

    d = sub.add_parser("demo", help="convert the bundled torch.export sample and compare with the legacy form")
    d.add_argument("--quick", action="store_true", help="fewer timing rounds")
    d.set_defaults(func=cmd_demo)
