"""FlatBuffers' own Verifier on the row layout, with the options cpp/README.md documents for large graphs.

The reference here is FlatBuffers itself: ``flatc --cpp`` compiles ``generated/fbs/tracepack-1.2.fbs`` and
``cpp/tools/fb_verify.cpp`` runs ``VerifyDocumentBuffer`` with the options given. On stacked samples of
1,050 and 10,500 nodes it needs between 9 and 10 tables per node and a depth of 5: it passes with
``max_tables`` = 10 per node and ``max_depth`` = 5 and fails with 9 per node or depth 4, which is what
the documented options for a 1M-node graph (``max_tables`` >= 10,000,000) rest on; the default options
(1,000,000 tables) read 10,500 nodes. The C++ lazy reader, which has no table limit, answers for the
same files (tests/cpp/test_lazy.py compares its output with the Python reader's).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import tracepack
from benchmarks.corpus import stacked_model_json
from tests.cpp import harness
from tracepack.torch.export.model_json import import_model_json

FBS = harness.REPO / "generated" / "fbs" / "tracepack-1.2.fbs"
SOURCE = harness.REPO / "cpp" / "tools" / "fb_verify.cpp"


@pytest.fixture(scope="module")
def verify(tmp_path_factory: pytest.TempPathFactory) -> Path:
    harness.build("cpp-deps")  # installs flatc and the FlatBuffers headers when missing
    flatc = shutil.which("flatc")
    assert flatc is not None
    out = tmp_path_factory.mktemp("fbverify")
    subprocess.run([flatc, "--cpp", "-o", str(out), str(FBS)], check=True)
    binary = out / "fb_verify"
    subprocess.run(["g++", "-std=c++17", "-O1", f"-I{out}", "-o", str(binary), str(SOURCE)], check=True)
    return binary


def _run(binary: Path, path: Path, max_tables: int, max_depth: int) -> tuple[bool, int]:
    done = subprocess.run(
        [str(binary), str(path), str(max_tables), str(max_depth)], capture_output=True, text=True, check=True
    )
    ok, nodes = done.stdout.split()
    return ok == "1", int(nodes)


@pytest.mark.parametrize("copies", [15, 150])
def test_documented_options(verify: Path, tmp_path: Path, copies: int) -> None:
    doc = import_model_json(stacked_model_json(copies))
    n = len(doc)
    path = tmp_path / "rows.tpk"
    path.write_bytes(tracepack.dumps(doc, codec="flatbuffers-rows", compression="none"))
    assert _run(verify, path, 10 * n, 5) == (True, n)
    assert _run(verify, path, 9 * n, 64) == (False, 0)  # more than 9 tables per node
    assert _run(verify, path, 10 * n, 4) == (False, 0)  # depth 5
    assert _run(verify, path, 1_000_000, 64) == (True, n)  # the defaults, below ~105,000 nodes
