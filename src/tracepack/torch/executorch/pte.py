"""ExecuTorch ``.pte`` programs (FlatBuffers, file identifier ``ET12``): instructions and stack traces.

Read through flatc's Python code generated from ExecuTorch's published ``program.fbs``
(``tracepack_generated.executorch.program``, see ``schema/executorch/``). What tracepack uses of a
program: per method (``ExecutionPlan``), its operators and, per chain, its instructions (kernel calls
with their operator, delegate calls, moves, jumps, frees) and, when the program was emitted with
``emit_stacktrace=True``, each instruction's frames. That is what a runtime's
``KernelCall failed at instruction C:I`` refers to. Weights (``constant_buffer``, segments) are never
read.

:func:`pte_document` turns one method into a Document: one node per instruction (named ``C:I``,
target the operator), its emitted frames interned as the node's stack, and the instruction list in the
``executorch/method`` extension, so a stripped device log can be symbolicated from the ``.pte`` alone
(operator and Python stack; module paths need the ETRecord).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from tracepack.builder import DocumentBuilder
from tracepack.document import Document
from tracepack.errors import DecodeError, LegacyFormatError, UsageError
from tracepack.torch.executorch._flatbuffers import as_text, generated, guarded
from tracepack.torch.executorch.etrecord import METHOD_EXTENSION
from tracepack.traces import FrameKey

__all__ = ["PTE_IDENTIFIER", "PteInstruction", "PteMethod", "PteProgram", "is_pte", "pte_document", "read_pte"]

PTE_IDENTIFIER = b"ET12"
_EXPECTED = "an ExecuTorch program (.pte) as program.fbs describes it"
_KINDS = {1: "KernelCall", 2: "DelegateCall", 3: "MoveCall", 4: "JumpFalseCall", 5: "FreeCall"}


class PteInstruction(NamedTuple):
    """One instruction of a chain."""

    chain: int
    instruction: int
    kind: str
    """``KernelCall``, ``DelegateCall``, ``MoveCall``, ``JumpFalseCall``, ``FreeCall`` (or ``NONE``)."""
    op: str
    """The operator of a kernel call as the runtime names it (``aten::embedding.out``), the delegate id
    of a delegate call, else empty."""
    frames: tuple[FrameKey, ...] | None
    """The emitted stack trace (outermost first), None when the program has none."""


class PteMethod(NamedTuple):
    name: str
    operators: list[str]
    instructions: list[PteInstruction]


class PteProgram(NamedTuple):
    version: int
    methods: list[PteMethod]

    def method(self, name: str | None) -> PteMethod:
        """A method by name (None: the only one, or ``forward``)."""
        if name is None:
            if len(self.methods) == 1:
                return self.methods[0]
            if not self.methods:  # the file's fault, not the caller's
                raise LegacyFormatError("the program has no methods", where="$.execution_plan", expected="a method")
            name = "forward"
        for meth in self.methods:
            if meth.name == name:
                return meth
        raise UsageError(
            f"the program has no method {name!r}", expected=f"one of {', '.join(x.name for x in self.methods)}"
        )


def is_pte(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` carries ExecuTorch's program file identifier."""
    return len(data) >= 8 and bytes(data[4:8]) == PTE_IDENTIFIER


def _count(n: int, limit: int, source: str, where: str) -> int:
    if not 0 <= n <= limit:
        raise DecodeError(
            f"vector of {n} entries in a {limit}-byte file", source=source, where=where, expected=_EXPECTED
        )
    return n


def _op_name(op: Any) -> str:
    name, overload = as_text(op.Name()), as_text(op.Overload())
    return f"{name}.{overload}" if overload else name


def read_pte(data: bytes | bytearray | memoryview, *, source: str = "<pte>") -> PteProgram:
    """The methods, operators, instructions and emitted frames of a ``.pte``."""
    buf = bytes(data)
    if not is_pte(buf):
        raise LegacyFormatError(
            f"no ExecuTorch program identifier (bytes 4-8 are {buf[4:8]!r})", source=source, where="byte 4",
            expected=_EXPECTED,
        )  # fmt: skip
    fb = generated("program")
    limit = len(buf)

    def read() -> PteProgram:
        program = fb.Program.GetRootAs(buf, 0)
        methods = []
        for p in range(_count(program.ExecutionPlanLength(), limit, source, "$.execution_plan")):
            plan = program.ExecutionPlan(p)
            where = f"$.execution_plan[{p}]"
            ops = [_op_name(plan.Operators(i)) for i in range(_count(plan.OperatorsLength(), limit, source, where))]
            delegates = [
                as_text(plan.Delegates(i).Id()) for i in range(_count(plan.DelegatesLength(), limit, source, where))
            ]
            instructions = []
            for c in range(_count(plan.ChainsLength(), limit, source, f"{where}.chains")):
                chain = plan.Chains(c)
                n_traces = _count(chain.StacktraceLength(), limit, source, f"{where}.chains[{c}].stacktrace")
                for i in range(_count(chain.InstructionsLength(), limit, source, f"{where}.chains[{c}].instructions")):
                    ins = chain.Instructions(i)
                    kind_id = ins.InstrArgsType()
                    kind = _KINDS.get(kind_id, "NONE")
                    op = ""
                    if kind in ("KernelCall", "DelegateCall"):
                        table = ins.InstrArgs()
                        call = fb.KernelCall() if kind == "KernelCall" else fb.DelegateCall()
                        call.Init(table.Bytes, table.Pos)
                        index = call.OpIndex() if kind == "KernelCall" else call.DelegateIndex()
                        names = ops if kind == "KernelCall" else delegates
                        if not 0 <= index < len(names):
                            raise DecodeError(
                                f"{kind} refers to entry {index} of {len(names)}",
                                source=source,
                                where=f"{where}.chains[{c}].instructions[{i}]",
                                expected=_EXPECTED,
                            )
                        op = names[index]
                    frames = None
                    if n_traces and i < n_traces:
                        fl = chain.Stacktrace(i)
                        frames = tuple(
                            FrameKey(as_text(f.Filename()), f.Lineno(), as_text(f.Name()), as_text(f.Context()))
                            for f in (fl.Items(k) for k in range(_count(fl.ItemsLength(), limit, source, where)))
                        )
                    instructions.append(PteInstruction(c, i, kind, op, frames))
            methods.append(PteMethod(as_text(plan.Name()), ops, instructions))
        return PteProgram(program.Version(), methods)

    return guarded(read, source=source, where="$", expected=_EXPECTED)


def pte_document(program: PteProgram, method: str | None = None, *, source: str = "<pte>") -> Document:
    """One method of a program as a Document: a node per instruction, its emitted frames as its stack."""
    meth = program.method(method)
    b = DocumentBuilder(producer="executorch.pte")
    b.add_metadata("executorch.method", meth.name)
    b.add_metadata("executorch.program_version", str(program.version))
    index: dict[str, int] = {}
    for ins in meth.instructions:
        name = f"{ins.chain}:{ins.instruction}"
        index[name] = len(index)
        b.add_node(
            name,
            ins.op or ins.kind,
            stack_trace=list(ins.frames) if ins.frames else None,
            meta={"executorch.instruction": ins.kind},
        )
    info = {"format": "pte", "method": meth.name, "instruction_nodes": index}
    b.add_extension(METHOD_EXTENSION, None, raw_json=json.dumps(info, separators=(",", ":")))
    return b.build()
