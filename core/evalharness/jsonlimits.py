"""JSON decoded with a nesting limit: input nested too deep is an error saying where, never a
``RecursionError`` from the decoder or from the code that walks the value afterwards.

Every reader of JSON that a user (or a stranger: a trace export, a review POST) hands us
decodes through :func:`loads` or :func:`raw_decode`. The limit, :data:`MAX_DEPTH`, is
serde_json's: 128 arrays and objects inside each other — real cases, chunks, trace
attributes and labels nest a handful of levels; CPython's decoder itself gives up near 1,000
with a traceback, and the code that walks a value (our readers, pydantic) would not survive
much less on a deep stack. :class:`TooDeep` is a :class:`json.JSONDecodeError`, so a caller
that already names the file and line of invalid JSON names them for this too.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

MAX_DEPTH = 128
"""The most arrays and objects that may nest inside each other in one JSON value."""

_DECODER = json.JSONDecoder()
_TOKENS = re.compile(r'["\[\]{}]')
_STRING_END = re.compile(r'(?:[^"\\]|\\.)*"', re.S)


class TooDeep(json.JSONDecodeError):
    """A JSON value nests arrays and objects deeper than the limit.

    >>> loads('[[[1]]]', max_depth=2)
    Traceback (most recent call last):
    ...
    evalharness.jsonlimits.TooDeep: arrays and objects nested more than 2 deep (the limit): line 1 column 3 (char 2)
    """

    def __init__(self, doc: str, pos: int, max_depth: int) -> None:
        super().__init__(f"arrays and objects nested more than {max_depth} deep (the limit)",
                         doc, pos)
        self.max_depth = max_depth


def loads(text: str | bytes | bytearray, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` that refuses values nested deeper than ``max_depth``.

    >>> loads('{"a": [1, {"b": 2}]}')
    {'a': [1, {'b': 2}]}
    >>> loads("[" * 5000 + "]" * 5000)
    Traceback (most recent call last):
    ...
    evalharness.jsonlimits.TooDeep: arrays and objects nested more than 128 deep (the limit): line 1 column 129 (char 128)
    """
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8")
    value, end = raw_decode(text, _skip(text, 0), max_depth=max_depth)
    end = _skip(text, end)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def raw_decode(text: str, idx: int = 0, *, max_depth: int = MAX_DEPTH,
               decoder: json.JSONDecoder = _DECODER) -> tuple[Any, int]:
    """``decoder.raw_decode(text, idx)`` that refuses values nested deeper than ``max_depth``:
    ``(value, index after it)``.

    >>> raw_decode('  [1, [2]] tail', 2)
    ([1, [2]], 10)
    >>> raw_decode("[" + "9" * 5000 + "]")[0]
    Traceback (most recent call last):
    ...
    json.decoder.JSONDecodeError: a number of more than 4,300 digits: line 1 column 1 (char 0)
    """
    try:
        value, end = decoder.raw_decode(text, idx)
    except RecursionError:
        raise TooDeep(text, deep_position(text, idx, max_depth), max_depth) from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer of more digits than Python converts
        raise json.JSONDecodeError(f"a number of more than {sys.get_int_max_str_digits():,} "
                                   "digits", text, idx) from None
    # A value cannot be deeper than the brackets it holds: most values need no more look.
    if _brackets(text, idx, end) > max_depth and text_depth(text, idx, end) > max_depth:
        raise TooDeep(text, deep_position(text, idx, max_depth), max_depth)
    return value, end


def text_depth(text: str, start: int = 0, end: int | None = None) -> int:
    r"""How deep the arrays and objects of the JSON text ``text[start:end]`` nest, read from
    its brackets outside strings (vectorised: a third of the decoder's own time on a large
    value, where walking the decoded value took three times the decoder's).

    >>> text_depth('[{"a": "]]}[", "b\\\\": [[1]]}]'), text_depth('"[["'), text_depth('["\\"[["]')
    (4, 0, 1)
    """
    import numpy as np  # here: only values with more brackets than the limit come this far

    data = np.frombuffer(text[start:end].encode("utf-8", "surrogatepass"), dtype=np.uint8)
    opens = (data == 91) | (data == 123)
    brackets = np.flatnonzero(opens | (data == 93) | (data == 125))
    if not len(brackets):
        return 0
    quotes = np.flatnonzero(data == 34)
    if len(quotes):
        slashes = np.flatnonzero(data == 92)
        if len(slashes):  # a quote after an odd run of backslashes is inside its string
            first = np.r_[True, np.diff(slashes) != 1]
            run_start = np.maximum.accumulate(np.where(first, np.arange(len(slashes)), 0))
            k = np.minimum(np.searchsorted(slashes, quotes - 1), len(slashes) - 1)
            run = np.where(slashes[k] == quotes - 1, k - run_start[k] + 1, 0)
            quotes = quotes[run % 2 == 0]
        # a bracket after an odd number of (unescaped) quotes is inside a string
        brackets = brackets[np.searchsorted(quotes, brackets) % 2 == 0]
        if not len(brackets):
            return 0
    steps = np.where(opens[brackets], 1, -1).astype(np.int32)
    return int(np.cumsum(steps).max())


def is_json(raw: bytes | str) -> bool:
    """Whether ``raw`` is one whole JSON value within the limits: a line of a JSON Lines file
    cut short by a crash mid-write is not (no shorter prefix of an object is JSON).

    >>> is_json(b'{"case": "q1"}'), is_json(b'{"case": "q'), is_json(b'{"a": "\\xc3')
    (True, False, False)
    """
    try:
        loads(raw)
    except ValueError:  # JSONDecodeError (TooDeep too) and UnicodeDecodeError
        return False
    return True


def depth(value: Any, limit: int | None = None) -> int:
    """How many arrays and objects nest in ``value`` (0 for a scalar), walked without
    recursion; with ``limit``, stops as soon as it is passed (returning ``limit + 1``).

    >>> depth(1), depth([]), depth({"a": [1, {"b": []}]}), depth([[[[]]]], limit=2)
    (0, 1, 4, 3)
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if level > deepest:
            deepest = level
            if limit is not None and deepest > limit:
                return deepest
        stack.extend((child, level + 1) for child in children
                     if isinstance(child, dict | list | tuple))
    return deepest


def check(value: Any, where: str, *, max_depth: int = MAX_DEPTH) -> None:
    """Raise ``ValueError`` naming ``where`` when an already decoded value (from YAML, a
    protobuf ``kvlist``, a parquet cell) nests deeper than ``max_depth``.

    >>> check({"a": [[1]]}, "field `x`", max_depth=2)
    Traceback (most recent call last):
    ...
    ValueError: field `x`: arrays and objects nested more than 2 deep (the limit)
    """
    if depth(value, max_depth) > max_depth:
        raise ValueError(f"{where}: arrays and objects nested more than {max_depth} deep "
                         "(the limit)")


def deep_position(text: str, idx: int, max_depth: int) -> int:
    """Index in ``text`` of the bracket that opens level ``max_depth + 1`` of the value at
    ``idx`` (strings skipped); ``idx`` if there is none.

    >>> deep_position('{"[[[": [[0]]}', 0, 2)
    9
    """
    level = 0
    pos = idx
    while True:
        m = _TOKENS.search(text, pos)
        if m is None:
            return idx
        token = m.group()
        if token == '"':
            end = _STRING_END.match(text, m.end())
            if end is None:
                return idx
            pos = end.end()
            continue
        pos = m.end()
        if token in "[{":
            level += 1
            if level > max_depth:
                return m.start()
        else:
            level -= 1
            if level <= 0:
                return idx


def _brackets(text: str, start: int, end: int) -> int:
    return text.count("[", start, end) + text.count("{", start, end)


_BLANK = re.compile(r"[ \t\r\n]*")


def _skip(text: str, idx: int) -> int:
    return _BLANK.match(text, idx).end()
