"""What a torch.export dictionary may be trained on (scripts/torch/dictionary_provenance.py, issue 26): no
shipped dictionary holds a code line of a benchmark model's own model file (recorded as hashes, so no
third-party code is committed and CI needs no models), and the rule's pieces do what they say."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepack import dictionaries

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "torch"
sys.path.insert(0, str(SCRIPTS))
import dictionary_provenance as prov  # noqa: E402

SITE = "/home/user/.venv/lib/python3.11/site-packages/"


def _frame(path: str, line: str, lineno: int = 1, fn: str = "forward") -> str:
    return f'File "{path}", line {lineno}, in {fn}\n    {line}'


def _program(traces: list[str]) -> bytes:
    nodes = [{"name": f"n{i}", "metadata": {"stack_trace": t, "torch_fn": "linear_1;builtin.linear"}}
             for i, t in enumerate(traces)]  # fmt: skip
    return json.dumps({"graph_module": {"graph": {"nodes": nodes}}, "other": [1, "x"]}).encode()


def test_record_is_well_formed() -> None:
    lines = prov.RECORD.read_text(encoding="utf-8").splitlines()
    assert len(lines) > 100, "the benchmark's 18 models have a few hundred model-file lines"
    assert all(re.fullmatch(r"[0-9a-f]{64}", line) for line in lines)
    assert lines == sorted(set(lines)), "sorted and unique, as --record writes it"


@pytest.mark.parametrize("spec", [d for d in dictionaries.SHIPPED if d.name.startswith("torch-export-")], ids=str)
def test_no_shipped_dictionary_holds_a_benchmark_line(spec: dictionaries.DictionarySpec) -> None:
    data = dictionaries.dictionary_path(spec).read_bytes()
    leaked = prov.dictionary_lines(data) & prov.recorded()
    assert not leaked, f"{spec.name} holds {len(leaked)} code lines of the benchmark's model files"


@pytest.mark.parametrize("spec", [d for d in dictionaries.SHIPPED if d.inputs], ids=str)
def test_no_recorded_training_program_is_a_benchmark_architecture(spec: dictionaries.DictionarySpec) -> None:
    """Rules 1 and 2 on the recorded training inputs (the benchmark's model files and lines as recorded),
    and rule 3: none of their stack traces has a benchmark model-file line."""
    import train_dictionary

    files, hashes = prov.recorded_files(), prov.recorded()
    assert "timm/models/convnext.py" in files, "the worst real model's file is recorded"
    programs = train_dictionary.read_corpus(train_dictionary.corpus_path(spec))
    assert programs
    for name, data in programs:
        assert prov.eligible(data, files, hashes) == "", name
        assert prov.scrub(data, hashes) == data, f"{name} has a benchmark model-file line"


def test_a_dictionary_with_a_benchmark_line_is_caught() -> None:
    """The check above can fail: bytes holding a model file's code line (as a stack trace stores it) are found."""
    line = "hidden = self.block_out(hidden) + residual"
    program = _program([_frame(SITE + "timm/models/somenet.py", line, 12)])
    files, hashes = prov.benchmark([program])
    assert files == {"timm/models/somenet.py"}
    assert hashes == {prov.line_hash(line)}
    # as a whole stack trace stores it, as a NUL-separated string column, as a MessagePack str8
    for framing in (b"in forward\n        %s\n  File", b"\x00%s\x00", b"\xd9%c%%s\xa0" % len(line)):
        dictionary = b"\x37\xa4\x30\xec" + bytes(range(40)) + framing % line.encode() + b"\xa7reshape"
        assert prov.dictionary_lines(dictionary) & hashes == hashes, framing
    assert not prov.dictionary_lines(prov.scrub(program, hashes)) & hashes


def test_eligibility_rules() -> None:
    bench = _program(
        [_frame(SITE + "transformers/models/bert/modeling_bert.py", f"x{i} = self.f{i}(x)") for i in range(4)]
    )
    files, hashes = prov.benchmark([bench])
    same_file = _program([_frame(SITE + "transformers/models/bert/modeling_bert.py", "y = g(y)")])
    assert "is a benchmark model's" in prov.eligible(same_file, files, hashes)
    copy = _program([_frame(SITE + "transformers/models/roberta/modeling_roberta.py", f"x{i} = self.f{i}(x)")
                     for i in range(3)] + [_frame(SITE + "transformers/models/roberta/modeling_roberta.py", "z = 1")])  # fmt: skip
    assert "(a copy)" in prov.eligible(copy, files, hashes)
    other = _program([_frame(SITE + "transformers/models/opt/modeling_opt.py", "x0 = self.f0(x)"),
                      _frame(SITE + "transformers/models/opt/modeling_opt.py", "q = self.q(x)"),
                      _frame(SITE + "transformers/models/opt/modeling_opt.py", "k = self.k(x)"),
                      _frame(SITE + "transformers/masking_utils.py", "x1 = self.f1(x)")])  # fmt: skip
    assert prov.eligible(other, files, hashes) == "", "1 of 3 model-file lines shared: below the copy share"
    torch_only = _program(
        [_frame("/home/user/.venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", "return F.linear(x)")]
    )
    assert prov.eligible(torch_only, files, hashes) == ""


_code = st.text(st.sampled_from("abxy =()+.12"), min_size=1, max_size=12).filter(lambda s: s.strip() != "")
_paths = st.sampled_from([SITE + "timm/models/a.py", SITE + "torch/nn/modules/b.py", "/home/user/project/m.py"])


@given(st.lists(st.lists(st.tuples(_paths, _code), min_size=1, max_size=4), min_size=1, max_size=5), st.data())
def test_scrub_removes_exactly_the_recorded_lines(traces: list[list[tuple[str, str]]], data: st.DataObject) -> None:
    """Checked against the standard library's json: every frame keeps its file, line and function; its
    code line is ``...`` exactly when its hash (of the line without surrounding blanks) is recorded; nothing else in the document changes."""
    all_lines = sorted({line for trace in traces for _, line in trace})
    banned = set(data.draw(st.lists(st.sampled_from(all_lines), unique=True)))
    program = _program(["\n  ".join(_frame(p, line, i) for i, (p, line) in enumerate(trace)) for trace in traces])
    out = prov.scrub(program, {prov.line_hash(line) for line in banned})
    if not banned:
        assert out == program
    got = json.loads(out)
    want = json.loads(program)
    stripped = {line.strip() for line in banned}  # a line is recorded without its indentation (line_hash)
    expected = [
        "\n  ".join(_frame(p, "..." if line.strip() in stripped else line, i) for i, (p, line) in enumerate(trace))
        for trace in traces
    ]
    assert [n["metadata"]["stack_trace"] for n in got["graph_module"]["graph"]["nodes"]] == expected
    for g, w in zip(got["graph_module"]["graph"]["nodes"], want["graph_module"]["graph"]["nodes"], strict=True):
        assert g["name"] == w["name"]
        assert g["metadata"]["torch_fn"] == w["metadata"]["torch_fn"]
    assert got["other"] == want["other"]
