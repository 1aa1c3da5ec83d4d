"""The judge machinery: judgment tasks with versioned rubrics, backends, a cache, accounting.

Evaluators that declare ``needs_judge`` receive ``context.judge`` and call
``context.judge.run_many(TASK, [inputs, ...], metric="name")``, which answers every input
concurrently and returns one :class:`Judgment` each (an output, or an error with the raw text),
and ``context.judge.embed_many(groups, metric="name")`` for embeddings. :data:`LEDGER` collects
what a caller's calls produced; :func:`redact` removes secrets from error texts.
"""

from evalharness.judge.base import LEDGER, Embeddings, Judge, JudgeConfig, Judgment, judge_usage
from evalharness.judge.tasks import (
    CHUNK_USEFULNESS,
    CLAIM_SUPPORT,
    CLAIMS,
    QUESTIONS,
    SQL_EQUIVALENCE,
    TASKS,
    ChunkUsefulnessInput,
    ChunkUsefulnessOutput,
    ClaimsInput,
    ClaimsOutput,
    ClaimSupportInput,
    ClaimSupportOutput,
    JudgmentTask,
    QuestionsInput,
    QuestionsOutput,
    SQLEquivalenceInput,
    SQLEquivalenceOutput,
)
from evalharness.redaction import redact

__all__ = [
    "CHUNK_USEFULNESS", "CLAIMS", "CLAIM_SUPPORT", "QUESTIONS", "SQL_EQUIVALENCE", "TASKS",
    "ChunkUsefulnessInput", "ChunkUsefulnessOutput", "ClaimSupportInput", "ClaimSupportOutput",
    "ClaimsInput", "ClaimsOutput", "Embeddings", "Judge", "JudgeConfig", "Judgment",
    "JudgmentTask", "LEDGER", "QuestionsInput", "QuestionsOutput", "SQLEquivalenceInput",
    "SQLEquivalenceOutput", "judge_usage", "redact",
]
