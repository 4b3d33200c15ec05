"""Error classes as Python users catch them: bad input bytes are ``ValueError``s, lookups ``KeyError``s.

``json.loads``, ``msgspec.json.decode`` and ``pickle.loads`` users write ``except ValueError`` (or
``except pickle.UnpicklingError``) around a decode of untrusted bytes; tracepack's readers must be caught
by the same clause, and stay :class:`~tracepack.errors.InputError` (exit code 2) as well.
"""

from __future__ import annotations

import inspect
import json
import pickle
from collections.abc import Callable

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracepack
from tests.hostile.strategies import hostile_inputs
from tests.ux.helpers import MODEL_JSON, PT2, ROOT
from tracepack import errors

#: The classes raised for what a file's bytes hold (errors.py: every one a ValueError).
BYTES_ERRORS = (
    errors.ContainerError,
    errors.VersionError,
    errors.DecodeError,
    errors.IntegrityError,
    errors.LegacyFormatError,
    errors.UnsafePickleError,
    errors.SchemaError,
)


def test_the_error_tree_is_what_the_docs_say() -> None:
    declared = {c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.TracepackError)}
    input_errors = {c for c in declared if issubclass(c, errors.InputError) and c is not errors.InputError}
    # every InputError is either about the bytes (a ValueError) or about the arguments (a UsageError)
    assert input_errors == {*BYTES_ERRORS, errors.UsageError, errors.NotFoundError}
    for cls in BYTES_ERRORS:
        assert issubclass(cls, ValueError), cls
        assert issubclass(cls, errors.InputError), cls
        assert cls.exit_code == 2
    # bad arguments are not bad bytes: UsageError is no ValueError, a lookup that misses is a KeyError
    assert not issubclass(errors.UsageError, ValueError)
    assert issubclass(errors.NotFoundError, KeyError)
    assert not issubclass(errors.NotFoundError, ValueError)
    assert not issubclass(errors.InputError, ValueError)
    assert not issubclass(errors.EncodeError, ValueError)


def _caught_as_value_error(fn: Callable[[], object]) -> BaseException | None:
    """What ``except ValueError`` around ``fn()`` catches (None when ``fn`` returns)."""
    try:
        fn()
    except ValueError as exc:  # the clause a json/msgspec user already has
        return exc
    return None


@pytest.mark.parametrize(
    "data",
    [
        b"TPK garbage ...",
        b"\x89TPK\r\n\x1a\n" + b"\x00" * 10,  # the magic, then a cut header
        b"",
        b"PK\x03\x04 not a zip",
        b'{"graph_module": 3}',  # JSON, not a torch program
        b"\x80\x02}q\x00.",  # a pickle
    ],
)
def test_garbage_is_caught_by_except_value_error_as_json_users_write_it(data: bytes) -> None:
    # what json and msgspec do with the same bytes
    assert _caught_as_value_error(lambda: json.loads(b"\xff" + data)) is not None
    assert _caught_as_value_error(lambda: msgspec.json.decode(b"\xff" + data)) is not None
    for reader in (tracepack.loads, tracepack.load):
        caught = _caught_as_value_error(lambda r=reader: r(data))  # type: ignore[misc]
        assert isinstance(caught, tracepack.InputError), f"{reader.__name__}: {caught!r}"
        assert "\n" not in str(caught)


def test_every_torch_reader_refusal_is_a_value_error() -> None:
    model_json = MODEL_JSON.read_bytes()
    cases = {
        "cut model.json": model_json[: len(model_json) // 2],
        "cut .pt2": PT2.read_bytes()[:5000],
        "a pickle that imports": pickle.dumps(print, protocol=2),
        "profile": b'{"traceEvents": 3}',
    }
    for what, data in cases.items():
        caught = _caught_as_value_error(lambda d=data: tracepack.load(d))  # type: ignore[misc]
        assert isinstance(caught, tracepack.InputError), (what, caught)


@pytest.mark.parametrize("surface", ["tpk", "model_json", "archive", "executorch"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_damaged_file_is_refused_with_a_value_error(surface: str, data: st.DataObject) -> None:
    """Mutants of every seed of the hostile-input surfaces (golden .tpk files of every version and
    codec, torch's model.json and .pt2 files, ExecuTorch files): ``tracepack.load`` accepts them or
    raises an InputError that ``except ValueError`` catches; never a UsageError, which is for
    arguments."""
    mutant = data.draw(hostile_inputs(surface))
    refused: tracepack.InputError | None = None
    try:
        tracepack.load(mutant)
    except tracepack.InputError as exc:
        refused = exc
    assert refused is None or isinstance(refused, ValueError), f"{type(refused).__name__}: {refused}"


def test_lookups_stay_key_errors() -> None:
    doc = tracepack.load(MODEL_JSON)
    with pytest.raises(KeyError) as info:
        doc.node("linaer_3")
    assert not isinstance(info.value, ValueError)
    assert isinstance(info.value, tracepack.NotFoundError)


def test_the_readme_error_tree_says_so() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("Errors are a small hierarchy")
    text = " ".join(readme[start : start + 1500].split())
    assert "every error about bad input bytes is also a `valueerror`" in text.lower()
    for cls in BYTES_ERRORS:
        assert f"`{cls.__name__}`" in text or cls.__name__ in text, cls
    assert "`KeyError`" in text
