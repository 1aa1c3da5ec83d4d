"""Numbers as short text for the reports: pure functions both report.md and the pages use.

They sit below :mod:`evalharness.report` (report.md, the terminal table) and
:mod:`evalharness.html` (report.html, through the filters :mod:`evalharness.pages` registers)
so that neither has to import the other to show a value the same way.
"""

from __future__ import annotations

import json
from typing import Any


def judge_cell(usage: dict | None) -> str:
    """A component's judge usage in one table cell: requests / cache hits / tokens.

    >>> judge_cell({"requests": 3, "cache_hits": 1, "prompt_tokens": 1200, "completion_tokens": 34})
    '3 / 1 / 1234'
    >>> judge_cell(None)
    '—'
    """
    if not usage:
        return "—"
    return (f"{usage.get('requests', 0)} / {usage.get('cache_hits', 0)} / "
            f"{usage.get('prompt_tokens', 0) + usage.get('completion_tokens', 0)}")


def number(value: float | None, digits: int = 3) -> str:
    """A metric value: ``digits`` decimals when small, fewer as it grows; three significant
    digits when the decimals would show a value that is not 0 as 0 (a cost per request).

    >>> number(0.12345), number(None), number(313.529), number(12345.6)
    ('0.123', '—', '313.5', '12,346')
    >>> number(8.5966e-05), number(0.0), number(-0.00012)
    ('8.6e-05', '0.000', '-0.00012')
    """
    if value is None:
        return "—"
    if value and abs(value) < 0.5 * 10 ** -digits:
        return f"{value:.3g}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.{digits}f}"


def percent(value: float | None) -> str:
    """A share as a percentage, with a decimal only below 10%.

    >>> percent(0.5531), percent(0.078), percent(None), percent(0.0)
    ('55%', '7.8%', '—', '0%')
    """
    if value is None:
        return "—"
    p = value * 100
    return f"{p:.1f}%" if 0 < p < 10 else f"{p:.0f}%"


def latency(value: float | None) -> str:
    """A latency in milliseconds.

    >>> latency(0.4374), latency(38.16), latency(1234.5), latency(None)
    ('0.44 ms', '38.2 ms', '1,234 ms', '—')
    """
    if value is None:
        return "—"
    if value < 10:
        return f"{value:.2f} ms"
    if value < 1000:
        return f"{value:.1f} ms"
    return f"{value:,.0f} ms"


def case_count(value: float) -> str:
    """A case count that may be fractional (a root cause shared between components).

    >>> case_count(26.0), case_count(2.5)
    ('26', '2.5')
    """
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def ci_range(ci: list[float] | None) -> str:
    """A 95% confidence interval of a metric, as ``low–high``.

    >>> ci_range([0.61234, 0.8]), ci_range(None)
    ('0.612–0.800', '—')
    """
    return "—" if not ci else f"{number(ci[0])}–{number(ci[1])}"


def clamp(value: float, low: float = 0.0, high: float = 1.0) -> float:
    """``value`` held inside ``[low, high]`` (a meter's fill, a bar on a 0–1 axis).

    >>> clamp(1.2), clamp(-0.1), clamp(0.25)
    (1.0, 0.0, 0.25)
    """
    return min(max(float(value), low), high)


def short(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, saying so with an ellipsis.

    >>> short("abcdef", 4), short("abc", 4)
    ('abc…', 'abc')
    """
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short_json(value: Any, limit: int) -> str:
    """``value`` as one line of JSON (unknown types as their ``str``), cut to ``limit``.

    >>> short_json({"k": "é", "n": [1, 2]}, 100), short_json(list(range(50)), 10)
    ('{"k": "é", "n": [1, 2]}', '[0, 1, 2,…')
    """
    return short(json.dumps(value, ensure_ascii=False, default=str), limit)


def fmt_p(p: float | None) -> str:
    """A p-value for a table.

    >>> fmt_p(0.00001), fmt_p(0.0421), fmt_p(1.0), fmt_p(None)
    ('<0.001', '0.042', '1.000', '—')
    """
    if p is None:
        return "—"
    return "<0.001" if p < 0.001 else f"{p:.3f}"
