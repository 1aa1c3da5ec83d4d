"""The judge's daily budget (docs/monitor.md, "The judge's budget"): how much of it a day has
spent, and the factor sampling's rate is scaled by so that spending approaches the budget
without a cliff.

A day is a UTC calendar day. What it spent is summed over the traces evaluated that day (the
store's ``judge_requests`` and ``judge_cost``, from the judgment records of each trace's
metric values); what it has *committed* is the queue: each queued trace at the mean cost of
the last evaluated ones. Intake asks :meth:`Budget.factor` for every trace it decides, and
counts each trace it queues, so a burst read in one pass slows down as it fills the budget;
evaluation asks :meth:`Budget.exhausted` before each batch, so the budget holds even when a
backlog queued on a quieter day is evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from evalharness.monitor import store
from evalharness.monitor.config import BudgetSpec


def day_start(now: datetime) -> datetime:
    """The UTC midnight that starts ``now``'s day (naive UTC in, naive UTC out).

    >>> day_start(datetime(2026, 12, 6, 20, 45))
    datetime.datetime(2026, 12, 6, 0, 0)
    """
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def next_day(now: datetime) -> datetime:
    """The UTC midnight after ``now``.

    >>> next_day(datetime(2026, 12, 6, 20, 45))
    datetime.datetime(2026, 12, 7, 0, 0)
    """
    return day_start(now) + timedelta(days=1)


def scale(used: float, budget: float, soften_at: float) -> float:
    """The sampling factor for ``used`` of ``budget``: 1 up to ``soften_at`` of it, then the
    share of the rest still unspent, 0 at the budget.

    >>> [scale(u, 100, 0.5) for u in (0, 50, 75, 90, 100, 120)]
    [1.0, 1.0, 0.5, 0.2, 0.0, 0.0]
    >>> scale(0, 0, 0.5)
    0.0
    """
    if budget <= 0 or used >= budget:
        return 0.0
    soft = soften_at * budget
    if used <= soft:
        return 1.0
    return round((budget - used) / (budget - soft), 12)


@dataclass
class Budget:
    """One day's budget as a pass sees it: spent (read from the store at the start of the
    pass), queued (counted up as the pass queues traces), and the likely cost of a trace."""

    spec: BudgetSpec
    day: datetime
    spent_requests: int = 0
    spent_cost: float = 0.0
    queued: int = 0
    per_trace: tuple[float, float] | None = None
    """Mean ``(requests, cost)`` of a recently evaluated trace; ``None``: none evaluated yet
    (then the queue commits nothing)."""

    @classmethod
    def read(cls, con: Any, spec: BudgetSpec, now: datetime) -> Budget:
        """Today's budget from the store."""
        day = day_start(now)
        requests, cost = store.judge_spend(con, day)
        return cls(spec, day, requests, cost, store.queue_size(con), store.judge_per_trace(con))

    def used(self) -> tuple[float | None, float | None]:
        """``(requests, cost)`` spent and committed, each ``None`` when not budgeted."""
        per = self.per_trace or (0.0, 0.0)
        requests = (self.spent_requests + self.queued * per[0]
                    if self.spec.judge_requests_per_day is not None else None)
        cost = (self.spent_cost + self.queued * per[1]
                if self.spec.judge_cost_per_day is not None else None)
        return requests, cost

    def factor(self) -> float:
        """What sampling's rate is multiplied by now (the smaller of the two budgets')."""
        requests, cost = self.used()
        out = 1.0
        if requests is not None:
            out = min(out, scale(requests, self.spec.judge_requests_per_day,
                                 self.spec.soften_at))
        if cost is not None:
            out = min(out, scale(cost, self.spec.judge_cost_per_day, self.spec.soften_at))
        return out

    def room(self, n: int) -> int:
        """How many queued traces evaluation may take now, at most ``n``: as many as the rest
        of the day's budget likely pays for (at least one while any is left), so a day
        overshoots its budget by at most one trace's cost."""
        if self.per_trace is None:
            return n
        spec, (requests, cost) = self.spec, self.per_trace
        if spec.judge_requests_per_day is not None and requests > 0:
            n = min(n, max(1, int((spec.judge_requests_per_day - self.spent_requests)
                                  // requests)))
        if spec.judge_cost_per_day is not None and cost > 0:
            n = min(n, max(1, int((spec.judge_cost_per_day - self.spent_cost) // cost)))
        return n

    def exhausted(self) -> str | None:
        """Why nothing more may be sent to the judge today (spent alone, not the queue), or
        ``None``."""
        spec = self.spec
        if spec.judge_requests_per_day is not None and \
                self.spent_requests >= spec.judge_requests_per_day:
            return (f"the judge's budget for {self.day:%Y-%m-%d} is spent "
                    f"({self.spent_requests:,} of {spec.judge_requests_per_day:,} requests)")
        if spec.judge_cost_per_day is not None and self.spent_cost >= spec.judge_cost_per_day:
            return (f"the judge's budget for {self.day:%Y-%m-%d} is spent "
                    f"({self.spent_cost:.4g} of {spec.judge_cost_per_day:g})")
        return None

    def summary(self) -> dict[str, Any]:
        """For the report and the pass line."""
        return {"day": self.day.strftime("%Y-%m-%d"), "requests": self.spent_requests,
                "requests_budget": self.spec.judge_requests_per_day,
                "cost": round(self.spent_cost, 6), "cost_budget": self.spec.judge_cost_per_day,
                "queued": self.queued, "factor": round(self.factor(), 4)}
