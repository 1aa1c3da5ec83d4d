"""What a reviewer labels in a case: its *targets*, each an automatic value a person can check.

Per case, from its stored result (no evaluator runs again):

- **case-level metrics**: every metric of a component's verdict criteria (and the end-to-end
  criteria's metrics of that component), every metric computed with the judge (its details
  name a ``judge``) and every metric whose declaration asks for review (``Metric.review``, the
  SQL cascade's ``equivalent``). The automatic value is the metric's value, its verdict the
  metric's verdict criterion (``faithfulness >= 0.5``), else ``>= 0.5`` — said so on the
  target. The person answers the question the metric's plugin declares (``Metric.question``:
  "Is every statement of the answer supported by its contexts?") yes or no, agrees or
  disagrees with the verdict, or scores 1–5 (a judged metric, or any of a generator's);
- **claims** (``generator`` / ``claim_support`` / ``claim:I``): each claim the judge checked,
  of a metric that declares ``claim_support`` among its ``item_labels`` (faithfulness), with
  its confidence, verdict, reason and evidence lines (``evidence: row 1 price = 49.9 …``);
- **chunks** (``retriever`` / ``chunk_relevance`` / ``chunk:ID``): each retrieved chunk, with its
  gold mark (``gold.relevant``) as the automatic value, else the judge's usefulness verdict
  when context precision was judged, else none (the label still counts for curation).

Every target is addressed by (component, metric, item) — the same triple a label names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evalharness.declarations import Metric, undeclared
from evalharness.models import CaseResult
from evalharness.review.names import CHUNK, CLAIM
from evalharness.scenario import parse_criterion

ITEM_QUESTIONS = {
    CLAIM: "Is this claim supported by the answer's contexts?",
    CHUNK: "Is this chunk relevant to the question?",
}
"""The questions of the per-item targets (a metric's own question is in its declaration)."""


@dataclass(frozen=True)
class Threshold:
    """A verdict criterion: the value passes when ``value OP threshold``."""

    op: str
    value: float
    source: str  # "criteria" or "default"

    def passes(self, x: float) -> bool:
        return {">=": x >= self.value, "<=": x <= self.value, ">": x > self.value,
                "<": x < self.value, "==": x == self.value}[self.op]

    def text(self, metric: str) -> str:
        return f"{metric} {self.op} {self.value:g}" + (
            "" if self.source == "criteria" else " (no verdict criterion names it)")


DEFAULT = Threshold(">=", 0.5, "default")


@dataclass
class Target:
    """One thing of one case a person can label (see the module text)."""

    component: str
    metric: str
    item: str
    question: str
    score: float | None
    """The automatic value (the judge's score, a 0/1 verdict, a gold grade); ``None``: none."""
    threshold: Threshold | None
    judged: bool
    """Whether the judge produced the value (the agreement statistics are about these)."""
    text: str | None = None
    """The claim's or chunk's text."""
    reasons: list[str] = field(default_factory=list)
    """The judge's or evaluator's reasons, as sentences."""
    ordinal: bool = False
    """Whether a 1–5 score is offered: on a judged metric, and on every case-level metric of
    a generator (an empty answer is scored without the judge, and is still an answer people
    grade); not on claims and chunks."""
    kind: str = ""
    """The component's kind (``router``, ``text2sql``, ``retriever``, ``generator`` …)."""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.component, self.metric, self.item)

    @property
    def verdict(self) -> bool | None:
        """The automatic verdict: the score passes its threshold."""
        if self.score is None or self.threshold is None:
            return None
        return self.threshold.passes(self.score)

    def view(self) -> dict[str, Any]:
        """For the page and the export: plain data."""
        return {"component": self.component, "metric": self.metric, "item": self.item,
                "question": self.question, "score": self.score, "verdict": self.verdict,
                "threshold": self.threshold.text(self.metric) if self.threshold else None,
                "judged": self.judged, "text": self.text, "reasons": self.reasons,
                "ordinal": self.ordinal, "kind": self.kind}


def thresholds(verdict_criteria: dict[str, Any]) -> dict[tuple[str, str], Threshold]:
    """(component, metric) -> its verdict criterion, from report.json's ``verdict_criteria``
    (end-to-end criteria name ``component.metric``).

    >>> t = thresholds({"generator": {"criteria": ["faithfulness >= 0.5"]},
    ...                 "end_to_end": {"criteria": ["generator.correctness_f1 >= 0.2"]}})
    >>> sorted(t), t["generator", "faithfulness"].value
    ([('generator', 'correctness_f1'), ('generator', 'faithfulness')], 0.5)
    """
    out: dict[tuple[str, str], Threshold] = {}
    for component, report in verdict_criteria.items():
        criteria = report.get("criteria", []) if isinstance(report, dict) else report.criteria
        for text in criteria:
            if component == "end_to_end":
                comp, _, rest = text.partition(".")
                gate = parse_criterion(rest, comp) if rest else None
            else:
                gate = parse_criterion(text, component)
            if gate is not None:
                out.setdefault((gate.component, gate.metric),
                               Threshold(gate.op, gate.threshold, "criteria"))
    return out


def targets_of(result: CaseResult, criteria: dict[tuple[str, str], Threshold],
               declared: Mapping[tuple[str, str], Metric] | None = None) -> list[Target]:
    """Every target of one case, in pipeline order: per component its case-level metrics, then
    its claims or chunks. ``declared``: each metric's declaration (its question, whether it is
    always reviewed, its per-item labels)."""
    declared = declared or {}
    out: list[Target] = []
    for component, comp in result.components.items():
        if comp.status != "evaluated":
            continue
        for metric, mv in comp.metrics.items():
            about = declared.get((component, metric)) or undeclared(metric)
            judged = "judge" in mv.details
            wanted = (component, metric) in criteria or judged or about.review
            if not wanted or mv.error is not None or mv.value is None:
                continue
            out.append(Target(
                component, metric, "", about.question_text(), float(mv.value),
                criteria.get((component, metric), DEFAULT), judged,
                reasons=_reasons(mv.details), ordinal=judged))
            if CLAIM in about.item_labels:
                out.extend(_claims(component, mv.details))
        if component == "retriever" and result.trace.retriever is not None:
            out.extend(_chunks(result, result.trace.retriever))
    return out


def _reasons(details: dict[str, Any]) -> list[str]:
    out = []
    questions, sims = details.get("questions"), details.get("similarities")
    if isinstance(questions, list) and questions:
        pairs = [f"{q} ({s:.2f})" if isinstance(s, (int, float)) else str(q)
                 for q, s in zip(questions, sims or [None] * len(questions), strict=False)]
        out.append("the judge's questions for the answer (similarity to the question): "
                   + " | ".join(pairs[:5]))
    for key in ("reason", "unsupported_claims", "missed_reference_claims", "stage"):
        value = details.get(key)
        if isinstance(value, str) and value:
            out.append(f"{key.replace('_', ' ')}: {value}")
        elif isinstance(value, list) and value:
            out.append(f"{key.replace('_', ' ')}: " + " | ".join(map(str, value[:5])))
    return out


def _claims(component: str, details: dict[str, Any]) -> Iterable[Target]:
    for judgment in details.get("judgments", []):
        if judgment.get("task") != "claim_support" or not judgment.get("output"):
            continue
        for i, v in enumerate(judgment["output"].get("verdicts", [])):
            confidence = v.get("confidence")
            score = float(confidence) if confidence is not None else float(bool(v["supported"]))
            yield Target(component, CLAIM, f"claim:{i}", ITEM_QUESTIONS[CLAIM], score,
                         Threshold(">=", 0.5, "criteria") if confidence is not None
                         else Threshold(">=", 1.0, "criteria"),
                         True, text=v.get("claim"),
                         reasons=[v.get("reason") or "", *_evidence(v.get("evidence"))])


def _evidence(lines: Any) -> list[str]:
    """A claim verdict's evidence (the rows, columns and values, a computation over the rows,
    or a passage it rests on) as reasons, one a line; none in runs recorded before verdicts
    gave evidence.

    >>> _evidence(["row 1 price = 49.9: '49.90 €' matches", ""]), _evidence(None)
    (["evidence: row 1 price = 49.9: '49.90 €' matches"], [])
    """
    if not isinstance(lines, list):
        return []
    return [f"evidence: {line}" for line in lines if line is not None and str(line).strip()]


def _chunks(result: CaseResult, step) -> Iterable[Target]:
    gold = result.case.gold.relevant
    useful = None
    for mv in result.components["retriever"].metrics.values():
        if mv.details.get("source") == "judge" and "useful" in mv.details:
            useful = set(mv.details["useful"])
            break
    texts = step.texts or []
    for rank, chunk in enumerate(step.ids, 1):
        if gold is not None:
            score, judged = float(gold.get(chunk, 0)), False
            reason = f"gold grade {gold.get(chunk, 0)} (gold.relevant)"
        elif useful is not None:
            score, judged = float(chunk in useful), True
            reason = "the judge found it useful" if chunk in useful else "the judge did not"
        else:
            score, judged, reason = None, False, "no gold mark and no judge verdict"
        yield Target("retriever", CHUNK, f"chunk:{chunk}", ITEM_QUESTIONS[CHUNK], score,
                     Threshold(">", 0.0, "criteria") if score is not None else None, judged,
                     text=texts[rank - 1] if rank <= len(texts) else None,
                     reasons=[f"rank {rank}; {reason}"])
