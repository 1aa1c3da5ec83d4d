"""Context precision and context recall: is what the retriever returned useful, and did it
return what the answer needs? From relevance labels when the case has them, else from the
judge (one chunk-usefulness request per case; claims of the reference answer, then one
verification of all of them, for recall)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evalharness import MetricValue
from evalharness_retrieval.measures import Measure
from evalharness_retrieval.ranking import (
    NO_LABELS,
    kernel_values,
    ranking_problem,
    trec_order,
)

Source = Literal["auto", "labels", "judge"]


class ContextPrecisionSettings(BaseModel):
    """Settings of the ``context_precision`` evaluator."""

    model_config = ConfigDict(extra="forbid")

    k: list[int] = Field(default_factory=lambda: [5])
    """Cutoffs: one ``context_precision@K`` per K, over the top K chunks."""

    relevance_level: int = Field(default=1, ge=1)
    """With labels: the minimum grade of a relevant chunk."""

    source: Source = "auto"
    """``auto``: labels when the case has them (``gold.relevant``), else the judge; ``labels``
    or ``judge``: only that source."""

    @field_validator("k")
    @classmethod
    def _positive_unique(cls, value: list[int]) -> list[int]:
        if not value or any(k < 1 for k in value):
            raise ValueError("k must be a non-empty list of cutoffs >= 1, e.g. [5]")
        return sorted(set(value))


class ContextRecallSettings(BaseModel):
    """Settings of the ``context_recall`` evaluator."""

    model_config = ConfigDict(extra="forbid")

    relevance_level: int = Field(default=1, ge=1)
    """With labels: the minimum grade of a relevant chunk."""

    source: Source = "auto"
    """``auto``: labels when the case has them (``gold.relevant``), else the judge on the
    reference answer's claims; ``labels`` or ``judge``: only that source."""


def context_precision_metrics(settings: ContextPrecisionSettings) -> list[str]:
    """``context_precision@K`` for each K.

    >>> context_precision_metrics(ContextPrecisionSettings(k=[10, 3]))
    ['context_precision@3', 'context_precision@10']
    """
    return [f"context_precision@{k}" for k in settings.k]


def _use_labels(source: str, case) -> bool:
    return source == "labels" or (source == "auto" and case.gold.relevant is not None)


def _identity(judge) -> dict[str, Any]:
    return {"backend": judge.backend, "model": judge.model}


def chunk_texts(order: list[str], step, context) -> tuple[list[str], str | None]:
    """Texts of the chunks in ``order``: the step's texts, else the corpus'; or the first id
    that has neither."""
    known = dict(zip(step.ids, step.texts, strict=True)) if step.texts is not None else {}
    texts = []
    for chunk in order:
        if chunk in known:
            texts.append(known[chunk])
        elif chunk in context.corpus:
            texts.append(context.corpus[chunk].text)
        else:
            return [], chunk
    return texts, None


def _answer_for(case, context) -> tuple[str | None, str]:
    """The answer the chunks are judged against: the reference answer, else the generator's
    answer in the case's trace."""
    if case.gold.answer and case.gold.answer.strip():
        return case.gold.answer, "reference"
    trace = (getattr(context, "traces", None) or {}).get(case.id)
    generator = getattr(trace, "generator", None) if trace is not None else None
    answer = getattr(generator, "answer", None)
    if answer and answer.strip():
        return answer, "generator"
    return None, ""


def _fail_all(names, reason: str, **details) -> dict[str, MetricValue]:
    """The same failure for every metric; judgment records only on the first (so the report
    counts each request once)."""
    first = {n: MetricValue.failed(reason, **details) for n in names[:1]}
    rest = {n: MetricValue.failed(reason) for n in names[1:]}
    return first | rest


# -- context precision -------------------------------------------------------------------------


def context_precision(batch, settings: ContextPrecisionSettings, context
                      ) -> list[dict[str, MetricValue]]:
    """Σ_{i<=K} precision@i · v_i / Σ_{i<=K} v_i, with v_i = 1 when the chunk at rank i is
    relevant (labels) or useful (judge); 0 when no chunk of the top K is."""
    names = context_precision_metrics(settings)
    measures = [Measure(f"context_precision_{k}", "context_precision", k) for k in settings.k]
    rows: list[dict | None] = [None] * len(batch)
    labelled, judged = [], []
    for i, (case, step) in enumerate(batch):
        problem = ranking_problem(step.ids, step.scores)
        if problem is None and settings.source == "labels" and case.gold.relevant is None:
            problem = NO_LABELS
        if problem is not None:
            rows[i] = _fail_all(names, problem)
        elif _use_labels(settings.source, case):
            labelled.append(i)
        else:
            judged.append(i)
    values, _, _ = kernel_values([(batch[i][1].ids, batch[i][1].scores) for i in labelled],
                                 [batch[i][0].gold.relevant for i in labelled],
                                 settings.relevance_level, measures)
    for j, i in enumerate(labelled):
        rows[i] = {n: MetricValue.of(values[j][m.name], source="labels")
                   for n, m in zip(names, measures, strict=True)}
    for i, row in _judged_precision(batch, judged, names, measures, settings, context):
        rows[i] = row
    return rows


def _judged_precision(batch, todo, names, measures, settings, context):
    from evalharness.judge import CHUNK_USEFULNESS, ChunkUsefulnessInput

    depth = max(settings.k)
    asks, out = [], []
    for i in todo:
        case, step = batch[i]
        order = trec_order(step.ids, step.scores)[:depth]
        answer, answer_source = _answer_for(case, context)
        texts, missing = chunk_texts(order, step, context)
        if not order:
            out.append((i, {n: MetricValue.of(0.0, source="judge", reason="nothing was retrieved")
                            for n in names}))
        elif answer is None:
            out.append((i, _fail_all(names, "the case has no relevance labels (gold.relevant), "
                                            "no reference answer (gold.answer) and no generator "
                                            "answer to judge the chunks against")))
        elif missing is not None:
            out.append((i, _fail_all(names, f"no text for chunk {missing!r}: the step records "
                                            "no texts and the corpus has no such chunk")))
        elif context.judge is None:
            out.append((i, _fail_all(names, "no judge is configured")))
        else:
            asks.append((i, order, answer_source,
                         ChunkUsefulnessInput(question=case.question, answer=answer,
                                              chunks=texts)))
    if not asks:
        return out
    judgments = context.judge.run_many(CHUNK_USEFULNESS, [a[3] for a in asks], metric=names[0])
    good = []
    for (i, order, answer_source, _), judgment in zip(asks, judgments, strict=True):
        record = [judgment.record()]
        if judgment.output is None:
            out.append((i, _fail_all(names, f"the judge failed to judge the chunks: "
                                            f"{judgment.error}", judgments=record)))
        elif len(judgment.output.verdicts) != len(order):
            out.append((i, _fail_all(names, f"the judge returned "
                                            f"{len(judgment.output.verdicts)} verdicts for "
                                            f"{len(order)} chunks", judgments=record)))
        else:
            useful = [v.useful for v in judgment.output.verdicts]
            good.append((i, order, useful, answer_source, record))
    # The same kernel as with labels: a chunk is "relevant" when the judge found it useful.
    values, _, _ = kernel_values([(order, None) for _, order, _, _, _ in good],
                                 [{c: 1 for c, u in zip(order, useful, strict=True) if u}
                                  for _, order, useful, _, _ in good], 1, measures)
    for j, (i, order, useful, answer_source, record) in enumerate(good):
        row = {}
        for n, m in zip(names, measures, strict=True):
            details: dict[str, Any] = {"source": "judge"}
            if n == names[0]:
                details |= {"useful": [c for c, u in zip(order, useful, strict=True) if u],
                            "judged_against": answer_source,
                            "judge": _identity(context.judge), "judgments": record}
            row[n] = MetricValue.of(values[j][m.name], **details)
        out.append((i, row))
    return out


# -- context recall ----------------------------------------------------------------------------


def context_recall(batch, settings: ContextRecallSettings, context
                   ) -> list[dict[str, MetricValue]]:
    """Labels: relevant chunks retrieved / relevant chunks (0 when none is relevant). Judge:
    claims of the reference answer supported by the retrieved chunks / claims."""
    rows: list[dict | None] = [None] * len(batch)
    labelled, judged = [], []
    for i, (case, step) in enumerate(batch):
        problem = ranking_problem(step.ids, step.scores)
        if problem is None and settings.source == "labels" and case.gold.relevant is None:
            problem = NO_LABELS
        if problem is not None:
            rows[i] = {"context_recall": MetricValue.failed(problem)}
        elif _use_labels(settings.source, case):
            labelled.append(i)
        else:
            judged.append(i)
    counts = [Measure("num_rel_ret", "num_rel_ret"), Measure("num_rel", "num_rel")]
    values, _, _ = kernel_values([(batch[i][1].ids, batch[i][1].scores) for i in labelled],
                                 [batch[i][0].gold.relevant for i in labelled],
                                 settings.relevance_level, counts)
    for j, i in enumerate(labelled):
        found, relevant = int(values[j]["num_rel_ret"]), int(values[j]["num_rel"])
        rows[i] = {"context_recall": MetricValue.of(found / relevant if relevant else 0.0,
                                                    source="labels", relevant=relevant,
                                                    retrieved_relevant=found)}
    for i, value in _judged_recall(batch, judged, context):
        rows[i] = {"context_recall": value}
    return rows


def _judged_recall(batch, todo, context):
    from evalharness.judge import CLAIM_SUPPORT, CLAIMS, ClaimsInput, ClaimSupportInput

    out, asks = [], []
    for i in todo:
        case, step = batch[i]
        order = trec_order(step.ids, step.scores)
        texts, missing = chunk_texts(order, step, context)
        if not (case.gold.answer and case.gold.answer.strip()):
            out.append((i, MetricValue.failed("the case has neither relevance labels "
                                              "(gold.relevant) nor a reference answer "
                                              "(gold.answer)")))
        elif missing is not None:
            out.append((i, MetricValue.failed(f"no text for chunk {missing!r}: the step records "
                                              "no texts and the corpus has no such chunk")))
        elif context.judge is None:
            out.append((i, MetricValue.failed("no judge is configured")))
        else:
            asks.append((i, case, texts))
    if not asks:
        return out
    judge = context.judge
    claim_j = judge.run_many(CLAIMS, [ClaimsInput(question=c.question, answer=c.gold.answer)
                                      for _, c, _ in asks], metric="context_recall",
                             rounds_after=1)  # the claims are verified next
    verify = []
    for (i, _, texts), cj in zip(asks, claim_j, strict=True):
        if cj.output is None:
            out.append((i, MetricValue.failed(f"the judge failed to split the reference answer "
                                              f"into claims: {cj.error}",
                                              judgments=[cj.record()])))
        elif not cj.output.claims:
            out.append((i, MetricValue.failed("the reference answer makes no claim to check",
                                              judgments=[cj.record()])))
        elif not texts:
            out.append((i, MetricValue.of(0.0, source="judge", claims=len(cj.output.claims),
                                          supported=0, reason="nothing was retrieved",
                                          judge=_identity(judge), judgments=[cj.record()])))
        else:
            verify.append((i, texts, cj))
    if not verify:
        return out
    support_j = judge.run_many(CLAIM_SUPPORT, [ClaimSupportInput(context="\n\n".join(texts),
                                                                 claims=cj.output.claims)
                                               for _, texts, cj in verify],
                               metric="context_recall")
    for (i, _, cj), sj in zip(verify, support_j, strict=True):
        claims = cj.output.claims
        records = [cj.record(), sj.record()]
        if sj.output is None:
            out.append((i, MetricValue.failed(f"the judge failed to verify the claims: "
                                              f"{sj.error}", judgments=records)))
        elif len(sj.output.verdicts) != len(claims):
            out.append((i, MetricValue.failed(f"the judge returned {len(sj.output.verdicts)} "
                                              f"verdicts for {len(claims)} claims",
                                              judgments=records)))
        else:
            ok = [v.supported for v in sj.output.verdicts]
            out.append((i, MetricValue.of(
                sum(ok) / len(claims), source="judge", claims=len(claims), supported=sum(ok),
                unsupported_claims=[c for c, s in zip(claims, ok, strict=True) if not s],
                judge=_identity(judge), judgments=records)))
    return out
