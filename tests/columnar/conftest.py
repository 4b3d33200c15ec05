"""Each test of the ``forms`` encoding runs twice: with the C loops (``_cforms``) and with the Python ones."""

from __future__ import annotations

import pytest

from tracepack.codecs import columnar


@pytest.fixture(params=["c", "python"])
def forms_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The forms implementation the codec uses for the test: ``c`` (``columnar._cforms``) or ``python``."""
    if request.param == "python":
        monkeypatch.setattr(columnar, "_cforms", None)
    elif columnar._cforms is None:
        pytest.fail("tracepack.codecs._cforms is not built (pip install -e . compiles it; TRACEPACK_PURE_PYTHON unset)")
    return str(request.param)
