"""The Python implementation passes the conformance suite (spec §12), and the suite is what its generator
writes.

Every vector of ``conformance/manifest.json`` is run here through the command line in this process (exit
code, standard output byte for byte, error class and exact place); a handful more through the suite's own
runner as separate processes, the way any implementation is run (``make conformance`` runs all of them).
The canonical JSON of §11.2 is also rendered by an independent implementation of the spec's text, from the
MessagePack vectors and the schema file alone, and compared with what ``tracepack cat`` prints.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from conformance import generate, run

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]

MANIFEST = run.load_manifest()
VECTORS = MANIFEST["vectors"]
REPO = run.HERE.parent


def _by_id(vector: dict[str, Any]) -> str:
    return str(vector["id"])


@pytest.mark.parametrize("vector", VECTORS, ids=_by_id)
def test_vector(vector: dict[str, Any]) -> None:
    """Exit code, standard output and the error's class and exact place, as the manifest says."""
    argv = [vector["command"], "--error-format", "json"]
    if vector.get("zstd_dict"):
        argv += ["--zstd-dict", str(run.HERE / vector["zstd_dict"])]
    argv += [str(run.HERE / vector["file"]), *vector.get("args", [])]
    code, out, err = generate.run_cli(argv)
    expect = vector["expect"]
    assert code == expect["exit"], err
    if code == 0:
        assert out == run.expected_output(expect["stdout"]), f"differs from {expect['stdout']}"
        return
    assert out == b""
    assert err.count(b"\n") == 1
    assert err.endswith(b"\n")
    report = json.loads(err)
    assert (report["error"], report["place"]) == (expect["error"], expect["place"])


def test_the_manifest_covers_every_section() -> None:
    """Vectors for every codec and compression of every release, and damaged ones for every section."""
    ids = {v["id"] for v in VECTORS}
    for version in ("1.0", "1.1", "1.2"):
        for codec in generate.SHORT.values():
            for comp in generate.COMPRESSIONS:
                assert f"valid/golden-{version}/{codec}-{comp}" in ids
    for section in ("container", "payload", "json", "msgpack", "fbrows", "columnar", "fbcols", "validation",
                    "versions", "trace"):  # fmt: skip
        assert any(i.startswith(f"invalid/{section}/") for i in ids), section
    for v in VECTORS:
        assert v["spec"].startswith("§"), v["id"]
        assert v["what"], v["id"]
        assert (run.HERE / v["file"]).is_file(), v["id"]
        if v["expect"]["exit"] == 0:
            assert (run.HERE / v["expect"]["stdout"]).is_file(), v["id"]
    assert sum(f.stat().st_size for f in run.HERE.rglob("*") if f.is_file()) < 4 << 20, "a few MB at most"


def test_runner_runs_an_implementation_as_a_process(tmp_path: Path) -> None:
    """The runner's protocol end to end (both error formats), on a few vectors of each kind."""
    only = (
        r"^(valid/small/msgpack-none|valid/golden-1.0/columnar-user|valid/sample/trace-fbcols-none"
        r"|invalid/container/zstd-bomb|invalid/json/duplicate-name|invalid/validation/ref-in-union"
        r"|invalid/fbcols/tag-zero|invalid/trace/no-such-node)$"
    )
    impl = f"{sys.executable} -m tracepack"
    done = subprocess.run(
        [sys.executable, "-m", "conformance.run", "--impl", impl, "--only", only, "-j", "2"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "8 of 8 vectors pass" in done.stderr
    # A wrong implementation fails, naming what differs: here one that prints nothing and exits 0.
    fake = tmp_path / "impl.py"
    fake.write_text("import sys\nsys.exit(0)\n")
    wrong = subprocess.run(
        [sys.executable, "-m", "conformance.run", "--impl", f"{sys.executable} {fake}", "--only", only],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert wrong.returncode == 1
    assert "FAIL invalid/json/duplicate-name: exit code 0, expected 2" in wrong.stdout
    assert "0 of 8 vectors pass" in wrong.stderr


def test_places_compare_without_indices() -> None:
    """§12.3: inside the payload, indices and variant markers are not compared; elsewhere places are exact."""
    n = run.normalize_place
    assert n("$.graph.nodes[*].inputs[*].arg<tensor>.name") == n("$.graph.nodes[3].inputs[0].arg.name")
    assert n("$.graph.nodes[].inputs[].arg<2>.name") == "$.graph.nodes.inputs.arg.name"
    assert n("$.graph.nodes[0].stack") != n("$.graph.nodes[0].module")
    assert n("header byte 16") == "header byte 16" != n("header byte 17")
    assert n("Columns.kinds ($.a[])") == "Columns.kinds ($.a[])"


def test_committed_suite_is_what_the_generator_writes() -> None:
    """`make check` runs the same: the fix is `python -m conformance.generate`."""
    assert generate.main(["--check"]) == 0


# -- §11.2, implemented again from the spec's text --------------------------------------------------------


def _schema(version: str) -> dict[str, Any]:
    return tomllib.loads((REPO / "schema" / f"tracepack-{version}.toml").read_text(encoding="utf-8"))


class _Canonical:
    """§11.2 from the schema file alone: the value (§11.2.1) of a MessagePack payload (§4), after the
    additive migrations (§10.4: missing trailing fields are their defaults), and its text (§11.2.2)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.structs, self.enums, self.unions = schema["structs"], schema["enums"], schema["unions"]
        self.strings: list[str] = []

    def fields(self, name: str) -> list[tuple[str, dict[str, Any]]]:
        return sorted(self.structs[name].get("fields", {}).items(), key=lambda kv: int(kv[1]["id"]))

    def default(self, f: dict[str, Any]) -> Any:
        d = f["default"]
        if f["type"] in self.enums:
            return self.enums[f["type"]]["values"][d]["value"]
        return d

    def struct(self, name: str, items: list[Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for fname, f in self.fields(name):
            i = int(f["id"])
            if i >= len(items) or items[i] is None or ("default" in f and items[i] == self.default(f)):
                continue
            out[fname] = self.value(f["type"], items[i], f.get("ref"))
        return out

    def value(self, t: str, v: Any, ref: str | None = None) -> Any:
        if ref == "strings":
            return [self.strings[x] if x >= 0 else x for x in v] if isinstance(v, list) else self.strings[v]
        if t.startswith("list["):
            return [self.value(t[5:-1], x) for x in v]
        if t in self.structs:
            return self.struct(t, v)
        if t in self.enums:
            return next(name for name, e in self.enums[t]["values"].items() if e["value"] == v)
        if t in self.unions:
            name, variant = next((n, x) for n, x in self.unions[t]["variants"].items() if x["id"] == v[0])
            return {"kind": name, **self.struct(variant["type"], v[1:])}
        if t == "f64" and not math.isfinite(v):
            return "NaN" if math.isnan(v) else "Infinity" if v > 0 else "-Infinity"
        return v

    def document(self, items: list[Any]) -> dict[str, Any]:
        self.strings = items[1]
        out = self.struct("Document", items)
        out.pop("strings", None)
        out["header"]["version"] = {"major": 1, "minor": 2}  # migrated to the current version (§11.1)
        return out


def _text(value: Any, indent: int = 0) -> str:
    """§11.2.2, written out rule by rule."""
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        members = [f"{inner}{_string(k)}: {_text(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(members) + "\n" + pad + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(inner + _text(v, indent + 1) for v in value) + "\n" + pad + "]"
    if isinstance(value, str):
        return _string(value)
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # §11.2.2: the shortest round trip, as repr writes it
    return str(int(value))


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _string(s: str) -> str:
    out = []
    for ch in s:
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_MSGPACK_CAT = [v for v in VECTORS if v["command"] == "cat" and v["expect"]["exit"] == 0
                and v["file"].endswith("msgpack-none.tpk")]  # fmt: skip


@pytest.mark.parametrize("vector", _MSGPACK_CAT, ids=_by_id)
def test_canonical_json_from_the_spec_alone(vector: dict[str, Any]) -> None:
    data = (run.HERE / vector["file"]).read_bytes()
    major, minor = int.from_bytes(data[12:14], "little"), int.from_bytes(data[14:16], "little")
    items = msgspec.msgpack.decode(data[48:])
    value = _Canonical(_schema("1.2")).document(items)
    assert (major, minor) in ((1, 0), (1, 1), (1, 2))
    assert (_text(value) + "\n").encode() == run.expected_output(vector["expect"]["stdout"])


def test_the_independent_rendering_sees_every_form() -> None:
    """The vectors it checks hold what §11.2.2 spells out: non-finite floats, exponents, escapes."""
    assert {v["id"] for v in _MSGPACK_CAT} >= {"valid/floats-strings/msgpack-none", "valid/golden-1.0/msgpack-none"}
    text = run.expected_output("expected/floats-strings.json").decode()
    for form in ('"NaN"', '"-Infinity"', "-0.0", "5e-324", "1e-05", "1e+16", "1000000000000000.0", "\\u0000",
                 "\\u001f", "\x7f", "\u2028", "\\b", "\\f"):  # fmt: skip
        assert form in text, form
