"""Reading a value out of a span: a field (``attributes.input.value``) and a small JSON path.

A trace mapping (:mod:`evalharness.spans.mapping`) names every value it extracts with a
*field* — where in the span — and an optional *path* — where inside that value. Both use one
small grammar, written here rather than taken from a JSONPath library because three rules of
span data are not JSONPath's and matter more than the rest of it:

* **Dotted keys are matched greedily.** OpenTelemetry attributes are flat: the key
  ``llm.output_messages.0.message.content`` is one key. ``attributes.input.value`` finds the
  key ``input.value``; ``$.document.id`` finds ``document.id`` in a document record. The
  longest run of unquoted names that is a key wins; a quoted name (``"input.value"``,
  ``['input.value']``) is one key, never split.
* **Flattened lists are put back together.** When no key matches but keys continue the
  prefix (``retrieval.documents.0.document.id``, ``retrieval.documents.1.…``), the prefix
  reads as a list of records (numeric next parts) or a record (other parts), whose own keys
  are the flat remainders (``document.id``).
* **JSON texts are read as JSON** when the path has to go inside them (an LLM span's
  ``output.value``, a tool call's ``arguments``), and so are Python literals (LangChain
  records ``str()`` of a tool's dict input: ``{'query': 'SELECT …'}``).

The path subset: ``$`` (the value), ``.name``, ``."quoted.name"``, ``['name']``, ``[N]`` and
``[-N]`` (from the end), ``[*]`` or ``.*`` (every item; what follows applies to each, and the
results make one list, ``None`` where an item lacks the rest), and ``[?key==value]`` (the
items whose ``key`` equals ``value``, compared as text). Nothing else: no slices, no
recursive descent, no expressions.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

import evalharness.jsonlimits as jsonlimits
from evalharness.spans.model import Span


class Missing:
    """The value is not in the span (distinct from a recorded ``null``)."""

    _instance: Missing | None = None

    def __new__(cls) -> Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING = Missing()

SPAN_PROPERTIES = ("name", "kind", "status", "status_message", "span_id", "trace_id",
                   "parent_id", "scope", "scope_version", "duration_ms", "start_ns", "end_ns")
"""Fields that are properties of the span itself rather than keys under a record."""

ROOTS = ("attributes", "resource", "events", *SPAN_PROPERTIES)
"""What a field may start with."""


@dataclass(frozen=True, slots=True)
class Token:
    """One step of a field or path: a name (``quoted`` names are never split or joined), an
    index, every item (``all``), or a filter ``[?key==value]``."""

    kind: str  # "name" | "index" | "all" | "filter"
    name: str = ""
    quoted: bool = False
    index: int = 0
    value: str = ""


_NAME = re.compile(r"[^.\[\]\"'\s]+")
_FILTER = re.compile(r"\?\s*([^=\s\]]+)\s*==?\s*(?:'([^']*)'|\"([^\"]*)\"|([^\]\s]*))\s*")


class PathError(ValueError):
    """A field or path that does not parse; the message says where and what is allowed."""


def parse(text: str, *, field: bool) -> list[Token]:
    """Tokens of a field (``field=True``: no ``$``, starts with a root) or of a path.

    >>> [t.name for t in parse('attributes."input.value"', field=True)]
    ['attributes', 'input.value']
    >>> [(t.kind, t.name or t.index) for t in parse("$.documents[-1]['document.id']",
    ...                                               field=False)]
    [('name', 'documents'), ('index', -1), ('name', 'document.id')]
    >>> parse("$..x", field=False)
    Traceback (most recent call last):
    ...
    evalharness.spans.access.PathError: `$..x`: expected a name after `.` at position 2
    """
    s = text.strip()
    i = 0
    tokens: list[Token] = []
    what = "field" if field else "path"
    if not field:
        if not s.startswith("$"):
            raise PathError(f"`{text}`: a path starts with `$` (e.g. `$.answer`, `$[0].id`)")
        i = 1
    elif not s:
        raise PathError("the field is empty; write e.g. `attributes.output.value`")

    def name_at(j: int) -> tuple[Token, int]:
        if j < len(s) and s[j] in "\"'":
            end = s.find(s[j], j + 1)
            if end < 0:
                raise PathError(f"`{text}`: unclosed quote at position {j}")
            return Token("name", s[j + 1:end], quoted=True), end + 1
        if j < len(s) and s[j] == "*":
            return Token("all"), j + 1
        m = _NAME.match(s, j)
        if not m:
            raise PathError(f"`{text}`: expected a name after `.` at position {j}")
        return Token("name", m.group()), m.end()

    if field:
        tok, i = name_at(0)
        tokens.append(tok)
    while i < len(s):
        c = s[i]
        if c == ".":
            tok, i = name_at(i + 1)
            tokens.append(tok)
        elif c == "[":
            end = s.find("]", i)
            inner = s[i + 1:end].strip() if end > 0 else None
            if inner is None or not inner:
                raise PathError(f"`{text}`: unclosed or empty `[` at position {i}")
            if inner == "*":
                tokens.append(Token("all"))
            elif re.fullmatch(r"-?\d+", inner):
                tokens.append(Token("index", index=int(inner)))
            elif inner[0] in "\"'" and inner[-1] == inner[0] and len(inner) > 1:
                tokens.append(Token("name", inner[1:-1], quoted=True))
            elif m := _FILTER.fullmatch(inner):
                value = next(g for g in m.groups()[1:] if g is not None)
                tokens.append(Token("filter", m.group(1), value=value))
            else:
                raise PathError(
                    f"`{text}`: `[{inner}]` is not one of [N], [-N], [*], ['name'] or "
                    "[?key==value]")
            i = end + 1
        else:
            raise PathError(f"`{text}`: unexpected `{c}` at position {i}; the {what} grammar "
                            "is .name, .\"dotted.name\", [N], [-N], [*], ['name'], "
                            "[?key==value]")
    if field:
        head = tokens[0]
        if head.kind != "name" or head.name not in ROOTS:
            raise PathError(
                f"`{text}`: a field starts with one of {', '.join(ROOTS[:3])} or a span "
                f"property ({', '.join(SPAN_PROPERTIES)}), e.g. `attributes.output.value`")
        if head.name in SPAN_PROPERTIES and len(tokens) > 1:
            raise PathError(f"`{text}`: `{head.name}` is a plain value; nothing can follow it "
                            "(use `path` to read inside a JSON text)")
    return tokens


class Many(list):
    """The result of ``[*]``: what follows applies to each item."""


MAX_LITERAL = 1_000_000
"""Longest text read as a Python literal (``ast.literal_eval`` is slow on huge texts)."""


def _json(value: str) -> Any:
    """A text of an object or array, parsed: JSON, else a Python literal (LangChain records
    ``str()`` of a tool's dict input and of SQL rows); MISSING when it is neither."""
    text = value.strip()
    if text[:1] in "[{(" and text[-1:] in "]})":
        try:
            return jsonlimits.loads(text)
        except ValueError:  # not JSON, or nested deeper than the limit (TooDeep)
            pass
        if len(text) <= MAX_LITERAL:
            try:
                return plain(ast.literal_eval(text))
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                pass
    return MISSING


def plain(value: Any) -> Any:
    """A Python literal's value as JSON would have it: tuples as lists.

    >>> plain({"rows": (("a", 1),)})
    {'rows': [['a', 1]]}
    """
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _assemble(children: dict[str, Any]) -> Any:
    """Put flattened keys (``0.document.id``, ``1.document.id``) back into a list or record."""
    heads = {k.split(".", 1)[0] for k in children}
    if heads and all(h.isdigit() for h in heads):
        items: dict[int, Any] = {}
        for key, value in children.items():
            head, _, rest = key.partition(".")
            if rest:
                slot = items.setdefault(int(head), {})
                if isinstance(slot, dict):
                    slot[rest] = value
            else:
                items[int(head)] = value
        return [items.get(i) for i in range(max(items) + 1)] if items else []
    return dict(children)


def _step_names(node: dict, tokens: list[Token], i: int) -> tuple[Any, int]:
    """Resolve a run of names at ``tokens[i:]`` in ``node`` greedily; ``(value, next i)``."""
    run = 1
    if not tokens[i].quoted:
        while (i + run < len(tokens) and tokens[i + run].kind == "name"
               and not tokens[i + run].quoted):
            run += 1
    for j in range(run, 0, -1):
        key = ".".join(t.name for t in tokens[i:i + j])
        if key in node:
            return node[key], i + j
    for j in range(run, 0, -1):
        prefix = ".".join(t.name for t in tokens[i:i + j]) + "."
        children = {k[len(prefix):]: v for k, v in node.items()
                    if isinstance(k, str) and k.startswith(prefix)}
        if children:
            return _assemble(children), i + j
    return MISSING, len(tokens)


def walk(value: Any, tokens: list[Token]) -> Any:
    """Follow ``tokens`` into ``value``; :data:`MISSING` when the value has no such part.

    >>> attrs = {"retrieval.documents.0.document.id": "a", "retrieval.documents.1.document.id": 7,
    ...          "input.value": {"question": "Why?"}}
    >>> walk(attrs, parse("$.retrieval.documents[*].document.id", field=False))
    ['a', 7]
    >>> walk(attrs, parse("$.input.value.question", field=False))
    'Why?'
    >>> walk({"m": '[{"type": "text", "content": "hi"}]'}, parse("$.m[?type==text].content",
    ...                                                          field=False))
    ['hi']
    >>> walk({"a": 1}, parse("$.b", field=False))
    MISSING
    """
    i = 0
    node = value
    while i < len(tokens):
        tok = tokens[i]
        if isinstance(node, Many):
            out = Many()
            for item in node:
                got = walk(item, tokens[i:])
                if isinstance(got, Many):
                    out.extend(got)
                else:
                    out.append(None if got is MISSING else got)
            return out
        if isinstance(node, str):
            node = _json(node)
            if node is MISSING:
                return MISSING
        if tok.kind == "name":
            if isinstance(node, dict):
                node, i = _step_names(node, tokens, i)
                continue
            if isinstance(node, list) and tok.name.lstrip("-").isdigit() and not tok.quoted:
                tok = Token("index", index=int(tok.name))
            else:
                return MISSING
        if tok.kind == "index":
            if not isinstance(node, list) or not -len(node) <= tok.index < len(node):
                return MISSING
            node = node[tok.index]
        elif tok.kind == "all":
            if isinstance(node, dict):
                node = Many(node.values())
            elif isinstance(node, list):
                node = Many(node)
            else:
                return MISSING
        elif tok.kind == "filter":
            if not isinstance(node, list):
                return MISSING
            key = parse(f"$.{tok.name}", field=False)
            node = Many(item for item in node
                        if (got := walk(item, key)) is not MISSING and _text(got) == tok.value)
        i += 1
    return node


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def events_record(span: Span) -> dict[str, list[dict[str, Any]]]:
    """A span's events by name, each a list of the events' attributes (in time order)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for event in span.events:
        out.setdefault(event.name, []).append(event.attributes)
    return out


def read_field(span: Span, tokens: list[Token]) -> Any:
    """The value of a parsed field in ``span`` (:data:`MISSING` when absent).

    >>> s = Span(trace_id="t", span_id="s", parent_id=None, name="LLM",
    ...          attributes={"llm.output_messages.0.message.content": "Paris"})
    >>> read_field(s, parse("attributes.llm.output_messages[-1].message.content", field=True))
    'Paris'
    >>> read_field(s, parse("name", field=True))
    'LLM'
    """
    head = tokens[0].name
    if head in SPAN_PROPERTIES:
        value = getattr(span, head)
        return MISSING if value is None else value
    record: Any
    if head == "attributes":
        record = span.attributes
    elif head == "resource":
        record = span.resource
    else:
        record = events_record(span)
    return walk(record, tokens[1:]) if len(tokens) > 1 else record
