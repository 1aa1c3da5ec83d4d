"""Where a value sits in its file: YAML line numbers per field path, and readable pydantic errors.

Every input error evalharness reports names the file, the line and the field path; this
module turns a YAML document or a pydantic ``ValidationError`` into those three facts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import yaml
from pydantic import ValidationError

from evalharness.jsonlimits import MAX_DEPTH

Path_ = tuple[str | int, ...]


def load_yaml_with_lines(text: str) -> tuple[Any, dict[Path_, int]]:
    """Parse YAML safely and return ``(data, {field path: 1-based line})``.

    Refused (:class:`YAMLRefused`, naming the line): a key given twice in one mapping, a
    document that expands past :data:`MAX_VALUES` values, and lists and mappings nested more
    than :data:`evalharness.jsonlimits.MAX_DEPTH` deep, written so or through aliases.

    >>> data, lines = load_yaml_with_lines("a: 1\\nb:\\n  - x\\n  - {c: 2}\\n")
    >>> data
    {'a': 1, 'b': ['x', {'c': 2}]}
    >>> lines[("b", 1, "c")], lines[("a",)]
    (4, 1)
    """
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        lines: dict[Path_, int] = {}
        if node is not None:
            _walk(node, (), lines, [MAX_VALUES], 0)
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return data, lines


MAX_VALUES = 100_000
"""Most values a scenario file may expand to. Anchors and aliases let a few lines stand for
billions of values (the "billion laughs"); a scenario needs a few hundred."""

TOO_DEEP = (f"lists and mappings nested more than {MAX_DEPTH} deep (the limit); a scenario "
            "nests a handful of levels")


class YAMLRefused(yaml.constructor.ConstructorError):
    """A YAML document that parses but that evalharness refuses (a key given twice, an
    expansion bomb, nesting past the limit); its ``problem`` says why, and ``field`` is the
    path of the value when it is known."""

    field: Path_ | None = None


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (YAML forbids it;
    PyYAML silently keeps the last) and collections nested past the limit before composing
    them (PyYAML's composer recurses once per level)."""

    _depth = 0

    def compose_sequence_node(self, anchor: str | None) -> yaml.SequenceNode:
        self._deeper()
        try:
            return super().compose_sequence_node(anchor)
        finally:
            self._depth -= 1

    def compose_mapping_node(self, anchor: str | None) -> yaml.MappingNode:
        self._deeper()
        try:
            return super().compose_mapping_node(anchor)
        finally:
            self._depth -= 1

    def _deeper(self) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise YAMLRefused(None, None, TOO_DEEP, self.peek_event().start_mark)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = key_node.value
                if key in seen:
                    raise YAMLRefused(
                        None, None, f"key {key!r} appears twice in one mapping (first on line "
                        f"{seen[key]}); each key may appear once", key_node.start_mark)
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _walk(node: yaml.Node, path: Path_, lines: dict[Path_, int], budget: list[int],
          depth: int) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise YAMLRefused(
            None, None, f"the document expands to more than {MAX_VALUES} values (through "
            "anchors and aliases?); a scenario is far smaller", node.start_mark)
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        depth += 1
        if depth > MAX_DEPTH:  # only through aliases: the composer refused the rest
            refused = YAMLRefused(None, None, TOO_DEEP + " (through anchors and aliases)",
                                  node.start_mark)
            refused.field = path
            raise refused
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[path + (key,)] = key_node.start_mark.line + 1
            _walk(value_node, path + (key,), lines, budget, depth)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, path + (i,), lines, budget, depth)


_KEY = re.compile(r"^(?P<indent>\s*)(?:-\s+)*(?P<key>[^\s#:'\"{}\[\],][^:#{}\[\]]*?)\s*:(\s|$)")


def field_near(text: str, line: int) -> tuple[str, ...]:
    """The field path a (possibly unparsable) 1-based ``line`` of a YAML file belongs to.

    Used for syntax errors, when there is no parsed document to ask: the nearest key on or
    above the line, then each less-indented key above it.

    >>> field_near("name: x\\nevaluators:\\n  retriever:\\n    - ranking: {k: [3\\n", 4)
    ('evaluators', 'retriever', 'ranking')
    """
    lines = text.splitlines()[:line]
    path: list[str] = []
    limit = None
    for raw in reversed(lines):
        m = _KEY.match(raw)
        if not m:
            continue
        indent = len(m["indent"]) + (len(raw) - len(raw.lstrip(" -")) - len(m["indent"]))
        if limit is None or indent < limit:
            path.insert(0, m["key"].strip())
            limit = indent
            if indent == 0:
                break
    return tuple(path)


def format_path(path: Sequence[str | int]) -> str:
    """``("evaluators", "retriever", 0, "k")`` -> ``evaluators.retriever[0].k``.

    >>> format_path(("evaluators", "retriever", 0, "k"))
    'evaluators.retriever[0].k'
    >>> format_path(())
    '(top level)'
    """
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def short_path(path: Sequence[str | int], parts: int = 5) -> str:
    """:func:`format_path` of at most ``parts`` parts, then ``…`` for the rest.

    >>> short_path(("cases", 0, "metadata", "a", 0, 0, 0), parts=4)
    'cases[0].metadata.a…'
    >>> short_path(("a", 1))
    'a[1]'
    """
    path = tuple(path)
    return format_path(path[:parts]) + ("…" if len(path) > parts else "")


def line_of(path: Sequence[str | int], lines: dict[Path_, int]) -> int | None:
    """The line of the deepest prefix of ``path`` that the file has."""
    path = tuple(path)
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return lines.get(())


def data_path(loc: Sequence[str | int], data: Any) -> Path_:
    """Keep the parts of a pydantic error location that index into ``data``.

    Pydantic inserts union-member and validator names (``str``, ``list[Case]``,
    ``function-after[...]``) into locations; they are not fields the user wrote.

    >>> data_path(("system", "SystemSpec", "callable"), {"system": {"callable": 1}})
    ('system', 'callable')
    """
    out: list[str | int] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
            out.append(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
            out.append(part)
        elif isinstance(node, dict) and isinstance(part, str) and not _is_pydantic_label(part):
            out.append(part)  # a missing key the user must add
            node = None
    return tuple(out)


def _is_pydantic_label(part: str) -> bool:
    return any(c in part for c in "[]-") or part in {
        "str", "int", "float", "bool", "list", "dict", "none"
    } or part[:1].isupper()


def best_error(exc: ValidationError, data: Any) -> tuple[Path_, str, Any]:
    """The most specific error of a validation failure: ``(data path, message, input)``.

    Among the errors of a union, the one that reaches deepest into the data is the one that
    explains what the user meant.
    """
    best: tuple[int, Path_, str, Any] | None = None
    for err in exc.errors(include_url=False):
        path = data_path(err["loc"], data)
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "unknown field"
        elif err["type"] == "missing":
            message = "required field is missing"
        elif err["type"] == "value_error":  # a validator's own sentence, without pydantic's tag
            message = message.removeprefix("Value error, ")
        candidate = (len(path), path, message, err.get("input"))
        if best is None or candidate[0] > best[0]:
            best = candidate
    assert best is not None
    return best[1], best[2], best[3]


def short(value: Any, limit: int = 60) -> str:
    """A value as a short repr for an error message.

    >>> short("abc")
    "'abc'"
    >>> len(short("x" * 100)), short("x" * 100)[-3:]
    (60, '...')
    """
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def yaml_problem(source: object, text: str, exc: yaml.YAMLError) -> str:
    """One sentence naming the file, line, column and field of a YAML syntax error.

    The parser often notices late: when the construct it could not finish started on an
    earlier line, that line is named (and the field there).

    >>> try:
    ...     yaml.safe_load("a: 1\\nb: [1, 2\\n")
    ... except yaml.YAMLError as exc:
    ...     print(yaml_problem("m.yaml", "a: 1\\nb: [1, 2\\n", exc))
    m.yaml, line 3, column 1 (while parsing a flow sequence that starts on line 2), field `b`: \
invalid YAML (expected ',' or ']', but got '<stream end>'). Check indentation, brackets and quoting \
there; values with ':' or '#' need quotes
    """
    mark = getattr(exc, "problem_mark", None)
    where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    started = getattr(exc, "context_mark", None)
    if mark and started and started.line != mark.line:
        where += f" ({exc.context} that starts on line {started.line + 1})"
        mark = started
    near = getattr(exc, "field", None) or (field_near(text, mark.line + 1) if mark else ())
    field = f", field `{short_path(near, 8)}`" if near else ""
    problem = getattr(exc, "problem", None) or str(exc)
    if isinstance(exc, YAMLRefused):
        return f"{source}{where}{field}: {problem}"
    return (f"{source}{where}{field}: invalid YAML ({problem}). Check indentation, brackets "
            "and quoting there; values with ':' or '#' need quotes")
