"""Drift alarms over time: the check a monitor and a report run (:func:`run_check`), alarms
remembered in the store so that each is sent once when it starts firing and once when it
resolves (:func:`update_alarms`), and sent through every configured alert sender
(:func:`send`) — docs/monitor.md, "Drift alarms" and "Alerts".

An alarm's identity is what it is about — its kind, component, metric and route — not the
window it was found in: the recent window slides with the traffic, and an alarm that holds on
the next check is the same alarm, still firing (``last_seen`` moves), not a new one. It
resolves when a check that could test it finds no drift any more (a check that skipped it for
too few values leaves it as it was).

Senders are plugins' (:class:`evalharness.registry.AlertSender`, the
``register_alert_senders`` hook); the built-in ``webhook`` POSTs each alert as JSON. Delivery
goes through the store's ``outbox``: the alarm's transaction also writes one row per alert and
sender, and :func:`deliver` sends what is due, marking each row sent once its sender took it.
A monitor killed between the two sends at its next check; a sender that fails is a warning
and its alert is tried again with a backoff, for a day. So every alert is delivered at least
once (a crash right after a send and before its mark sends it again: the ``id`` tells a
receiver it has seen it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from evalharness.monitor.drift import alarm_key, check_drift, windows_from
from evalharness.monitor.timespans import parse_span

FIRING = "firing"
RESOLVED = "resolved"


@dataclass(frozen=True)
class Alert:
    """What a sender is given: one alarm that started firing or resolved."""

    monitor: str
    """The monitor's name (MONITOR.yaml's ``name``, else its scenario's)."""
    state: Literal["firing", "resolved"]
    key: str
    """What the alarm is about: ``kind/component/metric/route`` (``-`` for none)."""
    message: str
    """One line: the component, the metric, both windows' values, the effect with its 95% CI,
    p and q (for ``resolved``: the check that found no drift)."""
    alarm: dict[str, Any]
    """The drift test (docs/monitor.md, "report.json": ``drift.tests[]``): ``kind``,
    ``component``, ``metric``, ``route``, ``baseline``, ``recent``, ``effect``, ``ci95``,
    ``p``, ``p_adjusted``."""
    check: dict[str, Any]
    """The check that decided: its ``baseline`` and ``recent`` windows and ``q``."""
    store: str = ""
    """The monitor's store (a path)."""
    id: str = ""
    """The delivery's id (the outbox row's): the same when an alert is delivered again."""

    def to_json(self) -> dict[str, Any]:
        """The alert as JSON (what the webhook POSTs), with a ``version``."""
        return {"version": 1, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Alert:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class Sent:
    """What :func:`send` did."""

    alerts: int = 0
    failures: list[str] = field(default_factory=list)


def check_end(con: Any, until: datetime | None = None, *, recent: str = "1d"
              ) -> datetime | None:
    """Where a check's recent window ends: ``until``, else the start of the hour after the
    newest stored trace's start — of the minute after it when the ``recent`` span is under an
    hour — so that trace is in it, and a check repeated within the hour (minute) tests the
    same windows; ``None`` for a store without traces. The store's traffic is the clock:
    replayed traffic is checked as live traffic is."""
    if until is not None:
        return until
    newest = con.execute("SELECT max(coalesce(start_time, stored_at)) FROM traces "
                         "WHERE status = 'evaluated'").fetchone()[0]
    if newest is None:
        return None
    span = parse_span(recent)
    if span is not None and span < timedelta(hours=1):
        return newest.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return newest.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)


def run_check(con: Any, *, recent: str, baseline: str, q: float, min_n: int,
              until: datetime | None = None, seed: int = 0,
              exclude: Sequence[str] = ()) -> dict[str, Any] | None:
    """The drift check over the store (:func:`evalharness.monitor.drift.check_drift`): the
    ``recent`` span (``1d``) ending at :func:`check_end`, against the ``baseline`` span before
    it. ``None`` when the store holds no evaluated trace."""
    end = check_end(con, until, recent=recent)
    if end is None:
        return None
    base, rec = windows_from(end, recent=recent, baseline=baseline)
    return check_drift(con, baseline=base, recent=rec, q=q, min_n=min_n, seed=seed,
                       exclude=exclude)


def update_alarms(con: Any, check: dict[str, Any], *, monitor: str, store: str = "",
                  now: datetime | None = None, senders: Sequence[str] = ()) -> list[Alert]:
    """Record ``check``'s alarms in the store's ``alarms`` table, in one transaction; the
    alerts to send: every alarm not firing before (``firing``), every firing alarm the check
    tested and found no drift in (``resolved``). Each is also written to the ``outbox`` once
    per sender named in ``senders``, in the same transaction (:func:`deliver` sends them)."""
    now = now or datetime.now(UTC).replace(tzinfo=None)
    about = {"baseline": check["baseline"], "recent": check["recent"], "q": check["q"]}
    firing = {alarm_key(t): t for t in check["alarms"]}
    tested = {alarm_key(t): t for t in check["tests"] if t["skipped"] is None}
    out: list[Alert] = []
    con.execute("BEGIN TRANSACTION")
    try:
        open_now = {k for (k,) in con.execute(
            "SELECT key FROM alarms WHERE closed_at IS NULL").fetchall()}
        for key, test in firing.items():
            details = json.dumps(_plain(test), ensure_ascii=False)
            if key in open_now:
                con.execute("UPDATE alarms SET last_seen = ?, message = ?, details = ? "
                            "WHERE key = ?", [now, test["message"], details, key])
                continue
            con.execute(
                "INSERT INTO alarms VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?) ON CONFLICT (key) "
                "DO UPDATE SET opened_at = excluded.opened_at, last_seen = excluded.last_seen,"
                " closed_at = NULL, message = excluded.message, details = excluded.details",
                [key, test["kind"], test.get("component"), test.get("metric"), test["route"],
                 now, now, test["message"], details])
            out.append(Alert(monitor, FIRING, key, test["message"], _plain(test), about, store))
        for key in sorted(open_now):
            if key in firing or key not in tested:
                continue
            con.execute("UPDATE alarms SET closed_at = ? WHERE key = ?", [now, key])
            out.append(Alert(monitor, RESOLVED, key, "resolved: " + tested[key]["message"],
                             _plain(tested[key]), about, store))
        out = [replace(a, id=f"{a.key}|{a.state}|{now.isoformat()}") for a in out]
        for alert in out:
            for name in senders:
                con.execute("INSERT INTO outbox (id, sender, alert, created_at, attempts) "
                            "VALUES (?, ?, ?, ?, 0) ON CONFLICT (id) DO NOTHING",
                            [f"{alert.id}|{name}", name,
                             json.dumps(alert.to_json(), ensure_ascii=False), now])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return out


def send(alerts: Sequence[Alert], senders: Sequence[tuple[str, Callable[..., Any], Any]],
         warn: Callable[[str], None]) -> Sent:
    """Give every alert to every sender (``(name, send, settings)``); a sender that raises is
    a warning naming it and the alarm, and the others still get it."""
    done = Sent()
    for alert in alerts:
        for name, deliver, settings in senders:
            try:
                deliver(alert, settings)
                done.alerts += 1
            except Exception as exc:  # noqa: BLE001 - a sender's failure never stops the monitor
                text = (f"alert sender {name!r} could not send the {alert.state} alarm "
                        f"{alert.key}: {type(exc).__name__}: {exc}")
                done.failures.append(text)
                warn(text)
    return done


RETRY = timedelta(minutes=1)
"""The wait before an alert whose sender failed is tried again, doubled at each failure."""
MAX_RETRY = timedelta(hours=1)
GIVE_UP = timedelta(days=1)
"""An alert still failing this long after it was written is given up (with a warning)."""


def deliver(connect: Callable[[], Any], senders: Sequence[tuple[str, Callable[..., Any], Any]],
            warn: Callable[[str], None], now: datetime | None = None) -> Sent:
    """Send the outbox's due alerts through their senders (``(name, send, settings)``), the
    oldest first; mark each sent, or count the failure and set its next try (:data:`RETRY`,
    doubled, at most :data:`MAX_RETRY`), or give it up after :data:`GIVE_UP`. ``connect()``
    opens the store: it is held to read and to mark, never while a sender works (a slow
    receiver must not lock the store)."""
    now = now or datetime.now(UTC).replace(tzinfo=None)
    by_name = {name: (deliver_, settings) for name, deliver_, settings in senders}
    with connect() as con:
        due = con.execute(
            "SELECT id, sender, alert, created_at, attempts FROM outbox WHERE sent_at IS NULL "
            "AND given_up_at IS NULL AND (not_before IS NULL OR not_before <= ?) "
            "ORDER BY created_at, id", [now]).fetchall()
    done, marks = Sent(), []
    for row_id, name, text, created, attempts in due:
        alert = Alert.from_json(json.loads(text))
        found = by_name.get(name)
        try:
            if found is None:
                raise RuntimeError(f"no sender {name!r} under `alerts:` any more")
            found[0](alert, found[1])
        except Exception as exc:  # noqa: BLE001 - a sender's failure never stops the monitor
            reason = f"{type(exc).__name__}: {exc}"
            late = now - created >= GIVE_UP or found is None
            text = (f"alert sender {name!r} could not send the {alert.state} alarm "
                    f"{alert.key}: {reason}"
                    + ("; given up" if late else f"; tried again from "
                       f"{(now + _backoff(attempts)):%H:%M} UTC"))
            done.failures.append(text)
            warn(text)
            marks.append(("UPDATE outbox SET attempts = attempts + 1, last_error = ?, "
                          "not_before = ?, given_up_at = ? WHERE id = ?",
                          [reason, now + _backoff(attempts), now if late else None, row_id]))
        else:
            done.alerts += 1
            marks.append(("UPDATE outbox SET sent_at = ? WHERE id = ?", [now, row_id]))
    if marks:
        with connect() as con:
            for sql, params in marks:
                con.execute(sql, params)
    return done


def _backoff(attempts: int) -> timedelta:
    """The wait after the ``attempts + 1``-th failure in a row.

    >>> [str(_backoff(n)) for n in (0, 1, 5, 9)]
    ['0:01:00', '0:02:00', '0:32:00', '1:00:00']
    """
    return min(RETRY * 2 ** min(attempts, 20), MAX_RETRY)


def _plain(value: Any) -> Any:
    """JSON-able: NaN and infinities as ``None``, tuples as lists, numpy scalars as floats."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# -- the built-in webhook ----------------------------------------------------------------------


def post_webhook(alert: Alert, settings: Any) -> None:
    """The ``webhook`` sender: POST the alert's JSON to ``settings.url`` (with ``Authorization:
    Bearer`` the value of the environment variable ``settings.token_env`` when given); any
    answer but 2xx is an error."""
    import os
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json", "User-Agent": "evalharness-monitor"}
    if settings.token_env:
        token = os.environ.get(settings.token_env)
        if not token:
            raise RuntimeError(f"the environment variable {settings.token_env} (token_env) "
                               "is not set")
        headers["Authorization"] = f"Bearer {token}"
    body = json.dumps(alert.to_json(), ensure_ascii=False).encode()
    request = urllib.request.Request(settings.url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=settings.timeout_s) as answer:
            answer.read()
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"{settings.url} answered {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise RuntimeError(f"{settings.url}: {getattr(exc, 'reason', exc)}") from None
