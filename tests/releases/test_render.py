"""Lite-interpreter debug handles rendered exactly as each torch release printed them.

Each release ran its own lite interpreter on bad inputs twice: with the debug maps in the file
(its error names the module hierarchy and the TorchScript traceback) and with
``callstack_debug_map.pkl`` stripped (``Debug info for handle(s): debug_handles:{N}, was not
found.``). tracepack, given the full file and ``N``, must produce the first text from the second.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.releases.samples import NOT_FOUND, lite_errors, path, readback
from tracepack.errors import LegacyFormatError, UsageError
from tracepack.torch.torchscript.render import (
    LiteDebugTable,
    SourceRange,
    not_found_message,
    render_debug_string,
    render_module_hierarchy,
    render_traceback,
)

CASES = lite_errors()


def case(version: str, name: str) -> tuple[LiteDebugTable, int, dict[str, str]]:
    error = readback(version)["files"]["lite.ptl"]["errors"][name]
    found = NOT_FOUND.search(error["maps_stripped"])
    assert found is not None, error["maps_stripped"]
    table = LiteDebugTable.from_archive(path(version, "lite.ptl").read_bytes(), source=f"{version}/lite.ptl")
    return table, int(found.group(1)), error


def test_every_release_has_cases() -> None:
    assert len({v for v, _ in CASES}) >= 2
    assert len(CASES) >= 3 * len({v for v, _ in CASES})


@pytest.mark.parametrize(("version", "name"), CASES)
def test_error_text_exact(version: str, name: str) -> None:
    table, handle, error = case(version, name)
    rendered = render_debug_string(table, handle)
    assert error["maps_stripped"].replace(not_found_message([handle]), rendered) == error["with_debug_maps"]


@pytest.mark.parametrize(("version", "name"), CASES)
def test_module_hierarchy_exact(version: str, name: str) -> None:
    table, handle, error = case(version, name)
    found = re.search(r"Module hierarchy:(.*)\n", error["with_debug_maps"])
    assert found is not None
    assert render_module_hierarchy(table, handle) == found.group(1)
    assert render_traceback(table, handle) in error["with_debug_maps"]


@pytest.mark.parametrize(("version", "name"), CASES)
def test_tracepack_style_names_the_same_modules(version: str, name: str) -> None:
    """``TOP(M)::forward.a(A)::forward...``: torch's entries between ``<unknown>`` and the operator."""
    table, handle, error = case(version, name)
    found = re.search(
        r"Module hierarchy:top\((\w+)\)::<unknown>((?:\.\w+\(\w+\)::\w+)*)\.([^\n]+)\n", error["with_debug_maps"]
    )
    assert found is not None
    ours = render_module_hierarchy(table, handle, style="tracepack")
    assert ours == f"TOP({found.group(1)})::forward{found.group(2)}"


def test_missing_handle_is_torchs_not_found_text() -> None:
    version, name = CASES[0]
    table, handle, error = case(version, name)
    missing = max(table.handles) + 1000
    assert render_debug_string(table, missing) == not_found_message([missing])
    assert not_found_message([handle]) in error["maps_stripped"]
    with pytest.raises(UsageError, match=f"debug handle {missing} "):
        render_module_hierarchy(table, missing)
    with pytest.raises(UsageError, match="style"):
        render_module_hierarchy(table, handle, style="other")  # type: ignore[arg-type]


def test_a_file_without_debug_maps_is_refused() -> None:
    version = CASES[0][0]
    with pytest.raises(LegacyFormatError, match=r"^[^\n]*script\.pt: no callstack_debug_map\.pkl"):
        LiteDebugTable.from_archive(path(version, "script.pt").read_bytes(), source=f"{version}/script.pt")
    with pytest.raises(LegacyFormatError, match=r"x\.ptl: not a readable zip"):
        LiteDebugTable.from_archive(b"not a zip", source="x.ptl")


# -- print_with_context on arbitrary sources --------------------------------------------------------

_LINE = st.text(alphabet=st.sampled_from("ab x=()é"), max_size=12)


@given(
    lines=st.lists(_LINE, min_size=1, max_size=12),
    data=st.data(),
)
def test_one_line_range_is_underlined(lines: list[str], data: st.DataObject) -> None:
    """A range on one line prints that line, then ``~`` under its non-blank part and ``<--- HERE``."""
    text = "\n".join(lines) + "\n"
    raw = text.encode()
    row = data.draw(st.integers(0, len(lines) - 1))
    line = lines[row].encode()
    line_start = sum(len(x.encode()) + 1 for x in lines[:row])
    lo = data.draw(st.integers(0, len(line)))
    hi = data.draw(st.integers(lo, len(line)))
    rng = SourceRange(text, "f.py", 10, line_start + lo, line_start + hi)
    out = render_traceback_of(rng)
    assert out.startswith(f'  File "f.py", line {10 + row}, in fn\n')
    body = out.encode()
    if hi - lo == len(raw):
        return
    leading = len(line[lo:hi]) - len(line[lo:hi].lstrip(b" "))
    marked = hi - lo - leading
    if marked > 0 and lo < hi:
        mark = b" " * (lo + leading) + b"~" * marked + b" <--- HERE\n"
        assert line + b"\n" + mark in body
    else:
        assert b"<--- HERE" not in body


def render_traceback_of(rng: SourceRange) -> str:
    table = LiteDebugTable("__torch__.M")
    from tracepack.torch.torchscript.render import HandleInfo

    table.handles[1] = HandleInfo(1, "aten::op", rng)
    text = render_traceback(table, 1)
    head = "Traceback of TorchScript (most recent call last):\n"
    assert text.startswith(head)
    return text.removeprefix(head).replace("<unknown>", "fn", 1)
