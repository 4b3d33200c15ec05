"""Hypothesis strategies for nesting: values of any shape wrapped in chains of arrays and maps,
and a budget near their depth (tests/hostile/test_depth.py)."""

from __future__ import annotations

from hypothesis import strategies as st

__all__ = ["nested_values", "toml_text"]

_KEYS = st.text(alphabet="abkz_", min_size=1, max_size=3)
_SCALARS = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet='ab[]{}"\\ ,=\n\u00e9', max_size=6),
)


def _chain(inner: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """``inner`` wrapped in up to 40 arrays / maps / arrays with siblings (deep, not wide)."""

    @st.composite
    def wrap(draw: st.DrawFn) -> object:
        value = draw(inner)
        for kind in draw(st.lists(st.integers(0, 2), max_size=40)):
            if kind == 0:
                value = [value]
            elif kind == 1:
                value = {draw(_KEYS): value}
            else:
                value = [draw(_SCALARS), value, []]
        return value

    return wrap()


def nested_values(*, none: bool = True) -> st.SearchStrategy[object]:
    """Arrays (lists), maps with string keys and scalars, nested both wide and deep; ``none=False``
    leaves out null (TOML has none)."""
    leaves = st.one_of(st.none(), _SCALARS) if none else _SCALARS
    tree = st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
        max_leaves=20,
    )
    return _chain(tree)


def _toml(value: object) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}" = {_toml(v)}' for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + "".join(c if c not in '"\\\n' else f"\\u{ord(c):04x}" for c in value) + '"'
    if isinstance(value, float):
        return repr(value) if "e" in repr(value) or "." in repr(value) else repr(value) + ".0"
    return str(value)


@st.composite
def toml_text(draw: st.DrawFn) -> tuple[str, object]:
    """A TOML document ``key = <value>`` (inline arrays and tables) and the table it stands for."""
    value = draw(nested_values(none=False).filter(lambda v: not isinstance(v, int) or -(2**63) <= v < 2**63))
    return f"key = {_toml(value)}\n", {"key": value}
