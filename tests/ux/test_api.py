"""The public API as a Python user meets it: names, exceptions that fit Python's, one load for every format."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from tests.ux.helpers import MODEL_JSON, PT2, TORCH_DATA, torch_nodes
from tracepack.errors import did_you_mean


def test_lookups_raise_a_key_error_that_suggests_names() -> None:
    doc = tracepack.load(MODEL_JSON)
    with pytest.raises(KeyError) as info:
        doc.node("linaer_3")
    err = info.value
    assert isinstance(err, tracepack.NotFoundError)
    assert isinstance(err, tracepack.UsageError)  # still tracepack's, exit code 2
    assert err.key == "linaer_3"
    assert str(err) == "node: no node named 'linaer_3' (did you mean 'linear_3', 'linear_9', 'linear_8'?)"
    with pytest.raises(KeyError):
        doc.node(10_000)
    with pytest.raises(KeyError):
        doc.debug_handle(12345)
    # no suggestion when nothing is close
    with pytest.raises(KeyError, match=r"no node named 'zzzzzzzz'$"):
        doc.node("zzzzzzzz")


def test_lazy_lookups_suggest_too(tmp_path: Path) -> None:
    path = tmp_path / "m.tpk"
    tracepack.dump(tracepack.load(MODEL_JSON), path, codec="flatbuffers", compression="none")
    with tracepack.open(path) as lazy, pytest.raises(KeyError, match=r"did you mean 'linear_3'"):
        lazy.node("linaer_3")


def test_did_you_mean_uses_difflib_ratios() -> None:
    assert did_you_mean("mull", ["mul", "add", "mul_1"]) == " (did you mean 'mul', 'mul_1'?)"
    assert did_you_mean("q", ["mul"]) == ""


def test_decode_errors_are_value_errors() -> None:
    doc = tracepack.load(MODEL_JSON)
    data = bytearray(tracepack.dumps(doc, codec="msgpack", compression="none"))
    data[60:64] = b"\xc1\xc1\xc1\xc1"  # 0xc1 is never used in MessagePack
    from tracepack.container import pack

    # a payload that does not decode, inside a valid container
    bad = pack(bytes(data[48:]), schema_version=(1, 1), codec="msgpack", compression="none")
    with pytest.raises(ValueError, match=r"^<bytes>: ") as info:
        tracepack.loads(bad)
    assert isinstance(info.value, tracepack.DecodeError)
    assert issubclass(tracepack.IntegrityError, ValueError)


def test_load_reads_every_supported_format() -> None:
    names = [n["name"] for n in torch_nodes()]
    assert [n.name for n in tracepack.load(MODEL_JSON).nodes()] == names
    assert [n.name for n in tracepack.load(PT2).nodes()] == names
    assert [n.name for n in tracepack.load(PT2.read_bytes()).nodes()] == names
    ts = tracepack.load(TORCH_DATA / "lite_debug.ptl")
    assert ts.table_sizes()["debug_handles"] > 100


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "an empty file"),
        (b"\x28\xb5\x2f\xfd\x00\x00", "a zstd frame (decompress it first: zstd -d)"),
        (b"\x80\x02}q\x00.", "a pickle (tracepack never unpickles"),
        (b'{"a": 1}', "JSON, but not a torch.export program"),
        (b"[build-system]\n", "unknown content starting b'[build-s'"),
        (b"PK\x03\x04" + b"\x00" * 40, "zip"),
    ],
)
def test_load_says_why_not(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "x.bin"
    path.write_bytes(content)
    with pytest.raises(tracepack.InputError) as info:
        tracepack.load(path)
    text = str(info.value)
    assert text.startswith(str(path) + ":")
    assert says in text
    assert "\n" not in text


def test_zstd_dict_may_be_bytes(tmp_path: Path) -> None:
    doc = tracepack.load(MODEL_JSON)
    samples = [tracepack.dumps(doc, codec=c, compression="none") for c in ("json", "msgpack", "columnar")] * 8
    trained = zstandard.train_dictionary(4096, samples).as_bytes()
    blob = tracepack.dumps(doc, zstd_dict=trained)
    assert tracepack.loads(blob, zstd_dict=trained) == doc
    path = tmp_path / "d.tpk"
    tracepack.dump(doc, path, zstd_dict=trained)
    assert tracepack.load(path, zstd_dict=bytearray(trained)) == doc
    with pytest.raises(tracepack.ContainerError, match="dictionary"):
        tracepack.load(path)


def test_builder_refuses_dangling_references_at_build() -> None:
    b = tracepack.DocumentBuilder()
    b.add_node("x", "aten.add")
    b.add_debug_handle(7, stack=99, op="aten::add")
    with pytest.raises(tracepack.IntegrityError, match=r"^DocumentBuilder.build: \$\.debug_handles\.stack"):
        b.build()
    doc = b.build(validate=False)  # asked for: the unchecked document
    with pytest.raises(tracepack.IntegrityError):
        tracepack.loads(tracepack.dumps(doc))


def test_every_public_name_imports() -> None:
    for name in tracepack.__all__:
        assert getattr(tracepack, name) is not None, name
    from tracepack import LazyDocument, LazyNode  # loaded on first use

    assert LazyDocument.__name__ == "LazyDocument"
    assert LazyNode.__name__ == "LazyNode"
    with pytest.raises(AttributeError):
        _ = tracepack.NoSuchThing  # type: ignore[attr-defined]


def test_import_tracepack_does_not_import_torch_or_the_lazy_reader() -> None:
    code = "import sys, tracepack; print(sorted(m for m in ('torch', 'tracepack.lazy', 'tracepack.torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_torch_functions_without_torch_say_which_extra(tmp_path: Path) -> None:
    # A `torch` that cannot be imported: what a user without the extra sees.
    (tmp_path / "torch.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    code = (
        "import tracepack.torch\n"
        f"try:\n    tracepack.torch.load({str(PT2)!r})\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)\n"
    )
    env_path = f"{tmp_path}"
    out = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {env_path!r})\n" + code],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "pip install 'tracepack[torch]'" in out


_SEEDS = [MODEL_JSON.read_bytes(), PT2.read_bytes(), tracepack.dumps(tracepack.load(MODEL_JSON), compression="none")]


@given(st.binary(max_size=300))
def test_load_of_any_bytes_is_a_document_or_an_input_error(data: bytes) -> None:
    _document_or_one_line(data)


def _document_or_one_line(data: bytes) -> None:
    try:
        doc = tracepack.load(data)
    except tracepack.InputError as exc:
        message = str(exc)
    else:
        assert isinstance(doc, tracepack.Document)
        return
    assert "\n" not in message
    assert message.startswith("<bytes>")  # names the input (and the member, inside an archive)


@given(st.sampled_from(range(len(_SEEDS))), st.integers(0, 10**9), st.binary(min_size=1, max_size=8))
def test_load_of_damaged_files_says_why(seed: int, at: int, junk: bytes) -> None:
    # a real file of each kind, cut short or overwritten somewhere: refused with one line, or still read
    data = bytearray(_SEEDS[seed])
    at %= len(data)
    cut = bytes(data[:at])
    data[at : at + len(junk)] = junk
    for damaged in (cut, bytes(data)):
        _document_or_one_line(damaged)
