"""Users' feedback for the monitor (docs/monitor.md, "Users' feedback"): thumbs, 1-5 scores,
quick labels and comments, from a JSON-lines file or a local HTTP endpoint, into the store's
``feedback`` table, joined to stored traces by trace id or by a trace attribute.

A record is one JSON object (:func:`parse_record` says what is valid)::

    {"trace_id": "4bf9...", "thumbs": "down", "score": 2, "labels": ["wrong price"],
     "comment": "...", "user_id": "u-17", "at": "2026-12-06T10:00:00Z", "feedback_id": "f-1"}

Instead of ``trace_id`` it may name a trace attribute, ``"key": {"session.id": "abc"}``, or
carry the monitor's configured key attribute (``feedback: {key: session.id}``) as a field of
its own, ``"session.id": "abc"``. It stores under ``feedback_id``, else a digest of its
content, with ``INSERT ... ON CONFLICT DO NOTHING``: ingesting the same file twice, or a
client retrying a POST, stores nothing twice. :func:`resolve` fills ``feedback.trace_id`` once
a stored trace matches; feedback for a trace the store does not (yet) hold waits, counted as
unresolved, and is joined when the trace arrives — unless the store has already read traffic
more than ``wait`` (24 hours) newer than the feedback: then its trace is not coming, and the
record is an *unknown trace* (:func:`unknown_where`): refused by ``feedback add`` (exit 2) and
by the endpoint (400, counted), counted in reports when it was stored while it still waited. :data:`BY_USER` and :data:`BY_TRACE` say what
"the user's label" of a trace is (:func:`feedback_view`).

The endpoint (:func:`make_server`, :func:`serve`) reuses ``review serve``'s server
(:mod:`evalharness.review.server`): 127.0.0.1 by default, a ``Host`` check against DNS
rebinding, JSON-only writes, idle connections closed; a bearer token guards every request.
It opens the store only per request (DuckDB lets one process write a file at a time: a
running monitor and this endpoint take turns, :func:`evalharness.monitor.store.connect`).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import hmac
import json
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

import click

import evalharness.jsonlimits as jsonlimits
from evalharness.errors import EvalHarnessError, InputError, UsageError
from evalharness.monitor.store import as_target, connect, dialect, hash_user_id, user_salt
from evalharness.review.server import (
    REQUEST_TIMEOUT,
    Handler,
    Server,
    bind_problem,
    new_token,
    url_host,
)
from evalharness.review.server import make_server as review_server

FIELDS = ("trace_id", "key", "thumbs", "score", "labels", "comment", "user_id", "at",
          "feedback_id")
"""The fields a record may have (and the monitor's key attribute, when configured)."""
THUMBS = {"up": 1, "down": -1}
"""``thumbs`` as written → as stored (``feedback.thumbs``)."""
REDACTIONS = ("keep", "hash", "drop")
"""What becomes of a record's ``user_id``: stored as given, its salted hash, or nothing."""
MAX_ID = 200
MAX_LABEL = 100
MAX_LABELS = 20
MAX_COMMENT = 4000
MAX_ERRORS = 20
"""The most bad lines one error message of :func:`ingest_file` lists."""
MAX_BODY = 1_000_000
"""The largest POST body the endpoint reads (bytes); larger is 413."""
MAX_RECORDS = 1000
"""The most records one POST may carry."""
ATTRIBUTE = re.compile(r"[A-Za-z0-9_.:/@-]{1,128}")
"""A key attribute's name (``session.id``, ``app.message_id``)."""
REJECTED_KEY = "feedback.rejected"
"""The ``meta`` row counting records the endpoint rejected (survives restarts)."""
WAIT = _dt.timedelta(hours=24)
"""How long feedback waits for its trace by default (``feedback.wait``): a record the store
cannot join although it holds traffic that started this much later is for an unknown trace."""


def unknown_where(wait: _dt.timedelta = WAIT) -> str:
    """The SQL condition on ``feedback`` rows for an *unknown trace*: not joined, and given
    more than ``wait`` before the start of the newest trace the store holds. The store's own
    traffic is the clock, not the wall clock: replayed traffic and a monitor that fell behind
    judge alike, and an empty store (or a monitor reading nothing new) makes no record
    unknown.

    >>> print(unknown_where(_dt.timedelta(hours=1)))
    trace_id IS NULL AND received_at < (SELECT max(coalesce(start_time, stored_at)) FROM traces) - INTERVAL 3600 SECOND
    """
    return ("trace_id IS NULL AND received_at < (SELECT max(coalesce(start_time, stored_at)) "
            f"FROM traces) - INTERVAL {int(wait.total_seconds())} SECOND")


class UnknownTraces(InputError):
    """Records whose trace the store does not hold and will not: each its place (a file's
    line, a POST's index), its key, and why (:func:`unknown_where`)."""

    def __init__(self, message: str, records: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.records = records


class BadRecord(ValueError):
    """A feedback record that is not valid: which field, and what would be."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


@dataclass(frozen=True)
class Feedback:
    """One valid feedback record, normalised (:func:`parse_record`)."""

    key_attribute: str
    """``trace_id``, or the trace attribute the record is keyed by (``session.id``)."""
    key_value: str
    """The trace id, or the attribute's value."""
    thumbs: int | None = None
    """1 up, -1 down, ``None`` none."""
    score: float | None = None
    """1 to 5, ``None`` none."""
    labels: tuple[str, ...] = ()
    """Quick labels (``wrong price``), in the order given, without repeats."""
    comment: str | None = None
    user_id: str | None = None
    """As given (:func:`ingest_records` redacts it as configured)."""
    at: _dt.datetime | None = None
    """When the user gave it (UTC, naive); ``None``: the time it is stored."""
    feedback_id: str | None = None
    """As given; ``None``: :func:`digest` of the stored row."""


def parse_record(obj: Any, *, key: str = "trace_id") -> Feedback:
    """A record as :class:`Feedback`; :class:`BadRecord` naming the field and what is valid.
    ``key`` is the monitor's key attribute, which a record may carry as a field of its own.

    >>> parse_record({"trace_id": "t1", "thumbs": "down", "labels": ["wrong price"]})
    ... # doctest: +ELLIPSIS
    Feedback(key_attribute='trace_id', key_value='t1', thumbs=-1, score=None, labels=('wrong price',), ...)
    >>> parse_record({"session.id": "s9", "score": 4}, key="session.id").key_attribute
    'session.id'
    >>> parse_record({"trace_id": "t1", "thumbs": "meh"})
    Traceback (most recent call last):
    ...
    evalharness.monitor.feedback.BadRecord: thumbs: 'meh' is not valid; give "up" or "down"
    >>> parse_record({"trace_id": "t1"})
    Traceback (most recent call last):
    ...
    evalharness.monitor.feedback.BadRecord: thumbs: a record needs at least one of thumbs, score, labels, comment
    """
    if not isinstance(obj, dict):
        raise BadRecord("record", f"a JSON object is needed, not {type(obj).__name__}")
    allowed = (*FIELDS, key) if key != "trace_id" else FIELDS
    unknown = [k for k in obj if k not in allowed]
    if unknown:
        raise BadRecord(unknown[0], f"unknown field; valid fields: {', '.join(allowed)}")
    attribute, value = _key_of(obj, key)
    thumbs = obj.get("thumbs")
    if thumbs is not None:
        if not isinstance(thumbs, str) or thumbs.strip().lower() not in THUMBS:
            raise BadRecord("thumbs", f"{thumbs!r} is not valid; give \"up\" or \"down\"")
        thumbs = THUMBS[thumbs.strip().lower()]
    score = obj.get("score")
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, int | float) or not 1 <= score <= 5:
            raise BadRecord("score", f"{score!r} is not valid; give a number from 1 to 5")
        score = float(score)
    labels = obj.get("labels") or []
    if not isinstance(labels, list) or len(labels) > MAX_LABELS or not all(
            isinstance(x, str) and 0 < len(x.strip()) <= MAX_LABEL for x in labels):
        raise BadRecord("labels", f"give a list of at most {MAX_LABELS} texts of 1 to "
                                  f"{MAX_LABEL} characters, e.g. [\"wrong price\"]")
    labels = tuple(dict.fromkeys(x.strip() for x in labels))
    comment = _text(obj, "comment", MAX_COMMENT)
    if thumbs is None and score is None and not labels and not comment:
        raise BadRecord("thumbs", "a record needs at least one of thumbs, score, labels, "
                                  "comment")
    return Feedback(attribute, value, thumbs, score, labels, comment or None,
                    _text(obj, "user_id", MAX_ID), _time(obj.get("at")),
                    _text(obj, "feedback_id", MAX_ID))


def _key_of(obj: dict[str, Any], key: str) -> tuple[str, str]:
    """The (attribute, value) a record is keyed by: exactly one of ``trace_id``, ``key`` and
    the configured key attribute."""
    given = [k for k in ("trace_id", "key", key) if obj.get(k) is not None]
    given = list(dict.fromkeys(given))
    how = "trace_id, or key: {\"ATTRIBUTE\": \"VALUE\"}" + (
        f", or {key}" if key != "trace_id" else "")
    if len(given) != 1:
        raise BadRecord("trace_id", f"give exactly one of {how}"
                        + (f" (this record has {' and '.join(given)})" if given else ""))
    if given[0] == "key":
        pair = obj["key"]
        if not isinstance(pair, dict) or len(pair) != 1:
            raise BadRecord("key", "give one attribute and its value, e.g. "
                                   "{\"session.id\": \"abc\"}")
        attribute, value = next(iter(pair.items()))
        where = f"key.{attribute}"
    else:
        attribute, value = given[0], obj[given[0]]
        where = attribute
    if not ATTRIBUTE.fullmatch(attribute):
        raise BadRecord("key", f"{attribute!r} is not an attribute name (letters, digits, "
                               "_ . : / @ -, at most 128)")
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip() \
            or len(str(value)) > MAX_ID:
        raise BadRecord(where, f"give a text of 1 to {MAX_ID} characters")
    return attribute, str(value).strip()


def _text(obj: dict[str, Any], name: str, limit: int) -> str | None:
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise BadRecord(name, f"give a text of at most {limit} characters")
    return value.strip() or None


def _time(value: Any) -> _dt.datetime | None:
    """An ISO 8601 time as naive UTC (a time without offset is taken as UTC).

    >>> _time("2026-12-06T11:00:00+01:00"), _time(None)
    (datetime.datetime(2026, 12, 6, 10, 0), None)
    """
    if value is None:
        return None
    try:
        parsed = _dt.datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise BadRecord("at", f"{value!r} is not valid; give an ISO 8601 time, e.g. "
                              "\"2026-12-06T10:00:00Z\" (no offset: UTC)")
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(_dt.UTC).replace(tzinfo=None)
    return parsed


# -- storing -------------------------------------------------------------------------------


@dataclass
class IngestStats:
    """What one ingestion did."""

    read: int = 0
    """Records read (valid ones; a file with a bad line stores nothing)."""
    stored: int = 0
    """New rows in ``feedback``."""
    duplicates: int = 0
    """Records already stored (same ``feedback_id``): not stored again."""
    resolved: int = 0
    """Stored feedback (of any ingestion) joined to its trace by this ingestion's
    :func:`resolve`."""
    unresolved: int = 0
    """Feedback in the store whose trace the store does not hold (yet), after this ingestion."""
    unknown: int = 0
    """Of ``unresolved``, records for an unknown trace (:func:`unknown_where`)."""
    pending: int = 0
    """A file's torn last line (no newline, not JSON yet), left for the next read: 0 or 1."""
    too_old: int = 0
    """Records given before the store's retention (``older_than``): not stored."""


def digest(record: Feedback, user_hash: str | None, line: int | None = None) -> str:
    """The ``feedback_id`` of a record that gives none: a digest of what it says (its key,
    values, hashed user and time; without a time, its ``line`` in its file), so the same
    record read twice is stored once.

    >>> digest(Feedback("trace_id", "t1", thumbs=-1), None)
    'fb-ca478ee8ab59b675f38d399f2d7171e0'
    """
    basis = [record.key_attribute, record.key_value, record.thumbs, record.score,
             list(record.labels), record.comment, user_hash,
             record.at.isoformat() if record.at else line]
    return "fb-" + hashlib.sha256(json.dumps(basis).encode()).hexdigest()[:32]


def ingest_records(con: Any, records: Iterable[Feedback | dict[str, Any]], *,
                   source: str = "http", key: str = "trace_id",
                   redact_user_ids: str = "keep",
                   now: _dt.datetime | None = None, wait: _dt.timedelta = WAIT,
                   refuse_unknown: bool = False) -> IngestStats:
    """Store ``records`` (:class:`Feedback`, or dicts checked by :func:`parse_record`) in one
    transaction, then :func:`resolve`. A bad dict is an :class:`InputError` naming ``source``,
    its index and field, and nothing is stored. ``redact_user_ids``: one of
    :data:`REDACTIONS`. A record without ``at`` is dated ``now`` (default: the current time);
    without ``at`` nor ``feedback_id`` it is identified by its content alone (the endpoint
    dates such records on receipt, so a user who clicks up, down, up keeps three records).
    ``wait``: how long feedback waits for its trace; with ``refuse_unknown``, a record for a
    trace unknown after it (:func:`unknown_where`) is an :class:`UnknownTraces` error, and
    nothing is stored.
    """
    parsed, bad = [], []
    for i, rec in enumerate(records):
        try:
            parsed.append((rec if isinstance(rec, Feedback) else parse_record(rec, key=key),
                           f"{source} record {i}", i))
        except BadRecord as exc:
            bad.append(f"{source} record {i}: {exc}")
    if bad:
        raise InputError(_bad_message(bad, len(parsed) + len(bad)))
    return _store(con, [(rec, source, None, where, index) for rec, where, index in parsed],
                  redact_user_ids, now, wait, refuse_unknown)


def ingest_file(con: Any, path: Path, *, key: str = "trace_id",
                redact_user_ids: str = "keep", wait: _dt.timedelta = WAIT,
                refuse_unknown: bool = False,
                older_than: _dt.datetime | None = None) -> IngestStats:
    """Store the feedback file ``path`` (JSON lines; blank lines skipped) in one transaction.
    A bad line is an :class:`InputError` naming the file, line and field, and what is valid;
    nothing of the file is stored then. Ingesting the same file again stores nothing new.
    A last line without its newline that is not JSON yet (a writer mid-line) is left for the
    next read (``IngestStats.pending``), so a file that grows can be ingested on every pass.
    ``wait``, ``refuse_unknown``: as :func:`ingest_records`'s; the error names each line.
    ``older_than``: records given before it (the retention's cut-off) are skipped, so a file
    read on every pass does not bring back what retention deleted."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the feedback file: {exc}") from exc
    parsed, bad = [], []
    lines = text.splitlines()
    pending = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = jsonlimits.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines) and not text.endswith(("\n", "\r")):
                pending = 1
                continue
            bad.append(f"{path} line {number}: not JSON ({exc.msg}, column {exc.colno}); "
                       "give one JSON object a line")
            continue
        try:
            parsed.append((parse_record(obj, key=key), f"{path}:{number}", number,
                           f"{path} line {number}", number))
        except BadRecord as exc:
            bad.append(f"{path} line {number}: {exc}")
    if bad:
        raise InputError(_bad_message(bad, len(parsed) + len(bad)))
    kept = [p for p in parsed if older_than is None or p[0].at is None or p[0].at >= older_than]
    stats = _store(con, kept, redact_user_ids, None, wait, refuse_unknown)
    stats.pending, stats.too_old = pending, len(parsed) - len(kept)
    return stats


def _bad_message(bad: list[str], total: int) -> str:
    more = f"\n… and {len(bad) - MAX_ERRORS} more" if len(bad) > MAX_ERRORS else ""
    return (f"{len(bad)} of {total} feedback records are not valid (nothing was stored; "
            "docs/monitor.md, 'Users' feedback'):\n" + "\n".join(bad[:MAX_ERRORS]) + more)


def _store(con: Any, parsed: Sequence[tuple[Feedback, str, int | None, str, int]],
           redact_user_ids: str, now: _dt.datetime | None, wait: _dt.timedelta = WAIT,
           refuse_unknown: bool = False) -> IngestStats:
    """Insert the rows and join them to their traces in one transaction (``ON CONFLICT DO
    NOTHING`` makes it idempotent). ``parsed``: each record, its ``source`` column, the line
    its digest uses, where it is (for errors) and its index in the input."""
    if redact_user_ids not in REDACTIONS:
        raise UsageError(f"redact_user_ids {redact_user_ids!r}: give one of "
                         f"{', '.join(REDACTIONS)}")
    now = now or _dt.datetime.now(_dt.UTC).replace(tzinfo=None)
    stats = IngestStats(read=len(parsed))
    con.execute("BEGIN TRANSACTION")
    try:
        salt = user_salt(con)
        rows, places = [], {}
        for rec, source, line, where, index in parsed:
            hashed = hash_user_id(rec.user_id, salt) if rec.user_id else None
            user = {"keep": rec.user_id, "hash": hashed, "drop": None}[redact_user_ids]
            feedback_id = rec.feedback_id or digest(rec, hashed, line)
            places.setdefault(feedback_id, (where, index, rec, rec.at or now))
            rows.append((feedback_id, None, rec.key_attribute,
                         rec.key_value, rec.at or now, rec.thumbs, rec.score,
                         json.dumps(list(rec.labels), ensure_ascii=False) if rec.labels
                         else None, rec.comment, user, source))
        for start in range(0, len(rows), 500):
            chunk = rows[start:start + 500]
            values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(chunk))
            done = con.execute(f"INSERT INTO feedback VALUES {values} ON CONFLICT DO NOTHING",
                               [v for row in chunk for v in row]).fetchone()
            stats.stored += done[0] if done else 0
        stats.resolved = resolve(con)
        if refuse_unknown:
            _refuse_unknown(con, places, wait)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    stats.duplicates = stats.read - stats.stored
    stats.unresolved = _count(con, "trace_id IS NULL")
    stats.unknown = _count(con, unknown_where(wait))
    return stats


def _refuse_unknown(con: Any, places: dict[str, tuple[str, int, Feedback, _dt.datetime]],
                    wait: _dt.timedelta) -> None:
    """Raise :class:`UnknownTraces` when any of ``places``' records (by feedback id) is for an
    unknown trace; the caller rolls back."""
    unknown = {fid for (fid,) in con.execute(
        f"SELECT feedback_id FROM feedback WHERE {unknown_where(wait)}").fetchall()} & set(places)
    if not unknown:
        return
    first, last, n = con.execute(
        "SELECT min(coalesce(start_time, stored_at)), max(coalesce(start_time, stored_at)), "
        "count(*) FROM traces").fetchone()
    records = []
    for fid in sorted(unknown, key=lambda f: places[f][1]):
        where, index, rec, at = places[fid]
        name = "trace_id" if rec.key_attribute == "trace_id" else rec.key_attribute
        what = ("no stored trace has this id" if name == "trace_id" else
                f"no stored trace has the attribute {name} = this value")
        records.append({"index": index, "field": name, "where": where,
                        "error": f"{what} ({rec.key_value!r}), and the feedback (given "
                                 f"{_iso(at)}) is more than {_hours(wait)} older than the "
                                 f"newest stored trace ({_iso(last)}): its trace is not coming"})
    lines = [f"{r['where']}, field `{r['field']}`: {r['error']}" for r in records[:MAX_ERRORS]]
    more = f"\n… and {len(records) - MAX_ERRORS} more" if len(records) > MAX_ERRORS else ""
    raise UnknownTraces(
        f"{len(records)} feedback record(s) are for traces the store does not hold (nothing "
        f"was stored). The store holds {n} traces that started from {_iso(first)} to "
        f"{_iso(last)}; feedback waits {_hours(wait)} for its trace (`feedback.wait`). Check "
        "the key (a trace id of another application? `feedback.key` names the attribute "
        "records are keyed by), or store them anyway with --keep-unknown (they stay "
        "unresolved and are counted in the report):\n" + "\n".join(lines) + more, records)


def _iso(value: _dt.datetime | None) -> str:
    return value.strftime("%Y-%m-%dT%H:%MZ") if value else "(no time)"


def _hours(wait: _dt.timedelta) -> str:
    hours = wait.total_seconds() / 3600
    return f"{hours:g} h" if hours >= 1 else f"{wait.total_seconds():g} s"


def _count(con: Any, where: str) -> int:
    return con.execute(f"SELECT count(*) FROM feedback WHERE {where}").fetchone()[0]


def resolve(con: Any, *, join_key_attribute: str | None = None) -> int:
    """Fill ``feedback.trace_id`` where a stored trace matches; how many were filled.

    A record keyed by ``trace_id`` matches the trace with that id; one keyed by an attribute
    matches a trace whose ``attributes`` JSON has that value under that name (a flat object:
    ``{"session.id": "abc"}``), or, when the attribute is ``join_key_attribute`` (the
    mapping's join key), whose ``join_key`` is that value. Where several traces match (a
    session's turns), the latest trace that started at or before the feedback's time wins,
    else the earliest after it. Feedback no trace matches stays ``NULL`` (counted as
    unresolved by :func:`summary`); the monitor calls this after storing each batch of traces.
    """
    before = _count(con, "trace_id IS NULL")
    if not before:
        return 0
    con.execute("UPDATE feedback SET trace_id = key_value WHERE trace_id IS NULL "
                "AND key_attribute = 'trace_id' "
                "AND key_value IN (SELECT trace_id FROM traces)")
    attributes = [a for (a,) in con.execute(
        "SELECT DISTINCT key_attribute FROM feedback WHERE trace_id IS NULL "
        "AND key_attribute <> 'trace_id'").fetchall() if ATTRIBUTE.fullmatch(a)]
    for attribute in attributes:
        pick = ("SELECT f.feedback_id, t.trace_id, coalesce(t.start_time, t.stored_at) AS ts, "
                "f.received_at AS given FROM feedback f JOIN traces t ON {on} "
                "WHERE f.trace_id IS NULL AND f.key_attribute = ?")
        if dialect(con) == "postgresql":  # attributes is JSON text there
            parts = [pick.format(on="(t.attributes::jsonb ->> ?) = f.key_value")]
            params: list[Any] = [attribute, attribute]
        else:
            parts = [pick.format(on="json_extract_string(t.attributes, ?) = f.key_value")]
            params = [f'$."{attribute}"', attribute]
        if attribute == join_key_attribute:
            parts.append(pick.format(on="t.join_key = f.key_value"))
            params.append(attribute)
        con.execute(
            "UPDATE feedback SET trace_id = best.trace_id FROM ("
            " SELECT feedback_id, (array_agg(trace_id ORDER BY"
            "   CASE WHEN ts <= given THEN 0 ELSE 1 END,"
            "   CASE WHEN ts <= given THEN ts END DESC NULLS LAST,"
            "   CASE WHEN ts > given THEN ts END NULLS LAST, trace_id))[1] AS trace_id"
            f" FROM ({' UNION '.join(parts)}) AS found GROUP BY feedback_id) AS best "
            "WHERE feedback.feedback_id = best.feedback_id", params)
    return before - _count(con, "trace_id IS NULL")


def summary(con: Any, wait: _dt.timedelta = WAIT) -> dict[str, Any]:
    """Counts over the store's feedback, as the report and ``GET /feedback/stats`` give
    them: ``records``, ``resolved``, ``unresolved`` (feedback for traces the store does not
    hold), ``unknown`` (of those, records for an unknown trace after ``wait``,
    :func:`unknown_where`), ``thumbs_up``, ``thumbs_down``, ``scored``, ``rejected`` (records
    the endpoint refused, since the store was created)."""
    row = con.execute(
        "SELECT count(*), count(trace_id), count(*) FILTER (WHERE thumbs = 1),"
        " count(*) FILTER (WHERE thumbs = -1), count(score) FROM feedback").fetchone()
    rejected = con.execute("SELECT value FROM meta WHERE key = ?", [REJECTED_KEY]).fetchone()
    return {"records": row[0], "resolved": row[1], "unresolved": row[0] - row[1],
            "unknown": _count(con, unknown_where(wait)), "thumbs_up": row[2],
            "thumbs_down": row[3], "scored": row[4],
            "rejected": int(rejected[0]) if rejected else 0}


def count_rejected(con: Any, n: int) -> None:
    """Add ``n`` records the endpoint refused to the store's count (``meta``)."""
    con.execute(f"INSERT INTO meta VALUES ('{REJECTED_KEY}', ?) ON CONFLICT (key) DO UPDATE "
                "SET value = CAST(CAST(meta.value AS BIGINT) + CAST(excluded.value AS BIGINT)"
                " AS TEXT)", [str(n)])


# -- the user's label of a trace -------------------------------------------------------------

BY_USER = """
SELECT trace_id, user_id,
    (array_agg(thumbs ORDER BY received_at DESC, feedback_id DESC)
        FILTER (WHERE thumbs IS NOT NULL))[1] AS thumbs,
    max(received_at) FILTER (WHERE thumbs IS NOT NULL) AS thumbs_at,
    (array_agg(score ORDER BY received_at DESC, feedback_id DESC)
        FILTER (WHERE score IS NOT NULL))[1] AS score,
    (array_agg(labels ORDER BY received_at DESC, feedback_id DESC)
        FILTER (WHERE labels IS NOT NULL))[1] AS labels,
    (array_agg(comment ORDER BY received_at DESC, feedback_id DESC)
        FILTER (WHERE comment IS NOT NULL))[1] AS comment,
    count(*) AS records,
    max(received_at) AS last_at
FROM feedback
WHERE trace_id IS NOT NULL
GROUP BY trace_id, user_id
"""
"""Per trace and user (``NULL`` users are one anonymous user): the user's latest thumbs,
score, labels and comment, each the last record that gave one (a later comment does not
erase an earlier thumbs-down). ``(array_agg(x ORDER BY …))[1]`` is DuckDB's ``arg_max`` in a
form PostgreSQL runs too."""

_BY_TRACE_COUNTS = """
    count(*) AS users,
    count(*) FILTER (WHERE thumbs = 1) AS thumbs_up,
    count(*) FILTER (WHERE thumbs = -1) AS thumbs_down,
    CASE WHEN count(*) FILTER (WHERE thumbs = 1) > count(*) FILTER (WHERE thumbs = -1) THEN 1
         WHEN count(*) FILTER (WHERE thumbs = 1) < count(*) FILTER (WHERE thumbs = -1) THEN -1
         ELSE (array_agg(thumbs ORDER BY thumbs_at DESC)
               FILTER (WHERE thumbs IS NOT NULL))[1] END AS thumbs,
    avg(score) AS score"""

BY_TRACE = {
    "duckdb": f"""
SELECT trace_id,{_BY_TRACE_COUNTS},
    list_sort(list_distinct(flatten(
        list(CAST(labels AS VARCHAR[])) FILTER (WHERE labels IS NOT NULL)))) AS labels,
    count(comment) AS comments,
    max(last_at) AS last_at
FROM feedback_by_user
GROUP BY trace_id
""",
    # PostgreSQL: labels is JSON text; the union of the users' labels is aggregated apart
    "postgresql": f"""
SELECT b.trace_id, b.users, b.thumbs_up, b.thumbs_down, b.thumbs, b.score, l.labels,
    b.comments, b.last_at
FROM (SELECT trace_id,{_BY_TRACE_COUNTS},
        count(comment) AS comments, max(last_at) AS last_at
      FROM feedback_by_user GROUP BY trace_id) AS b
LEFT JOIN (SELECT u.trace_id, array_agg(DISTINCT x ORDER BY x) AS labels
           FROM feedback_by_user AS u, jsonb_array_elements_text(u.labels::jsonb) AS x
           GROUP BY u.trace_id) AS l USING (trace_id)
""",
}
"""Per trace, "the user's label": ``thumbs`` the majority of its users' latest thumbs (a tie:
the latest; one user: theirs), ``score`` the mean of their latest scores, ``labels`` the
union of their latest labels (sorted; NULL: none), with ``users``, ``thumbs_up``,
``thumbs_down``, ``comments`` and ``last_at``. Reads the view ``feedback_by_user``
(:data:`BY_USER`). Per dialect: the labels' union has no common form."""


def feedback_view(con: Any) -> None:
    """Create the temporary views ``feedback_by_user`` (:data:`BY_USER`) and
    ``feedback_by_trace`` (:data:`BY_TRACE`, in ``con``'s dialect) on ``con`` (a read-only connection will do).
    Only resolved feedback is in them: call :func:`resolve` first where the connection may
    write."""
    con.execute(f"CREATE OR REPLACE TEMP VIEW feedback_by_user AS {BY_USER}")
    con.execute("CREATE OR REPLACE TEMP VIEW feedback_by_trace AS "
                + BY_TRACE[dialect(con)])


# -- the HTTP endpoint ------------------------------------------------------------------------


@dataclass
class Endpoint:
    """What the endpoint's handler serves: the store, the token and its counters."""

    store: Any
    """The store's target (a DuckDB path or :class:`~evalharness.monitor.store.PostgresTarget`)."""
    token: str
    key: str = "trace_id"
    redact_user_ids: str = "keep"
    wait: _dt.timedelta = WAIT
    """Records for a trace still unknown after this are refused (:func:`unknown_where`)."""
    max_body: int = MAX_BODY
    hosts: Any = None
    """The :class:`~evalharness.review.server.Hosts` check (:func:`make_server` sets it)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """One store connection at a time in this process (DuckDB: one writer; PostgreSQL: one
    writer per store, :func:`evalharness.monitor.store.connect_postgres`)."""
    counts: Counter = field(default_factory=Counter)
    """Since this server started: ``requests``, ``stored``, ``duplicates``, ``rejected``."""

    def post(self, body: Any) -> tuple[HTTPStatus, dict[str, Any]]:
        """Check and store a POST's records, all or none; the status and answer."""
        records = body if isinstance(body, list) else [body]
        if not records or len(records) > MAX_RECORDS:
            return self.reject(1, [{"index": None, "field": "record",
                                    "error": f"send 1 to {MAX_RECORDS} records"}])
        parsed, errors = [], []
        for i, rec in enumerate(records):
            try:
                parsed.append(parse_record(rec, key=self.key))
            except BadRecord as exc:
                errors.append({"index": i, "field": exc.field, "error": exc.message})
        if errors:
            return self.reject(len(errors), errors)
        now = _dt.datetime.now(_dt.UTC).replace(tzinfo=None)
        parsed = [rec if rec.at else dataclasses.replace(rec, at=now) for rec in parsed]
        try:
            with self.lock, connect(self.store) as con:
                stats = ingest_records(con, parsed, source="http", key=self.key,
                                       redact_user_ids=self.redact_user_ids,
                                       wait=self.wait, refuse_unknown=True)
                self.counts.update(stored=stats.stored, duplicates=stats.duplicates)
        except UnknownTraces as exc:
            return self.reject(len(exc.records), [
                {k: r[k] for k in ("index", "field", "error")} for r in exc.records])
        return HTTPStatus.OK, asdict(stats)

    def reject(self, n: int, errors: list[dict[str, Any]]) -> tuple[HTTPStatus, dict]:
        """Count ``n`` refused records (here and in the store); the 400 answer."""
        with self.lock:
            self.counts["rejected"] += n
            try:
                with connect(self.store) as con:
                    count_rejected(con, n)
            except EvalHarnessError as exc:  # the store busy: the answer still goes out
                _warn(f"a rejection was not counted in the store: {exc}")
        first = errors[0]
        where = f"record {first['index']}: " if first["index"] is not None else ""
        return HTTPStatus.BAD_REQUEST, {
            "error": f"{where}{first['field']}: {first['error']} (nothing was stored)",
            "rejected": n, "errors": errors[:MAX_ERRORS]}

    def stats(self) -> dict[str, Any]:
        """``GET /feedback/stats``: this server's counts and the store's (:func:`summary`)."""
        with self.lock, connect(self.store) as con:
            store = summary(con, self.wait)
        with self.lock:
            server = {k: self.counts[k] for k in ("requests", "stored", "duplicates",
                                                   "rejected")}
        return {"server": server, "store": store}


def _warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr, flush=True)


class FeedbackHandler(Handler):
    """``POST /feedback`` and ``GET /feedback/stats`` (review's handler lends its headers,
    timeouts and quiet logging); the :class:`Endpoint` is the server's ``app``."""

    server_version = "evalharness-feedback"

    def _authorized(self) -> bool:
        """The Host check (403) and the bearer token (401); answers when refused."""
        if not self.app.hosts.allows(self.headers.get("Host") or ""):
            self._json(HTTPStatus.FORBIDDEN, {"error": "this endpoint answers only at the "
                                                       "address it was started on"})
            return False
        scheme, _, given = (self.headers.get("Authorization") or "").partition(" ")
        given_b = given.strip().encode("utf-8", "surrogatepass")
        if scheme.lower() != "bearer" or not given_b or not hmac.compare_digest(
                given_b, self.app.token.encode()):
            self._send(HTTPStatus.UNAUTHORIZED, "application/json",
                       b'{"error": "missing or wrong token: send the header '
                       b'Authorization: Bearer TOKEN (the token the command printed)"}',
                       {"WWW-Authenticate": 'Bearer realm="evalharness-feedback"'})
            return False
        return True

    def do_GET(self) -> None:  # noqa: N802 - stdlib's name
        if not self._authorized():
            return
        if self.path.split("?")[0] != "/feedback/stats":
            self._json(HTTPStatus.NOT_FOUND, {"error": "not found; GET /feedback/stats"})
            return
        try:
            self._json(HTTPStatus.OK, self.app.stats())
        except EvalHarnessError as exc:
            self._json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": str(exc)})

    def do_POST(self) -> None:  # noqa: N802 - stdlib's name
        if not self._authorized():
            return
        if self.path.split("?")[0] != "/feedback":
            self._json(HTTPStatus.NOT_FOUND, {"error": "not found; POST /feedback"})
            return
        with self.app.lock:
            self.app.counts["requests"] += 1
        if not (self.headers.get("Content-Type") or "").startswith("application/json"):
            self._json(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": "send application/json"})
            return
        try:
            length = int(self.headers.get("Content-Length") or -1)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            self._json(HTTPStatus.LENGTH_REQUIRED, {"error": "send a Content-Length"})
            return
        if length > self.app.max_body:
            self.close_connection = True  # the body stays unread
            self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                       {"error": f"the body is over {self.app.max_body} bytes; send fewer "
                                 "records a request"})
            return
        try:
            body = jsonlimits.loads(self.rfile.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            why = f"{exc.msg} (column {exc.colno})" if isinstance(exc, json.JSONDecodeError) \
                else "not UTF-8"
            status, answer = self.app.reject(1, [{"index": None, "field": "body",
                                                  "error": f"not JSON: {why}"}])
            self._json(status, answer)
            return
        try:
            status, answer = self.app.post(body)
        except EvalHarnessError as exc:  # the store cannot be opened (a monitor holds it)
            self._json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": str(exc)},)
            return
        self._json(status, answer)


def make_server(store: Any, *, host: str = "127.0.0.1", port: int = 0,
                token: str | None = None, key: str = "trace_id",
                redact_user_ids: str = "keep", max_body: int = MAX_BODY,
                request_timeout: float = REQUEST_TIMEOUT, wait: _dt.timedelta = WAIT
                ) -> Server:
    """The endpoint's server bound to ``host:port`` (0: a free port), not yet serving; its
    ``app`` is the :class:`Endpoint` (``app.token``: ``token``, else a new random one). The
    store is created or checked first, so a bad store is an error before anything listens.
    Serve with ``serve_forever()`` (in a thread if you like); stop with ``shutdown()`` and
    ``server_close()``."""
    if not ATTRIBUTE.fullmatch(key):
        raise UsageError(f"feedback key {key!r} is not an attribute name")
    if redact_user_ids not in REDACTIONS:
        raise UsageError(f"redact_user_ids {redact_user_ids!r}: give one of "
                         f"{', '.join(REDACTIONS)}")
    store = as_target(store)
    with connect(store) as con:
        user_salt(con)
    app = Endpoint(store, token or new_token(), key, redact_user_ids, wait=wait,
                   max_body=max_body)
    return review_server(app, host, port, request_timeout=request_timeout,
                         handler=FeedbackHandler)


def url_of(server: Server) -> str:
    """The endpoint's base URL (``http://localhost:PORT``)."""
    return f"http://{url_host(server.server_address[0])}:{server.server_address[1]}"


def serve(store: Any, host: str = "127.0.0.1", port: int = 0, token: str | None = None, *,
          key: str = "trace_id", redact_user_ids: str = "keep",
          ready: Callable[[Server], None] | None = None,
          wait: _dt.timedelta = WAIT) -> dict[str, int]:
    """Serve the endpoint until Ctrl-C (or ``server.shutdown()`` from another thread);
    ``ready`` is called with the listening server (its ``app.token``). Warns on stderr when
    ``host`` is reachable from other machines. Returns this server's counts."""
    from evalharness.addresses import is_loopback

    try:
        server = make_server(store, host=host, port=port, token=token, key=key,
                             redact_user_ids=redact_user_ids, wait=wait)
    except OSError as exc:
        raise UsageError(bind_problem(host, port, exc)) from None
    if not is_loopback(host):
        _warn(f"--host {host} listens beyond this machine: anyone who reaches it and has the "
              "token can write feedback (no TLS: the token crosses the network in clear). Use "
              "127.0.0.1 (the default) behind a reverse proxy with TLS instead.")
    try:
        if ready is not None:
            ready(server)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return dict(server.app.counts)  # type: ignore[attr-defined]


# -- the command line -------------------------------------------------------------------------


@dataclass(frozen=True)
class MonitorSettings:
    """What the feedback commands need of MONITOR.yaml (:func:`monitor_settings`)."""

    store: Any
    key: str = "trace_id"
    redact_user_ids: str = "hash"
    wait: _dt.timedelta = WAIT


def monitor_settings(path: Path) -> MonitorSettings:
    """The store (``store.path`` relative to MONITOR.yaml, or ``store.url``), ``feedback.key`` and ``redact.user_ids`` of
    MONITOR.yaml, validated as ``evalharness monitor`` validates it (the scenario it names is
    not loaded: feedback needs none of it)."""
    from evalharness.monitor.config import read_monitor_file

    spec, _ = read_monitor_file(Path(path))
    return MonitorSettings(spec.store.target(Path(path).parent), spec.feedback.key, spec.redact.user_ids, spec.feedback.wait_span)


MONITOR = click.Path(path_type=Path, dir_okay=False, exists=True)


@click.group(name="feedback")
def feedback_group() -> None:
    """Users' feedback (thumbs, 1-5 scores, quick labels, comments) into the monitor's store.

    A record is one JSON object, keyed by trace id or by a trace attribute:

    \b
      {"trace_id": "4bf92f...", "thumbs": "down", "labels": ["wrong price"]}
      {"key": {"session.id": "abc"}, "score": 2, "user_id": "u-17",
       "at": "2026-12-06T10:00:00Z", "comment": "the coat is 129, not 99"}

    \b
    Examples:
      evalharness monitor feedback add monitor.yaml thumbs.jsonl
      evalharness monitor feedback serve monitor.yaml --port 8077
    """


@feedback_group.command()
@click.argument("monitor_file", metavar="MONITOR.yaml", type=MONITOR)
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--keep-unknown", is_flag=True,
              help="Store records for unknown traces too (they stay unresolved and are "
                   "counted in the report) instead of refusing the file.")
def add(monitor_file: Path, file: Path, keep_unknown: bool) -> None:
    """Store FILE's feedback (JSON lines) in the monitor's store.

    A bad line stops it (exit 2) naming the line and field; nothing is stored then. Adding
    the same file again stores nothing twice. Feedback for a trace the store does not hold
    yet is kept and joined when the trace arrives; a line for an unknown trace (the store
    holds traffic newer than the feedback by more than `feedback.wait`, 24h, and none of it
    matches) stops it too, unless --keep-unknown.

    \b
    Examples:
      evalharness monitor feedback add monitor.yaml feedback/2026-12-06.jsonl
    """
    settings = monitor_settings(monitor_file)
    with connect(settings.store) as con:
        stats = ingest_file(con, file, key=settings.key,
                            redact_user_ids=settings.redact_user_ids,
                            wait=settings.wait, refuse_unknown=not keep_unknown)
    click.echo(f"{file}: {stats.read} records, {stats.stored} stored, {stats.duplicates} "
               f"already stored; {stats.resolved} joined to their traces now, "
               f"{stats.unresolved - stats.unknown} in the store wait for their trace"
               + (f", {stats.unknown} are for unknown traces" if stats.unknown else "")
               + ("; the last line is not complete yet (left for the next add)"
                  if stats.pending else ""))


@feedback_group.command(name="serve")
@click.argument("monitor_file", metavar="MONITOR.yaml", type=MONITOR)
@click.option("--port", type=click.IntRange(0, 65535), default=0,
              help="Port to listen on (default: a free one).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but 127.0.0.1 exposes the endpoint (the token "
                   "still guards it, but travels in clear).")
@click.option("--token", envvar="EVALHARNESS_FEEDBACK_TOKEN", default=None,
              help="The bearer token clients send (env EVALHARNESS_FEEDBACK_TOKEN; default: "
                   "a new random one, printed once).")
def serve_command(monitor_file: Path, port: int, host: str, token: str | None) -> None:
    """Take feedback over HTTP until Ctrl-C: POST /feedback (one JSON record or a list, with
    the header Authorization: Bearer TOKEN), GET /feedback/stats.

    A POST is stored whole or not at all; a bad record is answered 400 with the field and
    what is valid, and counted. Records that give a feedback_id (or an "at") can be retried
    safely.

    \b
    Examples:
      evalharness monitor feedback serve monitor.yaml --port 8077
      curl -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" \\
           -d '{"trace_id": "4bf92f...", "thumbs": "down"}' http://localhost:8077/feedback
    """
    import signal

    settings = monitor_settings(monitor_file)

    def ready(server: Server) -> None:
        app = server.app  # type: ignore[attr-defined]
        click.echo(f"feedback for {settings.store} at {url_of(server)}/feedback")
        if token is None:
            click.echo(f"token (shown once): {app.token}")
        click.echo("(Ctrl-C to stop)")
        sys.stdout.flush()
        signal.signal(signal.SIGTERM, lambda *_: threading.Thread(
            target=server.shutdown, daemon=True).start())

    previous = signal.getsignal(signal.SIGTERM)
    try:
        counts = serve(settings.store, host, port, token, key=settings.key,
                       redact_user_ids=settings.redact_user_ids, ready=ready,
                       wait=settings.wait)
    finally:
        signal.signal(signal.SIGTERM, previous)
    click.echo(f"stopped: {counts.get('stored', 0)} stored, {counts.get('duplicates', 0)} "
               f"already stored, {counts.get('rejected', 0)} rejected")

