"""Runtime commands: ``symbolicate`` (logs, handles, instructions) and ``annotate`` (profiles)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tracepack.cli._common import EXIT_OK, add_fsync, read
from tracepack.errors import UsageError


def _instruction(text: str) -> tuple[int, int]:
    chain, colon, instr = text.partition(":")
    if not colon:
        chain, instr = "0", text
    if not (chain.isdigit() and instr.isdigit()):
        raise UsageError(f"instruction {text!r}", where="--instruction", expected="CHAIN:INDEX or INDEX, e.g. 0:3")
    return int(chain), int(instr)


def _text_input(path: str | None) -> list[str]:
    if path in (None, "-"):
        if sys.stdin is None or (sys.stdin.isatty() and path is None):
            raise UsageError(
                "no log given", expected="LOG, or - (or a pipe) for standard input, or --handle/--instruction"
            )
        return sys.stdin.read().splitlines()
    data = read(path)
    return data.decode("utf-8", "replace").splitlines()


def cmd_symbolicate(args: argparse.Namespace) -> int:
    """``tracepack symbolicate ARTIFACT [LOG|-] [--handle N] [--instruction C:I] [--method M] [--json]``."""
    from tracepack.runtime.artifacts import open_artifact
    from tracepack.runtime.logs import render_handle, render_instruction, symbolicate_lines
    from tracepack.runtime.symbols import pick

    syms = open_artifact(args.artifact, methods=[args.method] if args.method else None)
    records: list[dict[str, Any]] = []
    out: list[str] = []
    if args.handle or args.instruction:
        if args.log is not None:
            raise UsageError("give a LOG or --handle/--instruction, not both")
        sym = pick(syms, args.method)
        for h in args.handle or []:
            a = sym.handle(h)
            records.append({"kind": "handle", "text": f"--handle {h}", "answers": [a.to_json()]})
            out.extend(render_handle(a, args.style, ""))
        for text in args.instruction or []:
            ia = sym.instruction(*_instruction(text))
            records.append({"kind": "instruction", "text": f"--instruction {text}", "answers": [ia.to_json()]})
            out.extend(render_instruction(ia, args.style, ""))
    else:
        lines = symbolicate_lines(
            _text_input(args.log), syms, method=args.method, style=args.style, records=records if args.json else None
        )
        if not args.json:  # a filter: each line out as it is explained, nothing kept
            for line in lines:
                print(line)
            return EXIT_OK
        for _ in lines:
            pass
    if args.json:
        print(json.dumps({"artifact": args.artifact, "references": records}, indent=1))
    else:
        for line in out:
            print(line)
    return EXIT_OK


def cmd_annotate(args: argparse.Namespace) -> int:
    """``tracepack annotate PROFILE --with ARTIFACT [-o OUT.json] [--by module]``."""
    from tracepack.container import atomic_write
    from tracepack.runtime.artifacts import open_artifact, open_exported_program
    from tracepack.runtime.profile import (
        annotate_chrome,
        annotate_etdump,
        annotated,
        module_summary,
        nothing_annotated,
        read_chrome_trace,
        render_summary,
        runtime_ids,
    )
    from tracepack.runtime.symbols import pick
    from tracepack.torch.executorch.etdump import is_etdump, read_etdump

    if args.output is None and args.by is None:
        raise UsageError("nothing to do", expected="-o OUT.json and/or --by module")
    syms = open_artifact(args.artifact, methods=[args.method] if args.method else None)
    data = read(args.profile)
    etdump, method = is_etdump(data), args.method
    if etdump:
        trace = annotate_etdump(
            read_etdump(data, source=args.profile), syms, method=args.method, time_unit=args.time_unit
        )
    else:
        value = read_chrome_trace(data, source=args.profile)
        if not runtime_ids(value):
            # An eager torch.profiler trace: matched to the ATen program's nodes, which an ETRecord keeps
            # beside its edge methods (what to_edge lowered), as a .pt2 holds it.
            aten = open_exported_program(args.artifact)
            if aten is not None:
                syms, method = [aten], None
        trace = annotate_chrome(value, syms, method=method, source=args.profile)
    n = annotated(trace)
    if not n:  # success with nothing done is never right: say why, write nothing
        why = nothing_annotated(trace, pick(syms, method), profile=args.profile, artifact=args.artifact, etdump=etdump)
        raise UsageError(why)
    if args.output is not None:
        atomic_write(args.output, json.dumps(trace, separators=(",", ":")).encode(), durable=args.fsync)
        print(f"wrote {args.output}: {len(trace['traceEvents'])} events, {n} annotated", file=sys.stderr)
    if args.by == "module":
        print(render_summary(module_summary(trace)))
    return EXIT_OK


def register(sub: Any) -> None:
    """Add this module's commands to the ``tracepack`` parser."""
    s = sub.add_parser(
        "symbolicate",
        help="rewrite debug handles and instructions in a log into module paths and Python stacks",
        description="Read a log, exception or crash report and explain each handle reference it holds "
        "(ExecuTorch `KernelCall failed at instruction C:I`, mobile `debug_handles:{N}`), like "
        "llvm-symbolizer or ndk-stack. See docs/symbolicate.md.",
    )
    s.add_argument("artifact", help="a .tpk, an ExecuTorch ETRecord or .pte, a TorchScript .ptl, a .pt2")
    s.add_argument("log", nargs="?", help="the text to rewrite (a file, or - for standard input)")
    s.add_argument("--handle", type=int, action="append", metavar="N", help="explain debug handle N")
    s.add_argument("--instruction", action="append", metavar="C:I", help="explain instruction C:I (chain:index)")
    s.add_argument("--method", help="the ExecuTorch method (default: the only one, else forward)")
    s.add_argument("--style", choices=["torch", "tracepack"], default="torch", help="how stacks and modules print")
    s.add_argument("--json", action="store_true", help="print the answers as JSON, for tools")
    s.set_defaults(func=cmd_symbolicate)

    a = sub.add_parser(
        "annotate",
        help="annotate an ETDump or torch.profiler trace with module paths and source lines",
        description="Write a Chrome/Perfetto trace whose op events carry module path, source file:line and op.",
    )
    a.add_argument("profile", help="an ExecuTorch ETDump or a Chrome trace JSON")
    a.add_argument("--with", dest="artifact", required=True, metavar="ARTIFACT", help="ETRecord, .pte or .tpk")
    a.add_argument("-o", "--output", metavar="OUT.json", help="the annotated trace (written atomically)")
    a.add_argument("--by", choices=["module"], help="print a per-module time summary table")
    a.add_argument("--method", help="the ExecuTorch method (default: the only one, else forward)")
    a.add_argument("--time-unit", choices=["ns", "us", "ms", "s"], default="ns", help="ETDump clock unit (default ns)")
    add_fsync(a)
    a.set_defaults(func=cmd_annotate)
