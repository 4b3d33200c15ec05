"""The committed torch samples: clean of machine paths, small, and laid out as documented.

These pin the facts in ``docs/torch-formats.md`` that tracepack's model.json
support relies on; they need no torch.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SAMPLE = ROOT / "src" / "tracepack" / "data" / "sample"
TORCH_DATA = ROOT / "tests" / "data" / "torch"
STRICT = TORCH_DATA / "export_strict_model.json"
COMMITTED = sorted(p for d in (SAMPLE, TORCH_DATA) for p in d.iterdir() if p.is_file())

# The order torch's serializer writes Node.metadata keys in (each only when set).
METADATA_ORDER = ["stack_trace", "nn_module_stack", "source_fn_stack", "torch_fn", "custom", "from_node"]
SITE = "/home/user/.venv/lib/python3.11/site-packages/"
HELPERS = {"_gated", "_activation", "_gelu_tanh", "_attend", "_scores"}
FRAME = re.compile(r'  File "([^"]+)", line (\d+), in (\S+)\n    (.*)')


def nodes(path: Path) -> list[dict[str, object]]:
    doc = json.loads(path.read_bytes())
    return doc["graph_module"]["graph"]["nodes"]  # type: ignore[no-any-return]


def metadata(path: Path) -> list[dict[str, str]]:
    return [n["metadata"] for n in nodes(path)]  # type: ignore[misc]


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_small(path: Path) -> None:
    assert path.stat().st_size < 300_000  # machine paths: tests/core/test_committed_data.py


@pytest.mark.parametrize("path", [SAMPLE / "model.json", STRICT], ids=lambda p: p.name)
def test_json_reencodes_byte_identically(path: Path) -> None:
    raw = path.read_bytes()
    assert json.dumps(json.loads(raw), allow_nan=False).encode("utf-8") == raw
    assert raw.isascii()  # ensure_ascii=True: non-ASCII is \\u-escaped
    assert not raw.endswith(b"\n")


def test_pt2_holds_the_same_model_json() -> None:
    with zipfile.ZipFile(SAMPLE / "tiny_transformer.pt2") as archive:
        names = archive.namelist()
        assert "tiny_transformer/models/model.json" in names
        assert archive.read("tiny_transformer/models/model.json") == (SAMPLE / "model.json").read_bytes()
        assert archive.read("tiny_transformer/archive_format") == b"pt2"
        assert archive.read("tiny_transformer/byteorder") == b"little"
        for info in archive.infolist():
            assert info.compress_type == zipfile.ZIP_STORED


@pytest.mark.parametrize("path", [SAMPLE / "model.json", STRICT], ids=lambda p: p.name)
def test_top_level_layout(path: Path) -> None:
    doc = json.loads(path.read_bytes())
    assert list(doc) == [
        "graph_module",
        "opset_version",
        "range_constraints",
        "schema_version",
        "verifiers",
        "torch_version",
        "guards_code",
    ]
    assert doc["schema_version"] == {"major": 8, "minor": 20}
    assert doc["torch_version"] == "2.13.0+cpu"
    for node in doc["graph_module"]["graph"]["nodes"]:
        assert list(node) == ["target", "inputs", "outputs", "metadata", "is_hop_single_tensor_return", "name"]


@pytest.mark.parametrize("path", [SAMPLE / "model.json", STRICT], ids=lambda p: p.name)
def test_metadata_key_order(path: Path) -> None:
    for meta in metadata(path):
        keys = list(meta)
        assert keys == [k for k in METADATA_ORDER if k in meta]
        assert all(isinstance(v, str) for v in meta.values())


def test_non_strict_stack_trace_layout() -> None:
    metas = metadata(SAMPLE / "model.json")
    assert len(metas) == 70
    for meta in metas:
        assert list(meta) == ["stack_trace", "nn_module_stack", "torch_fn"]
        trace = meta["stack_trace"]
        # traceback.format() joined and .strip()ped: no indent before the first File,
        # no trailing newline, no caret lines.
        assert trace.startswith('File "')
        assert not trace.endswith("\n")
        assert "^" not in trace
        frames = FRAME.findall("  " + trace)
        assert "  " + trace == "\n".join(f'  File "{f}", line {n}, in {fn}\n    {src}' for f, n, fn, src in frames)
        # Only frames of `forward` functions, and of the annotate_fn helpers, are kept.
        assert {fn for _, _, fn, _ in frames} <= {"forward"} | HELPERS
    deepest = max(metas, key=lambda m: m["stack_trace"].count("File "))
    assert deepest["stack_trace"].count("File ") == 9
    assert "\\u00bd" in (SAMPLE / "model.json").read_text(encoding="ascii")


def test_strict_stack_trace_layout() -> None:
    metas = metadata(STRICT)
    assert {"source_fn_stack", "custom", "from_node"} <= {k for m in metas for k in m}
    for meta in metas:
        trace = meta["stack_trace"]
        # Dynamo's traceback: two-space indent, caret lines under each call, trailing newline.
        assert trace.startswith(f'  File "{SITE}torch/_dynamo/functional_export.py"')
        assert trace.endswith("\n")
        lines = trace[:-1].split("\n")
        assert len(lines) % 3 == 0
        for i in range(0, len(lines), 3):
            assert lines[i].startswith('  File "')
            assert lines[i + 1].startswith("    ")
            assert set(lines[i + 2].strip()) == {"^"}
        if "custom" in meta:
            assert json.loads(meta["custom"])["region"] in {"gelu", "activation", "gate", "scores", "attention"}
        from_node = json.loads(meta["from_node"])
        assert list(from_node[0]) == ["name", "target", "graph_id", "pass_name", "action", "from_node"]


@pytest.mark.parametrize("path", [SAMPLE / "model.json", STRICT], ids=lambda p: p.name)
def test_nn_module_stack_and_torch_fn_forms(path: Path) -> None:
    for meta in metadata(path):
        entries = meta["nn_module_stack"].split(";")
        first = entries[0].split(",")
        assert first == ["L__self__", "", "__main__.TinyTransformer"]
        for entry in entries[1:]:
            key, fqn, type_name = entry.split(",")
            assert fqn
            assert type_name
            assert key in {f"L__self__{fqn}"} or key.isdigit()  # strict mode keys are id() numbers
        name, qualified = meta["torch_fn"].split(";")
        assert re.fullmatch(r"\w+_\d+", name)
        assert "." in qualified
        if "source_fn_stack" in meta:
            for item in meta["source_fn_stack"].split(";"):
                assert len(item.split(",")) == 2


def test_argument_variants() -> None:
    seen_in: set[str] = set()
    seen_out: set[str] = set()
    for node in nodes(SAMPLE / "model.json"):
        for arg in node["inputs"]:  # type: ignore[attr-defined]
            assert list(arg) == ["name", "arg", "kind"]
            (variant,) = arg["arg"]
            seen_in.add(variant)
        for out in node["outputs"]:  # type: ignore[attr-defined]
            (variant,) = out
            seen_out.add(variant)
    assert seen_in == {"as_tensor", "as_int", "as_float", "as_ints", "as_bool"}
    assert seen_out == {"as_tensor", "as_tensors"}
