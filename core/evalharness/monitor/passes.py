"""One pass of the monitor: retention, feedback, then every trace of the sources not yet stored
— sampled, evaluated reference-free and stored a batch per transaction (docs/monitor.md,
"Resume after a kill").

The store is the truth, not memory: a pass starts from what the store holds (the trace ids
decided, the sampling counts, the feedback), and a batch is written in one transaction, so a
monitor killed at any moment has stored each trace whole or not at all, and the next pass
takes up exactly the traces not stored. The store is opened only to read a pass's state and
to write a batch, so ``monitor report`` can read between them.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from evalharness.judge.base import Usage
from evalharness.models import BUILTIN_STEPS, CaseResult, Trace
from evalharness.monitor import store
from evalharness.monitor.budget import Budget
from evalharness.monitor.config import Monitor
from evalharness.monitor.evaluate import Evaluated, ReferenceFree, details_json, judge_of
from evalharness.monitor.intake import (
    Incoming,
    Pass,
    Sampler,
    attributes_json,
    read_pass,
    source_files,
    thumbs_for,
    thumbs_of,
)
from evalharness.prepare import make_judge, prepare_context

FEEDBACK_MODULE = "evalharness.monitor.feedback"

INTAKE_BATCH = 500
"""Traces intake decides and stores in one transaction at least (``batch_size`` when larger).
Intake asks no judge, so its transactions can be larger than evaluation's: each costs a
connection to the store (tens of milliseconds with DuckDB, which checkpoints on close), and a
monitor killed mid-way leaves the undecided traces in the sources, decided again next time."""

EXECUTOR_BATCHES = 20
"""With an executor, queued traces taken at once, in batches: enough to keep a cluster's
workers busy (the executor splits them into its groups), few enough that a monitor killed
mid-way re-evaluates little (they are stored in one transaction when all are back)."""


@dataclass
class PassSummary:
    """What one pass did (printed on stderr, returned to tests)."""

    seen: int = 0
    known: int = 0
    pending: int = 0
    stored: int = 0
    evaluated: int = 0
    not_sampled: int = 0
    unmappable: int = 0
    batches: int = 0
    expired: int = 0
    """Traces deleted by retention at the start of the pass."""
    too_old: int = 0
    """Traces of the sources skipped: older than retention."""
    files: int = 0
    root_causes: dict[str, int] = field(default_factory=dict)
    feedback: Any = None
    stopped: bool = False
    queued: int = 0
    """Sampled traces intake put in the queue."""
    held_back: int = 0
    """New traces intake left in the sources: the queue was full (back-pressure)."""
    left_by_budget: int = 0
    """Traces the rate would have taken that the judge's budget left out."""
    waiting: int = 0
    """Traces in the queue after the pass."""
    put_back: int = 0
    """Traces whose evaluation the judge could not answer: back in the queue, for later."""
    judge_down: str | None = None
    """Why evaluation stopped early: the judge could not answer (the last error)."""
    budget_spent: str | None = None
    """Why evaluation stopped early: the day's judge budget is spent."""
    budget: dict[str, Any] | None = None
    """The day's judge budget after the pass (``budget:`` set)."""
    unchanged_files: int = 0
    """Source files not read: every trace of them was decided before, and they are
    unchanged since."""
    intake_batches: int = 0

    def line(self) -> str:
        causes = ", ".join(f"{c} {n}" for c, n in sorted(self.root_causes.items(),
                                                         key=lambda kv: -kv[1]))
        return (f"{self.stored} traces stored ({self.queued} queued, {self.not_sampled} "
                f"left out by sampling, {self.unmappable} unmappable), {self.evaluated} "
                f"evaluated, {self.waiting} waiting; {self.known} already stored, "
                f"{self.pending} pending"
                + (f", {self.too_old} older than retention (skipped)" if self.too_old else "")
                + (f", {self.held_back} held back (queue full)" if self.held_back else "")
                + (f"; {self.unchanged_files} file(s) unchanged since read whole, skipped"
                   if self.unchanged_files else "")
                + (f", {self.left_by_budget} left out by the judge's budget"
                   if self.left_by_budget else "")
                + (f"; root causes: {causes}" if causes else "")
                + (f"; judge down, {self.put_back} back in the queue: {self.judge_down}"
                   if self.judge_down else "")
                + (f"; {self.budget_spent}" if self.budget_spent else ""))


class MonitorRun:
    """The monitor's machinery for one process: the judge, the database and corpus the
    evaluators use, the reference-free evaluation. :meth:`run_pass` as often as wanted, then
    :meth:`close`."""

    def __init__(self, monitor: Monitor, *,
                 on_batch: Callable[[int, PassSummary], None] | None = None,
                 executor: Any = None) -> None:
        self.monitor = monitor
        self.executor = executor
        """An executor for the queue (``--executor ray``): the queue is evaluated on its
        workers, :data:`EXECUTOR_BATCHES` batches at a time; ``None``: in this process."""
        scenario = monitor.scenario
        self.on_batch = on_batch
        if isinstance(monitor.store_path, Path):  # a DuckDB file (not a PostgreSQL schema)
            monitor.store_path.parent.mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix="evalharness-monitor-"))
        self.judge = make_judge(scenario)
        try:
            self.context = prepare_context(scenario, self.folder, self.judge)
        except BaseException:
            self.close()
            raise
        self.evaluation = ReferenceFree(scenario, self.context)
        self.feedback = (importlib.import_module(FEEDBACK_MODULE)
                         if importlib.util.find_spec(FEEDBACK_MODULE) is not None else None)
        self.join_key_attribute: str | None = None
        pipeline = scenario.pipeline
        kinds = {pipeline.kind(n) for n in pipeline.order} - set(BUILTIN_STEPS)
        self.step_models = {k: kind.step for k in kinds
                            if (kind := scenario.host.component_kind(k))}

    def close(self) -> None:
        judge = getattr(self, "judge", None)
        if judge is not None:
            judge.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    # -- a pass ------------------------------------------------------------------------------

    def run_pass(self, *, limit: int | None = None,
                 stop: Callable[[], bool] = lambda: False) -> PassSummary:
        """Process what the sources hold now, then evaluate the queue until it is empty (or
        the judge is down, or the day's budget spent); ``limit``: decide at most that many new
        traces; ``stop()`` is asked between batches (a signal stops after the current
        batch). The service (``monitor`` without ``--once``) runs the two halves in two
        threads instead: :meth:`intake` and :meth:`evaluate_queue`."""
        summary = self.intake(limit=limit, stop=stop)
        if not summary.stopped:
            self.evaluate_queue(summary, stop=stop)
        return summary

    def intake(self, *, limit: int | None = None, stop: Callable[[], bool] = lambda: False,
               summary: PassSummary | None = None) -> PassSummary:
        """Retention, feedback, then every trace of the sources not yet stored: decided
        (sampling, the judge's budget), stored a batch per transaction — a sampled one as
        ``queued``, with its whole trace in the queue. No judge is asked: a slow or dead
        judge never holds intake up. At ``queue.max`` queued traces intake takes no new trace
        (back-pressure: they stay in the sources for a later pass)."""
        monitor, spec = self.monitor, self.monitor.spec
        summary = summary if summary is not None else PassSummary()
        feedback_rule = any(r.feedback == "down" for r in spec.sampling.always)
        days = spec.store.retention_days
        cutoff = (datetime.now(UTC).replace(tzinfo=None) - timedelta(days=days)
                  if days is not None else None)
        with store.connect(monitor.store_path) as con:
            summary.expired = store.apply_retention(con, days)
            summary.feedback = self._ingest_feedback(con, cutoff)
            known = store.stored_ids(con)
            again = store.reconsidered_ids(con) if feedback_rule else set()
            thumbs = thumbs_of(store.feedback_thumbs(con), spec.feedback.key)
            counts = store.sampling_counts(con)
            salt = store.user_salt(con) if spec.redact.user_ids == "hash" else ""
            budget = Budget.read(con, spec.budget, _now()) if spec.budget.enabled else None
            room = [spec.queue.max - store.queue_size(con)]  # the queue's room left
            done = store.done_files(con)
            wanted = store.sources_of(con, again)  # a left-out trace now to evaluate
        files, stats = [], {}
        for path in source_files(monitor):
            try:
                stat = path.stat()
            except OSError:  # removed meanwhile: the next pass sees
                continue
            stats[path] = (int(stat.st_size), int(stat.st_mtime_ns))
            if done.get(str(path)) != stats[path] or str(path) in wanted:
                files.append(path)
        summary.unchanged_files = len(stats) - len(files)
        sampler = Sampler(spec.sampling, counts,
                          factor=budget.factor if budget is not None else None)
        found = Pass()
        batch: list[tuple[Incoming, bool, str]] = []
        decided = 0
        whole = True  # every trace of the files read was decided
        for incoming in read_pass(monitor, known - again, self.step_models, summary=found,
                                  older_than=cutoff, hold=lambda: room[0] <= 0, files=files):
            if limit is not None and decided >= limit:
                whole = False
                break
            decided += 1
            if incoming.error is not None:
                batch.append((incoming, False, "unmappable"))
            else:
                take, reason = sampler.decide(
                    incoming, thumbs_for(incoming, thumbs, spec.feedback.key))
                batch.append((incoming, take, reason))
                if take:
                    room[0] -= 1
                    if budget is not None:
                        budget.queued += 1
                elif reason == "budget":
                    summary.left_by_budget += 1
            if len(batch) >= max(spec.batch_size, INTAKE_BATCH):
                self._queue(batch, again, salt, summary)
                batch = []
                if stop():
                    summary.stopped = True
                    break
        if batch and not summary.stopped:
            self._queue(batch, again, salt, summary)
        if whole and not summary.stopped and not found.held_back:
            finished = [(str(p), *stats[p]) for p in files
                        if p in stats and p not in found.pending_files]
            if finished:
                with store.connect(monitor.store_path) as con:
                    store.mark_files_done(con, finished, _now())
        summary.seen, summary.known, summary.pending = found.seen, found.known, found.pending
        summary.too_old, summary.held_back = found.too_old, found.held_back
        summary.files = len(found.files)
        return summary

    def check_drift(self, warn: Callable[[str], None]) -> tuple[dict[str, Any] | None, list]:
        """The drift check over the store (``drift:``), its alarms recorded (one transaction)
        and the new and resolved ones sent through ``alerts:``; the check (``None``: disabled,
        or no evaluated trace yet) and the alerts sent."""
        from evalharness.monitor.alerts import run_check, update_alarms

        spec = self.monitor.spec.drift
        if not spec.enabled:
            return None, []
        senders = [name for name, _, _ in self.monitor.senders]
        with store.connect(self.monitor.store_path) as con:
            check = run_check(con, recent=spec.recent, baseline=spec.baseline, q=spec.q,
                              min_n=spec.min_n, exclude=spec.exclude)
            alerts = [] if check is None else update_alarms(
                con, check, monitor=self.monitor.name, store=str(self.monitor.store_path),
                senders=senders)
        if senders:  # what this check wrote, and what earlier ones could not send
            self.deliver_alerts(warn)
        return check, alerts

    def deliver_alerts(self, warn: Callable[[str], None]) -> Any:
        """Send the store's outbox alerts that are due (their sender failed before, and its
        backoff is over): the service asks between checks too, so a receiver that was down
        gets its alerts when it is back, not only when new traffic is evaluated."""
        from evalharness.monitor.alerts import deliver

        if not self.monitor.senders:
            return None
        return deliver(lambda: store.connect(self.monitor.store_path), self.monitor.senders,
                       warn)

    def _ingest_feedback(self, con: Any, older_than: datetime | None) -> Any:
        """Users' feedback from ``feedback.path``, when the feedback module is installed;
        records given before ``older_than`` (retention) are left out."""
        path = self.monitor.feedback_path
        ingest = getattr(self.feedback, "ingest_file", None)
        if path is None or ingest is None:
            return None
        return ingest(con, path, key=self.monitor.spec.feedback.key,
                      redact_user_ids=self.monitor.spec.redact.user_ids,
                      wait=self.monitor.spec.feedback.wait_span, older_than=older_than)

    def _resolve(self, con: Any) -> None:
        """The feedback module's matching of feedback to the traces just stored."""
        self.feedback.resolve(con, join_key_attribute=self.join_key_attribute)

    def _queue(self, batch: list[tuple[Incoming, bool, str]], again: set[str], salt: str,
               summary: PassSummary) -> None:
        """One intake batch in one transaction: every trace's row (a sampled one ``queued``)
        and the queue's rows."""
        now = _now()
        traces, queued = [], []
        for incoming, take, reason in batch:
            traces.append(self._trace_row(incoming, take, reason, None, now, salt))
            if take:
                record = incoming.trace.model_dump(mode="json", exclude_none=True)
                queued.append((incoming.trace_id, now, incoming.start,
                               incoming.mapped.question,
                               json.dumps(record, ensure_ascii=False), 0, None, None))
        with store.connect(self.monitor.store_path) as con:
            store.write_batch(con, traces, [], [], replace=again, queued=queued,
                              feedback_key=self.monitor.spec.feedback.key,
                              resolve=self._resolve if hasattr(self.feedback, "resolve")
                              else None)
        summary.intake_batches += 1
        summary.stored += len(traces)
        for row in traces:
            if row["status"] == "queued":
                summary.queued += 1
            elif row["status"] == "unmappable":
                summary.unmappable += 1
            else:
                summary.not_sampled += 1

    # -- evaluation ----------------------------------------------------------------------------

    def evaluate_queue(self, summary: PassSummary | None = None, *,
                       stop: Callable[[], bool] = lambda: False,
                       batches: int | None = None) -> PassSummary:
        """Evaluate queued traces, the oldest first, a batch per transaction, until the queue
        holds none due (or ``batches`` were done, or ``stop()``). A trace the judge could not
        answer (down: no connection, deadlines, 429/5xx after its retries) goes back to the
        queue with its attempts counted and waits out a backoff (``queue.retry``, doubled per
        failure in a row up to ``queue.max_retry``) — its error is never stored as a value;
        the others of its batch are stored. With ``budget:``, nothing is sent once the day's
        budget is spent: the queue waits for the next day."""
        spec = self.monitor.spec
        summary = summary if summary is not None else PassSummary()
        done, finished = 0, None
        while True:
            # one connection a batch: it stores the batch just evaluated and takes the next
            # (the store is never held while the judge works)
            now = _now()
            size = spec.batch_size * (EXECUTOR_BATCHES if self.executor is not None else 1)
            with store.connect(self.monitor.store_path) as con:
                if finished is not None:
                    self._store(con, finished, summary)
                    if summary.judge_down:
                        break
                if stop() or (batches is not None and done >= batches):
                    break
                if spec.budget.enabled:
                    budget = Budget.read(con, spec.budget, now)
                    summary.budget = budget.summary()
                    summary.budget_spent = budget.exhausted()
                    if summary.budget_spent:
                        break
                    size = budget.room(size)
                rows = store.take_queue(con, size, now)
            if not rows:
                break
            done += 1
            finished = self._evaluate(rows, now)
        with store.connect(self.monitor.store_path) as con:
            summary.waiting = store.queue_size(con)
            if spec.budget.enabled:
                summary.budget = Budget.read(con, spec.budget, _now()).summary()
        return summary

    def _evaluate(self, rows: list[tuple[Any, ...]], now: datetime) -> dict[str, Any]:
        """One batch of queued traces evaluated (nothing stored yet): the rows to write, and
        the traces the judge could not answer, with the backoff they wait out."""
        items = [(tid, Trace.model_validate_json(trace), question)
                 for tid, question, trace, _ in rows]
        results = (self.evaluation.evaluate(items) if self.executor is None
                   else self._on_executor(rows))
        down = [e for e in results if e.judge_down]
        good = [e for e in results if not e.judge_down]
        prices = self.judge.config.prices if self.judge is not None else None
        traces = {tid: trace for tid, trace, _ in items}
        updates, metrics, verdicts = [], [], []
        evaluated_at = _now()
        for evaluated in good:
            usage = Usage(prices)
            for component, values in evaluated.metrics.items():
                by = evaluated.evaluators.get(component, {})
                judges: dict[str, str] = {}  # an evaluator's judge, recorded on one value
                for metric, value in values.items():
                    judge = judge_of(value)
                    if judge is not None:
                        judges.setdefault(by.get(metric, ""), judge)
                    usage.add([r for r in value.details.get("judgments") or ()
                               if isinstance(r, dict)])
                for metric, value in values.items():
                    judge = judge_of(value) or judges.get(by.get(metric, ""))
                    metrics.append((evaluated.trace_id, component, metric, value.value,
                                    value.error, judge, details_json(value)))
            for component, v in evaluated.verdicts.items():
                verdicts.append((evaluated.trace_id, component, v.passed, v.criterion,
                                 v.reason))
            spent = usage.summary()
            updates.append({
                "trace_id": evaluated.trace_id, "root_cause": evaluated.root_cause,
                "passed": evaluated.passed, "latency_ms": evaluated.latency_ms,
                "total_tokens": evaluated.total_tokens,
                "trace": self._stored_trace(traces[evaluated.trace_id]),
                "evaluated_at": evaluated_at, "judge_requests": spent["requests"],
                "judge_cost": spent.get("cost")})
        wait = None
        if down:
            attempts = max(a for tid, _, _, a in rows if tid in {e.trace_id for e in down})
            queue = self.monitor.spec.queue
            wait = now + min(queue.retry_span * 2 ** min(attempts, 30), queue.max_retry_span)
        return {"updates": updates, "metrics": metrics, "verdicts": verdicts, "down": down,
                "not_before": wait}

    def _store(self, con: Any, done: dict[str, Any], summary: PassSummary) -> None:
        """An evaluated batch (:meth:`_evaluate`) written: its traces completed in one
        transaction, the ones the judge could not answer back in the queue."""
        updates, down = done["updates"], done["down"]
        store.store_evaluated(con, updates, done["metrics"], done["verdicts"])
        if down:
            store.put_back(con, [e.trace_id for e in down], down[0].judge_down,
                           done["not_before"])
        summary.waiting = store.queue_size(con)
        summary.batches += 1
        summary.evaluated += len(updates)
        for row in updates:
            if row["root_cause"]:
                summary.root_causes[row["root_cause"]] = \
                    summary.root_causes.get(row["root_cause"], 0) + 1
        if down:
            summary.put_back += len(down)
            summary.judge_down = down[0].judge_down
        if self.on_batch is not None:
            self.on_batch(summary.batches, summary)

    def _on_executor(self, rows: list[tuple[Any, ...]]) -> list[Evaluated]:
        """Queued traces evaluated by the executor's workers (each loads the monitor's
        scenario itself), read back as this process reads its own results."""
        import asyncio

        from evalharness.executors import attach, execute
        from evalharness.runner import worker_spec
        from evalharness.work import Work

        spec = worker_spec(self.monitor.scenario, self.context, self.folder, None)
        spec = dataclasses.replace(spec, monitor=str(self.monitor.path.resolve()))
        work = [Work(tid, trace=trace, question=question) for tid, question, trace, _ in rows]
        found: dict[str, Evaluated] = {}

        def emit(group: Any, lines: list[str]) -> None:
            for line in lines:
                result = CaseResult.model_validate_json(line)
                found[result.case.id] = self.evaluation.read(result)

        with attach(spec, self.monitor.scenario, None, self.context):
            asyncio.run(execute(self.executor, spec, work, emit, lambda: False))
        return [found[tid] for tid, *_ in rows if tid in found]

    def _stored_trace(self, trace: Trace) -> str:
        """The trace record the store keeps (texts dropped when ``redact: {texts: drop}``)."""
        record = trace.model_dump(mode="json", exclude_none=True)
        if self.monitor.spec.redact.texts != "keep":
            record = drop_texts(record)
        return json.dumps(record, ensure_ascii=False)

    def _trace_row(self, incoming: Incoming, take: bool, reason: str,
                   evaluated: Evaluated | None, now: datetime, salt: str) -> dict[str, Any]:
        redact = self.monitor.spec.redact
        trace = incoming.trace
        keep_texts = redact.texts == "keep"
        question = incoming.mapped.question if incoming.mapped is not None else None
        answer = getattr(getattr(trace, "generator", None), "answer", None)
        record = (trace.model_dump(mode="json", exclude_none=True)
                  if trace is not None and not take else None)  # queued: in the queue
        if record is not None and not keep_texts:
            record = drop_texts(record)
        status = ("unmappable" if incoming.error is not None else
                  "queued" if take else "not sampled")
        return {
            "trace_id": incoming.trace_id, "start_time": incoming.start,
            "end_time": incoming.end, "stored_at": now, "source": incoming.source,
            "route": incoming.route, "question": question if keep_texts else None,
            "answer": answer if keep_texts else None,
            "user_id": user_id(incoming.user_id, redact.user_ids, salt),
            "join_key": incoming.mapped.join_key if incoming.mapped is not None else None,
            "attributes": attributes_json(incoming), "sampled": take,
            "sample_reason": reason, "status": status, "error": incoming.error,
            "root_cause": evaluated.root_cause if evaluated else None,
            "passed": evaluated.passed if evaluated else None,
            "latency_ms": (evaluated.latency_ms if evaluated else None) or _span_ms(incoming),
            "total_tokens": evaluated.total_tokens if evaluated else None,
            "trace": json.dumps(record, ensure_ascii=False) if record is not None else None,
        }


def _now() -> datetime:
    """Now, naive UTC (as the store keeps times)."""
    return datetime.now(UTC).replace(tzinfo=None)


def _span_ms(incoming: Incoming) -> float | None:
    if incoming.start is None or incoming.end is None:
        return None
    return (incoming.end - incoming.start).total_seconds() * 1000


def user_id(value: str | None, how: str, salt: str) -> str | None:
    """A user id as the store keeps it: as recorded, its salted hash, or nothing.

    >>> user_id("u1", "keep", ""), user_id("u1", "drop", "")
    ('u1', None)
    >>> user_id("ana@example.org", "hash", "s1")
    'u-f7beca1ce988d1b5'
    """
    if value is None or how == "drop":
        return None
    return value if how == "keep" else store.hash_user_id(value, salt)


TEXT_FIELDS = {"generator": ("answer", "contexts"), "retriever": ("texts",),
               "text2sql": ("rows",)}
"""What ``redact: {texts: drop}`` removes from the stored trace."""


def drop_texts(record: dict[str, Any]) -> dict[str, Any]:
    """A trace record without users' texts (:data:`TEXT_FIELDS`).

    >>> drop_texts({"generator": {"answer": "x", "latency_ms": 3}})
    {'generator': {'latency_ms': 3}}
    """
    out = dict(record)
    for step, names in TEXT_FIELDS.items():
        if isinstance(out.get(step), dict):
            out[step] = {k: v for k, v in out[step].items() if k not in names}
    return out
