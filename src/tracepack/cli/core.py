"""Core commands: ``convert``, ``inspect``, ``trace``, ``expand``, ``demo``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracepack.cli._common import (
    EXIT_OK,
    load_any,
    optional,
    parse_version,
    read,
    zstd_dict,
)
from tracepack.container import atomic_write
from tracepack.errors import TracepackError, UsageError

#: Codecs ``convert`` tries for a torch input when no ``--codec`` is given; the smallest file wins.
TORCH_CODECS = ("columnar", "msgpack")


def cmd_convert(args: argparse.Namespace) -> int:
    import tracepack
    from tracepack import dictionaries
    from tracepack.container import MAGIC

    is_tpk = _head(args.src, len(MAGIC)) == MAGIC
    zdict = None if args.zstd_dict == "none" else zstd_dict(args.zstd_dict)
    doc = load_any(args.src, zstd_dict=zdict if is_tpk else None)
    torch_input = not is_tpk
    if torch_input and args.zstd_dict is None and args.compression == "zstd":
        zdict = dictionaries.get(dictionaries.DEFAULT)  # built in: readers need no file
    codecs = [args.codec] if args.codec else list(TORCH_CODECS) if torch_input else ["msgpack"]
    version = parse_version(args.to_version)
    best: tuple[bytes, str] | None = None
    for codec in codecs:
        data = tracepack.dumps(
            doc, codec=codec, compression=args.compression, level=args.level, zstd_dict=zdict, version=version
        )
        if best is None or len(data) < len(best[0]):
            best = (data, codec)
    assert best is not None
    data, codec = best
    atomic_write(args.dst, data)
    used = ""
    if zdict is not None and args.compression == "zstd":
        used = f", dictionary {dictionaries.describe(zdict.dict_id())}"
    print(f"wrote {args.dst}: {len(data)} bytes ({codec}, {args.compression}{used})")
    return EXIT_OK


def _head(path: str, n: int) -> bytes:
    """The first ``n`` bytes of ``path`` (empty if unreadable: the full read reports why)."""
    try:
        with Path(path).open("rb") as f:
            return f.read(n)
    except OSError:
        return b""


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
    import tracepack
    from tracepack.container import read_header

    data = read(args.file)
    header = read_header(data, source=args.file)
    doc = tracepack.loads(data, source=args.file, zstd_dict=zstd_dict(args.zstd_dict))
    sizes = doc.table_sizes()
    raw_version = header.schema_version
    info = {
        "file": args.file,
        "file_bytes": len(data),
        "container_version": header.container_version,
        "schema_version": f"{raw_version[0]}.{raw_version[1]}",
        "codec": header.codec,
        "compression": header.compression,
        "zstd_dict_id": header.dict_id,
        "payload_bytes": header.payload_length,
        "raw_bytes": header.raw_length,
        "producer": None
        if doc.raw.header.producer is None
        else {"name": doc.raw.header.producer.name, "version": doc.raw.header.producer.version},
        "nodes": len(doc),
        "rows": sizes,
        "bytes": _breakdown(doc.raw, header.codec, doc.version),
    }
    from tracepack import dictionaries
    from tracepack.sizes import column_sizes, table_sizes

    # Compressed per table and column, with the file's dictionary (given, or built in).
    zdict = zstd_dict(args.zstd_dict) or (dictionaries.by_id(header.dict_id) if header.dict_id else None)
    columns = column_sizes(doc.raw, header.codec, doc.version, zstd_dict=zdict)
    compressed = table_sizes(columns)
    info["compressed_bytes"] = {t: c for t, (_, c) in compressed.items()}
    info["columns"] = [
        {"table": c.table, "column": c.column, "bytes": c.raw_bytes, "compressed_bytes": c.compressed_bytes}
        for c in columns
    ]
    if args.json:
        print(json.dumps(info, indent=2))
        return EXIT_OK
    print(f"{args.file}: tracepack container v{header.container_version}, schema {info['schema_version']}")
    print(f"  codec {header.codec}, compression {header.compression}", end="")
    print(f" (dictionary {header.dict_id})" if header.dict_id else "")
    print(f"  {len(data)} bytes on disk, payload {header.payload_length} stored / {header.raw_length} raw")
    if info["producer"]:
        print(f"  producer {info['producer']['name']} {info['producer']['version']}")
    print(f"  {len(doc)} nodes")
    print(f"  {'table':<14} {'rows':>10} {'bytes':>12} {'zstd-19':>10}")
    for name, nbytes in info["bytes"].items():
        rows = sizes.get(name, "")
        packed = compressed.get(name, (0, 0))[1]
        print(f"  {name:<14} {rows!s:>10} {nbytes:>12} {packed:>10}")
    what = "columns" if header.codec == "columnar" else "columns (MessagePack)"
    print(f"  (zstd-19: each table's {what} compressed on its own{', with the dictionary' if zdict else ''})")
    if args.columns:
        print(f"  {'column':<58} {'bytes':>10} {'zstd-19':>10}")
        for c in sorted(columns, key=lambda c: -c.compressed_bytes):
            label = f"{c.table}.{c.column}" if c.column else c.table
            print(f"  {label:<58} {c.raw_bytes:>10} {c.compressed_bytes:>10}")
    return EXIT_OK


def cmd_trace(args: argparse.Namespace) -> int:
    path = args.file
    key: str | int = int(args.node[1:]) if args.node.startswith("#") and args.node[1:].isdigit() else args.node
    try:
        if _is_plain_flatbuffers(path):
            # Random access: map the file and render this one node, without decoding the rest.
            import tracepack

            with tracepack.open(path) as lazy_doc:
                _print_node(lazy_doc.node(key))
        else:
            _print_node(load_any(path, zstd_dict=zstd_dict(args.zstd_dict)).node(key))
    except TracepackError as exc:
        raise exc.with_source(path) from None
    return EXIT_OK


def _print_node(node: Any) -> None:
    trace = node.stack_trace
    module = node.module_stack
    print(f"node {node.name} ({node.target})")
    print("stack trace:")
    print(trace if trace is not None else "  (none)")
    print("module hierarchy:")
    print(f"  nn_module_stack: {module if module is not None else '(none)'}")
    print(f"  {node.module_hierarchy or '(none)'}")


def _is_plain_flatbuffers(path: str) -> bool:
    """Whether ``path`` is an uncompressed FlatBuffers .tpk (read lazily)."""
    from tracepack.container import HEADER_SIZE, read_header

    try:
        with Path(path).open("rb") as f:
            head = f.read(HEADER_SIZE)
        header = read_header(head, source=path)
    except (OSError, TracepackError):
        return False  # the full reader reports what is wrong
    return header.codec == "flatbuffers" and header.compression == "none"


def cmd_expand(args: argparse.Namespace) -> int:
    from tracepack.container import atomic_write
    from tracepack.torch.export import model_json as export_json

    doc = load_any(args.file, zstd_dict=zstd_dict(args.zstd_dict))
    if args.archive is not None:
        archives = optional("tracepack.torch.archives")
        if archives is None:
            raise UsageError("rebuilding archives is not part of this build", where="--archive")
        data = archives.expand_archive(doc, args.archive, debug_format=args.debug_format)
    else:
        data = export_json.export_model_json(doc)
    atomic_write(args.out, data)
    print(f"wrote {args.out}: {len(data)} bytes")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from tracepack.demo import run_demo

    return run_demo(quick=args.quick)


def register(sub: Any) -> None:
    """Add this module's commands to the ``tracepack`` parser."""
    from tracepack.codecs import CODECS
    from tracepack.container import COMPRESSIONS

    c = sub.add_parser("convert", help="convert a model.json, .pt2, .pt or .tpk into a .tpk")
    c.add_argument("src", help="input: .tpk, torch.export model.json (or .pt2 / TorchScript .pt when supported)")
    c.add_argument("dst", help="output .tpk (written atomically)")
    c.add_argument(
        "--codec",
        choices=list(CODECS),
        default=None,
        help="payload codec (default: for torch inputs the smaller of columnar and msgpack, else msgpack)",
    )
    c.add_argument("--compression", choices=list(COMPRESSIONS), default="zstd", help="default zstd")
    c.add_argument("--level", type=int, default=3, help="zstd level, -7..22 (default 3)")
    c.add_argument(
        "--zstd-dict",
        metavar="FILE|NAME",
        help="a zstd dictionary file or built-in name to compress with; `none` for none "
        "(default: torch inputs use the built-in torch-export-1, which readers need no file for)",
    )
    c.add_argument("--to-version", metavar="X.Y", help="write an older released schema version (if lossless)")
    c.set_defaults(func=cmd_convert)

    i = sub.add_parser(
        "inspect", help="show a .tpk's header, version, codec, rows, bytes and compressed bytes per table and column"
    )
    i.add_argument("file")
    i.add_argument("--json", action="store_true", help="machine-readable output")
    i.add_argument("--columns", action="store_true", help="also list every column, largest compressed first")
    i.add_argument("--zstd-dict", metavar="FILE", help="the dictionary the file was compressed with")
    i.set_defaults(func=cmd_inspect)

    t = sub.add_parser("trace", help="print one node's stack trace and module hierarchy")
    t.add_argument("file", help="a .tpk (uncompressed FlatBuffers files are read lazily) or a model.json")
    t.add_argument("node", help="node name, or #INDEX")
    t.add_argument("--zstd-dict", metavar="FILE", help="the dictionary the file was compressed with")
    t.set_defaults(func=cmd_trace)

    e = sub.add_parser("expand", help="write the legacy torch file back (model.json byte for byte)")
    e.add_argument("file", help="a .tpk converted from a torch artifact")
    e.add_argument("out", help="output path (written atomically)")
    e.add_argument("--archive", metavar="ORIGINAL", help="for TorchScript: the original .pt to rebuild around")
    e.add_argument("--debug-format", choices=["legacy", "table"], default=None, help="debug_pkl layout to write")
    e.add_argument("--zstd-dict", metavar="FILE", help="the dictionary the file was compressed with")
    e.set_defaults(func=cmd_expand)

    d = sub.add_parser("demo", help="convert the bundled torch.export sample and compare with the legacy form")
    d.add_argument("--quick", action="store_true", help="fewer timing rounds")
    d.set_defaults(func=cmd_demo)
