"""Codecs: the payload encodings a ``.tpk`` container can hold.

Every codec module has the same four functions, so that knowing one means
knowing them all:

``encode(raw, version) -> bytes``
    the generated model of ``version`` to bytes;
``decode(data, version, *, source) -> raw``
    bytes to the generated model of ``version`` (raising DecodeError with the
    place in the document);

and the registry here maps codec names and header ids to those modules.

Names. Every header id has one name, the one ``inspect``/``info`` print and
:attr:`tracepack.container.Header.codec` holds: ``json`` (0), ``msgpack`` (1),
``flatbuffers-rows`` (2, the FlatBuffers row layout: a table per node),
``columnar`` (3) and ``flatbuffers-columns`` (4, the FlatBuffers column
layout). A writer also takes the names of :data:`ALIASES`: ``flatbuffers``
means the column layout (id 4), the FlatBuffers layout that is smaller than
zstd of torch's model.json; earlier builds wrote the row layout (id 2) for
``flatbuffers`` (and refuse id 4 files if older than the column layout).
Readers go by the id in the header, never by a name, so every file written
under any name stays readable.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from tracepack.errors import ContainerError, UsageError

if TYPE_CHECKING:
    import zstandard

    from tracepack.document import Document

__all__ = [
    "ALIASES",
    "AUTO",
    "CHOICE_MARGIN",
    "CODECS",
    "CODEC_IDS",
    "LEVELS",
    "SMALL_FILE",
    "TORCH_CANDIDATES",
    "TRIAL_LEVEL",
    "TRIAL_MARGIN",
    "WRITE_NAMES",
    "Encoded",
    "choose",
    "codec_by_id",
    "codec_by_name",
    "encode_best",
    "forms_loops",
    "level_for",
    "resolve",
]

#: Codec name -> (header id, implementing module): one name per id, the name a header's id prints as.
CODECS: Final[dict[str, tuple[int, str]]] = {
    "json": (0, "tracepack.codecs.json"),
    "msgpack": (1, "tracepack.codecs.msgpack"),
    "flatbuffers-rows": (2, "tracepack.codecs.flatbuffers"),
    "columnar": (3, "tracepack.codecs.columnar"),
    "flatbuffers-columns": (4, "tracepack.codecs.fbcolumns"),
}
CODEC_IDS: Final[dict[int, str]] = {i: name for name, (i, _) in CODECS.items()}

#: Other names a writer takes (``--codec``, ``dumps(codec=)``), and the codec each one means.
ALIASES: Final[dict[str, str]] = {"flatbuffers": "flatbuffers-columns"}

#: Every name a writer takes, in the order help and errors list them.
WRITE_NAMES: Final[tuple[str, ...]] = (
    "json",
    "msgpack",
    "flatbuffers",
    "flatbuffers-rows",
    "columnar",
    "flatbuffers-columns",
)


def _expected() -> str:
    return ", ".join(f"{n} (= {ALIASES[n]})" if n in ALIASES else n for n in WRITE_NAMES)


def resolve(name: str, *, where: str = "--codec") -> str:
    """The codec name (a key of :data:`CODECS`) that ``name`` or its alias means; UsageError if none."""
    if name in CODECS:
        return name
    alias = ALIASES.get(name)
    if alias is None:
        raise UsageError(f"unknown codec {name!r}", where=where, expected=_expected())
    return alias


def codec_by_name(name: str) -> tuple[int, ModuleType]:
    """The header id and module of codec ``name`` (or an alias of one, see :data:`ALIASES`)."""
    cid, module = CODECS[resolve(name)]
    return cid, importlib.import_module(module)


def codec_by_id(cid: int, *, source: str | None = None) -> tuple[str, ModuleType]:
    """The name and module of the codec with header id ``cid``."""
    name = CODEC_IDS.get(cid)
    if name is None:
        raise ContainerError(
            f"unknown codec id {cid}",
            source=source,
            where="header byte 16",
            expected=", ".join(f"{i} ({n})" for i, n in CODEC_IDS.items()),
        )
    return name, importlib.import_module(CODECS[name][1])


#: The codecs ``convert`` weighs for a torch input, fastest to write and read first: MessagePack (one C
#: call each way), columnar, the FlatBuffers column layout (a Python walk over the schema's ~140 column
#: paths each way, a fixed cost of a few hundred microseconds that dominates small graphs).
TORCH_CANDIDATES: Final[tuple[str, ...]] = ("msgpack", "columnar", "flatbuffers-columns")
#: How much smaller a slower candidate must be to be chosen over a faster one, when the smallest file is
#: over :data:`SMALL_FILE` bytes; at or under it the smallest file wins outright.
CHOICE_MARGIN: Final = 0.05
#: Files this small are written and read in well under a millisecond by every candidate, so the margin
#: would trade bytes for microseconds: the ladder's 8-node program was MessagePack at 834 B (0.51x of
#: ``zstd -19 model.json``) where the column layout writes 805 B (0.49x) in ~0.3 ms more.
SMALL_FILE: Final = 4096


def choose(sizes: Mapping[str, int], order: tuple[str, ...] = TORCH_CANDIDATES) -> str:
    """The codec to write, given each candidate's file size: the first of ``order`` (fastest first) whose
    file is within :data:`CHOICE_MARGIN` of the smallest, or the first smallest when that is at most
    :data:`SMALL_FILE` bytes. A graph of a few nodes is then whichever codec is smallest, a large one
    columnar (the smallest by far), and of two files of some size within 5% of each other the faster
    codec's (MessagePack: one C call each way)."""
    candidates = [c for c in order if c in sizes]
    if not candidates:
        raise ValueError(f"no size for any of {', '.join(order)}")
    smallest = min(sizes[c] for c in candidates)
    margin = 0.0 if smallest <= SMALL_FILE else CHOICE_MARGIN
    return next(c for c in candidates if sizes[c] <= smallest * (1 + margin))


#: The zstd level a payload is compressed at by default, by its uncompressed size: ``(up to this many
#: bytes, level)``, first match; larger payloads get the last level. Level 19 costs at most ~70 ms on a
#: 1 MiB columnar payload (a 10,243-node program) and gives files half the size of level 3 at a few hundred
#: nodes; past 1 MiB its cost grows to seconds (a 2 MB MessagePack payload: 0.7 s), level 9 stays at
#: tens of milliseconds (docs/size.md#default-level).
LEVELS: Final[tuple[tuple[int, int], ...]] = ((1 << 20, 19), (16 << 20, 9), (1 << 62, 3))
#: The level every candidate is first compressed at when several are weighed (it costs well under a
#: millisecond per 100 KB), and how much larger than the smallest trial a candidate may be to be compressed
#: again at its own level: the others cannot come within :data:`CHOICE_MARGIN` of the smallest there.
TRIAL_LEVEL: Final = 3
TRIAL_MARGIN: Final = 0.25
#: ``zstd_dict=AUTO``: the built-in dictionary for the document (:func:`tracepack.dictionaries.default_for`).
AUTO: Final = "auto"


def level_for(size: int) -> int:
    """The zstd level :func:`encode_best` compresses a payload of ``size`` uncompressed bytes at (:data:`LEVELS`)."""
    return next((level for limit, level in LEVELS if size <= limit), LEVELS[-1][1])


class Encoded(NamedTuple):
    """What :func:`encode_best` wrote: the container bytes and how they were made."""

    codec: str
    compression: str
    #: The zstd level (0 when uncompressed).
    level: int
    #: The zstd dictionary id in the header (0: none).
    dict_id: int
    data: bytes

    @property
    def block_checksums(self) -> bool:
        """Whether the file has a block table (container flag bit 0)."""
        from tracepack.container import read_header

        return read_header(self.data).block_checksums

    def describe(self) -> str:
        """``columnar, zstd -19, dictionary 1414548233 (torch-export-9)`` (or ``msgpack, none``, and
        ``, block checksums`` when the file has them): what ``convert`` prints."""
        from tracepack import dictionaries

        blocks = ", block checksums" if self.block_checksums else ""
        if self.compression == "none":
            return f"{self.codec}, none{blocks}"
        used = f", dictionary {dictionaries.describe(self.dict_id)}" if self.dict_id else ""
        return f"{self.codec}, {self.compression} -{self.level}{used}{blocks}"


def encode_best(
    doc: Document,
    *,
    codecs: Sequence[str] = TORCH_CANDIDATES,
    compression: str = "zstd",
    level: int | None = None,
    zstd_dict: zstandard.ZstdCompressionDict | str | None = AUTO,
    version: tuple[int, int] | None = None,
    block_checksums: bool | None = None,
) -> Encoded:
    """``doc`` as container bytes with tracepack's defaults: what ``tracepack convert`` writes for a torch
    input, and ``tracepack.torch.save`` and ``tracepack pack`` for their member.

    * codec: each of ``codecs`` (fastest first) is encoded, and :func:`choose` keeps the smallest file,
      or a faster codec's file within :data:`CHOICE_MARGIN` of it (files of at most :data:`SMALL_FILE`
      bytes: the smallest);
    * level: ``level``, or by each payload's size (:func:`level_for`: 19 up to 1 MiB, 9 up to 16 MiB, 3
      beyond). With several candidates, each is first compressed at :data:`TRIAL_LEVEL`, and only those
      within :data:`TRIAL_MARGIN` of the smallest are compressed again at their level, so a big document
      pays level 19 (or 9) once, not once per codec;
    * dictionary: ``zstd_dict`` (a dictionary, a built-in's name or None); :data:`AUTO` is the built-in one
      for the document (:func:`tracepack.dictionaries.default_for`), which readers need no file for;
    * ``block_checksums`` as :func:`tracepack.container.pack` takes it (``None``: on for uncompressed
      FlatBuffers only), orthogonal to the rest: the choice weighs the files as written, tables included.

    The bytes depend on the document and these rules only (not on timing), so a conversion is repeatable.
    """
    from tracepack import container, dictionaries, migrations
    from tracepack.versions import CURRENT

    order = tuple(dict.fromkeys(resolve(c, where="codec") for c in codecs))
    if not order:
        raise UsageError("no codec to write", where="codec", expected=_expected())
    zdict: Any = None
    if compression == "zstd":
        zdict = (
            dictionaries.get(dictionaries.default_for(doc)) if zstd_dict == AUTO else dictionaries.resolve(zstd_dict)
        )
    elif zstd_dict is not None and zstd_dict != AUTO:
        raise UsageError("a zstd dictionary needs compression='zstd'", where="zstd_dict")
    target = CURRENT if version is None else version
    raw: Any = doc.raw if target == CURRENT else migrations.downgrade(doc.raw, CURRENT, target)
    payloads = {c: codec_by_name(c)[1].encode(raw, target) for c in order}

    def pack(codec: str, lvl: int) -> bytes:
        return container.pack(
            payloads[codec],
            schema_version=target,
            codec=codec,
            compression=compression,
            level=lvl,
            zstd_dict=zdict,
            block_checksums=block_checksums,
        )

    if compression != "zstd":
        written = {c: pack(c, 0) for c in order}
        codec = choose({c: len(d) for c, d in written.items()}, order)
        return Encoded(codec, compression, 0, 0, written[codec])
    levels = {c: level if level is not None else level_for(len(payloads[c])) for c in order}
    trial: dict[str, bytes] = {}
    if len(order) > 1 and any(lvl > TRIAL_LEVEL for lvl in levels.values()):
        trial = {c: pack(c, min(levels[c], TRIAL_LEVEL)) for c in order}
        smallest = min(len(d) for d in trial.values())
        order = tuple(c for c in order if len(trial[c]) <= smallest * (1 + TRIAL_MARGIN))
    written = {c: trial[c] if c in trial and levels[c] <= TRIAL_LEVEL else pack(c, levels[c]) for c in order}
    codec = choose({c: len(d) for c, d in written.items()}, order)
    return Encoded(codec, compression, levels[codec], 0 if zdict is None else zdict.dict_id(), written[codec])


def forms_loops() -> str:
    """Where the columnar codec's ``forms`` loops run in this install: ``"C"`` (the ``_cforms`` module is
    built) or ``"Python"`` (not built, or ``TRACEPACK_PURE_PYTHON`` set); ``tracepack --version`` says it.
    Found without importing the codec."""
    if os.environ.get("TRACEPACK_PURE_PYTHON") or importlib.util.find_spec("tracepack.codecs._cforms") is None:
        return "Python"
    return "C"
