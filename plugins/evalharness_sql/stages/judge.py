"""Stage 5, judge: what execution could not decide goes to the LLM judge's SQL-equivalence task."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalharness_sql.verdict import Pair, Verdict


def judge(pairs: Sequence[Pair]) -> None:
    """Ask the judge about every still-undecided pair of the batch, in one ``run_many`` call.
    A judgment decides, and the verdict says it came from a judge (with the judgment's
    record: rubric, backend, model); a judge that cannot decide (the offline heuristic judge,
    a malformed answer) leaves the pair undecided, with its error as the reason.

    >>> class FakeJudge:
    ...     backend, model = "fake", "always-yes"
    ...     def run_many(self, task, inputs, metric=None):
    ...         return [FakeJudgment() for _ in inputs]
    >>> class FakeJudgment:
    ...     error, backend, model = None, "fake", "always-yes"
    ...     class output:
    ...         equivalent, reason = True, "same filter"
    ...     def record(self):
    ...         return {"backend": "fake"}
    >>> from evalharness_sql.verdict import Options
    >>> pair = Pair("SELECT 1", "SELECT 1 + 0", options=Options(judge=FakeJudge()))
    >>> judge([pair]); pair.verdict.stage, pair.verdict.reason
    ('judge', 'judged equivalent by fake:always-yes (an LLM judgment, not a proof): same filter')
    """
    asking = [p for p in pairs if p.verdict is None and p.options.judge is not None]
    if not asking:
        return
    try:
        from evalharness.judge import SQL_EQUIVALENCE, SQLEquivalenceInput
    except ImportError as exc:
        for p in asking:
            p.notes["judge"] = f"the judge machinery is not available: {exc}"
        return
    by_judge: dict[int, list[Pair]] = {}
    for p in asking:
        by_judge.setdefault(id(p.options.judge), []).append(p)
    for group in by_judge.values():
        the_judge = group[0].options.judge
        inputs = [SQLEquivalenceInput(schema_sql=_schema_sql(p), dialect=p.dialect,
                                      gold=p.gold, predicted=p.predicted_sql or p.predicted)
                  for p in group]
        try:
            judgments = the_judge.run_many(SQL_EQUIVALENCE, inputs, metric="equivalent")
        except Exception as exc:  # noqa: BLE001 - a failing judge leaves pairs undecided
            for p in group:
                p.verdict = Verdict(None, "judge", f"undecided: the judge failed: "
                                    f"{type(exc).__name__}: {exc}")
            continue
        for p, judgment in zip(group, judgments, strict=True):
            p.verdict = _verdict(judgment)


def _verdict(judgment: Any) -> Verdict:
    record = judgment.record() if hasattr(judgment, "record") else {}
    who = f"{getattr(judgment, 'backend', 'judge')}:{getattr(judgment, 'model', None)}"
    if getattr(judgment, "error", None) or getattr(judgment, "output", None) is None:
        return Verdict(None, "judge", f"undecided: the judge ({who}) could not decide: "
                       f"{judgment.error}", details={"judge": record})
    out = judgment.output
    word = "equivalent" if out.equivalent else "not equivalent"
    reason = f"judged {word} by {who} (an LLM judgment, not a proof): {out.reason}"
    counterexample = None if out.equivalent else {"kind": "judge", "reason": out.reason}
    return Verdict(bool(out.equivalent), "judge", reason, counterexample,
                   None if out.equivalent else "other", details={"judge": record})


def _schema_sql(pair: Pair) -> str:
    if pair.engine is None:
        return ""
    try:
        return pair.engine.schema().ddl
    except Exception:  # noqa: BLE001 - the judge can work without the schema
        return ""


judge.batched = True  # type: ignore[attr-defined]
