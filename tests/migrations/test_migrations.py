"""Migrations 1.0 <-> 1.1: upgrades are lossless, downgrades exact or refused with what would be lost."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from tracepack_generated import v1_0, v1_1

import tracepack
from tests.golden import make_golden as mg
from tests.migrations.strategies import RichDocument, documents_1_0, plain_documents_1_1, rich_documents
from tracepack import Document, DocumentBuilder, VersionError, migrations
from tracepack.cli import main
from tracepack.codecs import CODECS
from tracepack.container import read_header
from tracepack.migrations import v1_0_to_v1_1 as step
from tracepack.versions import CURRENT, RELEASED

CODEC_NAMES = sorted(CODECS)


def _view_1_0(raw: Any) -> Document:
    """A 1.0 document as today's code shows it (upgraded, which adds nothing)."""
    return Document(migrations.upgrade(raw, (1, 0), CURRENT), source_version=(1, 0))


def test_steps_are_registered_in_release_order() -> None:
    """One step per pair of consecutive releases, oldest first, ending at the current version."""
    assert list(migrations.STEPS) == list(itertools.pairwise(RELEASED))
    assert next(iter(migrations.STEPS)) == ((1, 0), (1, 1))
    assert RELEASED[-1] == CURRENT


@given(documents_1_0())
def test_1_0_documents_upgrade_and_downgrade_back_equal(raw: Any) -> None:
    assert isinstance(raw, v1_0.model.Document)
    v1_0.validate.validate(raw)
    up = migrations.upgrade(raw, (1, 0), (1, 1))
    assert isinstance(up, v1_1.model.Document)
    assert (up.header.version.major, up.header.version.minor) == (1, 1)
    v1_1.validate.validate(up)
    assert up.provenance is None
    assert up.frames.end_line == []
    down = migrations.downgrade(up, (1, 1), (1, 0))
    assert down == raw
    # Through bytes as well: the 1.0 encoding of the downgrade is the 1.0 encoding of the original.
    assert msgspec.msgpack.encode(down) == msgspec.msgpack.encode(raw)


@given(documents_1_0())
def test_upgrade_shares_columns_instead_of_copying(raw: Any) -> None:
    up = step.upgrade(raw)
    assert up.strings is raw.strings
    assert up.frames.line is raw.frames.line
    assert up.stacks.parent is raw.stacks.parent
    assert up.sources.lines is raw.sources.lines
    for a, b in zip(raw.graph.nodes, up.graph.nodes, strict=True):
        assert a.meta_keys is b.meta_keys
        assert a.meta_values is b.meta_values


@given(plain_documents_1_1())
def test_1_1_documents_without_1_1_information_downgrade_and_upgrade_back_equal(doc: Document) -> None:
    raw = migrations.downgrade(doc.raw, CURRENT, (1, 1))  # the same document when 1.1 is current
    assert step.losses(raw) == []
    down = migrations.downgrade(raw, (1, 1), (1, 0))
    v1_0.validate.validate(down)
    assert migrations.upgrade(down, (1, 0), (1, 1)) == raw
    back = _view_1_0(down)
    for a, b in zip(doc.nodes(), back.nodes(), strict=True):
        assert (a.meta, a.stack_trace, a.module_stack, a.frames) == (b.meta, b.stack_trace, b.module_stack, b.frames)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(rich_documents())
def test_1_1_information_downgrades_exactly_or_is_refused(rich: RichDocument) -> None:
    raw = rich.doc.raw
    expected = []
    if rich.end_lines:
        expected.append(f"{rich.end_lines} frame")
    if rich.direct:
        expected.append(f"{len(rich.direct)} node")
    try:
        down = migrations.downgrade(raw, (1, 1), (1, 0))
    except VersionError as exc:
        text = str(exc)
        assert expected, f"refused without a loss: {text}"
        assert text.startswith("schema 1.0: cannot write schema 1.0 without losing information: ")
        if rich.end_lines:
            assert f"{rich.end_lines} frame{' has' if rich.end_lines == 1 else 's have'} an end_line position" in text
        if rich.direct:
            n = len(rich.direct)
            assert f"{n} node{' has' if n == 1 else 's have'} from_node provenance outside its metadata" in text
        return
    assert not expected
    v1_0.validate.validate(down)
    # Lifted provenance is back in the metadata as the very text it was lifted from, in place.
    back = _view_1_0(down)
    for name, meta in rich.meta.items():
        assert list(back.node(name).meta.items()) == list(meta.items())
        assert back.node(name).from_node == rich.from_node[name]
        assert back.node(name).raw.from_node_meta_index == -1
    # And 1.0 readers read that file with nothing missing.
    data = msgspec.msgpack.encode(down)
    old = msgspec.msgpack.decode(data, type=v1_0.model.Document)
    assert old == down


def test_losses_are_counted_per_kind() -> None:
    b = DocumentBuilder()
    b.add_node("a", "t", stack_trace=[("/m.py", 1, "f", "x", 0, 1, "", 2), ("/m.py", 3, "g", "y", 0, 1, "", 4)])
    b.add_node("b", "t", from_node=[("n", "t", 1, "p", "a")])
    raw = b.build_raw()
    assert step.losses(raw) == [
        "2 frames have an end_line position (Python 3.11 co_positions), which schema 1.0 cannot hold",
        "1 node has from_node provenance outside its metadata, which schema 1.0 cannot hold (it has no "
        "provenance table, and adding a metadata entry would change the node)",
    ]
    raw.graph.nodes[1].from_node = []
    raw.frames.end_line = [-1, -1, -1]  # a column that says nothing loses nothing
    assert step.losses(raw) == ["1 provenance row is referenced by no node, which schema 1.0 cannot hold"]
    raw.provenance = None
    assert step.losses(raw) == []
    assert isinstance(step.downgrade(raw), v1_0.model.Document)


@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_dumps_writes_1_0_and_load_reads_it_back(codec: str) -> None:
    doc = mg.build_document((1, 0))
    content = mg.document_content(doc)
    data = tracepack.dumps(doc, codec=codec, version=(1, 0))
    assert read_header(data).schema_version == (1, 0)
    back = tracepack.loads(data)
    assert back.source_version == (1, 0)
    assert back.version == CURRENT
    assert mg.document_content(back) == content


def test_the_1_1_golden_document_is_refused_as_1_0_naming_its_losses() -> None:
    doc = tracepack.load(mg.GOLDEN / "1.1" / "msgpack.tpk")
    with pytest.raises(VersionError) as info:
        tracepack.dumps(doc, version=(1, 0))
    assert str(info.value) == (
        "schema 1.0: cannot write schema 1.0 without losing information: 2 frames have an end_line position "
        "(Python 3.11 co_positions), which schema 1.0 cannot hold; 1 node has from_node provenance outside its "
        "metadata, which schema 1.0 cannot hold (it has no provenance table, and adding a metadata entry would "
        "change the node); expected a document without 1.1-only information, or schema version 1.1"
    )
    assert info.value.exit_code == 2


def test_the_1_1_golden_document_without_its_1_1_only_parts_downgrades_exactly() -> None:
    doc = tracepack.load(mg.GOLDEN / "1.1" / "json.tpk")
    raw = doc.raw
    raw.frames.end_line = []
    raw.graph.nodes = [n for n in raw.graph.nodes if doc.strings[n.name] != "provenance_direct"]
    # The direct node's rows were interned last: drop them too, or 1.0 would lose them.
    t = raw.provenance
    assert t is not None
    keep = len(step._reachable(raw))
    assert step._reachable(raw) == set(range(keep))
    for name in ("name", "target", "graph_id", "pass_name", "action", "child_count"):
        setattr(t, name, getattr(t, name)[:keep])
    t.children = t.children[: sum(t.child_count)]
    Document(raw).validate()
    lifted = {doc.strings[n.name]: doc.node_meta(n) for n in raw.graph.nodes if n.from_node_meta_index >= 0}
    assert set(lifted) == {"provenance_first", "provenance_middle", "provenance_empty"}
    data = tracepack.dumps(Document(raw), codec="flatbuffers", version=(1, 0))
    back = tracepack.loads(data)
    for name, meta in lifted.items():
        assert back.node(name).meta == meta
        assert back.node(name).raw.from_node_meta_index == -1  # verbatim now, as 1.0 holds it
    assert "from_node" in back.strings


def test_downgrade_to_an_unknown_or_newer_version_is_refused() -> None:
    doc = mg.build_document((1, 0))
    newer, current = (CURRENT[0], CURRENT[1] + 6), f"{CURRENT[0]}\\.{CURRENT[1]}"
    with pytest.raises(VersionError, match=rf"cannot write schema {newer[0]}\.{newer[1]}: this build writes {current}"):
        tracepack.dumps(doc, version=newer)
    with pytest.raises(VersionError, match=rf"cannot write schema {CURRENT[0] + 1}\.0"):
        tracepack.dumps(doc, version=(CURRENT[0] + 1, 0))
    with pytest.raises(VersionError, match=r"no migration from schema \d+\.\d+ down to 0\.9"):
        tracepack.dumps(doc, version=(0, 9))


# -- the CLI ----------------------------------------------------------------------------------------


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_cli_convert_to_version_1_0_round_trip(codec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, old, new = tmp_path / "in.tpk", tmp_path / "old.tpk", tmp_path / "new.tpk"
    doc = mg.build_document((1, 0))
    tracepack.dump(doc, src, codec="msgpack")
    code, out, err = _run(["convert", str(src), str(old), "--codec", codec, "--to-version", "1.0"], capsys)
    assert (code, err) == (0, "")
    assert out.startswith(f"wrote {old}: ")
    assert read_header(old.read_bytes()).schema_version == (1, 0)
    code, _, err = _run(["convert", str(old), str(new), "--codec", codec], capsys)
    assert (code, err) == (0, "")
    assert read_header(new.read_bytes()).schema_version == CURRENT
    assert tracepack.load(new) == tracepack.load(src)
    assert mg.document_content(tracepack.load(old)) == mg.document_content(doc)
    code, out, _ = _run(["inspect", str(old), "--json"], capsys)
    assert json.loads(out)["schema_version"] == "1.0"


def test_cli_convert_to_version_1_0_refuses_losses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.tpk"
    code, _, err = _run(["convert", str(mg.GOLDEN / "1.1" / "json.tpk"), str(out), "--to-version", "1.0"], capsys)
    assert code == 2
    assert err.startswith("tracepack: ")
    assert "cannot write schema 1.0 without losing information: 2 frames have an end_line position" in err
    assert err.count("\n") == 1
    assert not out.exists()
    newer = f"{CURRENT[0]}.{CURRENT[1] + 6}"
    code, _, err = _run(["convert", str(mg.GOLDEN / "1.0" / "json.tpk"), str(out), "--to-version", newer], capsys)
    assert code == 2
    assert f"cannot write schema {newer}: this build writes {CURRENT[0]}.{CURRENT[1]}" in err
