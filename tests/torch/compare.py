"""What an ExportedProgram holds, as plain comparable values: graph code, every node's meta (nested
graphs too), signature, range constraints, symbolic values, weights, constants, example inputs."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")


def _tensor(t: Any) -> tuple[Any, ...]:
    fake = type(t).__name__ == "FakeTensor"
    row: tuple[Any, ...] = (
        type(t).__name__,
        str(t.dtype),
        str(tuple(t.shape)),
        str(t.stride()),
        str(t.device),
        bool(t.requires_grad),
    )
    if fake:  # how it was made shows here: autograd, dispatch keys, storage, the FakeTensor fields
        row += (
            t.is_leaf,
            t.grad_fn,
            str(torch._C._dispatch_keys(t)),
            str(t.storage_offset()),
            str(t.untyped_storage().nbytes()),
            tuple(sorted(vars(t))),
            t.constant is None,
        )
    if not fake and t.device.type != "meta":
        row += (t.detach().contiguous().view(-1).view(torch.uint8).tolist() if t.numel() else [],)
    return row


def plain(value: Any) -> Any:
    """A value of node meta / weights as nested tuples of strings and numbers."""
    if isinstance(value, torch.Tensor):
        return _tensor(value)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ("sym", type(value).__name__, str(value))
    if isinstance(value, dict):
        return ("dict", tuple((plain(k), plain(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(plain(v) for v in value))
    if isinstance(value, torch.fx.Node):
        return ("node", value.name)
    return ("repr", repr(value))


def graph_modules(ep: Any) -> list[tuple[str, Any]]:
    return [(name, m) for name, m in ep.graph_module.named_modules() if isinstance(m, torch.fx.GraphModule)]


def describe(ep: Any) -> dict[str, Any]:
    """Everything ``torch.export.load`` gives back, comparable with ``==``."""
    out: dict[str, Any] = {}
    out["code"] = [(name, m.code) for name, m in graph_modules(ep)]
    out["classes"] = [(name, tuple(c.__qualname__ for c in type(m).__mro__)) for name, m in graph_modules(ep)]
    out["nodes"] = [
        (
            name,
            n.name,
            n.op,
            str(n.target),
            plain(n.args),
            plain(n.kwargs),
            tuple((k, plain(v)) for k, v in n.meta.items()),
        )
        for name, m in graph_modules(ep)
        for n in m.graph.nodes
    ]
    out["signature"] = str(ep.graph_signature)
    out["range_constraints"] = sorted((str(k), str(v)) for k, v in ep.range_constraints.items())
    out["module_call_graph"] = [
        (e.fqn, None if e.signature is None else (str(e.signature.in_spec), str(e.signature.out_spec)))
        for e in ep.module_call_graph
    ]
    out["state_dict"] = [(k, plain(v)) for k, v in ep.state_dict.items()]
    out["constants"] = [(k, plain(v)) for k, v in ep.constants.items()]
    out["example_inputs"] = plain(ep.example_inputs)
    out["verifiers"] = [v.dialect for v in ep.verifiers]
    shape_envs = {
        id(v.fake_mode.shape_env): v.fake_mode.shape_env
        for _, m in graph_modules(ep)
        for n in m.graph.nodes
        if (v := n.meta.get("val")) is not None and hasattr(v, "fake_mode") and v.fake_mode.shape_env is not None
    }
    out["shape_env"] = [
        (
            sorted((str(k), str(v)) for k, v in getattr(env, "backed_var_to_val", env.var_to_val).items()),
            sorted((str(k), str(v)) for k, v in env.var_to_range.items()),
            [str(g.expr) for g in env.guards],
            sorted((str(k), str(v)) for k, v in env.replacements.items()),
            sorted(str(k) for k in env.size_like),
            env.num_deferred_runtime_asserts,
            sorted((str(k), [str(ra.expr) for ra in v]) for k, v in env.deferred_runtime_asserts.items()),
        )
        for env in shape_envs.values()
    ]
    out["aliasing"] = aliasing(ep)
    return out


def aliasing(ep: Any) -> list[Any]:
    """Which node values are the same object, share a storage or a symbolic size's node, and of which
    class each symbolic node is, numbered by first appearance: torch gives every value its own
    storage and nodes, and reuses objects only where it hands out the same value twice (a getitem's
    value in its producer's tuple, the output node's)."""
    seen: dict[int, int] = {}
    storages: dict[int, int] = {}
    sym_nodes: dict[int, int] = {}

    def number(table: dict[int, int], key: int) -> int:
        return table.setdefault(key, len(table))

    rows: list[Any] = []
    for _, m in graph_modules(ep):
        for n in m.graph.nodes:
            for v in torch.utils._pytree.tree_leaves(n.meta.get("val")):
                if not isinstance(v, torch.Tensor):
                    continue
                syms = [x for x in (*v.shape, *v.stride(), v.storage_offset(), v.untyped_storage().nbytes())
                        if isinstance(x, torch.SymInt)]  # fmt: skip
                rows.append(
                    (
                        n.name,
                        number(seen, id(v)),
                        number(storages, v.untyped_storage()._cdata),
                        tuple(
                            (number(sym_nodes, id(x.node)), type(x.node).__qualname__, type(x.node).__module__)
                            for x in syms
                        ),
                    )
                )
    return rows
