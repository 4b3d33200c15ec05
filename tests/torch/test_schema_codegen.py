"""Converters generated from torch's schema.yaml: equal to torch's own reflective converter, one-line
errors with JSON paths, the checked-in module current, other releases generated on first use."""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.torch.conftest import CORPUS, PT2, TORCH_MARKS, TORCH_VERSION, is_program, model_json
from tests.torch.strategies import schema_values, spec_yaml, torch_specs
from tracepack.codegen.torch_schema import (
    installed_schema_yaml,
    load_specs,
    parse_schema_yaml,
    render_module,
    spec_json,
)
from tracepack.errors import LegacyFormatError

torch = pytest.importorskip("torch")
from torch._export.serde import schema as torch_schema  # noqa: E402
from torch._export.serde import serialize as torch_serialize  # noqa: E402

from tracepack.torch import serde  # noqa: E402

pytestmark = TORCH_MARKS
ROOT = Path(__file__).resolve().parent.parent.parent
CONV = serde.converters()
TYPES = CONV.types
CLASSES = sorted(name for name, (kind, _) in TYPES.items() if kind != "enum")


def torch_convert(name: str, value: Any) -> Any:
    return torch_serialize._dict_to_dataclass(getattr(torch_schema, name), value)


@pytest.mark.parametrize("name", PT2)
def test_corpus_programs_and_configs_equal_torchs(name: str) -> None:
    with zipfile.ZipFile(CORPUS / name) as z:
        for member in z.namelist():
            if is_program(member):
                cls = "ExportedProgram"
            elif member.endswith("_config.json"):
                cls = "PayloadConfig"
            else:
                continue
            value = json.loads(z.read(member))
            ours = CONV.convert(cls, value, source=member)
            theirs = torch_convert(cls, value)
            # (repr, not ==: torch 2.6-2.8's union classes compare every field, and reading an unset one raises)
            assert repr(ours) == repr(theirs)
            assert CONV.dump(cls, ours) == torch_serialize._dataclass_to_dict(theirs)
            assert json.dumps(CONV.dump(cls, ours)).encode() == z.read(member) or cls == "PayloadConfig"


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    st.sampled_from(CLASSES).flatmap(
        lambda n: st.tuples(st.just(n), schema_values(TYPES, n, float_strings=CONV.conventions.float_strings))
    )
)
def test_any_valid_value_converts_like_torch(case: tuple[str, Any]) -> None:
    name, value = case
    ours = CONV.convert(name, value, source="<value>")
    # repr, not ==: a NaN (written "NaN") is not equal to itself; repr shows every field and int vs float.
    assert repr(ours) == repr(torch_convert(name, value))
    # and back: the generated dumper writes what torch's _dataclass_to_dict does
    assert json.dumps(CONV.dump(name, ours)) == json.dumps(torch_dump(ours))


#: torch 2.8 spells infinities as strings but tests NaN with ``obj == math.nan`` (never true), so its
#: _dataclass_to_dict leaves NaN a float that its own torch.export.save then refuses; its loader
#: reads the string "NaN". The dumper writes the string there (what torch 2.8 means, and reads).
NAN_BUG = CONV.conventions.float_strings and torch_serialize._dataclass_to_dict(float("nan")) != "NaN"


def torch_dump(value: Any) -> Any:
    """torch's ``_dataclass_to_dict`` of ``value``, with torch 2.8's NaN spelled as it means it."""
    out = torch_serialize._dataclass_to_dict(value)
    if not NAN_BUG:
        return out

    def fix(v: Any) -> Any:
        if type(v) is float and v != v:
            return "NaN"
        if type(v) is dict:
            return {k: fix(x) for k, x in v.items()}
        if type(v) in (list, tuple):
            return type(v)(fix(x) for x in v)
        return v

    return fix(out)


def test_torch_reads_back_the_nan_the_dumper_writes() -> None:
    """Whatever spelling of NaN the dumper writes, the installed torch's loader reads it as NaN."""
    spelled = "NaN" if CONV.conventions.float_strings else float("nan")
    written = CONV.dump("Argument", CONV.convert("Argument", {"as_float": spelled}, source="<value>"))
    back = torch_serialize._dict_to_dataclass(torch_schema.Argument, json.loads(json.dumps(written)))
    assert math.isnan(back.as_float)


_JUNK = st.one_of(st.none(), st.integers(), st.text(max_size=3), st.lists(st.none(), max_size=2), st.just({"?": 1}))


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, Any, list[Any]]:
    """A valid value with one place replaced by something of another shape; the path to that place."""
    name = draw(st.sampled_from(CLASSES))
    value = draw(schema_values(TYPES, name, float_strings=CONV.conventions.float_strings))
    spots: list[tuple[Any, Any]] = []

    def walk(v: Any) -> None:
        if type(v) is dict:
            for k in v:
                spots.append((v, k))
                walk(v[k])
        elif type(v) is list:
            for i in range(len(v)):
                spots.append((v, i))
                walk(v[i])

    walk(value)
    if spots:
        parent, key = draw(st.sampled_from(spots))
        parent[key] = draw(_JUNK)
    return name, value, spots


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_a_damaged_value_converts_like_torch_or_names_a_json_path(case: tuple[str, Any, list[Any]]) -> None:
    name, value, _ = case
    error: LegacyFormatError | None = None
    try:
        ours = CONV.convert(name, value, source="<value>")
    except LegacyFormatError as exc:
        error = exc
    if error is not None:
        assert error.where is not None
        assert error.where.startswith("$")
        assert "\n" not in str(error)
        return
    assert repr(ours) == repr(torch_convert(name, value))


#: The schemas described in schema/torch/ (and generated in generated/): torch 2.12-2.15's 8.20.
CHECKED_IN = {spec.version: spec for _, spec in load_specs(ROOT / "schema")}


def test_checked_in_description_matches_the_installed_torch() -> None:
    """A torch whose schema is checked in (8.20: torch 2.12-2.15) uses the generated module, which
    describes its schema.yaml exactly; any other renders its converters from its own schema.yaml, with
    its own conventions (torch 2.6 writes and reads floats and None fields otherwise)."""
    from tracepack.codegen.torch_schema import Conventions

    path = installed_schema_yaml()
    assert path is not None
    installed = parse_schema_yaml(path.read_text(encoding="utf-8"))
    version = tuple(torch_schema.SCHEMA_VERSION)
    assert installed.version == version
    assert installed.checksum == CONV.module.CHECKSUM
    assert {t.name: (t.kind, t.fields) for t in installed.types} == CONV.module.TYPES
    if TORCH_VERSION is not None and (2, 12) <= TORCH_VERSION <= (2, 15):
        assert version in CHECKED_IN, "run `python -m tracepack.codegen torch-schema`"
    if version in CHECKED_IN and CHECKED_IN[version].checksum == installed.checksum:
        assert CHECKED_IN[version].types == installed.types
        assert CONV.module.__name__ == f"tracepack_generated.torch_schema.v{version[0]}_{version[1]}"
        assert CONV.conventions == Conventions()
    else:
        assert CONV.origin.endswith(".py") or CONV.origin.startswith("<")
        assert "tracepack_generated" not in CONV.module.__name__


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(torch_specs())
def test_schema_yaml_parses_back_to_the_schema(spec: Any) -> None:
    back = parse_schema_yaml(spec_yaml(spec))
    assert back.version == spec.version
    assert back.treespec_version == spec.treespec_version
    assert back.types == spec.types
    compile(render_module(back, source="<test>"), "<test>", "exec")
    assert "types" in json.loads(spec_json(back, torch_version="test"))


def test_other_releases_are_generated_on_first_use_and_cached(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRACEPACK_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(serde, "_generated_module", lambda version, checksum: None)
    monkeypatch.setattr(serde, "_BOUND", {})
    fresh = serde.converters()
    cached = list((tmp_path / "torch_schema").glob("*.py"))
    assert len(cached) == 1
    assert fresh.origin == str(cached[0])
    value = json.loads(model_json(CORPUS / "dynamic.pt2"))
    assert repr(fresh.convert("ExportedProgram", value, source="x")) == repr(torch_convert("ExportedProgram", value))
    stamp = cached[0].stat().st_mtime_ns
    monkeypatch.setattr(serde, "_BOUND", {})
    assert serde.converters().origin == str(cached[0])
    assert cached[0].stat().st_mtime_ns == stamp  # reused, not rewritten


def _release(path: Path) -> tuple[int, int]:
    major, minor = path.parent.name.split(".")
    return int(major), int(minor)


#: Every release's samples up to the installed torch (a newer release's files are refused:
#: tests/releases/test_upgrade.py).
RELEASES = sorted(
    p
    for p in (ROOT / "tests" / "data" / "torch" / "releases").glob("*/*.pt2")
    if TORCH_VERSION is None or _release(p) <= TORCH_VERSION
)


@pytest.mark.parametrize("path", RELEASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_old_releases_upgraded_programs_convert_like_torch(path: Path) -> None:
    """What the upgrade path hands the converter for every release's files (torch 2.3-2.5 wrote
    ``as_none: []``, which torch's converter keeps): the generated one gives torch's result, so
    old files load through it, not torch's reflective one."""
    from tracepack.errors import VersionError
    from tracepack.io.zip import open_archive
    from tracepack.torch import pt2, upgrade

    with open_archive(path.read_bytes(), source=str(path)) as archive:
        _, raw = pt2.read_program(archive)
    upgraded = upgrade._upgraded(json.loads(raw), where=path.name)
    node_fields = {f for f, _, _ in TYPES["Node"][1]}
    if _release(path) == (2, 1) and path.name == "cond.pt2" and "is_hop_single_tensor_return" not in node_fields:
        # torch 2.1's torch.cond returns its tensor itself; torch 2.6's schema (8.2) cannot say so (its
        # cond returns a tuple): refused in one line, as torch 2.6 cannot load torch 2.1's file either
        with pytest.raises(VersionError, match=r"is_hop_single_tensor_return.*a newer torch is needed"):
            upgrade._fitted(upgraded, where=path.name)
        return
    program = upgrade._fitted(upgraded, where=path.name)
    ours = CONV.convert("ExportedProgram", program, source=path.name)
    theirs = torch_convert("ExportedProgram", program)
    # (not ==: torch 2.8's union classes compare every field, and reading an unset one raises)
    assert repr(ours) == repr(theirs)
    assert CONV.dump("ExportedProgram", ours) == CONV.dump("ExportedProgram", theirs)


def test_as_none_accepts_what_torch_wrote_and_nothing_else() -> None:
    # (repr, not ==: torch 2.6-2.8's union classes compare every field, and reading an unset one raises)
    assert repr(CONV.convert("Argument", {"as_none": []}, source="x")) == repr(
        torch_convert("Argument", {"as_none": []})
    )
    assert repr(CONV.convert("Argument", {"as_none": True}, source="x")) == repr(
        torch_convert("Argument", {"as_none": True})
    )
    with pytest.raises(LegacyFormatError, match=r"\$\.as_none.*expected a boolean"):
        CONV.convert("Argument", {"as_none": [1]}, source="x")
    with pytest.raises(LegacyFormatError, match=r"\$\.as_bool.*expected a boolean"):
        CONV.convert("Argument", {"as_bool": []}, source="x")


def test_fields_the_installed_torch_lacks_are_dropped_when_empty_else_named() -> None:
    """torch 2.6/2.7 have fewer schema fields than the 8.x layout the upgrade chain writes."""
    from tracepack.errors import VersionError
    from tracepack.torch import upgrade

    program = json.loads(model_json(CORPUS / "cond.pt2"))
    node = program["graph_module"]["graph"]["nodes"][0]
    node["from_a_newer_torch"] = []
    assert "from_a_newer_torch" not in upgrade._fitted(program, where="m.json")["graph_module"]["graph"]["nodes"][0]
    node["from_a_newer_torch"] = 3
    with pytest.raises(VersionError, match=r"m\.json.*\$\.graph_module\.graph\.nodes\[0\]\.from_a_newer_torch"):
        upgrade._fitted(program, where="m.json")
