"""Everything in tracepack that knows torch, and the torch bridge's public face.

The subpackages read and write torch's file formats without torch installed:
``export`` (torch.export ``model.json``), ``pt2`` and ``archives`` (``.pt2`` and TorchScript
archives), ``torchscript`` (debug pickles, mobile debug maps, the data-only pickle reader).
The functions below need torch itself (``pip install tracepack[torch]``); they import it
when called, so ``import tracepack.torch`` works without it. Nothing outside this package
imports anything from it at module import time.

>>> import torch, tracepack.torch
>>> ep = torch.export.export(model, (x,))
>>> doc = tracepack.torch.to_document(ep)           # typed, interned, ready for tracepack.dump
>>> ep2 = tracepack.torch.from_document(doc, like=ep)  # the graph and node metadata back
>>> ep3 = tracepack.torch.load("packed.pt2")         # a `tracepack pack`ed .pt2, metadata restored

The route is torch's own serializer: :func:`to_document` serializes the
program with ``torch._export.serde`` (without the weights, which a document
does not hold) and imports the resulting ``model.json`` bytes, which
:func:`from_document` writes back byte for byte before torch deserializes them.
So every detail torch serializes survives, node metadata (``stack_trace``,
``nn_module_stack``, ``source_fn_stack``, ``torch_fn``, ``custom``,
``from_node``) included.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import IO, Any, TypeAlias

from tracepack.document import Document
from tracepack.errors import UsageError
from tracepack.torch.export import model_json as export_json


def _torch() -> Any:
    """The ``torch`` module (imported by name so that type checking never needs torch installed)."""
    try:
        return importlib.import_module("torch")
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        raise ImportError("tracepack.torch needs torch: pip install 'tracepack[torch]'") from None


#: ``torch.export.ExportedProgram`` (typed loosely: tracepack type-checks without torch).
ExportedProgram: TypeAlias = Any

__all__ = ["from_document", "from_model_json", "load", "model_json", "save", "to_document"]


def _serde() -> Any:
    """``torch._export.serde.serialize``: torch's own program serializer."""
    _torch()
    return importlib.import_module("torch._export.serde.serialize")


def model_json(ep: ExportedProgram) -> bytes:
    """The ``model.json`` bytes ``torch.export.save`` would write for ``ep`` (weights left out)."""
    serde = _serde()
    serialized = serde.ExportedProgramSerializer().serialize(
        ep, serialize_state_dict=False, serialize_constants=False, serialize_example_inputs=False
    )
    return bytes(serde._to_json_bytes(serialized.exported_program))


def to_document(ep: ExportedProgram) -> Document:
    """An ExportedProgram as a tracepack Document (graph, tensor values, interned debug info)."""
    return export_json.import_model_json(model_json(ep), source="<ExportedProgram>")


def _placeholder_weights(program: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Zero tensors shaped like the program's parameters, buffers and tensor constants."""
    dtypes = _serde()._SERIALIZE_TO_TORCH_DTYPE
    scalar_type = importlib.import_module("torch._export.serde.schema").ScalarType
    graph = program["graph_module"]["graph"]
    values = graph.get("tensor_values", {})
    state: dict[str, Any] = {}
    constants: dict[str, Any] = {}
    for spec in program["graph_module"]["signature"]["input_specs"]:
        ((kind, body),) = spec.items()
        if kind == "parameter":
            where, name = state, body["parameter_name"]
        elif kind == "buffer":
            where, name = state, body["buffer_name"]
        elif kind == "tensor_constant":
            where, name = constants, body["tensor_constant_name"]
        else:
            continue
        meta = values.get(body["arg"]["name"])
        if meta is None:
            raise UsageError(f"no tensor metadata for {name!r}: pass the weights (like=, state_dict=)")
        sizes = [s["as_int"] for s in meta["sizes"]]
        torch = _torch()
        tensor = torch.zeros(sizes, dtype=dtypes[scalar_type(meta["dtype"])])
        where[name] = torch.nn.Parameter(tensor, requires_grad=meta["requires_grad"]) if kind == "parameter" else tensor
    return state, constants


def _deserialize(program: Any, source: str, state_dict: Any, constants: Any, example_inputs: Any) -> ExportedProgram:
    from tracepack.torch.loader import deserialize, load_program_dict

    if state_dict is None or constants is None:
        zeros, zero_constants = _placeholder_weights(program)
        state_dict = zeros if state_dict is None else state_dict
        constants = zero_constants if constants is None else constants
    serialized = load_program_dict(program, source)
    return deserialize(serialized, state_dict, constants, example_inputs, source=source)


def from_model_json(
    data: bytes,
    *,
    state_dict: dict[str, Any] | None = None,
    constants: dict[str, Any] | None = None,
    example_inputs: Any = None,
) -> ExportedProgram:
    """Deserialize ``model.json`` bytes (weights as zeros unless given)."""
    from tracepack.torch.loader import _json

    return _deserialize(_json(data, "<model.json>"), "<model.json>", state_dict, constants, example_inputs)


def from_document(
    doc: Document,
    *,
    like: ExportedProgram | None = None,
    state_dict: dict[str, Any] | None = None,
    constants: dict[str, Any] | None = None,
    example_inputs: Any = None,
) -> ExportedProgram:
    """The ExportedProgram a document was made from.

    The document becomes torch's schema dataclasses directly (the program as Python values,
    converted by the code generated from torch's schema: no JSON text in between).
    A document holds no weights: take them from ``like`` (the program's own, or one
    with the same parameters), or pass ``state_dict``/``constants``; without either,
    parameters, buffers and constants are zeros of the right shape and dtype.
    """
    if like is not None:
        state_dict = dict(like.state_dict) if state_dict is None else state_dict
        constants = dict(like.constants) if constants is None else constants
        example_inputs = like.example_inputs if example_inputs is None else example_inputs
    program = export_json.export_program(doc)
    return _deserialize(program, "<Document>", state_dict, constants, example_inputs)


def load(
    f: str | os.PathLike[str] | IO[bytes],
    *,
    extra_files: dict[str, Any] | None = None,
    expected_opset_version: dict[str, int] | None = None,
    trust_pickles: bool = False,
    model: str = "model",
) -> ExportedProgram:
    """``torch.export.load``'s result for any ``.pt2``, plain or ``tracepack pack``ed (metadata merged back).

    Same arguments as ``torch.export.load``, plus ``trust_pickles``. Nothing in the file runs:
    pickled tensors go through torch's ``weights_only`` unpickler, symbolic expressions are
    checked before sympy parses them, and torchbind/opaque constants, tensor subclasses
    and anything else that needs a full unpickler raise
    :class:`~tracepack.errors.UnsafePickleError` naming the member. ``trust_pickles=True``
    loads those the way torch does (their pickles can run code: only for files you trust).
    A ``.pt2`` of an older torch (2.1 on, either archive layout) is upgraded to the installed
    torch's schema first (:mod:`tracepack.torch.upgrade`).

    An archive of several programs (``torch.export.pt2_archive._package.package_pt2``): like
    ``torch.export.load``, the one named ``model``; ``model=`` picks another (torch.export.load
    cannot). Without it, a :class:`~tracepack.errors.LegacyFormatError` names the programs held.
    See docs/torch-load.md.
    """
    from tracepack.torch.loader import OlderArchive, load_pt2
    from tracepack.torch.upgrade import load_if_old

    _torch()  # first: without torch, the ImportError that names the extra (tests/ux/test_api.py)
    start = None if isinstance(f, (str, os.PathLike)) or not f.seekable() else f.tell()
    kwargs: dict[str, Any] = {
        "extra_files": extra_files,
        "expected_opset_version": expected_opset_version,
        "trust_pickles": trust_pickles,
        "model": model,
    }
    # A path that is not a regular file (missing, a folder, a FIFO): the upgrade's check refuses it in
    # its words, never opening a FIFO; anything else is read once, and upgraded only if it must be.
    regular = not isinstance(f, (str, os.PathLike)) or os.path.isfile(f)
    if regular:
        try:
            return load_pt2(f, older=True, **kwargs)
        except OlderArchive:
            pass
    # torch 2.1-2.7's flat archives and older schemas: upgraded (or, not one after all, refused with
    # the loader's own words)
    if start is not None:
        f.seek(start)  # type: ignore[union-attr]
    old = load_if_old(f, trust_pickles=trust_pickles)
    if old is not None:
        return old
    if start is not None:
        f.seek(start)  # type: ignore[union-attr]
    return load_pt2(f, **kwargs)


def save(
    ep: ExportedProgram,
    f: str | os.PathLike[str] | IO[bytes],
    *,
    extra_files: dict[str, Any] | None = None,
    opset_version: dict[str, int] | None = None,
    pickle_protocol: int = 2,
    keep: Sequence[str] = (),
    strip: bool = False,
    durable: bool = False,
) -> None:
    """Write ``ep`` as a packed ``.pt2`` in one call: what ``torch.export.save`` then ``tracepack pack``
    write, without writing and parsing model.json twice (the file is replaced atomically; as by
    ``torch.export.save``, not synced to disk unless ``durable=True``).

    With the defaults, plain ``torch.export.load`` reads the result with everything but the
    stack traces and ``from_node`` (which :func:`load` merges back); ``strip=True`` moves every
    metadata string (see :func:`tracepack.torch.pt2.pack_pt2`), ``keep`` names keys never moved.
    """
    from tracepack.torch.saver import save_pt2

    save_pt2(
        ep,
        f,
        extra_files=extra_files,
        opset_version=opset_version,
        pickle_protocol=pickle_protocol,
        keep=keep,
        strip=strip,
        durable=durable,
    )
