"""The fake tensors of a program's values: made torch's way once per shape, then replayed.

torch's deserializer makes every value's ``FakeTensor`` with ``torch.empty_strided`` under its
``FakeTensorMode``. With symbolic sizes that call costs about a millisecond: torch's C++ asks
every size and stride's ``SymNode`` (Python objects) to check it is not negative, to compare it
with 0 and to add up the storage size, each step building a sympy expression and consulting the
shape environment. A transformer has thousands of values and a few dozen distinct shapes, so
the same questions get the same answers thousands of times.

:class:`FakeTensors` makes each value's fake tensor as torch does, with three shortcuts:

* **the first tensor of a shape is made the way torch makes it** (its sizes and strides parsed
  by torch's own ``deserialize_sym_int``, with every effect that has on the shape environment);
  any other value with the same dtype, device, ``requires_grad``, symbolic sizes and strides
  (expressions and hints) gets sizes and strides of its own: fresh ``SymNode`` objects equal to
  the first one's (same expression object, hint and type), as torch would create them, without
  parsing the strings again;
* **the symbolic arithmetic inside ``empty_strided`` is replayed**: while a tensor is made, its
  size and stride nodes are of a subclass of ``SymNode`` whose arithmetic and checks look up
  what the same operation on the same operands gave before in this load. A result is reused
  only while the shape environment is in the state it was in when it was computed (its version
  counter, guards, deferred runtime asserts, ranges and replacements, and every parse of a new
  expression), and a check (``expect_true``, ``guard_or_false``...) only when computing it changed
  nothing there. Results are fresh ``SymNode`` objects (copies of the first result); every node
  the tensor keeps (sizes, strides, storage size) is a plain ``SymNode`` again before the tensor
  is handed out. No torch object is patched: the subclass lives for one load;
* **the ``FakeTensor`` wrapper is made without its constructor's argument handling**
  (``Tensor._make_subclass`` and the same instance fields as ``FakeTensor.__new__`` sets).

:func:`factory` checks once per process that the installed torch does what these were written
against (the names ``FakeTensor.__new__`` and ``SymNode``'s methods use, and a trial: tensors of
static and symbolic shapes made both ways, compared field by field with the shape environments
they leave) and returns ``None`` otherwise (torch's own code then runs).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import importlib
import itertools
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["FakeTensors", "factory"]

#: What ``FakeTensor.__new__`` reads (torch 2.12 through 2.15): another set means torch changed how
#: it makes a fake tensor, and its own constructor runs.
_FAKE_NEW_NAMES = frozenset(
    [
        "cast",
        "dict",
        "str",
        "object",
        "_FAKE_TENSOR_CONSTRUCTOR_IGNORED_STATE_ATTRS",
        "pop",
        "next",
        "iter",
        "TypeError",
        "isinstance",
        "FakeTensorMode",
        "Tensor",
        "type",
        "FakeTensor",
        "_normalize_fake_device",
        "torch",
        "device",
        "ValueError",
        "_make_subclass",
        "requires_grad",
        "_allow_unsafe_data_ptr_access",
        "_C",
        "_set_throw_on_mutable_data_ptr",
        "_set_warn_deprecated_on_mutable_data_ptr",
        "AssertionError",
        "allow_meta",
        "fake_device",
        "fake_mode",
        "constant",
        "pytype",
        "dispatch_keys",
        "real_tensor",
        "nonzero_memo",
        "item_memo",
        "unique_memo",
        "unique_consecutive_memo",
        "nested_int_memo",
        "_is_param",
        "FakeTensorConfig",
        "debug",
        "CapturedTraceback",
        "extract",
        "_debug_trace",
    ]
)

#: ``SymNode`` methods torch's C++ calls while making a tensor, replayed from the memo. Binary
#: operations give a node, checks a Python value; ``maybe_as_int`` reads the expression.
_BINARY = ("add", "sub", "mul", "eq", "ne", "ge", "gt", "le", "lt", "floordiv", "mod", "sym_max", "sym_min")
_CHECKS = ("expect_true", "guard_bool", "guard_int", "guard_or_false", "guard_or_true",
           "guard_size_oblivious")  # fmt: skip

#: Leaf tokens are tuples; result tokens are ints from this counter (unique per process).
_TOKENS = itertools.count()

_SENTINEL = object()


def _dims(values: list[Any]) -> tuple[Any, ...] | None:
    """Sizes or strides of a ``TensorMeta`` as ints and ``(expr_str, hint)`` pairs (None: unusual)."""
    ints = [v.__dict__.get("as_int") for v in values]
    if None not in ints and all(type(x) is int for x in ints):
        return tuple(ints)  # static: the common case, read in one pass
    out: list[Any] = []
    for v in values:
        dv = v.__dict__
        x = dv.get("as_int")
        if type(x) is int:
            out.append(x)
            continue
        e = dv.get("as_expr")
        if e is None:
            return None
        de = e.__dict__
        text = de.get("expr_str")
        hint = de.get("hint")
        if type(text) is not str:
            return None
        if hint is None:
            out.append((text, None))
            continue
        h = hint.__dict__.get("as_int")
        if type(h) is not int:
            return None
        out.append((text, h))
    return tuple(out)


def _static(dims: tuple[Any, ...]) -> bool:
    """Whether :func:`_dims` gave only ints (symbolic dims are tuples)."""
    return tuple not in set(map(type, dims))


class _Fresh:
    """A memo entry whose node a tensor keeps (its storage size): each use gets a plain copy."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields


class _Constants(dict[Any, Any]):
    """``wrap_int``'s answers: a constant node per integer, made by torch's ``wrap_int`` on first use."""

    def __init__(self, replay: _Replay) -> None:
        super().__init__()
        self.replay = replay

    def __missing__(self, num: Any) -> Any:
        replay = self.replay
        symnode = replay.symnode
        out = symnode.wrap_int(replay.probe, num)
        if type(num) is int and type(out) is symnode:
            replay.share(out, ("int", num), self, num)
        return out


class _Replay:
    """The memo of one load: what ``SymNode`` operations and checks gave, per operand value.

    Every distinct node value met while making tensors (a size or stride expression with its hint,
    a constant, an operation's result) gets a subclass of ``SymNode`` of its own (one shared base
    class per load holds the methods; a value's class holds its memo), whose methods answer from
    that value's memo: ``add(other)`` by ``other``'s class, a check by its name, ``maybe_as_int``
    from the value. A result is one node shared by every tensor (results are intermediate values
    that nothing keeps), except the storage size, which each tensor keeps: its first node becomes a
    plain ``SymNode`` and each later use of its operation gets a plain copy (:meth:`finish`). Sizes
    and strides are fresh nodes per tensor, of their value's class while the tensor is made, plain
    ``SymNode`` afterwards.

    The memo holds while the shape environment stays in one state (:meth:`state`, and any parse
    of an expression, which may constrain ranges): a change drops it.
    """

    def __init__(self, symnode: Any, shape_env: Any) -> None:
        self.symnode = symnode
        self.env = shape_env
        #: bumped whenever torch's own code may have changed the shape environment
        self.epoch = 0
        self.last: tuple[int, ...] = ()
        #: token -> the value's class (leaves ``(expr_str, hint)``, constants ``("int", n)``, results
        #: ``(token, operation, other's token)``)
        self.classes: dict[Any, type] = {}
        #: wrap_int(n) -> the shared constant node (made by torch's wrap_int on first use)
        self.constants = _Constants(self)
        #: id(shared result node) -> (its memo, its key)
        self.origin: dict[int, tuple[dict[Any, Any], Any]] = {}
        #: bumped when the memo is dropped: a value class of an older generation is reset when met
        self.generation = 0
        #: a real operation changed the shape environment: the memo is dropped after this tensor
        self.changed = False
        #: nodes of this tensor's sizes and strides (plain ``SymNode`` again when it is made)
        self.leaves: list[Any] = []
        self.base = self._base_class()
        #: a node of this load's shape environment, for torch's wrap_int (which reads only that)
        self.probe = symnode.__new__(symnode)
        self.probe.__dict__["shape_env"] = shape_env

    def state(self) -> tuple[int, ...]:
        """What the shape environment's answers depend on, summarised (compared, never inspected)."""
        env = self.env
        return (
            self.epoch,
            env._version_counter,
            len(env.guards),
            env.num_deferred_runtime_asserts,
            len(env.var_to_range),
            len(env.replacements),
            len(env.size_like),
        )

    def _drop(self) -> None:
        # The value classes stay (a class costs kilobytes): each is reset when its value is next met.
        self.generation += 1
        self.constants.clear()
        self.origin.clear()
        self.changed = False

    def begin(self) -> None:
        """A tensor is about to be made: the memo holds only if the shape environment did not change."""
        now = self.state()
        if now != self.last or self.changed:
            self._drop()
            self.last = now

    def finish(self, kept: Any) -> None:
        """The tensor is made; ``kept`` is its storage size (a ``SymInt`` or an int)."""
        plain = self.symnode
        for node in self.leaves:
            node.__class__ = plain
        self.leaves.clear()
        node = getattr(kept, "node", None)
        if node is not None and isinstance(node, self.base):
            found = self.origin.pop(id(node), None)
            node.__class__ = plain
            if found is None:
                self.changed = True  # not a node this memo made: trust nothing of it
            else:
                memo, key = found
                # its fields as torch's SymNode() leaves them (the expression cache empty)
                memo[key] = _Fresh({**node.__dict__, "_expr_ver": -1, "_expr_cache": None})
        if self.changed:
            self._drop()

    def leaf(self, template: dict[str, Any], token: Any) -> Any:
        """A fresh size or stride node (torch's ``create_symintnode`` makes a new one per use)."""
        node = self.symnode.__new__(self.value_class(token, template))
        node.__dict__.update(template)
        self.leaves.append(node)
        return node

    def adopt(self, node: Any, token: Any) -> None:
        """``node`` (a size or stride torch made) answers from the memo while the tensor is made."""
        node.__class__ = self.value_class(token, dict(node.__dict__))
        self.leaves.append(node)

    def value_class(self, token: Any, fields: dict[str, Any]) -> type:
        cls = self.classes.get(token)
        if cls is not None and cls._tracepack_generation == self.generation:  # type: ignore[attr-defined]
            return cls
        symnode = self.symnode
        probe = symnode.__new__(symnode)
        probe.__dict__.update(fields)
        # What torch's C++ asks most (tens of times a tensor), answered without a Python frame: the
        # bound ``__next__`` of an endless repeat of the value's answer (a method-wrapper, not bound
        # again as a method), and ``wrap_int`` as the constants' dict lookup.
        answers = {
            "_tracepack_generation": self.generation,
            "_tracepack_memo": {},
            "maybe_as_int": itertools.repeat(symnode.maybe_as_int(probe)).__next__,
            "is_int": itertools.repeat(symnode.is_int(probe)).__next__,
            "is_bool": itertools.repeat(symnode.is_bool(probe)).__next__,
            "wrap_int": self.constants.__getitem__,
        }
        if cls is None:
            cls = self.classes[token] = type(
                symnode.__name__, (self.base,), {"__slots__": (), "_tracepack_token": token, **answers}
            )
        else:  # met again after the shape environment changed: answers as of now, an empty memo
            for name, value in answers.items():
                setattr(cls, name, value)
        return cls

    def share(self, node: Any, token: Any, memo: dict[Any, Any], key: Any) -> None:
        node.__class__ = self.value_class(token, node.__dict__)
        memo[key] = node
        self.origin[id(node)] = (memo, key)

    def _base_class(self) -> type:
        """The methods every value class of this load shares (each reads its class's memo)."""
        replay = self
        symnode = self.symnode
        namespace: dict[str, Any] = {"__slots__": ()}

        def binary(name: str) -> Callable[..., Any]:
            real = getattr(symnode, name)

            def op(self: Any, other: Any) -> Any:
                cls = type(self)
                other_cls = type(other)
                memo = cls._tracepack_memo
                key = (name, other_cls)
                hit = memo.get(key)
                if hit is not None:
                    if type(hit) is _Fresh:
                        out = symnode.__new__(symnode)
                        out.__dict__.update(hit.fields)
                        return out
                    return hit
                out = real(self, other)
                if replay.state() != replay.last:
                    replay.changed = True
                elif type(out) is symnode and isinstance(other, replay.base):
                    replay.share(out, (cls._tracepack_token, name, other_cls._tracepack_token), memo, key)
                return out

            op.__name__ = name
            return op

        def check(name: str) -> Callable[..., Any]:
            real = getattr(symnode, name)

            def op(self: Any, *args: Any) -> Any:
                memo = type(self)._tracepack_memo
                hit = memo.get(name, _SENTINEL)
                if hit is not _SENTINEL:
                    return hit
                out = real(self, *args)
                if replay.state() != replay.last:
                    replay.changed = True
                elif type(out) in (bool, int):
                    memo[name] = out
                return out

            op.__name__ = name
            return op

        for name in _BINARY:
            namespace[name] = binary(name)
        for name in _CHECKS:
            namespace[name] = check(name)
        return type(symnode.__name__, (symnode,), namespace)


class FakeTensors:
    """Makes the fake tensor of every ``TensorMeta`` of one load (see the module docs)."""

    def __init__(self, kit: _Kit, deserializer: Any, torchs: Callable[[Any, Any], Any]) -> None:
        self.kit = kit
        self.d = deserializer
        #: torch's ``deserialize_tensor_meta`` (for what the shortcuts do not cover)
        self.torchs = torchs
        self.mode = deserializer.fake_tensor_mode
        self.env = deserializer.shape_env
        #: made on the first replay (a static program never needs one)
        self._replay: _Replay | None = None
        #: bumped whenever torch's own code may have changed the shape environment
        self.epoch = 0
        #: inside a watched parse (see :meth:`watching`)
        self.watched = False
        #: no tracing, logging or translation validation that would see each step (checked per load)
        self.usable = kit.usable(self.env)
        #: shape key -> (sizes, strides) templates: ints, or the fields of a fresh ``SymNode``
        self.shapes: dict[Any, tuple[tuple[Any, ...], tuple[Any, ...]]] = {}
        self.made = 0
        self.replayed = 0

    def environment(self) -> tuple[Any, ...]:
        """The shape environment's state as far as the memo's answers can depend on it: what
        :meth:`_Replay.state` summarises, the hints, and every symbol's range (compared by value)."""
        env = self.env
        return (
            env._version_counter,
            len(env.guards),
            env.num_deferred_runtime_asserts,
            len(env.replacements),
            len(env.size_like),
            len(getattr(env, "backed_var_to_val", ())),
            dict(env.var_to_range),
        )

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Around torch's ``_parse_sym_expr`` (it calls itself for every sub-expression: the outermost call
        is watched): if it changed the shape environment, nothing memoized before is reused."""
        if self.watched:
            yield
            return
        self.watched = True
        before = self.environment()
        try:
            yield
        finally:
            self.watched = False
            if self.environment() != before:
                self.invalidate()

    def invalidate(self) -> None:
        """torch's own code ran and may have changed the shape environment: no result computed before
        it is reused."""
        self.epoch += 1
        if self._replay is not None:
            self._replay.epoch = self.epoch

    def __call__(self, tm: Any) -> Any:
        kit = self.kit
        dm = tm.__dict__
        sizes = _dims(dm["sizes"])
        strides = _dims(dm["strides"])
        dd = dm["device"].__dict__
        device = kit.devices.get(dd.get("type")) if dd.get("index") is None else None
        dtype = kit.dtypes.get(dm["dtype"])
        if sizes is None or strides is None or device is None or dtype is None or not self.usable:
            return self.torchs(self.d, tm)
        requires_grad = dm["requires_grad"]
        if _static(sizes) and _static(strides):
            return kit.wrap(self.mode, kit.empty(sizes, strides, dtype, self.mode), device, requires_grad)
        key = (sizes, strides)
        found = self.shapes.get(key)
        if found is None:
            # The first tensor of this shape is made as torch makes it (its sizes and strides parsed by
            # torch, with all that does to the shape environment); later ones are replayed.
            sym_int = self.d.deserialize_sym_int
            made_sizes = [x if type(x) is int else sym_int(v) for x, v in zip(sizes, dm["sizes"], strict=True)]
            made_strides = [x if type(x) is int else sym_int(v) for x, v in zip(strides, dm["strides"], strict=True)]
            size_templates = self._templates(sizes, made_sizes)
            stride_templates = self._templates(strides, made_strides)
            if size_templates is not None and stride_templates is not None:
                self.shapes[key] = (size_templates, stride_templates)
            self.made += 1
            elem = kit.empty(tuple(made_sizes), tuple(made_strides), dtype, self.mode)
            return kit.wrap(self.mode, elem, device, requires_grad)
        replay = self._replay
        if replay is None:
            replay = self._replay = _Replay(kit.symnode, self.env)
            replay.epoch = self.epoch
        replay.begin()
        symint = kit.symint
        made_sizes = [x if type(t) is int else symint(replay.leaf(t, x)) for x, t in zip(sizes, found[0], strict=True)]
        made_strides = [
            x if type(t) is int else symint(replay.leaf(t, x)) for x, t in zip(strides, found[1], strict=True)
        ]
        self.replayed += 1
        kept: Any = None
        try:
            elem = kit.empty(tuple(made_sizes), tuple(made_strides), dtype, self.mode)
            kept = elem.untyped_storage().nbytes()
        finally:
            replay.finish(kept)
        return kit.wrap(self.mode, elem, device, requires_grad)

    def _templates(self, dims: tuple[Any, ...], made: list[Any]) -> tuple[Any, ...] | None:
        """Each symbolic dim's fresh ``SymNode`` fields (as torch's ``create_symintnode`` made them)."""
        out: list[Any] = []
        symnode = self.kit.symnode
        for x, s in zip(dims, made, strict=True):
            if type(x) is int:
                out.append(x)
                continue
            node = getattr(s, "node", None)
            if type(node) is not symnode:
                return None  # the expression was an integer after all, or something torch changed
            fields = dict(node.__dict__)
            if fields.get("_expr_ver") != -1 or fields.get("_expr_cache") is not None:
                return None
            out.append(fields)
        return tuple(out)


class _Kit:
    """What the factory uses of the installed torch, looked up once."""

    def __init__(self, serde: Any) -> None:
        torch = importlib.import_module("torch")
        fake = importlib.import_module("torch._subclasses.fake_tensor")
        sym_node = importlib.import_module("torch.fx.experimental.sym_node")
        self.torch = torch
        self.symnode: Any = sym_node.SymNode
        self.symint = torch.SymInt
        self.fake_tensor = fake.FakeTensor
        self.manager = fake.in_kernel_invocation_manager
        self.dtypes: dict[Any, Any] = dict(serde._SERIALIZE_TO_TORCH_DTYPE)
        #: devices made without torch's normalisation (which leaves these as they are)
        self.devices: dict[str, Any] = {"cpu": torch.device("cpu")}
        self.meta = torch.device("meta")
        self.empty_strided = torch.empty_strided
        self.dispatch_depth = torch._C._len_torch_dispatch_stack
        self.make_subclass = torch.Tensor._make_subclass
        self.setattr = object.__setattr__
        #: runs an iterator to its end in C (``deque(it, maxlen=0)``)
        self.drain: Callable[[Any], Any] = functools.partial(collections.deque, maxlen=0)
        self.throw_on_mutable = torch._C._set_throw_on_mutable_data_ptr
        self.warn_on_mutable = torch._C._set_warn_deprecated_on_mutable_data_ptr
        self.is_exporting = torch.compiler.is_exporting
        self.config = fake.FakeTensorConfig
        self.proxy_tensor = importlib.import_module("torch.fx.experimental.proxy_tensor")
        self.logging = importlib.import_module("torch._logging._internal")
        #: instance fields of a FakeTensor as ``FakeTensor.__new__`` leaves them, per (mode, its data
        #: pointer setting, device): the mode is the load's, kept alive by the tensors made in it
        self._fields: dict[tuple[int, bool, Any], dict[str, Any]] = {}

    def usable(self, env: Any) -> bool:
        """Whether the shortcuts apply right now (no tracing, logging or translation validation that
        would see each step)."""
        return not (
            env._translation_validation_enabled
            or getattr(env, "should_record_events", False)
            or self.logging.GET_DTRACE_STRUCTURED
            or self.proxy_tensor.get_proxy_mode() is not None
            or self.is_exporting()
            or self.config.debug
        )

    def empty(self, sizes: Any, strides: Any, dtype: Any, mode: Any) -> Any:
        """The meta tensor ``FakeTensorMode`` makes for ``empty_strided``: inside
        ``in_kernel_invocation_manager``, which keeps any dispatch mode from seeing the call (and flags
        the fake mode busy); with no dispatch mode active, the same call without it."""
        if self.dispatch_depth() == 0 and not mode.in_kernel_invocation:
            return self.empty_strided(sizes, strides, dtype=dtype, device=self.meta)
        with self.manager(mode):
            return self.empty_strided(sizes, strides, dtype=dtype, device=self.meta)

    def wrap(self, mode: Any, elem: Any, device: Any, requires_grad: bool) -> Any:
        """``FakeTensor(mode, elem, device)``, then ``requires_grad_`` as torch's constructor path gives."""
        unsafe = mode._allow_unsafe_data_ptr_access
        setattr_ = self.setattr
        fields = self._fields.get((id(mode), unsafe, device))
        if fields is None:
            out = self.fake_tensor(mode, elem, device)
            self._fields[(id(mode), unsafe, device)] = dict(out.__dict__)
        else:
            out = self.make_subclass(self.fake_tensor, elem, elem.requires_grad, dispatch_device=True,
                                     device_for_backend_keys=device)  # fmt: skip
            (self.warn_on_mutable if unsafe else self.throw_on_mutable)(out)
            # one by one, in the order FakeTensor.__new__ sets them (a dict update would give the
            # instance a dict of its own, twice the size of the shared-key one torch's get)
            self.drain(map(setattr_, itertools.repeat(out), fields, fields.values()))
        if requires_grad:
            out.requires_grad_(True)
        return out


_LOCK = threading.Lock()
_KIT: dict[str, _Kit | None] = {}


def _names(code: types.CodeType) -> frozenset[str]:
    out = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= _names(const)
    return frozenset(out)


def _kit(serde: Any) -> _Kit | None:
    """The kit when the installed torch makes fake tensors the way this module replays (checked once)."""
    with _LOCK:
        if "kit" not in _KIT:
            _KIT["kit"] = _checked_kit(serde)
        return _KIT["kit"]


def _checked_kit(serde: Any) -> _Kit | None:
    try:
        fake = importlib.import_module("torch._subclasses.fake_tensor")
        sym_node = importlib.import_module("torch.fx.experimental.sym_node")
        new = fake.FakeTensor.__new__
        new = getattr(new, "__func__", new)
        if _names(new.__code__) != _FAKE_NEW_NAMES:
            return None
        symnode = sym_node.SymNode
        if hasattr(symnode, "__slots__") or not all(
            callable(getattr(symnode, n, None)) for n in (*_BINARY, *_CHECKS, "wrap_int", "maybe_as_int")
        ):
            return None
        kit = _Kit(serde)
        return kit if same_fake_tensors(serde, kit) else None
    except Exception:  # any surprise: torch's own code runs
        return None


def checked(serde: Any) -> bool:
    """Whether the installed torch makes fake tensors the way :class:`FakeTensors` replays (checked
    once per process)."""
    return _kit(serde) is not None


def factory(serde: Any, deserializer: Any, torchs: Callable[[Any, Any], Any]) -> FakeTensors:
    """A :class:`FakeTensors` for ``deserializer`` (torch's ``GraphModuleDeserializer`` of this load, its
    shape environment and fake mode set up); only where :func:`checked`."""
    kit = _kit(serde)
    if kit is None:
        raise RuntimeError("tracepack.torch.fake.factory: this torch makes fake tensors differently")
    return FakeTensors(kit, deserializer, torchs)


# -- the trial --------------------------------------------------------------------------------------

_S0 = "Symbol('s0', positive=True, integer=True)"
_S1 = "Symbol('s1', positive=True, integer=True)"


def _sym(text: str, hint: int) -> dict[str, Any]:
    return {"as_expr": {"expr_str": text, "hint": {"as_int": hint}}}


def _meta(dtype: int, sizes: list[Any], strides: list[Any], requires_grad: bool = False) -> dict[str, Any]:
    def dim(x: Any) -> Any:
        return {"as_int": x} if type(x) is int else _sym(*x)

    return {
        "dtype": dtype,
        "sizes": [dim(x) for x in sizes],
        "strides": [dim(x) for x in strides],
        "requires_grad": requires_grad,
        "device": {"type": "cpu", "index": None},
        "storage_offset": {"as_int": 0},
        "layout": 5,
    }


#: Trial metas: static, a symbolic shape made twice (replayed), one sharing its symbols with a
#: product stride, a zero-size dim, and the first shape again after others.
_TRIALS = [
    _meta(7, [2, 3], [3, 1], True),
    _meta(7, [(_S0, 4), 8], [8, 1]),
    _meta(7, [(_S0, 4), 8], [8, 1], True),
    _meta(6, [(_S0, 4), (_S1, 3), 4], [(f"Mul(Integer(4), {_S1})", 12), 4, 1]),
    _meta(6, [(_S0, 4), (_S1, 3), 4], [(f"Mul(Integer(4), {_S1})", 12), 4, 1]),
    _meta(7, [(_S0, 4), 0], [1, (_S0, 4)]),
    _meta(4, [(_S1, 3), (_S0, 4)], [1, (_S1, 3)]),
    _meta(7, [(_S0, 4), 8], [8, 1]),
    _meta(4, [(_S1, 3), (_S0, 4)], [1, (_S1, 3)]),
]


def _trial_deserializer(serde: Any) -> Any:
    """torch's ``GraphModuleDeserializer`` set up as its ``deserialize`` sets it up, for the trial's
    symbols (``s0`` >= 2, 1 <= ``s1`` <= 64)."""
    symbolic_shapes = importlib.import_module("torch.fx.experimental.symbolic_shapes")
    fake = importlib.import_module("torch._subclasses.fake_tensor")
    d = serde.GraphModuleDeserializer()
    d.shape_env = symbolic_shapes.ShapeEnv(assume_static_by_default=True)
    d.fake_tensor_mode = fake.FakeTensorMode(
        allow_fallback_kernels=False, allow_non_fake_inputs=True, shape_env=d.shape_env
    )
    d.sympy_functions = {}
    d.symbol_name_to_symbol = {}
    d.unbacked_symbols = set()
    int_oo = importlib.import_module("torch.utils._sympy.numbers").int_oo
    d.symbol_name_to_range = {
        "s0": symbolic_shapes.ValueRanges(2, int_oo),
        "s1": symbolic_shapes.ValueRanges(1, 64),
    }
    return d


def _describe(t: Any, symnode: type) -> tuple[Any, ...]:
    torch = importlib.import_module("torch")
    syms = [x for x in (*t.shape, *t.stride(), t.untyped_storage().nbytes()) if isinstance(x, torch.SymInt)]
    fields = {k: v for k, v in vars(t).items() if k != "fake_mode"}
    return (
        type(t),
        t.dtype,
        str(t.shape),
        str(t.stride()),
        str(t.untyped_storage().nbytes()),
        str(t.storage_offset()),
        t.device,
        t.requires_grad,
        t.is_leaf,
        t.grad_fn,
        repr(fields),
        str(torch._C._dispatch_keys(t)),
        t.untyped_storage().device,
        [(type(s.node) is symnode, sorted(vars(s.node)), s.node.hint, s.node.pytype, s.node.constant,
          s.node.fx_node, s.node._optimized_summation, str(s.node._expr)) for s in syms],
    )  # fmt: skip


def _sharing(tensors: list[Any]) -> list[tuple[int, int, bool, bool]]:
    """Which tensors share a size node or a storage (torch's share none)."""
    torch = importlib.import_module("torch")
    out = []
    for i, a in enumerate(tensors):
        for j, b in enumerate(tensors[:i]):
            nodes_a = {id(x.node) for x in (*a.shape, *a.stride()) if isinstance(x, torch.SymInt)}
            nodes_b = {id(x.node) for x in (*b.shape, *b.stride()) if isinstance(x, torch.SymInt)}
            out.append((i, j, bool(nodes_a & nodes_b), a.untyped_storage()._cdata == b.untyped_storage()._cdata))
    return out


def _environment(env: Any) -> tuple[Any, ...]:
    # torch 2.13 renamed var_to_val (reading the old name warns); older releases have only var_to_val
    hints = env.backed_var_to_val if hasattr(env, "backed_var_to_val") else env.var_to_val
    return (
        [str(g.expr) for g in env.guards],
        sorted((str(k), str(v)) for k, v in env.var_to_range.items()),
        sorted((str(k), str(v)) for k, v in hints.items()),
        sorted((str(k), str(v)) for k, v in env.replacements.items()),
        env.num_deferred_runtime_asserts,
        env._version_counter,
    )


def same_fake_tensors(serde: Any, kit: _Kit) -> bool:
    """Whether :class:`FakeTensors` makes what torch's ``deserialize_tensor_meta`` makes on the trial
    metas (each field of each tensor, which tensors share nodes or storage, the shape environment
    after making them and after asking each for its contiguity)."""
    from tracepack.torch.serde import converters

    c = converters()
    metas = [c.convert("TensorMeta", m, source="<trial>") for m in _TRIALS]
    torchs = serde.GraphModuleDeserializer.deserialize_tensor_meta
    theirs_d, ours_d = _trial_deserializer(serde), _trial_deserializer(serde)
    theirs = [torchs(theirs_d, m) for m in metas]
    ours_f = FakeTensors(kit, ours_d, torchs)
    ours = [ours_f(m) for m in metas]
    if ours_f.replayed < 4 or ours_f.made < 3:
        return False  # the trial did not take the roads it is meant to check
    if _environment(theirs_d.shape_env) != _environment(ours_d.shape_env):
        return False
    symnode = kit.symnode
    if [_describe(t, symnode) for t in theirs] != [_describe(t, symnode) for t in ours]:
        return False
    if _sharing(theirs) != _sharing(ours):
        return False
    contiguity = [
        [(t.is_contiguous(), t.is_contiguous(memory_format=kit.torch.channels_last) if t.dim() == 4 else None)
         for t in ts]
        for ts in (theirs, ours)
    ]  # fmt: skip
    return contiguity[0] == contiguity[1] and _environment(theirs_d.shape_env) == _environment(ours_d.shape_env)
