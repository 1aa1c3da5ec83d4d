"""Quality filters of synthetic cases, each a counted reason in the summary.

* ``near_duplicate`` — a question whose content words overlap another's (already written or
  already in the cases file) by :data:`DUPLICATE_JACCARD` or more;
* ``leaks_answer`` — the question already states the answer: most of the reference answer's
  content words are in the question, or a one-value answer's value is;
* ``unsupported_answer`` — a reference answer of a corpus case with a number or a name its
  gold chunks do not have, or a claim the judge finds unsupported by them (our faithfulness
  check, :data:`evalharness.judge.tasks.CLAIMS` then ``CLAIM_SUPPORT``).

(SQL whose gold returns nothing or something degenerate never becomes a seed: those counts
come from :mod:`evalharness.synth.sql`.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from evalharness.judge.heuristic import content_stems, names, numbers
from evalharness.judge.tasks import (
    CLAIM_SUPPORT,
    CLAIMS,
    ClaimsInput,
    ClaimSupportInput,
)

DUPLICATE_JACCARD = 0.85
"""Content-word Jaccard similarity at or above which two questions are near-duplicates."""

LEAK_SHARE = 0.8
"""Share of the answer's content words found in the question at which it leaks."""


def _words(text: str) -> frozenset[str]:
    return frozenset(content_stems(text))


class Duplicates:
    """Questions seen so far, to reject near-duplicates of any of them."""

    def __init__(self, existing: Iterable[str] = ()) -> None:
        self._seen: list[frozenset[str]] = []
        self._exact: set[str] = set()
        for question in existing:
            self.add(question)

    @staticmethod
    def _key(question: str) -> str:
        return " ".join(re.findall(r"\w+", question.lower()))

    def is_duplicate(self, question: str) -> bool:
        if self._key(question) in self._exact:
            return True
        words = _words(question)
        if not words:
            return False
        for other in self._seen:
            union = len(words | other)
            if union and len(words & other) / union >= DUPLICATE_JACCARD:
                return True
        return False

    def add(self, question: str) -> None:
        self._exact.add(self._key(question))
        self._seen.append(_words(question))


def leaks(question: str, answer: str, rows: Sequence[Sequence] | None = None) -> bool:
    """Whether the question gives its answer away."""
    answer_words = _words(answer)
    question_words = _words(question)
    if len(answer_words) >= 3:
        return len(answer_words & question_words) / len(answer_words) >= LEAK_SHARE
    if rows is not None and len(rows) == 1 and len(rows[0]) == 1 and rows[0][0] is not None:
        value = str(rows[0][0])
        return bool(re.search(rf"(?<![\w.]){re.escape(value)}(?![\w])", question))
    return False


def missing_facts(answer: str, context: str) -> list[str]:
    """Numbers and names in ``answer`` that ``context`` does not have."""
    missing = sorted(numbers(answer) - numbers(context))
    missing += sorted(names(answer) - names(context) - _words(context))
    return missing


def unsupported(judge, answers: Sequence[tuple[str, str, str]]) -> list[str | None]:
    """For each (question, answer, context): ``None`` when the judge finds every claim of the
    answer supported by the context, else why not (a judge error is a reason too)."""
    if not answers:
        return []
    claims = judge.run_many(CLAIMS, [ClaimsInput(question=q, answer=a) for q, a, _ in answers],
                            metric="synth.support", rounds_after=1)
    out: list[str | None] = [None] * len(answers)
    checks, where = [], []
    for i, judgment in enumerate(claims):
        if judgment.error or judgment.output is None:
            out[i] = f"the judge could not split the answer into claims: {judgment.error}"
        elif judgment.output.claims:
            checks.append(ClaimSupportInput(context=answers[i][2],
                                            claims=judgment.output.claims))
            where.append(i)
    for i, judgment in zip(where, judge.run_many(CLAIM_SUPPORT, checks,
                                                  metric="synth.support"), strict=True):
        if judgment.error or judgment.output is None:
            out[i] = f"the judge could not verify the claims: {judgment.error}"
            continue
        bad = [v.claim for v in judgment.output.verdicts if not v.supported]
        if bad:
            out[i] = f"not supported by the gold chunks: {bad[0]!r}"
    return out
