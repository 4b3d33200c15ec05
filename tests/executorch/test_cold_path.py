"""What a cold `tracepack symbolicate` of a .tpk loads: its own command module and the lazy reader, never
the typed model's companions, the builder, the codecs it does not read, or the other commands."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

import tracepack
from tracepack.cli import COMMAND_MODULES, COMMAND_OWNERS

from .helpers import ETRECORD, LOG

#: Modules a lazy symbolicate must not need (each costs milliseconds of a new process).
NOT_LOADED = (
    "tracepack.builder",
    "tracepack.model",
    "tracepack.dictionaries",
    "tracepack.cli.core",
    "tracepack.cli.query",
    "tracepack.cli.torch",
    "tracepack.cli.schema",
    "tracepack.torch",
    "tracepack_generated.v1_1.convert",
    "tracepack_generated.v1_1.json_model",
    "tracepack_generated.v1_1.validate",
    "torch",
    "zipfile",
    "secrets",
    "hashlib",
)

CONVERT = ("--codec", "flatbuffers", "--compression", "none")
_PROBE = """
import contextlib, io, json, sys
from tracepack.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def test_command_owners_name_what_each_module_registers() -> None:
    registered = {}
    for name in COMMAND_MODULES:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(name).register(sub)
        registered.update(dict.fromkeys(sub.choices, name))
    assert registered == COMMAND_OWNERS


def test_import_tracepack_loads_no_model_and_keeps_every_public_name() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys, tracepack; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = set(done.stdout.split())
    assert not loaded & {"tracepack.builder", "tracepack.document", "tracepack.model", "msgspec"}
    for name in tracepack.__all__:  # PEP 562: every public name still resolves, to the defining module's
        assert getattr(tracepack, name) is not None
    assert tracepack.Document is importlib.import_module("tracepack.document").Document
    assert set(tracepack.__all__) <= set(dir(tracepack))


def test_a_cold_symbolicate_of_a_tpk_loads_only_what_it_reads(tmp_path: Path) -> None:
    tpk = tmp_path / "forward.tpk"
    convert = subprocess.run(
        [sys.executable, "-m", "tracepack", "convert", str(ETRECORD), str(tpk), *CONVERT],
        capture_output=True,
        text=True,
        check=False,
    )
    assert convert.returncode == 0, convert.stderr
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "symbolicate", str(tpk), str(LOG)],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout)
    assert result["code"] == 0
    assert "debug handle 1: aten.embedding.default in embed" in result["out"]
    loaded = set(result["modules"])
    assert {"tracepack.lazy", "tracepack.cli.runtime"} <= loaded
    assert not loaded & set(NOT_LOADED), sorted(loaded & set(NOT_LOADED))
