"""Every input a fuzzing campaign found (``tests/fuzz_regressions/<harness>/``, written by
``python -m fuzz.to_regression``) and every input of the committed seed corpus (``fuzz/corpus/<harness>/``)
replayed through its harness's contract, without atheris: tracepack returns a result that passes the
harness's checks or refuses the input with a one-line InputError; any other exception, or more than
60 s, fails."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fuzz.harnesses import HARNESSES, load
from fuzz.replay import replay
from tests.torch.conftest import TORCH_MARKS  # torch's own warnings (no NumPy) are not ours to fail on

ROOT = Path(__file__).resolve().parents[2]
REGRESSIONS = Path(__file__).resolve().parent


#: Findings whose cause another part of issue 24 fixes (not this branch): they fail today, and are
#: expected to (strict: once the fix lands they pass, and this entry must go). harness -> (why, files).
OPEN: dict[str, tuple[str, tuple[str, ...]]] = {
    "model_json_export": (
        "the model.json exporter does not yet validate the torch extensions it reads (issue 24 item 1)",
        (
            "dtype-not-a-dtype",
            "nodes-layout-key-not-in-extras",
            "nodes-layout-without-defaults",
            "nodes-layout-without-extras",
            "nodes-layout-without-keys",
            "nodes-layout-without-whole",
            "program-graph-module-without-signature",
            "program-without-graph-module",
            "program-without-graph-module-run",
            "sym-shape-longer-than-shape",
        ),
    ),
    "torch_load": (
        "torch's own errors (SerializeError, SpecViolationError, ...) and invalid UTF-8 escape tracepack.torch.load "
        "(issue 24 item 1)",
        (
            "AssertionError-deserializer.py-139",
            "JSONDecodeError-deserializer.py-278",
            "KeyError-deserializer.py-145",
            "KeyError-deserializer.py-278",
            "NotImplementedError-deserializer.py-278",
            "RuntimeError-deserializer.py-144",
            "RuntimeError-deserializer.py-148",
            "RuntimeError-deserializer.py-151",
            "SerializeError-deserializer.py-278",
            "SpecViolationError-loader.py-509",
            "UnicodeDecodeError-loader.py-121",
            "UnicodeDecodeError-upgrade.py-118",
            "ValueError-deserializer.py-278",
            "parameter-not-in-state-dict",
        ),
    ),
}


def _cases(folder: Path) -> list[object]:
    out: list[object] = []
    for name in HARNESSES:
        files = sorted(p for p in (folder / name).glob("*") if p.is_file()) if (folder / name).is_dir() else []
        marks = TORCH_MARKS if getattr(load(name), "TORCH", False) else []
        why, still_open = OPEN.get(name, ("", ()))
        for f in files:
            mark = (
                [pytest.mark.xfail(reason=why, strict=True)] if folder == REGRESSIONS and f.name in still_open else []
            )
            out.append(pytest.param(name, f, id=f"{name}/{f.name}", marks=[*marks, *mark]))
    return out


def _replayed(harness: str, path: Path) -> None:
    if getattr(load(harness), "TORCH", False) and importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch (make venv-torch)")
    broken = replay(harness, [path], seconds=60)
    assert not broken, broken[0][1]


@pytest.mark.parametrize(("harness", "path"), _cases(REGRESSIONS))
def test_a_finding_stays_fixed(harness: str, path: Path) -> None:
    _replayed(harness, path)


@pytest.mark.parametrize(("harness", "path"), _cases(ROOT / "fuzz/corpus"))
def test_the_seed_corpus_keeps_the_contract(harness: str, path: Path) -> None:
    _replayed(harness, path)


def test_every_harness_has_a_seed_corpus() -> None:
    empty = [name for name in HARNESSES if not any((ROOT / "fuzz/corpus" / name).glob("*"))]
    assert not empty, f"no committed corpus for {empty}: python -m fuzz.run corpus --harness {','.join(empty)}"
