"""torch's own export deserializer, with the work it repeats or throws away removed.

``tracepack.torch.load`` runs torch's ``ExportedProgramDeserializer`` and
``GraphModuleDeserializer``: the same code, rebound (the same code objects over a copy of their
module's globals) so that a few steps take a shorter road to the same result:

``sympy``
    the checked, memoized parse of symbolic expressions (:class:`tracepack.torch.loader._CachedSympy`);
    always on (it is also the safety check).
``fake_tensors``
    torch makes each node's fake tensor with ``torch.empty_strided`` under its ``FakeTensorMode``:
    a trip through the mode's dispatcher, cache key and cache entry for every value. The
    deserializer's own fake-tensor constructor path does exactly this for a constructor (a meta
    tensor made inside ``in_kernel_invocation_manager``, wrapped in a ``FakeTensor`` on the
    requested device); here it is called directly. Static sizes are read without the union
    accessors.
``replay``
    (on top of ``fake_tensors``) the first value of each dtype, device and symbolic shape is made
    that way; every later one gets fresh size and stride nodes equal to the first's without
    parsing its strings again, and the symbolic arithmetic ``empty_strided`` does on them (storage
    size, checks) answers from a memo of this load while the shape environment does not change
    (:mod:`tracepack.torch.fake`). Torch's ``_parse_sym_expr`` tells the memo whenever it runs.
``nodes``
    a node calling an ATen operator is built as ``deserialize_node`` builds it, with its operator,
    argument plan and metadata strings looked up once per load (:mod:`tracepack.torch.nodes`);
    every other node goes through torch's method.
``lazy_root``
    ``GraphModuleDeserializer.deserialize`` builds a ``GraphModule`` only to hand it to
    ``ExportedProgram``, which builds its own from it (after replacing the graph's code generator)
    and never uses the first one's Python code: that first one is a ``_LazyGraphModule``, whose
    code is generated only if something asks for it. Nested graphs (``torch.cond`` branches) and the
    program's own graph module stay plain ``GraphModule``\\ s.
``unbacked``
    after building a graph, torch walks every node's value looking for unbacked symbols still
    pending; with none pending (every static graph, and every dynamic one without data-dependent
    sizes) the walk cannot find anything and is skipped.

Each step other than ``sympy`` is used only when the installed torch has what it relies on, checked
once per process: the names the rebound code uses, the shape of torch's own function (the fake
tensor step compares the names torch's ``deserialize_tensor_meta`` uses with the ones it was
written against; ``nodes`` those of every method it replaces), and a trial (the fake tensor steps
make tensors both ways and compare them, their shared nodes and storages and the shape
environment they leave). Otherwise torch's code runs as it is. :data:`FAST` switches all of them
off and :data:`SKIP` some (tests load every file both ways and compare with ``torch.export.load``).

On every road, ``GraphModuleDeserializer.deserialize`` is rebound too: example inputs given as the
archive's bytes are unpickled inside it (where torch unpickles them, so fake tensors among them are
made in the program's fake mode) by the loader's safe unpickler, never torch's (which falls back to
a full unpickle).
"""

from __future__ import annotations

import importlib
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["FAST", "SKIP", "Patched", "patched"]

#: Use the shorter roads where the installed torch allows them (tests turn this off to compare).
FAST = True

#: Shorter roads left out even where the installed torch allows them (the benchmark times the loader
#: without ``replay`` and ``nodes``, as it was before them; tests take each road apart).
SKIP: frozenset[str] = frozenset()

#: The globals torch's ``deserialize_tensor_meta`` reads (torch 2.6 through 2.15); another set means
#: torch changed how it makes fake tensors, and its own code runs.
_TENSOR_META_NAMES = frozenset(
    [
        "fake_tensor_mode",
        "cast",
        "FakeTensor",
        "torch",
        "empty_strided",
        "tuple",
        "deserialize_sym_int",
        "sizes",
        "strides",
        "deserialize_device",
        "device",
        "_SERIALIZE_TO_TORCH_DTYPE",
        "dtype",
        "requires_grad",
    ]
)


@dataclass(frozen=True)
class Patched:
    """torch's ``ExportedProgramDeserializer.deserialize`` rebound, and what it uses."""

    deserialize: Callable[..., Any]
    #: per-thread state: ``sympy`` is the current load's :class:`_CachedSympy`
    state: threading.local
    #: the shorter roads in use (names as in the module docs)
    features: tuple[str, ...]
    #: example inputs given as bytes are unpickled inside torch's deserializer by ``state.artifact``
    #: (otherwise the caller unpickles them first: fake tensors among them cannot be made then)
    inputs_inside: bool = False


_LOCK = threading.Lock()
_PATCHED: dict[tuple[bool, frozenset[str]], Patched] = {}


def _rebind(fn: Any, g: dict[str, Any]) -> Any:
    """``fn``'s code over the globals ``g`` (same defaults, same name)."""
    out = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    out.__kwdefaults__ = fn.__kwdefaults__
    out.__qualname__ = fn.__qualname__
    return out


class _Proxy:
    """A module seen through a few replaced attributes (everything else is the module's own)."""

    def __init__(self, module: Any, **replaced: Any) -> None:
        self.__dict__.update(replaced)
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


# -- fake tensors ------------------------------------------------------------------------------------


def _names(code: types.CodeType) -> frozenset[str]:
    """The global and attribute names ``code`` and the code nested in it (comprehensions) use."""
    out = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= _names(const)
    return frozenset(out)


def _fake_tensor_maker(serde: Any) -> Callable[[Any, Any], Any] | None:
    """A ``deserialize_tensor_meta`` that makes torch's fake tensor without its dispatcher, or None."""
    torch = importlib.import_module("torch")
    method = getattr(serde.GraphModuleDeserializer, "deserialize_tensor_meta", None)
    if method is None or _names(method.__code__) != _TENSOR_META_NAMES:
        return None
    fake = importlib.import_module("torch._subclasses.fake_tensor")
    manager = getattr(fake, "in_kernel_invocation_manager", None)
    fake_tensor = getattr(fake, "FakeTensor", None)
    dtypes = getattr(serde, "_SERIALIZE_TO_TORCH_DTYPE", None)
    device_of = getattr(serde, "deserialize_device", None)
    if manager is None or fake_tensor is None or dtypes is None or device_of is None:
        return None
    empty_strided = torch.empty_strided
    meta = torch.device("meta")

    def deserialize_tensor_meta(self: Any, tensor_meta: Any) -> Any:
        sym_int = self.deserialize_sym_int
        sizes = []
        for v in tensor_meta.sizes:
            x = vars(v).get("as_int")  # a static size; a symbolic one has as_int None
            sizes.append(x if type(x) is int else sym_int(v))
        strides = []
        for v in tensor_meta.strides:
            x = vars(v).get("as_int")
            strides.append(x if type(x) is int else sym_int(v))
        device = device_of(tensor_meta.device)
        dtype = dtypes[tensor_meta.dtype]
        mode = self.fake_tensor_mode
        with manager(mode):
            elem = empty_strided(tuple(sizes), tuple(strides), dtype=dtype, device=meta)
        out = fake_tensor(mode, elem, device)
        if tensor_meta.requires_grad:
            out.requires_grad_(True)
        return out

    return deserialize_tensor_meta if _same_fake_tensors(serde, method, deserialize_tensor_meta) else None


def _describe_fake(t: Any) -> tuple[Any, ...]:
    torch = importlib.import_module("torch")
    return (
        type(t),
        t.dtype,
        tuple(t.shape),
        t.stride(),
        t.storage_offset(),
        t.device,
        t.requires_grad,
        t.is_leaf,
        t.grad_fn,
        sorted(vars(t)),
        str(torch._C._dispatch_keys(t)),
        t.untyped_storage().nbytes(),
        t.fake_mode,
        t.constant,
    )


def _same_fake_tensors(serde: Any, torchs: Any, ours: Any) -> bool:
    """Whether ``ours`` makes what torch's ``deserialize_tensor_meta`` makes, on a few trial metas."""
    try:
        from tracepack.torch.serde import converters

        d = serde.GraphModuleDeserializer()
        symbolic_shapes = importlib.import_module("torch.fx.experimental.symbolic_shapes")
        fake = importlib.import_module("torch._subclasses.fake_tensor")
        d.shape_env = symbolic_shapes.ShapeEnv(assume_static_by_default=True)
        d.fake_tensor_mode = fake.FakeTensorMode(
            allow_fallback_kernels=False, allow_non_fake_inputs=True, shape_env=d.shape_env
        )
        c = converters()
        trials = [
            {"dtype": 7, "sizes": [{"as_int": 2}, {"as_int": 3}], "strides": [{"as_int": 3}, {"as_int": 1}],
             "requires_grad": True, "device": {"type": "cpu", "index": None}, "storage_offset": {"as_int": 0},
             "layout": 5},
            {"dtype": 4, "sizes": [{"as_int": 4}, {"as_int": 0}], "strides": [{"as_int": 1}, {"as_int": 4}],
             "requires_grad": False, "device": {"type": "cpu", "index": None}, "storage_offset": {"as_int": 0},
             "layout": 5},
        ]  # fmt: skip
        for trial in trials:
            meta = c.convert("TensorMeta", trial, source="<trial>")
            if _describe_fake(torchs(d, meta)) != _describe_fake(ours(d, meta)):
                return False
        return True
    except Exception:  # any surprise: torch's own code runs
        return False


# -- the rebound deserializers --------------------------------------------------------------------------


def _lazy_graph_module() -> Any:
    try:
        lazy = importlib.import_module("torch.fx._lazy_graph_module")
    except ImportError:
        return None
    cls = getattr(lazy, "_LazyGraphModule", None)
    return cls if isinstance(cls, type) and hasattr(cls, "real_recompile") else None


def _build(serde: Any, fast: bool, skip: frozenset[str] = frozenset()) -> Patched:
    g = dict(vars(serde))
    state = threading.local()
    features: list[str] = ["sympy"]

    class _SympyRouter:
        def __getattr__(self, name: str) -> Any:
            current = getattr(state, "sympy", None)
            return getattr(current if current is not None else serde.sympy, name)

    g["sympy"] = _SympyRouter()
    base = serde.GraphModuleDeserializer
    methods: dict[str, Any] = {"_parse_sym_expr": _rebind(base._parse_sym_expr, g)}
    #: per-load helpers made with each deserializer: name -> (deserializer -> helper or None)
    helpers: dict[str, Callable[[Any], Any]] = {}

    if fast:
        maker = _fake_tensor_maker(serde)
        if maker is not None:
            methods["deserialize_tensor_meta"] = maker
            features.append("fake_tensors")
            from tracepack.torch import fake

            if "replay" not in skip and fake.checked(serde):
                parse = methods["_parse_sym_expr"]

                def replayed(self: Any, tensor_meta: Any) -> Any:
                    # made on first use: the shape environment and fake mode exist by then
                    f = self.__dict__.get("_tracepack_fake")
                    if f is None:
                        f = self.__dict__["_tracepack_fake"] = fake.factory(serde, self, maker)
                    return f(tensor_meta)

                def parse_and_invalidate(self: Any, *args: Any, **kwargs: Any) -> Any:
                    f = self.__dict__.get("_tracepack_fake")
                    if f is None:
                        return parse(self, *args, **kwargs)
                    with f.watching():  # a parse that changed the shape environment drops the memo
                        return parse(self, *args, **kwargs)

                methods["deserialize_tensor_meta"] = replayed
                methods["_parse_sym_expr"] = parse_and_invalidate
                features.append("replay")

        from tracepack.torch import nodes

        if "nodes" not in skip and nodes.checked(serde):
            torchs = {n: getattr(base, n) for n in ("deserialize_node", "deserialize_metadata", "deserialize_operator")}
            helpers["nodes"] = lambda d: nodes.node_builder(serde, d, torchs, lambda: _invalidate(d))
            features.append("nodes")

        graph_fn = base.deserialize_graph
        shapes = g.get("symbolic_shapes")
        walk = getattr(shapes, "_free_unbacked_symbols_with_path", None)
        if walk is not None and "symbolic_shapes" in graph_fn.__code__.co_names:

            def free_unbacked(*args: Any, **kwargs: Any) -> Any:
                pending = kwargs.get("pending")
                if pending is not None and not pending:
                    return {}  # only symbols in ``pending`` are ever reported
                return walk(*args, **kwargs)

            quiet = _Proxy(shapes, _free_unbacked_symbols_with_path=free_unbacked)
            methods["deserialize_graph"] = _rebind(graph_fn, {**g, "symbolic_shapes": quiet})
            features.append("unbacked")

    # GraphModuleDeserializer.deserialize, rebound: example inputs given as bytes are unpickled by the
    # loader's safe unpickler (``state.artifact``), not torch's (which falls back to a full unpickle),
    # and where the installed torch allows, the graph module it hands to ExportedProgram is lazy.
    top = base.deserialize
    inputs_inside = {"_CURRENT_DESERIALIZER", "deserialize_torch_artifact"} <= set(top.__code__.co_names)
    if inputs_inside:
        torchs_artifact = serde.deserialize_torch_artifact

        def artifact(serialized: Any) -> Any:
            load = getattr(state, "artifact", None)
            if load is None or isinstance(serialized, (dict, tuple)) or len(serialized) == 0:
                return torchs_artifact(serialized)  # no bytes to unpickle: torch's own answer
            out = load(serialized)
            if not isinstance(out, (tuple, dict)):
                raise AssertionError(f"expected tuple or dict, got {type(out).__name__}")
            return out

        gd = {**g, "deserialize_torch_artifact": artifact, "_CURRENT_DESERIALIZER": None}
        lazy = _lazy_graph_module() if fast else None
        ep = g.get("ep")
        if lazy is not None and ep is not None and hasattr(ep, "_create_graph_module_for_export"):

            def lazy_root(root: Any, graph: Any) -> Any:
                return lazy(root, graph)  # ExportedProgram builds (and compiles) its own from it

            gd["ep"] = _Proxy(ep, _create_graph_module_for_export=lazy_root)
            features.append("lazy_root")
        inner = _rebind(top, gd)

        def deserialize(self: Any, *args: Any, **kwargs: Any) -> Any:
            # torch's code sets the module global _CURRENT_DESERIALIZER (read by pickled fake
            # tensors in the example inputs and metadata): rebound, it would set ``gd``'s; set torch's here.
            if serde._CURRENT_DESERIALIZER is not None:
                raise AssertionError("_CURRENT_DESERIALIZER is already set")
            serde._CURRENT_DESERIALIZER = self
            gd["_CURRENT_DESERIALIZER"] = None
            try:
                return inner(self, *args, **kwargs)
            finally:
                serde._CURRENT_DESERIALIZER = None
                gd["_CURRENT_DESERIALIZER"] = None
                # torch drops the deserializer once this returns; its methods bound to it and its lazy
                # map's closures make it a reference cycle, whose parts (the fake tensor memo, tables of
                # every node) would wait for the cyclic collector: let go of them now.
                self.__dict__.clear()

        methods["deserialize"] = deserialize

    def make_graph_deserializer(*args: Any, **kwargs: Any) -> Any:
        # torch's class is final (a metaclass refuses subclasses): the methods are the instance's own.
        d = base(*args, **kwargs)
        for name, fn in methods.items():
            setattr(d, name, types.MethodType(fn, d))
        make_nodes = helpers.get("nodes")
        builder = None if make_nodes is None else make_nodes(d)
        if builder is not None:
            d.deserialize_node = builder.deserialize_node
            d.deserialize_metadata = builder.deserialize_metadata
            d.deserialize_operator = builder.deserialize_operator
        return d

    g["GraphModuleDeserializer"] = make_graph_deserializer
    run = _rebind(serde.ExportedProgramDeserializer.deserialize, g)
    return Patched(deserialize=run, state=state, features=tuple(features), inputs_inside=inputs_inside)


def _invalidate(d: Any) -> None:
    """torch's own code ran on ``d``: the fake tensor memo reuses nothing computed before."""
    f = d.__dict__.get("_tracepack_fake")
    if f is not None:
        f.invalidate()


def patched(serde: Any, *, fast: bool | None = None, skip: frozenset[str] | None = None) -> Patched:
    """torch's deserializer rebound (built once per process, ``fast`` and ``skip`` setting)."""
    fast = FAST if fast is None else fast
    skip = SKIP if skip is None else skip
    with _LOCK:
        found = _PATCHED.get((fast, skip))
        if found is None:
            found = _PATCHED[(fast, skip)] = _build(serde, fast, skip)
    return found
