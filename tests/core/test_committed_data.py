"""Committed sample data names no build machine's paths.

Samples exported on a developer's machine carry file paths inside stack traces, source ranges and
debug pickles; the exporters (scripts/torch/_sample_common.py, scripts/executorch/make_samples.py)
rewrite them to ``/home/user/...`` before writing. This is the one check, over every committed data
file (tests/data and the package's bundled data, including the trained zstd dictionaries, which are
built from samples), that none slipped through.
"""

from __future__ import annotations

import importlib.util
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA_DIRS = (ROOT / "tests" / "data", ROOT / "src" / "tracepack" / "data")


def _sample_common() -> Any:
    """scripts/torch/_sample_common.py (standard library only): the exporters' machine-path rule."""
    spec = importlib.util.spec_from_file_location("_sample_common", ROOT / "scripts" / "torch" / "_sample_common.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


COMMON = _sample_common()
#: Prefixes of paths that only exist on a build machine (temp dirs, CI workspaces, root's home, macOS
#: per-user temp), one list for the exporters and this test. Neutral sample paths start with
#: /home/user/ or /usr/lib/.
MACHINE_PREFIXES: tuple[bytes, ...] = COMMON.FORBIDDEN
#: A prefix where a path starts (not after a name character: ``transformers/models/opt/`` is a
#: package, not ``/opt/``), as the exporters' ``check_clean`` checks what they write.
MACHINE_PATH: re.Pattern[bytes] = COMMON.MACHINE_PATH

FILES = sorted(p for d in DATA_DIRS for p in d.rglob("*") if p.is_file())


@pytest.mark.parametrize("prefix", MACHINE_PREFIXES)
def test_the_check_finds_paths_where_they_start(prefix: bytes) -> None:
    for start in (b'File "', b"\x00", b" ", b""):
        assert MACHINE_PATH.search(start + prefix + b"x.py")
    for inside in (b"site-packages/transformers/models", b"the_tmp", b"a.b", b"x-y"):
        assert not MACHINE_PATH.search(inside + prefix + b"x.py")  # a package or name, not a machine path


def test_the_exporters_refuse_what_this_test_refuses() -> None:
    """``check_clean`` (every exporter: torch samples, the zoo, the real models, both dictionary corpora)
    refuses a machine path where a path starts and accepts a package named like one."""
    assert len(MACHINE_PREFIXES) >= 6
    for prefix in MACHINE_PREFIXES:
        for start in (b'File "', b"\x00", b" ", b""):
            with pytest.raises(SystemExit, match=re.escape(prefix.decode())):
                COMMON.check_clean("sample", start + prefix + b"x.py")
        COMMON.check_clean("sample", b"site-packages/transformers/models" + prefix + b"x.py")


def test_there_is_data_to_check() -> None:
    assert len(FILES) > 50
    assert any(p.suffix == ".dict" for p in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_machine_path(path: Path) -> None:
    data = path.read_bytes()
    if zipfile.is_zipfile(path):  # deflated members hide their text from a byte search
        with zipfile.ZipFile(path) as z:
            data += b"".join(z.read(info) for info in z.infolist())
    leaks = sorted({m.group(1).decode() for m in MACHINE_PATH.finditer(data)})
    assert not leaks, f"{path.relative_to(ROOT)} names a machine path: {leaks}; re-export it with the sample scripts"
