"""Every .pt2 a torch release wrote: read, lossless, and the same graph and names that release showed.

The references are each release's own files and what its ``torch.export.load`` returned
(``readback.json``), never tracepack's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracepack
from tests.releases.graphs import torch_graph, tracepack_graph
from tests.releases.samples import MANIFEST, files, path, readback
from tracepack.cli import main
from tracepack.io.zip import open_archive
from tracepack.torch import pt2
from tracepack.torch.archives import expand_archive, import_archive
from tracepack.torch.export import layouts
from tracepack.torch.export.model_json import export_model_json
from tracepack.torch.export.schema_versions import RELEASE_SCHEMA

EXPORTS = files("export")
TORCHSCRIPT = files("torchscript") + files("lite")


def program(version: str, name: str) -> tuple[bytes, bytes]:
    """The archive's bytes and its program's bytes as torch wrote them."""
    data = path(version, name).read_bytes()
    with open_archive(data, source=name) as archive:
        _, raw = pt2.read_program(archive)
    return data, raw


def test_samples_from_many_releases() -> None:
    versions = {v for v, _ in EXPORTS}
    assert len(versions) >= 3
    assert {"flat", "package"} >= {layout_of(v, n) for v, n in EXPORTS}


def layout_of(version: str, name: str) -> str | None:
    with open_archive(path(version, name).read_bytes(), source=name) as archive:
        return layouts.layout_of(archive)


@pytest.mark.parametrize(("version", "name"), EXPORTS)
def test_layout_is_the_releases(version: str, name: str) -> None:
    """torch 2.1-2.7 wrote the flat zip, 2.8+ the <top>/models/ one."""
    major, minor = (int(x) for x in version.split("."))
    assert layout_of(version, name) == ("flat" if (major, minor) < (2, 8) else "package")


@pytest.mark.parametrize(("version", "name"), EXPORTS)
@pytest.mark.parametrize("codec", ["json", "msgpack", "flatbuffers-rows", "flatbuffers"])
def test_import_is_lossless(version: str, name: str, codec: str) -> None:
    _, raw = program(version, name)
    doc = import_archive(name, path(version, name).read_bytes())
    assert export_model_json(tracepack.loads(tracepack.dumps(doc, codec=codec))) == raw
    metadata = {kv.key: kv.value for kv in doc.raw.header.metadata}
    assert metadata["torch.export/schema_version"] == readback(version)["schema_version"]
    assert readback(version)["schema_version"] == RELEASE_SCHEMA[version]


@pytest.mark.parametrize(("version", "name"), EXPORTS)
def test_expand_and_pack_are_byte_identical(version: str, name: str) -> None:
    data, _ = program(version, name)
    doc = import_archive(name, data)
    assert expand_archive(doc, path(version, name)) == data
    packed = pt2.pack_pt2(data, source=name)
    assert len(packed) < len(data)
    assert pt2.unpack_pt2(packed, source="packed") == data
    with open_archive(packed, source="packed") as archive:
        assert pt2.read_program(archive)[1] == program(version, name)[1]


@pytest.mark.parametrize(("version", "name"), EXPORTS)
def test_same_graph_and_names_as_the_release(version: str, name: str) -> None:
    """Node names and targets, getitem nodes included, as the writing release's torch.export.load showed."""
    entry = readback(version)["files"][name]
    _, raw = program(version, name)
    doc = import_archive(name, path(version, name).read_bytes())
    prog = json.loads(raw)
    # torch 2.1 and 2.2 show every getitem of a multi-output node; 2.3+ only the used ones.
    drop = tuple(int(x) for x in version.split(".")) >= (2, 3)
    assert tracepack_graph(doc, prog, drop_unused=drop) == torch_graph(entry["nodes"])
    holders = [n for n in doc.nodes() if "/" in n.name]
    for sub_name, nodes in entry.get("subgraphs", {}).items():
        holder = next(n.name.split("/")[0] for n in holders if n.name.split("/")[1] == sub_name)
        assert tracepack_graph(doc, prog, f"{holder}/{sub_name}/", drop_unused=drop) == torch_graph(nodes)


@pytest.mark.parametrize(("version", "name"), EXPORTS)
def test_stack_traces_and_module_stacks_are_the_releases(version: str, name: str) -> None:
    """The stack trace tracepack gives each node is the string the release's nodes carried."""
    entry = readback(version)["files"][name]
    doc = import_archive(name, path(version, name).read_bytes())
    shown = {n["name"]: n for n in entry["nodes"] if n["op"] == "call_function"}
    checked = 0
    for node in doc.nodes():
        if node.name in shown and shown[node.name]["stack_trace"] is not None:
            assert node.meta.get("stack_trace") == shown[node.name]["stack_trace"]
            checked += 1
    assert checked > 0


@pytest.mark.parametrize(("version", "name"), EXPORTS[:: max(1, len(EXPORTS) // 8)])
def test_cli_convert_inspect_trace_expand(
    version: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = str(path(version, name))
    tpk, back = tmp_path / "m.tpk", tmp_path / "model.json"
    assert main(["convert", src, str(tpk)]) == 0
    assert main(["inspect", str(tpk)]) == 0
    node = next(n["name"] for n in readback(version)["files"][name]["nodes"] if n["op"] == "call_function")
    assert main(["trace", str(tpk), node]) == 0
    assert main(["expand", str(tpk), str(back)]) == 0
    capsys.readouterr()
    assert back.read_bytes() == program(version, name)[1]


@pytest.mark.parametrize(("version", "name"), TORCHSCRIPT)
def test_torchscript_archives_expand_byte_identical(version: str, name: str) -> None:
    data = path(version, name).read_bytes()
    doc = tracepack.loads(tracepack.dumps(import_archive(name, data)))
    assert expand_archive(doc, path(version, name)) == data


def test_manifest_schema_versions_match_the_table() -> None:
    for version, entry in MANIFEST["releases"].items():
        assert RELEASE_SCHEMA[version] == entry["schema_version"]
