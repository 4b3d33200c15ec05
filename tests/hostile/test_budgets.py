"""Budgets of tracepack.io.limits: the default refuses with one line naming the place, raising accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracepack
from tracepack.builder import DocumentBuilder
from tracepack.cli import main
from tracepack.document import Document
from tracepack.errors import DecodeError
from tracepack.io import limits
from tracepack.torch.export.model_json import export_model_json, import_model_json

ROOT = Path(__file__).resolve().parents[2]
MODEL_JSON = ROOT / "src/tracepack/data/sample/model.json"


@pytest.fixture(scope="module")
def sample() -> Document:
    return import_model_json(MODEL_JSON.read_bytes(), source="model.json")


def _texts(doc: Document, attr: str) -> list[str]:
    return [t for n in doc.nodes() if (t := getattr(n, attr))]


def test_one_call_renders_at_most_max_rendered_in_total(sample: Document, tmp_path: Path) -> None:
    traces = _texts(sample, "stack_trace")
    budget = 4 * max(map(len, traces))  # every trace fits alone (its estimate too); all of them do not
    assert sum(map(len, traces)) > budget
    with limits.raised(max_rendered=budget):
        fresh = tracepack.loads(tracepack.dumps(sample))
        assert export_model_json(fresh) == MODEL_JSON.read_bytes()  # outside a call: each text capped alone
        fresh = tracepack.loads(tracepack.dumps(sample))
        with limits.rendering(), pytest.raises(DecodeError, match="max_rendered") as err:
            export_model_json(fresh)
        assert "$.stacks[" in str(err.value)
    with limits.rendering():
        assert export_model_json(tracepack.loads(tracepack.dumps(sample))) == MODEL_JSON.read_bytes()


def test_expand_on_the_command_line_counts_one_total(
    sample: Document, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "m.tpk"
    tracepack.dump(sample, src)
    budget = 4 * max(map(len, _texts(sample, "stack_trace")))
    with limits.raised(max_rendered=budget):
        assert main(["expand", str(src), str(tmp_path / "out.json")]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line
    assert "max_rendered" in line
    assert "$.stacks[" in line
    assert not (tmp_path / "out.json").exists()
    assert main(["expand", str(src), str(tmp_path / "out.json")]) == 0
    assert (tmp_path / "out.json").read_bytes() == MODEL_JSON.read_bytes()


@pytest.mark.parametrize("lazy", [False, True])
def test_module_paths_are_measured_and_counted(sample: Document, tmp_path: Path, lazy: bool) -> None:
    paths = _texts(sample, "module_stack")
    longest = max(map(len, paths))
    path = tmp_path / "m.tpk"
    tracepack.dump(sample, path, codec="flatbuffers", compression="none")

    def read_all() -> list[str | None]:
        if lazy:
            with tracepack.open(path) as lz:
                return [lz.node(i).module_stack for i in range(len(sample))]
        return [n.module_stack for n in tracepack.load(path).nodes()]

    with limits.raised(max_rendered=longest // 2), pytest.raises(DecodeError, match="module path") as err:
        read_all()  # one path alone is over the budget: refused before it is built
    assert "$.modules[" in str(err.value)
    with limits.raised(max_rendered=4 * longest), limits.rendering(), pytest.raises(DecodeError) as err:
        read_all()  # each fits, all of them in one call do not
    assert "$.modules[" in str(err.value)
    with limits.raised(max_rendered=4 * longest):
        assert read_all() == [n.module_stack for n in sample.nodes()]


def _provenance_document(depth: int) -> Document:
    """One node whose from_node is a chain ``depth`` deep; each level's name is 1,000 characters."""
    entry: list[dict[str, object]] = []
    for i in range(depth):
        entry = [
            {
                "name": f"n{i}" + "x" * 1000,
                "target": "t",
                "graph_id": i,
                "pass_name": "p",
                "action": "create",
                "from_node": entry,
            }
        ]
    b = DocumentBuilder(producer="test")
    b.add_node("a", "t", meta={"from_node": json.dumps(entry)})
    return b.build()


@pytest.mark.parametrize("lazy", [False, True])
def test_provenance_is_measured_before_it_is_built(tmp_path: Path, lazy: bool) -> None:
    doc = _provenance_document(50)
    assert doc.raw.provenance is not None
    assert len(doc.raw.provenance.name) >= 50  # lifted, not kept verbatim
    text = doc.node(0).from_node
    assert text is not None
    assert len(text) > 50_000
    path = tmp_path / "p.tpk"
    tracepack.dump(doc, path, codec="flatbuffers", compression="none")

    def render() -> str | None:
        if lazy:
            with tracepack.open(path) as lz:
                return lz.node(0).from_node
        return tracepack.load(path).node(0).from_node

    with limits.raised(max_rendered=20_000), pytest.raises(DecodeError, match="max_rendered") as err:
        render()
    assert "$.provenance[" in str(err.value) or "from_node" in str(err.value)
    with limits.raised(max_rendered=2 * len(text)):
        assert render() == text


def _parsers() -> list[tuple[str, object]]:
    import msgspec
    import tomllib

    deep = 1500
    return [
        ("json", lambda: json.loads("[" * deep + "]" * deep)),
        ("msgspec json", lambda: msgspec.json.decode(b"[" * deep + b"]" * deep)),
        ("msgpack", lambda: msgspec.msgpack.decode(b"\x91" * deep + b"\xc0")),
        ("toml", lambda: tomllib.loads("a = " + "[" * (deep // 2) + "]" * (deep // 2))),  # two frames a level
    ]


@pytest.mark.parametrize("index", range(4))
def test_nesting_depth_is_a_budget(index: int) -> None:
    from tracepack.io.guard import reading

    _, parse = _parsers()[index]
    with pytest.raises(DecodeError, match="max_depth") as err, reading("deep.x", DecodeError, "$.a"):
        parse()  # type: ignore[operator]
    assert "deep.x: $.a: nested more than 1,000 levels" in str(err.value)
    with limits.raised(max_depth=4000), reading("deep.x", DecodeError):
        parse()  # type: ignore[operator]


def test_integer_digits_are_a_budget() -> None:
    from tracepack.io.guard import reading

    text = "1" * 5000
    with pytest.raises(DecodeError, match="max_int_digits") as err, reading("big.json", DecodeError, "$.n"):
        json.loads(text)
    assert "big.json: $.n: an integer of more than 4,300 digits" in str(err.value)
    with limits.raised(max_int_digits=6000), reading("big.json", DecodeError):
        assert json.loads(text) == int(text)
    with pytest.raises(ValueError, match="integer string conversion"):
        int(text)  # the interpreter's own limit is back after the parse


def test_model_json_nesting_and_integers_name_the_file_and_the_budget() -> None:
    from tracepack.errors import LegacyFormatError

    data = MODEL_JSON.read_bytes()
    deep = data.replace(b'"graph_module": {', b'"deep": ' + b"[" * 2000 + b"]" * 2000 + b', "graph_module": {', 1)
    with pytest.raises(LegacyFormatError, match="max_depth") as err:
        import_model_json(deep, source="deep.json")
    assert str(err.value).startswith("deep.json")
    with limits.raised(max_depth=5000):
        doc = import_model_json(deep, source="deep.json")  # accepted, and given back byte for byte
        assert export_model_json(tracepack.loads(tracepack.dumps(doc))) == deep
    # The document keeps the unknown key as JSON text: reading it back holds to the budget too.
    with pytest.raises(DecodeError, match="max_depth"):
        export_model_json(tracepack.loads(tracepack.dumps(doc)))
    head, sep, tail = data.partition(b'"major": ')
    assert sep
    big = head + sep + b"7" * 5000 + tail[tail.index(b",") :]
    with pytest.raises(LegacyFormatError, match="max_int_digits"):
        import_model_json(big, source="big.json")
    with limits.raised(max_int_digits=6000), pytest.raises(LegacyFormatError) as err:
        import_model_json(big, source="big.json")  # parsed now; refused as over 64 bits
    assert "max_int_digits" not in str(err.value)


def _deep_model_json(levels: int) -> bytes:
    return MODEL_JSON.read_bytes().replace(
        b'"graph_module": {', b'"deep": ' + b"[" * levels + b"]" * levels + b', "graph_module": {', 1
    )


def _cli_cases(tmp_path: Path, sample: Document) -> list[tuple[list[str], str, str]]:
    """(command line, the budget it goes past by default, the --limit that lets it through)."""
    deep = tmp_path / "deep.json"
    deep.write_bytes(_deep_model_json(2000))
    digits = tmp_path / "digits.json"
    digits.write_bytes(
        MODEL_JSON.read_bytes().replace(b'"graph_module": {', b'"n": ' + b"7" * 5000 + b', "graph_module": {', 1)
    )
    tpk = tmp_path / "m.tpk"
    tracepack.dump(sample, tpk)
    out = str(tmp_path / "out")
    size = len(tracepack.dumps(sample, compression="none"))
    return [
        (["convert", str(deep), out + "1.tpk"], "max_depth", "max_depth=5000"),
        (["convert", str(digits), out + "2.tpk"], "max_int_digits", "max_int_digits=6K"),
        (["inspect", str(tpk), "--limit", "max_decompressed=1K"], "max_decompressed", f"max_decompressed={size}"),
        (["convert", str(MODEL_JSON), out + "3.tpk", "--limit", "max_input=64K"], "max_input", "max_input=1M"),
        (["expand", str(tpk), out + "4.json", "--limit", "max_rendered=4K"], "max_rendered", "max_rendered=256MiB"),
    ]


@pytest.mark.parametrize("case", range(5))
def test_every_budget_has_a_cli_flag(
    case: int, sample: Document, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Over a budget: exit 2, one line naming the budget and the flag that raises it; with the flag: exit 0."""
    argv, budget, setting = _cli_cases(tmp_path, sample)[case]
    assert main(argv) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line
    assert budget in line
    assert f"--limit {budget}=N" in line
    if budget == "max_int_digits":  # parsed now, and refused as what no schema field holds (64 bits)
        assert main([*argv, "--limit", setting]) == 2
        assert "does not fit in 64 bits" in capsys.readouterr().err
        return
    assert main([*argv, "--limit", setting]) == 0  # the later --limit of the same budget wins


def test_limit_values_and_names() -> None:
    assert limits.parse_setting("max_decompressed=16G") == ("max_decompressed", 16 << 30)
    assert limits.parse_setting("depth=5_000") == ("max_depth", 5000)
    assert limits.parse_setting("max-pickle-objects=100M") == ("max_pickle_objects", 100 << 20)
    assert limits.parse_setting("max_input=64KiB") == ("max_input", 64 << 10)
    assert limits.parse_setting("ratio_floor=1mb") == ("ratio_floor", 1 << 20)
    for bad in (
        "max_depth",
        "max_dept=5",
        "max_depth=",
        "max_depth=-1",
        "max_depth=0",
        "max_depth=1.5G",
        "max_depth=5X",
    ):
        with pytest.raises(ValueError, match=r"not a budget|not a size|at least 1"):
            limits.parse_setting(bad)


def test_a_bad_limit_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(MODEL_JSON), "--limit", "max_dept=5"]) == 2
    line = capsys.readouterr().err.strip()
    assert line == (
        "tracepack: --limit: 'max_dept' is not a budget (did you mean 'max_depth', 'max_input', 'max_rendered'?); "
        "expected NAME=VALUE, NAME one of max_decompressed, max_ratio, ratio_floor, max_pickle_objects, "
        "max_input, max_rendered, max_depth, max_int_digits"
    )
