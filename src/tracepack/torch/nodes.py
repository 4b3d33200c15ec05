"""A program's nodes built directly: the ``torch.fx`` nodes, arguments and metadata torch's
``GraphModuleDeserializer.deserialize_node`` builds, without its per-node work.

For a node calling an ATen operator (``OpOverload``; nearly every node of an exported program),
:class:`NodeBuilder` does what torch's ``deserialize_node`` does for such a node, step for step,
with what it looks up once per load instead of once per node:

* the operator of a target string (``deserialize_operator``), and the operator's argument plan
  (its schema's argument names, defaults, keyword-only flags, ``keyword.iskeyword``);
* arguments: each serialized argument read from the decoded program's fields directly (torch goes
  through the schema union's ``__getattribute__`` for every field), placed as torch's
  ``deserialize_inputs`` places them (positional, keyword, the fallbacks for older files);
* the ``fx.Node``: made as ``Graph.create_node`` makes it, without scanning the arguments for
  symbolic values (a deserialized argument is a node, a number, a list of them or a constant,
  never a ``SymInt``);
* metadata: each distinct ``nn_module_stack``, ``source_fn_stack`` and ``torch_fn`` string is
  parsed once (by torch's own ``deserialize_metadata``) and every node gets its own dict or list
  of the parsed entries; ``stack_trace``, ``custom`` and ``from_node`` as torch reads them.

Everything else (symbolic-shape operators, ``_assert_scalar``, higher-order operators, extension
operators, multiple outputs, arguments other than the common ones) goes through torch's own
methods, and after each such node the fake tensor memo is told the shape environment may have
changed. :func:`node_builder` checks once per process that torch's methods read the names this was
written against (a changed torch gets its own code) and that a trial program builds the same nodes.
"""

from __future__ import annotations

import importlib
import keyword
import threading
import types
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["NodeBuilder", "node_builder"]


def _names(code: types.CodeType) -> frozenset[str]:
    out = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= _names(const)
    return frozenset(out)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: The names torch 2.12-2.15's methods read; another set means torch changed them (its code runs).
_EXPECTED: dict[str, frozenset[str]] = {
    "deserialize_node": _words(
        "HigherOrderOperator Node OpOverload SerializeError SymBool SymInt TensorType _SYM_OPS _assert_scalar "
        "_constrain_range_for_size _get_schema_from_target _higher_order_ops _ops _registered_extension_types "
        "args as_name as_tensor aten bool callable create_node debug default deserialize_hoo_inputs "
        "deserialize_inputs deserialize_metadata deserialize_outputs deserialize_sym_op_inputs "
        "deserialize_sym_op_outputs expr fx get getattr graph guard_or_defer_runtime_assert hasattr inputs "
        "isinstance item kwargs len log meta metadata name node op ops outputs real_type returns shape_env str "
        "sym_constrain_range_for_size target torch triton_kernel_wrap triton_kernel_wrapper_functional type "
        "update value values"
    ),
    "deserialize_inputs": _words(
        "ArgumentKind AssertionError KEYWORD OrderedDict POSITIONAL _get_schema_from_target append arg arguments "
        "deserialize_input extend has_default_value inputs iskeyword keyword kind kwarg_only len list name "
        "tuple values"
    ),
    "deserialize_input": _words(
        "AssertionError GraphArgument SerializeError _SERIALIZE_TO_TORCH_DTYPE _SERIALIZE_TO_TORCH_LAYOUT "
        "_SERIALIZE_TO_TORCH_MEMORY_FORMAT __name__ _create_graph_module_for_export as_bool as_complex "
        "as_custom_obj as_device as_float as_int as_layout as_memory_format as_operator as_scalar_type as_string "
        "as_sym_bool as_sym_float as_sym_int as_tensor complex constants create_node deserialize_device "
        "deserialize_graph deserialize_input deserialize_operator deserialize_sym_argument dict ep graph imag "
        "isinstance items len list map module name real register_module save_graph_module "
        "serialized_name_to_node tuple type value"
    ),
    "deserialize_metadata": _words(
        "AssertionError ST_DELIMITER _deserialize_from_node append deserialize_operator dict enumerate get "
        "getattr hasattr json len loads nn split startswith str torch tuple"
    ),
    "sync_fx_node": _words("AssertionError SerializeError meta name serialized_name_to_meta serialized_name_to_node"),
    "deserialize_outputs": _words(
        "AssertionError SymBoolArgument SymFloatArgument SymIntArgument _rename _target_to_str as_name as_tensor "
        "deserialize_metadata deserialize_multiple_outputs generate_getitem getattr graph isinstance len meta "
        "metadata name outputs serialized_name_to_node sync_fx_node target tuple type value"
    ),
    "deserialize_operator": _words(
        "deserialize_extension_operator getattr hasattr math operator split startswith torch"
    ),
    "create_node": _words(
        "AssertionError Node SymBool SymFloat SymInt __name__ _create_node_hooks _find_nodes_lookup_table "
        "_graph_namespace _insert _len _target_to_str associate_name_with_obj create_name dict getattr "
        "immutable_dict insert isinstance owning_module pytree torch tree_iter tuple type warn warnings"
    ),
}

#: Argument kinds of the schema (``ArgumentKind``): the converter gives the enum's integer.
_POSITIONAL = 1
_KEYWORD = 2


class _Plan:
    """What ``deserialize_inputs`` reads of an operator's schema, and whether it returns one tensor."""

    __slots__ = ("arguments", "single_tensor")

    def __init__(self, target: Any, torch: Any) -> None:
        schema = target._schema
        self.arguments = tuple(
            (a.name, a.has_default_value(), a.kwarg_only, keyword.iskeyword(a.name)) for a in schema.arguments
        )
        returns = schema.returns
        self.single_tensor = len(returns) == 1 and isinstance(returns[0].real_type, torch.TensorType)


class NodeBuilder:
    """Builds the nodes of one load into torch's ``GraphModuleDeserializer`` (see the module docs)."""

    def __init__(self, kit: _Kit, deserializer: Any, torchs: dict[str, Callable[..., Any]],
                 invalidate: Callable[[], None]) -> None:  # fmt: skip
        self.kit = kit
        self.d = deserializer
        self.torchs = torchs
        self.invalidate = invalidate
        self.operators: dict[str, Any] = {}
        self.plans: dict[Any, _Plan | None] = {}
        self.nn_module_stacks: dict[str, dict[str, Any]] = {}
        self.module_entries: dict[str, tuple[str, Any]] = {}
        self.source_fn_stacks: dict[str, list[Any]] = {}
        self.torch_fns: dict[str, Any] = {}
        self.fast = 0
        self.slow = 0
        self.inputs = self._input_handlers()

    # -- torch's methods, faster ------------------------------------------------------------------

    def deserialize_operator(self, serialized_target: str) -> Any:
        found = self.operators.get(serialized_target)
        if found is None:
            found = self.operators[serialized_target] = self.torchs["deserialize_operator"](self.d, serialized_target)
        return found

    def deserialize_metadata(self, metadata: dict[str, str]) -> dict[str, Any]:
        ret: dict[str, Any] = {}
        if stack_trace := metadata.get("stack_trace"):
            ret["stack_trace"] = stack_trace
        if text := metadata.get("nn_module_stack"):
            stack = self.nn_module_stacks.get(text)
            if stack is None:
                stack = self.nn_module_stacks[text] = self._module_stack(text)
            ret["nn_module_stack"] = dict(stack)
        if text := metadata.get("source_fn_stack"):
            fns = self.source_fn_stacks.get(text)
            if fns is None:
                fns = self.source_fn_stacks[text] = self._torchs_meta("source_fn_stack", text)
            ret["source_fn_stack"] = list(fns)
        if text := metadata.get("torch_fn"):
            fn = self.torch_fns.get(text)
            if fn is None:
                fn = self.torch_fns[text] = self._torchs_meta("torch_fn", text)
            ret["torch_fn"] = fn  # a tuple of strings, as torch's
        if text := metadata.get("custom"):
            ret["custom"] = self.kit.json_loads(text)
        if text := metadata.get("from_node"):
            ret["from_node"] = self.d._deserialize_from_node(self.kit.json_loads(text))
        return ret

    def _torchs_meta(self, key: str, text: str) -> Any:
        return self.torchs["deserialize_metadata"](self.d, {key: text})[key]

    def _module_stack(self, text: str) -> dict[str, Any]:
        """torch's parse of an ``nn_module_stack`` string: its ``;``-separated entries each parsed once
        per load by torch's own code (deeper layers repeat their parents' entries); anything unusual
        (an empty entry) as torch parses the whole string, errors included."""
        entries: list[Any] = []
        for item in text.split(self.kit.st_delimiter):
            entry = self.module_entries.get(item)
            if entry is None:
                parsed = self._torchs_meta("nn_module_stack", item) if item else None
                if not parsed or len(parsed) != 1:
                    return dict(self._torchs_meta("nn_module_stack", text))
                entry = self.module_entries[item] = next(iter(parsed.items()))
            entries.append(entry)
        return dict(entries)

    def deserialize_node(self, serialized_node: Any, target: Any) -> None:
        kit = self.kit
        if type(target) is kit.op_overload and target not in kit.slow_targets:
            if target in self.plans:
                plan = self.plans[target]
            else:
                plan = self.plans[target] = self._plan(target)
            if plan is not None:
                self._node(serialized_node, target, plan)
                self.fast += 1
                return
        self.slow += 1
        try:
            self.torchs["deserialize_node"](self.d, serialized_node, target)
        finally:
            self.invalidate()  # torch's code may have changed the shape environment

    def _plan(self, target: Any) -> _Plan | None:
        try:
            return _Plan(target, self.kit.torch)
        except Exception:  # no schema torch's way reads: its own code says what is wrong
            return None

    # -- one node -----------------------------------------------------------------------------------

    def _node(self, serialized_node: Any, target: Any, plan: _Plan) -> None:
        d = self.d
        nd = serialized_node.__dict__
        outputs = nd["outputs"]
        name = nd["name"]
        if not name:
            # torch: ``serialized_node.outputs[0].as_tensor.name`` (an AttributeError when it is another kind)
            name = outputs[0].as_tensor.name if plan.single_tensor else None
        args, kwargs = self._arguments(nd["inputs"], plan)
        fx_node = self._create_node(d.graph, target, args, kwargs, name)
        if len(outputs) == 1 and (v := outputs[0].__dict__["as_tensor"]) is not None:
            # torch's sync_fx_node, without renaming a node to the name it has (a rename re-files the node
            # in the graph's lookup table where it already is, the last one made)
            value_name = v.__dict__["name"]
            named = d.serialized_name_to_node
            if value_name in named:
                raise self.kit.serialize_error(f"Node {value_name} has already been deserialized before.")
            if fx_node.name != value_name or d.graph.owning_module is not None:
                fx_node.name = value_name
            named[value_name] = fx_node
            meta = fx_node.meta
            if "val" in meta:
                raise AssertionError(f"fx_node {value_name} already has 'val' in meta")
            meta["val"] = d.serialized_name_to_meta[value_name]
        else:
            d.deserialize_outputs(serialized_node, fx_node)
        meta = fx_node.meta
        meta.update(self.deserialize_metadata(nd["metadata"]))
        if "nn_module_stack" not in meta:
            meta["nn_module_stack"] = {}

    def _arguments(self, inputs: list[Any], plan: _Plan) -> tuple[tuple[Any, ...], Any]:
        kinds: dict[str, Any] = {}
        actual: dict[str, Any] = {}
        for named in inputs:
            nd = named.__dict__
            kinds[nd["name"]] = nd["kind"]
        handlers = self.inputs
        fallback = self.d.deserialize_input
        for named in inputs:
            nd = named.__dict__
            arg = nd["arg"]
            ad = arg.__dict__
            handler = handlers.get(id(ad["_type"]))
            actual[nd["name"]] = fallback(arg) if handler is None else handler(ad)
        args: list[Any] = []
        kwargs: OrderedDict[str, Any] = OrderedDict()
        for name, has_default, kwarg_only, is_keyword in plan.arguments:
            if name in actual:
                arg = actual[name]
                kind = kinds[name]
                if kind == _POSITIONAL:
                    args.append(arg)
                    continue
                elif kind == _KEYWORD and not is_keyword:
                    kwargs[name] = arg
                    continue
            # as torch's deserialize_inputs falls back for files without argument kinds
            if not has_default and not kwarg_only:
                args.append(actual[name])
            elif is_keyword:
                if kwarg_only:
                    raise AssertionError(f"schema_arg {name} should not be kwarg_only")
                if len(kwargs) > 0:
                    kwargs = OrderedDict()
                    args.extend(list(kwargs.values()))
                args.append(actual[name])
            elif name in actual:
                kwargs[name] = actual[name]
        return tuple(args), kwargs

    def _create_node(self, graph: Any, target: Any, args: tuple[Any, ...], kwargs: Any, name: str | None) -> Any:
        """``graph.create_node("call_function", target, args, kwargs, name)`` (see the module docs)."""
        kit = self.kit
        if not kwargs:
            kwargs = kit.immutable_dict()
        candidate = name if name is not None else graph._target_to_str(target)
        namespace = graph._graph_namespace
        name = namespace.create_name(candidate, None)
        n = kit.node(graph, name, "call_function", target, args, kwargs, None)
        if graph.owning_module is not None and getattr(graph.owning_module, "_create_node_hooks", None) is not None:
            for f in graph.owning_module._create_node_hooks:
                f(n)
        namespace.associate_name_with_obj(name, n)
        graph._insert(n)
        graph._find_nodes_lookup_table.insert(n)
        graph._len += 1
        return n

    # -- arguments ---------------------------------------------------------------------------------

    def _input_handlers(self) -> dict[int, Callable[[dict[str, Any]], Any]]:
        """``id(union tag) -> handler`` for the common argument kinds, each as torch's ``deserialize_input``
        reads it (the tags are the converter's own objects, shared by every value of a kind)."""
        kit = self.kit
        d = self.d
        dtypes, layouts, formats = kit.dtypes, kit.layouts, kit.memory_formats
        device_of = kit.deserialize_device

        def nodes() -> dict[str, Any]:
            found: dict[str, Any] = d.serialized_name_to_node  # replaced for each nested graph: read each time
            return found

        def as_none(ad: dict[str, Any]) -> Any:
            return None

        def as_tensor(ad: dict[str, Any]) -> Any:
            return nodes()[ad["as_tensor"].__dict__["name"]]

        def as_scalar_type(ad: dict[str, Any]) -> Any:
            return dtypes[ad["as_scalar_type"]]

        def as_memory_format(ad: dict[str, Any]) -> Any:
            return formats[ad["as_memory_format"]]

        def as_layout(ad: dict[str, Any]) -> Any:
            return layouts[ad["as_layout"]]

        def as_device(ad: dict[str, Any]) -> Any:
            return device_of(ad["as_device"])

        def plain(key: str) -> Callable[[dict[str, Any]], Any]:
            def handler(ad: dict[str, Any]) -> Any:
                return ad[key]

            return handler

        def sym(key: str) -> Callable[[dict[str, Any]], Any]:
            def handler(ad: dict[str, Any]) -> Any:
                return d.deserialize_sym_argument(ad[key])

            return handler

        def as_tensors(ad: dict[str, Any]) -> Any:
            value = ad["as_tensors"]
            if len(value) == 0:
                return []
            found = nodes()
            return [found[a.__dict__["name"]] for a in value]

        def listed(key: str) -> Callable[[dict[str, Any]], Any]:
            def handler(ad: dict[str, Any]) -> Any:
                value = ad[key]
                if len(value) == 0:
                    return []
                return list(value)

            return handler

        def syms(key: str) -> Callable[[dict[str, Any]], Any]:
            def handler(ad: dict[str, Any]) -> Any:
                value = ad[key]
                if len(value) == 0:
                    return []
                return [d.deserialize_sym_argument(a) for a in value]

            return handler

        def as_optional_tensors(ad: dict[str, Any]) -> Any:
            value = ad["as_optional_tensors"]
            if len(value) == 0:
                return []
            found = nodes()
            out = []
            for a in value:
                t = a.__dict__["as_tensor"]  # the converter allows as_tensor or as_none, nothing else
                out.append(None if t is None else found[t.__dict__["name"]])
            return out

        handlers: dict[str, Callable[[dict[str, Any]], Any]] = {
            "as_none": as_none,
            "as_tensor": as_tensor,
            "as_scalar_type": as_scalar_type,
            "as_memory_format": as_memory_format,
            "as_layout": as_layout,
            "as_device": as_device,
            "as_int": plain("as_int"),
            "as_float": plain("as_float"),
            "as_bool": plain("as_bool"),
            "as_string": plain("as_string"),
            "as_sym_int": sym("as_sym_int"),
            "as_sym_float": sym("as_sym_float"),
            "as_sym_bool": sym("as_sym_bool"),
            "as_tensors": as_tensors,
            "as_ints": listed("as_ints"),
            "as_floats": listed("as_floats"),
            "as_bools": listed("as_bools"),
            "as_strings": listed("as_strings"),
            "as_sym_ints": syms("as_sym_ints"),
            "as_sym_floats": syms("as_sym_floats"),
            "as_sym_bools": syms("as_sym_bools"),
            "as_optional_tensors": as_optional_tensors,
        }
        return {id(tag): handlers[str(tag)] for tag in kit.argument_tags(handlers)}


class _Kit:
    """What the node builder uses of the installed torch, looked up once."""

    def __init__(self, serde: Any) -> None:
        import json

        torch = importlib.import_module("torch")
        fx_node = importlib.import_module("torch.fx.node")
        self.torch = torch
        self.json_loads = json.loads
        self.op_overload = torch._ops.OpOverload
        self.node = fx_node.Node
        self.immutable_dict = importlib.import_module("torch.fx.immutable_collections").immutable_dict
        self.dtypes = serde._SERIALIZE_TO_TORCH_DTYPE
        self.layouts = serde._SERIALIZE_TO_TORCH_LAYOUT
        self.memory_formats = serde._SERIALIZE_TO_TORCH_MEMORY_FORMAT
        self.deserialize_device = serde.deserialize_device
        self.serialize_error = serde.SerializeError
        self.st_delimiter = serde.ST_DELIMITER
        aten = torch.ops.aten
        #: operators torch's deserialize_node treats apart: symbolic ones, and those that change the shape
        #: environment after the node is made
        self.slow_targets = frozenset(
            [t for t in serde._SYM_OPS if isinstance(t, self.op_overload)]
            + [aten.item.default, aten._assert_scalar.default, aten.sym_constrain_range_for_size.default]
        )
        self._tags: dict[str, Any] = {}

    def argument_tags(self, kinds: dict[str, Any]) -> list[Any]:
        """The converter's union tag object of each argument kind in ``kinds`` (one object per kind,
        shared by every ``Argument`` it makes, so a node's kind is found by the tag's identity)."""
        from tracepack.torch.serde import converters

        if not self._tags:
            make = converters().by_name["Argument"]
            union = importlib.import_module("torch._export.serde.union")
            for kind in kinds:
                tag = make({kind: _SAMPLES.get(kind, [])}).__dict__["_type"]
                if not isinstance(tag, union._UnionTag) or str(tag) != kind:
                    raise TypeError(kind)
                if make({kind: _SAMPLES.get(kind, [])}).__dict__["_type"] is not tag:
                    raise TypeError(kind)  # not shared: the identity lookup would miss every time
                self._tags[kind] = tag
        return [self._tags[k] for k in kinds]


#: A value of each scalar argument kind the converter accepts (lists: ``[]``), to find its tag.
_SAMPLES: dict[str, Any] = {
    "as_none": True,
    "as_tensor": {"name": "x"},
    "as_int": 0,
    "as_float": 0.0,
    "as_string": "",
    "as_sym_int": {"as_int": 0},
    "as_sym_float": {"as_float": 0.0},
    "as_sym_bool": {"as_bool": True},
    "as_scalar_type": 0,
    "as_memory_format": 0,
    "as_layout": 0,
    "as_device": {"type": "cpu", "index": None},
    "as_bool": True,
}


_LOCK = threading.Lock()
_KIT: dict[str, _Kit | None] = {}


def _checked_kit(serde: Any) -> _Kit | None:
    try:
        torch = importlib.import_module("torch")
        base = serde.GraphModuleDeserializer
        for name, expected in _EXPECTED.items():
            owner = torch.fx.Graph if name == "create_node" else base
            if _names(getattr(owner, name).__code__) != expected:
                return None
        return _Kit(serde)
    except Exception:  # any surprise: torch's own code runs
        return None


def _kit(serde: Any) -> _Kit | None:
    with _LOCK:
        if "kit" not in _KIT:
            _KIT["kit"] = _checked_kit(serde)
        return _KIT["kit"]


def checked(serde: Any) -> bool:
    """Whether the installed torch builds nodes the way :class:`NodeBuilder` does (checked once)."""
    return _kit(serde) is not None


def node_builder(serde: Any, deserializer: Any, torchs: dict[str, Callable[..., Any]],
                 invalidate: Callable[[], None]) -> NodeBuilder | None:  # fmt: skip
    """A :class:`NodeBuilder` for this load, or None where the installed torch differs."""
    kit = _kit(serde)
    return None if kit is None else NodeBuilder(kit, deserializer, torchs, invalidate)
