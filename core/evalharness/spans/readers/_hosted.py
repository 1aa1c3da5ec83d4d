"""What the readers of hosted tracing platforms (Langfuse, LangSmith) share besides reading
JSON (:mod:`~evalharness.spans.readers._jsonstream`): ISO 8601 times, token counts and costs,
JSON held in strings."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

import evalharness.jsonlimits as jsonlimits

_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9})\d*)?"
    r" ?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?")
_EPOCH = date(1970, 1, 1).toordinal()


def iso_ns(text: Any) -> int:
    """Nanoseconds since the epoch of an ISO 8601 time; one without an offset is UTC (as
    Langfuse's blob export and LangSmith's API write them), ``+00`` is accepted (DuckDB's
    JSON of a Parquet export). ``ValueError`` otherwise.

    >>> iso_ns("1970-01-01T00:00:01.5Z")
    1500000000
    >>> iso_ns("2024-05-02 17:34:08.468") == iso_ns("2024-05-02T19:34:08.468+02:00")
    True
    >>> iso_ns("2024-05-02 17:34:08.468+00") == iso_ns("2024-05-02T17:34:08.468Z")
    True
    >>> iso_ns("2024-05-02T17:34:08.123456789Z") % 1_000_000_000
    123456789
    """
    m = _ISO.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ValueError("not an ISO 8601 time")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    if hour > 23 or minute > 59 or second > 60:
        raise ValueError("not an ISO 8601 time")
    days = date(year, month, day).toordinal() - _EPOCH  # ValueError on 2024-02-30
    offset = 0
    if m[9]:
        offset = (int(m[10]) * 60 + int(m[11] or 0)) * 60 * (1 if m[9] == "+" else -1)
    seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset
    return seconds * 1_000_000_000 + int((m[7] or "").ljust(9, "0"))


def count(value: Any) -> int:
    """A token count: a non-negative int, an integral float, or digits in a string
    (ClickHouse quotes 64-bit integers in JSON). ``ValueError`` otherwise.

    >>> count("120"), count(7.0)
    (120, 7)
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    raise ValueError("not a count")


def amount(value: Any) -> float:
    """A cost: a number, or a number in a string (decimals are often quoted)."""
    if isinstance(value, bool):
        raise ValueError("not a number")
    return float(value)


def decoded(value: Any) -> Any:
    """A JSON text of an object or array decoded; anything else as it is.
    :class:`~evalharness.jsonlimits.TooDeep` when the text nests deeper than the limit (the
    caller names the field: :func:`too_deep`).

    >>> decoded('{"q": "hi"}'), decoded("hi"), decoded("[1")
    ({'q': 'hi'}, 'hi', '[1')
    """
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[") and text[-1:] in ("}", "]"):
            try:
                return jsonlimits.loads(text)
            except jsonlimits.TooDeep:
                raise
            except ValueError:
                return value
    return value


TOO_DEEP = (f"arrays and objects nested more than {jsonlimits.MAX_DEPTH} deep (the limit) in "
            "the JSON text it holds; a trace record nests a handful of levels")
"""What a field holding the JSON text of a value nested too deep is told."""


def usage(input_: Any, output: Any, total: Any) -> dict[str, int]:
    """Token usage normalised to ``{input, output, total}``: absent counts left out, the
    total computed when both parts are known, nothing when every count is 0 (the API's
    zeros on a span that called no model). ``ValueError`` names the bad count.

    >>> usage("12", 5, None)
    {'input': 12, 'output': 5, 'total': 17}
    >>> usage(0, 0, 0)
    {}
    """
    out: dict[str, int] = {}
    for name, value in (("input", input_), ("output", output), ("total", total)):
        if value is not None:
            try:
                out[name] = count(value)
            except ValueError:
                raise ValueError(f"{name}: not a token count ({value!r})") from None
    if "total" not in out and "input" in out and "output" in out:
        out["total"] = out["input"] + out["output"]
    return out if any(out.values()) else {}
