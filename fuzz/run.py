"""The campaign driver behind ``make fuzz-cov``, ``make fuzz-smoke`` and ``make fuzz-corpus``.

``python -m fuzz.run cov [--harness a,b] [--seconds N]``
    runs each harness for N seconds of its own (libFuzzer's ``-max_total_time``; restarted after a hang,
    out-of-memory or native crash until the time is used), starting from the committed corpus
    (``fuzz/corpus/<harness>``) and the working corpus kept outside git (``--work``, default
    ``$TMPDIR/tracepack-fuzz``), into which new inputs go: a second run continues where the first
    stopped. Prints per harness: executions, exec/s, CPU seconds, corpus size, libFuzzer's ``cov:`` and
    ``ft:``, the branch coverage of its target modules over the whole corpus (coverage.py) and the
    findings of this run (saved under ``--findings``). A ledger in the work folder adds up each
    harness's CPU time and executions over every run. ``--smoke`` exits 1 on any finding.
``python -m fuzz.run corpus [--harness a,b] [--with-work]``
    rebuilds the committed corpus: each harness's seeds (and, with ``--with-work``, its working
    corpus) minimised with libFuzzer's ``-merge=1`` into ``fuzz/corpus/<harness>``.
``python -m fuzz.run build-cforms``
    builds the sanitizer-instrumented ``_cforms`` (clang ``-fsanitize=fuzzer-no-link,address,undefined``).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuzz.common import ROOT
from fuzz.harnesses import HARNESSES, load

CORPUS = ROOT / "fuzz/corpus"
DICTS = ROOT / "fuzz/dicts"
_STATS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/")
_FINAL = re.compile(r"^stat::(\w+):\s+(\d+)")
_ARTIFACT = ("finding-", "crash-", "timeout-", "oom-", "leak-", "slow-unit-")


def default_work() -> Path:
    return Path(os.environ.get("FUZZ_WORK") or Path(tempfile.gettempdir()) / "tracepack-fuzz")


@dataclass
class Result:
    name: str
    executions: int = 0
    cpu: float = 0.0
    wall: float = 0.0
    cov: int = 0
    ft: int = 0
    corpus: int = 0
    corpus_bytes: int = 0
    findings: list[str] = field(default_factory=list)
    #: the harness's own failures: a libFuzzer process that ended on a Python exception outside the target
    #: (in the mutator or the driver: no input saved), its last line; a finding of the fuzzing, not of tracepack
    errors: list[str] = field(default_factory=list)
    coverage: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    @property
    def rate(self) -> float:
        return self.executions / self.wall if self.wall else 0.0


# -- the instrumented C loops --------------------------------------------------------------------------


def build_cforms(work: Path) -> Path:
    """``_cforms`` compiled by clang with libFuzzer's coverage hooks, ASan and UBSan, into ``work``."""
    out = work / "cforms" / f"_cforms{sysconfig.get_config_var('EXT_SUFFIX')}"
    source = ROOT / "src/tracepack/codecs/_cforms.c"
    if out.exists() and out.stat().st_mtime >= source.stat().st_mtime:
        return out
    clang = shutil.which("clang")
    if clang is None:
        raise SystemExit(
            "fuzz: clang is needed to instrument the C loops "
            "(make fuzz-cov installs it: apt-get install clang libclang-rt-dev)"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    flags = [
        "-fsanitize=fuzzer-no-link,address,undefined",
        "-fno-sanitize-recover=undefined",
        "-fno-omit-frame-pointer",
        "-g",
        "-O1",
    ]
    cmd = [clang, *flags, "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", str(source), "-o", str(out)]
    subprocess.run(cmd, check=True)
    return out


def _native_env(work: Path) -> dict[str, str]:
    import atheris  # its ASan runtime with libFuzzer: the interpreter itself is not built with ASan

    return {
        "FUZZ_CFORMS": str(build_cforms(work)),
        "LD_PRELOAD": str(Path(atheris.path()) / "asan_with_fuzzer.so"),
        # Python's own allocations are not leaks to report; an allocation ASan refuses is a MemoryError.
        "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1:halt_on_error=1",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
        "PYTHONMALLOC": "malloc",  # every Python object its own allocation: an overflow past one is caught
    }


# -- the C++ reader, natively -----------------------------------------------------------------------------


def _cpp_sources() -> list[Path]:
    return sorted(
        [
            *(ROOT / "cpp/src").glob("*.cpp"),
            *(ROOT / "generated/cpp/tracepack").glob("*.cpp"),
            *(ROOT / "generated/cpp/tracepack").glob("v*/*.cpp"),
        ]
    )


def build_cpp(name: str, work: Path) -> Path:
    """A ``CPP`` harness's libFuzzer binary: the C++ reader's sources and the harness's ``SOURCE``, compiled by
    clang++ with libFuzzer, ASan and UBSan under ``work/cpp/`` (an object is rebuilt when its source or any
    header changed)."""
    source = ROOT / load(name).SOURCE
    headers = hashlib.sha256()
    for p in sorted([*(ROOT / "cpp/include").rglob("*.hpp"), *(ROOT / "generated/cpp/tracepack").rglob("*.hpp")]):
        headers.update(p.relative_to(ROOT).as_posix().encode() + b"\0" + p.read_bytes())

    def key(src: Path) -> str:
        return hashlib.sha256(headers.digest() + src.read_bytes()).hexdigest()[:16]

    folder = work / "cpp"
    objects = folder / "obj"
    objects.mkdir(parents=True, exist_ok=True)
    jobs = [
        (src, objects / f"{src.relative_to(ROOT).as_posix().replace('/', '_')}.{key(src)}.o") for src in _cpp_sources()
    ]
    binary = hashlib.sha256("".join(o.name for _, o in jobs).encode() + key(source).encode()).hexdigest()[:16]
    out = folder / f"{name}.{binary}"
    if out.exists():
        return out
    clang = shutil.which("clang++")
    if clang is None:
        raise SystemExit("fuzz: clang++ is needed for the C++ reader's harness (apt-get install clang libclang-rt-dev)")
    flags = [
        "-std=c++17", "-O1", "-g", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all",
        f"-I{ROOT / 'cpp/include'}", f"-I{ROOT / 'generated/cpp'}",
    ]  # fmt: skip
    todo = [(src, obj) for src, obj in jobs if not obj.exists()]
    print(f"fuzz: building {name} (clang++, {len(todo)} of {len(jobs)} files)", flush=True)

    def compile_one(job: tuple[Path, Path]) -> None:
        src, obj = job
        cmd = [clang, *flags, "-fsanitize=fuzzer-no-link,address,undefined", "-c", str(src), "-o", f"{obj}.tmp"]
        if subprocess.run(cmd, check=False).returncode != 0:
            raise SystemExit(f"fuzz: compiling {src.relative_to(ROOT)} for {name} failed")
        os.replace(f"{obj}.tmp", obj)

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(compile_one, todo))
    link = [clang, *flags, "-fsanitize=fuzzer,address,undefined", str(source), *(str(o) for _, o in jobs)]
    subprocess.run([*link, "-lzstd", "-lz", "-o", f"{out}.tmp"], check=True)
    os.replace(f"{out}.tmp", out)
    return out


def _cpp_env() -> dict[str, str]:
    return {
        "TRACEPACK_ZSTD_DICT_DIR": str(ROOT / "src/tracepack/data/zstd"),
        "ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1:allocator_may_return_null=0",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    }


def _command(name: str, work: Path) -> Path:
    """What libFuzzer runs for ``name``: the native binary of a ``CPP`` harness, else the Python wrapper."""
    return build_cpp(name, work) if getattr(load(name), "CPP", False) else _wrapper(work)


# -- running one harness -------------------------------------------------------------------------------


def _wrapper(work: Path) -> Path:
    """An executable that starts a harness: libFuzzer runs its own command again for ``-merge``."""
    path = work / "bin" / "harness"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f'#!/bin/sh\nexec "{sys.executable}" -m fuzz.main "$@"\n'
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
        path.chmod(0o755)
    return path


def _env(name: str, work: Path, findings: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        FUZZ_HARNESS=name,
        FUZZ_FINDINGS=str(findings),
        FUZZ_ARGV0=str(_wrapper(work)),
        PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    if getattr(load(name), "NATIVE", False):
        env.update(_native_env(work))
    if getattr(load(name), "CPP", False):
        env.update(_cpp_env())
    return env


def _flags(name: str) -> list[str]:
    harness = load(name)
    flags = []
    d = getattr(harness, "DICT", None)
    if d is not None and (DICTS / d).exists():
        flags.append(f"-dict={DICTS / d}")
    return flags


def _torch_missing(name: str) -> bool:
    return bool(getattr(load(name), "TORCH", False)) and importlib.util.find_spec("torch") is None


def _artifacts(folder: Path) -> set[Path]:
    if not folder.is_dir():
        return set()
    return {p for p in folder.iterdir() if p.name.startswith(_ARTIFACT) and p.suffix != ".txt"}


def fuzz_one(
    name: str,
    seconds: int,
    *,
    work: Path,
    findings: Path,
    nice: int,
    timeout: int,
    rss_mb: int,
    seed: int | None = None,
) -> Result:
    result = Result(name)
    if _torch_missing(name):
        result.note = "needs torch: run it in the torch venv (make venv-torch)"
        return result
    corpus = work / "corpus" / name
    corpus.mkdir(parents=True, exist_ok=True)
    committed = CORPUS / name
    committed.mkdir(parents=True, exist_ok=True)
    out = findings / name
    out.mkdir(parents=True, exist_ok=True)
    before = _artifacts(out)
    env = _env(name, work, findings)
    binary = _command(name, work)
    log = work / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    restarts = 0
    with log.open("a") as logf:
        while (left := seconds - (time.monotonic() - started)) > 1 and restarts < 20:
            cmd = [
                "nice", "-n", str(nice), str(binary),
                f"-max_total_time={int(left)}", f"-timeout={timeout}", f"-rss_limit_mb={rss_mb}",
                "-print_final_stats=1", f"-artifact_prefix={out}/", *_flags(name),
                *([f"-seed={seed + restarts}"] if seed is not None else []), str(corpus), str(committed),
            ]  # fmt: skip
            proc = subprocess.Popen(
                cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace"
            )
            assert proc.stderr is not None
            saved = _artifacts(out)
            executed, final, traceback, last = 0, None, False, ""
            for line in proc.stderr:
                logf.write(line)
                if m := _STATS.match(line):
                    result.cov, result.ft = int(m.group(2)), int(m.group(3))
                    executed = int(m.group(1))
                elif m := _FINAL.match(line):
                    if m.group(1) == "number_of_executed_units":
                        final = int(m.group(2))
                elif line.startswith("FINDING"):
                    print(f"  {line.strip()}", flush=True)
                elif line.startswith("Traceback (most recent call last)"):
                    traceback = True
                if line.strip():
                    last = line.strip()
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            result.cpu += usage.ru_utime + usage.ru_stime
            result.executions += executed if final is None else final  # a process that died prints no final stats
            if proc.returncode == 0:
                break
            if traceback and not _artifacts(out) - saved and last not in result.errors:
                result.errors.append(last)  # the harness's own exception: no input to keep, so say it
                print(f"  HARNESS ERROR {last}", flush=True)
            restarts += 1  # a hang, out-of-memory or native crash ended it: saved, go on
    result.wall = time.monotonic() - started
    result.findings = sorted(p.name for p in _artifacts(out) - before)
    files = [p for d in (corpus, committed) for p in d.iterdir() if p.is_file()]
    result.corpus, result.corpus_bytes = len(files), sum(p.stat().st_size for p in files)
    return result


def measure_coverage(name: str, *, work: Path) -> dict[str, Any]:
    """Branch coverage of the harness's targets over its whole corpus (a subprocess, not instrumented)."""
    out = work / "coverage" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [
        sys.executable,
        "-m",
        "fuzz.replay",
        name,
        str(work / "corpus" / name),
        str(CORPUS / name),
        "--coverage",
        str(out),
    ]
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    try:
        return dict(json.loads(out.read_text()))
    except (OSError, ValueError):
        return {}


# -- the ledger: CPU time and executions per harness over every run ------------------------------------


def _ledger(work: Path, results: list[Result]) -> dict[str, dict[str, float]]:
    path = work / "ledger.json"
    try:
        ledger: dict[str, dict[str, float]] = json.loads(path.read_text())
    except (OSError, ValueError):
        ledger = {}
    for r in results:
        if r.note:
            continue
        entry = ledger.setdefault(r.name, {"cpu_seconds": 0.0, "executions": 0, "runs": 0})
        entry["cpu_seconds"] += r.cpu
        entry["executions"] += r.executions
        entry["runs"] += 1
    path.write_text(json.dumps(ledger, indent=1, sort_keys=True))
    return ledger


def _pct(covered: int, total: int) -> str:
    return f"{covered}/{total} ({100 * covered / total:.0f}%)" if total else "-"


def report(results: list[Result], ledger: dict[str, dict[str, float]]) -> None:
    print()
    head = f"{'harness':<18} {'execs':>9} {'exec/s':>7} {'cpu s':>7} {'corpus':>12} {'cov':>6} {'ft':>6}"
    print(f"{head}  findings  total cpu h / execs")
    for r in results:
        if r.note:
            print(f"{r.name:<18} skipped: {r.note}")
            continue
        total = ledger.get(r.name, {})
        hours, execs = total.get("cpu_seconds", 0) / 3600, int(total.get("executions", 0))
        print(
            f"{r.name:<18} {r.executions:>9,} {r.rate:>7.0f} {r.cpu:>7.0f}"
            f" {r.corpus:>5} {r.corpus_bytes / 1024:>5.0f}KB {r.cov:>6} {r.ft:>6}"
            f"  {len(r.findings) + len(r.errors):>8}  {hours:.2f} / {execs:,}"
        )
        for module, c in r.coverage.get("modules", {}).items():
            branches = _pct(c["covered_branches"], c["branches"])
            print(f"    {module:<44} branches {branches:>18}   lines {_pct(c['covered_statements'], c['statements'])}")
        for f in r.findings:
            print(f"    FINDING {f}")
        for e in r.errors:
            print(f"    HARNESS ERROR (the fuzzing's own, see the log): {e}")


def cmd_cov(args: argparse.Namespace) -> int:
    work, findings = Path(args.work), Path(args.findings or Path(args.work) / "findings")
    names = args.harness.split(",") if args.harness else list(HARNESSES)
    skip = set(filter(None, (args.skip or "").split(",")))
    for n in [*names, *skip]:
        load(n)
    if skip & set(names):
        print(f"fuzz: skipping {', '.join(sorted(skip & set(names)))} (--skip)")
        names = [n for n in names if n not in skip]
    results = []
    for name in names:
        print(f"fuzz: {name} for {args.seconds} s", flush=True)
        r = fuzz_one(
            name, args.seconds, work=work, findings=findings, nice=args.nice, timeout=args.timeout, rss_mb=args.rss_mb
        )
        if not r.note and not args.no_coverage and load(name).TARGETS:
            r.coverage = measure_coverage(name, work=work)
        results.append(r)
        ledger = _ledger(work, [r])  # after each harness: a stopped campaign keeps what it ran
    ledger = _ledger(work, [])
    report(results, ledger)
    found = sum(len(r.findings) + len(r.errors) for r in results)
    print(f"\nfindings: {found}, saved under {findings} (python -m fuzz.to_regression FILE: a regression input)")
    if args.smoke and any(r.note for r in results):
        print("fuzz-smoke: a harness could not run", file=sys.stderr)
        return 1
    return 1 if args.smoke and found else 0


# -- the committed corpus --------------------------------------------------------------------------------


def cmd_corpus(args: argparse.Namespace) -> int:
    work = Path(args.work)
    names = args.harness.split(",") if args.harness else list(HARNESSES)
    for name in names:
        if _torch_missing(name):
            print(f"fuzz: {name}: needs torch, skipped")
            continue
        harness = load(name)
        with tempfile.TemporaryDirectory() as tmp:
            seeds, merged = Path(tmp) / "seeds", Path(tmp) / "merged"
            seeds.mkdir()
            merged.mkdir()
            for _, data in harness.seeds():
                (seeds / hashlib.sha1(data).hexdigest()).write_bytes(data)
            sources = [seeds, CORPUS / name] if (CORPUS / name).is_dir() else [seeds]
            if args.with_work and (work / "corpus" / name).is_dir():
                sources.append(work / "corpus" / name)
            cmd = [
                str(_command(name, work)),
                "-merge=1",
                f"-timeout={args.timeout}",
                *_flags(name),
                str(merged),
                *map(str, sources),
            ]
            env = _env(name, work, work / "findings")
            done = subprocess.run(
                cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False
            )
            kept = sorted(merged.iterdir())
            if done.returncode != 0 or not kept:
                print(done.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"fuzz: merging the corpus of {name} failed")
            target = CORPUS / name
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            for p in kept:
                shutil.copy(p, target / p.name)
            size = sum(p.stat().st_size for p in kept)
            print(f"fuzz: {name}: {len(list(seeds.iterdir()))} seeds -> {len(kept)} inputs, {size / 1024:.0f} KB")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz.run")
    sub = parser.add_subparsers(dest="command", required=True)
    for cmd in ("cov", "corpus", "build-cforms"):
        p = sub.add_parser(cmd)
        p.add_argument("--work", default=str(default_work()))
        p.add_argument("--harness", default=os.environ.get("HARNESS") or None)
        p.add_argument("--timeout", type=int, default=25, help="seconds one input may take (a hang past it)")
    cov = sub.choices["cov"]
    cov.add_argument("--seconds", type=int, default=60)
    cov.add_argument("--findings")
    cov.add_argument("--nice", type=int, default=19)
    cov.add_argument("--rss-mb", type=int, default=2048)
    cov.add_argument("--smoke", action="store_true")
    cov.add_argument("--skip", help="harnesses left out (comma-separated)")
    cov.add_argument("--seed", type=int, help="libFuzzer's -seed (default: random); the smoke run takes 1")
    cov.add_argument("--no-coverage", action="store_true")
    sub.choices["corpus"].add_argument("--with-work", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "cov":
        return cmd_cov(args)
    if args.command == "corpus":
        return cmd_corpus(args)
    print(build_cforms(Path(args.work)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
