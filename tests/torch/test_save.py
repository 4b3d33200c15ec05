"""tracepack.torch.save: one call writes the packed .pt2 that torch.export.save + pack would."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from tests.torch.compare import describe
from tests.torch.conftest import CORPUS, DIRECT_SAVE, PT2, TORCH_MARKS, is_program
from tests.torch.conftest import members as all_members
from tracepack.errors import UsageError

torch = pytest.importorskip("torch")
import tracepack.torch as tt  # noqa: E402 - needs torch
from tracepack.torch import pt2  # noqa: E402

pytestmark = TORCH_MARKS
#: torch.export.save writes a random id into every archive.
RANDOM = ".data/serialization_id"


def members(data: bytes) -> dict[str, bytes]:
    return {n: d for n, d in all_members(data).items() if not n.endswith(RANDOM)}


@pytest.mark.parametrize("name", PT2)
def test_save_is_pack_of_torch_export_save(name: str, tmp_path: Path) -> None:
    ep = torch.export.load(CORPUS / name)
    out = tmp_path / "saved.pt2"
    tt.save(ep, out)
    reference = io.BytesIO()
    torch.export.save(ep, reference)
    # unpacked, it is what torch.export.save writes, member for member
    assert members(pt2.unpack_pt2(out.read_bytes(), source="saved")) == members(reference.getvalue())
    # tracepack.torch.load gives torch.export.load's program back, metadata included
    assert describe(tt.load(out)) == describe(torch.export.load(io.BytesIO(reference.getvalue())))
    # plain torch reads it, with what it needs to unflatten
    plain = torch.export.load(out)
    assert [n for n, _ in torch.export.unflatten(plain).named_modules()] == [
        n for n, _ in torch.export.unflatten(ep).named_modules()
    ]


def test_saved_model_json_is_small_and_keeps_torchs_keys(tmp_path: Path) -> None:
    ep = torch.export.load(CORPUS / "transformer_strict.pt2")
    out = tmp_path / "s.pt2"
    tt.save(ep, out)
    with zipfile.ZipFile(out) as z, zipfile.ZipFile(CORPUS / "transformer_strict.pt2") as orig:
        (info,) = [i for i in z.infolist() if is_program(i.filename)]
        (before,) = [i for i in orig.infolist() if is_program(i.filename)]
        assert info.compress_size <= 0.3 * before.file_size
        nodes = json.loads(z.read(info))["graph_module"]["graph"]["nodes"]
    keys = {k for n in nodes for k in n["metadata"]}
    assert "stack_trace" not in keys
    assert "from_node" not in keys
    assert {"nn_module_stack", "source_fn_stack", "torch_fn"} <= keys


def test_save_strip_and_stream(tmp_path: Path) -> None:
    ep = torch.export.load(CORPUS / "cnn.pt2")
    buf = io.BytesIO()
    tt.save(ep, buf, strip=True, extra_files={"note.txt": "hello"})
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
        (program,) = [n for n in z.namelist() if is_program(n)]
        assert all(n["metadata"] == {} for n in json.loads(z.read(program))["graph_module"]["graph"]["nodes"])
    # (torch fills a dict given with keys: `extra_files or {}` drops an empty one)
    extra, theirs = {"note.txt": ""}, {"note.txt": ""}
    back = tt.load(io.BytesIO(buf.getvalue()), extra_files=extra)
    torch.export.load(io.BytesIO(buf.getvalue()), extra_files=theirs)
    assert extra == theirs == {"note.txt": "hello"}
    assert describe(back)["nodes"] == describe(ep)["nodes"]


def test_save_refuses_what_is_not_a_program(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="ExportedProgram"):
        tt.save(object(), tmp_path / "x.pt2")
    assert not (tmp_path / "x.pt2").exists()


@DIRECT_SAVE.mark  # before, save is torch.export.save + pack: torch's serializer runs as it is
def test_save_skips_torchs_debug_formatting_only_while_debug_logging_is_off(caplog: pytest.LogCaptureFixture) -> None:
    """torch formats the whole graph for a debug log line whether or not it is logged; save runs
    torch's serialize_graph without that statement, and torch's own while debug logging is on."""
    import importlib
    import logging

    from tracepack.torch import saver

    serde = importlib.import_module("torch._export.serde.serialize")
    quiet = saver._without_debug_log(serde.GraphModuleSerializer.serialize_graph, dict(vars(serde)))
    assert quiet is not None
    assert "print_readable" not in quiet.__code__.co_names
    assert "print_readable" in serde.GraphModuleSerializer.serialize_graph.__code__.co_names
    ep = torch.export.load(CORPUS / "cond.pt2")
    quiet_bytes = io.BytesIO()
    tt.save(ep, quiet_bytes)
    with caplog.at_level(logging.DEBUG, logger=serde.log.name):
        logged = io.BytesIO()
        tt.save(ep, logged)
    assert any("[serialize_graph]" in r.getMessage() for r in caplog.records)
    assert members(quiet_bytes.getvalue()) == members(logged.getvalue())
