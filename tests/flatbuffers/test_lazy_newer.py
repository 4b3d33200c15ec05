"""The lazy reader words its refusal of a newer file's unknown content as the eager readers do."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracepack
from tests.golden import make_golden as mg
from tracepack import DecodeError, container
from tracepack.codecs import flatbuffers
from tracepack.versions import CURRENT


def test_a_newer_minor_using_an_unknown_variant_is_refused_naming_both_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = mg.build_document()
    fb = flatbuffers.codec_module(CURRENT)
    newer = (CURRENT[0], CURRENT[1] + 6)
    # A writer of the newer minor whose tensors are a variant this build does not know.
    table = dict(fb._U_ARGUMENT_ENC)
    tag, write = table[fb.m.ArgTensor]
    monkeypatch.setitem(fb._U_ARGUMENT_ENC, fb.m.ArgTensor, (250, write))
    raw = doc.raw
    raw.header.version = fb.m.Version(*newer)
    payload = flatbuffers.encode(raw, CURRENT)
    monkeypatch.setitem(fb._U_ARGUMENT_ENC, fb.m.ArgTensor, (tag, write))
    path = tmp_path / "newer.tpk"
    path.write_bytes(container.pack(payload, schema_version=newer, codec="flatbuffers-rows"))
    note = (
        f"(the file is schema {newer[0]}.{newer[1]}, newer than {CURRENT[0]}.{CURRENT[1]}, the newest this build "
        "reads: it may use something added since; a newer tracepack reads it)"
    )
    with tracepack.open(path) as lazy, pytest.raises(DecodeError) as info:
        [node.outputs() for node in lazy.nodes()]
    assert "250 is not a variant of union Argument" in str(info.value)
    assert str(info.value).endswith(note)
    with pytest.raises(DecodeError) as eager:
        tracepack.load(path)
    assert str(eager.value).endswith(note)
