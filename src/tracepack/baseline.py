"""The legacy decoding path, for comparisons: ``json.loads`` then dataclasses, reflectively.

torch.export's Python serde turns ``model.json`` into its schema's dataclasses
by walking type hints at run time, field by field. This module mirrors the
node-level part of that schema (torch 2.13, schema 8.x) with plain dataclasses
and decodes the same way, so the demo and the benchmarks can time tracepack
against it in the same process without torch installed. Fields torch types
more deeply than we mirror (signature, module call graph) stay plain dicts,
which only makes the baseline faster than the real thing.
"""

import dataclasses
import json
import typing
from dataclasses import dataclass, field
from typing import Any, Optional, Union

__all__ = ["ExportedProgram", "decode_model_json"]


@dataclass
class TensorArgument:
    name: str


@dataclass
class SymExpr:
    expr_str: str
    hint: Optional[Any] = None  # noqa: UP045 - the baseline mirrors torch's typing style


@dataclass
class SymInt:
    as_expr: Optional[SymExpr] = None  # noqa: UP045
    as_int: Optional[int] = None  # noqa: UP045


@dataclass
class Argument:
    """torch's Argument union: exactly one field is set."""

    as_none: Optional[bool] = None  # noqa: UP045
    as_tensor: Optional[TensorArgument] = None  # noqa: UP045
    as_tensors: Optional[list[TensorArgument]] = None  # noqa: UP045
    as_int: Optional[int] = None  # noqa: UP045
    as_ints: Optional[list[int]] = None  # noqa: UP045
    as_float: Optional[float] = None  # noqa: UP045
    as_floats: Optional[list[float]] = None  # noqa: UP045
    as_string: Optional[str] = None  # noqa: UP045
    as_strings: Optional[list[str]] = None  # noqa: UP045
    as_bool: Optional[bool] = None  # noqa: UP045
    as_bools: Optional[list[bool]] = None  # noqa: UP045
    as_sym_int: Optional[Any] = None  # noqa: UP045
    as_scalar_type: Optional[int] = None  # noqa: UP045
    as_memory_format: Optional[int] = None  # noqa: UP045
    as_layout: Optional[int] = None  # noqa: UP045
    as_device: Optional[Any] = None  # noqa: UP045
    as_optional_tensors: Optional[list[Any]] = None  # noqa: UP045
    as_graph: Optional[Any] = None  # noqa: UP045


@dataclass
class NamedArgument:
    name: str
    arg: Argument
    kind: Optional[int] = None  # noqa: UP045


@dataclass
class Node:
    target: str
    inputs: list[NamedArgument]
    outputs: list[Argument]
    metadata: dict[str, str]
    is_hop_single_tensor_return: Optional[bool] = None  # noqa: UP045
    name: str = ""


@dataclass
class Device:
    type: str
    index: Optional[int] = None  # noqa: UP045


@dataclass
class TensorMeta:
    dtype: int
    sizes: list[SymInt]
    requires_grad: bool
    device: Device
    strides: list[SymInt]
    storage_offset: SymInt
    layout: int


@dataclass
class Graph:
    inputs: list[Argument]
    outputs: list[Argument]
    nodes: list[Node]
    tensor_values: dict[str, TensorMeta]
    sym_int_values: dict[str, Any] = field(default_factory=dict)
    sym_bool_values: dict[str, Any] = field(default_factory=dict)
    is_single_tensor_return: bool = False
    custom_obj_values: dict[str, Any] = field(default_factory=dict)
    sym_float_values: dict[str, Any] = field(default_factory=dict)


@dataclass
class GraphModule:
    graph: Graph
    signature: Any
    module_call_graph: list[Any]
    metadata: dict[str, str] = field(default_factory=dict)
    treespec_namedtuple_fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class SchemaVersion:
    major: int
    minor: int


@dataclass
class ExportedProgram:
    graph_module: GraphModule
    opset_version: dict[str, int]
    range_constraints: dict[str, Any]
    schema_version: SchemaVersion
    verifiers: list[str] = field(default_factory=list)
    torch_version: str = ""
    guards_code: list[str] = field(default_factory=list)


def _build(cls: Any, data: Any) -> Any:
    """Reflective dict -> dataclass construction, resolving type hints at every step."""
    origin = typing.get_origin(cls)
    if origin is Union:
        if data is None:
            return None
        args = [a for a in typing.get_args(cls) if a is not type(None)]
        return _build(args[0], data)
    if dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls)
        kwargs = {f.name: _build(hints[f.name], data[f.name]) for f in dataclasses.fields(cls) if f.name in data}
        return cls(**kwargs)  # type: ignore[operator]
    if origin is list and isinstance(data, list):
        (item,) = typing.get_args(cls)
        return [_build(item, x) for x in data]
    if origin is dict and isinstance(data, dict):
        _, value = typing.get_args(cls)
        return {k: _build(value, v) for k, v in data.items()}
    return data


def decode_model_json(data: bytes) -> ExportedProgram:
    """``json.loads`` + reflective dataclass construction, the legacy way."""
    result: ExportedProgram = _build(ExportedProgram, json.loads(data))
    return result
