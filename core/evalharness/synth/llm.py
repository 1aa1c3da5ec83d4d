"""The LLM writer: the judge backend's model rewords each seed's question and answer.

It asks the :data:`~evalharness.judge.tasks.SYNTH_CASE` task through the scenario's judge —
any OpenAI-compatible endpoint — so requests go through the judge's concurrency, retries,
one re-ask of an unparsable answer, and its content-addressed cache (a rerun with the same
seed makes no request). The model gets the material (gold chunks, or gold SQL and rows), the
offline writer's draft to reword (so the meaning and the gold stay those of the seed), a
persona and a style. A judgment that fails (an error, or garbage after the re-ask) becomes a
rejected candidate with its reason, never an exception.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from typing import Any

from evalharness.errors import UsageError
from evalharness.judge.tasks import SYNTH_CASE, SynthCaseInput
from evalharness.synth.corpus import head
from evalharness.synth.seeds import UNANSWERABLE, Seed
from evalharness.synth.writers import OfflineWriter, Written, fmt

PERSONAS = ("a first-time customer", "a returning customer in a hurry",
            "a non-native English speaker", "a detail-minded shopper")
STYLES = ("short and casual", "polite and complete", "a few keywords", "chatty")


def material(seed: Seed, corpus) -> str:
    """What the model may draw on for ``seed``: of a chunk, what synth reads of it
    (:func:`evalharness.synth.corpus.head`), as the gold's sentences come from there."""
    parts: list[str] = []
    if seed.sql is not None:
        rows = "\n".join(" | ".join(fmt(v) for v in row) for row in seed.rows or [])
        parts.append(f"SQL: {seed.sql}\nColumns: {' | '.join(seed.columns or [])}\n"
                     f"Rows:\n{rows}")
    for cid in seed.chunks:
        chunk = corpus[cid] if corpus and cid in corpus else None
        if chunk is not None:
            parts.append(f"Document {cid}: {head(chunk.title or '')}\n{head(chunk.text)}"
                         .strip())
    if seed.source == UNANSWERABLE:
        parts.append(f"Topic that nothing in the data covers: {seed.facts['topic']}")
    return "\n\n".join(parts)


class LLMWriter:
    """Rewords the offline writer's drafts with the judge's model (see the module)."""

    name = "llm"
    version = "1"

    def __init__(self, judge, corpus=None, personas: Sequence[str] = PERSONAS,
                 styles: Sequence[str] = STYLES) -> None:
        self.judge = judge
        self.corpus = corpus
        self.personas = tuple(personas)
        self.styles = tuple(styles)
        self.draft = OfflineWriter()

    @classmethod
    def from_judge(cls, judge, corpus=None, **options: Any) -> LLMWriter:
        if not getattr(judge, "is_llm", False):
            raise UsageError(f"--writer llm needs an LLM judge (judge.backend: openai, with a "
                             f"model and an endpoint); this scenario's judge is "
                             f"{judge.label()!r}. Use the offline writer, or configure one "
                             "(docs/judge.md)")
        return cls(judge, corpus, **options)

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "task": SYNTH_CASE.id,
                "rubric_version": SYNTH_CASE.version, **self.judge.identity()}

    def write_many(self, seeds: Sequence[Seed], rng: random.Random) -> list[Written]:
        drafts = self.draft.write_many(seeds, rng)
        inputs = []
        for s, d in zip(seeds, drafts, strict=True):
            # persona and style from the draft's own hash: the same case gets the same ones,
            # and the shared generator (the drafts' wording) is not disturbed
            pick = random.Random(hashlib.sha256((d.question or "").encode()).digest())
            inputs.append(SynthCaseInput(
                kind=s.source, shape=s.shape, material=material(s, self.corpus),
                draft_question=d.question or "", draft_answer=d.answer or "",
                persona=pick.choice(self.personas), style=pick.choice(self.styles)))
        judgments = self.judge.run_many(SYNTH_CASE, inputs, metric="synth.writer")
        out = []
        for item, judgment in zip(inputs, judgments, strict=True):
            prompt = hashlib.sha256(json.dumps(SYNTH_CASE.messages(item), sort_keys=True,
                                               ensure_ascii=False).encode()).hexdigest()
            if judgment.error or judgment.output is None:
                out.append(Written(None, None, error=judgment.error or "no answer",
                                   prompt_sha256=prompt, raw=judgment.raw))
                continue
            out.append(Written(judgment.output.question.strip(), judgment.output.answer.strip(),
                               prompt_sha256=prompt, raw=judgment.raw))
        return out
