"""The fuzzing tools do what the campaign relies on: the careful attacker's header fix-up gets a mutant
past every checksum, a member mutated inside a zip is written back readable, the typed reader of the
input is deterministic and stays in bounds, and replay reports what breaks a harness's contract."""

from __future__ import annotations

import io
import sys
import types
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tracepack
from fuzz.common import Provider, contract, fix_tpk, mutate_tpk, rezip, sample_doc, zip_members
from fuzz.replay import replay
from tracepack.container import unpack
from tracepack.errors import ContainerError

ROOT = Path(__file__).resolve().parents[2]


@given(st.integers(48, 2_000), st.binary(min_size=1, max_size=64))
def test_fix_tpk_gets_any_payload_past_the_checksums(cut: int, tail: bytes) -> None:
    good = tracepack.dumps(sample_doc(), codec="msgpack", compression="none")
    b = bytearray(good[:cut] + tail)
    with pytest.raises(ContainerError):  # as it is, the lengths or the payload CRC give the mutant away
        unpack(bytes(b))
    fix_tpk(b)
    _, payload = unpack(bytes(b))  # past the header CRC, the lengths and the payload CRC
    assert bytes(payload) == bytes(b[48:])
    assert contract(lambda: tracepack.loads(bytes(b))) is None or bytes(b) == good  # the decoder's to refuse


@given(st.sampled_from([True, False]), st.integers(0, 64), st.integers(0, 2**32 - 1))
def test_the_tpk_mutator_never_outgrows_max_size(blocks: bool, spare: int, seed: int) -> None:
    """libFuzzer refuses a custom mutant longer than its ``max_size`` and ends the run (a lazy_columns
    campaign lost 20 processes so): where fixing the header grows the mutant (a fresh block table after
    a payload the mutation lengthened), the unfixed mutant goes back instead."""
    good = tracepack.dumps(sample_doc(), codec="flatbuffers-columns", compression="none", block_checksums=blocks)
    max_size = len(good) + spare

    # the longest mutant libFuzzer may hand back, with the block-checksum flag set: where the file had no
    # block table, the fix appends one (the case that outgrew max_size)
    def longest(data: bytes, size: int) -> bytes:
        return data[:18] + bytes([data[18] | 1]) + data[19:] + b"\0" * (size - len(data))

    fake = types.ModuleType("atheris")
    fake.Mutate = longest  # type: ignore[attr-defined]
    saved = sys.modules.get("atheris")
    sys.modules["atheris"] = fake
    try:
        padded = longest(good, max_size)
        assert mutate_tpk(good, max_size, seed, 0.0) == padded  # never fixed
        mutant = mutate_tpk(good, max_size, seed, 1.0)  # always fixed where the fix fits
        assert len(mutant) <= max_size
        fixed = bytearray(padded)
        fix_tpk(fixed)
        assert mutant == (bytes(fixed) if len(fixed) <= max_size else padded)
        assert blocks or spare >= len(fixed) - len(good) or mutant == padded  # the fallback was taken
    finally:
        if saved is None:
            del sys.modules["atheris"]
        else:
            sys.modules["atheris"] = saved


def test_rezip_keeps_names_order_compression_and_content() -> None:
    data = (ROOT / "tests/data/torch/releases/2.13/dynamic.pt2").read_bytes()
    members = list(zip_members(data))
    members[0] = (members[0][0], b"changed")
    again = rezip(members)
    with zipfile.ZipFile(io.BytesIO(again)) as z:
        assert z.testzip() is None  # every CRC right
        assert [i.filename for i in z.infolist()] == [i.filename for i, _ in members]
        assert [z.read(i) for i in z.infolist()] == [c for _, c in members]
        assert [i.compress_type for i in z.infolist()] == [i.compress_type for i, _ in members]


@given(st.binary(max_size=64), st.integers(-(2**70), 2**70), st.integers(0, 2**70))
def test_provider_is_deterministic_and_in_bounds(data: bytes, lo: int, span: int) -> None:
    a, b = Provider(data), Provider(data)
    for _ in range(4):
        x = a.int(lo, lo + span)
        assert x == b.int(lo, lo + span)
        assert lo <= x <= lo + span
    assert a.bytes(8) == b.bytes(8)


def test_contract_passes_refusals_and_lets_everything_else_through() -> None:
    assert contract(lambda: tracepack.loads(b"nope")) is None
    with pytest.raises(ZeroDivisionError):
        contract(lambda: 1 // 0)


def test_replay_reports_an_input_that_breaks_the_contract(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fuzz.harnesses import container

    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_bytes(b"\x89TPK")
    bad.write_bytes(b"boom")
    original = container.test_one_input

    def test_one_input(data: bytes) -> None:
        if data == b"boom":
            raise KeyError(data)
        original(data)

    monkeypatch.setattr(container, "test_one_input", test_one_input)
    broken = replay("container", [good, bad])
    assert [(p.name, what.split(" at ")[0]) for p, what in broken] == [("bad", "KeyError")]
