"""A seed: what one synthetic case asks about, and its gold — before any wording.

Seeds are made from the data (:mod:`evalharness.synth.sql` from the database,
:mod:`evalharness.synth.corpus` from the corpus); a writer (:mod:`evalharness.synth.writers`)
words the question and the reference answer. The gold never depends on the writer: the gold
SQL was executed and its rows are stored; the gold chunks are the ones the seed was made from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SQL, CORPUS, MIXED, UNANSWERABLE = "sql", "corpus", "mixed", "unanswerable"
"""Where a seed's answer lives: the database, the corpus, both, or nowhere."""


@dataclass
class Seed:
    source: str
    """:data:`SQL`, :data:`CORPUS`, :data:`MIXED` or :data:`UNANSWERABLE`."""
    shape: str
    """What kind of question: ``filter``, ``aggregate``, ``group_by``, ``having``, ``join``,
    ``nested``, ``order_limit``, ``ties``, ``null`` (SQL); ``single``, ``multi_hop``,
    ``comparison``, ``which_of`` (corpus); ``both`` (mixed); ``out_of_scope``."""
    difficulty: int
    """1 (one table or one chunk, one condition) to 4 (nested, several chunks)."""
    facts: dict[str, Any]
    """What a writer words the question from (nouns, columns, values, topics)."""
    sql: str | None = None
    columns: list[str] | None = None
    rows: list[list[Any]] | None = None
    chunks: list[str] = field(default_factory=list)
    """Gold chunk ids (all highly relevant)."""
    sentences: list[str] = field(default_factory=list)
    """The gold chunks' sentences the reference answer is written from."""
    tables: list[str] = field(default_factory=list)
    parts: list[Seed] = field(default_factory=list)
    """A mixed seed's SQL and corpus seeds."""

    @property
    def refusal(self) -> bool:
        return self.source == UNANSWERABLE
