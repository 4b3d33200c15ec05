"""Build the sdist and the wheel, install the wheel into a clean virtual environment, and smoke-test it.

``make smoke`` (and ``.ci/run``) runs this. It checks what a user of the published package gets:

- the sdist holds what it takes to regenerate, check and test (schemas, generated code with flatc's
  Python module, tests and their golden files, the Makefile), and the wheel is built from it;
- the wheel holds the code, both ``py.typed`` markers, the schema files, JSON Schema and FlatBuffers
  schema, the license, and not flatc's never-imported ``fb/tables.py``;
- in a fresh virtual environment with only the wheel and its dependencies, the command line answers
  (nodes, trace with a did-you-mean, convert, diff, cat, schema check --all) and the API works
  (load of a .pt2, KeyError/ValueError classes, LazyDocument, the torch extra's import error);
- ``mypy --strict`` passes on a user script against the installed package and its generated types.

Exit status 0 when every check passes; otherwise the first failure, on one line, and 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

USER_SCRIPT = '''\
"""A user's script: mypy --strict must pass on it against the installed wheel."""
import tracepack
from tracepack import Document, LazyDocument, NotFoundError
from tracepack.query import NodeFilter, find_nodes
from tracepack import model  # the current version's model: stable across schema releases


def first_linear(path: str) -> str | None:
    doc: Document = tracepack.load(path)
    raw: model.Document = doc.raw
    assert raw.header.magic == "tracepack"
    for row in find_nodes(doc, NodeFilter(op="linear")):
        return row.name
    return None


def lazy_name(path: str) -> str:
    with tracepack.open(path) as lazy:
        assert isinstance(lazy, LazyDocument)
        try:
            return lazy.node("nope").name
        except NotFoundError as exc:
            return str(exc.key)
'''

API_CHECK = """\
import json, pathlib, sys
import tracepack, tracepack.torch
from tracepack import LazyDocument, NotFoundError
from tracepack.resources import schema_dir, fbs_dir, jsonschema_dir

sample = pathlib.Path(tracepack.__file__).parent / "data" / "sample" / "tiny_transformer.pt2"
doc = tracepack.load(sample)
assert len(doc) == 70, len(doc)
try:
    doc.node("linaer_3")
except KeyError as exc:
    assert isinstance(exc, NotFoundError) and "did you mean 'linear_3'" in str(exc), exc
else:
    raise AssertionError("no KeyError")
assert issubclass(tracepack.DecodeError, ValueError)
from tracepack.codecs import columnar
assert columnar._cforms is not None, "the wheel's C loops did not load"
site = pathlib.Path(tracepack.__file__).parent.parent
for folder in (schema_dir(), fbs_dir(), jsonschema_dir()):
    assert site in folder.parents, folder  # inside the installed package, not a checkout
try:
    import torch  # noqa: F401
except ImportError:
    try:
        tracepack.torch.load(sample)
    except ImportError as exc:
        assert "tracepack[torch]" in str(exc), exc
    else:
        raise AssertionError("tracepack.torch.load without torch did not raise ImportError")
print(json.dumps({"nodes": len(doc), "lazy": LazyDocument.__name__}))
"""


class SmokeError(Exception):
    pass


def run(cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None, expect: int = 0) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != expect:
        text = (done.stdout + done.stderr).strip().replace("\n", " | ")[-2000:]
        raise SmokeError(f"`{' '.join(cmd)}` exited {done.returncode} (expected {expect}): {text}")
    return done.stdout + done.stderr


def check_sdist(path: Path) -> None:
    with tarfile.open(path) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    need = [
        "Makefile",
        "LICENSE",
        "setup.py",
        "schema/RELEASED.sha256",
        "schema/tracepack-1.1.toml",
        "generated/fbs/tracepack-1.1.fbs",
        "generated/python/tracepack_generated/v1_1/fb/tables.py",
        "tests/conftest.py",
        "tests/golden/MANIFEST.sha256",
        "tests/readme/transcript.py",
        "spec/README.md",
        "conformance/manifest.json",
        "conformance/run.py",
        "fuzz/run.py",
        "fuzz/harnesses/container.py",
        "src/tracepack/data/sample/model.json",
        "src/tracepack/codecs/_cforms.c",
        ".ci/run",
    ]
    missing = [n for n in need if n not in names]
    if missing:
        raise SmokeError(f"{path.name} lacks {', '.join(missing)}")


def check_wheel(path: Path) -> None:
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
    need = [
        "tracepack/py.typed",
        "tracepack_generated/py.typed",
        "tracepack_generated/schema/tracepack-1.1.toml",
        "tracepack_generated/schema/RELEASED.sha256",
        "tracepack_generated/fbs/tracepack-1.1.fbs",
        "tracepack_generated/jsonschema/tracepack-1.1.schema.json",
        "tracepack/data/sample/tiny_transformer.pt2",
        "tracepack/codecs/_cforms.pyi",
        "tracepack/data/zstd/MANIFEST.tsv",  # the built-in dictionaries, for other readers (spec §8.2)
    ]
    missing = [n for n in need if n not in names]
    if missing:
        raise SmokeError(f"{path.name} lacks {', '.join(missing)}")
    # the columnar codec's C loops, compiled for this platform (optional in setup.py; here a compiler is)
    if not any(n.startswith("tracepack/codecs/_cforms.") and n.endswith((".so", ".pyd")) for n in names):
        raise SmokeError(f"{path.name} lacks the compiled tracepack/codecs/_cforms module")
    if any(n.endswith(".c") for n in names):
        raise SmokeError(f"{path.name} ships C sources")
    if not any(n.endswith("licenses/LICENSE") for n in names):
        raise SmokeError(f"{path.name} has no LICENSE")
    stray = sorted(n for n in names if "/fb/" in n or n.startswith(("tests/", "benchmarks/")))
    if stray:
        raise SmokeError(f"{path.name} ships files nothing imports: {', '.join(stray[:5])}")


def smoke(tmp: Path) -> dict[str, float]:
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    dist = tmp / "dist"
    # sdist first, then the wheel built from the unpacked sdist: proves the sdist is complete.
    run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], cwd=tmp)
    sdist = next(dist.glob("tracepack-*.tar.gz"))
    wheel = next(dist.glob("tracepack-*.whl"))
    check_sdist(sdist)
    check_wheel(wheel)
    times["build"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=True, clear=True)  # no system site-packages: only what the wheel brings
    py = env_dir / "bin" / "python"
    run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)], cwd=tmp)
    times["install"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    work = tmp / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    tp = str(env_dir / "bin" / "tracepack")
    where = "import tracepack, pathlib; print(pathlib.Path(tracepack.__file__).parent / 'data/sample')"
    sample = str(Path(run([str(py), "-c", where], cwd=work, env=env).strip()) / "tiny_transformer.pt2")
    out = run([tp, "nodes", sample, "--match", "^linear_3$"], cwd=work, env=env)
    if "export_sample.py:125" not in out:
        raise SmokeError(f"tracepack nodes: {out!r}")
    out = run([tp, "trace", sample, "linaer_3"], cwd=work, env=env, expect=2)
    if "did you mean 'linear_3'" not in out:
        raise SmokeError(f"tracepack trace: {out!r}")
    run([tp, "convert", sample, "m.tpk"], cwd=work, env=env)
    run([tp, "convert", sample, "m.tpk"], cwd=work, env=env, expect=2)  # no clobber
    run([tp, "diff", sample, "m.tpk", "--exit-code"], cwd=work, env=env)
    plain = json.loads(run([tp, "cat", "m.tpk"], cwd=work, env=env))
    if plain["graph"]["nodes"][0]["name"] != "linear":
        raise SmokeError("tracepack cat: unexpected first node")
    out = run([tp, "schema", "check", "--all"], cwd=work, env=env)
    if "OK" not in out:
        raise SmokeError(f"tracepack schema check --all: {out!r}")
    run([tp, "convert", sample, "m.fb.tpk", "--codec", "flatbuffers", "--compression", "none"], cwd=work, env=env)
    run([str(py), "-c", API_CHECK], cwd=work, env=env)
    times["cli_and_api"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    script = work / "user_script.py"
    script.write_text(USER_SCRIPT)
    mypy = Path(sys.executable).parent / "mypy"
    run([str(mypy), "--strict", "--python-executable", str(py), "--no-incremental", str(script)], cwd=work, env=env)
    times["mypy_strict"] = time.perf_counter() - t0
    return times


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tracepack-smoke-") as tmp:
        start = time.perf_counter()
        try:
            times = smoke(Path(tmp))
        except (SmokeError, StopIteration) as exc:
            print(f"smoke_wheel: FAILED: {exc}", file=sys.stderr)
            return 1
        total = time.perf_counter() - start
    parts = ", ".join(f"{k} {v:.1f}s" for k, v in times.items())
    what = "sdist and wheel built, wheel installed into a clean venv, CLI, API and mypy --strict pass"
    print(f"smoke_wheel: OK: {what} ({parts}; {total:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
