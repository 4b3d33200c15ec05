"""Regenerate the release samples: one virtualenv per torch release, one after the other.

Run by ``make release-samples`` (never by ``make test`` or CI: every release but
2.13 is a large CUDA download from PyPI)::

    python3.11 scripts/torch/releases/build_all.py [VERSION ...] [--keep-venvs]

For each release (default: all of ``RELEASES``) it creates a Python 3.11
virtualenv in a temporary folder, installs ``torch==VERSION.*`` with pip
(``--no-cache-dir``: the wheels are not kept), runs ``make_samples.py`` there
into ``tests/data/torch/releases/<VERSION>/`` and deletes the virtualenv. Then
it writes ``tests/data/torch/releases/manifest.json`` from every release folder
present: the torch version, its export schema version, and each file's size and
SHA-256. A release that fails to install or export is reported and skipped; its
old folder stays.
"""

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent.parent
OUT = REPO_ROOT / "tests" / "data" / "torch" / "releases"

RELEASES = ["2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.10", "2.12", "2.13", "2.14", "2.15"]
#: Wheels built against NumPy 1 warn or fail to convert under NumPy 2.
EXTRA = {"2.1": ["numpy<2"], "2.2": ["numpy<2"]}


def run(cmd: list[str]) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def build(version: str, workdir: Path, keep: bool, scratch: Path | None) -> None:
    venv = workdir / f"venv-{version}"
    started = time.monotonic()
    try:
        run([sys.executable, "-m", "venv", str(venv)])
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-cache-dir"]
        run([*pip, f"torch=={version}.*", *EXTRA.get(version, [])])
        cmd = [str(venv / "bin" / "python"), str(HERE / "make_samples.py"), str(OUT / version)]
        if scratch is not None:
            cmd += ["--scratch", str(scratch / version)]
        run(cmd)
    finally:
        if not keep:
            shutil.rmtree(venv, ignore_errors=True)
    print(f"[{version}] done in {time.monotonic() - started:.0f} s", flush=True)


def manifest() -> dict[str, Any]:
    releases: dict[str, Any] = {}
    for folder in sorted(OUT.iterdir(), key=lambda p: [int(x) for x in p.name.split(".")] if p.is_dir() else []):
        if not folder.is_dir() or not (folder / "readback.json").exists():
            continue
        readback = json.loads((folder / "readback.json").read_text(encoding="utf-8"))
        files = {
            p.name: {"bytes": p.stat().st_size, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
            for p in sorted(folder.iterdir())
        }
        releases[folder.name] = {
            "torch": readback["torch"],
            "schema_version": readback["schema_version"],
            "files": files,
            "skipped": readback["skipped"],
        }
    return {"generator": "scripts/torch/releases/build_all.py", "releases": releases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", default=RELEASES)
    parser.add_argument("--keep-venvs", action="store_true", help="do not delete the virtualenvs")
    parser.add_argument("--scratch", type=Path, help="copy each release's schema files here")
    parser.add_argument("--manifest-only", action="store_true", help="only rewrite manifest.json")
    args = parser.parse_args()
    failed = []
    if not args.manifest_only:
        with tempfile.TemporaryDirectory(prefix="tracepack-releases-") as tmp:
            for version in args.versions:
                try:
                    build(version, Path(tmp), args.keep_venvs, args.scratch)
                except subprocess.CalledProcessError as exc:
                    print(f"[{version}] FAILED: {exc}", flush=True)
                    failed.append(version)
    OUT.mkdir(parents=True, exist_ok=True)
    text = json.dumps(manifest(), indent=1, sort_keys=True) + "\n"
    (OUT / "manifest.json").write_text(text, encoding="utf-8")
    print(f"wrote {OUT / 'manifest.json'}; failed: {failed or 'none'}")
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
