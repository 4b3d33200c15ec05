"""The command line as a Unix user meets it: find, diff, cat, export; -, no-clobber, --json, usage."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tracepack
from tests.ux.helpers import MODEL_JSON, PT2, TORCH_DATA, torch_frames, torch_nodes
from tracepack.cli import main
from tracepack.container import unpack
from tracepack.plain import to_plain


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def run_bytes(args: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """The real command in a subprocess: standard input and output as bytes."""
    cmd = [sys.executable, "-m", "tracepack", *map(str, args)]
    return subprocess.run(cmd, input=stdin, capture_output=True, check=False)


# -- nodes ---------------------------------------------------------------------------------------


def test_nodes_answers_which_source_line_made_a_node(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["nodes", MODEL_JSON, "--match", "^linear_3$"], capsys)
    assert code == 0
    theirs = next(n for n in torch_nodes() if n["name"] == "linear_3")
    user = [f for f in torch_frames(theirs) if "site-packages" not in f[0]][-1]
    assert out == f"linear_3\t{theirs['target']}\tblocks.0.ff.net.0\t{user[0]}:{user[1]}\n"


def test_nodes_json_and_several_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tpk = tmp_path / "m.tpk"
    assert main(["convert", str(MODEL_JSON), str(tpk)]) == 0
    capsys.readouterr()
    code, out, _ = run(["nodes", MODEL_JSON, PT2, tpk, "--op", "linear", "--module", "blocks.1", "--json"], capsys)
    assert code == 0
    rows = json.loads(out)
    names = [n["name"] for n in torch_nodes() if ".linear." in n["target"]]
    per_file = [[r["name"] for r in rows if r["file"] == str(f)] for f in (MODEL_JSON, PT2, tpk)]
    assert per_file[0] == per_file[1] == per_file[2] == [n for n in names if n in per_file[0]]
    assert len(per_file[0]) == 4
    assert all(r["module"].startswith("blocks.1") for r in rows)


def test_unknown_node_suggests_names(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["trace", MODEL_JSON, "linaer_3"], capsys)
    assert code == 2
    assert out == ""
    assert (
        err
        == f"tracepack: {MODEL_JSON}: node: no node named 'linaer_3' (did you mean 'linear_3', 'linear_9', 'linear_8'?)\n"
    )


def test_trace_json_several_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["trace", PT2, "linear_3", "#0", "--json"], capsys)
    assert code == 0
    first, second = json.loads(out)
    theirs = {n["name"]: n for n in torch_nodes()}
    assert first["stack_trace"] == theirs["linear_3"]["metadata"]["stack_trace"]
    assert [(f["file"], f["line"]) for f in first["frames"]] == torch_frames(theirs["linear_3"])
    assert second["name"] == torch_nodes()[0]["name"]


# -- diff ----------------------------------------------------------------------------------------


def test_diff_human_json_and_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = json.loads(MODEL_JSON.read_bytes())
    program["graph_module"]["graph"]["nodes"][3]["target"] = "torch.ops.aten.split.Tensor"
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(program))
    code, out, _ = run(["diff", PT2, changed], capsys)
    assert code == 0
    assert "~ chunk\n    op: torch.ops.aten.chunk.default -> torch.ops.aten.split.Tensor\n" in out
    assert run(["diff", PT2, changed, "--exit-code"], capsys)[0] == 1
    assert run(["diff", PT2, MODEL_JSON, "--exit-code"], capsys)[0] == 0
    code, out, _ = run(["diff", MODEL_JSON, changed, "--json", "--by", "structure"], capsys)
    report = json.loads(out)
    assert report["mode"] == "structure"
    assert not report["same"]
    assert report["changed"][0]["fields"]["op"]["b"] == "torch.ops.aten.split.Tensor"


# -- cat -----------------------------------------------------------------------------------------


def test_cat_prints_plain_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tpk = tmp_path / "m.tpk"
    assert main(["convert", str(MODEL_JSON), str(tpk), "--codec", "columnar"]) == 0
    capsys.readouterr()
    code, out, _ = run(["cat", tpk], capsys)
    assert code == 0
    assert json.loads(out) == to_plain(tracepack.load(MODEL_JSON))


def test_cat_raw_is_the_bare_payload(tmp_path: Path) -> None:
    for codec in ("json", "msgpack"):
        tpk = tmp_path / f"m-{codec}.tpk"
        tracepack.dump(tracepack.load(MODEL_JSON), tpk, codec=codec, compression="zstd")
        done = run_bytes(["cat", "--raw", tpk])
        assert done.returncode == 0, done.stderr
        assert done.stdout == bytes(unpack(tpk.read_bytes())[1])
        if codec == "json":
            # what `jq` reads: plain JSON text, no header in front
            assert json.loads(done.stdout)["header"]["magic"] == "tracepack"
        else:
            import msgspec

            assert msgspec.msgpack.decode(done.stdout)[0][0] == "tracepack"


# -- Unix conventions ------------------------------------------------------------------------------


def test_dash_is_stdin_and_stdout() -> None:
    done = run_bytes(["convert", "-", "-", "--codec", "msgpack"], stdin=MODEL_JSON.read_bytes())
    assert done.returncode == 0, done.stderr
    assert tracepack.loads(done.stdout) == tracepack.load(MODEL_JSON)
    assert done.stderr == b""  # a pipeline stays quiet: only the data, on stdout
    nodes = run_bytes(["nodes", "-", "--op", "linear"], stdin=done.stdout)
    assert nodes.returncode == 0
    assert len(nodes.stdout.decode().splitlines()) == 10
    assert not Path("-").exists()


def test_no_clobber_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.tpk"
    out.write_bytes(b"precious")
    code, _, err = run(["convert", MODEL_JSON, out], capsys)
    assert code == 2
    assert err == f"tracepack: {out}: exists; pass -f/--force to replace it\n"
    assert out.read_bytes() == b"precious"
    # the input itself, too
    copy = tmp_path / "model.json"
    copy.write_bytes(MODEL_JSON.read_bytes())
    assert run(["expand", out, copy], capsys)[0] == 2
    assert copy.read_bytes() == MODEL_JSON.read_bytes()
    assert run(["convert", MODEL_JSON, out, "-f"], capsys)[0] == 0
    assert tracepack.load(out) == tracepack.load(MODEL_JSON)


def test_several_inputs_into_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    inputs = [MODEL_JSON, TORCH_DATA / "lite_debug.ptl", TORCH_DATA / "script_legacy.pt"]
    code, stdout, _ = run(["convert", *inputs, out, "--json"], capsys)
    assert code == 0
    results = json.loads(stdout)
    assert [Path(r["output"]).name for r in results] == ["model.tpk", "lite_debug.tpk", "script_legacy.tpk"]
    for src, r in zip(inputs, results, strict=True):
        assert tracepack.load(r["output"]) == tracepack.load(src)
    code, _, err = run(["convert", *inputs, out], capsys)  # all exist now: refused before any work
    assert code == 2
    assert "exists; pass -f/--force" in err
    code, _, err = run(["convert", MODEL_JSON, PT2, tmp_path / "nope.tpk"], capsys)
    assert code == 2
    assert "2 inputs need a folder" in err


def test_usage_errors_print_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["nodes"], capsys)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert lines[0].startswith("usage: tracepack nodes")
    assert lines[-1] == "tracepack: nodes: the following arguments are required: FILE"


@pytest.mark.parametrize(
    "args",
    [
        ["convert", "{model}", "{tmp}/a.tpk"],
        ["inspect", "{tpk}"],
        ["trace", "{tpk}", "linear"],
        ["expand", "{tpk}", "{tmp}/b.json"],
        ["nodes", "{tpk}"],
        ["diff", "{tpk}", "{model}"],
        ["export", "{tpk}", "-o", "{tmp}/tables"],
        ["pack", "{pt2}", "{tmp}/p.pt2"],
    ],
)
def test_json_on_every_command_that_reports(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tpk = tmp_path / "m.tpk"
    tracepack.dump(tracepack.load(MODEL_JSON), tpk)
    names = {"model": MODEL_JSON, "tpk": tpk, "tmp": tmp_path, "pt2": PT2}
    code, out, err = run([a.format(**names) for a in args] + ["--json"], capsys)
    assert code == 0, err
    value: Any = json.loads(out)
    assert value


def test_progress_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracepack.cli._common import progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    fake = Tty()
    monkeypatch.setattr(sys, "stderr", fake)
    assert list(progress(range(3), total=3, desc="convert")) == [0, 1, 2]
    assert "convert" in fake.getvalue()  # tqdm drew a bar
    monkeypatch.setenv("TRACEPACK_PROGRESS", "0")
    fake.truncate(0)
    fake.seek(0)
    assert list(progress(range(3), total=3, desc="convert")) == [0, 1, 2]
    assert fake.getvalue() == ""
    plain = io.StringIO()  # not a terminal: nothing, whatever the setting
    monkeypatch.delenv("TRACEPACK_PROGRESS")
    monkeypatch.setattr(sys, "stderr", plain)
    assert list(progress(range(3))) == [0, 1, 2]
    assert plain.getvalue() == ""


def test_mistyped_commands_and_filters_suggest(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["nodse", MODEL_JSON], capsys)
    assert code == 2
    assert err.splitlines()[-1].startswith(
        "tracepack: argument command: invalid choice 'nodse' (did you mean 'nodes'?)"
    )
    code, out, err = run(["nodes", MODEL_JSON, "--module", "blocks.0.atn", "--op", "lienar"], capsys)
    assert code == 0
    assert out == ""
    assert err == (
        f"tracepack: {MODEL_JSON}: no op 'lienar' (did you mean 'linear'?)\n"
        f"tracepack: {MODEL_JSON}: no module 'blocks.0.atn' (did you mean 'blocks.0.attn', 'blocks.1.attn', 'blocks.0.attn.qkv'?)\n"
    )
    # filters that name real things but match nothing together: no note
    code, out, err = run(["nodes", MODEL_JSON, "--module", "embed", "--op", "tanh"], capsys)
    assert (code, out, err) == (0, "", "")


def test_one_long_job_shows_its_steps_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    fake = Tty()
    monkeypatch.setattr(sys, "stderr", fake)
    assert main(["convert", str(MODEL_JSON), str(tmp_path / "m.tpk")]) == 0
    shown = fake.getvalue()
    for step in ("reading", "decoding", "encoding", "writing"):
        assert step in shown, shown
