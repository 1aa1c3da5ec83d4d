"""Applying a mapping to the spans of one trace: :func:`map_trace`.

For each pipeline component (in pipeline order, so the router's routes are known when a
component is ``required: when_routed``): select its spans, pick among them, extract each step
field from the chosen span(s) — trying the alternatives of each extractor in turn — and record
everything in a :class:`~evalharness.spans.mapped.Mapped`. The rules
(docs/traces-mapping.md, "The rules"):

* **Choosing** (:func:`_choose`): ``pick: last`` is the candidate that *ends* last (the call
  whose output came last), ``first`` the one that starts first; candidates ``pass_over``
  matches that record no primary value (an LLM call that only asks for tools) are passed over
  while another records it. An ``ambiguous`` problem only where the choice could be wrong
  (:func:`_doubt`): a declared pick on a span without the value while another has it, or the
  implicit default among candidates with different values.
* **An enclosing span's value**: extractors with ``up`` read it from the spans around the
  chosen span, nearest first, when the chosen span records nothing (:meth:`_Context.read`).
* **Latency** is the chosen span's duration (the union of the intervals of several chosen
  spans, and of the reranker span whose output became the retriever's final ranking). A
  span that ends before it starts leaves the step without one — never a made-up 0 — and an
  ``invalid`` problem names the span and both times.
* **Tokens** are summed over the *outermost* spans that report usage in the chosen span's
  subtree (the span itself, else its descendants): a chain that reports its children's total
  (LangSmith) is counted once, and a provider's span under a framework's LLM span
  (OpenLLMetry) is not counted again. :data:`USAGE_KEYS` and :data:`NESTED_USAGE_KEYS` say
  which attributes report usage.
* **Own work**: a component's latency and tokens leave out the spans of other components
  inside its chosen span, and are measured on the innermost match of its selector when the
  chosen (outermost) match holds another component's span beside it (:func:`_own_work`); a
  warning says when the components' tokens still exceed the trace's.
* A value that is ``__REDACTED__`` (or another marker under ``redacted:``), or absent from a
  chosen span (content capture off), never becomes an empty answer: the step gets an ``error``
  that says so. A chosen span whose status is ERROR makes the step's ``error``.
* A component whose selector matches nothing did not run (no step), unless it is required —
  then its step is an error. A trace where no component matches any span is unmappable: the
  :class:`Mapped` has ``error`` (and ``trace.error``) with the reason per component.
* Parent ids that go round in a cycle (a span its own parent, or its own ancestor) are an
  :class:`~evalharness.errors.InputError` naming the spans. Every walk of a trace's tree —
  depths, ``outermost``, ``descendant_of``, ``ancestor_of``, the subtree ``from`` reads — is
  linear in its spans, however deep the tree.
"""

from __future__ import annotations

import ast
import copy
import functools
import json
import math
import re
from collections.abc import Callable, Sequence
from collections.abc import Mapping as MappingABC
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import InputError
from evalharness.locate import short
from evalharness.models import (
    BUILTIN_STEPS,
    GeneratorStep,
    RetrieverStep,
    RouterStep,
    Trace,
    Usage,
)
from evalharness.pipeline import Pipeline
from evalharness.spans import access
from evalharness.spans.access import MISSING, Many, Token
from evalharness.spans.mapped import (
    ComponentExplanation,
    Mapped,
    Problem,
    SpanRef,
    ValueSource,
)
from evalharness.spans.mapping import (
    PRIMARY,
    TARGETS,
    ComponentMapping,
    Extractor,
    Mapping,
    MappingSpec,
    PickBy,
    Selector,
    ValueTest,
    alternatives_of,
    resolve_mapping,
)
from evalharness.spans.model import Span

# --------------------------------------------------------------------------------------------
# The span tree
# --------------------------------------------------------------------------------------------


LISTED_SPANS = 8
"""Span ids an error about a cycle of parent ids names (and how many more there are)."""


class _Tree:
    """The spans of one trace, ordered by start time, with parents and children.

    Every walk of it is linear in the spans: depths come from one breadth-first pass from
    the roots, and a span id is expanded once however many spans share it (an export
    concatenated with itself). Parent ids that go round in a cycle are an
    :class:`~evalharness.errors.InputError` naming the spans: a span cannot be its own
    ancestor, and no walk of such a tree ends.
    """

    def __init__(self, spans: Sequence[Span]) -> None:
        ids = {s.span_id for s in spans}
        self.parent: dict[str, str | None] = {
            s.span_id: s.parent_id if s.parent_id in ids else None for s in spans}
        below: dict[str, list[str]] = {}
        for sid, p in self.parent.items():
            if p is not None:
                below.setdefault(p, []).append(sid)
        self.order = [sid for sid, p in self.parent.items() if p is None]
        """Span ids, every parent before its children (breadth first from the roots)."""
        self.depth: dict[str, int] = dict.fromkeys(self.order, 0)
        for sid in self.order:  # the list grows while it is walked
            d = self.depth[sid] + 1
            for child in below.get(sid, ()):
                self.depth[child] = d
                self.order.append(child)
        if len(self.depth) < len(self.parent):
            raise _cycle_error(spans, self.parent, self.depth)
        indexed = list(enumerate(spans))
        indexed.sort(key=lambda p: (p[1].start_ns if p[1].start_ns is not None else 0,
                                    self.depth[p[1].span_id], p[0]))
        self.spans = [s for _, s in indexed]
        self.by_id = {s.span_id: s for s in self.spans}
        self.pos = {s.span_id: i for i, s in enumerate(self.spans)}
        self.children: dict[str, list[Span]] = {}
        for s in self.spans:
            p = self.parent[s.span_id]
            if p is not None:
                self.children.setdefault(p, []).append(s)
        roots = [s for s in self.spans if self.parent[s.span_id] is None]
        self.root = roots[0] if roots else self.spans[0]

    def subtree(self, span: Span) -> list[Span]:
        """``span`` and every span below it, in start order."""
        out, stack, expanded = [], [span], set()
        while stack:
            s = stack.pop()
            out.append(s)
            if s.span_id not in expanded:
                expanded.add(s.span_id)
                stack.extend(self.children.get(s.span_id, ()))
        out.sort(key=lambda s: self.pos[s.span_id])
        return out

    def enclosing(self, span: Span) -> list[Span]:
        """The spans that enclose ``span``, nearest first — its parent, its parent's parent…
        — then the trace's root when it is not among them (``span`` sits in a subtree whose
        parent was not recorded)."""
        out: list[Span] = []
        p = self.parent[span.span_id]
        while p is not None:
            out.append(self.by_id[p])
            p = self.parent[p]
        if span is not self.root and self.root not in out:
            out.append(self.root)
        return out

    def under(self, marked: Callable[[Span], bool]) -> dict[str, bool]:
        """Span id -> whether the span or one of its ancestors is ``marked``, for every span:
        one pass, parents first."""
        out: dict[str, bool] = {}
        for sid in self.order:
            p = self.parent[sid]
            out[sid] = (p is not None and out[p]) or marked(self.by_id[sid])
        return out

    def nested(self, found: Sequence[Span]) -> set[str]:
        """Ids of the spans of ``found`` that have an ancestor in ``found``. A walk up stops
        at the first span whose answer is known, so each span is walked past once."""
        ids = {s.span_id for s in found}
        known: dict[str, bool] = {}  # a span not in ``found`` -> whether an ancestor is
        out: set[str] = set()
        for s in found:
            path = []
            p = self.parent[s.span_id]
            while p is not None and p not in ids and p not in known:
                path.append(p)
                p = self.parent[p]
            hit = p is not None and (p in ids or known[p])
            known.update(dict.fromkeys(path, hit))
            if hit:
                out.add(s.span_id)
        return out

    def above(self, marked: Callable[[Span], bool]) -> set[str]:
        """Ids of the spans with a descendant that is ``marked`` (a test of a span): each
        ancestor is marked once, so all of it is linear."""
        out: set[str] = set()
        for sid in reversed(self.order):
            if sid in out or marked(self.by_id[sid]):
                p = self.parent[sid]
                if p is not None:
                    out.add(p)
        return out


def _cycle_error(spans: Sequence[Span], parent: dict[str, str | None],
                 reached: dict[str, int]) -> InputError:
    """The error of parent ids that go round: the first cycle, its spans and where they were
    read. Every span not reached from a root leads up into a cycle (each has one parent)."""
    by_id = {s.span_id: s for s in spans}
    start = next(s.span_id for s in spans if s.span_id not in reached)
    path: dict[str, int] = {}
    sid: str | None = start
    while sid not in path:
        path[sid] = len(path)
        sid = parent[sid]
    ring = list(path)[path[sid]:]
    first = by_id[ring[0]]
    where = f"{first.source}: " if first.source else ""
    trace = f"trace {first.trace_id}"
    if len(ring) == 1:
        return InputError(
            f"{where}{trace}: span {ring[0]} (`{first.name}`) names itself as its parent "
            "(its parent id is its own span id); a span cannot be its own parent, and no "
            "tree of spans can be built from it. Fix the export's parent ids (or leave that "
            "span out)")
    shown = ring[:LISTED_SPANS] + [ring[0]]
    more = (f" … ({len(ring)} spans in the cycle)" if len(ring) > LISTED_SPANS else "")
    sources = list(dict.fromkeys(by_id[i].source for i in ring if by_id[i].source))
    read = (f"; read at {'; '.join(sources[:3])}" + (" …" if len(sources) > 3 else "")
            if sources and sources != [first.source] else "")
    return InputError(
        f"{where}{trace}: the spans' parent ids go round in a cycle: "
        f"{' → '.join(shown[:-1])}{more} → {shown[-1]} (each arrow from a span to its "
        f"parent{read}); a span cannot be its own ancestor, and no tree of spans can be "
        "built from them. Fix the export's parent ids")


# --------------------------------------------------------------------------------------------
# Selecting spans, reading values
# --------------------------------------------------------------------------------------------


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _kind(span: Span) -> str:
    """The span's kind; an OpenInference span read without one has it as an attribute."""
    kind = span.kind or span.attributes.get("openinference.span.kind")
    return kind if isinstance(kind, str) else ""


def _test(value: Any, cond: Any) -> bool:
    present = value is not MISSING and value is not None
    if not isinstance(cond, ValueTest):
        return present and _as_text(value) == _as_text(cond)
    if cond.exists is not None and present != cond.exists:
        return False
    if not present:  # only `exists: false` holds for an absent value
        return cond.equals is None and cond.regex is None and cond.in_ is None
    text = (_as_text(value) if not isinstance(value, (dict, list))
            else json.dumps(value, default=str))
    if cond.equals is not None and text != _as_text(cond.equals):
        return False
    if cond.regex is not None and not re.search(cond.regex, text):
        return False
    return not (cond.in_ is not None and text not in {_as_text(v) for v in cond.in_})


class _Context:
    """What selecting and extracting need besides the spans: the resolved mapping's settings
    and per-trace caches."""

    def __init__(self, mapping: Mapping, tree: _Tree) -> None:
        self.mapping = mapping
        self.tree = tree
        self._matches: dict[tuple[int, str], bool] = {}
        self._under: dict[int, dict[str, bool]] = {}
        self._above: dict[int, set[str]] = {}

    # -- selectors ---------------------------------------------------------------------------

    def matches(self, sel: Selector, span: Span) -> bool:
        key = (id(sel), span.span_id)
        if key not in self._matches:
            self._matches[key] = self._matches_now(sel, span)
        return self._matches[key]

    def _matches_now(self, sel: Selector, span: Span) -> bool:
        if sel.kind is not None:
            kinds = [sel.kind] if isinstance(sel.kind, str) else sel.kind
            if _kind(span).lower() not in {k.lower() for k in kinds}:
                return False
        if sel.name is not None and not re.search(sel.name, span.name):
            return False
        if sel.scope is not None and not re.search(sel.scope, span.scope or ""):
            return False
        if sel.status is not None and (span.status or "UNSET") != sel.status:
            return False
        if sel.root is not None and (span is self.tree.root) != sel.root:
            return False
        for key, cond in sel.attributes.items():
            value = access.walk(span.attributes, _key_tokens(key))
            if not _test(value, cond):
                return False
        for key, cond in sel.metadata.items():
            if not _test(self.metadata(span, key), cond):
                return False
        if sel.has is not None:
            got = self.read(span, alternatives_of(sel.has))
            if got is None or (isinstance(got.value, (list, dict)) and not got.value):
                return False
        if sel.not_ is not None and self.matches(sel.not_, span):
            return False
        if sel.any_of is not None and not any(self.matches(s, span) for s in sel.any_of):
            return False
        if sel.descendant_of is not None and not self._below_match(sel.descendant_of, span):
            return False
        return sel.ancestor_of is None or span.span_id in self._above_match(sel.ancestor_of)

    def _below_match(self, sel: Selector, span: Span) -> bool:
        """Whether an ancestor of ``span`` matches ``sel`` (decided for every span at once)."""
        under = self._under.get(id(sel))
        if under is None:
            under = self._under[id(sel)] = self.tree.under(lambda s: self.matches(sel, s))
        parent = self.tree.parent[span.span_id]
        return parent is not None and under[parent]

    def _above_match(self, sel: Selector) -> set[str]:
        """Ids of the spans with a descendant that matches ``sel``."""
        above = self._above.get(id(sel))
        if above is None:
            above = self._above[id(sel)] = self.tree.above(lambda s: self.matches(sel, s))
        return above

    def metadata(self, span: Span, key: str) -> Any:
        for tokens in self.mapping.metadata_fields:
            value = access.read_field(span, [*tokens, Token("name", key, quoted=True)])
            if value is not MISSING:
                return value
        return MISSING

    def select(self, sel: Selector, within: Sequence[Span] | None = None
               ) -> tuple[list[Span], int]:
        """Spans matching ``sel`` (in ``within``, else the trace), in start order; and how many
        nested matches ``outermost`` dropped."""
        pool = self.tree.spans if within is None else list(within)
        if within is not None and sel.root and self.tree.root not in pool:
            pool = [self.tree.root, *pool]
        found = [s for s in pool if self.matches(sel, s)]
        if not sel.outermost:
            return found, 0
        nested = self.tree.nested(found)
        kept = [s for s in found if s.span_id not in nested]
        return kept, len(found) - len(kept)

    # -- values ------------------------------------------------------------------------------

    def raw(self, span: Span, ex: Extractor) -> Any:
        """The extractor's value in ``span`` after its modifiers, or MISSING."""
        if ex.constant:
            return copy.deepcopy(ex.value)
        value = access.read_field(span, ex._field) if ex._field is not None else MISSING
        if value is not MISSING and ex._path is not None:
            value = access.walk(value, ex._path)
        if isinstance(value, Many):
            value = list(value)
        if value is MISSING:
            return MISSING
        return _modify(value, ex)

    def read(self, span: Span, alternatives: list[Extractor] | None,
             convert: Any = None) -> _Got | None:
        """The first alternative that yields a usable value from ``span`` (or the spans its
        ``from`` names); ``None`` when none does. Redacted and unconvertible values are kept
        as problems and the next alternative tried. Alternatives with ``up`` are a fallback:
        tried only when the others find nothing at all in ``span`` and it did not fail, on the
        spans enclosing it, nearest first (:meth:`_read_up`)."""
        if not alternatives:
            return None
        got = self._read(span, [ex for ex in alternatives if ex.up is None], convert)
        above = [ex for ex in alternatives if ex.up is not None]
        if got is not None or not above or span.status == "ERROR":
            return got
        return self._read_up(span, above, convert)

    def _read_up(self, span: Span, above: list[Extractor], convert: Any) -> _Got | None:
        """The value of the nearest enclosing span that an ``up`` alternative finds it in; a
        redaction is remembered (the content was hidden), an unusable value on an enclosing
        span is not (it is that span's own output, not this component's)."""
        redacted: _Got | None = None
        for s in self.tree.enclosing(span):
            here = [ex for ex in above if self.matches(ex.up, s)]
            got = self._read(s, here, convert) if here else None
            if got is not None and got.ok:
                return got
            if got is not None and got.redacted:
                redacted = redacted or got
        return redacted

    def _read(self, span: Span, alternatives: list[Extractor], convert: Any) -> _Got | None:
        first_problem: _Got | None = None
        below: list[Span] | None = None
        for ex in alternatives:
            if ex._field is None and not ex.constant:
                continue
            if ex.from_ is not None:
                below = below if below is not None else self.tree.subtree(span)
                pool, _ = self.select(ex.from_, below)
                if ex.pick == "last":
                    pool = list(reversed(pool))
            else:
                pool = [span]
            for s in pool:
                value = self.raw(s, ex)
                if value is MISSING or value is None or value == "" or (
                        isinstance(value, list) and value and all(v is None for v in value)):
                    continue
                if _is_redacted(value, self.mapping.redacted):
                    first_problem = first_problem or _Got(value, s, ex, redacted=True)
                    continue
                if convert is not None:
                    try:
                        value = convert(value)
                    except (_Invalid, TypeError, ValueError) as exc:
                        first_problem = first_problem or _Got(value, s, ex, invalid=str(exc))
                        continue
                return _Got(value, s, ex)
        return first_problem


@dataclass
class _Got:
    value: Any
    span: Span
    extractor: Extractor
    redacted: bool = False
    invalid: str | None = None

    @property
    def ok(self) -> bool:
        return not self.redacted and self.invalid is None

    def source(self) -> ValueSource:
        return ValueSource(span=SpanRef.of(self.span), extractor=self.extractor.describe())


@functools.lru_cache(maxsize=1024)
def _key_tokens(key: str) -> list[Token]:
    """An attribute key as path tokens: its dotted parts (matched greedily), or the key
    whole when it has characters a name cannot."""
    if re.fullmatch(r"[^\[\]\"'\s]+", key):
        return access.parse(f"$.{key}", field=False)
    return [Token("name", key, quoted=True)]


class _Invalid(ValueError):
    """A value that does not convert to its step field's type."""


def _modify(value: Any, ex: Extractor) -> Any:
    if ex.parse is not None and isinstance(value, str):
        try:
            value = (jsonlimits.loads(value) if ex.parse == "json"
                     else access.plain(ast.literal_eval(value)))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return MISSING
    if ex.regex is not None:
        value = _regex_take(value, ex.regex)
        if value is MISSING:
            return MISSING
    if ex.map is not None:
        value = ([_map_one(v, ex.map) for v in value] if isinstance(value, list)
                 else _map_one(value, ex.map))
    if ex.take is not None and isinstance(value, list):
        items = [v for v in value if v is not None]
        if not items:
            return MISSING
        value = items[0] if ex.take == "first" else items[-1]
    if ex.join is not None and isinstance(value, list):
        value = ex.join.join(_as_text(v) if not isinstance(v, str) else v
                             for v in value if v is not None)
    return value


def _regex_one(text: str, pattern: str) -> Any:
    m = re.search(pattern, text, re.DOTALL)
    if not m:
        return MISSING
    if "value" in m.re.groupindex:
        return m.group("value")
    return m.group(1) if m.re.groups else m.group(0)


def _regex_take(value: Any, pattern: str) -> Any:
    if isinstance(value, list):
        out = [_regex_one(v, pattern) for v in value if isinstance(v, str)]
        out = [v for v in out if v is not MISSING]
        return out if out else MISSING
    if isinstance(value, (dict,)):
        return MISSING
    return _regex_one(_as_text(value), pattern)


def _map_one(value: Any, table: dict[str, Any]) -> Any:
    if isinstance(value, (dict, list)) or value is None:
        return value
    return table.get(_as_text(value), value)


def _is_redacted(value: Any, markers: set[str]) -> bool:
    if isinstance(value, str):
        return value.strip() in markers
    if isinstance(value, list):
        return any(_is_redacted(v, markers) for v in value)
    if isinstance(value, dict):
        return any(_is_redacted(v, markers) for v in value.values())
    return False


# --------------------------------------------------------------------------------------------
# Converting values to step fields
# --------------------------------------------------------------------------------------------


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) or v is None for v in value):
        return "".join(v for v in value if v)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _as_text(value)
    raise _Invalid(f"expected a text, found {type(value).__name__} {short(value)}")


def _list_of_texts(value: Any) -> list[str | None]:
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return [_as_text(value)]
    if not isinstance(value, list):
        raise _Invalid(f"expected a list, found {type(value).__name__} {short(value)}")
    out: list[str | None] = []
    for v in value:
        if v is None or isinstance(v, str):
            out.append(v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(_as_text(v))
        else:
            raise _Invalid(f"expected texts, found {type(v).__name__} {short(v)}")
    return out


def _number(value: Any) -> float:
    if isinstance(value, bool):
        raise _Invalid(f"expected a number, found {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise _Invalid(f"expected a number, found {short(value)}") from None
    if not math.isfinite(number):
        raise _Invalid(f"expected a finite number, found {value!r}")
    return number


def _numbers(value: Any) -> list[float | None]:
    if not isinstance(value, list):
        value = [value]
    return [None if v is None else _number(v) for v in value]


def _rows(value: Any) -> tuple[list[list[Any]], list[str] | None]:
    if isinstance(value, str):
        text = value.strip()
        parsed: Any = MISSING
        for parser in (jsonlimits.loads, ast.literal_eval):
            try:
                parsed = parser(text)
                break
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
        if parsed is MISSING:
            raise _Invalid(f"rows are a text that is neither JSON nor a Python literal: "
                           f"{short(text)}")
        value = parsed
    if isinstance(value, dict) and "rows" in value:
        cols = value.get("columns") or value.get("col_keys")
        rows, _ = _rows(value["rows"])
        return rows, [str(c) for c in cols] if isinstance(cols, list) else None
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list):
        raise _Invalid(f"rows must be a list, found {type(value).__name__} {short(value)}")
    if value and all(isinstance(r, dict) for r in value):
        columns = list(value[0])
        return [[r.get(c) for c in columns] for r in value], columns
    rows = []
    for r in value:
        if isinstance(r, (list, tuple)):
            rows.append(list(r))
        else:
            rows.append([r])
    return rows, None


def _routes(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [str(k) for k, v in value.items() if v]
    return [t for t in _list_of_texts(value) if t]


def _route_scores(value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        raise _Invalid(f"router scores must be a record route -> score, found {short(value)}")
    return {str(k): _number(v) for k, v in value.items()}


def _confidence(value: Any) -> float:
    number = _number(value)
    if not 0 <= number <= 1:
        raise _Invalid(f"a confidence must be in [0, 1], found {number}")
    return number


_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def _sql(value: Any) -> str:
    text = _text_of(value).strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1).strip()
    if not text:
        raise _Invalid("the SQL is empty")
    return text


def _ids(value: Any) -> list[str | None]:
    return _list_of_texts(value)


def _contexts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise _Invalid(f"contexts must be a list of texts, found {short(value)}")
    return [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
            for v in value if v is not None]


CONVERTERS: dict[str, Any] = {
    "routes": _routes, "confidence": _confidence, "sql": _sql, "columns": _list_of_texts,
    "ids": _ids, "texts": _list_of_texts, "answer": _text_of, "contexts": _contexts,
    "latency_ms": _number, "prompt_tokens": _number, "completion_tokens": _number,
}


def _converter(kind: str, target: str) -> Any:
    if target == "scores":
        return _route_scores if kind == "router" else _numbers
    if target == "rows":
        return _rows
    return CONVERTERS.get(target)


# --------------------------------------------------------------------------------------------
# Usage and latency
# --------------------------------------------------------------------------------------------

USAGE_KEYS: tuple[tuple[str, str], ...] = (
    ("llm.token_count.prompt", "llm.token_count.completion"),          # OpenInference
    ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"),       # OTel GenAI
    ("gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens"),  # GenAI <= 1.26
    ("llm.usage.prompt_tokens", "llm.usage.completion_tokens"),        # early OpenLLMetry
)
"""Flat attribute pairs (prompt, completion) that report a span's token usage, first found."""

NESTED_USAGE_KEYS: tuple[tuple[str, str], ...] = (
    ("prompt_tokens", "completion_tokens"),   # LangSmith, OpenAI
    ("input_tokens", "output_tokens"),        # LangChain usage_metadata, Anthropic
    ("input", "output"),                      # Langfuse usage / usageDetails
    ("promptTokens", "completionTokens"),     # Langfuse (camelCase)
)
"""Keys of a nested ``usage`` record (Langfuse, LangSmith), first pair found."""


def span_usage(span: Span) -> tuple[int, int] | None:
    """``(prompt, completion)`` tokens a span reports itself, or ``None``.

    >>> span_usage(Span(trace_id="t", span_id="s", parent_id=None, name="x",
    ...                 attributes={"gen_ai.usage.input_tokens": 12}))
    (12, 0)
    """
    attrs = span.attributes
    for p, c in USAGE_KEYS:
        if p in attrs or c in attrs:
            return _count(attrs.get(p)), _count(attrs.get(c))
    for key in ("usage", "usage_details", "usageDetails"):
        record = attrs.get(key)
        if isinstance(record, dict):
            for p, c in NESTED_USAGE_KEYS:
                if p in record or c in record:
                    return _count(record.get(p)), _count(record.get(c))
    return None


def _count(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def _usage_over(tree: _Tree, spans: Sequence[Span], skip: set[str] = frozenset()
                ) -> tuple[tuple[int, int], int] | None:
    """Tokens of the outermost usage-reporting spans under ``spans`` (not under the spans
    ``skip`` names); and how many spans."""
    total_p = total_c = n = 0
    seen: set[str] = set(skip)
    for top in spans:
        stack = [top]
        while stack:
            s = stack.pop()
            if s.span_id in seen:
                continue
            seen.add(s.span_id)
            got = span_usage(s)
            if got is not None:
                total_p += got[0]
                total_c += got[1]
                n += 1
                continue
            stack.extend(tree.children.get(s.span_id, ()))
    return ((total_p, total_c), n) if n else None


def _latency(spans: Sequence[Span]) -> float | None:
    """Wall-clock milliseconds covered by the spans (the union of their intervals); ``None``
    when no span has both times, or one ends before it starts (its time is not known).

    >>> def at(start, end):
    ...     return Span(trace_id="t", span_id="s", parent_id=None, name="x",
    ...                 start_ns=start * 1_000_000, end_ns=end * 1_000_000)
    >>> _latency([at(0, 10), at(5, 20), at(30, 40)]), _latency([at(0, 10), at(30, 20)])
    (30.0, None)
    """
    intervals = [(s.start_ns, s.end_ns) for s in spans
                 if s.start_ns is not None and s.end_ns is not None]
    if not intervals or any(end < start for start, end in intervals):
        return None
    return sum(end - start for start, end in _merged(intervals)) / 1e6


def _inverted(span: Span) -> str | None:
    """What is wrong with the times of a span that ends before it starts (else ``None``)."""
    if span.start_ns is None or span.end_ns is None or span.end_ns >= span.start_ns:
        return None
    return (f"span {SpanRef.of(span).label()} ends before it starts (start "
            f"{iso_time(span.start_ns)}, end {iso_time(span.end_ns)}): its duration is "
            "unknown, so the step has no latency_ms")


def iso_time(ns: int) -> str:
    """Nanoseconds since the epoch as an ISO 8601 UTC time, to the nanosecond.

    >>> iso_time(1_714_564_800_050_000_001)
    '2024-05-01T12:00:00.050000001Z'
    """
    moment = datetime.fromtimestamp(ns // 1_000_000_000, UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{ns % 1_000_000_000:09d}Z"


# --------------------------------------------------------------------------------------------
# Mapping a trace
# --------------------------------------------------------------------------------------------


def _compact(model: BaseModel | None) -> str:
    if model is None:
        return ""
    data = model.model_dump(by_alias=True, exclude_defaults=True, exclude_none=True)
    return yaml.safe_dump(data, default_flow_style=True, width=10**6, sort_keys=False).strip()


def _exception_text(span: Span) -> str | None:
    for event in reversed(span.events):
        if event.name == "exception":
            etype = event.attributes.get("exception.type")
            message = event.attributes.get("exception.message")
            if etype or message:
                return f"{etype}: {message}" if etype and message else str(etype or message)
    return span.status_message or None


@dataclass
class _Component:
    """Work area for one component while its step is built."""

    name: str
    kind: str
    explanation: ComponentExplanation
    chosen: list[Span] = field(default_factory=list)
    step: dict[str, Any] | None = None
    extra_spans: list[Span] = field(default_factory=list)
    work: dict[str, Span] = field(default_factory=dict)
    """Chosen span id -> the innermost match nested in it, which does the component's work
    (a router's query span that passes the text-to-SQL engine's response through)."""
    overridden: set[str] = field(default_factory=set)
    """``latency_ms`` and/or ``usage`` when the mapping's own extractors gave them."""


def map_trace(spans: Sequence[Span], mapping: Mapping | MappingSpec | None,
              pipeline: Pipeline, *,
              step_models: MappingABC[str, type[BaseModel]] | None = None) -> Mapped:
    """Map the spans of one trace onto ``pipeline``'s components.

    :param spans: every span of one trace (any order).
    :param mapping: a resolved :class:`Mapping`; a :class:`MappingSpec` or ``None`` is
        resolved here, guessing the preset from ``spans`` when it names none.
    :param pipeline: the scenario's pipeline (component names, kinds, routes, order).
    :param step_models: kind -> step model for plugin kinds, to keep only the fields their
        step declares.
    :returns: the :class:`Mapped` trace. A trace where no component maps has ``error`` (and
        ``trace.error``) set with the reason per component; it is not raised.
    """
    if not spans:
        raise ValueError("map_trace needs the spans of one trace; got none")
    trace_ids = {s.trace_id for s in spans}
    if len(trace_ids) > 1:
        raise ValueError(f"map_trace maps one trace at a time; got spans of {len(trace_ids)} "
                         f"traces ({', '.join(sorted(trace_ids)[:3])}…)")
    if not isinstance(mapping, Mapping):
        mapping = resolve_mapping(mapping, spans=spans)
    tree = _Tree(spans)
    ctx = _Context(mapping, tree)
    trace_id = spans[0].trace_id
    mapped = Mapped(trace=Trace(case_id=trace_id), trace_id=trace_id, preset=mapping.preset,
                    preset_reason=mapping.preset_reason)

    _question_and_join(ctx, mapped)
    if tree.root.status == "ERROR":
        message = _exception_text(tree.root) or "the root span's status is ERROR"
        mapped.trace.error = message
        mapped.problems.append(Problem(kind="error", message=f"the application failed: "
                                       f"{message} (root span {SpanRef.of(tree.root).label()})"))

    kinds = {name: pipeline.kind(name) for name in pipeline.order}
    has_reranker_component = any(k == "reranker" for k in kinds.values())
    done: dict[str, _Component] = {}
    routed: set[str] | None = None
    route_targets = pipeline.routes()
    for name in pipeline.order:
        kind = kinds[name]
        block, origin = mapping.block(name, kind)
        comp = _Component(name, kind, ComponentExplanation(
            component=name, kind=kind, status="mapped", origin=origin,
            selector=_compact(block.select) if block is not None else ""))
        done[name] = comp
        if block is None or block.select is None:
            comp.explanation.status = "unmapped"
            comp.explanation.why = (f"no selector for this component (kind {kind}) in the "
                                    "mapping" + (f" or preset {mapping.preset}"
                                                 if mapping.preset else ""))
            continue
        _choose(ctx, comp, block)
        if not comp.chosen:
            required = block.required
            if required is None:
                required = "when_routed" if any(name in t for t in route_targets.values()) \
                    else False
            needed = required is True or (required == "when_routed" and routed is not None
                                          and name in routed)
            if needed:
                why = ("the mapping requires it" if required is True else
                       "the router chose a route that runs it")
                comp.explanation.status = "error"
                message = (f"no span in the trace matches the selector of `{name}` "
                           f"({comp.explanation.selector}) although {why}")
                comp.step = {"error": message}
                comp.explanation.problems.append(Problem(kind="missing", message=message))
            else:
                comp.explanation.status = "not_run"
                comp.explanation.why = ("no span matches the selector: the component did not "
                                        "run in this trace")
            continue
        _extract(ctx, comp, block, pipeline, done, has_reranker_component, mapping)
        if kind == "router" and comp.step and comp.step.get("routes"):
            routed = set()
            for route in comp.step["routes"]:
                routed.update(route_targets.get(route, ()))
            unknown = [r for r in comp.step["routes"] if route_targets and r not in route_targets]
            if unknown:
                comp.explanation.problems.append(Problem(
                    kind="invalid", field="routes",
                    message=f"route(s) {', '.join(map(repr, unknown))} are not routes of the "
                            f"pipeline ({', '.join(route_targets)}); add a `map` to the "
                            "`routes` extractor"))

    mapped.components = {name: c.explanation for name, c in done.items()}
    if not any(c.chosen for c in done.values()):
        reasons = "; ".join(
            f"{c.name}: " + (c.explanation.why or c.explanation.problems[0].message
                             if c.explanation.why or c.explanation.problems
                             else c.explanation.status)
            for c in done.values())
        mapped.error = (f"no component of the pipeline could be mapped in trace {trace_id} "
                        f"(preset {mapping.preset or 'none'}): {reasons}")
        mapped.trace.error = mapped.error
        return mapped
    mapped.problems += _own_work(ctx, done)
    mapped.components = {name: c.explanation for name, c in done.items()}
    _assemble_trace(mapped, done, step_models)
    if mapped.join_key is not None:
        mapped.trace.case_id = mapped.join_key
    return mapped


def _question_and_join(ctx: _Context, mapped: Mapped) -> None:
    root = ctx.tree.root
    for attr in ("question", "join"):
        alternatives = getattr(ctx.mapping, attr)
        if not alternatives:
            continue
        got = ctx.read(root, alternatives, convert=_text_of)
        if got is None:
            if attr == "question":
                mapped.problems.append(Problem(
                    kind="missing", field="question",
                    message="the question is not in the trace (looked in "
                            + ", ".join(e.describe() for e in alternatives) + ")"))
            continue
        if got.redacted:
            mapped.problems.append(Problem(kind="redacted", field=attr,
                                           message=f"the {attr} is redacted in the trace"))
            continue
        if got.invalid:
            mapped.problems.append(Problem(kind="invalid", field=attr, message=got.invalid))
            continue
        if attr == "question":
            mapped.question = got.value.strip()
            mapped.question_source = got.source()
        else:
            mapped.join_key = got.value.strip()
            mapped.join_source = got.source()


def _choose(ctx: _Context, comp: _Component, block: ComponentMapping) -> None:
    """Pick the span(s) of a component among its candidates (see :func:`_pick_one`), say why,
    and say when the choice could be wrong (:func:`_doubt`)."""
    found, nested = ctx.select(block.select)
    ex = comp.explanation
    ex.candidates = len(found)
    ex.nested_dropped = nested
    if not found:
        return
    pick = block.pick or "last"
    seen = (_candidate_values(ctx, comp.kind, block, found)
            if len(found) > 1 and pick != "all" else {})
    passed: list[Span] = []
    if pick == "all":
        comp.chosen = found
        ex.why = f"all {len(found)} matching span(s) (pick: all)"
    elif isinstance(pick, PickBy):
        spec = pick.max if pick.max is not None else pick.min
        scored = []
        for s in found:
            got = ctx.read(s, alternatives_of(spec), convert=_number)
            if got is not None and got.ok:
                scored.append((got.value, s))
        word = "max" if pick.max is not None else "min"
        if scored:
            best = (max if word == "max" else min)(scored, key=lambda p: p[0])
            comp.chosen = [best[1]]
            ex.why = (f"the {'highest' if word == 'max' else 'lowest'} "
                      f"{_describe_spec(spec)} ({_as_text(best[0])}) of {len(scored)} "
                      f"candidate(s) with one (pick: {{{word}: ...}})")
        else:
            comp.chosen = [_by_end(ctx.tree, found)[-1]]
            ex.why = f"no candidate has {_describe_spec(spec)}; took the last to end"
    else:
        chosen, passed = _pick_one(ctx, block, pick, found, seen)
        comp.chosen = [chosen]
        ex.why = ("the only matching span" if len(found) == 1 else
                  f"the {pick} of {len(found)} matching spans to "
                  f"{'start' if pick == 'first' else 'end'} (pick: {pick})")
        # name only the candidates `pick` would have taken instead
        order = list(found) if pick == "first" else _by_end(ctx.tree, found)
        after = order[:order.index(chosen)] if pick == "first" else \
            order[order.index(chosen) + 1:]
        named = [s for s in after if s in passed]
        if named:
            what = PRIMARY.get(comp.kind, "value")
            one = len(named) == 1
            ex.why += (f"; passed over {', '.join(SpanRef.of(s).label() for s in named)}: "
                       f"{'it records' if one else 'they record'} no {what} and "
                       f"{'matches' if one else 'match'} `pass_over` (an LLM call whose "
                       "output only asks for tools, in the presets)")
    ex.chosen = [SpanRef.of(s) for s in comp.chosen]
    ex.others = [SpanRef.of(s) for s in found if s not in comp.chosen][:10]
    if nested:
        comp.work = _innermost(ctx, block.select, comp.chosen)
    if seen:
        doubt = _doubt(comp, block, pick, found, seen, passed)
        if doubt is not None:
            ex.ambiguous = True
            ex.problems.append(doubt)
    if nested:
        ex.why += (f"; {nested} nested match{'es' if nested > 1 else ''} dropped (inside "
                   "another match: `outermost`)")


def _by_end(tree: _Tree, spans: Sequence[Span]) -> list[Span]:
    """``spans`` in the order they ended (a span without an end time, or one that ends before
    it starts, at its start); ties by start, then as read. ``pick: last`` takes the last: the
    call whose output came last — a retry after a failure, and an LLM call that encloses
    another in time although the trace does not nest them (a streamed response around a tool
    loop) — where the last to *start* would be the inner call."""
    def key(s: Span) -> tuple[int, int, int]:
        start = s.start_ns if s.start_ns is not None else 0
        end = s.end_ns if s.end_ns is not None and s.end_ns >= start else start
        return end, start, tree.pos[s.span_id]
    return sorted(spans, key=key)


@dataclass
class _Seen:
    """What one candidate records of the component's primary value (its extractors without
    ``up``): whether it records one (a redacted value counts: it was recorded, hidden), the
    value as a comparable text, and the value for messages."""

    has: bool
    key: str | None
    value: Any = None


def _candidate_values(ctx: _Context, kind: str, block: ComponentMapping,
                      found: Sequence[Span]) -> dict[str, _Seen]:
    """Span id -> :class:`_Seen` for every candidate: the primary value (``answer``, ``sql``,
    ``ids``, ``routes``), or a plugin kind's ``fields``."""
    primary = PRIMARY.get(kind)
    specs = {primary: getattr(block, primary)} if primary else dict(block.fields)
    out: dict[str, _Seen] = {}
    for s in found:
        values: dict[str, Any] = {}
        for target, spec in specs.items():
            alts = [a for a in alternatives_of(spec) or () if a.up is None]
            got = ctx.read(s, alts, convert=_converter(kind, target)) if alts else None
            if got is not None and (got.ok or got.redacted):
                values[target] = got.value
        if not values:
            out[s.span_id] = _Seen(False, None)
            continue
        shown = values[primary] if primary else values
        out[s.span_id] = _Seen(True, json.dumps(values, sort_keys=True, default=str), shown)
    return out


def _pick_one(ctx: _Context, block: ComponentMapping, pick: str, found: Sequence[Span],
              seen: dict[str, _Seen]) -> tuple[Span, list[Span]]:
    """The span ``pick`` (``first``: the first to start; ``last``: the last to end) takes
    among the candidates, passing over those ``pass_over`` matches that record no value while
    another candidate records it; and the spans passed over (all of them: none is a value)."""
    ordered = list(found) if pick == "first" else _by_end(ctx.tree, found)
    passed: list[Span] = []
    if block.pass_over is not None and any(v.has for v in seen.values()):
        passed = [s for s in ordered if not seen[s.span_id].has
                  and ctx.matches(block.pass_over, s)]
    eligible = [s for s in ordered if s not in passed] or ordered
    chosen = eligible[0] if pick == "first" else eligible[-1]
    return chosen, [s for s in passed if s is not chosen]


def _doubt(comp: _Component, block: ComponentMapping, pick: Any, found: Sequence[Span],
           seen: dict[str, _Seen], passed: Sequence[Span]) -> Problem | None:
    """An ``ambiguous`` problem when the choice among several candidates could be wrong, else
    ``None``: a declared ``pick`` (the mapping's or the preset's) that landed on a span
    without the value while another candidate has it; the implicit default when the
    candidates carry different values. A chosen span that failed is the step's error, not a
    doubt; candidates ``pass_over`` set aside are not counted."""
    chosen = comp.chosen[0]
    if chosen.status == "ERROR":
        return None
    what = PRIMARY.get(comp.kind, "value")
    mine = seen[chosen.span_id]
    others = [s for s in found if s is not chosen and s not in passed]
    rule = pick if isinstance(pick, str) else "max/min"
    how = {"last": "the last to end", "first": "the first to start"}.get(
        rule, "the extreme value of its extractor")
    where = f"under components.{comp.name}"
    if block.pick is not None:
        having = [s for s in others if seen[s.span_id].has]
        if mine.has or not having:
            return None
        return Problem(kind="ambiguous", field=what, message=(
            f"the chosen span {SpanRef.of(chosen).label()} records no {what}, but "
            f"{len(having)} other candidate{'s' if len(having) > 1 else ''} "
            f"{'do' if len(having) > 1 else 'does'}: {_candidates_text(having, seen)}; it was "
            f"chosen by the declared `pick: {rule}` ({how} of {len(found)} candidates); if the "
            f"{what} is another span's, narrow `select` or set `pick` {where}"))
    keys = {seen[s.span_id].key for s in [chosen, *others]}
    if len(keys) < 2:
        return None
    differing = [s for s in others if seen[s.span_id].key != mine.key]
    return Problem(kind="ambiguous", field=what, message=(
        f"{len(others) + 1} candidate spans record {len(keys)} different {what} values; "
        f"chose {_candidates_text([chosen], seen)} by the default `pick: {rule}` "
        f"({how}); not chosen: {_candidates_text(differing, seen)}; set "
        f"`pick` or narrow `select` {where} to make the choice yours"))


def _candidates_text(spans: Sequence[Span], seen: dict[str, _Seen], limit: int = 3) -> str:
    parts = []
    for s in spans[-limit:]:
        v = seen[s.span_id]
        shown = short(v.value, 60) if v.has else "nothing recorded"
        parts.append(f"{SpanRef.of(s).label()} ({shown})")
    more = len(spans) - limit
    return "; ".join(parts) + (f"; … {more} more" if more > 0 else "")


def _innermost(ctx: _Context, sel: Selector, chosen: Sequence[Span]) -> dict[str, Span]:
    """For each chosen span with matches of the selector nested in it, the innermost one —
    when there is exactly one innermost match (one chain of nesting); else the span itself."""
    every = {s.span_id for s in ctx.tree.spans if ctx.matches(sel, s)}
    holders = ctx.tree.above(lambda s: s.span_id in every)  # matches with a match below
    out: dict[str, Span] = {}
    for top in chosen:
        inside = [s for s in ctx.tree.subtree(top)[1:] if s.span_id in every
                  and s.span_id not in holders]
        if len(inside) == 1:
            out[top.span_id] = inside[0]
    return out


def _own_work(ctx: _Context, done: dict[str, _Component]) -> list[Problem]:
    """A component's latency and tokens are its own work: measured on the innermost span that
    does it (see :func:`_innermost`), without the spans other components were mapped to
    inside it (the answer-synthesis LLM call inside a text-to-SQL engine's span). Returns a
    warning when the components' tokens still add up to more than the trace's LLM spans."""
    mapped = {name: c for name, c in done.items()
              if c.chosen and c.step is not None and "error" not in c.step}
    chosen_of = {name: c.chosen + c.extra_spans for name, c in mapped.items()}
    mine: dict[str, list[Span]] = {}
    for name, comp in mapped.items():
        others = {s.span_id for other, theirs in chosen_of.items() if other != name
                  for s in theirs}
        spans = []
        for top in comp.chosen:
            inner = comp.work.get(top.span_id)
            if inner is not None:
                # the outer match holds another component's span beside the inner match:
                # it is not this component's work (a router's query span around the engine)
                beside = {s.span_id for s in ctx.tree.subtree(top)} - {
                    s.span_id for s in ctx.tree.subtree(inner)}
                if not beside & others:
                    inner = None
            spans.append(inner or top)
        mine[name] = spans + comp.extra_spans
    for name, spans in mine.items():
        comp = done[name]
        inside = {s.span_id for top in spans for s in ctx.tree.subtree(top)}
        foreign = [s for other, theirs in mine.items() if other != name for s in theirs
                   if s.span_id in inside and s not in spans]
        nested_ids = ctx.tree.nested(foreign)
        foreign = [s for s in foreign if s.span_id not in nested_ids]
        moved = spans != comp.chosen + comp.extra_spans
        if not foreign and not moved:
            continue
        owners = {s.span_id: other for other, theirs in mine.items() for s in theirs}
        notes = []
        if moved:
            notes.append("measured on " + ", ".join(
                SpanRef.of(s).label() for s in spans if s not in comp.chosen)
                + " (the innermost match of the selector)")
        if foreign:
            notes.append("without " + ", ".join(
                f"{owners[s.span_id]}'s {SpanRef.of(s).label()}" for s in foreign))
        values = comp.explanation.values
        if "latency_ms" not in comp.overridden:
            own = _latency_without(spans, foreign)
            if own is not None:
                comp.step["latency_ms"] = values["latency_ms"] = own
        if "usage" not in comp.overridden:
            usage = _usage_over(ctx.tree, spans, skip={s.span_id for s in foreign})
            if usage is None:
                comp.step.pop("usage", None)
                values.pop("usage", None)
                values.pop("usage_from", None)
            else:
                (p, c), n = usage
                comp.step["usage"] = values["usage"] = {"prompt_tokens": p,
                                                        "completion_tokens": c}
                values["usage_from"] = f"{n} span(s) reporting usage"
        comp.explanation.values["own_work"] = "; ".join(notes)
    counted = sum((u.get("prompt_tokens", 0) or 0) + (u.get("completion_tokens", 0) or 0)
                  for c in done.values() if c.step and isinstance(u := c.step.get("usage"), dict)
                  and not c.overridden & {"usage"})
    used = _usage_over(ctx.tree, [ctx.tree.root])
    if used is not None and counted > sum(used[0]):
        return [Problem(kind="invalid", field="usage", message=(
            f"the components' tokens add up to {counted:,}, more than the {sum(used[0]):,} "
            "the trace's spans report: a span's usage is counted for two components (give "
            "the components' selectors spans that do not contain each other's LLM calls)"))]
    return []


def _latency_without(spans: Sequence[Span], foreign: Sequence[Span]) -> float | None:
    """Milliseconds covered by ``spans`` and not by ``foreign`` (spans inside them).

    >>> def at(start, end):
    ...     return Span(trace_id="t", span_id=f"s{start}", parent_id=None, name="x",
    ...                 start_ns=start * 1_000_000, end_ns=end * 1_000_000)
    >>> _latency_without([at(0, 250)], [at(120, 230)])
    140.0
    """
    total = _latency(spans)
    if total is None or not foreign:
        return total
    mine = [(s.start_ns, s.end_ns) for s in spans]
    cut = 0
    for f in foreign:
        if f.start_ns is None or f.end_ns is None or f.end_ns < f.start_ns:
            return total  # its time is not known: nothing is taken away
    for lo, hi in _merged([(f.start_ns, f.end_ns) for f in foreign]):
        for a, b in mine:
            if a is not None and b is not None:
                cut += max(0, min(b, hi) - max(a, lo))
    return max(0.0, total - cut / 1e6)


def _merged(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Intervals merged where they overlap or touch, in order."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _describe_spec(spec: Any) -> str:
    alts = alternatives_of(spec) or []
    return " or ".join(e.describe() for e in alts)


def _extract(ctx: _Context, comp: _Component, block: ComponentMapping, pipeline: Pipeline,
             done: dict[str, _Component], has_reranker_component: bool,
             mapping: Mapping) -> None:
    kind, ex = comp.kind, comp.explanation
    targets = list(TARGETS.get(kind, ()))
    step: dict[str, Any] = {}
    for target in targets:
        if target == "contexts" and block.contexts in (None, "upstream"):
            continue
        alts = alternatives_of(getattr(block, target))
        if not alts:
            continue
        _extract_target(ctx, comp, kind, target, alts, step)
    for fname, spec in block.fields.items():
        _extract_target(ctx, comp, kind, fname, alternatives_of(spec), step)
    if step.get("ids") == []:  # nothing retrieved: no texts or scores to miss
        ex.problems = [p for p in ex.problems if p.field not in ("texts", "scores")]
        step.update({k: [] for k in ("texts", "scores") if k in targets and k not in step})

    if kind == "retriever" and not has_reranker_component and block.rerank is not False:
        _final_ranking(ctx, comp, mapping, step)
    if kind == "retriever" and has_reranker_component:
        rerankers = [n for n in pipeline.order if pipeline.kind(n) == "reranker"]
        ex.problems.append(Problem(kind="note", message=(
            f"the pipeline has a reranker component ({', '.join(rerankers)}): reranked "
            "documents map there; this step is the first-stage ranking")))
    if kind == "reranker":
        ex.problems.append(Problem(kind="note", message=(
            "a reranker component of the pipeline: the retriever keeps its own ranking")))
    if kind == "generator" and block.contexts in (None, "upstream"):
        _upstream_contexts(comp, pipeline, done, step)

    # Latency and tokens
    spans_for_cost = comp.chosen + comp.extra_spans
    lat = _override(ctx, comp, block.latency_ms, "latency_ms")
    if lat is not None:
        comp.overridden.add("latency_ms")
    else:
        lat = _latency(spans_for_cost)
        for span in spans_for_cost:
            inverted = _inverted(span)
            if inverted is not None:
                ex.problems.append(Problem(kind="invalid", field="latency_ms", message=inverted))
    step["latency_ms"] = lat
    p_over = _override(ctx, comp, block.prompt_tokens, "prompt_tokens")
    c_over = _override(ctx, comp, block.completion_tokens, "completion_tokens")
    usage = _usage_over(ctx.tree, spans_for_cost)
    if p_over is not None or c_over is not None:
        comp.overridden.add("usage")
        step["usage"] = {"prompt_tokens": int(p_over or 0), "completion_tokens": int(c_over or 0)}
        ex.values["usage_from"] = "the mapping's token extractors"
    elif usage is not None:
        (p, c), n = usage
        step["usage"] = {"prompt_tokens": p, "completion_tokens": c}
        ex.values["usage_from"] = f"{n} span(s) reporting usage"

    # A failed span is the step's error; otherwise an absent or redacted primary field is,
    # never an empty value.
    last = comp.chosen[-1]
    primary = PRIMARY.get(kind)
    if last.status == "ERROR":
        message = _exception_text(last) or "the span's status is ERROR"
        step.setdefault("error", f"{message} (span {SpanRef.of(last).label()})")
        ex.problems = [p for p in ex.problems if p.kind != "capture_off"]
        ex.problems.append(Problem(kind="error", message=f"the chosen span failed: {message}"))
    elif primary is not None and step.get(primary) is None and "error" not in step:
        problems = {p.field: p for p in ex.problems
                    if p.kind in ("redacted", "capture_off", "invalid", "missing")}
        if primary in problems:
            step["error"] = problems[primary].message
        elif getattr(block, primary, None) is None:
            step["error"] = (f"the mapping has no `{primary}` extractor for this {kind}; add "
                             f"one under components.{comp.name}")
    comp.step = step
    ex.values.update({k: v for k, v in step.items() if k not in ("usage",)})
    if "usage" in step:
        ex.values["usage"] = step["usage"]


def _override(ctx: _Context, comp: _Component, spec: Any, target: str) -> float | None:
    alts = alternatives_of(spec)
    if not alts:
        return None
    values = []
    for span in comp.chosen:
        got = ctx.read(span, alts, convert=_number)
        if got is not None and got.ok:
            values.append(got.value)
            comp.explanation.sources[target] = got.source()
    return sum(values) if values else None


def _capture_message(ctx: _Context, comp: _Component, target: str,
                     alternatives: list[Extractor]) -> str:
    where = ", ".join(sorted({e.describe() for e in alternatives if e.up is None}))
    above = sorted({e.describe().removesuffix(" (enclosing span)") for e in alternatives
                    if e.up is not None})
    hint = ctx.mapping.top.capture_hint
    span = SpanRef.of(comp.chosen[-1]).label()
    what = {"answer": "the answer", "sql": "the SQL query", "ids": "the document ids",
            "routes": "the routes"}.get(target, f"`{target}`")
    return (f"{what} is not recorded in the trace: span {span} has none of {where}"
            + (f", and no span enclosing it has {', '.join(above)}" if above else "")
            + "; content capture was probably off" + (f" ({hint})" if hint else ""))


def _extract_target(ctx: _Context, comp: _Component, kind: str, target: str,
                    alternatives: list[Extractor], step: dict[str, Any]) -> None:
    ex = comp.explanation
    convert = _converter(kind, target)
    results: list[_Got] = []
    problem: _Got | None = None
    for span in comp.chosen:
        got = ctx.read(span, alternatives, convert=convert)
        if got is None:
            continue
        if got.ok:
            results.append(got)
        else:
            problem = problem or got
    primary = PRIMARY.get(kind) == target
    if not results:
        if problem is not None and problem.redacted:
            what = "the answer" if target == "answer" else f"`{target}`"
            message = (f"{what} is redacted in the trace ({short(problem.value, 40)} in span "
                       f"{SpanRef.of(problem.span).label()}, {problem.extractor.describe()})")
            ex.problems.append(Problem(kind="redacted", field=target, message=message))
        elif problem is not None:
            ex.problems.append(Problem(
                kind="invalid", field=target,
                message=f"`{target}` in span {SpanRef.of(problem.span).label()} "
                        f"({problem.extractor.describe()}) is unusable: {problem.invalid}"))
        elif primary:
            ex.problems.append(Problem(kind="capture_off", field=target,
                                       message=_capture_message(ctx, comp, target,
                                                                alternatives)))
        else:
            ex.problems.append(Problem(
                kind="missing", field=target,
                message=f"`{target}` (optional) is not recorded (looked in "
                        f"{', '.join(sorted({e.describe() for e in alternatives}))})"))
        return
    ex.sources[target] = results[-1].source()
    enclosing = [g for g in results if g.extractor.up is not None]
    if enclosing:
        got = enclosing[-1]
        ex.problems.append(Problem(kind="note", field=target, message=(
            f"the chosen span{'s record' if len(comp.chosen) > 1 else ' records'} no "
            f"`{target}`; it is read from the enclosing span {SpanRef.of(got.span).label()} "
            f"({got.extractor.describe().removesuffix(' (enclosing span)')}), the nearest "
            "that records one")))
    for got in results:
        texts = got.value if isinstance(got.value, list) else [got.value]
        marked = [t for t in texts if isinstance(t, str)
                  and any(m in t for m in ctx.mapping.redacted)]
        if marked:
            ex.problems.append(Problem(kind="redacted", field=target, message=(
                f"`{target}` contains a redaction marker ({short(marked[0], 50)}): part of it "
                "was hidden when the trace was recorded")))
            break
    if len(results) == 1:
        value = results[0].value
    elif target == "routes":
        value = list(dict.fromkeys(r for g in results for r in g.value))
    elif isinstance(results[0].value, list) and target != "rows":
        if len(results) < len(comp.chosen) and target in ("texts", "scores"):
            ex.problems.append(Problem(kind="missing", field=target, message=(
                f"`{target}` is in {len(results)} of the {len(comp.chosen)} chosen spans; "
                "left out so it stays aligned with `ids`")))
            return
        value = [v for g in results for v in g.value]
    elif target == "rows":
        value = (_rows_concat(results))
    else:
        distinct = {json.dumps(g.value, default=str) for g in results}
        value = results[-1].value
        if len(distinct) > 1:
            ex.problems.append(Problem(kind="ambiguous", field=target, message=(
                f"the chosen spans give {len(distinct)} different `{target}` values; kept the "
                "last")))
    if target == "rows":
        rows, columns = value
        step["rows"] = rows
        if columns is not None and step.get("columns") is None:
            step["columns"] = columns
        return
    if target in ("ids", "texts", "scores") and isinstance(value, list):
        missing = sum(v is None for v in value)
        if missing:
            if target == "ids":
                ex.problems.append(Problem(kind="missing", field="ids", message=(
                    f"{missing} of {len(value)} document ids are missing in the trace; those "
                    "documents are left out")))
                keep = [i for i, v in enumerate(value) if v is not None]
                step["_keep"] = keep
                value = [value[i] for i in keep]
            else:
                ex.problems.append(Problem(kind="missing", field=target, message=(
                    f"{missing} of {len(value)} `{target}` are missing; `{target}` left out")))
                return
    step[target] = value


def _rows_concat(results: list[_Got]) -> tuple[list[list[Any]], list[str] | None]:
    rows: list[list[Any]] = []
    columns = None
    for g in results:
        r, c = g.value
        rows.extend(r)
        columns = columns or c
    return rows, columns


def _final_ranking(ctx: _Context, comp: _Component, mapping: Mapping,
                   step: dict[str, Any]) -> None:
    block, origin = mapping.block("reranker", "reranker")
    if block is None or block.select is None:
        return
    first = comp.chosen[0]
    found, _ = ctx.select(block.select)
    found = [s for s in found if (s.start_ns or 0) >= (first.start_ns or 0)
             and s not in comp.chosen]
    if not found:
        return
    span = found[-1]
    ex = comp.explanation
    reranker = _Component("reranker", "reranker", ComponentExplanation(
        component="reranker", kind="reranker", status="mapped"), chosen=[span])
    got: dict[str, Any] = {}
    for target in ("ids", "texts", "scores"):
        alts = alternatives_of(getattr(block, target))
        if alts:
            _extract_target(ctx, reranker, "reranker", target, alts, got)
    label = SpanRef.of(span).label()
    first_stage = {k: step.get(k) for k in ("ids", "scores") if step.get(k) is not None}
    if got.get("ids") is None:
        message = (f"the final ranking is the reranker's (span {label}) but it records no "
                   "document ids" + "".join(f"; {p.message}" for p in
                                              reranker.explanation.problems if p.field == "ids"))
        ex.problems.append(Problem(kind="missing", field="ids", message=message))
        step["error"] = message
        step.pop("ids", None)
        return
    for target in ("ids", "texts", "scores"):
        step.pop(target, None)
        if got.get(target) is not None:
            step[target] = got[target]
            ex.sources[target] = reranker.explanation.sources[target]
    comp.extra_spans.append(span)
    ex.values["first_stage"] = first_stage
    ex.problems.append(Problem(kind="note", message=(
        f"ids, texts and scores are the reranker's output (span {label}, selector from "
        f"{origin}): the pipeline has no reranker component, so a reranker's output is the "
        "retriever's final ranking (set `rerank: false` on the retriever to score its own "
        "ranking); latency and tokens include the reranker span")))


def _render_rows(columns: list[str] | None, rows: list[list[Any]]) -> list[str]:
    if columns:
        return ["; ".join(f"{c}: {v}" for c, v in zip(columns, row, strict=False))
                for row in rows]
    return ["; ".join(str(v) for v in row) for row in rows]


def _upstream_contexts(comp: _Component, pipeline: Pipeline, done: dict[str, _Component],
                       step: dict[str, Any]) -> None:
    after = pipeline.components[comp.name].after or [
        n for n in pipeline.order if n != comp.name]
    contexts: list[str] = []
    used: list[str] = []
    for name in after:
        up = done.get(name)
        if up is None or not up.step:
            continue
        if up.kind in ("retriever", "reranker") and up.step.get("texts"):
            contexts.extend(t for t in up.step["texts"] if t is not None)
            used.append(f"{name} texts")
        elif up.kind == "text2sql" and up.step.get("rows"):
            contexts.extend(_render_rows(up.step.get("columns"), up.step["rows"]))
            used.append(f"{name} rows")
    step["contexts"] = contexts
    comp.explanation.problems.append(Problem(kind="note", field="contexts", message=(
        "contexts are taken from the upstream steps ("
        + (", ".join(used) if used else "none had texts or rows")
        + "), not read from the trace; map `contexts` to read them from the generator's "
          "span")))


def _assemble_trace(mapped: Mapped, done: dict[str, _Component],
                    step_models: MappingABC[str, type[BaseModel]] | None) -> None:
    for name, comp in done.items():
        if comp.step is None:
            continue
        step = dict(comp.step)
        keep = step.pop("_keep", None)
        if keep is not None:
            for target in ("texts", "scores"):
                if step.get(target) is not None and len(step[target]) > len(keep):
                    step[target] = [step[target][i] for i in keep if i < len(step[target])]
        if comp.kind == "retriever" or comp.kind == "reranker":
            ids = step.get("ids") or []
            for target in ("texts", "scores"):
                if step.get(target) is not None and len(step[target]) != len(ids):
                    comp.explanation.problems.append(Problem(kind="invalid", field=target, message=(
                        f"`{target}` has {len(step[target])} entries but `ids` has {len(ids)}; "
                        f"`{target}` left out")))
                    step.pop(target)
        usage = step.pop("usage", None)
        model = BUILTIN_STEPS.get(comp.kind)
        if model is not None:
            step = {k: v for k, v in step.items() if k in model.model_fields}
            if model is RouterStep and step.get("routes") is None:
                step.pop("routes", None)
            if model is RetrieverStep and step.get("ids") is None:
                step.pop("ids", None)
            if model is GeneratorStep and step.get("contexts") is None:
                step.pop("contexts", None)
            try:
                obj = model(**step, usage=Usage(**usage) if usage else None)
            except ValidationError as exc:
                first = exc.errors(include_url=False)[0]
                message = (f"the values extracted for `{name}` do not make a {comp.kind} step: "
                           f"{'.'.join(map(str, first['loc']))}: {first['msg']}")
                comp.explanation.problems.append(Problem(kind="invalid", message=message))
                obj = model(error=message)
            if name in BUILTIN_STEPS:
                setattr(mapped.trace, name, obj)
            else:
                mapped.trace.steps[name] = obj.model_dump(exclude_none=True)
                comp.explanation.problems.append(Problem(kind="note", message=(
                    f"a {comp.kind} component named `{name}`: its step is under "
                    f"trace.steps[{name!r}]")))
        else:
            if usage:
                step["usage"] = usage
            plugin_model = (step_models or {}).get(comp.kind)
            if plugin_model is not None:
                known = set(plugin_model.model_fields)
                dropped = sorted(k for k in step if k not in known)
                step = {k: v for k, v in step.items() if k in known}
                if dropped:
                    comp.explanation.problems.append(Problem(kind="note", message=(
                        f"the {comp.kind} step model has no {', '.join(dropped)}; left out")))
            mapped.trace.steps[name] = {k: v for k, v in step.items() if v is not None}


