"""tracepack.torch.load runs nothing from the file: pickles that need more than torch's data-only
unpickler, torchbind/opaque constants and expression strings that are not arithmetic are refused,
naming the member. torch.export.load runs the same payloads (shown side by side)."""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.torch.conftest import COMMITTED_CORPUS, CORPUS, PACKAGE_LAYOUT, PAYLOAD_CONFIGS, TORCH_MARKS, is_program
from tests.torch.strategies import sympy_expressions
from tracepack.errors import InputError, LegacyFormatError, UnsafePickleError, VersionError
from tracepack.io.zip import write_archive

torch = pytest.importorskip("torch")
import tracepack.torch as tt  # noqa: E402 - needs torch
from tracepack.torch.loader import safe_sympy_text  # noqa: E402

pytestmark = TORCH_MARKS


class _Touch:
    """Unpickling this calls os.system (what a hostile file would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def rewrite(
    src: Path, dst: Path, change: Callable[[str, bytes], bytes | None], add: dict[str, bytes] | None = None
) -> Path:
    """``src`` with members changed (``change`` returns new bytes, or None to keep them) and added."""
    with zipfile.ZipFile(src) as z:
        members = [(i.filename, z.read(i.filename)) for i in z.infolist()]
    out: list[tuple[Any, bytes]] = []
    for name, data in members:
        new = change(name, data)
        out.append((name, data if new is None else new))
    top = members[0][0].split("/", 1)[0] + "/" if "/" in members[0][0] else ""  # a flat archive has no top folder
    out += [(f"{top}{rel}", data) for rel, data in (add or {}).items()]
    dst.write_bytes(write_archive(out))
    return dst


def _json_member(suffix: str, edit: Callable[[Any], None]) -> Callable[[str, bytes], bytes | None]:
    def change(name: str, data: bytes) -> bytes | None:
        if not name.endswith(suffix):
            return None
        value = json.loads(data)
        edit(value)
        return json.dumps(value).encode()

    return change


def pickle_member(path: Path, kind: str) -> str | None:
    """The member holding all the ``kind`` (``weights``, ``constants``) as one ``torch.save`` pickle:
    torch 2.6/2.7's flat ``serialized_state_dict.pt``/``serialized_constants.pt``, torch 2.8's
    ``<top>/data/<kind>/model.pt``; None in torch 2.10+'s layout (a record per tensor, and a config)."""
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    flat = {"weights": "serialized_state_dict.pt", "constants": "serialized_constants.pt"}[kind]
    if flat in names:
        return flat
    return next((n for n in names if n.endswith(f"/data/{kind}/model.pt")), None)


def program_member(path: Path) -> str:
    with zipfile.ZipFile(path) as z:
        (member,) = [n for n in z.namelist() if is_program(n)]
    return member


def test_pickled_weight_with_os_system_does_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payload = pickle.dumps(_Touch(marker))
    member = pickle_member(CORPUS / "cnn.pt2", "weights")

    def change(name: str, data: bytes) -> bytes | None:
        if member is not None:  # torch before 2.10: every weight in one pickle
            return payload if name == member else None
        if name.endswith("weights/weight_0"):
            return payload
        return _json_member(
            "model_weights_config.json", lambda c: c["config"]["stem.0.weight"].update(use_pickle=True)
        )(name, data)

    bad = rewrite(CORPUS / "cnn.pt2", tmp_path / "evil.pt2", change)
    where = re.escape(member) if member else r"weights/weight_0.*weight 'stem.0.weight' stored as a pickle"
    with pytest.raises(UnsafePickleError, match=where):
        tt.load(bad)
    assert not marker.exists()
    # torch.export.load runs it (the reason tracepack's loader does not hand pickles to torch.load blindly).
    with pytest.raises(Exception):  # noqa: B017, PT011 - whatever torch makes of the int os.system returns
        torch.export.load(bad)
    assert marker.exists()


@PAYLOAD_CONFIGS.mark  # before, every weight is a pickle: read by torch's weights_only unpickler (any load)
def test_trust_pickles_loads_a_pickled_tensor(tmp_path: Path) -> None:
    weight = torch.export.load(CORPUS / "cnn.pt2").state_dict["stem.0.weight"]
    buf = io.BytesIO()
    torch.save(torch.nn.Parameter(weight.detach().clone()), buf)

    def change(name: str, data: bytes) -> bytes | None:
        if name.endswith("weights/weight_0"):
            return buf.getvalue()
        return _json_member(
            "model_weights_config.json", lambda c: c["config"]["stem.0.weight"].update(use_pickle=True)
        )(name, data)

    path = rewrite(CORPUS / "cnn.pt2", tmp_path / "pickled.pt2", change)
    # A plain tensor pickle passes torch's weights_only unpickler: no flag needed.
    assert torch.equal(tt.load(path).state_dict["stem.0.weight"], weight)
    assert torch.equal(tt.load(path, trust_pickles=True).state_dict["stem.0.weight"], weight)


@PAYLOAD_CONFIGS.mark  # before, constants are one pickle: test_a_constants_pickle_that_runs_code_is_refused
@pytest.mark.parametrize("prefix", ["custom_obj_", "opaque_obj_"])
def test_custom_and_opaque_constants_are_refused_without_trust(tmp_path: Path, prefix: str) -> None:
    marker = tmp_path / "ran"
    edit = _json_member(
        "model_constants_config.json",
        lambda c: c["config"].update(
            {"obj": {"path_name": f"{prefix}0", "is_param": False, "use_pickle": True, "tensor_meta": None}}
        ),
    )
    bad = rewrite(
        CORPUS / "cnn.pt2", tmp_path / "evil.pt2", edit, add={f"data/constants/{prefix}0": pickle.dumps(_Touch(marker))}
    )
    with pytest.raises(UnsafePickleError, match=rf"data/constants/{prefix}0: constant 'obj'"):
        tt.load(bad)
    assert not marker.exists()


@pytest.mark.skipif(
    PAYLOAD_CONFIGS.present,
    reason="torch 2.10 and newer keep each constant in a record of its own, with a config: "
    "test_custom_and_opaque_constants_are_refused_without_trust",
)
def test_a_constants_pickle_that_runs_code_is_refused(tmp_path: Path) -> None:
    """torch 2.6-2.8 keep the constants (torchbind objects among them) in one pickle, which their
    torch.export.load unpickles in full."""
    marker = tmp_path / "ran"
    member = pickle_member(CORPUS / "cnn.pt2", "constants")
    assert member is not None
    bad = rewrite(
        CORPUS / "cnn.pt2",
        tmp_path / "evil.pt2",
        lambda name, data: pickle.dumps(_Touch(marker)) if name == member else None,
    )
    with pytest.raises(UnsafePickleError, match=re.escape(member)):
        tt.load(bad)
    assert not marker.exists()
    with pytest.raises(Exception):  # noqa: B017, PT011 - whatever torch makes of the int os.system returns
        torch.export.load(bad)
    assert marker.exists()


def test_example_inputs_that_need_a_full_unpickler_are_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payload = pickle.dumps(_Touch(marker))
    # torch 2.8+'s sample_inputs/<model>.pt, torch 2.6/2.7's serialized_example_inputs.pt
    inputs = re.compile(r"(.*/data/sample_inputs/model|serialized_example_inputs)\.pt")
    bad = rewrite(
        CORPUS / "cond.pt2",
        tmp_path / "evil.pt2",
        lambda name, data: payload if inputs.fullmatch(name) else None,
    )
    with pytest.raises(
        UnsafePickleError, match=r"(sample_inputs/model|serialized_example_inputs)\.pt: .*example inputs"
    ):
        tt.load(bad)
    assert not marker.exists()


def test_expression_strings_are_not_evaluated(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = f"__import__('os').system('touch {marker}')"

    def change(name: str, data: bytes) -> bytes | None:
        if not is_program(name):
            return None
        text = data.decode()
        first = text.index('"expr_str": "') + len('"expr_str": "')
        end = text.index('"', first)
        return (text[:first] + evil.replace('"', '\\"') + text[end:]).encode()

    bad = rewrite(CORPUS / "dynamic.pt2", tmp_path / "evil.pt2", change)
    with pytest.raises(LegacyFormatError, match="refused symbolic expression"):
        tt.load(bad)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("Symbol('s27', positive=True, integer=True)", True),
        ("Mul(Integer(2), Pow(Symbol('s27', positive=True, integer=True), Integer(2)))", True),
        ("FloorDiv(s0, 2) + Max(1, s1) <= 7", True),
        ("Float('1.5', precision=53)", True),
        ("__import__('os').system('true')", False),
        ("s0.__class__", False),
        ("eval('1')", False),
        ("lambdify(s0, s0)", False),
        ("Symbol('a b')", False),
        ("[s0][0]", False),
        ("s0 if s1 else s2", False),
        ("x = 1", False),
    ],
)
def test_safe_sympy_text(text: str, ok: bool) -> None:
    assert safe_sympy_text(text, {"FloorDiv"}.__contains__) is ok


def test_schema_mismatch_names_the_json_path(tmp_path: Path) -> None:
    def edit(p: Any) -> None:
        p["graph_module"]["graph"]["nodes"][3]["inputs"][0] = 5

    bad = rewrite(CORPUS / "cnn.pt2", tmp_path / "bad.pt2", _json_member(program_member(CORPUS / "cnn.pt2"), edit))
    with pytest.raises(LegacyFormatError) as err:
        tt.load(bad)
    message = str(err.value)
    assert f"{program_member(CORPUS / 'cnn.pt2')}: $.graph_module.graph.nodes[3].inputs[0]: " in message
    assert "expected a NamedArgument object" in message
    assert "\n" not in message


def test_missing_field_names_the_json_path(tmp_path: Path) -> None:
    def edit(p: Any) -> None:
        del p["graph_module"]["graph"]["nodes"][0]["target"]

    bad = rewrite(CORPUS / "cnn.pt2", tmp_path / "bad.pt2", _json_member(program_member(CORPUS / "cnn.pt2"), edit))
    with pytest.raises(LegacyFormatError, match=r"\$\.graph_module\.graph\.nodes\[0\]\.target.*missing"):
        tt.load(bad)


def test_newer_schema_major_is_one_line_naming_supported_versions(tmp_path: Path) -> None:
    bad = rewrite(
        CORPUS / "cnn.pt2",
        tmp_path / "new.pt2",
        _json_member(program_member(CORPUS / "cnn.pt2"), lambda p: p["schema_version"].update(major=99)),
    )
    with pytest.raises(VersionError) as err:
        tt.load(bad)
    message = str(err.value)
    assert "schema 99." in message
    assert "2.6 through 2.15" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("data", "match"),
    [(b"not a zip", "not a readable zip"), (b"", "not a readable zip")],
)
def test_not_an_archive(tmp_path: Path, data: bytes, match: str) -> None:
    path = tmp_path / "x.pt2"
    path.write_bytes(data)
    with pytest.raises(InputError, match=match):
        tt.load(path)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot open: No such file"):
        tt.load(tmp_path / "missing.pt2")
    with pytest.raises(InputError, match="not a regular file"):
        tt.load(tmp_path)


def test_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    import signal

    fifo = tmp_path / "model.pt2"
    os.mkfifo(fifo)

    def hung(signum: int, frame: object) -> None:
        raise AssertionError("tracepack.torch.load waited on a FIFO")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        with pytest.raises(InputError, match="is a FIFO, not a regular file"):
            tt.load(fifo)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@PACKAGE_LAYOUT.mark  # a flat archive (torch 2.6/2.7's own) always takes the upgrade path: nothing to decide
def test_current_archive_is_not_read_whole_to_decide_on_an_upgrade(tmp_path: Path) -> None:
    import tracemalloc

    from tracepack.torch import upgrade

    big = tmp_path / "big.pt2"
    with zipfile.ZipFile(CORPUS / "cnn.pt2") as src, zipfile.ZipFile(big, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        top = src.namelist()[0].split("/")[0]
        dst.writestr(f"{top}/extra/padding", bytes(32 << 20))  # a 32 MiB member the check must not read
    tracemalloc.start()
    try:
        assert upgrade.load_if_old(big) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak} bytes to decide whether a current archive needs the upgrade"


def test_weight_record_of_the_wrong_size(tmp_path: Path) -> None:
    member = pickle_member(CORPUS / "cnn.pt2", "weights") or "weights/weight_0"  # one pickle before torch 2.10
    bad = rewrite(CORPUS / "cnn.pt2", tmp_path / "bad.pt2", lambda n, d: d[:-4] if n.endswith(member) else None)
    with pytest.raises(InputError, match=re.escape(member)) as info:
        tt.load(bad)
    assert "\n" not in str(info.value)
    if member == "weights/weight_0":
        assert isinstance(info.value, LegacyFormatError)


@settings(deadline=None)
@given(sympy_expressions(), st.sampled_from(["str", "srepr"]))
def test_what_sympy_prints_passes_the_check_and_parses_the_same(expr: Any, form: str) -> None:
    import sympy

    text = str(expr) if form == "str" else sympy.srepr(expr)
    assert safe_sympy_text(text, lambda name: False)
    names = {str(s): s for s in expr.free_symbols}
    assert sympy.sympify(text, locals=names) == expr


@given(
    st.sampled_from(["Symbol('s0') + s1", "Max(s0, 2) * Integer(3)", "s0 <= 7"]),
    st.sampled_from(
        [".__class__", "[0]", " if s0 else s1", "; import os", "__import__('os')", " + eval('1')", " + open"]
    ),
)
def test_a_forbidden_piece_anywhere_is_refused(text: str, piece: str) -> None:
    assert not safe_sympy_text(text + piece, lambda name: False)


def test_old_archives_expression_strings_are_not_evaluated(tmp_path: Path) -> None:
    """A torch 2.3 (flat layout) archive goes through the upgrade path: the same check applies."""
    marker = tmp_path / "ran"
    src = COMMITTED_CORPUS.parent / "releases" / "2.3" / "dynamic.pt2"
    evil = f"__import__('os').system('touch {marker}')"

    def change(name: str, data: bytes) -> bytes | None:
        if name != "serialized_exported_program.json":
            return None
        return data.decode().replace('"expr_str": "s0"', '"expr_str": "' + evil.replace('"', '\\"') + '"', 1).encode()

    with zipfile.ZipFile(src) as z:
        members = [(i.filename, z.read(i.filename)) for i in z.infolist()]
    bad = tmp_path / "evil.pt2"
    with zipfile.ZipFile(bad, "w") as out:
        for name, data in members:
            new = change(name, data)
            out.writestr(name, data if new is None else new)
    with pytest.raises(InputError):
        tt.load(bad)
    assert not marker.exists()


REPRO = Path(__file__).parents[1] / "hostile" / "repro"


@pytest.mark.parametrize("path", sorted(REPRO.glob("archive--*")), ids=lambda p: p.name)
def test_archive_reproducers_are_one_line_errors_for_load(path: Path) -> None:
    # The hostile suite's archive reproducers (tests/hostile/repro), through the loader's own zip reading.
    with pytest.raises(InputError) as info:
        tt.load(path)
    assert path.name in str(info.value)
    assert "\n" not in str(info.value)
