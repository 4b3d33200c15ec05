"""The torch corpus: the committed small models, and the 10k-node one exported once per session."""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path

import pytest

# CI installs torch (`make test` depends on `venv-torch`): there, a missing torch is a failure, not a skip.
if os.environ.get("CI") and importlib.util.find_spec("torch") is None:
    raise RuntimeError("torch 2.13 is not installed, but CI must run the torch tests: run `make venv-torch`")

#: Marks every torch test module uses: torch's own deprecation chatter is not ours to fail on.
TORCH_MARKS = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]

ROOT = Path(__file__).resolve().parent.parent.parent
CORPUS = ROOT / "tests" / "data" / "torch" / "corpus"
SCRIPTS = ROOT / "scripts" / "torch"
PT2 = sorted(p.name for p in CORPUS.glob("*.pt2"))
TORCHSCRIPT = sorted(p.name for p in CORPUS.iterdir() if p.suffix in (".pt", ".ptl"))
TORCHSCRIPT_SAMPLES = ["lite_debug.ptl", "script_legacy.pt", "script_string_table.pt", "traced_string_table.pt"]


@pytest.fixture(scope="session")
def big_pt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``big.pt2`` (more than 10,000 nodes), exported with torch by ``scripts/torch/export_corpus.py``."""
    pytest.importorskip("torch")
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import export_corpus

    out = tmp_path_factory.mktemp("corpus")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_corpus.export_corpus(out, ["big"])
    return out / "big.pt2"
