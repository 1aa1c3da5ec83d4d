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

from evalharness.models import BUILTIN_STEPS
from evalharness.monitor import store
from evalharness.monitor.config import Monitor
from evalharness.monitor.evaluate import Evaluated, ReferenceFree, details_json, judge_of
from evalharness.monitor.intake import (
    Incoming,
    Pass,
    Sampler,
    attributes_json,
    read_pass,
    thumbs_for,
    thumbs_of,
)
from evalharness.prepare import make_judge, prepare_context

FEEDBACK_MODULE = "evalharness.monitor.feedback"


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

    def line(self) -> str:
        causes = ", ".join(f"{c} {n}" for c, n in sorted(self.root_causes.items(),
                                                         key=lambda kv: -kv[1]))
        return (f"{self.stored} traces stored ({self.evaluated} evaluated, {self.not_sampled} "
                f"left out by sampling, {self.unmappable} unmappable); {self.known} already "
                f"stored, {self.pending} pending"
                + (f", {self.too_old} older than retention (skipped)" if self.too_old else "")
                + (f"; root causes: {causes}" if causes else ""))


class MonitorRun:
    """The monitor's machinery for one process: the judge, the database and corpus the
    evaluators use, the reference-free evaluation. :meth:`run_pass` as often as wanted, then
    :meth:`close`."""

    def __init__(self, monitor: Monitor, *,
                 on_batch: Callable[[int, PassSummary], None] | None = None) -> None:
        self.monitor = monitor
        scenario = monitor.scenario
        self.on_batch = on_batch
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
        """Process what the sources hold now; ``limit``: decide at most that many new traces;
        ``stop()`` is asked between batches (a signal stops after the current batch)."""
        monitor, spec = self.monitor, self.monitor.spec
        summary = PassSummary()
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
        sampler = Sampler(spec.sampling, counts)
        found = Pass()
        batch: list[tuple[Incoming, bool, str]] = []
        decided = 0
        for incoming in read_pass(monitor, known - again, self.step_models, summary=found,
                                  older_than=cutoff):
            if limit is not None and decided >= limit:
                break
            decided += 1
            if incoming.error is not None:
                batch.append((incoming, False, "unmappable"))
            else:
                batch.append((incoming, *sampler.decide(
                    incoming, thumbs_for(incoming, thumbs, spec.feedback.key))))
            if len(batch) >= spec.batch_size:
                self._flush(batch, again, salt, summary)
                batch = []
                if stop():
                    summary.stopped = True
                    break
        if batch and not summary.stopped:
            self._flush(batch, again, salt, summary)
        summary.seen, summary.known, summary.pending = found.seen, found.known, found.pending
        summary.too_old = found.too_old
        summary.files = len(found.files)
        return summary

    def check_drift(self, warn: Callable[[str], None]) -> tuple[dict[str, Any] | None, list]:
        """The drift check over the store (``drift:``), its alarms recorded (one transaction)
        and the new and resolved ones sent through ``alerts:``; the check (``None``: disabled,
        or no evaluated trace yet) and the alerts sent."""
        from evalharness.monitor.alerts import run_check, send, update_alarms

        spec = self.monitor.spec.drift
        if not spec.enabled:
            return None, []
        with store.connect(self.monitor.store_path) as con:
            check = run_check(con, recent=spec.recent, baseline=spec.baseline, q=spec.q,
                              min_n=spec.min_n)
            if check is None:
                return None, []
            alerts = update_alarms(con, check, monitor=self.monitor.name,
                                   store=str(self.monitor.store_path))
        if alerts and self.monitor.senders:
            send(alerts, self.monitor.senders, warn)
        return check, alerts

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

    def _flush(self, batch: list[tuple[Incoming, bool, str]], again: set[str], salt: str,
               summary: PassSummary) -> None:
        sampled = [i for i, take, _ in batch if take]
        results = {e.trace_id: e for e in self.evaluation.evaluate(
            [(i.trace_id, i.trace, i.mapped.question) for i in sampled])}
        now = datetime.now(UTC).replace(tzinfo=None)
        traces, metrics, verdicts = [], [], []
        for incoming, take, reason in batch:
            evaluated = results.get(incoming.trace_id) if take else None
            traces.append(self._trace_row(incoming, take, reason, evaluated, now, salt))
            if evaluated is None:
                continue
            for component, values in evaluated.metrics.items():
                by = evaluated.evaluators.get(component, {})
                judges: dict[str, str] = {}  # an evaluator's judge, recorded on one value
                for metric, value in values.items():
                    judge = judge_of(value)
                    if judge is not None:
                        judges.setdefault(by.get(metric, ""), judge)
                for metric, value in values.items():
                    judge = judge_of(value) or judges.get(by.get(metric, ""))
                    metrics.append((incoming.trace_id, component, metric, value.value,
                                    value.error, judge, details_json(value)))
            for component, v in evaluated.verdicts.items():
                verdicts.append((incoming.trace_id, component, v.passed, v.criterion,
                                 v.reason))
        with store.connect(self.monitor.store_path) as con:
            store.write_batch(con, traces, metrics, verdicts, replace=again,
                              feedback_key=self.monitor.spec.feedback.key,
                              resolve=self._resolve if hasattr(self.feedback, "resolve")
                              else None)
        summary.batches += 1
        summary.stored += len(traces)
        for row in traces:
            if row["status"] == "evaluated":
                summary.evaluated += 1
                if row["root_cause"]:
                    summary.root_causes[row["root_cause"]] = \
                        summary.root_causes.get(row["root_cause"], 0) + 1
            elif row["status"] == "unmappable":
                summary.unmappable += 1
            else:
                summary.not_sampled += 1
        if self.on_batch is not None:
            self.on_batch(summary.batches, summary)

    def _trace_row(self, incoming: Incoming, take: bool, reason: str,
                   evaluated: Evaluated | None, now: datetime, salt: str) -> dict[str, Any]:
        redact = self.monitor.spec.redact
        trace = incoming.trace
        keep_texts = redact.texts == "keep"
        question = incoming.mapped.question if incoming.mapped is not None else None
        answer = getattr(getattr(trace, "generator", None), "answer", None)
        record = trace.model_dump(mode="json", exclude_none=True) if trace is not None else None
        if record is not None and not keep_texts:
            record = drop_texts(record)
        status = ("unmappable" if incoming.error is not None else
                  "evaluated" if take else "not sampled")
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
