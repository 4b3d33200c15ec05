"""torch archive commands: ``pack``, ``unpack``."""

from __future__ import annotations

import argparse
from typing import Any

from tracepack.cli._common import EXIT_OK, read


def cmd_pack(args: argparse.Namespace) -> int:
    """``tracepack pack IN.pt2 OUT.pt2 [--keep KEY ...]``."""
    from tracepack.container import atomic_write
    from tracepack.torch.pt2 import pack_pt2

    data = read(args.src)
    out = pack_pt2(data, source=args.src, keep=args.keep or ())
    atomic_write(args.dst, out)
    print(f"wrote {args.dst}: {len(out)} bytes (was {len(data)})")
    return EXIT_OK


def cmd_unpack(args: argparse.Namespace) -> int:
    """``tracepack unpack IN.pt2 OUT.pt2``."""
    from tracepack.container import atomic_write
    from tracepack.torch.pt2 import unpack_pt2

    data = read(args.src)
    out = unpack_pt2(data, source=args.src)
    atomic_write(args.dst, out)
    print(f"wrote {args.dst}: {len(out)} bytes (was {len(data)})")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add this module's commands to the ``tracepack`` parser."""
    k = sub.add_parser("pack", help="move a .pt2's per-node debug strings into a tracepack member of the archive")
    k.add_argument("src", help="a torch.export .pt2")
    k.add_argument("dst", help="output .pt2 (written atomically); torch.export.load still reads it")
    k.add_argument("--keep", metavar="KEY", action="append", help="a node metadata key to leave in model.json")
    k.set_defaults(func=cmd_pack)

    u = sub.add_parser("unpack", help="put a packed .pt2's debug strings back: model.json byte for byte")
    u.add_argument("src", help="a .pt2 written by `tracepack pack`")
    u.add_argument("dst", help="output .pt2 (written atomically)")
    u.set_defaults(func=cmd_unpack)
