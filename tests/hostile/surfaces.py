"""Every surface a hostile user reaches, with its seeds and what it must do with any input.

A surface's ``run(data, folder)`` feeds one input to tracepack and returns normally when
tracepack did the right thing: accepted the input (and then answered consistently: a document
re-encodes and decodes to itself, a lazy answer equals the eager one, an accepted model.json
comes back byte for byte) or refused it with an :class:`~tracepack.errors.InputError`. Anything
else raises :class:`Finding` (a wrong answer) or escapes as the unexpected exception it is.
"""

from __future__ import annotations

import contextlib
import io
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

import tracepack
from tracepack.errors import InputError

__all__ = ["SURFACES", "Finding", "Surface"]

ROOT: Final = Path(__file__).resolve().parents[2]
BYTES: Final = ("flip", "interesting", "word", "insert", "delete", "duplicate", "truncate", "splice")


class Finding(AssertionError):
    """tracepack accepted an input and then answered wrongly (a silent wrong answer)."""


@dataclass(frozen=True)
class Surface:
    name: str
    seeds: Callable[[], list[tuple[str, bytes]]]
    kinds: tuple[str, ...]
    run: Callable[[bytes, Path], str]


def _refused(fn: Callable[[], Any]) -> tuple[bool, Any]:
    """``(False, result)``, or ``(True, None)`` when tracepack refused the input as it should."""
    try:
        return False, fn()
    except InputError as exc:
        text = str(exc)
        if "\n" in text or not text:
            raise Finding(f"error message is not one line: {text!r}") from None
        return True, None


# -- .tpk ------------------------------------------------------------------------------------


@cache
def _tpk_seeds() -> list[tuple[str, bytes]]:
    out = [
        (f"golden/{p.parent.name}/{p.name}", p.read_bytes()) for p in sorted((ROOT / "tests/golden").glob("*/*.tpk"))
    ]
    from tracepack.torch.export.model_json import import_model_json

    doc = import_model_json((ROOT / "src/tracepack/data/sample/model.json").read_bytes(), source="model.json")
    for codec in ("json", "msgpack", "flatbuffers-rows", "columnar", "flatbuffers-columns"):
        for comp in ("none", "zstd"):
            out.append((f"sample.{codec}.{comp}", tracepack.dumps(doc, codec=codec, compression=comp)))
    return out


@cache
def _small_block_seeds() -> list[tuple[str, bytes]]:
    """The sample in both FlatBuffers layouts with block checksums in blocks of 512 B (spec §1.5): many
    blocks, so that a mutant reaches blocks a lookup reads and blocks it does not."""
    from tracepack import container

    out = []
    for name, data in _tpk_seeds():
        if name in ("sample.flatbuffers-rows.none", "sample.flatbuffers-columns.none"):
            header = container.read_header(data)
            stored = data[header.header_size : header.block_table_at]
            blocks = container.pack(
                stored, schema_version=header.schema_version, codec=header.codec, block_checksums=True, block_size=512
            )
            out.append((f"{name}.blocks-512", blocks))
    return out


def _tpk(data: bytes, folder: Path) -> str:
    from tracepack.container import read_header

    refused, doc = _refused(lambda: tracepack.loads(data, source="m.tpk"))
    if refused:
        return "refused"
    codec = read_header(data).codec
    again = tracepack.loads(tracepack.dumps(doc, codec=codec, compression="none"), source="again.tpk")
    if again.raw != doc.raw:
        raise Finding(f"an accepted {codec} document does not survive a re-encode")
    return "accepted"


def _lazy(data: bytes, folder: Path) -> str:
    path = folder / "lazy.tpk"
    path.write_bytes(data)
    eager_refused, eager = _refused(lambda: tracepack.loads(data, source="m.tpk"))
    outcome = "refused"
    for checksum in (True, False):
        try:
            with tracepack.open(path, checksum=checksum) as lz:
                for i in range(len(lz)):
                    node = lz.node(i)
                    got = (node.name, node.stack_trace, node.module_stack, node.from_node)
                    node.meta  # noqa: B018 - reading it is the test
                    node.raw  # noqa: B018 - decoding it is the test
                    if not eager_refused:
                        e = eager.node(i)
                        want = (e.name, e.stack_trace, e.module_stack, e.from_node)
                        if got != want:
                            raise Finding(f"lazy node {i} answers {got!r}, the eager reader {want!r}")
                    # Spec §5.4: when nodes share a name and the side index is damaged, a lazy reader may
                    # answer with another node of that name (the row layout has no name column to scan
                    # cheaply); a node of another name is a wrong answer.
                    found = lz.node(node.name).index
                    if (
                        found != i
                        and (eager_refused or eager.node(node.name).index == i)
                        and lz.node(found).name != node.name
                    ):
                        raise Finding(f"lazy lookup of {node.name!r} finds a node of another name")
        except InputError as exc:
            if "\n" in str(exc):
                raise Finding(f"error message is not one line: {exc!s}") from None
            continue
        if checksum:
            outcome = "accepted"
    return outcome


# -- torch: model.json, archives, pickles ----------------------------------------------------


@cache
def _model_json_seeds() -> list[tuple[str, bytes]]:
    seeds = [("sample/model.json", (ROOT / "src/tracepack/data/sample/model.json").read_bytes())]
    seeds.append(("export_strict_model.json", (ROOT / "tests/data/torch/export_strict_model.json").read_bytes()))
    for name, data in _archive_seeds():
        if name.endswith(".pt2"):
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                for n in z.namelist():
                    if "/models/" in n and n.endswith(".json"):
                        seeds.append((f"{name}:{n}", z.read(n)))
    return seeds


def _model_json(data: bytes, folder: Path) -> str:
    from tracepack.torch.export.model_json import export_model_json, import_model_json

    refused, doc = _refused(lambda: import_model_json(data, source="model.json"))
    if refused:
        return "refused"
    back = export_model_json(doc)
    if back != data:
        at = next((i for i, (a, b) in enumerate(zip(back, data, strict=False)) if a != b), min(len(back), len(data)))
        raise Finding(f"accepted model.json comes back different from byte {at}: {data[at - 20 : at + 20]!r}")
    return "accepted"


@cache
def _archive_seeds() -> list[tuple[str, bytes]]:
    folder = ROOT / "tests/data/torch"
    paths = (
        sorted(folder.glob("corpus/*.p*"))
        + sorted(folder.glob("*.p*"))
        + [ROOT / "src/tracepack/data/sample/tiny_transformer.pt2"]
    )
    return [(str(p.relative_to(ROOT)), p.read_bytes()) for p in paths if p.suffix in (".pt2", ".pt", ".ptl")]


def _archive(data: bytes, folder: Path) -> str:
    from tracepack.torch import archives, pt2

    refused, doc = _refused(lambda: archives.import_archive("m.pt2", data))
    outcome = "refused" if refused else "accepted"
    if not refused:
        tracepack.loads(tracepack.dumps(doc), source="again.tpk")
    if data[:2] != b"PK":
        return outcome
    refused, packed = _refused(lambda: pt2.pack_pt2(data, source="m.pt2"))
    if refused:
        outcome = "refused"
    else:
        if len(packed) > 2 * len(data) + (1 << 20):  # members are copied, never expanded (a zip bomb)
            raise Finding(f"pack wrote {len(packed)} bytes from {len(data)}")
        unpacked = pt2.unpack_pt2(packed, source="packed.pt2")  # our own output must read back
        with zipfile.ZipFile(io.BytesIO(unpacked)) as z, zipfile.ZipFile(io.BytesIO(data)) as orig:
            if z.namelist() != orig.namelist():
                raise Finding("pack + unpack changed the member list")
    return outcome


@cache
def _pickle_seeds() -> list[tuple[str, bytes]]:
    out = []
    for name, data in _archive_seeds():
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for n in z.namelist():
                if n.endswith((".pkl", ".debug_pkl")):
                    out.append((f"{name}:{n}", z.read(n)))
    return out


def _pickle(data: bytes, folder: Path) -> str:
    from tracepack.torch.torchscript import debug_pkl, pickle_reader

    outcome = "refused"
    for parse in (
        debug_pkl.parse_debug_pkl,
        debug_pkl.parse_callstack_debug_map,
        debug_pkl.parse_mobile_debug_handles,
        pickle_reader.read_pickle,
    ):
        refused, _ = _refused(lambda parse=parse: parse(data, source="x.pkl"))  # type: ignore[misc]
        if not refused:
            outcome = "accepted"
    return outcome


# -- schema files and the command line -------------------------------------------------------


@cache
def _schema_seeds() -> list[tuple[str, bytes]]:
    return [(f"schema/{p.name}", p.read_bytes()) for p in sorted((ROOT / "schema").glob("*.toml"))]


def _cli(argv: list[str], ok: tuple[int, ...] = (0, 2)) -> str:
    from tracepack.cli import main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(argv)
    text = err.getvalue()
    if code not in ok or "internal error" in text or "Traceback" in text:
        raise Finding(f"`tracepack {' '.join(argv[:1])}` exit {code}: {text.strip()[:300]}")
    if code == 2 and text.count("\n") != 1:
        raise Finding(f"`tracepack {argv[0]}` printed more than one error line: {text!r}")
    return "refused" if code == 2 else "accepted"


def _schema(data: bytes, folder: Path) -> str:
    old = ROOT / "schema/tracepack-1.0.toml"
    new = folder / "tracepack-9.9.toml"
    new.write_bytes(data)
    # exit 1 is the checker's verdict "incompatible", a correct answer to a changed schema
    return _cli(["schema", "check", str(old), str(new)], ok=(0, 1, 2))


def _cli_convert(data: bytes, folder: Path) -> str:
    src = folder / ("in.tpk" if data[:4] == b"\x89TPK" else "in.json" if data[:1] in b"{[" else "in.pt2")
    src.write_bytes(data)
    out = folder / "out.tpk"
    outcome = _cli(["convert", str(src), str(out), "--codec", "flatbuffers", "--compression", "none"])
    if out.exists():
        _cli(["trace", str(out), "#0"])
        _cli(["inspect", str(out)])
    return outcome


@cache
def _cli_seeds() -> list[tuple[str, bytes]]:
    return _tpk_seeds()[::3] + _model_json_seeds()[:2] + _archive_seeds()[:3]


# -- ExecuTorch: ETDump, .pte, ETRecord (through the commands that read them) ----------------


@cache
def _executorch_seeds() -> list[tuple[str, bytes]]:
    folder = ROOT / "tests/data/executorch"
    paths = [p for p in sorted(folder.iterdir()) if p.suffix in (".etdp", ".pte", ".etrecord", ".ptl")]
    out = [(str(p.relative_to(ROOT)), p.read_bytes()) for p in paths]
    from tracepack.torch.archives import import_archive

    # The mobile archive as a .tpk: its lite-interpreter extension, read by symbolicate.
    mobile = folder / "mobile.ptl"
    doc = import_archive(str(mobile), mobile.read_bytes())
    for codec in ("msgpack", "flatbuffers-rows", "flatbuffers-columns"):
        out.append((f"mobile.ptl as {codec}.tpk", tracepack.dumps(doc, codec=codec, compression="none")))
    return out


def _executorch(data: bytes, folder: Path) -> str:
    """An ETDump annotated with a good ETRecord, a .pte, ETRecord or mobile .ptl symbolicated and
    annotated with: every command exits 0 or 2 with one line; the kind is guessed from the bytes,
    all tried if none."""
    from tracepack.torch.executorch.etdump import is_etdump
    from tracepack.torch.executorch.pte import is_pte

    good = ROOT / "tests/data/executorch"
    if (good / "model.etrecord").exists():
        record, dump = good / "model.etrecord", good / "model.etdp"
    else:  # pragma: no cover - the samples are committed
        return "refused"
    found = (
        ("etdp", is_etdump(data)),
        ("pte", is_pte(data)),
        ("etrecord", data[:2] == b"PK"),
        ("tpk", data[:4] == b"\x89TPK"),
    )
    kinds = [k for k, hit in found if hit]
    outcome = "refused"
    for kind in kinds or ["etdp", "pte", "etrecord"]:
        src = folder / f"in.{kind}"
        src.write_bytes(data)
        out = str(folder / "out.json")
        if kind == "etdp":
            runs = [["annotate", str(src), "--with", str(record), "-o", out]]
        elif kind == "tpk":
            runs = [
                ["symbolicate", str(src), "--handle", "1", "--json"],
                ["symbolicate", str(src), "--handle", "3"],
                ["symbolicate", str(src), "--handle", "3", "--style", "tracepack"],
            ]
        elif kind == "etrecord":  # a zip: an ETRecord or a mobile .ptl
            runs = [
                ["symbolicate", str(src), "--handle", "1", "--json"],
                ["symbolicate", str(src), "--handle", "3"],
                ["annotate", str(dump), "--with", str(src), "-o", out],
            ]
        else:
            runs = [
                ["symbolicate", str(src), "--handle", "1", "--json"],
                ["symbolicate", str(src), "--instruction", "0:0"],
                ["annotate", str(dump), "--with", str(src), "-o", out, "--by", "module"],
            ]
        for argv in runs:
            if _cli(argv) == "accepted":
                outcome = "accepted"
    return outcome


SURFACES: Final = {
    s.name: s
    for s in (
        Surface("tpk", _tpk_seeds, BYTES, _tpk),
        Surface(
            "lazy",
            lambda: (
                [
                    s
                    for s in _tpk_seeds()
                    if ("flatbuffers" in s[0] and "zstd" not in s[0] and "none" in s[0])
                    or s[0].endswith(("/flatbuffers.tpk", "/flatbuffers-columns.tpk"))
                ]
                + _small_block_seeds()
            ),
            BYTES,
            _lazy,
        ),
        Surface("model_json", _model_json_seeds, (*BYTES, "json", "json", "json"), _model_json),
        Surface("archive", _archive_seeds, BYTES, _archive),
        Surface("pickle", _pickle_seeds, BYTES, _pickle),
        Surface("schema", _schema_seeds, (*BYTES, "toml", "toml"), _schema),
        Surface("cli", _cli_seeds, (*BYTES, "json"), _cli_convert),
        Surface("executorch", _executorch_seeds, BYTES, _executorch),
    )
}
