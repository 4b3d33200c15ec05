"""Node names as torch shows them for programs whose nodes carry no ``name`` (schemas before 8).

Before schema 8 a serialized node had no name of its own: ``torch.export.load`` named it while
rebuilding the fx graph. A node returning one tensor takes that tensor's name; a node of
``_operator`` (symbolic arithmetic) takes its output's name; every other node (several outputs,
a ``SymInt`` from ``aten.sym_size``, a list, a higher-order operator) gets the name torch.fx makes
from its target -- ``_native_batch_norm_legit_no_training_default``, ``sym_size_int``,
``split_tensor``, ``cond`` -- numbered ``_1``, ``_2`` ... within its graph, and its outputs become
``getitem`` nodes named after them. :class:`GraphNames` replays that, graph by graph, so the
names tracepack gives are the ones the writing release printed (checked against every release's
own ``torch.export.load`` in ``tests/data/torch/releases/``).
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections import defaultdict
from typing import Any

__all__ = ["GraphNames", "target_candidate"]

_ILLEGAL = re.compile(r"[^0-9a-zA-Z_]+")
_SUFFIX = re.compile(r"(.*)_(\d+)$")


def _snake_case(s: str) -> str:
    out = []
    prev_lower = False
    for c in s:
        if prev_lower and c.isupper():
            out.append("_")
        out.append(c.lower())
        prev_lower = c.islower()
    return "".join(out)


def target_candidate(target: str) -> str:
    """The name torch.fx starts from for a serialized target: the operator's ``__name__``
    (``split.Tensor`` for ``torch.ops.aten.split.Tensor``, ``cond`` for
    ``torch.ops.higher_order.cond``, ``mul`` for ``_operator.mul``), snake-cased."""
    parts = target.split(".")
    op = f"{parts[3]}.{'.'.join(parts[4:])}" if target.startswith("torch.ops.") and len(parts) >= 5 else parts[-1]
    return _snake_case(op)


#: Names torch.fx never gives a node: keywords, builtins (but ``None``), fx's own globals.
_TAKEN: dict[str, object] = {k: object() for k in keyword.kwlist}
_TAKEN.update(builtins.__dict__)
_TAKEN.update(dict.fromkeys(("inf", "nan", "NoneType", "torch", "device", "fx_pytree", "pytree"), object()))
_NAME = re.compile(r"^([a-zA-Z_][0-9a-zA-Z_]*?)(?:_(\d+))?$")


#: The first torch release of each style of torch.fx's name space (``GraphNames``), measured on the
#: installed torch's ``_Namespace`` (2.6 legacy; 2.8, 2.10 rewrite; 2.12, 2.13, 2.15 current), and the
#: first export schema version of that style. Programs before schema 8.20 (torch 2.12) store no node
#: names: they are named again as their release named them.
FX_STYLES = (((2, 7), (8, 7), "rewrite"), ((2, 12), (8, 20), "current"))


def fx_style(release: tuple[int, int]) -> str:
    """The style of torch.fx's name space in torch ``release`` (major, minor)."""
    style = "legacy"
    for first, _, name in FX_STYLES:
        if release >= first:
            style = name
    return style


def fx_style_of_schema(version: tuple[int, int]) -> str:
    """The style of the torch release that wrote export schema ``version`` (major, minor)."""
    style = "legacy"
    for _, first, name in FX_STYLES:
        if version >= first:
            style = name
    return style


def _illegal(name: str) -> bool:
    return _TAKEN.get(name) is not None


class GraphNames:
    """torch.fx's name space of one graph: unique names, ``_N`` suffixes counted per base.

    ``style="legacy"`` is torch.fx up to 2.6 (torch 2.1-2.6 named the nodes of their programs
    with it); ``"rewrite"`` the rewrite of torch PR #148288 as torch 2.7-2.8 ship it, which
    looks a taken name's count up by the whole candidate (``x_11`` taken again gives ``x_1``);
    ``"current"`` the later fix that looks it up by the base (``x_12``). Each is checked
    against the installed torch's own ``_Namespace``. They differ only for odd candidates
    (``__00``, a taken name with a numeric suffix)."""

    def __init__(self, *, sym_ops_by_output: bool = True, style: str = "legacy") -> None:
        #: Schemas 5+ (torch 2.3+) name a node returning a SymInt/SymBool (``aten.sym_size.int``)
        #: after its output; 1-2 did so for ``_operator`` targets only.
        self.sym_ops_by_output = sym_ops_by_output
        self.style = style
        self.used: set[str] = set()
        self.count: dict[str, int] = defaultdict(int)

    def create(self, candidate: str) -> str:
        if self.style != "legacy":
            return self._create_current(candidate)
        candidate = _ILLEGAL.sub("_", candidate) or "_unnamed"
        if candidate[0].isdigit():
            candidate = f"_{candidate}"
        match = _SUFFIX.match(candidate)
        if match is None:
            base, num = candidate, None
        else:
            base, num = match.group(1), int(match.group(2))
        candidate = base if num is None else f"{base}_{num}"
        if not num:
            num = self.count[base]
        while candidate in self.used or _illegal(candidate):
            num += 1
            candidate = f"{base}_{num}"
        self.used.add(candidate)
        self.count[base] = num
        return candidate

    def _create_current(self, candidate: str) -> str:
        match = _NAME.match(candidate)
        if match is None:
            candidate = _ILLEGAL.sub("_", candidate) or "_unnamed"
            if candidate[0].isdigit():
                candidate = f"_{candidate}"
            match = _NAME.match(candidate)
            if match is None:  # pragma: no cover - the regex matches every sanitized name
                raise ValueError(f"not a name: {candidate!r}")
        base, suffix = match.group(1, 2)
        if suffix is None or candidate in self.used:
            num = self.count.get(candidate if self.style == "rewrite" else base, 0)
            if _illegal(candidate):
                num += 1
                candidate = f"{base}_{num}"
        else:
            num = int(suffix)
        while candidate in self.used:
            num += 1
            candidate = f"{base}_{num}"
        self.used.add(candidate)
        self.count[base] = num
        return candidate

    def inputs(self, args: Any) -> None:
        """The graph's placeholders, named after its inputs."""
        for name in _names(args):
            self.create(name)

    def node(self, node: dict[str, Any]) -> str:
        """The name torch gives ``node`` (a serialized node without ``name``); its getitem
        outputs take their names in the graph too."""
        for arg in node.get("inputs") or []:
            sub = arg.get("arg") if type(arg) is dict else None
            graph = sub.get("as_graph") if type(sub) is dict else None
            if type(graph) is dict and type(graph.get("name")) is str:
                self.create(graph["name"])  # the get_attr node torch adds for a nested graph
        outputs = node.get("outputs")
        outputs = outputs if type(outputs) is list else []
        target = node.get("target")
        target = target if type(target) is str else ""
        single = len(outputs) == 1 and type(outputs[0]) is dict
        tensor = _value(outputs[0], "as_tensor") if single else None
        sym = _value(outputs[0], "as_sym_int") if single else None
        if sym is None and single:
            sym = _value(outputs[0], "as_sym_bool")
        # A higher-order operator returning a tuple of one tensor (8.x: the flag is False) is
        # named after its target, its output becomes a getitem node.
        hop_tuple = node.get("is_hop_single_tensor_return") is False
        if type(tensor) is dict and type(tensor.get("name")) is str and not hop_tuple:
            return self.create(tensor["name"])
        by_output = self.sym_ops_by_output or target.startswith("_operator.")
        if by_output and type(sym) is dict and type(sym.get("as_name")) is str:
            return self.create(sym["as_name"])
        name = self.create(target_candidate(target))
        if not (single and sym is not None):
            for out in _names(outputs):
                self.create(out)
        return name


def _value(arg: dict[str, Any], kind: str) -> Any:
    """``arg[kind]`` when that is the union member set (schemas 1-2 list every member, null but one)."""
    value = arg.get(kind)
    return value if value is not None else None


def _names(args: Any) -> list[str]:
    """Tensor and symbol names of a list of serialized arguments, in order."""
    out: list[str] = []
    for arg in args if type(args) is list else []:
        if type(arg) is not dict:
            continue
        tensor = arg.get("as_tensor")
        tensors = arg.get("as_tensors")
        sym = arg.get("as_sym_int")
        if type(tensor) is dict and type(tensor.get("name")) is str:
            out.append(tensor["name"])
        elif type(tensors) is list:
            out.extend(t["name"] for t in tensors if type(t) is dict and type(t.get("name")) is str)
        elif type(sym) is dict and type(sym.get("as_name")) is str:
            out.append(sym["as_name"])
    return out
