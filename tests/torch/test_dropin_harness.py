"""scripts/torch/dropin_suite.py (``make torch-suite``) on a stand-in for PyTorch's export tests: it
patches the names a test module imports from torch.export before collection, routes save and load
through tracepack (a save to a path still names the archive's folder after the file, as torch's does),
and reports exactly the tests that pass as they are but not with tracepack."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.torch.conftest import PACKAGE_LAYOUT, TORCH_MARKS

pytest.importorskip("torch")
pytestmark = TORCH_MARKS

ROOT = Path(__file__).resolve().parent.parent.parent

#: Written in the style of torch's test/export files: module-level ``from torch.export import load, save``.
STANDIN = """
import io
import os
import tempfile
import unittest
import zipfile

import torch
from torch.export import export, load, save


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.lin(x).relu()


def _saved():
    buf = io.BytesIO()
    save(export(M(), (torch.randn(4, 3),)), buf)
    return buf.getvalue()


class TestStandIn(unittest.TestCase):
    def test_roundtrip(self):
        loaded = load(io.BytesIO(_saved()))
        x = torch.randn(4, 3)
        self.assertEqual(loaded.module()(x).shape, (4, 2))

    def test_archive_has_no_tracepack_member(self):
        with zipfile.ZipFile(io.BytesIO(_saved())) as z:
            self.assertFalse(any("/tracepack/" in n for n in z.namelist()))

    def test_archive_version_checked(self):
        data = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(_saved())) as zin, zipfile.ZipFile(data, "w") as zout:
            for info in zin.infolist():
                new = b"-1" if info.filename.endswith("/archive_version") else zin.read(info)
                zout.writestr(info, new)
        with self.assertRaisesRegex(ValueError, "Saved archive version -1 does not match our current archive version 0"):
            load(io.BytesIO(data.getvalue()))

    def test_save_to_a_path_names_the_folder_after_the_file(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "named.pt2")
            save(export(M(), (torch.randn(4, 3),)), path)
            with zipfile.ZipFile(path) as z:
                self.assertEqual({n.split("/")[0] for n in z.namelist()}, {"named"})
            self.assertEqual(load(path).module()(torch.randn(4, 3)).shape, (4, 2))

    @unittest.expectedFailure
    def test_expected_failure(self):
        raise RuntimeError("expected")
"""


@PACKAGE_LAYOUT.mark  # its stand-in tests check the archive_version member of torch's <name>/ layout
def test_the_harness_routes_save_and_load_and_reports_what_differs(tmp_path: Path) -> None:
    tests = tmp_path / "export"
    tests.mkdir()
    (tests / "test_standin.py").write_text(textwrap.dedent(STANDIN))
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "torch" / "dropin_suite.py"), str(tests), "test_standin.py"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr  # one test passes only without tracepack
    assert "5 tests; as they are: 5 pass" in out
    assert out.count("tracepack calls: {'save': 0, 'load': 0}") == 1  # the baseline pass only
    assert "with tracepack (on): 4 of those pass, 0 refused (unsafe pickle), 1 differ" in out
    assert "with tracepack (trust): 4 of those pass, 0 refused (unsafe pickle), 1 differ" in out
    assert out.count("differs: test_standin.py::TestStandIn::test_archive_has_no_tracepack_member (failed)") == 2


def test_the_harness_fails_when_nothing_was_compared(tmp_path: Path) -> None:
    """A test file that cannot be collected (here a missing test dependency, as PyTorch's tests without
    expecttest) leaves nothing passing as it is: exit 2, not a vacuous "0 differ"."""
    tests = tmp_path / "export"
    tests.mkdir()
    (tests / "test_broken.py").write_text("import a_module_no_one_installed_tracepack_test\n")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "torch" / "dropin_suite.py"), str(tests), "test_broken.py"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no test passed as it is" in done.stdout
