"""tracepack.torch.load against torch.export.load on the whole corpus, plain and packed archives."""

from __future__ import annotations

import importlib
import io
from pathlib import Path
from typing import Any

import pytest

from tests.torch.compare import describe
from tests.torch.conftest import CORPUS, PT2, TORCH_MARKS

torch = pytest.importorskip("torch")
import tracepack.torch as tt  # noqa: E402 - needs torch
from tracepack import errors as tt_errors  # noqa: E402
from tracepack.torch import deserializer, pt2  # noqa: E402

pytestmark = TORCH_MARKS


@pytest.fixture(scope="module")
def reference() -> dict[str, dict[str, Any]]:
    """torch.export.load of every corpus .pt2, described once."""
    return {name: describe(torch.export.load(CORPUS / name)) for name in PT2}


@pytest.fixture(params=["fast", "plain"])
def road(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both roads through torch's deserializer: the shorter ones tracepack takes where the installed
    torch allows them, and torch's code as it is (what a torch without them gets)."""
    monkeypatch.setattr(deserializer, "FAST", request.param == "fast")
    return str(request.param)


@pytest.mark.parametrize("name", PT2)
def test_load_equals_torch_export_load(name: str, reference: dict[str, dict[str, Any]], road: str) -> None:
    ours = describe(tt.load(CORPUS / name))
    theirs = reference[name]
    for key in theirs:
        assert ours[key] == theirs[key], key
    assert set(ours) == set(theirs)


def test_the_shorter_roads_are_taken_on_this_torch() -> None:
    serde = importlib.import_module("torch._export.serde.serialize")
    assert deserializer.patched(serde, fast=True).features == (
        "sympy",
        "fake_tensors",
        "replay",
        "nodes",
        "unbacked",
        "lazy_root",
    )
    assert deserializer.patched(serde, fast=False).features == ("sympy",)


def test_a_changed_torch_gets_its_own_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where torch's deserialize_tensor_meta is not the one the fast road was written against, or the
    trial tensors differ, torch's own method runs."""
    serde = importlib.import_module("torch._export.serde.serialize")
    monkeypatch.setattr(deserializer, "_TENSOR_META_NAMES", frozenset(["fake_tensor_mode", "empty_strided"]))
    assert deserializer._fake_tensor_maker(serde) is None
    monkeypatch.undo()
    monkeypatch.setattr(deserializer, "_describe_fake", id)  # every trial differs
    assert deserializer._fake_tensor_maker(serde) is None
    monkeypatch.undo()
    assert deserializer._fake_tensor_maker(serde) is not None


def test_the_lazy_root_is_never_handed_out(reference: dict[str, dict[str, Any]]) -> None:
    """Only the deserializer's throw-away graph module is lazy: the program's and the nested
    graphs' are plain GraphModules with their code compiled, and torch's module global is reset."""
    serde = importlib.import_module("torch._export.serde.serialize")
    ep = tt.load(CORPUS / "cond.pt2")
    lazy = importlib.import_module("torch.fx._lazy_graph_module")._LazyGraphModule
    modules = [m for m in ep.graph_module.modules() if isinstance(m, torch.fx.GraphModule)]
    assert len(modules) == 3  # the program and torch.cond's two branches
    assert not any(isinstance(m, lazy) for m in modules)
    assert all("_code" in vars(m) for m in modules)
    assert serde._CURRENT_DESERIALIZER is None


@pytest.mark.parametrize("name", PT2)
def test_load_of_packed_equals_torch_export_load_of_plain(
    name: str, reference: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    packed = tmp_path / name
    packed.write_bytes(pt2.pack_pt2((CORPUS / name).read_bytes(), source=name))
    ours = describe(tt.load(packed))
    for key, value in reference[name].items():
        assert ours[key] == value, key


def test_load_accepts_a_stream_and_extra_files(reference: dict[str, dict[str, Any]]) -> None:
    extra: dict[str, Any] = {}
    theirs_extra: dict[str, Any] = {}
    torch.export.load(CORPUS / "cond.pt2", extra_files=theirs_extra)
    ep = tt.load(io.BytesIO((CORPUS / "cond.pt2").read_bytes()), extra_files=extra)
    assert describe(ep)["code"] == reference["cond.pt2"]["code"]
    assert extra == theirs_extra


def test_loaded_program_runs_like_torchs() -> None:
    x = torch.randn(4, 8)
    ours, theirs = tt.load(CORPUS / "cond.pt2"), torch.export.load(CORPUS / "cond.pt2")
    assert torch.equal(ours.module()(x), theirs.module()(x))
    tokens = torch.randint(0, 32, (2, 8))
    ours, theirs = tt.load(CORPUS / "transformer.pt2"), torch.export.load(CORPUS / "transformer.pt2")
    assert torch.equal(ours.module()(tokens), theirs.module()(tokens))


def test_dynamic_shapes_parse_each_expression_once() -> None:
    from tracepack.torch import loader

    seen: list[Any] = []
    original = loader._CachedSympy.sympify

    def spy(self: Any, text: Any, locals: Any = None, **kw: Any) -> Any:
        seen.append(self)
        return original(self, text, locals, **kw)

    loader._CachedSympy.sympify = spy  # type: ignore[method-assign]
    try:
        tt.load(CORPUS / "dynamic.pt2")
    finally:
        loader._CachedSympy.sympify = original  # type: ignore[method-assign]
    cache = seen[0]
    assert cache.parsed == len(cache._cache)
    assert cache.reused > cache.parsed  # the same strings come back many times


def test_from_document_without_json_text(reference: dict[str, dict[str, Any]]) -> None:
    ep = torch.export.load(CORPUS / "dynamic.pt2")
    back = tt.from_document(tt.to_document(ep), like=ep)
    ours = describe(back)
    for key in ("code", "nodes", "signature", "range_constraints", "shape_env", "state_dict"):
        assert ours[key] == reference["dynamic.pt2"][key], key


@pytest.fixture(scope="module")
def two_programs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Archives of two programs each (torch's own package_pt2): one with a program named
    ``model``, one without."""
    package = importlib.import_module("torch.export.pt2_archive._package")
    cond, helpers = torch.export.load(CORPUS / "cond.pt2"), torch.export.load(CORPUS / "helpers.pt2")
    out = tmp_path_factory.mktemp("two")
    with_model, without = out / "with_model.pt2", out / "without.pt2"
    package.package_pt2(with_model, exported_programs={"model": cond, "second": helpers})
    package.package_pt2(without, exported_programs={"first": cond, "second": helpers})
    return with_model, without


def test_an_archive_of_several_programs_loads_model_as_torch_does(
    two_programs: tuple[Path, Path], reference: dict[str, dict[str, Any]]
) -> None:
    with_model, _ = two_programs
    theirs = describe(torch.export.load(with_model))
    assert describe(tt.load(with_model)) == theirs
    assert theirs["code"] == reference["cond.pt2"]["code"]
    package = importlib.import_module("torch.export.pt2_archive._package")
    second = package.load_pt2(with_model).exported_programs["second"]  # torch's reader of every program
    assert describe(tt.load(with_model, model="second")) == describe(second)


def test_an_archive_without_model_is_refused_naming_what_it_holds(two_programs: tuple[Path, Path]) -> None:
    _, without = two_programs
    with pytest.raises(Exception):  # noqa: B017, PT011 - torch's own error is a bare KeyError/RuntimeError
        torch.export.load(without)
    with pytest.raises(
        tt_errors.LegacyFormatError,
        match=r"without\.pt2:without/models/model\.json: no program named 'model' \(it holds 'first', 'second': pass model=",
    ):
        tt.load(without)
    assert describe(tt.load(without, model="first"))["code"] == describe(torch.export.load(CORPUS / "cond.pt2"))["code"]


RELEASES = Path(__file__).resolve().parent.parent / "data" / "torch" / "releases"
#: The installed torch's own release samples (written by that release): what its torch.export.load
#: reads on every supported torch, so load and save are compared with it there too (the corpus above
#: is torch 2.13's, which torch before 2.10 cannot read; `make test-torch TORCH=2.8.0`).
OWN = sorted((RELEASES / ".".join(torch.__version__.split(".")[:2])).glob("*.pt2"))


#: Every release's archives from 2.6 on (torch 2.13 reads 2.6 and 2.7's flat archives through its legacy path;
#: 2.1-2.5's no torch of schema 8 reads).
PACKAGED = sorted(p for p in RELEASES.glob("*/*.pt2") if tuple(int(x) for x in p.parent.name.split(".")) >= (2, 6))


@pytest.mark.parametrize("path", PACKAGED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_release_file_torch_reads_loads_as_torch_loads_it(path: Path, road: str) -> None:
    """Graph code, node metadata, fake tensors (aliasing and symbolic nodes too), signature, range
    constraints, shape environment, weights and outputs equal to torch.export.load's, on every
    release's file the installed torch reads; one it cannot read tracepack still loads (upgraded)."""
    try:
        theirs_ep = torch.export.load(path)
    except Exception:  # a file this torch cannot read: nothing to compare with
        assert describe(tt.load(path))["code"]
        return
    theirs = describe(theirs_ep)
    ours_ep = tt.load(path)
    assert describe(ours_ep) == theirs
    inputs = theirs_ep.example_inputs
    if inputs is not None:
        args, kwargs = inputs
        torch.manual_seed(0)
        expected = theirs_ep.module()(*args, **kwargs)
        torch.manual_seed(0)
        got = ours_ep.module()(*args, **kwargs)
        assert str(expected) == str(got)


@pytest.mark.parametrize("path", OWN, ids=lambda p: p.name)
def test_this_torchs_own_files_load_and_save_as_torch_does(path: Path, road: str) -> None:
    theirs = describe(torch.export.load(path))
    assert describe(tt.load(path)) == theirs
    saved = io.BytesIO()
    tt.save(torch.export.load(path), saved)
    assert describe(tt.load(io.BytesIO(saved.getvalue()))) == theirs
    assert describe(torch.export.load(io.BytesIO(saved.getvalue())))["code"] == theirs["code"]
