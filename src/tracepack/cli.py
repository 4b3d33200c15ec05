"""The ``tracepack`` command line.

Every subcommand has ``--help``. Errors are one line on stderr, never a
traceback; exit codes: 0 success, 1 internal error, 2 bad input (a file that
is not what it should be, a bad option), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import zstandard

from tracepack.errors import InputError, TracepackError, UsageError

__all__ = ["main"]

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2 through our own handler."""

    def error(self, message: str) -> Any:
        sub = self.prog.removeprefix("tracepack").strip()
        raise UsageError(message, where=sub or None)


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=path) from None


def _zstd_dict(path: str | None) -> zstandard.ZstdCompressionDict | None:
    if path is None:
        return None
    return zstandard.ZstdCompressionDict(_read(path))


def _parse_version(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    major, dot, minor = text.partition(".")
    if not (dot and major.isdigit() and minor.isdigit()):
        raise UsageError(f"version {text!r}", where="--to-version", expected="MAJOR.MINOR, e.g. 1.0")
    return int(major), int(minor)


def load_any(path: str, *, zstd_dict: zstandard.ZstdCompressionDict | None = None) -> Any:
    """Read a ``.tpk`` file or any legacy format ``convert`` accepts, as a Document."""
    import tracepack
    from tracepack.container import MAGIC
    from tracepack.convert import export_json

    data = _read(path)
    if data.startswith(MAGIC[:4]):
        return tracepack.loads(data, source=path, zstd_dict=zstd_dict)
    if export_json.is_model_json(data):
        return export_json.import_model_json(data, source=path)
    extra = _legacy_importer(path, data)
    if extra is not None:
        return extra
    raise InputError(
        "not a format tracepack reads",
        source=path,
        where="byte 0",
        expected="a .tpk container or a torch.export model.json",
    )


def _legacy_importer(path: str, data: bytes) -> Any:
    """Archives (.pt2, TorchScript .pt) when the converters for them are installed."""
    if not data.startswith(b"PK"):
        return None
    archives = _optional("tracepack.convert.archives")
    return None if archives is None else archives.import_archive(path, data)


def _optional(module: str) -> Any:
    """A module that later parts of the project add; None while it is not there."""
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        return None


def cmd_convert(args: argparse.Namespace) -> int:
    import tracepack

    zdict = _zstd_dict(args.zstd_dict)
    doc = load_any(args.src, zstd_dict=zdict if args.src.endswith(".tpk") else None)
    size = tracepack.dump(
        doc,
        args.dst,
        codec=args.codec,
        compression=args.compression,
        level=args.level,
        zstd_dict=zdict,
        version=_parse_version(args.to_version),
    )
    print(f"wrote {args.dst}: {size} bytes ({args.codec}, {args.compression})")
    return EXIT_OK


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

    data = _read(args.file)
    header = read_header(data, source=args.file)
    doc = tracepack.loads(data, source=args.file, zstd_dict=_zstd_dict(args.zstd_dict))
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
    print(f"  {'table':<14} {'rows':>10} {'bytes':>12}")
    for name, nbytes in info["bytes"].items():
        rows = sizes.get(name, "")
        print(f"  {name:<14} {rows!s:>10} {nbytes:>12}")
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
            _print_node(load_any(path, zstd_dict=_zstd_dict(args.zstd_dict)).node(key))
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
    from tracepack.convert import export_json

    doc = load_any(args.file, zstd_dict=_zstd_dict(args.zstd_dict))
    if args.archive is not None:
        archives = _optional("tracepack.convert.archives")
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


def cmd_schema(args: argparse.Namespace) -> int:
    schema_cli = _optional("tracepack.schema_check.cli")
    if schema_cli is None:
        raise UsageError("the schema checker is not part of this build", where="schema")
    return int(schema_cli.main(list(args.rest)))


def build_parser() -> argparse.ArgumentParser:
    from tracepack import __version__
    from tracepack.codecs import CODECS
    from tracepack.container import COMPRESSIONS

    p = _Parser(prog="tracepack", description="Exported ML graphs and their debug info, typed and interned.")
    p.add_argument("--version", action="version", version=f"tracepack {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("convert", help="convert a model.json, .pt2, .pt or .tpk into a .tpk")
    c.add_argument("src", help="input: .tpk, torch.export model.json (or .pt2 / TorchScript .pt when supported)")
    c.add_argument("dst", help="output .tpk (written atomically)")
    c.add_argument("--codec", choices=list(CODECS), default="msgpack", help="payload codec (default msgpack)")
    c.add_argument("--compression", choices=list(COMPRESSIONS), default="zstd", help="default zstd")
    c.add_argument("--level", type=int, default=3, help="zstd level, -7..22 (default 3)")
    c.add_argument("--zstd-dict", metavar="FILE", help="a trained zstd dictionary to compress with")
    c.add_argument("--to-version", metavar="X.Y", help="write an older released schema version (if lossless)")
    c.set_defaults(func=cmd_convert)

    i = sub.add_parser("inspect", help="show a .tpk's header, version, codec, table sizes and bytes per table")
    i.add_argument("file")
    i.add_argument("--json", action="store_true", help="machine-readable output")
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

    def _pt2_command(name: str) -> Callable[[argparse.Namespace], int]:
        def run(args: argparse.Namespace) -> int:
            from tracepack.convert import pt2

            return int(getattr(pt2, name)(args))

        return run

    k = sub.add_parser("pack", help="move a .pt2's per-node debug strings into a tracepack member of the archive")
    k.add_argument("src", help="a torch.export .pt2")
    k.add_argument("dst", help="output .pt2 (written atomically); torch.export.load still reads it")
    k.add_argument("--keep", metavar="KEY", action="append", help="a node metadata key to leave in model.json")
    k.set_defaults(func=_pt2_command("cmd_pack"))

    u = sub.add_parser("unpack", help="put a packed .pt2's debug strings back: model.json byte for byte")
    u.add_argument("src", help="a .pt2 written by `tracepack pack`")
    u.add_argument("dst", help="output .pt2 (written atomically)")
    u.set_defaults(func=_pt2_command("cmd_unpack"))

    d = sub.add_parser("demo", help="convert the bundled torch.export sample and compare with the legacy form")
    d.add_argument("--quick", action="store_true", help="fewer timing rounds")
    d.set_defaults(func=cmd_demo)

    s = sub.add_parser("schema", help="schema tools: `tracepack schema check OLD NEW` (see its --help)", add_help=False)
    s.set_defaults(func=cmd_schema, rest=[])
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tracepack`` command; returns the exit code."""
    try:
        args, rest = build_parser().parse_known_args(list(sys.argv[1:] if argv is None else argv))
        if rest and args.command != "schema":
            raise UsageError(f"unrecognized arguments: {' '.join(rest)}")
        args.rest = rest
        return int(args.func(args))
    except TracepackError as exc:
        print(f"tracepack: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tracepack: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Output piped into `head` and friends: not an error worth a message.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except MemoryError:
        print("tracepack: out of memory", file=sys.stderr)
        return EXIT_INTERNAL
    except Exception as exc:  # the CLI's promise: one line, never a traceback
        text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        print(f"tracepack: internal error: {text} (please report this)", file=sys.stderr)
        return EXIT_INTERNAL
