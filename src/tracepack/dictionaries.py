"""Built-in zstd dictionaries, shipped inside the package and named by id in the container header.

A file compressed with a built-in dictionary reads on any install that ships it, with no file on
the user's side: :func:`tracepack.loads` finds the dictionary by the id in the header. A file
whose dictionary this install does not have fails with a one-line error naming the id (and, if
known, the name). Dictionaries are never replaced: a retrained one gets a new id and file, and
every dictionary ever shipped stays in :data:`BUILTIN` (docs/dictionaries.md). One superseded during
development, before any submitted build shipped it, is *withdrawn*: its entry keeps its id and name
reserved (never reused), its file is not shipped, and a file naming it is refused with one line
saying so.

Ids are in zstd's free range (32768 <= id < 2**31): ``0x54504B00 + n`` (``TPK`` and a serial).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Final

import zstandard

from tracepack.errors import ContainerError, UsageError

__all__ = [
    "BUILTIN",
    "DEFAULT",
    "TRAINING",
    "EXECUTORCH",
    "EXECUTORCH_TRAINING",
    "SHIPPED",
    "DictionarySpec",
    "by_id",
    "default_for",
    "compressor",
    "describe",
    "dictionary_path",
    "get",
    "known",
    "manifest",
    "resolve",
]


@dataclass(frozen=True)
class DictionarySpec:
    """One built-in dictionary: its id, file and the parameters it was trained with."""

    name: str
    dict_id: int
    file: str
    sha256: str
    #: zstd fastCover training parameters (scripts/torch/train_dictionary.py).
    size: int = 128 * 1024
    k: int = 1024
    d: int = 8
    f: int = 20
    doc: str = ""
    #: The codecs whose payloads of each training program are the samples, in order; a codec named
    #: twice weighs twice (zstd's trainer keeps what recurs across samples).
    codecs: tuple[str, ...] = ("columnar", "msgpack", "flatbuffers-rows", "json")
    #: The commit whose importer and codecs made the training samples: ``make dictionary-check``
    #: reproduces the file byte for byte there (later changes to either change the samples).
    trained_at: str = ""
    #: Why the dictionary is not shipped (superseded before any submitted build had it); empty when it is.
    withdrawn: str = ""
    #: The codecs whose payloads of the member ``tracepack pack`` / ``tracepack.torch.save`` write for each
    #: training program follow that program's samples (torch-export-8 on: what the defaults write).
    members: tuple[str, ...] = ()
    #: Where its training inputs are recorded (``sha256sum`` lines of the programs, beside the programs
    #: themselves as ``NAME.tar.zst``), from the repository root, and that record's sha256; empty for the
    #: dictionaries trained before inputs were recorded. ``make dictionary-check`` retrains from them.
    inputs: str = ""
    inputs_sha256: str = ""
    #: The dictionary whose recorded programs come first in this one's inputs, when it has programs besides
    #: ``scripts/torch/dictionary_models.py``'s (``third_party``); empty otherwise.
    base: str = ""
    #: Where its third-party programs come from (``scripts/torch/dictionary_provenance.py --ship`` records
    #: them); empty for dictionaries trained on this project's own programs only.
    third_party: str = ""


_PACKAGE: Final = "tracepack.data.zstd"

#: Every dictionary this build knows, oldest first (withdrawn ones too: their ids stay reserved).
#: Never remove or change an entry.
BUILTIN: Final[tuple[DictionarySpec, ...]] = (
    DictionarySpec(
        name="torch-export-1",
        dict_id=0x54504B01,
        file="torch-export-1.dict",
        sha256="09f7a0b06412853c856c5b841e633886a46e7cf8ece067ee8bfce7c84822c3e8",
        doc="torch 2.13 torch.export programs (scripts/torch/dictionary_models.py), every codec",
    ),
    DictionarySpec(
        name="torch-export-2",
        dict_id=0x54504B02,
        file="torch-export-2.dict",
        sha256="39485dedb99d68dc5551802117897dfa9a99cc2b77232cb602599ccaef0d6028",
        size=128 * 1024,
        doc="as torch-export-1, retrained on payloads whose string columns use the columnar `forms` encoding",
        trained_at="ddda37b",
    ),
    DictionarySpec(
        name="torch-export-3",
        dict_id=0x54504B03,
        file="torch-export-3.dict",
        sha256="f611fa4a02385a5d7be13ca88fb8573c02e8cc35b5ba3d0b01d3b71375cf526c",
        size=512 * 1024,
        k=2048,
        doc="retrained on schema 1.2 payloads (typed signature, interned extension strings); 512 KiB, k=2048",
        trained_at="the commit releasing schema 1.2",
    ),
    # ExecuTorch dictionaries are numbered from 0x54504B20 (torch.export ones count up from 0x54504B01).
    DictionarySpec(
        name="executorch-edge-1",
        dict_id=0x54504B20,
        file="executorch-edge-1.dict",
        sha256="ca6dc0b2a8e508fdd0b41f5150b11b25f669277708e5e2191888b2041ac4a9f5",
        size=512 * 1024,
        k=4096,
        doc="ExecuTorch 1.5.1 ETRecord methods (scripts/executorch/dictionary_corpus.py), MessagePack and columnar",
        trained_at="0d94cf9 (its corpus: dictionary_corpus.py of that commit, executorch 1.5.1, torch 2.13.0)",
        withdrawn="superseded by executorch-edge-2 in the session that trained it",
    ),
    DictionarySpec(
        name="executorch-edge-2",
        dict_id=0x54504B21,
        file="executorch-edge-2.dict",
        sha256="cc78c2e843b2d9a93c657cdc5e48aab988324317039865a4d3f887d8029d69b8",
        size=512 * 1024,
        k=4096,
        doc="as executorch-edge-1, on a larger corpus: 14 models of its own besides the torch ones, XNNPACK-lowered "
        "variants of every model up to 100 edge nodes",
        trained_at="c77d8e4 (its corpus: dictionary_corpus.py of that commit, executorch 1.5.1, torch 2.13.0)",
    ),
    DictionarySpec(
        name="torch-export-4",
        dict_id=0x54504B04,
        file="torch-export-4.dict",
        sha256="8219b4196957ed8e5009bdd090a57c02ee17380bd97afbbfb0f9c8881b50d23a",
        size=512 * 1024,
        k=1024,
        codecs=("columnar", "msgpack", "columnar", "msgpack", "flatbuffers-rows"),
        doc="retrained once torch.export imports group their string table by field; columnar and MessagePack "
        "payloads weigh twice, FlatBuffers once, JSON not at all; 512 KiB, k=1024",
        trained_at="08df757",
        withdrawn="superseded by torch-export-6 in the session that trained it",
    ),
    DictionarySpec(
        name="torch-export-5",
        dict_id=0x54504B05,
        file="torch-export-5.dict",
        sha256="df7c3ddc0def695993a0561229b614b610ae02669343bb37f0d496c544c61c5a",
        size=512 * 1024,
        k=2048,
        codecs=("columnar", "msgpack", "columnar", "msgpack", "flatbuffers-rows"),
        doc="as torch-export-4, retrained once columnar layout 2 keyed columns by number; 512 KiB, k=2048",
        trained_at="8776631",
        withdrawn="superseded by torch-export-6 in the session that trained it",
    ),
    DictionarySpec(
        name="torch-export-6",
        dict_id=0x54504B06,
        file="torch-export-6.dict",
        sha256="04caf868a7cf5277565e5924e888fe046c0a84df3f116d7471f853169b2492b8",
        size=512 * 1024,
        k=1024,
        codecs=("columnar", "msgpack", "columnar", "msgpack", "flatbuffers-columns"),
        doc="as torch-export-5 with the FlatBuffers column layout's payloads instead of the row layout's; "
        "512 KiB, k=1024",
        trained_at="83af446",
    ),
    DictionarySpec(
        name="torch-export-7",
        dict_id=0x54504B07,
        file="torch-export-7.dict",
        sha256="47673d109f6f444c5a0bf50d6434227ef63057249ee248d40f2dc6a0e850abe4",
        size=512 * 1024,
        k=2048,
        codecs=("columnar", "msgpack", "columnar", "flatbuffers-columns", "flatbuffers-columns"),
        doc="as torch-export-6 with three more training programs of dynamic batch and length that read "
        "their sizes (sym_size nodes, symbolic strides, sympy hints); the FlatBuffers column layout weighs twice, "
        "MessagePack once; 512 KiB, k=2048",
        trained_at="9405b5f (its importer and codecs; dictionary_models.py and this entry as of d7339c2)",
    ),
    DictionarySpec(
        name="torch-export-8",
        dict_id=0x54504B08,
        file="torch-export-8.dict",
        sha256="162dea7371eaeb4a97525ed4ad62c2aa8f41ef591c466ca618ceb0777e65ce53",
        size=512 * 1024,
        k=2048,
        codecs=("columnar", "msgpack", "columnar", "flatbuffers-columns", "flatbuffers-columns"),
        members=("columnar", "msgpack", "flatbuffers-columns"),
        doc="the programs of torch-export-7 retrained with the code that ships it (reproducible: make "
        "dictionary-check), what the defaults write: each program in the codecs convert weighs and the member "
        "pack and tracepack.torch.save write for it in each of them; 512 KiB, k=2048",
        trained_at="the commit that adds torch-export-8.dict (make dictionary-check finds it with git)",
        inputs="scripts/torch/dictionary_corpus/torch-export-8.sha256",
        inputs_sha256="e17970409cf6f04d7a8924afb103485a1a0443122a5dd2923bb7b545c75b6cb3",
    ),
    DictionarySpec(
        name="torch-export-9",
        dict_id=0x54504B09,
        file="torch-export-9.dict",
        sha256="4958990a72b557eebc5fd142a4a5f5d0d5f8073f306bb3fe0059aaedd7e6b9b5",
        size=512 * 1024,
        k=2048,
        codecs=("columnar", "msgpack", "columnar", "flatbuffers-columns", "flatbuffers-columns"),
        members=("columnar", "msgpack", "flatbuffers-columns"),
        doc="torch-export-8's 22 programs and 48 third-party ones of architectures outside the real-model "
        "benchmark (the zoo's hf_opt, timm ghostnet/lcnet/mobilenetv3, torchvision mnasnet/mobilenet_v2/"
        "shufflenet/squeezenet), every benchmark model-file line scrubbed (dictionary_provenance.py); "
        "torch-export-8's parameters; 512 KiB, k=2048",
        trained_at="the commit that adds torch-export-9.dict (make dictionary-check finds it with git)",
        inputs="scripts/torch/dictionary_corpus/torch-export-9.sha256",
        inputs_sha256="6a8b1d63ab069b098dd3de29c0b94f91cb88a0169eeddce43c2ec2d1c9605798",
        base="torch-export-8",
        third_party="scripts/zoo/export_zoo.py (torch 2.14.1, timm 1.0.31, torchvision 0.29.1, transformers "
        "5.24.0), the programs dictionary_provenance.py's rules 1 and 2 admit, rule 3 applied",
    ),
)
#: The dictionary ``scripts/torch/train_dictionary.py`` writes (the newest torch.export one).
TRAINING: Final = [d for d in BUILTIN if d.name.startswith("torch-export-") and not d.withdrawn][-1]
#: The dictionary writers use for torch documents unless told otherwise.
DEFAULT: Final = TRAINING.name
#: The dictionary ``scripts/executorch/train_dictionary.py`` writes (the newest ExecuTorch one).
EXECUTORCH_TRAINING: Final = [d for d in BUILTIN if d.name.startswith("executorch-") and not d.withdrawn][-1]
#: The dictionary writers use for ExecuTorch documents (an ETRecord's methods).
EXECUTORCH: Final = EXECUTORCH_TRAINING.name

#: The dictionaries this build ships: every entry of :data:`BUILTIN` that is not withdrawn.
SHIPPED: Final = tuple(d for d in BUILTIN if not d.withdrawn)
_BY_ID: Final = {d.dict_id: d for d in BUILTIN}
_BY_NAME: Final = {d.name: d for d in BUILTIN}


def default_for(doc: object) -> str:
    """The built-in dictionary a writer uses for ``doc`` by default: :data:`EXECUTORCH` for a method of
    an ETRecord (it has an ``executorch/...`` extension), else :data:`DEFAULT`."""
    raw = getattr(doc, "raw", None)
    names = (getattr(e, "name", "") for e in getattr(raw, "extensions", None) or ())
    return EXECUTORCH if any(n.startswith("executorch/") for n in names) else DEFAULT


def dictionary_path(spec: DictionarySpec) -> Path:
    """Where a dictionary's file lives in the source tree (for the training script)."""
    return Path(__file__).resolve().parent / "data" / "zstd" / spec.file


@cache
def _load(spec: DictionarySpec) -> zstandard.ZstdCompressionDict:
    if spec.withdrawn:
        raise ContainerError(
            f"zstd dictionary {spec.name} (id {spec.dict_id}) was withdrawn before any release ({spec.withdrawn}); "
            "no build ships it",
            where="header byte 20",
            expected=f"a file written with a shipped dictionary ({known()}): convert it again from its source",
        )
    try:
        data = resources.files(_PACKAGE).joinpath(spec.file).read_bytes()
    except (FileNotFoundError, ModuleNotFoundError):
        raise ContainerError(
            f"built-in zstd dictionary {spec.name} (id {spec.dict_id}) is missing from this install",
            where=f"tracepack/data/zstd/{spec.file}",
        ) from None
    if spec.sha256 and hashlib.sha256(data).hexdigest() != spec.sha256:
        raise ContainerError(
            f"built-in zstd dictionary {spec.name} is damaged (checksum mismatch)",
            where=f"tracepack/data/zstd/{spec.file}",
        )
    out = zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_FULLDICT)
    if out.dict_id() != spec.dict_id:
        raise ContainerError(
            f"built-in zstd dictionary {spec.name} has id {out.dict_id()}",
            where=f"tracepack/data/zstd/{spec.file}",
            expected=str(spec.dict_id),
        )
    return out


def _params(level: int, size: int, dict_size: int) -> zstandard.ZstdCompressionParameters:
    """The parameters zstd itself uses at ``level`` for ``size`` bytes with a dictionary of ``dict_size``."""
    return zstandard.ZstdCompressionParameters.from_level(
        level, source_size=size, dict_size=dict_size, write_dict_id=True, write_content_size=True
    )


@cache
def _prepared(spec: DictionarySpec, key: tuple[int, ...]) -> zstandard.ZstdCompressionDict:
    data = _load(spec).as_bytes()
    out = zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_FULLDICT)
    window, hash_log, chain, search, min_match, target, strategy = key
    out.precompute_compress(
        compression_params=zstandard.ZstdCompressionParameters(
            window_log=window,
            hash_log=hash_log,
            chain_log=chain,
            search_log=search,
            min_match=min_match,
            target_length=target,
            strategy=strategy,
            write_dict_id=True,
            write_content_size=True,
        )
    )
    return out


def compressor(zdict: zstandard.ZstdCompressionDict, level: int, size: int) -> zstandard.ZstdCompressor:
    """A compressor for ``size`` bytes at ``level`` with ``zdict``, writing what zstd writes with that
    dictionary (``ZstdCompressor(level=level, dict_data=zdict)``, the parameters zstd picks for the size).

    A built-in dictionary's compression tables are computed once per parameter set and kept (preparing a
    512 KiB dictionary for zstd -19 takes tens of milliseconds, far more than compressing a small
    document); the parameters are the ones zstd derives from the level, the size and the dictionary's
    size, so the bytes do not change (a dictionary prepared for the level alone, as builds before issue 26
    did, compressed some payloads 1-7% larger). Other dictionaries are used as given."""
    spec = _BY_ID.get(zdict.dict_id())
    if spec is None or zdict is not _load(spec):
        return zstandard.ZstdCompressor(level=level, dict_data=zdict)
    p = _params(level, size, len(zdict.as_bytes()))
    key = (p.window_log, p.hash_log, p.chain_log, p.search_log, p.min_match, p.target_length, p.strategy)
    return zstandard.ZstdCompressor(compression_params=p, dict_data=_prepared(spec, key))


def by_id(dict_id: int) -> zstandard.ZstdCompressionDict | None:
    """The built-in dictionary with zstd id ``dict_id``, or None if this install has none."""
    spec = _BY_ID.get(dict_id)
    return None if spec is None else _load(spec)


def get(name: str = DEFAULT) -> zstandard.ZstdCompressionDict:
    """The built-in dictionary called ``name``."""
    spec = _BY_NAME.get(name)
    if spec is None or spec.withdrawn:
        raise UsageError(
            f"no built-in zstd dictionary {name!r}", where="zstd_dict", expected=" or ".join(d.name for d in SHIPPED)
        )
    return _load(spec)


def resolve(value: zstandard.ZstdCompressionDict | str | None) -> zstandard.ZstdCompressionDict | None:
    """A dictionary argument as given to ``dumps``: an object, a built-in's name, or None."""
    return get(value) if isinstance(value, str) else value


#: The machine-readable list of :data:`BUILTIN` shipped beside the files (spec §8.2), for other readers.
MANIFEST_FILE: Final = "MANIFEST.tsv"


def manifest() -> str:
    """The text of ``tracepack/data/zstd/MANIFEST.tsv``: one tab-separated line per entry of
    :data:`BUILTIN` (id in decimal, name, file, sha256, ``shipped`` or ``withdrawn``), oldest first,
    after two comment lines and the column names. A test checks the file is this text."""
    lines = [
        "# tracepack's built-in zstd dictionaries (spec/08-compression.md, §8.2): one line per id ever given;",
        "# lines are only added. A withdrawn dictionary's file is not shipped; its id stays reserved.",
        "id\tname\tfile\tsha256\tstatus",
    ]
    lines += [
        f"{d.dict_id}\t{d.name}\t{d.file}\t{d.sha256}\t{'withdrawn' if d.withdrawn else 'shipped'}" for d in BUILTIN
    ]
    return "\n".join(lines) + "\n"


def known() -> str:
    """The built-in dictionaries, for error messages: ``1414548225 (torch-export-1)``."""
    return ", ".join(describe(d.dict_id) for d in SHIPPED) or "none"


def describe(dict_id: int) -> str:
    """How an error names dictionary ``dict_id``."""
    spec = _BY_ID.get(dict_id)
    return f"{dict_id} ({spec.name})" if spec else str(dict_id)
