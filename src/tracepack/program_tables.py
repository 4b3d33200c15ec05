"""A torch.export program's signature and module call graph as typed tables (schema 1.2).

``model.json``'s ``graph_module.signature`` (input and output specs) and
``graph_module.module_call_graph`` are stored as :class:`~tracepack.model.SignatureTable` and
:class:`~tracepack.model.ModuleCallTable` rows whose strings are rows of the string table: the
argument names are the graph's value names, the call graph's names are the module paths, stored
once. A spec or entry of a form the columns do not hold is kept whole as JSON text in its row, so
every program comes back exactly.

Plain JSON in and out, no torch: the torch bridge (:mod:`tracepack.torch.export.model_json`) and
the 1.2 -> 1.1 migration (which puts the tables back into the program's JSON) share it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec

from tracepack import model as m
from tracepack.document import json_value
from tracepack.errors import DecodeError

__all__ = [
    "PROGRAM_EXTENSION",
    "inline",
    "module_call_table",
    "module_calls_json",
    "signature_json",
    "signature_table",
]

#: The extension a torch program's JSON, graph taken out, is kept in.
PROGRAM_EXTENSION = "torch.export/program"


def _dumps(value: Any) -> str:
    """torch's own encoding: ``json.dumps`` defaults."""
    return json.dumps(value)


_SpecRow = tuple[str, str, int, str, str, int]
#: ``SignatureTable.arg_form``: how a spec writes its argument.
_ARG_NAME, _ARG_AS_TENSOR = 0, 1


def _spec_row(spec: Any) -> _SpecRow | None:
    """``(kind, arg, arg_form, target_key, target, persistent)`` of a spec the typed columns hold, else None."""
    if type(spec) is not dict or len(spec) != 1:
        return None
    ((kind, inner),) = spec.items()
    if type(inner) is not dict or not inner or next(iter(inner)) != "arg":
        return None
    arg = inner["arg"]
    if type(arg) is dict and list(arg) == ["name"] and type(arg["name"]) is str:
        name, form = arg["name"], _ARG_NAME
    elif (
        type(arg) is dict
        and list(arg) == ["as_tensor"]
        and type(arg["as_tensor"]) is dict
        and list(arg["as_tensor"]) == ["name"]
        and type(arg["as_tensor"]["name"]) is str
    ):
        name, form = arg["as_tensor"]["name"], _ARG_AS_TENSOR
    else:
        return None
    rest = list(inner)[1:]
    target_key = target = ""
    if rest and rest[0] != "persistent":
        target_key, target = rest[0], inner[rest[0]]
        if not target_key or type(target) is not str:
            return None
        rest = rest[1:]
    persistent = 0
    if rest == ["persistent"] and type(inner["persistent"]) is bool:
        persistent, rest = 2 if inner["persistent"] else 1, []
    if rest:
        return None
    return kind, name, form, target_key, target, persistent


def _spec_from_row(row: _SpecRow, where: int) -> Any:
    """Torch's spec object of a typed row ``(kind, arg, arg_form, target_key, target, persistent)``
    (inverse of :func:`_spec_row`)."""
    kind, arg, form, key, target, persistent = row
    if form == _ARG_NAME:
        argument: dict[str, Any] = {"name": arg}
    elif form == _ARG_AS_TENSOR:
        argument = {"as_tensor": {"name": arg}}
    else:
        raise DecodeError(f"unknown argument form {form}", where=f"$.signature.arg_form[{where}]", expected="0 or 1")
    inner: dict[str, Any] = {"arg": argument}
    if key:
        inner[key] = target
    if persistent:
        if persistent > 2:
            raise DecodeError(
                f"unknown persistent flag {persistent}", where=f"$.signature.persistent[{where}]", expected="0, 1 or 2"
            )
        inner["persistent"] = persistent == 2
    return {kind: inner}


def _spec_json(s: list[str], t: m.SignatureTable, i: int) -> Any:
    """Row ``i`` of a signature table as torch's spec object."""
    if t.json[i]:
        return json_value(s[t.json[i]], f"$.signature.json[{i}]")
    row = (s[t.kind[i]], s[t.arg[i]], t.arg_form[i], s[t.target_key[i]], s[t.target[i]], t.persistent[i])
    return _spec_from_row(row, i)


def signature_table(intern: Callable[[str], int], sig: Any) -> m.SignatureTable | None:
    """A program signature's specs as a table (each spec typed when it rebuilds exactly), or None
    when the signature is not ``{"input_specs": [...], "output_specs": [...], ...}``."""
    if type(sig) is not dict or type(sig.get("input_specs")) is not list or type(sig.get("output_specs")) is not list:
        return None
    s = intern
    t = m.SignatureTable([], [], [], [], [], [], [], [])
    for output, specs in ((False, sig["input_specs"]), (True, sig["output_specs"])):
        for spec in specs:
            row = _spec_row(spec)
            kind, arg, form, key, target, persistent = row if row is not None else ("", "", 0, "", "", 0)
            t.output.append(output)
            t.kind.append(s(kind))
            t.arg.append(s(arg))
            t.arg_form.append(form)
            t.target_key.append(s(key))
            t.target.append(s(target))
            t.persistent.append(persistent)
            exact = row is not None and _dumps(_spec_from_row(row, len(t.json))) == _dumps(spec)
            t.json.append(0 if exact else s(_dumps(spec)))
    return t


def signature_json(s: list[str], t: m.SignatureTable) -> dict[str, list[Any]]:
    specs = [_spec_json(s, t, i) for i in range(len(t.output))]
    return {
        "input_specs": [x for x, out in zip(specs, t.output, strict=True) if not out],
        "output_specs": [x for x, out in zip(specs, t.output, strict=True) if out],
    }


def module_call_table(intern: Callable[[str], int], calls: Any) -> m.ModuleCallTable | None:
    """A module call graph as a table (an entry typed when it is ``{"fqn": str, "signature": ...}``)."""
    if type(calls) is not list:
        return None
    s = intern
    t = m.ModuleCallTable([], [], [])
    for entry in calls:
        if type(entry) is dict and list(entry) == ["fqn", "signature"] and type(entry["fqn"]) is str:
            sig = entry["signature"]
            t.fqn.append(s(entry["fqn"]))
            t.signature.append(0 if sig is None else s(_dumps(sig)))
            t.json.append(0)
        else:
            t.fqn.append(0)
            t.signature.append(0)
            t.json.append(s(_dumps(entry)))
    return t


def module_calls_json(s: list[str], t: m.ModuleCallTable) -> list[Any]:
    out = []
    for i, (fqn, sig, whole) in enumerate(zip(t.fqn, t.signature, t.json, strict=True)):
        if whole:
            out.append(json_value(s[whole], f"$.module_calls.json[{i}]"))
        else:
            out.append(
                {"fqn": s[fqn], "signature": json_value(s[sig], f"$.module_calls.signature[{i}]") if sig else None}
            )
    return out


def inline(raw: Any) -> Any:
    """``raw`` (a 1.2 document) with its signature and module call tables put back into the program's JSON
    (``PROGRAM_EXTENSION``, plain text), the tables removed: the form schema 1.1 holds. Extensions must be
    plain JSON text already. A DecodeError when the tables have no program to go into."""
    if raw.signature is None and raw.module_calls is None:
        return raw
    at = next((i for i, e in enumerate(raw.extensions) if e.name == PROGRAM_EXTENSION), None)
    if at is None:
        raise DecodeError(
            "a signature or module call table without a program to put it in",
            where="$.extensions",
            expected=f"a {PROGRAM_EXTENSION!r} extension",
        )
    program = json_value(raw.extensions[at].json, f"$.extensions[{at}].json")
    gm = program.get("graph_module") if type(program) is dict else None
    if type(gm) is not dict or (raw.signature is not None and type(gm.get("signature")) is not dict):
        raise DecodeError(
            "the program has no graph_module.signature object to put the signature into",
            where=f"$.extensions[{at}].json",
            expected="a torch.export program",
        )
    s = raw.strings
    if raw.signature is not None:
        gm["signature"].update(signature_json(s, raw.signature))
    if raw.module_calls is not None:
        gm["module_call_graph"] = module_calls_json(s, raw.module_calls)
    extensions = list(raw.extensions)
    extensions[at] = type(extensions[at])(PROGRAM_EXTENSION, _dumps(program))
    return msgspec.structs.replace(raw, extensions=extensions, signature=None, module_calls=None)
