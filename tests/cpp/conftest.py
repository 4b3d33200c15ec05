"""The C++ reader's tests build it first (``make cpp``, ``make cpp-asan``): never skipped for a missing binary."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cpp import harness


@pytest.fixture(scope="session")
def cpp_bin() -> Path:
    harness.build("cpp")
    assert harness.BINARY.is_file()
    return harness.BINARY


@pytest.fixture(scope="session")
def asan_bin() -> Path:
    harness.build("cpp-asan")
    assert harness.ASAN_BINARY.is_file()
    return harness.ASAN_BINARY
