"""The crafted campaign: every input of :mod:`tests.hostile.crafted` through every command and API entry
point that reads it, each in a worker process held to a 2 GiB address space and a time limit.

``python -m tests.hostile.campaign [--scope quick|full] [--class C] [--jobs N] [--timeout S] [--save DIR]``
(``make campaign`` runs the full one; :mod:`tests.hostile.test_campaign` a quick slice in ``make test``).

An entry point's outcome on one input is one of:

* ``refused``    an InputError of one line (the CLI: exit 2, one line on stderr), nothing written;
* ``accepted``   accepted, and what comes back is the input (a ``model.json`` byte for byte through
  import and export, ``convert`` and ``expand``, ``pack`` and ``unpack``), or there is nothing to
  compare (a ``.tpk`` expanded, a program loaded into torch);
* ``changed``    accepted, and what comes back differs from the input (a silent wrong answer);
* ``written``    refused, but an output or a temporary file was left behind;
* ``traceback``  any other exception (the CLI: exit 1, "internal error"), or an error of more than one line;
* ``oom``        MemoryError (or the CLI's "out of memory") under the 2 GiB address-space cap;
* ``hang``       still running after the time limit;
* ``crash``      the worker process died (a signal).

An input's outcome is the worst of its entry points' (``crash`` > ``oom`` > ``hang`` > ``traceback`` >
``written`` > ``changed``; then ``accepted`` when any entry point accepted it, else ``refused``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Final

from tests.hostile import crafted

__all__ = ["BAD", "ENTRIES", "Report", "run"]

#: The address-space cap of every worker (the issue's 2 GiB).
ADDRESS_SPACE: Final = 2 << 30
BAD: Final = ("crash", "oom", "hang", "traceback", "written", "changed")
GOOD: Final = ("accepted", "refused")
ROOT: Final = crafted.ROOT
ET: Final = crafted.ET_DATA


class Hang(BaseException):
    """Raised by the alarm: a BaseException, so no ``except Exception`` inside tracepack hides it."""


class Outcome(Exception):
    """An entry point's verdict other than ``accepted``/``refused`` (raised with the class and a note)."""

    def __init__(self, outcome: str, note: str = "") -> None:
        super().__init__(f"{outcome}: {note}")
        self.outcome = outcome
        self.note = note


# -- the entry points (run inside a worker) ------------------------------------------------------------


@dataclass
class Job:
    path: Path  # the input, as a file
    case: crafted.Case
    scratch: Path  # an empty folder for outputs


#: Commands over many inputs that say what failed in one line each and go on with the others: a failing
#: input is exit 3 there (docs/tables.md), exit 2 everywhere else.
MANY_INPUTS: Final = frozenset({"export"})


def refused_exit(command: str) -> int:
    """The exit code with which ``tracepack COMMAND`` refuses a bad input."""
    return 3 if command in MANY_INPUTS else 2


def _cli(argv: list[str], scratch: Path, outputs: Iterable[Path] = ()) -> str:
    """Run ``tracepack ARGV`` in this process: ``accepted`` (exit 0) or ``refused`` (exit 2, or 3 for a
    many-input command, one line, nothing left in ``scratch`` but the inputs), else raise the Outcome."""
    from tracepack.cli import main

    before = set(scratch.iterdir())
    err = io.StringIO()
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    text = err.getvalue()
    if code == 0:
        return "accepted"
    if code == 1 and "out of memory" in text:
        raise Outcome("oom", f"tracepack {argv[0]}: {text.strip()[:300]}")
    if code != refused_exit(argv[0]) or "internal error" in text or "Traceback" in text:
        raise Outcome("traceback", f"tracepack {argv[0]}: exit {code}: {text.strip()[:300]}")
    if text.count("\n") != 1:
        raise Outcome("traceback", f"tracepack {argv[0]}: not one line: {text[:300]!r}")
    files = [w for w in argv if os.sep in w]  # the line names the file it is about
    if files and not any(f in text for f in files):
        raise Outcome("traceback", f"tracepack {argv[0]}: the error names no file: {text.strip()[:300]}")
    dataset = argv[0] in MANY_INPUTS  # export's output is a dataset folder, made whatever its inputs
    left = [
        p
        for p in set(scratch.iterdir()) - before
        if (p in outputs and not (dataset and p.is_dir())) or p.name.startswith(".")
    ]
    left += sorted(scratch.rglob("*.parquet"))  # and it holds no table of a refused program
    if left:
        raise Outcome("written", f"tracepack {argv[0]} refused ({text.strip()[:200]}) but left {left[0].name}")
    return "refused"


def _api(fn: Callable[[], Any], source: str | None = None) -> tuple[str, Any]:
    """``("accepted", result)`` or ``("refused", None)`` for a one-line InputError (naming ``source``,
    when the input has a name); else the Outcome."""
    from tracepack.errors import InputError

    try:
        return "accepted", fn()
    except InputError as exc:
        if "\n" in str(exc) or not str(exc):
            raise Outcome("traceback", f"error not one line: {str(exc)[:300]!r}") from None
        if source is not None and source not in str(exc):
            raise Outcome("traceback", f"the error names no file: {str(exc)[:300]}") from None
        return "refused", None


@dataclass
class _Goods:
    """Good files the entry points pair a hostile input with (made once per worker)."""

    folder: Path
    made: dict[str, Path] = field(default_factory=dict)

    def get(self, name: str) -> Path:
        if name not in self.made:
            self.made[name] = self._make(name)
        return self.made[name]

    def _make(self, name: str) -> Path:
        import tracepack
        from tracepack.torch.archives import import_archive

        path = self.folder / name.replace("/", "_")
        if name == "sample.tpk":
            doc = import_archive(str(crafted.SAMPLE_PT2), crafted.SAMPLE_PT2.read_bytes())
            path.write_bytes(tracepack.dumps(doc))
        elif name.startswith("seed.tpk:"):
            seed = crafted.seed_by_name(name.split(":", 1)[1])
            from tracepack.torch.export.model_json import import_model_json

            path.write_bytes(tracepack.dumps(import_model_json(seed.text, source=seed.name)))
        elif name == "ts.tpk":
            src = crafted.TORCH_DATA / "script_string_table.pt"
            path.write_bytes(tracepack.dumps(import_archive(str(src), src.read_bytes())))
        elif name == "log":
            path.write_bytes(b"error at debug handle 1\n")
        else:
            raise KeyError(name)
        return path


#: Where a worker keeps its files (a folder its parent made and removes); None: a folder of its own.
_SCRATCH: list[Path] = []


@functools.cache
def goods() -> _Goods:
    """The good files of this process, in its scratch folder (or a folder removed when it exits)."""
    if _SCRATCH:
        folder = _SCRATCH[0] / "goods"
        folder.mkdir(exist_ok=True)
        return _Goods(folder)
    import atexit
    import shutil

    made = Path(tempfile.mkdtemp(prefix="tracepack-campaign-goods-"))
    atexit.register(shutil.rmtree, made, True)
    return _Goods(made)


def _same_program(job: Job, program: bytes, how: str) -> str:
    if program != job.case.data:
        at = next((i for i, (a, b) in enumerate(zip(program, job.case.data, strict=False)) if a != b), None)
        at = min(len(program), len(job.case.data)) if at is None else at
        raise Outcome("changed", f"{how} gives the program back different from byte {at}")
    return "accepted"


#: Every codec a document is written with (the columnar and FlatBuffers layouts read back differently).
CODECS: Final = ("json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns")


def e_import(job: Job) -> str:
    """import_model_json, then export_model_json of the document and of it written and read back in
    every codec: each gives the input back byte for byte."""
    import tracepack
    from tracepack.torch.export.model_json import export_model_json, import_model_json

    verdict, doc = _api(lambda: import_model_json(job.case.data, source="model.json"), "model.json")
    if verdict == "refused":
        return verdict

    def again(codec: str | None) -> bytes:
        same = doc if codec is None else tracepack.loads(tracepack.dumps(doc, codec=codec), source="again.tpk")
        return export_model_json(same)

    for codec in (None, *CODECS):
        how = "import + export" if codec is None else f"import + {codec} + export"
        verdict, back = _api(functools.partial(again, codec))
        if verdict == "refused":
            raise Outcome("changed", f"an accepted model.json is refused on the way back ({how})")
        _same_program(job, back, how)
    return "accepted"


def e_convert_expand(job: Job) -> str:
    tpk, back = job.scratch / "out.tpk", job.scratch / "back.json"
    if _cli(["convert", str(job.path), str(tpk)], job.scratch, [tpk]) == "refused":
        return "refused"
    if _cli(["expand", str(tpk), str(back)], job.scratch, [back]) == "refused":
        raise Outcome("changed", "convert accepted it, expand of the result refuses it")
    return _same_program(job, back.read_bytes(), "convert + expand")


def _wrapped(job: Job) -> Path:
    path = job.scratch / "wrapped.pt2"
    path.write_bytes(crafted.wrap(crafted.seed_by_name(job.case.seed), job.case.data))
    return path


def e_pack_unpack(job: Job) -> str:
    import zipfile

    src = _wrapped(job)
    packed, back = job.scratch / "packed.pt2", job.scratch / "back.pt2"
    if _cli(["pack", str(src), str(packed)], job.scratch, [packed]) == "refused":
        return "refused"
    if _cli(["unpack", str(packed), str(back)], job.scratch, [back]) == "refused":
        raise Outcome("changed", "pack accepted it, unpack of the result refuses it")
    with zipfile.ZipFile(back) as z:
        program = z.read(crafted.seed_by_name(job.case.seed).member)
    return _same_program(job, program, "pack + unpack")


def _torch_load(path: Path) -> str:
    import tracepack.torch

    verdict, _ = _api(lambda: tracepack.torch.load(path), str(path))
    return verdict


def e_torch_load_wrapped(job: Job) -> str:
    return _torch_load(_wrapped(job))


def e_torch_load(job: Job) -> str:
    return _torch_load(job.path)


def _simple(*argv: str, out: str | None = None) -> Callable[[Job], str]:
    def entry(job: Job) -> str:
        words = [str(job.path) if w == "IN" else str(goods().get(w[5:])) if w.startswith("GOOD:") else w for w in argv]
        outputs = []
        if out is not None:
            outputs.append(job.scratch / out)
            words = [str(job.scratch / out) if w == "OUT" else w for w in words]
        return _cli(words, job.scratch, outputs)

    return entry


def e_expand_archive(job: Job) -> str:
    good = "sample.tpk" if job.case.kind == "pt2" else "ts.tpk"
    out = job.scratch / ("out.pt2" if job.case.kind == "pt2" else "out.pt")
    return _cli(["expand", str(goods().get(good)), str(out), "--archive", str(job.path)], job.scratch, [out])


def e_expand_archive_seed(job: Job) -> str:
    """A crafted ``.tpk`` of a model.json seed expanded around the seed's own archive."""
    seed = crafted.seed_by_name(job.case.seed.split(":", 1)[1])
    out = job.scratch / "out.pt2"
    return _cli(["expand", str(job.path), str(out), "--archive", str(seed.archive)], job.scratch, [out])


def e_from_document(job: Job) -> str:
    import tracepack
    import tracepack.torch

    verdict, _ = _api(lambda: tracepack.torch.from_document(tracepack.load(job.path)))
    return verdict


def e_ts_debug_info(job: Job) -> str:
    from tracepack.torch.torchscript.archive import read_torchscript_debug_info

    verdict, _ = _api(lambda: read_torchscript_debug_info(str(job.path)), str(job.path))
    return verdict


def e_packed_member(job: Job) -> str:
    """A crafted packed member put back into the packed sample, then unpacked and loaded."""
    import zipfile

    from tracepack.torch import pt2

    packed = pt2.pack_pt2(crafted.SAMPLE_PT2.read_bytes(), source="sample.pt2")
    src = job.scratch / "packed.pt2"
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(packed)) as z, zipfile.ZipFile(buf, "w") as w:
        for info in z.infolist():
            w.writestr(info, job.case.data if info.filename.endswith(".tpk") else z.read(info))
    src.write_bytes(buf.getvalue())
    back = job.scratch / "back.pt2"
    verdicts = [
        _cli(["unpack", str(src), str(back)], job.scratch, [back]),
        _cli(["convert", str(src), str(job.scratch / "c.tpk")], job.scratch, [job.scratch / "c.tpk"]),
        _torch_load(src),
    ]
    return "accepted" if "accepted" in verdicts else "refused"


#: Entry points by the kind of input (``Case.kind``; a ``.tpk`` by where its seed came from).
ENTRIES: Final[dict[str, dict[str, Callable[[Job], str]]]] = {
    "model.json": {
        "import+export": e_import,
        "convert+expand": e_convert_expand,
        "pack+unpack": e_pack_unpack,
        "torch.load": e_torch_load_wrapped,
    },
    "pt2": {
        "convert": _simple("convert", "IN", "OUT", out="out.tpk"),
        "pack": _simple("pack", "IN", "OUT", out="out.pt2"),
        "unpack": _simple("unpack", "IN", "OUT", out="out.pt2"),
        "expand --archive": e_expand_archive,
        "trace": _simple("trace", "IN", "#0"),
        "upgrade": _simple("upgrade", "IN", "OUT", out="out.pt2"),
        "torch.load": e_torch_load,
    },
    "ts": {
        "convert": _simple("convert", "IN", "OUT", out="out.tpk"),
        "expand --archive": e_expand_archive,
        "symbolicate": _simple("symbolicate", "IN", "--handle", "1"),
        "read_torchscript_debug_info": e_ts_debug_info,
    },
    "etrecord": {
        "convert": _simple("convert", "IN", "OUT", out="out.tpk"),
        "symbolicate": _simple("symbolicate", "IN", "--handle", "1"),
        "annotate": _simple("annotate", str(ET / "model.etdp"), "--with", "IN", "-o", "OUT", out="out.json"),
    },
    "pte": {
        "symbolicate": _simple("symbolicate", "IN", "--instruction", "0:0"),
        "annotate": _simple("annotate", str(ET / "model.etdp"), "--with", "IN", "-o", "OUT", out="out.json"),
    },
    "tpk:model.json": {
        "expand": _simple("expand", "IN", "OUT", out="out.json"),
        "expand --archive": e_expand_archive_seed,
        "from_document": e_from_document,
        "trace": _simple("trace", "IN", "#0"),
    },
    "tpk:packed": {"unpack, convert, torch.load": e_packed_member},
    "tpk:ts": {
        "expand --archive": _simple(
            "expand", "IN", "OUT", "--archive", str(crafted.TORCH_DATA / "corpus/transformer_traced.pt"), out="out.pt"
        ),
        "symbolicate": _simple("symbolicate", "IN", "--handle", "1"),
        "trace": _simple("trace", "IN", "#0"),
    },
    "tpk:etrecord": {
        "expand": _simple("expand", "IN", "OUT", out="out.json"),
        "symbolicate": _simple("symbolicate", "IN", "--handle", "1"),
        "annotate": _simple("annotate", str(ET / "model.etdp"), "--with", "IN", "-o", "OUT", out="out.json"),
    },
}

#: Every command with a hostile input at each input position (``IN``; ``GOOD:x`` a good file).
SPECIAL_ARGVS: Final = (
    ("convert", "IN", "OUT"),
    ("convert", "GOOD:sample.tpk", "OUT", "--zstd-dict", "IN"),
    ("inspect", "IN"),
    ("trace", "IN", "#0"),
    ("expand", "IN", "OUT"),
    ("expand", "GOOD:sample.tpk", "OUT", "--archive", "IN"),
    ("nodes", "IN"),
    ("diff", "IN", "GOOD:sample.tpk"),
    ("diff", "GOOD:sample.tpk", "IN"),
    ("cat", "IN"),
    ("export", "IN", "-o", "OUT"),
    ("pack", "IN", "OUT"),
    ("unpack", "IN", "OUT"),
    ("upgrade", "IN", "OUT"),
    ("symbolicate", "IN", "--handle", "1"),
    ("symbolicate", "GOOD:sample.tpk", "IN"),
    ("annotate", "IN", "--with", "GOOD:sample.tpk", "-o", "OUT"),
    ("annotate", str(ET / "model.etdp"), "--with", "IN", "-o", "OUT"),
    ("schema", "check", "IN", str(ROOT / "schema/tracepack-1.0.toml")),
    ("schema", "check", str(ROOT / "schema/tracepack-1.0.toml"), "IN"),
)


def _special_api() -> dict[str, Callable[[Path], Any]]:
    import tracepack
    import tracepack.torch
    from tracepack.torch import pt2
    from tracepack.torch.archives import import_archive_file
    from tracepack.torch.torchscript.archive import read_torchscript_debug_info

    return {
        "tracepack.load": tracepack.load,
        "tracepack.open": tracepack.open,
        "tracepack.torch.load": tracepack.torch.load,
        "pack_pt2_file": lambda p: pt2.pack_pt2_file(p, p.parent / "o.pt2"),
        "import_archive_file": import_archive_file,
        "read_torchscript_debug_info": lambda p: read_torchscript_debug_info(str(p)),
    }


def special_jobs() -> list[str]:
    return [" ".join(a) for a in SPECIAL_ARGVS] + [f"api:{n}" for n in _special_api()]


def _special(job: Job, entry: str) -> str:
    if entry.startswith("api:"):
        fn = _special_api()[entry[4:]]
        verdict, _ = _api(lambda: fn(job.path), str(job.path))
        return verdict
    return _simple(*entry.split(" "), out="OUT")(job) if "OUT" in entry else _simple(*entry.split(" "))(job)


def _special_input(kind: str, scratch: Path) -> Path:
    if kind == "fifo":
        path = scratch / "fifo"
        os.mkfifo(path)
        return path
    if kind == "folder":
        path = scratch / "folder"
        path.mkdir()
        return path
    return Path("/dev/zero")


def entries_for(case: crafted.Case) -> list[str]:
    if case.klass == "hang":
        return special_jobs()
    if case.kind == "tpk":
        return list(ENTRIES[f"tpk:{case.seed.split(':', 1)[0]}"])
    return list(ENTRIES[case.kind])


def run_entry(case: crafted.Case, entry: str, folder: Path) -> tuple[str, str]:
    """One entry point on one input, in this process: ``(outcome, note)``."""
    scratch = folder / "scratch"
    scratch.mkdir()
    try:
        if case.klass == "hang":
            path = _special_input(case.kind, scratch)
            job = Job(path, case, scratch)
            return _special(job, entry), ""
        path = scratch / f"in.{case.kind.split(':')[0].replace('model.json', 'json')}"
        path.write_bytes(case.data)
        job = Job(path, case, scratch)
        table = ENTRIES[f"tpk:{case.seed.split(':', 1)[0]}"] if case.kind == "tpk" else ENTRIES[case.kind]
        return table[entry](job), ""
    except Outcome as exc:
        return exc.outcome, exc.note
    except MemoryError:
        return "oom", "MemoryError"
    except RecursionError:
        return "traceback", "RecursionError"
    except Exception as exc:
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return "traceback", f"{type(exc).__name__}: {str(exc)[:200]} at {Path(tb.filename).name}:{tb.lineno}"
    finally:
        _clear(scratch)


def _clear(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


# -- the worker process ------------------------------------------------------------------------------------


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang


def _warm_up() -> None:
    """Import what the entry points use before the first run, so no run's time limit pays for imports
    (torch's takes seconds on a loaded machine)."""
    import importlib

    for name in (
        "tracepack.cli",
        "tracepack.cli.core",
        "tracepack.cli.query",
        "tracepack.cli.torch",
        "tracepack.cli.runtime",
        "tracepack.torch.archives",
        "tracepack.torch.pt2",
        "tracepack.torch.executorch.etrecord",
        "torch",
        "torch._export.serde.serialize",
        "tracepack.torch.loader",
        "tracepack.torch.upgrade",
    ):
        with contextlib.suppress(ImportError):  # torch is installed where the campaign runs
            importlib.import_module(name)


def worker(timeout: float, scratch: Path) -> None:
    """Read jobs (JSON lines: the case file, its fields, the entry) on stdin; answer each on stdout.
    Its files go to ``scratch``, which its parent removes (a worker may be killed)."""
    import warnings

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    warnings.simplefilter("ignore")
    os.environ["TRACEPACK_PROGRESS"] = "0"
    signal.signal(signal.SIGALRM, _alarm)
    _SCRATCH[:] = [scratch]
    folder = scratch / "run"
    folder.mkdir(exist_ok=True)
    _warm_up()
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    sys.stdout = sys.stderr  # anything printed goes to stderr, never into the replies
    for line in sys.stdin:
        job = json.loads(line)
        case = crafted.Case(job["klass"], job["kind"], job["label"], Path(job["file"]).read_bytes(), job["seed"])
        start = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            outcome, note = run_entry(case, job["entry"], folder)
        except Hang:
            outcome, note = "hang", f"over {timeout:g} s"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        _clear(folder / "scratch")
        seconds = time.perf_counter() - start
        reply.write(json.dumps({"outcome": outcome, "note": note, "seconds": seconds}) + "\n")
        if outcome in ("oom", "hang"):
            return  # start afresh: a MemoryError or an interrupted call may leave state behind


class _Worker:
    def __init__(self, timeout: float, scratch: Path) -> None:
        self.timeout = timeout
        scratch.mkdir(parents=True, exist_ok=True)
        argv = ["--worker", "--timeout", str(timeout), "--scratch", str(scratch)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.hostile.campaign", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
            text=True,
        )

    def ask(self, job: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._died()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout + 60)
        if not ready:  # the alarm did not get through: a call blocked in C
            self.proc.kill()
            self.proc.wait()
            return {"outcome": "hang", "note": f"the worker did not answer in {self.timeout + 60:g} s", "seconds": 0}
        line = self.proc.stdout.readline()
        if not line:
            return self._died()
        answer: dict[str, Any] = json.loads(line)
        if answer["outcome"] in ("oom", "hang"):
            self.proc.wait()
        return answer

    def _died(self) -> dict[str, Any]:
        code = self.proc.wait()
        return {"outcome": "crash", "note": f"the worker died (exit {code})", "seconds": 0}

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.close()  # the worker ends when its input does
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


# -- the parent ------------------------------------------------------------------------------------------------

_RANK: Final = {name: i for i, name in enumerate(BAD)}


def input_outcome(outcomes: list[str]) -> str:
    bad = [o for o in outcomes if o in _RANK]
    if bad:
        return min(bad, key=_RANK.__getitem__)
    return "accepted" if "accepted" in outcomes else "refused"


@dataclass
class Report:
    inputs: Counter[str] = field(default_factory=Counter)  # class -> inputs
    per_input: dict[str, Counter[str]] = field(default_factory=dict)  # class -> input outcome -> count
    per_entry: dict[str, Counter[str]] = field(default_factory=dict)  # "kind: entry" -> outcome -> count
    runs: int = 0
    bad: list[str] = field(default_factory=list)
    slowest: tuple[float, str] = (0.0, "")
    seconds: float = 0.0

    def add(self, case: crafted.Case, results: dict[str, dict[str, Any]], save: Path | None) -> None:
        self.inputs[case.klass] += 1
        outcome = input_outcome([r["outcome"] for r in results.values()])
        self.per_input.setdefault(case.klass, Counter())[outcome] += 1
        for entry, r in results.items():
            self.runs += 1
            key = f"{case.kind if case.kind != 'tpk' else 'tpk:' + case.seed.split(':', 1)[0]}: {entry}"
            self.per_entry.setdefault(key, Counter())[r["outcome"]] += 1
            if r["seconds"] > self.slowest[0]:
                self.slowest = (r["seconds"], f"{entry} on {case.label}")
            if r["outcome"] in BAD:
                self.bad.append(f"[{case.klass}] {case.label} | {entry}: {r['outcome']}: {r['note']}")
                if save is not None:
                    save.mkdir(parents=True, exist_ok=True)
                    n = len(self.bad)
                    (save / f"{n:05d}-{case.klass}.{case.kind}").write_bytes(case.data)
                    with (save / "notes.txt").open("a") as f:
                        f.write(f"{n:05d}: {self.bad[-1]}\n")

    def total(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.per_input.values())

    def lines(self) -> list[str]:
        out = [f"{sum(self.inputs.values())} inputs, {self.runs} entry-point runs, {self.seconds:.0f} s"]
        for klass, n in self.inputs.items():
            text = ", ".join(f"{k} {v}" for k, v in sorted(self.per_input[klass].items()))
            out.append(f"  {klass:10} {n:6} inputs: {text}")
        out.append("  by entry point (runs):")
        for key, counts in sorted(self.per_entry.items()):
            out.append(f"    {key:40} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        out.append(f"  slowest run {self.slowest[0]:.2f} s ({self.slowest[1][:120]})")
        return out


def run(
    scope: str = "quick",
    classes: tuple[str, ...] = crafted.CLASSES,
    *,
    timeout: float = 30.0,
    jobs: int = 1,
    save: Path | None = None,
    every: int = 23,
    progress: bool = False,
) -> Report:
    """Every input of the campaign through its entry points, ``jobs`` workers at a time."""
    report = Report()
    start = time.perf_counter()
    workers: list[_Worker | None] = [None] * jobs
    with tempfile.TemporaryDirectory(prefix="tracepack-campaign-cases-") as tmp:
        pending: list[tuple[crafted.Case, list[str], dict[str, dict[str, Any]], Path]] = []
        done = 0
        for n, case in enumerate(crafted.cases(scope, classes, every=every)):
            file = Path(tmp) / f"case-{n}"
            file.write_bytes(case.data)
            pending.append((case, entries_for(case), {}, file))
        # one job after another per worker, inputs interleaved across workers
        queue = [(i, e) for i, (_, entries, _, _) in enumerate(pending) for e in entries]
        left = Counter(i for i, _ in queue)
        import threading

        lock = threading.Lock()
        position = [0]
        stop = threading.Event()  # SIGTERM: finish the runs under way, then clean up and report

        def serve(slot: int) -> None:
            nonlocal done
            while not stop.is_set():
                with lock:
                    if position[0] >= len(queue):
                        break
                    i, entry = queue[position[0]]
                    position[0] += 1
                case, _, results, file = pending[i]
                w = workers[slot]
                if w is None or not w.alive():
                    if w is not None:
                        w.close()
                    w = workers[slot] = _Worker(timeout, Path(tmp) / f"worker-{slot}")
                job = {"file": str(file), "klass": case.klass, "kind": case.kind, "label": case.label}
                answer = w.ask({**job, "seed": case.seed, "entry": entry})
                with lock:
                    results[entry] = answer
                    left[i] -= 1
                    if left[i] == 0:
                        report.add(case, results, save)
                        done += 1
                        if progress and done % 200 == 0:
                            print(f"  {done}/{len(pending)} inputs, {len(report.bad)} bad", file=sys.stderr)

        threads = [threading.Thread(target=serve, args=(s,)) for s in range(jobs)]
        in_main = threading.current_thread() is threading.main_thread()
        old = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set()) if in_main else None
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            if in_main:
                signal.signal(signal.SIGTERM, old)
        for w in workers:
            if w is not None:
                w.close()
    report.seconds = time.perf_counter() - start
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.hostile.campaign", description=__doc__.splitlines()[0])
    p.add_argument("--scope", choices=["quick", "full"], default="quick")
    p.add_argument("--class", dest="classes", action="append", choices=crafted.CLASSES, help="only these classes")
    p.add_argument("--every", type=int, default=23, help="quick scope: every N-th input of each class")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per entry-point run before it is a hang")
    p.add_argument("--save", type=Path, help="write every bad input and a note to this folder")
    p.add_argument("--json", type=Path, help="write the report as JSON")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.timeout, args.scratch)
        return 0
    classes = tuple(args.classes or crafted.CLASSES)
    report = run(
        args.scope, classes, timeout=args.timeout, jobs=args.jobs, save=args.save, every=args.every, progress=True
    )
    for line in report.bad[:100]:
        print("  " + line)
    for line in report.lines():
        print(line)
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "inputs": dict(report.inputs),
                    "per_input": {k: dict(v) for k, v in report.per_input.items()},
                    "per_entry": {k: dict(v) for k, v in report.per_entry.items()},
                    "runs": report.runs,
                    "bad": report.bad,
                    "seconds": report.seconds,
                },
                indent=1,
            )
        )
    return 1 if report.bad else 0


if __name__ == "__main__":
    sys.exit(main())
