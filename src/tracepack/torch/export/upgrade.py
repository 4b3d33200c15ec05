"""Upgrade a torch.export program written by an older torch to today's schema (no torch needed).

torch only loads programs of its own schema major (torch 2.13: 8.x), so a ``.pt2`` from torch
2.1-2.5 (schemas 1, 2, 5, 7) cannot be loaded by it. :func:`upgrade_program` walks a decoded
program through one step per schema change, oldest first, each step turning the layout one
release wrote into the next one's (the tables of what changed were read from every release's
``torch/_export/serde/schema.py``):

==========  =====================================================================================
step        what changes
==========  =====================================================================================
1 -> 2      ``TensorValue {meta}`` unwrapped; ``SymExpr.hint`` an int -> ``SymExprHint``; the graph
            signature's name maps -> ``input_specs`` / ``output_specs``; ``call_spec`` -> the root
            ``module_call_graph`` entry (inputs spec ``(args, {kwargs})``); ``equality_constraints``,
            ``example_inputs`` and graph ``constants`` dropped; ``nn_module_stack`` entries
            ``key:(L['self'].path,type)`` -> ``key,path,type``; ``source_fn`` -> ``source_fn_stack``
2 -> 5      unions written with every member (``null`` but one) -> one member; ``as_none: []`` ->
            ``true``; ``dialect`` -> ``verifiers``; buffer specs gain ``persistent``; ``schema_version``
            an int -> ``{major, minor}``
5 -> 7      ``dialect`` (where still present) -> ``verifiers``; node inputs keep no ``kind``:
            today's torch then places arguments by the operator's schema, as 5.x readers did
7 -> 8      nodes gain ``name`` (the name the writing release showed, see :mod:`.node_names`),
            ``is_hop_single_tensor_return``; graph ``sym_float_values``, program ``torch_version``
            and ``guards_code``
==========  =====================================================================================

The result is a program of the newest schema the steps know (8.x; its minor is the caller's,
``target``): the dict ``torch._export.serde`` turns into its dataclasses. An operator that no
longer exists is not this module's business (it has no torch): :mod:`tracepack.torch.upgrade`
checks every target against the installed torch and names the first one missing.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from tracepack.errors import InputError, LegacyFormatError
from tracepack.io.guard import parse_json
from tracepack.torch.export.node_names import GraphNames
from tracepack.torch.export.schema_versions import SchemaVersion, schema_version_of

__all__ = ["CURRENT", "STEPS", "upgrade_program"]

#: The schema the chain ends at when the caller names none (torch 2.12-2.15's).
CURRENT = SchemaVersion(8, 20)

Program = dict[str, Any]

_OUTPUT_SPEC_KEYS = {
    "user_output",
    "loss_output",
    "buffer_mutation",
    "gradient_to_parameter",
    "gradient_to_user_input",
    "user_input_mutation",
    "token",
    "parameter_mutation",
}
_INPUT_SPEC_KEYS = {"user_input", "parameter", "buffer", "tensor_constant", "custom_obj", "token", "constant_input"}


# -- helpers ------------------------------------------------------------------------------------------


def _graphs(graph: Any) -> list[dict[str, Any]]:
    """``graph`` and every graph nested in its nodes' arguments (torch.cond branches ...)."""
    out = []
    todo = [graph]
    while todo:
        g = todo.pop()
        if type(g) is not dict:
            continue
        out.append(g)
        for node in g.get("nodes") or []:
            for inp in node.get("inputs") or [] if type(node) is dict else []:
                arg = inp.get("arg") if type(inp) is dict else None
                sub = arg.get("as_graph") if type(arg) is dict else None
                if type(sub) is dict:
                    todo.append(sub.get("graph"))
    return out


def _is_union(value: dict[str, Any]) -> bool:
    keys = set(value)
    return len(keys) >= 2 and (
        all(k.startswith("as_") for k in keys) or keys <= _INPUT_SPEC_KEYS or keys <= _OUTPUT_SPEC_KEYS
    )


def _compact(value: Any) -> Any:
    """Unions written with every member (schemas 1-2) as the one member that is set."""
    if type(value) is list:
        return [_compact(v) for v in value]
    if type(value) is not dict:
        return value
    if _is_union(value):
        chosen = [(k, v) for k, v in value.items() if v is not None]
        if len(chosen) == 1:
            key, inner = chosen[0]
            if key == "as_none":
                return {"as_none": True}
            return {key: _compact(inner)}
    return {k: _compact(v) for k, v in value.items()}


def _hint(hint: Any) -> Any:
    if type(hint) is int:
        return {"as_int": hint}
    if type(hint) is bool:
        return {"as_bool": hint}
    if type(hint) is float:
        return {"as_float": hint}
    return hint


# -- 1 -> 2 ---------------------------------------------------------------------------------------------


def _module_stack_v1(text: str) -> str:
    """``key:(L['self'].a.b,type);...`` (torch 2.1) -> ``key,a.b,type;...``."""
    out = []
    for part in text.split(";"):
        key, sep, rest = part.partition(":(")
        if not sep or not rest.endswith(")"):
            return text
        path, _, type_name = rest[:-1].rpartition(",")
        for prefix in ("L['self'].", "L['self']"):
            if path.startswith(prefix):
                path = path[len(prefix) :]
                break
        out.append(f"{key},{path},{type_name}")
    return ";".join(out)


def _expr_v1(value: Any) -> Any:
    if type(value) is dict and "as_expr" in value and value["as_expr"] is not None:
        expr = value["as_expr"]
        if type(expr) is str:
            expr = {"expr_str": expr, "hint": None}
        elif type(expr) is dict:
            expr = dict(expr, hint=_hint(expr.get("hint")))
        return dict(value, as_expr=expr)
    return value


def _names_of(args: list[Any]) -> list[str]:
    out = []
    for a in args:
        tensor = a.get("as_tensor") if type(a) is dict else None
        sym = a.get("as_sym_int") if type(a) is dict else None
        if type(tensor) is dict:
            out.append(tensor["name"])
        elif type(sym) is dict:
            out.append(sym.get("as_name"))
        else:
            out.append(None)
    return out


def _signature_v1(sig: dict[str, Any], graph: dict[str, Any]) -> dict[str, Any]:
    params = sig.get("inputs_to_parameters") or {}
    buffers = sig.get("inputs_to_buffers") or {}
    mutated = sig.get("buffers_to_mutate") or {}
    if sig.get("backward_signature"):
        raise LegacyFormatError(
            "a program with a backward signature (joint graph) cannot be upgraded",
            where="$.graph_module.signature.backward_signature",
        )
    inputs = []
    for arg, name in zip(graph["inputs"], _names_of(graph["inputs"]), strict=True):
        if name in params:
            inputs.append({"parameter": {"arg": {"name": name}, "parameter_name": params[name]}})
        elif name in buffers:
            inputs.append({"buffer": {"arg": {"name": name}, "buffer_name": buffers[name]}})
        else:
            inputs.append({"user_input": {"arg": arg}})
    outputs = []
    for arg, name in zip(graph["outputs"], _names_of(graph["outputs"]), strict=True):
        if name in mutated:
            outputs.append({"buffer_mutation": {"arg": {"name": name}, "buffer_name": mutated[name]}})
        else:
            outputs.append({"user_output": {"arg": arg}})
    return {"input_specs": inputs, "output_specs": outputs}


def _in_spec_v1(in_spec: str) -> str:
    """torch 2.1's call spec held the positional arguments' tree only; later ones ``(args, kwargs)``.
    A tree nested past the ``max_depth`` budget is refused (torch's own parse would run out of stack)."""
    try:
        protocol, tree = parse_json(
            lambda: json.loads(in_spec), in_spec, None, LegacyFormatError, "$.graph_module.call_spec.in_spec"
        )
    except InputError:
        raise
    except (ValueError, TypeError):
        return in_spec
    if type(tree) is dict and tree.get("type") == "builtins.tuple":
        children = tree.get("children_spec") or []
        if len(children) == 2 and type(children[1]) is dict and children[1].get("type") == "builtins.dict":
            return in_spec  # already (args, kwargs)
    kwargs = {"type": "builtins.dict", "context": "[]", "children_spec": []}
    wrapped = {"type": "builtins.tuple", "context": "null", "children_spec": [tree, kwargs]}
    return json.dumps([protocol, wrapped])


def step_1_to_2(p: Program) -> Program:
    gm = p["graph_module"]
    for g in _graphs(gm["graph"]):
        values = g.get("tensor_values") or {}
        for name, value in values.items():
            if type(value) is dict and list(value) == ["meta"]:
                values[name] = value["meta"]
        for key in ("sym_int_values", "sym_bool_values"):
            g[key] = {k: _expr_v1(v) for k, v in (g.get(key) or {}).items()}
        for meta in values.values():
            if type(meta) is dict:
                for key in ("sizes", "strides"):
                    meta[key] = [_expr_v1(s) for s in meta.get(key) or []]
        g.pop("constants", None)
        for node in g.get("nodes") or []:
            md = node.get("metadata") or {}
            if "nn_module_stack" in md:
                md["nn_module_stack"] = _module_stack_v1(md["nn_module_stack"])
            if "source_fn" in md:
                md["source_fn_stack"] = md.pop("source_fn")
    gm["signature"] = _signature_v1(gm["signature"], gm["graph"])
    call_spec = gm.pop("call_spec", None) or {}
    calls = [e for e in gm.get("module_call_graph") or [] if type(e) is dict]
    root = next((e for e in calls if e.get("fqn") == ""), None)
    if root is None or root.get("signature") is None:
        signature = {
            "inputs": [],
            "outputs": [],
            "in_spec": _in_spec_v1(call_spec.get("in_spec", "")),
            "out_spec": call_spec.get("out_spec", ""),
        }
        calls = [{"fqn": "", "signature": signature}] + [e for e in calls if e.get("fqn") != ""]
    gm["module_call_graph"] = calls
    p.pop("equality_constraints", None)
    p.pop("example_inputs", None)
    p["dialect"] = "ATEN"
    p["schema_version"] = 2
    return p


# -- 2 -> 5 ---------------------------------------------------------------------------------------------


def step_2_to_5(p: Program) -> Program:
    p = _compact(p)
    gm = p["graph_module"]
    for g in _graphs(gm["graph"]):
        for meta in (g.get("tensor_values") or {}).values():
            if type(meta) is dict and type(meta.get("storage_offset")) is int:
                meta["storage_offset"] = {"as_int": meta["storage_offset"]}
    for spec in gm["signature"].get("input_specs") or []:
        buffer = spec.get("buffer")
        if type(buffer) is dict:
            buffer.setdefault("persistent", True)
    dialect = p.pop("dialect", None)
    p["verifiers"] = [] if dialect in (None, "ATEN") else [str(dialect)]
    p["schema_version"] = {"major": 5, "minor": 1}
    return p


# -- 5 -> 7 ---------------------------------------------------------------------------------------------


def step_5_to_7(p: Program) -> Program:
    if "verifiers" not in p:
        dialect = p.pop("dialect", None)
        p["verifiers"] = [] if dialect in (None, "ATEN", "TRAINING") else [str(dialect)]
    p["schema_version"] = {"major": 7, "minor": 0}
    return p


# -- 7 -> 8 ---------------------------------------------------------------------------------------------


def step_7_to_8(p: Program) -> Program:
    """Also run on 8.x programs older than the target: 8.0-8.x (torch 2.6) nodes may have no
    ``name`` and higher-order operators no ``is_hop_single_tensor_return``."""
    gm = p["graph_module"]
    main = gm["graph"]
    todo: list[dict[str, Any]] = [main]
    while todo:
        g = todo.pop()
        names = GraphNames(sym_ops_by_output=True)
        names.inputs(g.get("inputs"))
        for node in g.get("nodes") or []:
            if node.get("name") is None:
                node["name"] = names.node(node)
            else:
                names.create(node["name"])
            if node.get("is_hop_single_tensor_return") is None:
                node["is_hop_single_tensor_return"] = _hop_single_return(node)
            for inp in node.get("inputs") or []:
                sub = inp.get("arg", {}).get("as_graph") if type(inp.get("arg")) is dict else None
                if type(sub) is dict and type(sub.get("graph")) is dict:
                    todo.append(sub["graph"])
        g.setdefault("sym_float_values", {})
        g.setdefault("custom_obj_values", {})
    gm.setdefault("metadata", {})
    gm.setdefault("treespec_namedtuple_fields", {})
    p.setdefault("torch_version", "<=2.4")
    p.setdefault("guards_code", [])
    p["schema_version"] = {"major": 8, "minor": 0}
    return p


def _hop_single_return(node: dict[str, Any]) -> bool | None:
    """Schema 8's flag for higher-order operators (``torch.cond`` ...); rewrites the outputs
    the way 8.x writes them. Older schemas wrote a tuple of one tensor as ``as_tensors``."""
    if not str(node.get("target", "")).startswith("torch.ops.higher_order."):
        return None
    outputs = node.get("outputs") or []
    if len(outputs) != 1 or type(outputs[0]) is not dict:
        return None
    tensors = outputs[0].get("as_tensors")
    if type(tensors) is list and len(tensors) == 1:
        node["outputs"] = [{"as_tensor": tensors[0]}]
        return False  # a tuple of one tensor: torch adds the getitem
    return True  # a bare tensor, or a tuple torch unpacks itself


#: ``(major it applies to, step)``: a program of major ``m`` runs every step from the first whose
#: major is >= ``m``.
STEPS: list[tuple[int, Callable[[Program], Program]]] = [
    (1, step_1_to_2),
    (2, step_2_to_5),
    (5, step_5_to_7),
    (7, step_7_to_8),
]


def upgrade_program(program: Any, *, source: str = "<model.json>", target: SchemaVersion = CURRENT) -> Program:
    """``program`` (a decoded model.json of any schema torch wrote) in schema ``target``'s layout.

    The input is not changed. A program already of ``target``'s major comes back with only its
    version raised (minor versions only add fields with defaults)."""
    version = schema_version_of(program)
    if version is None:
        raise LegacyFormatError(
            "no schema_version", source=source, where="$.schema_version", expected="a torch.export program"
        )
    if version.major > target.major:
        raise LegacyFormatError(
            f"schema {version} is newer than {target}: nothing to upgrade",
            source=source,
            where="$.schema_version",
        )
    p: Program = copy.deepcopy(program)
    try:
        for major, step in STEPS:
            if version.major <= major < target.major or (major == target.major - 1 and version.major == target.major):
                p = step(p)
    except LegacyFormatError as exc:  # a step's own refusal: name the file
        raise exc.with_source(source) from None
    except InputError:
        raise  # a step's own one-line error (a ValueError too)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise LegacyFormatError(
            f"cannot upgrade schema {version}: unexpected layout ({type(exc).__name__}: {exc})", source=source
        ) from None
    p["schema_version"] = target.json()
    return p
