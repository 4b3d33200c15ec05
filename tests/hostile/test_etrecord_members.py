"""An ETRecord's JSON members (its programs, debug handle and delegate maps, graph id) nested past the
``max_depth`` budget, holding a 5,000-digit integer or a string that is not UTF-8 (issue 24): refused in
one line naming the member and the budget, never a RecursionError or Python's integer-digit ValueError."""

from __future__ import annotations

import pytest

from tests.hostile import crafted
from tracepack.errors import InputError
from tracepack.torch.executorch.etrecord import import_etrecord

CASES = [c for klass in ("deep", "number", "text") for c in crafted._etrecord_json_cases(klass)]


@pytest.mark.parametrize("case", CASES, ids=[c.label.split(":", 1)[1] for c in CASES])
def test_each_json_member_is_refused_or_read(case: crafted.Case) -> None:
    member = case.label.split(":", 1)[1].split(" <- ", 1)[0]
    try:
        import_etrecord(case.data, source="model.etrecord")
    except InputError as exc:
        text = str(exc)
    else:
        text = ""
    assert "\n" not in text
    if member == "exported_program":  # not the edge program: the import never parses it
        return
    if case.klass == "deep" or ("5,000" in case.label and member != "export_graph_id"):
        assert text.startswith(f"model.etrecord:{member}: "), text
    if case.klass == "deep":
        assert "nested more than 1,000 levels deep" in text
    elif case.klass == "number" and text:
        assert "max_int_digits" in text or "does not fit in 64 bits" in text, text
