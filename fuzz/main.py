"""One harness under libFuzzer (atheris): ``FUZZ_HARNESS=NAME python -m fuzz.main [libFuzzer flags] DIRS``.

tracepack's own modules are instrumented as they are imported (``atheris.instrument_imports``): every
module of ``tracepack`` and ``tracepack_generated`` is imported inside the block first, so none is
left uninstrumented by being imported lazily later. A harness that reaches the columnar codec's C
loops (``NATIVE``) gets the ``_cforms`` built with ``-fsanitize=fuzzer-no-link,address,undefined``
when ``FUZZ_CFORMS`` names it (``fuzz.run`` builds it and preloads atheris's ASan runtime).

A Python exception other than the harness's contract allows is recorded, not raised: the input and its
traceback are saved once per cause (exception type and the innermost tracepack frame) under
``FUZZ_FINDINGS/<harness>/`` and the campaign goes on; hangs, out-of-memory and native crashes end
the process, and libFuzzer saves the input there (``-artifact_prefix``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import pkgutil
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from fuzz.harnesses import load

_SKIP = (
    "tracepack.__main__",
    "tracepack_generated.v1_0.fb",
    "tracepack_generated.v1_1.fb",
    "tracepack_generated.v1_2.fb",
)


def _load_cforms(path: str) -> None:
    """The sanitizer build of ``tracepack.codecs._cforms`` in place of the installed one."""
    import tracepack.codecs

    spec = importlib.util.spec_from_file_location("tracepack.codecs._cforms", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["tracepack.codecs._cforms"] = module
    spec.loader.exec_module(module)
    tracepack.codecs._cforms = module  # type: ignore[attr-defined]


def import_everything(harness: ModuleType) -> None:
    """Every module of tracepack (and tracepack_generated), so that all are instrumented now."""
    cforms = os.environ.get("FUZZ_CFORMS")
    if getattr(harness, "NATIVE", False) and cforms:
        _load_cforms(cforms)
    for root in ("tracepack", "tracepack_generated"):
        package = importlib.import_module(root)
        for info in pkgutil.walk_packages(package.__path__, f"{root}."):
            name = info.name
            if name.startswith(_SKIP):
                continue
            with contextlib.suppress(ImportError):  # an optional part (pyarrow, tqdm) not installed here
                importlib.import_module(name)


def _signature(exc: BaseException) -> str:
    """The cause of a finding: the exception's type and the innermost frame in tracepack (else in fuzz)."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if "/tracepack/" in f.filename] or [f for f in frames if "/fuzz/" in f.filename] or frames
    where = f"{Path(mine[-1].filename).name}:{mine[-1].lineno}" if mine else "?"
    return f"{type(exc).__name__}@{where}"


class Recorder:
    """Saves each new cause of a finding once, with its traceback, and counts them all."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name = name
        self.folder = folder
        self.seen: dict[str, int] = {}

    def __call__(self, data: bytes, exc: BaseException) -> None:
        sig = _signature(exc)
        self.seen[sig] = self.seen.get(sig, 0) + 1
        if self.seen[sig] > 1:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha1(data).hexdigest()
        stem = f"finding-{sig.replace('@', '-').replace(':', '-')}-{digest[:12]}"
        (self.folder / stem).write_bytes(data)
        text = "".join(traceback.format_exception(exc))
        (self.folder / f"{stem}.txt").write_text(f"harness: {self.name}\ncause: {sig}\n\n{text}")
        print(f"FINDING {self.name}: {sig}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr, flush=True)


def main() -> None:
    import atheris

    name = os.environ["FUZZ_HARNESS"]
    harness = load(name)
    with atheris.instrument_imports(include=["tracepack", "tracepack_generated"]):
        import_everything(harness)
    record = Recorder(name, Path(os.environ.get("FUZZ_FINDINGS", "fuzz-findings")) / name)
    test = harness.test_one_input
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))

    def one_input(data: bytes) -> None:
        try:
            test(data)
        except Exception as exc:
            record(data, exc)

    kwargs: dict[str, Any] = {}
    if hasattr(harness, "custom_mutator"):
        kwargs["custom_mutator"] = harness.custom_mutator
    argv = [os.environ.get("FUZZ_ARGV0", sys.argv[0]), *sys.argv[1:]]
    atheris.Setup(argv, one_input, **kwargs)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
