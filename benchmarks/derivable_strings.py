"""What the strings a schema could derive cost the small ladder rungs (docs/size.md, "Small files").

An experiment for a design decision, not a figure with a target: ``python -m benchmarks.derivable_strings
[RUNG...]`` (default: the rungs under 70 nodes; the ladder is exported into ``.bench/sizes`` with torch
first when missing). For each rung, the file ``convert`` writes (:func:`tracepack.codecs.encode_best`,
the defaults) against ``zstd -19`` of its ``model.json``, then the same with one family of strings
emptied in the string table, then with all of them. Emptying is lossy: it is an upper bound on what
deriving a family (writing a rule instead of the text) could save, before the rule's own bytes.

A family is found by where the document uses its strings, and each is checked against the rule a
reader would apply (the column ``rule`` counts the strings that follow it, of those in the family):

* ``node names``: every node's name; rule: the target operator's name, or it with ``_<n>``
  (``mul_3`` for ``torch.ops.aten.mul.Tensor``).
* ``torch_fn``: the values of the ``torch_fn`` metadata key; rule: ``<fn>_<n>;<kind>.<fn>``.
* ``p_ names``: the graph inputs of parameters and buffers; rule: ``p_``/``b_`` and the parameter's
  name with ``.`` as ``_``.
* ``parameter names``: the signature's parameter and buffer names; rule: a module path of the
  document, ``.``, an attribute name.
* ``L__self__ keys``: the module keys of ``nn_module_stack``; rule: ``L__self__`` and a module path.
"""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zstandard

import tracepack
from benchmarks.bench_sizes import LADDER_DIR, _model_json, ladder
from tracepack.codecs import encode_best

SMALL = ("size_10", "size_10_dyn", "size_30", "size_30_dyn", "size_60", "size_60_dyn")
_COUNTED = re.compile(r"^(?P<base>.+?)(?:_(?P<n>\d+))?$")
_TAG = re.compile(r"^(?P<fn>\w+)_\d+;\w+\.(?P=fn)$")


def _families(doc: tracepack.Document) -> dict[str, tuple[set[int], Callable[[str], bool]]]:
    """family -> (string indices, the rule each must follow)."""
    raw = doc.raw
    s = raw.strings
    names = {n.name for n in raw.graph.nodes}
    targets = {n.name: s[n.target] for n in raw.graph.nodes}
    tag_key = next((i for i, x in enumerate(s) if x == "torch_fn"), None)
    tags = {v for n in raw.graph.nodes for k, v in zip(n.meta_keys, n.meta_values, strict=True) if k == tag_key}
    tags.discard(-1)
    modules = {x for x in s if x and not x.startswith("L__self__")}
    params, placeholders = _parameters(raw)
    counted = {s[i] for i in names if _counted(s[i], targets[i])}
    spellings = {f"{p}_{name.replace('.', '_')}" for name in params.values() for p in ("p", "b")}

    def param_rule(x: str) -> bool:
        path, _, attr = x.rpartition(".")
        return bool(attr) and (not path or path in modules)

    def self_rule(x: str) -> bool:
        return x == "L__self__" or x.removeprefix("L__self__") in modules

    def tag_rule(x: str) -> bool:
        return _TAG.match(x) is not None

    keys = {i for i, x in enumerate(s) if x.startswith("L__self__")}
    return {
        "node names": (names, counted.__contains__),
        "torch_fn": (tags, tag_rule),
        "p_ names": (set(placeholders), spellings.__contains__),
        "parameter names": (set(params), param_rule),
        "L__self__ keys": (keys, self_rule),
    }


def _counted(name: str, target: str) -> bool:
    """Whether a node's name is its operator's, alone or with ``_<n>``."""
    op = target.split(".")
    m = _COUNTED.match(name)
    return len(op) >= 2 and m is not None and m["base"] == op[-2]


def _parameters(raw: Any) -> tuple[dict[int, str], list[int]]:
    """The signature's parameter and buffer names (index -> text) and the names of their placeholders."""
    s, sig = raw.strings, raw.signature
    params: dict[int, str] = {}
    placeholders: list[int] = []
    for kind, arg, form, target in zip(sig.kind, sig.arg, sig.arg_form, sig.target, strict=True):
        if s[kind] in ("parameter", "buffer") and target > 0:
            params[target] = s[target]
            if form == 0:  # a tensor argument: ``arg`` is its name
                placeholders.append(arg)
    return params, placeholders


def _size(doc: tracepack.Document, empty: set[int]) -> int:
    raw = copy.deepcopy(doc.raw)
    raw.strings = ["" if i in empty else x for i, x in enumerate(raw.strings)]
    return len(encode_best(tracepack.Document(raw)).data)


def main(argv: list[str]) -> int:
    from tracepack.torch.export.model_json import import_model_json

    ladder()
    rungs = argv or list(SMALL)
    print("rung | zstd -19 of model.json | defaults | each family emptied: ratio (strings that follow the rule) | all")
    for rung in rungs:
        path = LADDER_DIR / f"{rung}.pt2"
        if not path.exists():
            print(f"{rung}: not exported (torch is needed once)")
            continue
        data = _model_json(Path(path))
        base = len(zstandard.ZstdCompressor(level=19).compress(data))
        doc = import_model_json(data)
        cells = [f"{_size(doc, set()) / base:.3f}x"]
        everything: set[int] = set()
        for family, (indices, rule) in _families(doc).items():
            everything |= indices
            follow = sum(rule(doc.raw.strings[i]) for i in indices)
            cells.append(f"{family} {_size(doc, indices) / base:.3f}x ({follow}/{len(indices)})")
        cells.append(f"all {_size(doc, everything) / base:.3f}x")
        print(f"{rung} | {base} B | " + " | ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
