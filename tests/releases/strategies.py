"""Hypothesis strategies for the torch-release readers: tensor value forms, old-style programs' parts."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tracepack.torch.export.values import DTYPES, LAYOUTS, ValueForm

_EXPR = st.sampled_from(["s0", "s1", "2*s0", "s0 + s1", "Symbol('s77', positive=True, integer=True)"])
_DIM = st.one_of(st.integers(0, 1 << 40), _EXPR)

#: The value forms torch releases wrote (2.1, 2.2, 2.3-2.6, 2.7+).
FORMS = st.sampled_from(
    [
        ValueForm(),
        ValueForm(device_index=False),
        ValueForm(sym_members=("as_expr", "as_int"), hint_members=("as_int", "as_float", "as_bool"), offset_int=True),
        ValueForm(wrapped=True, sym_members=("as_expr", "as_int"), hint_members=(), offset_int=True),
    ]
)


@st.composite
def typed_values(draw: st.DrawFn, form: ValueForm) -> dict[str, Any]:
    """A typed tensor value that ``form`` can spell."""
    rank = draw(st.integers(0, 4))
    device = draw(st.sampled_from(["cpu", "meta", "cuda:0", "cuda:3", "mps"]))
    return {
        "dtype": draw(st.sampled_from(sorted(DTYPES.values()))),
        "shape": draw(st.lists(_DIM, min_size=rank, max_size=rank)),
        "strides": draw(st.lists(_DIM, min_size=rank, max_size=rank)),
        "device": device,
        "requires_grad": draw(st.booleans()),
        "storage_offset": draw(st.integers(0, 99) if form.offset_int else st.one_of(st.integers(0, 99), _EXPR)),
        "layout": draw(st.sampled_from(["", *LAYOUTS.values()])),
    }


@st.composite
def hints(draw: st.DrawFn, form: ValueForm) -> dict[str, Any]:
    """A hint per expression, in the spelling ``form`` holds (a bare int for 2.1's)."""
    exprs = ["s0", "s1", "2*s0", "s0 + s1", "Symbol('s77', positive=True, integer=True)"]
    out: dict[str, Any] = {}
    for e in exprs:
        if form.hint_members == ():
            out[e] = draw(st.one_of(st.none(), st.integers(0, 99)))
        else:
            out[e] = draw(st.one_of(st.none(), st.integers(0, 99).map(lambda n: {"as_int": n})))
    return out


@st.composite
def old_module_stacks(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    """``(key, fqn, type)`` entries of an ``nn_module_stack`` (no commas or semicolons inside)."""
    name = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
    fqn = st.lists(name, min_size=0, max_size=4).map(".".join)
    type_name = st.lists(name, min_size=1, max_size=4).map(".".join)
    return draw(st.lists(st.tuples(name, fqn, type_name), min_size=1, max_size=5))


@st.composite
def all_member_unions(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A union written the way schemas 1-2 wrote it (every member, ``null`` but one) and the set one."""
    members = draw(
        st.lists(
            st.sampled_from(["as_int", "as_ints", "as_tensor", "as_name", "as_expr", "as_bool"]),
            min_size=2,
            max_size=6,
            unique=True,
        )
    )
    chosen = draw(st.sampled_from(members))
    value = draw(
        st.one_of(
            st.integers(), st.lists(st.integers(), max_size=3), st.fixed_dictionaries({"name": st.text(max_size=5)})
        )
    )
    return {m: (value if m == chosen else None) for m in members}, chosen


fx_candidates = st.lists(
    st.one_of(
        st.from_regex(r"[a-z_]{1,6}(_[0-9]{1,2})?", fullmatch=True),
        st.sampled_from(["getitem", "getitem_1", "sum", "list", "class", "1abc", "a.b", ""]),
    ),
    max_size=30,
)


_SYMBOLS = ["Symbol('s27', positive=True, integer=True)", "Symbol('s52', positive=True, integer=True)", "Symbol('u0')"]


@st.composite
def srepr_exprs(draw: st.DrawFn, depth: int = 3) -> str:
    """A sympy ``srepr`` spelling of an integer expression over a few symbols (what torch writes in
    ``expr_str``), sometimes with an operation :func:`derive_hint` does not evaluate."""
    if depth == 0 or draw(st.booleans()):
        return draw(st.one_of(st.sampled_from(_SYMBOLS), st.integers(-40, 40).map(lambda n: f"Integer({n})")))
    op = draw(st.sampled_from(["Add", "Mul", "Pow", "FloorDiv", "Mod", "Max", "CeilToInt"]))
    count = 2 if op in ("Pow", "FloorDiv", "Mod") else draw(st.integers(1, 3))
    args = [draw(srepr_exprs(depth - 1)) for _ in range(count)]
    return f"{op}({', '.join(args)})"


@st.composite
def hint_tables(draw: st.DrawFn) -> dict[str, Any]:
    """A program's hint table: every symbol's hint, then expressions with their true hint, a wrong one
    or none (torch records what the tracer saw; a wrong one must be kept, never derived)."""
    from tracepack.torch.export.values import derive_hint

    out: dict[str, Any] = {s: {"as_int": draw(st.integers(0, 9))} for s in _SYMBOLS}
    for expr in draw(st.lists(srepr_exprs(), max_size=8)):
        true = derive_hint(expr, out)
        choice = draw(st.sampled_from(["true", "other", "none", "float"]))
        if choice == "true" and true is not None:
            out.setdefault(expr, {"as_int": true})
        elif choice == "none":
            out.setdefault(expr, None)
        elif choice == "float":
            out.setdefault(expr, {"as_float": 1.5})
        else:
            out.setdefault(expr, {"as_int": draw(st.integers(-9, 99))})
    return out


sym_int_lists = st.lists(
    st.one_of(
        st.integers(-(2**63), 2**63 - 1).map(lambda n: {"as_int": n}),
        st.text(max_size=6).map(lambda s: {"as_name": s}),
        st.sampled_from([{"as_int": True}, {"as_name": 3}, {"as_expr": "s0"}, {"as_int": 1, "as_name": "x"}]),
    ),
    max_size=6,
)
