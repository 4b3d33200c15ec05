"""``tracepack annotate`` on Chrome traces whose events hold any JSON: a profile is the user's file, so every
field may have any type. The annotation, its count and the per-module table either succeed or refuse in
one line; nothing else escapes (before: a dict as ``pid``, an int as ``args``, a 5,000-digit handle string, a
400-digit ``ts`` or a Unicode digit in a node marker were internal errors)."""

from __future__ import annotations

import contextlib
import io
import json
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tracepack.cli import main
from tracepack.errors import InputError
from tracepack.runtime.artifacts import open_artifact
from tracepack.runtime.profile import annotate_chrome, annotated, module_summary, render_summary
from tracepack.runtime.symbols import Symbolicator

from .helpers import DATA, ETRECORD, PTE

PT2 = DATA / "profile_model.pt2"
TRACE = DATA / "profile_trace.json"

_odd = st.sampled_from(
    [None, True, False, 0, -1, 2**70, 10**400, 1.5, float("nan"), float("inf"), "", "x", "aten::linear", "9" * 5000,
     "\u00b2", "12345678901234567890123", "## 3 ##", "## " + "9" * 5000 + " ##", "## \u00b2 ##", "## m.py ##"]
)  # fmt: skip
_json: st.SearchStrategy[Any] = st.recursive(
    _odd,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
_KEYS = ["ph", "name", "ts", "dur", "pid", "tid", "cat", "args"]
_ARG_KEYS = ["Debug handle", "debug_handle", "instruction_id", "chain", "node_name", "module_path", "fx_nested"]


@st.composite
def _events(draw: st.DrawFn) -> list[Any]:
    """The sample trace's events with some fields (and args fields) replaced by any JSON."""
    events = json.loads(TRACE.read_text())["traceEvents"]
    out = []
    for original in events[: draw(st.integers(1, len(events)))]:
        ev = dict(original)
        for key in draw(st.lists(st.sampled_from(_KEYS), max_size=3)):
            ev[key] = draw(_json)
        if isinstance(ev.get("args"), dict):
            ev["args"] = dict(ev["args"])
            for key in draw(st.lists(st.sampled_from(_ARG_KEYS), max_size=2)):
                ev["args"][key] = draw(_json)
        out.append(ev)
    return out


@cache
def _artifact(path: Path) -> list[Symbolicator]:
    return open_artifact(str(path))


@settings(max_examples=150, deadline=None)
@given(events=_events(), artifact=st.sampled_from([ETRECORD, PT2, PTE]))
def test_any_json_in_events_annotates_or_refuses_in_one_line(events: list[Any], artifact: Path) -> None:
    refusal: list[str] = []
    try:
        trace = annotate_chrome({"traceEvents": events}, _artifact(artifact), method=None, source="p.json")
    except InputError as exc:
        refusal.append(str(exc))
    if refusal:
        assert "\n" not in refusal[0]
        return
    assert len(trace["traceEvents"]) == len(events)
    assert 0 <= annotated(trace) <= len(events)
    render_summary(module_summary(trace))


@settings(max_examples=25, deadline=None)
@given(events=_events())
def test_the_cli_exits_0_or_2_on_any_event_fields(tmp_path_factory: Any, events: list[Any]) -> None:
    profile = tmp_path_factory.mktemp("annotate") / "p.json"
    profile.write_text(json.dumps({"traceEvents": events}))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["annotate", str(profile), "--with", str(ETRECORD), "--by", "module"])
    assert code in (0, 2), err.getvalue()
    assert "internal error" not in err.getvalue()
