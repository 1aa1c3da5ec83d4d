"""Times as MONITOR.yaml and the monitor's commands write them: spans (``30s``, ``90m``,
``24h``, ``7d``, ``2w``: :func:`parse_span`), points in time (a span back from now, a date, an ISO
datetime: :func:`parse_time`) and times as the reports write them (:func:`iso`)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from evalharness.errors import InputError

RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d|w)\s*$", re.IGNORECASE)
UNITS = {"s": timedelta(seconds=1), "sec": timedelta(seconds=1), "m": timedelta(minutes=1),
         "min": timedelta(minutes=1), "h": timedelta(hours=1),
         "d": timedelta(days=1), "w": timedelta(weeks=1)}
FORMS = "90m, 24h, 7d, 2w"


def parse_span(text: str) -> timedelta | None:
    """``text`` as a span of time, or ``None`` when it is not one.

    >>> parse_span("24h"), parse_span("1.5d"), parse_span(" 90 min ")
    (datetime.timedelta(days=1), datetime.timedelta(days=1, seconds=43200), datetime.timedelta(seconds=5400))
    >>> parse_span("30s"), parse_span("0.5s")
    (datetime.timedelta(seconds=30), datetime.timedelta(microseconds=500000))
    >>> parse_span("tomorrow") is None
    True
    """
    found = RELATIVE.match(text)
    if not found:
        return None
    return UNITS[found.group(2).lower()] * float(found.group(1))


def parse_time(text: str, *, now: datetime) -> datetime:
    """A ``--since``/``--until`` value as a naive UTC datetime: a span back from ``now``
    (``90m``, ``24h``, ``7d``, ``2w``), a date (midnight UTC) or an ISO datetime (UTC when it
    names no offset).

    >>> now = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    >>> parse_time("7d", now=now), parse_time("24h", now=now)
    (datetime.datetime(2026, 11, 29, 12, 0), datetime.datetime(2026, 12, 5, 12, 0))
    >>> parse_time("2026-12-01", now=now), parse_time("2026-12-01T08:30+01:00", now=now)
    (datetime.datetime(2026, 12, 1, 0, 0), datetime.datetime(2026, 12, 1, 7, 30))
    >>> parse_time("last week", now=now)
    Traceback (most recent call last):
    ...
    evalharness.errors.InputError: 'last week' is no time: give a span back from now (90m, 24h, 7d, 2w), a date (2026-12-01) or an ISO datetime (2026-12-01T08:00Z)
    """
    span = parse_span(text)
    if span is not None:
        return (now.astimezone(UTC) - span).replace(tzinfo=None)
    value = text.strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            return datetime.combine(date.fromisoformat(value), datetime.min.time())
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        parsed = None
    if parsed is None:
        raise InputError(f"{text!r} is no time: give a span back from now (90m, 24h, 7d, 2w), "
                         "a date (2026-12-01) or an ISO datetime (2026-12-01T08:00Z)")
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def iso(value: datetime | None) -> str | None:
    """A naive UTC datetime as ISO 8601 with ``Z``.

    >>> iso(datetime(2026, 12, 1, 8, 30))
    '2026-12-01T08:30:00Z'
    """
    return None if value is None else value.replace(tzinfo=None).isoformat() + "Z"
