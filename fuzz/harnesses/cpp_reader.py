"""The C++ reader (``cpp/``): its container checks, zstd, every codec's decoder, migration, validation and
the lazy FlatBuffers reader, fuzzed natively (``cpp/fuzz/reader_fuzzer.cpp``, clang with libFuzzer, ASan
and UBSan; ``CPP = True``: :mod:`fuzz.run` builds and runs that binary, not Python).

An input's first byte says how the rest reaches the reader (:func:`build_file` spells the same rules in
Python): ``0`` a whole file; ``1`` an uncompressed payload (byte 1 the codec id, byte 2 the released
version, then the payload), wrapped in a container with correct checksums; ``2`` a compressed one (byte 3
the built-in dictionary, 0 for none; bytes 4..7 the declared raw length; then a zstd frame).

The native harness checks the reader against itself (sanitizers; no InternalError; the lazy reader
answers what the whole reader read). ``tests/cpp/test_fuzz_corpus.py`` checks it against the Python
reader: every input of the committed corpus, built by :func:`build_file`, gives what ``tracepack cat``
gives (exit code, output, error class and place). ``test_one_input`` is that Python side alone (what
``fuzz.replay`` runs)."""

from __future__ import annotations

import struct
from typing import Final

from fuzz.common import ROOT, conformance_vectors, contract, fix_tpk

#: the modules the Python side reaches (the native run's coverage is libFuzzer's ``cov``/``ft``)
TARGETS: Final = ()
CPP: Final = True
SOURCE: Final = "cpp/fuzz/reader_fuzzer.cpp"
DICT: Final = "tpk.dict"

#: the released versions the native harness's byte 2 chooses from (its ``kVersions``; a test keeps them
#: equal to ``tracepack.versions.RELEASED``)
VERSIONS: Final = ((1, 0), (1, 1), (1, 2))


def dictionary_ids() -> list[int]:
    """The built-in dictionaries in the order of ``MANIFEST.tsv`` (what the native harness indexes)."""
    from tracepack.dictionaries import BUILTIN

    return [d.dict_id for d in BUILTIN]


def build_file(data: bytes) -> bytes | None:
    """The file the native harness reads for ``data`` (None: it reads nothing)."""
    from tracepack.container import CODEC_IDS, pack

    if not data:
        return None
    mode = data[0] % 3
    if mode == 0:
        return data[1:]
    if len(data) < (3 if mode == 1 else 8):
        return None
    codec, version = CODEC_IDS[data[1] % 5], VERSIONS[data[2] % 3]
    if mode == 1:
        return pack(data[3:], schema_version=version, codec=codec, block_checksums=False)
    # a zstd payload as it is: the header says so, names the dictionary and the raw length, CRCs fixed
    ids = dictionary_ids()
    file = bytearray(pack(data[8:], schema_version=version, codec=codec, block_checksums=False))
    file[17] = 1
    struct.pack_into("<I", file, 20, ids[(data[3] - 1) % len(ids)] if data[3] else 0)
    file[32:40] = data[4:8] + bytes(4)
    fix_tpk(file)
    return bytes(file)


def test_one_input(data: bytes) -> None:
    import tracepack

    file = build_file(data)
    if file is not None:
        contract(lambda: tracepack.loads(file, source="fuzz.tpk"))


def seeds() -> list[tuple[str, bytes]]:
    """Whole files (the golden files and the conformance vectors, valid and damaged), and the small sample
    graph's payload in every codec and released version, uncompressed and compressed with and without the
    default dictionary."""
    import tracepack
    from fuzz.common import sample_doc
    from tracepack import dictionaries

    golden = sorted((ROOT / "tests/golden").glob("*/*.tpk"))
    out = [(f"golden-{p.parent.name}-{p.name}", b"\0" + p.read_bytes()) for p in golden]
    out += [(name, b"\0" + data) for name, data in conformance_vectors("*")]
    doc = sample_doc()
    default = dictionaries.get().dict_id()
    ids = dictionary_ids()
    codecs = ("json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns")
    for v, version in enumerate(VERSIONS):
        for codec in codecs:
            try:
                plain = tracepack.dumps(doc, codec=codec, compression="none", version=version)
            except tracepack.errors.VersionError:
                continue
            out.append((f"dynamic-{codec}-{version[0]}.{version[1]}", bytes([1, plain[16], v]) + plain[48:]))
            for zdict in (None, dictionaries.DEFAULT):
                packed = tracepack.dumps(doc, codec=codec, compression="zstd", version=version, zstd_dict=zdict)
                chosen = 1 + ids.index(default) if zdict else 0
                raw = len(plain) - 48
                out.append(
                    (
                        f"dynamic-{codec}-{version[0]}.{version[1]}-zstd-{zdict}",
                        bytes([2, plain[16], v, chosen]) + raw.to_bytes(4, "little") + packed[48:],
                    )
                )
    return out
