"""Run the examples of a Markdown file, so that what it shows cannot drift from what tracepack does.

Fenced blocks, by their info string:

``console``
    a terminal transcript: ``$ COMMAND`` lines (a line ending in ``\\`` continues), each followed by
    the output it prints (standard output and error, as a terminal shows them). A line ``...`` in the
    output stands for any number of lines, and ``[...]`` inside a line for any text (sizes, timings). Every command must exit 0: show a failure with
    ``; echo "exit $?"``. Commands run with bash, in order, in one folder per file (see ``FIXTURES``
    in test_readme.py), with ``tracepack`` and ``python`` from the environment under test.
``python``
    run, in order, in one namespace per file, in the same folder: every block must run without an
    error; what it shows is checked by its own ``assert`` lines.
``pycon``
    a doctest (``>>>`` lines and the output they print), in the same namespace.
``sh``
    set-up commands: each ``make TARGET`` must be a target of the Makefile, each extra in
    ``pip install 'tracepack[EXTRA]'`` an extra of pyproject.toml (CI installs the built wheel itself).
``tree``
    a folder listing: each path in it must exist in the repository.

Blocks with any other info string (tables of numbers, plain text) are not run.
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Block", "Failure", "blocks", "match_output", "run_file"]

ROOT = Path(__file__).resolve().parent.parent.parent
_FENCE = re.compile(r"^```([A-Za-z0-9_-]*)\s*$")


@dataclass(frozen=True)
class Block:
    kind: str
    line: int  # 1-based line of the opening fence
    text: str


class Failure(AssertionError):
    pass


def blocks(markdown: str) -> Iterator[Block]:
    """The fenced blocks of ``markdown``, in order."""
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        yield Block(m.group(1), start + 1, "\n".join(body) + "\n")
        i += 1


def _commands(text: str) -> list[tuple[str, list[str]]]:
    """``(command, expected output lines)`` pairs of a transcript."""
    out: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            raise Failure(f"transcript line {i + 1} is output before any command: {line!r}")
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + "\n" + lines[i]
        i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        out.append((command, expected))
    return out


def match_output(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` lines match ``expected``; a ``...`` line matches any number of lines."""
    exp = [e.rstrip() for e in expected]
    act = [a.rstrip() for a in actual]

    def same(e: str, a: str) -> bool:
        if "[...]" not in e:
            return e == a
        return re.fullmatch(".*".join(map(re.escape, e.split("[...]"))), a) is not None

    def go(i: int, j: int) -> bool:
        if i == len(exp):
            return j == len(act)
        if exp[i] == "...":
            return any(go(i + 1, k) for k in range(j, len(act) + 1))
        return j < len(act) and same(exp[i], act[j]) and go(i + 1, j + 1)

    return go(0, 0)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env |= {"TRACEPACK_PROGRESS": "0", "COLUMNS": "100", "PYTHONIOENCODING": "utf-8", "NO_COLOR": "1"}
    return env


def _run_console(block: Block, cwd: Path) -> None:
    for command, expected in _commands(block.text):
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=cwd,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
            check=False,
        )
        actual = done.stdout.splitlines()
        if done.returncode != 0:
            raise Failure(f"line {block.line}: `{command}` exited {done.returncode}:\n{done.stdout}")
        if not match_output(expected, actual):
            raise Failure(
                f"line {block.line}: `{command}` printed\n"
                + "\n".join(actual)
                + "\nbut the file shows\n"
                + "\n".join(expected)
            )


def _run_python(block: Block, cwd: Path, namespace: dict[str, Any], name: str) -> None:
    code = compile(block.text, f"{name}:{block.line}", "exec")
    old = Path.cwd()
    os.chdir(cwd)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a user's interpreter shows torch's chatter; it is not a failure
            exec(code, namespace)
    except Exception as exc:
        raise Failure(f"line {block.line}: the python block raised {type(exc).__name__}: {exc}") from exc
    finally:
        os.chdir(old)


def _run_pycon(block: Block, cwd: Path, namespace: dict[str, Any], name: str) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.text, namespace, f"{name}:{block.line}", name, block.line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    old = Path.cwd()
    os.chdir(cwd)
    out: list[str] = []
    try:
        runner.run(test, out=out.append, clear_globs=False)
    finally:
        os.chdir(old)
    if runner.failures:
        raise Failure(f"line {block.line}: the doctest failed:\n" + "".join(out))


def _check_make(block: Block) -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), flags=re.M))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project.get("optional-dependencies", {}))
    for line in block.text.splitlines():
        m = re.match(r"^\s*make\s+([a-z][a-z-]*)", line)
        if m and m.group(1) not in targets:
            raise Failure(f"line {block.line}: `make {m.group(1)}` is not a target of the Makefile")
        p = re.match(r"^\s*pip install\s+'?([A-Za-z0-9_-]+)(?:\[([a-z0-9,_-]+)\])?'?", line)
        if p:
            if p.group(1) != project["name"]:
                raise Failure(f"line {block.line}: installs {p.group(1)}, not {project['name']}")
            for extra in (p.group(2) or "").split(","):
                if extra and extra not in extras:
                    raise Failure(f"line {block.line}: [{extra}] is not an extra of pyproject.toml")


def _check_tree(block: Block) -> None:
    parents: list[tuple[int, str]] = []
    for line in block.text.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        word = line.split()[0]
        while parents and parents[-1][0] >= indent:
            parents.pop()
        prefix = parents[-1][1] if parents else ""
        for part in word.split(","):
            name = part.strip()
            if not name:
                continue
            path = prefix + name
            if not (ROOT / path.rstrip("/")).exists():
                raise Failure(f"line {block.line}: {path} is listed but does not exist")
        if word.endswith("/"):
            parents.append((indent, prefix + word))


def run_file(path: Path, cwd: Path) -> int:
    """Run every checked block of ``path`` in ``cwd``; return how many ran. Raises :class:`Failure`."""
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    ran = 0
    for block in blocks(path.read_text(encoding="utf-8")):
        if block.kind == "console":
            _run_console(block, cwd)
        elif block.kind == "python":
            _run_python(block, cwd, namespace, path.name)
        elif block.kind == "pycon":
            _run_pycon(block, cwd, namespace, path.name)
        elif block.kind == "sh":
            _check_make(block)
        elif block.kind == "tree":
            _check_tree(block)
        else:
            continue
        ran += 1
    return ran
