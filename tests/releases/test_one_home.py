"""Everything that knows torch lives in tracepack.torch: no core module imports it when imported."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import tracepack

CORE = sorted(
    m.name
    for m in pkgutil.walk_packages(tracepack.__path__, "tracepack.")
    if not m.name.startswith(("tracepack.torch", "tracepack.cli", "tracepack.__main__"))
)


def test_core_modules_do_not_import_the_torch_package() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {CORE!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('tracepack.torch')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert "tracepack.demo" in CORE
