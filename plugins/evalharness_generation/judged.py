"""Judged generator metrics: faithfulness, answer relevancy, answer correctness.

Each works on a whole batch, so the judge answers every case's request concurrently:
faithfulness makes 2 chat requests per case (claims, then one verification of all claims),
answer relevancy 1 chat request per case and, for the whole batch, embeddings requests of up
to ``judge.embedding_batch_size`` texts, answer correctness 4 chat requests (claims of the
answer — shared with faithfulness through the cache, or with its identical request in flight
— claims of the reference, and a verification each way). Every value stores the judgments
that produced it; each judgment's record sits on exactly one value, so the report counts it
once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from evalharness import MetricValue
from evalharness.judge import (
    CLAIM_SUPPORT,
    CLAIMS,
    QUESTIONS,
    ClaimsInput,
    ClaimSupportInput,
    Judgment,
    QuestionsInput,
)
from evalharness_generation.sources import generator_evidence, generator_sources

Rows = list[dict[str, MetricValue]]


def _judge_identity(judge) -> dict:
    return {"backend": judge.backend, "model": judge.model}


def _claims(judge, pairs: Sequence[tuple[str, str]], metric: str) -> list[Judgment]:
    # the claims are verified next: one round after this one
    return judge.run_many(CLAIMS, [ClaimsInput(question=q, answer=a) for q, a in pairs],
                          metric=metric, rounds_after=1)


def _verify(judge, pairs: Sequence[tuple[str, list[str]]], metric: str) -> list[Judgment]:
    return _verify_inputs(judge, [ClaimSupportInput(context=c, claims=cl) for c, cl in pairs],
                          metric)


def _verify_inputs(judge, inputs: Sequence[ClaimSupportInput], metric: str) -> list[Judgment]:
    return judge.run_many(CLAIM_SUPPORT, list(inputs), metric=metric)


def _support(verdict_judgment: Judgment, claims: list[str]) -> list[float] | str:
    """Per-claim support in [0, 1] — the judge's confidence when it gives one, else its 0/1
    verdict — or the reason the verification is unusable."""
    if verdict_judgment.output is None:
        return f"the judge failed to verify the claims: {verdict_judgment.error}"
    verdicts = verdict_judgment.output.verdicts
    if len(verdicts) != len(claims):
        return (f"the judge returned {len(verdicts)} verdicts for {len(claims)} claims")
    return [v.confidence if v.confidence is not None else float(v.supported) for v in verdicts]


def _unsupported(verdict_judgment: Judgment, claims: list[str]) -> list[str]:
    return [c for c, v in zip(claims, verdict_judgment.output.verdicts, strict=True)
            if not v.supported]


# -- faithfulness ----------------------------------------------------------------------------


class FaithfulnessSettings(BaseModel):
    """Settings of the ``faithfulness`` evaluator."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    rows: Literal["table", "text"] = "table"
    """How the judge gets rows the generator was given: ``table``, as typed rows (linked from
    the same trace's text-to-SQL step, or parsed back from the contexts), which the offline
    judge checks claim by claim (docs/metrics/row-verifier.md) and an LLM judge reads as a
    table; ``text``, as the context lines they were rendered to (before 0.3)."""

    availability: list[str] | None = None
    """The columns that say how many of a row's thing can be had (``[stock]``): a claim that
    it is available needs more than 0, "sold out" needs 0. Unset: the column the claim names,
    else the only column of whole numbers that is not an id."""


FAITHFULNESS = ["faithfulness", "faithfulness_all"]


def faithfulness(batch, settings: FaithfulnessSettings, context) -> Rows:
    """Supported claims over all claims, against everything the generator was given; and
    ``faithfulness_all``, the weakest claim's support (one unsupported claim fails it)."""
    judge = context.judge
    rows: list[dict | None] = [None] * len(batch)
    todo = []
    for i, (case, step) in enumerate(batch):
        answer = (step.answer or "").strip()
        evidence = (generator_evidence(case, step, context, settings.availability)
                    if settings.rows == "table" else None)
        if evidence is None or not evidence.tables:
            prose = generator_sources(case, step, context)
            inputs = ClaimSupportInput(context="\n\n".join(prose), claims=[]) if prose else None
        else:
            inputs = ClaimSupportInput(context="\n\n".join(evidence.prose), claims=[],
                                       tables=evidence.tables, question=case.question)
        if not answer:
            rows[i] = _both(MetricValue.failed("the answer is empty"))
        elif inputs is None:
            rows[i] = _both(MetricValue.failed(
                "the generator was given no context (no contexts, SQL rows or chunks)"))
        else:
            todo.append((i, case.question, answer, inputs))
    claim_j = _claims(judge, [(q, a) for _, q, a, _ in todo], "faithfulness")
    verify = []
    for (i, _, _, inputs), cj in zip(todo, claim_j, strict=True):
        if cj.output is None:
            rows[i] = _both(MetricValue.failed(
                f"the judge failed to split the answer into claims: {cj.error}",
                judge=_judge_identity(judge), judgments=[cj.record()]))
        elif not cj.output.claims:
            rows[i] = _both(MetricValue.failed(
                "the answer makes no claim to verify", judge=_judge_identity(judge),
                judgments=[cj.record()]))
        else:
            verify.append((i, inputs.model_copy(update={"claims": cj.output.claims}), cj))
    verdicts = _verify_inputs(judge, [inputs for _, inputs, _ in verify], "faithfulness")
    for (i, inputs, cj), vj in zip(verify, verdicts, strict=True):
        claims = cj.output.claims
        support = _support(vj, claims)
        records = [cj.record(), vj.record()]
        if isinstance(support, str):
            rows[i] = _both(MetricValue.failed(
                support, judge=_judge_identity(judge), judgments=records))
            continue
        unsupported = _unsupported(vj, claims)
        given = {"rows": [len(t.rows) for t in inputs.tables]} if inputs.tables else {}
        weakest = min(range(len(claims)), key=lambda k: support[k])
        rows[i] = {
            "faithfulness": MetricValue.of(
                sum(support) / len(claims), claims=len(claims),
                supported=len(claims) - len(unsupported), unsupported_claims=unsupported,
                **given, judge=_judge_identity(judge), judgments=records),
            "faithfulness_all": MetricValue.of(
                support[weakest], claims=len(claims), weakest_claim=claims[weakest],
                unsupported_claims=unsupported, judge=_judge_identity(judge)),
        }
    return rows


def _both(value: MetricValue) -> dict[str, MetricValue]:
    """The same failure for both faithfulness metrics (the judgments on the first only, so
    the report counts each request once)."""
    bare = MetricValue.failed(value.error) if value.details.get("judgments") else value
    return {"faithfulness": value, "faithfulness_all": bare}


# -- answer relevancy ------------------------------------------------------------------------


class RelevancySettings(BaseModel):
    """Settings of the ``answer_relevancy`` evaluator."""

    model_config = ConfigDict(extra="forbid")

    n: int = Field(default=3, ge=1, le=10)
    """How many questions the judge writes from the answer."""

    noncommittal: Literal["strict", "proportional"] = "strict"
    """``strict``: any noncommittal question makes the score 0; ``proportional``: the score is
    multiplied by the share of committal questions."""


def zero_vector(texts: Sequence[str], vectors: np.ndarray) -> str | None:
    """The first text whose embedding is a zero vector (cosine similarity is undefined for it),
    or ``None``.

    >>> zero_vector(["q", "g1", "g2"], np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]))
    'g1'
    >>> zero_vector(["q"], np.array([[0.5, 0.5]])) is None
    True
    """
    norms = np.linalg.norm(vectors, axis=1)
    return next((t for t, n in zip(texts, norms, strict=True) if not n > 0), None)


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row of ``b`` with vector ``a``.

    >>> cosine(np.array([1.0, 0.0]), np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])).round(3)
    array([1.   , 0.   , 0.707])
    """
    na = np.linalg.norm(a)
    nb = np.linalg.norm(b, axis=1)
    denom = np.where((na * nb) > 0, na * nb, 1.0)
    return (b @ a) / denom


def answer_relevancy(batch, settings: RelevancySettings, context) -> Rows:
    """Mean cosine similarity between the question and questions generated from the answer."""
    judge = context.judge
    rows: list[dict | None] = [None] * len(batch)
    todo = []
    for i, (case, step) in enumerate(batch):
        answer = (step.answer or "").strip()
        if not answer:
            rows[i] = {"answer_relevancy": MetricValue.of(0.0, reason="the answer is empty")}
        else:
            todo.append((i, case.question, answer))
    domain = getattr(getattr(judge, "config", None), "domain", None)
    generated = judge.run_many(QUESTIONS, [QuestionsInput(answer=a, n=settings.n, domain=domain)
                                           for _, _, a in todo], metric="answer_relevancy",
                               rounds_after=1)  # the questions are embedded next
    embed = []
    for (i, question, _), gj in zip(todo, generated, strict=True):
        if gj.output is None or not gj.output.questions:
            reason = gj.error or "the judge wrote no question"
            rows[i] = {"answer_relevancy": MetricValue.failed(
                f"the judge failed to write questions from the answer: {reason}",
                judge=_judge_identity(judge), judgments=[gj.record()])}
        else:
            embed.append((i, question, gj))
    groups = [[q, *(g.question for g in gj.output.questions)] for _, q, gj in embed]
    vectors = judge.embed_many(groups, metric="answer_relevancy")
    for (i, _, gj), texts, emb in zip(embed, groups, vectors, strict=True):
        records = [gj.record(), emb.record()]
        questions = gj.output.questions
        if emb.vectors is None:
            rows[i] = {"answer_relevancy": MetricValue.failed(
                f"embedding the questions failed: {emb.error}", judge=_judge_identity(judge),
                judgments=records)}
            continue
        zero = zero_vector(texts, emb.vectors)
        if zero is not None:
            which = "question" if zero == texts[0] else "generated question"
            rows[i] = {"answer_relevancy": MetricValue.failed(
                f"the embedding of the {which} {zero!r} is a zero vector, so its cosine "
                "similarity is undefined (not cached; a rerun asks again) — if it persists, "
                "check `judge.embedding_model` and the server", judge=_judge_identity(judge),
                judgments=records)}
            continue
        sims = cosine(emb.vectors[0], emb.vectors[1:])
        committal = [not g.noncommittal for g in questions]
        mean = float(np.clip(sims, -1.0, 1.0).mean())
        if settings.noncommittal == "strict":
            value = mean if all(committal) else 0.0
        else:
            value = mean * sum(committal) / len(committal)
        rows[i] = {"answer_relevancy": MetricValue.of(
            value, questions=[g.question for g in questions],
            similarities=[round(float(s), 6) for s in sims],
            noncommittal=[g.noncommittal for g in questions],
            judge=_judge_identity(judge) | {"embedding_model": judge.embedding_model},
            judgments=records)}
    return rows


# -- answer correctness ----------------------------------------------------------------------

CORRECTNESS = ["correctness_precision", "correctness_recall", "correctness_f1"]


def _failed_correctness(reason: str, judgments: list[Judgment]) -> dict[str, MetricValue]:
    """The same failure for the three metrics; the judgments' records on the precision only,
    so the report counts each request once."""
    return {m: MetricValue.failed(reason, judgments=[j.record() for j in judgments])
            if m == CORRECTNESS[0] else MetricValue.failed(reason) for m in CORRECTNESS}


def answer_correctness(batch, context) -> Rows:
    """Claim-level precision, recall and F1 of the answer against the reference answer."""
    judge = context.judge
    rows: list[dict | None] = [None] * len(batch)
    todo = []
    for i, (case, step) in enumerate(batch):
        answer = (step.answer or "").strip()
        if not case.gold.answer:
            reason = "the case has no reference answer (gold.answer)"
            rows[i] = {m: MetricValue.failed(reason) for m in CORRECTNESS}
        elif not answer:
            rows[i] = {m: MetricValue.of(0.0, reason="the answer is empty") for m in CORRECTNESS}
        else:
            todo.append((i, case.question, answer, case.gold.answer))
    claim_j = _claims(judge, [(q, a) for _, q, a, _ in todo] + [(q, r) for _, q, _, r in todo],
                      "correctness")
    answer_claims, reference_claims = claim_j[:len(todo)], claim_j[len(todo):]
    verify, checks = [], []
    for k, (i, _, answer, reference) in enumerate(todo):
        aj, rj = answer_claims[k], reference_claims[k]
        bad = next((j for j in (aj, rj) if j.output is None), None)
        if bad is not None:
            rows[i] = _failed_correctness(
                f"the judge failed to split a text into claims: {bad.error}", [aj, rj])
        elif not aj.output.claims or not rj.output.claims:
            which = "answer" if not aj.output.claims else "reference answer"
            rows[i] = _failed_correctness(f"the {which} makes no claim to compare", [aj, rj])
        else:
            checks.append((i, aj, rj))
            verify += [(reference, aj.output.claims), (answer, rj.output.claims)]
    verdicts = _verify(judge, verify, "correctness")
    for n, (i, aj, rj) in enumerate(checks):
        pj, rcj = verdicts[2 * n], verdicts[2 * n + 1]
        records = [aj.record(), rj.record(), pj.record(), rcj.record()]
        precise = _support(pj, aj.output.claims)
        covered = _support(rcj, rj.output.claims)
        problem = next((x for x in (precise, covered) if isinstance(x, str)), None)
        if problem is not None:
            rows[i] = _failed_correctness(problem, [aj, rj, pj, rcj])
            continue
        p = sum(precise) / len(precise)
        r = sum(covered) / len(covered)
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        details = {"judge": _judge_identity(judge)}
        rows[i] = {
            "correctness_precision": MetricValue.of(
                p, unsupported_answer_claims=_unsupported(pj, aj.output.claims),
                **details, judgments=records),
            "correctness_recall": MetricValue.of(
                r, missed_reference_claims=_unsupported(rcj, rj.output.claims), **details),
            "correctness_f1": MetricValue.of(f1, **details),
        }
    return rows
