"""Legacy debug strings <-> structured form, exactly.

Four legacy forms are parsed and rendered here:

* stack traces, as ``traceback.format_list`` writes them (style ``python``)
  or stripped of surrounding whitespace, as torch.fx stores ``node.stack_trace``
  (style ``stripped``);
* torch.export ``nn_module_stack`` strings: ``key,path,type`` entries joined
  by ``;``;
* TorchScript module hierarchies: ``TOP(C)::forward.A0(A)::forward``;
* torch.fx ``from_node`` provenance, as torch.export writes it into node
  metadata: the JSON text of a list of NodeSource objects (since schema 1.1).

Every parser is checked by rendering its result and comparing with the input:
a string that does not come back byte for byte is reported as not
representable (``None``), and callers keep it verbatim. That makes the
structured form lossless by construction, whatever odd input arrives.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from json.encoder import encode_basestring_ascii
from typing import Any, Final, NamedTuple

import msgspec

from tracepack.io import limits

__all__ = [
    "ModuleRendering",
    "PROVENANCE_KEYS",
    "STYLE_PYTHON",
    "STYLE_STRIPPED",
    "FrameKey",
    "ModuleKey",
    "Provenance",
    "ProvenanceRenderer",
    "parse_from_node",
    "parse_module_hierarchy",
    "parse_nn_module_stack",
    "parse_stack_trace",
    "render_frames",
    "render_frames_checked",
    "check_rendered",
    "charge_rendered",
    "render_from_node",
    "render_module_hierarchy",
    "render_nn_module_stack",
]

STYLE_PYTHON = 0
STYLE_STRIPPED = 1

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


class FrameKey(NamedTuple):
    """A frame as interned: everything that makes two frames different.

    ``line``, ``end_line``, ``col`` and ``end_col`` are Python 3.11's ``co_positions``
    (``lineno, end_lineno, colno, end_colno``); -1 where unknown (``end_line`` since
    schema 1.1). None of them changes how the frame renders."""

    file: str
    line: int
    name: str
    text: str = ""
    col: int = -1
    end_col: int = -1
    annotation: str = ""
    end_line: int = -1


class ModuleKey(NamedTuple):
    """One level of a module hierarchy."""

    key: str
    path: str
    type: str
    method: str = ""


_FILE_HEAD: Final = '  File "'
_LINE_SEP: Final = '", line '
_IN_SEP: Final = ", in "


def _match_file_line(text: str, pos: int) -> tuple[str, int, str, int] | None:
    """``  File "F", line N, in NAME\n`` at ``pos``: ``(F, N, NAME, end)``, or None.

    The regex ``  File "(.*)", line (0|[1-9][0-9]*), in (.*)\n`` in linear time: a greedy
    ``(.*)`` backtracks once per ``", line `` on a line, and on a long line full of them that
    is quadratic. Here the line is found first, then the *last* separator after which a
    line number and ``, in `` follow (what the greedy group picks), scanning backwards once.
    """
    if not text.startswith(_FILE_HEAD, pos):
        return None
    nl = text.find("\n", pos)
    if nl < 0:
        return None
    start = pos + len(_FILE_HEAD)
    at = nl
    while True:
        at = text.rfind(_LINE_SEP, start, at)
        if at < 0:
            return None
        digits = at + len(_LINE_SEP)
        stop = digits
        while stop < nl and "0" <= text[stop] <= "9":
            stop += 1
        run = text[digits:stop]
        if run and (run == "0" or run[0] != "0") and text.startswith(_IN_SEP, stop):
            if len(run) > 19:  # past any 64-bit line number: the caller refuses it, and int() would be slow
                return None
            return text[start:at], int(run), text[stop + len(_IN_SEP) : nl], nl + 1


def render_frame(f: FrameKey) -> str:
    """One frame as ``traceback.format_list`` writes it (plus its annotation)."""
    head = f'  File "{f.file}", line {f.line}, in {f.name}\n'
    if f.text:
        head += f"    {f.text}\n"
    return head + f.annotation


def render_frames(frames: Iterable[FrameKey], style: int = STYLE_PYTHON) -> str:
    """Frames, outermost first, as a legacy stack trace string."""
    text = "".join(map(render_frame, frames))
    return text.strip() if style == STYLE_STRIPPED else text


#: Characters of ``render_frame``'s fixed text, plus room for a 64-bit line number.
_FRAME_OVERHEAD: Final = len('  File "", line , in \n    \n') + 20


def render_frames_checked(frames: Sequence[FrameKey], style: int, *, source: str | None, where: str) -> str:
    """:func:`render_frames`, refused before any text is built when it would pass the
    ``max_rendered`` budget (:mod:`tracepack.io.limits`): a small file's shared rows can
    describe a stack trace of gigabytes."""
    size = sum(len(f.file) + len(f.name) + len(f.text) + len(f.annotation) for f in frames)
    size += _FRAME_OVERHEAD * len(frames)
    check_rendered(size, "the stack trace", source=source, where=where, detail=f" ({len(frames):,} frames)")
    return render_frames(frames, style)


def check_rendered(size: int, what: str, *, source: str | None, where: str, detail: str = "") -> None:
    """Refuse one text of about ``size`` characters before it is built if it would pass ``max_rendered``."""
    budget = limits.current().max_rendered
    if size > budget:
        from tracepack.errors import DecodeError

        raise DecodeError(
            f"{what} would render to about {size:,} characters{detail}",
            source=source,
            where=where,
            expected=f"at most {budget:,} ({limits.hint('max_rendered')})",
        )


def charge_rendered(text: str, *, source: str | None, where: str | Callable[[], str]) -> str:
    """Count ``text`` against the current call's ``max_rendered`` total (see
    :func:`tracepack.io.limits.rendering`); returns it. Outside such a call, only each text is capped."""
    total = limits.rendered(len(text))
    if total is not None and total > limits.current().max_rendered:
        from tracepack.errors import DecodeError

        budget = limits.current().max_rendered
        raise DecodeError(
            f"the text rendered by this call would pass {budget:,} characters (shared rows repeat in the output)",
            source=source,
            where=where if isinstance(where, str) else where(),
            expected=f"a smaller output ({limits.hint('max_rendered')})",
        )
    return text


def _parse_python(text: str) -> list[FrameKey] | None:
    frames: list[FrameKey] = []
    pos, end = 0, len(text)
    while pos < end:
        m = _match_file_line(text, pos)
        if m is None:
            return None
        file, line, name, pos = m
        if line > _I64_MAX:
            return None
        code = ""
        if text.startswith("    ", pos) and not text.startswith("  File ", pos):
            nl = text.find("\n", pos)
            if nl < 0:
                return None
            code = text[pos + 4 : nl]
            pos = nl + 1
        ann_start = pos
        while pos < end and not text.startswith("  File ", pos):
            nl = text.find("\n", pos)
            if nl < 0:
                return None
            pos = nl + 1
        frames.append(FrameKey(file, line, name, code, -1, -1, text[ann_start:pos]))
    return frames


def parse_stack_trace(text: str) -> tuple[list[FrameKey], int] | None:
    """Parse a legacy stack trace into frames (outermost first) and the style that renders it.

    Returns ``None`` when no style renders the frames back into exactly ``text``.
    """
    frames = _parse_python(text)
    if frames is not None and render_frames(frames, STYLE_PYTHON) == text:
        return frames, STYLE_PYTHON
    if text and text == text.strip():
        # torch.fx strips the whole string: put back the two spaces before the first
        # "File" and the final newline, then check that stripping gives the input again.
        frames = _parse_python("  " + text + "\n")
        if frames is not None and frames and render_frames(frames, STYLE_STRIPPED) == text:
            return frames, STYLE_STRIPPED
    return None


def render_nn_module_stack(entries: Iterable[ModuleKey]) -> str:
    """``key,path,type`` entries joined by ``;`` (torch.export's ``nn_module_stack``)."""
    return ";".join(f"{e.key},{e.path},{e.type}" for e in entries)


def parse_nn_module_stack(text: str) -> list[ModuleKey] | None:
    """Parse an ``nn_module_stack`` string, outermost module first; ``None`` if not exact.

    The key never holds a comma and the type never does either, so the path is what lies
    between the first and the last comma of an entry, commas and all.
    """
    entries = []
    for part in text.split(";"):
        first, last = part.find(","), part.rfind(",")
        if first < 0 or first == last:
            return None
        entries.append(ModuleKey(part[:first], part[first + 1 : last], part[last + 1 :]))
    return entries if render_nn_module_stack(entries) == text else None


_HIER_ENTRY = re.compile(r"([^.()]*)\(([^()]*)\)::([^.()]*)")


def render_module_hierarchy(entries: Sequence[ModuleKey]) -> str:
    """TorchScript's ``TOP(C)::forward.A0(A)::forward`` form (``::method`` only where one is known)."""
    return ".".join(f"{e.key}({e.type})::{e.method}" if e.method else f"{e.key}({e.type})" for e in entries)


def parse_module_hierarchy(text: str) -> list[ModuleKey] | None:
    """Parse a TorchScript module hierarchy string; ``None`` if not exact."""
    entries = []
    pos = 0
    while True:
        m = _HIER_ENTRY.match(text, pos)
        if m is None:
            return None
        entries.append(ModuleKey(m.group(1), "", m.group(2), m.group(3)))
        pos = m.end()
        if pos == len(text):
            break
        if text[pos] != ".":
            return None
        pos += 1
    return entries if render_module_hierarchy(entries) == text else None


# -- torch.fx from_node provenance --------------------------------------------------------------------

#: The keys of a NodeSource object, in the order torch writes them.
PROVENANCE_KEYS = ("name", "target", "graph_id", "pass_name", "action", "from_node")


class Provenance(NamedTuple):
    """One torch.fx NodeSource: the node a pass made this one from, and that node's own provenance."""

    name: str
    target: str
    graph_id: int
    pass_name: str
    action: str
    from_node: tuple[Provenance, ...] = ()


_ENTRY_OVERHEAD: Final = len('{"name": , "target": , "graph_id": , "pass_name": , "action": , "from_node": []}')


def _entry_text(head: tuple[str, str, int, str, str], children: str) -> str:
    # json.dumps of {"name": ..., ..., "from_node": [...]} with the default separators and escapes.
    name, target, graph_id, pass_name, action = head
    enc = encode_basestring_ascii
    return (
        f'{{"name": {enc(name)}, "target": {enc(target)}, "graph_id": {int.__repr__(graph_id)}, '
        f'"pass_name": {enc(pass_name)}, "action": {enc(action)}, "from_node": [{children}]}}'
    )


def render_from_node(entries: Iterable[Provenance]) -> str:
    """NodeSources as torch.export writes ``from_node`` metadata: ``json.dumps`` of their dicts."""
    return "[" + ", ".join(_entry_text(e[:5], render_from_node(e.from_node)[1:-1]) for e in entries) + "]"


def _provenance(value: Any) -> Provenance | None:
    if type(value) is not dict or tuple(value) != PROVENANCE_KEYS:
        return None
    name, target, graph_id, pass_name, action, children = value.values()
    if (
        type(name) is not str
        or type(target) is not str
        or type(graph_id) is not int
        or not _I64_MIN <= graph_id <= _I64_MAX
        or type(pass_name) is not str
        or type(action) is not str
        or type(children) is not list
    ):
        return None
    kids = []
    for child in children:
        p = _provenance(child)
        if p is None:
            return None
        kids.append(p)
    return Provenance(name, target, graph_id, pass_name, action, tuple(kids))


def _encodable(p: Provenance) -> bool:
    try:
        for s in (p.name, p.target, p.pass_name, p.action):
            s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return all(map(_encodable, p.from_node))


_json_decode = msgspec.json.Decoder().decode  # as json.loads, 3x faster; json.dumps below checks the rest


def parse_from_node(text: str) -> list[Provenance] | None:
    """Parse ``from_node`` metadata into NodeSources; ``None`` unless they render back into exactly ``text``.

    Exactly: a JSON list of objects with torch's six keys in torch's order and types (``graph_id`` a
    64-bit integer), written by ``json.dumps`` with its defaults (``", "``, ``": "``, ASCII escapes).
    """
    if not text.startswith("["):
        return None
    try:
        value = _json_decode(text)
        if type(value) is not list:
            return None
        entries = []
        for item in value:
            p = _provenance(item)
            if p is None:
                return None
            entries.append(p)
        if json.dumps(value) != text:
            return None
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None
    # A lone surrogate escape ("\ud800") decodes to a str no codec can encode: keep such text verbatim.
    if "\\ud" in text and not all(map(_encodable, entries)):
        return None
    return entries


class ModuleRendering:
    """Renders module-trie rows in both legacy forms, cached per row and form.

    Mixed into the eager and the lazy reader: each provides ``modules(row)`` (the path,
    outermost first) and a ``_module_cache`` dict.
    """

    __slots__ = ()
    _module_cache: dict[tuple[int, int], str]

    def modules(self, module: int) -> list[ModuleKey]:
        raise NotImplementedError

    def _checked_modules(self, module: int) -> list[ModuleKey]:
        entries = self.modules(module)
        # Every field of every entry (ModuleKey is a tuple of four strings), and separators.
        size = sum(map(len, chain.from_iterable(entries))) + 8 * len(entries)
        check_rendered(size, "the module path", source=getattr(self, "path", None), where=f"$.modules[{module}]")
        return entries

    def module_stack(self, module: int) -> str:
        """Render module-trie row ``module`` as torch.export's ``nn_module_stack``."""
        text = self._module_cache.get((module, 0))
        if text is None:
            text = self._module_cache[(module, 0)] = render_nn_module_stack(self._checked_modules(module))
        return charge_rendered(text, source=getattr(self, "path", None), where=lambda: f"$.modules[{module}]")

    def module_hierarchy(self, module: int) -> str:
        """Render module-trie row ``module`` in TorchScript's ``TOP(C)::forward...`` form."""
        text = self._module_cache.get((module, 1))
        if text is None:
            text = self._hierarchy_from_parent(module)
            if text is None:
                text = self._module_cache[(module, 1)] = render_module_hierarchy(self._checked_modules(module))
        return charge_rendered(text, source=getattr(self, "path", None), where=lambda: f"$.modules[{module}]")

    def _module_row(self, module: int) -> tuple[int, str, str, str] | None:
        """``(parent, key, type, method)`` of module-trie row ``module`` (parent below the row), for a
        reader that reads one row cheaply (the lazy one); None to render from the whole path."""
        return None

    #: The most rows :meth:`_hierarchy_from_parent` renders in one call (a deeper walk renders the path).
    _ROWS_FROM_PARENT: Final = 8

    def _hierarchy_from_parent(self, module: int) -> str | None:
        """Row ``module``'s hierarchy as its parent's text and one entry (``render_module_hierarchy``
        joins the entries with ``.``), parents rendered and cached the same way: a row whose parent
        was rendered costs one entry, not its whole path. None when the reader gives no rows or the
        rows to render pass :data:`_ROWS_FROM_PARENT`. The texts built in one call count together
        against ``max_rendered`` (as the whole path's text does)."""
        cache = self._module_cache
        pending: list[tuple[int, str]] = []
        row = module
        while row and (row, 1) not in cache:
            got = self._module_row(row)
            if got is None or len(pending) == self._ROWS_FROM_PARENT:
                return None
            parent, key, typ, method = got
            pending.append((row, f"{key}({typ})::{method}" if method else f"{key}({typ})"))
            row = parent
        text = cache[(row, 1)] if row else ""
        built = 0
        for r, entry in reversed(pending):
            built += len(text) + len(entry) + 1 if text else len(entry)
            check_rendered(built, "the module path", source=getattr(self, "path", None), where=f"$.modules[{r}]")
            text = cache[(r, 1)] = f"{text}.{entry}" if text else entry
        return text


class ProvenanceRenderer:
    """Renders rows of a provenance table (schema 1.1+) back into torch's JSON, one cached text per row.

    Works on the table's plain columns, so every schema version's model can use it. Rows are
    rendered children first, without recursion, so any depth renders; a child that is not
    below its parent (only in an unvalidated document) raises ValueError.
    """

    __slots__ = ("_chars", "_cols", "_lists", "_sizes", "_starts", "_strings", "_texts")

    #: The most NodeSource entries one row or list may expand to. Rows can share children, so a
    #: hostile table of a few hundred bytes could otherwise describe a text of 2**60 entries.
    #: Real provenance (a few passes deep) is many orders of magnitude below this.
    MAX_ENTRIES = 1 << 20

    def __init__(self, strings: Sequence[str], table: Any) -> None:
        self._strings = strings
        self._cols: tuple[Sequence[int], ...] = (
            table.name,
            table.target,
            table.graph_id,
            table.pass_name,
            table.action,
            table.children,
        )
        starts = [0]
        total = 0
        for n in table.child_count:
            total += n
            starts.append(total)
        self._starts = starts
        self._texts: dict[int, str] = {}
        self._sizes: dict[int, int] = {}
        self._chars: dict[int, int] = {}
        self._lists: dict[tuple[int, ...], str] = {}

    def children(self, row: int) -> Sequence[int]:
        """The rows of ``row``'s own ``from_node`` list."""
        return self._cols[5][self._starts[row] : self._starts[row + 1]]

    def _fill(self, row: int) -> None:
        texts, todo, stack = self._texts, set(), [row]
        while stack:
            r = stack.pop()
            if r in texts or r in todo:
                continue
            todo.add(r)
            for c in self.children(r):
                if c >= r:
                    raise ValueError(f"provenance row {r} has child {c}, which is not an earlier row")
                stack.append(c)
        # Count what each row expands to before building any text.
        sizes, chars = self._sizes, self._chars
        s = self._strings
        name, target, graph_id, pass_name, action, _ = self._cols
        for r in sorted(todo):
            size = sizes[r] = 1 + sum(sizes[c] for c in self.children(r))
            if size > self.MAX_ENTRIES:
                raise ValueError(
                    f"provenance row {r} expands to {size} entries, more than the {self.MAX_ENTRIES} a row may hold"
                )
            # Characters of its text, children included, before any of it is built.
            enc = encode_basestring_ascii
            own = sum(len(enc(s[col[r]])) for col in (name, target, pass_name, action))
            own += _ENTRY_OVERHEAD + len(int.__repr__(graph_id[r]))
            chars[r] = own + sum(chars[c] + 2 for c in self.children(r))
            check_rendered(chars[r], f"provenance row {r}", source=None, where=f"$.provenance[{r}]")
        for r in sorted(todo):
            kids = ", ".join(texts[c] for c in self.children(r))
            texts[r] = _entry_text((s[name[r]], s[target[r]], graph_id[r], s[pass_name[r]], s[action[r]]), kids)

    def text(self, row: int) -> str:
        """One NodeSource row as a JSON object."""
        text = self._texts.get(row)
        if text is None:
            self._fill(row)
            text = self._texts[row]
        return text

    def render(self, rows: Iterable[int]) -> str:
        """A ``from_node`` list of rows, as torch's JSON text (one string object per distinct list)."""
        key = tuple(rows)
        text = self._lists.get(key)
        if text is None:
            for row in key:
                self.text(row)
            total = sum(self._sizes[row] for row in key)
            if total > self.MAX_ENTRIES:
                raise ValueError(f"a from_node list expands to {total} entries, more than {self.MAX_ENTRIES}")
            chars = sum(self._chars[row] + 2 for row in key)
            check_rendered(chars, "a from_node list", source=None, where="from_node")
            text = self._lists[key] = "[" + ", ".join(map(self.text, key)) + "]"
        return text

    def entries(self, rows: Iterable[int]) -> list[Provenance]:
        """A ``from_node`` list of rows, as :class:`Provenance` trees (shared rows give shared tuples)."""
        built: dict[int, Provenance] = {}
        s = self._strings
        name, target, graph_id, pass_name, action, _ = self._cols
        out = []
        for row in rows:
            self.text(row)  # checks the rows below it
            todo, stack = set(), [row]
            while stack:
                r = stack.pop()
                if r not in built and r not in todo:
                    todo.add(r)
                    stack.extend(self.children(r))
            for r in sorted(todo):
                kids = tuple(built[c] for c in self.children(r))
                built[r] = Provenance(s[name[r]], s[target[r]], graph_id[r], s[pass_name[r]], s[action[r]], kids)
            out.append(built[row])
        return out
