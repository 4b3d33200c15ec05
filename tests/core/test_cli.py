"""The CLI's contract: --help everywhere, one-line errors, documented exit codes, no half files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracepack.cli import main
from tracepack.demo import sample_model_json
from tracepack.versions import CURRENT

SUBCOMMANDS = ["convert", "inspect", "trace", "expand", "demo"]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "model.json"
    path.write_bytes(sample_model_json())
    return path


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert "usage: tracepack " + command in capsys.readouterr().out


def test_convert_inspect_trace_expand(sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tpk = tmp_path / "m.tpk"
    code, out, err = run(
        ["convert", str(sample), str(tpk), "--codec", "json", "--compression", "zstd", "--level", "9"], capsys
    )
    assert (code, err) == (0, "")
    assert out.startswith(f"wrote {tpk}: ")

    code, out, _ = run(["inspect", str(tpk), "--json"], capsys)
    info = json.loads(out)
    assert code == 0
    current = "{}.{}".format(*CURRENT)
    assert (info["codec"], info["compression"], info["schema_version"], info["nodes"]) == ("json", "zstd", current, 70)
    assert set(info["bytes"]) >= {"strings", "stacks", "modules", "graph"}
    code, out, _ = run(["inspect", str(tpk)], capsys)
    assert code == 0
    assert "codec json, compression zstd" in out

    model = json.loads(sample.read_text())
    node = model["graph_module"]["graph"]["nodes"][5]
    code, out, _ = run(["trace", str(tpk), node["name"]], capsys)
    assert code == 0
    assert node["metadata"]["stack_trace"] in out
    assert node["metadata"]["nn_module_stack"] in out

    back = tmp_path / "back.json"
    code, _, _ = run(["expand", str(tpk), str(back)], capsys)
    assert code == 0
    assert back.read_bytes() == sample.read_bytes()


def test_convert_between_codecs(sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.tpk", tmp_path / "b.tpk"
    assert run(["convert", str(sample), str(a)], capsys)[0] == 0
    assert run(["convert", str(a), str(b), "--codec", "json", "--compression", "none"], capsys)[0] == 0
    import tracepack

    assert tracepack.load(a) == tracepack.load(b)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["inspect", "{missing}"], "tracepack: {missing}: cannot open: No such file or directory"),
        (["trace", "{sample_tpk}", "nope"], "tracepack: {sample_tpk}: node: no node named 'nope'"),
        (["convert", "{garbage}", "{out}"], "tracepack: {garbage}: byte 0: not a format tracepack reads"),
        (
            ["convert", "{sample}", "{out}", "--level", "99"],
            "tracepack: level: zstd level 99 is out of range; expected -7..22",
        ),
        (["convert", "{sample}", "{out}", "--codec", "xml"], "tracepack: convert: argument --codec: invalid choice"),
        (["frobnicate"], "tracepack: argument command: invalid choice"),
        (["inspect", "{sample}"], "tracepack: {sample}: byte 0: not a tracepack container: JSON text"),
    ],
)
def test_errors_are_one_line_with_exit_code_2(
    args: list[str], message: str, sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"\x00\x01binary")
    sample_tpk = tmp_path / "s.tpk"
    assert main(["convert", str(sample), str(sample_tpk)]) == 0
    capsys.readouterr()
    names = {"missing": tmp_path / "missing.tpk", "sample": sample, "garbage": garbage, "out": tmp_path / "out.tpk"}
    names["sample_tpk"] = sample_tpk
    code, out, err = run([a.format(**names) for a in args], capsys)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    if "argument" in message:  # argparse's usage errors print the usage first, then the one-line error
        assert lines[0].startswith("usage: tracepack"), err
        lines = lines[-1:]
    assert len(lines) == 1, err
    assert lines[0].startswith(message.format(**names)), err
    assert not (tmp_path / "out.tpk").exists(), "a failed command left an output file"


def test_malformed_model_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "model.json"
    bad.write_text('{"graph_module": {"graph": ')
    code, _, err = run(["convert", str(bad), str(tmp_path / "o.tpk")], capsys)
    assert code == 2
    assert err == f"tracepack: {bad}: line 1 column 28: not valid JSON: Expecting value\n"


def test_unknown_torch_schema_major(sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = json.loads(sample.read_text())
    model["schema_version"]["major"] = 42
    bad = tmp_path / "model.json"
    bad.write_text(json.dumps(model))
    code, _, err = run(["convert", str(bad), str(tmp_path / "o.tpk")], capsys)
    assert code == 2
    assert "torch.export schema 42.20 is not supported; expected major 1, 2, 5, 7, 8 (what torch 2.1-2.15 wrote)" in err


def test_internal_errors_are_one_line_with_exit_code_1(
    monkeypatch: pytest.MonkeyPatch, sample: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import tracepack.formats

    def boom(path: str, **kw: object) -> None:
        raise RuntimeError("kaboom\nsecond line")

    monkeypatch.setattr(tracepack.formats, "read_document", boom)
    code, _, err = run(["convert", str(sample), "x.tpk"], capsys)
    assert code == 1
    assert err == "tracepack: internal error: RuntimeError: kaboom second line (please report this)\n"


def test_demo_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["demo", "--quick"], capsys)
    assert code == 0
    assert "model.json restored from tracepack byte for byte: yes" in out
    assert "tracepack msgpack" in out


def test_trace_reads_flatbuffers_lazily(sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fb = tmp_path / "m.tpk"
    assert main(["convert", str(sample), str(fb), "--codec", "flatbuffers", "--compression", "none"]) == 0
    capsys.readouterr()
    node = json.loads(sample.read_text())["graph_module"]["graph"]["nodes"][7]
    code, out, _ = run(["trace", str(fb), node["name"]], capsys)
    assert code == 0
    assert node["metadata"]["stack_trace"] in out
    code, out, err = run(["trace", str(fb), "#999"], capsys)
    assert code == 2
    assert err.startswith(f"tracepack: {fb}: ")


def test_python_dash_m(sample: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "tracepack", "convert", str(sample), str(tmp_path / "x.tpk")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_version_says_where_the_forms_loops_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracepack.codecs import columnar

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    expected = "C" if columnar._cforms is not None else "Python"
    assert capsys.readouterr().out.strip().endswith(f"(columnar forms loops in {expected})")
    monkeypatch.setenv("TRACEPACK_PURE_PYTHON", "1")
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip().endswith("(columnar forms loops in Python)")
