"""torch archive commands: ``pack``, ``unpack``, ``upgrade``."""

from __future__ import annotations

import argparse
from typing import Any

from tracepack.cli._common import (
    EXIT_OK,
    add_force,
    add_fsync,
    add_jobs,
    add_json,
    check_output,
    display,
    read,
    report,
    write_output,
)


def _run(args: argparse.Namespace, transform: Any) -> int:
    check_output(args.dst, force=args.force)
    data = read(args.src)
    out: bytes = transform(data)
    write_output(args.dst, out, force=args.force, durable=args.fsync)
    info = {"input": display(args.src), "output": args.dst, "bytes": len(out), "input_bytes": len(data)}
    report(args.dst, f"wrote {args.dst}: {len(out)} bytes (was {len(data)})", info, as_json=args.json)
    return EXIT_OK


def _run_files(args: argparse.Namespace, transform: Any) -> int:
    """File to file: archives of any size, weights streamed (never whole in memory)."""
    check_output(args.dst, force=args.force)
    size_in, size_out = transform(args.src, args.dst)
    info = {"input": display(args.src), "output": args.dst, "bytes": size_out, "input_bytes": size_in}
    report(args.dst, f"wrote {args.dst}: {size_out} bytes (was {size_in})", info, as_json=args.json)
    return EXIT_OK


def _pack_targets(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(input, output) pairs: ``SRC DST``, or ``SRC... DIR`` (each into DIR/<its name>), as cp does."""
    from pathlib import Path

    from tracepack.errors import UsageError

    *sources, dst = args.paths
    if not sources:
        raise UsageError("expected SRC... DST", where="pack")
    if len(sources) == 1 and not Path(dst).is_dir():
        return [(sources[0], dst)]
    if not Path(dst).is_dir():
        raise UsageError(f"{len(sources)} inputs need a folder to write into", source=dst, expected="a folder")
    if "-" in sources:
        raise UsageError("- (standard input) packs alone: tracepack pack - OUT.pt2", where="pack")
    pairs = [(src, str(Path(dst) / Path(src).name)) for src in sources]
    outs = [o for _, o in pairs]
    if len(set(outs)) != len(outs):
        dup = next(o for o in outs if outs.count(o) > 1)
        raise UsageError(f"two inputs would both be written to {dup}", where="pack")
    return pairs


def _pack_file(src: str, dst: str, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """One input of ``pack SRC... DIR`` (file to file, in a worker)."""
    from tracepack.torch.pt2 import pack_pt2_file

    size_in, size_out = pack_pt2_file(
        src, dst, keep=args.keep or (), strip=args.strip_all, overwrite=args.force, durable=args.fsync
    )
    info = {"input": display(src), "output": dst, "bytes": size_out, "input_bytes": size_in}
    return info, f"wrote {dst}: {size_out} bytes (was {size_in})"


def cmd_pack(args: argparse.Namespace) -> int:
    """``tracepack pack IN.pt2 OUT.pt2 [--keep KEY ...] [--strip-all]``, or ``pack IN.pt2... DIR``."""
    from tracepack.torch.pt2 import pack_pt2, pack_pt2_file

    pairs = _pack_targets(args)
    for _, out in pairs:  # refuse before any work, not half-way through
        check_output(out, force=args.force)
    if len(pairs) > 1:  # every core (-j), one line per failing input, the rest go on
        from tracepack.cli._many import run_many

        return run_many(pairs, _pack_file, args, desc="pack")
    ((args.src, args.dst),) = pairs
    keep = args.keep or ()
    if args.src != "-" and args.dst != "-":
        return _run_files(
            args,
            lambda s, d: pack_pt2_file(s, d, keep=keep, strip=args.strip_all, overwrite=args.force, durable=args.fsync),
        )
    return _run(args, lambda data: pack_pt2(data, source=display(args.src), keep=keep, strip=args.strip_all))


def cmd_unpack(args: argparse.Namespace) -> int:
    """``tracepack unpack IN.pt2 OUT.pt2``."""
    from tracepack.torch.pt2 import unpack_pt2, unpack_pt2_file

    if args.src != "-" and args.dst != "-":
        return _run_files(args, lambda s, d: unpack_pt2_file(s, d, overwrite=args.force, durable=args.fsync))
    return _run(args, lambda data: unpack_pt2(data, source=display(args.src)))


def cmd_upgrade(args: argparse.Namespace) -> int:
    """``tracepack upgrade OLD.pt2 NEW.pt2``: a program any torch release wrote, for today's torch."""
    from tracepack.torch.upgrade import upgrade_pt2, upgrade_pt2_file

    through, trust = bool(args.through_torch), bool(args.trust_pickles)
    if args.src != "-" and args.dst != "-":
        return _run_files(
            args,
            lambda s, d: upgrade_pt2_file(
                s, d, overwrite=args.force, durable=args.fsync, through_torch=through, trust_pickles=trust
            ),
        )
    return _run(
        args, lambda data: upgrade_pt2(data, source=display(args.src), through_torch=through, trust_pickles=trust)
    )


def register(sub: Any) -> None:
    """Add this module's commands to the ``tracepack`` parser."""
    k = sub.add_parser(
        "pack",
        help="move a .pt2's per-node debug strings into a tracepack member of the archive",
        usage="tracepack pack [options] SRC DST\n       tracepack pack [options] SRC... FOLDER",
    )
    k.add_argument(
        "paths",
        nargs="+",
        metavar="SRC... DST",
        help="torch.export .pt2 inputs (- for stdin) and the output .pt2 (written atomically; - for stdout; "
        "torch.export.load still reads it), or a folder for several inputs (each written under its own name)",
    )
    k.add_argument("--keep", metavar="KEY", action="append", help="a node metadata key to leave in model.json")
    k.add_argument(
        "--strip-all",
        action="store_true",
        help="move every metadata string, not only stack_trace and from_node: smaller, but plain "
        "torch.export.load then has no nn_module_stack (unflatten fails) nor source_fn_stack",
    )
    add_jobs(k)
    add_fsync(k)
    add_force(k)
    add_json(k)
    k.set_defaults(func=cmd_pack)

    u = sub.add_parser("unpack", help="put a packed .pt2's debug strings back: model.json byte for byte")
    u.add_argument("src", help="a .pt2 written by `tracepack pack` (- for stdin)")
    u.add_argument("dst", help="output .pt2 (written atomically; - for stdout)")
    add_fsync(u)
    add_force(u)
    add_json(u)
    u.set_defaults(func=cmd_unpack)

    g = sub.add_parser("upgrade", help="rewrite a .pt2 of any torch release (2.1+) for the installed torch")
    g.add_argument("src", help="a .pt2 written by torch 2.1 or later (either archive layout; - for stdin)")
    g.add_argument("dst", help="output .pt2 (written atomically; - for stdout) that torch.export.load reads")
    g.add_argument(
        "--through-torch",
        action="store_true",
        help="load the program into torch and write it with torch.export.save (holds every weight in "
        "memory); by default the archive is streamed, its weights copied raw",
    )
    g.add_argument(
        "--trust-pickles",
        action="store_true",
        help="keep weights/constants stored as pickles that need more than torch's weights_only "
        "unpickler (tensor subclasses, torchbind and opaque objects): torch.export.load of the output "
        "runs them, so only for a file you trust (refused by default)",
    )
    add_fsync(g)
    add_force(g)
    add_json(g)
    g.set_defaults(func=cmd_upgrade)
