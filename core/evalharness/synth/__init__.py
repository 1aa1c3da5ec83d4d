"""``evalharness synth``: labelled test cases from the corpus and the database (docs/synth.md).

Seeds come from the data — gold SQL executed on the database (:mod:`.sql`), gold chunks from
the corpus (:mod:`.corpus`), mixes of both, questions nothing answers; a writer words each
(:mod:`.writers`); filters drop near-duplicates, leaks and unsupported reference answers
(:mod:`.filters`). Every case is tagged ``synthetic`` and carries its provenance under
``metadata.synth``. The same inputs, options and seed give byte-identical cases.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalharness.context import Chunk
from evalharness.errors import UsageError
from evalharness.models import Case, Gold
from evalharness.pipeline import SHOP_PIPELINE, ComponentSpec, Pipeline
from evalharness.synth.corpus import CorpusIndex, corpus_seeds, stems_of_values
from evalharness.synth.filters import Duplicates, leaks, missing_facts, unsupported
from evalharness.synth.schema import quote, read_schema
from evalharness.synth.seeds import CORPUS, MIXED, SQL, UNANSWERABLE, Seed
from evalharness.synth.sql import sql_seeds
from evalharness.synth.writers import OfflineWriter, Writer, Written, sql_answer

__all__ = ["SynthResult", "Writer", "OfflineWriter", "synthesize", "SHARES"]

SHARES: dict[str, dict[str, float]] = {
    SQL: {"filter": 1, "aggregate": 1, "order_limit": 1, "null": 1, "group_by": 1,
          "having": 1, "join": 1, "ties": 1, "nested": 1},
    CORPUS: {"single": 4, "which_of": 1.5, "multi_hop": 2.5, "comparison": 2},
    MIXED: {"both": 1},
    UNANSWERABLE: {"out_of_scope": 1},
}
"""Relative weights of the shapes within each source."""

SOURCE_SHARES = {SQL: 0.45, CORPUS: 0.35, MIXED: 0.10, UNANSWERABLE: 0.10}
"""Share of the cases per source when both a database and a corpus are given; with one of
them, the sources it cannot feed are left out and the rest scaled up."""

TAG = "synthetic"


@dataclass
class SynthResult:
    cases: list[Case]
    summary: dict[str, Any]
    rejected: list[dict[str, Any]] = field(default_factory=list)
    """Candidates the filters dropped: question, answer, reason (for ``--rejected``)."""


def routes_of(pipeline: Pipeline | None) -> tuple[str | None, str | None]:
    """The route names that lead to a text-to-SQL and to a retriever component."""
    pipeline = pipeline or Pipeline({k: ComponentSpec(**v) for k, v in SHOP_PIPELINE.items()})
    sql = corpus = None
    for route, targets in pipeline.routes().items():
        kinds = {pipeline.kind(t) for t in targets}
        if sql is None and "text2sql" in kinds:
            sql = route
        if corpus is None and "retriever" in kinds:
            corpus = route
    return sql, corpus


def _allocate(n: int, weights: dict[str, float]) -> dict[str, int]:
    """``n`` split by ``weights``, largest remainders first (ties by name)."""
    total = sum(weights.values())
    if not total:
        return {k: 0 for k in weights}
    exact = {k: n * w / total for k, w in weights.items()}
    out = {k: int(v) for k, v in exact.items()}
    for k in sorted(exact, key=lambda k: (-(exact[k] - out[k]), k))[: n - sum(out.values())]:
        out[k] += 1
    return out


def _text_values(conn: sqlite3.Connection, schema) -> set[str]:
    out: set[str] = set()
    for table in schema.tables.values():
        for column in table.columns:
            if column.affinity == "text":
                c = quote(column.name)
                out.update(str(r[0]) for r in conn.execute(
                    f"SELECT DISTINCT {c} FROM {quote(table.name)} WHERE {c} IS NOT NULL "
                    "LIMIT 5000"))
    return out


def _case_id(seed: Seed, question: str) -> str:
    key = json.dumps([question, seed.sql, seed.chunks], ensure_ascii=False)
    return "syn-" + hashlib.sha256(key.encode()).hexdigest()[:10]


def synthesize(*, n: int, seed: int = 0, corpus: dict[str, Chunk] | None = None,
               database: sqlite3.Connection | None = None, pipeline: Pipeline | None = None,
               existing: Sequence[Case] = (), writer: Writer | None = None, judge=None,
               skip_tables: Sequence[str] = (), difficulties: Sequence[int] = (),
               progress: Callable[[int], None] | None = None) -> SynthResult:
    """Write up to ``n`` cases (fewer when the data cannot give that many that pass the
    filters: the summary says how many and why). ``database``: a read-only connection;
    ``corpus``: chunks, of which those with a blank text are left out (counted as
    ``chunk_blank``) and the first :data:`~evalharness.synth.corpus.MAX_CHUNK_CHARS`
    characters of each read; ``judge``: checks that corpus answers are supported (skipped
    when ``None``); ``skip_tables``: tables no question may touch (personal data, internal
    tables); ``difficulties``: only seeds of these difficulties (1-4; all when empty)."""
    writer = writer or OfflineWriter()
    rng = random.Random(seed)
    dropped: Counter[str] = Counter()
    index = CorpusIndex(c for c in (corpus or {}).values() if c.text.strip())
    chunks_total = len(corpus or {})
    if chunks_total > len(index.chunks):
        dropped["chunk_blank"] = chunks_total - len(index.chunks)
    corpus = index.chunks  # what synth reads of each chunk (at most MAX_CHUNK_CHARS)
    pools: dict[str, dict[str, list[Seed]]] = {}
    schema = None
    forbidden: set[str] = set()
    if database is not None:
        schema = read_schema(database)
        unknown = sorted(set(skip_tables) - set(schema.tables))
        if unknown:
            raise UsageError(f"--skip-table {', '.join(unknown)}: no such table; tables: "
                             f"{', '.join(sorted(schema.tables))}")
        schema.skip(skip_tables)
        found: dict[str, int] = {}
        pools[SQL] = sql_seeds(database, schema, rng, found)
        dropped.update(found)
        forbidden = stems_of_values(_text_values(database, schema))
    if corpus:
        found = {}
        by_shape = corpus_seeds(index, rng, forbidden, found)
        dropped.update(found)
        pools[UNANSWERABLE] = {"out_of_scope": by_shape.pop("out_of_scope", [])}
        pools[CORPUS] = by_shape
    if database is not None and corpus:
        simple = [s for shape in ("filter", "aggregate", "order_limit")
                  for s in pools[SQL].get(shape, [])]
        singles = pools[CORPUS].get("single", [])
        mixed = []
        if simple and singles:
            for _ in range(max(1, n)):
                a, b = rng.choice(simple), rng.choice(singles)
                mixed.append(Seed(MIXED, "both", 3, {}, sql=a.sql, columns=a.columns,
                                  rows=a.rows, chunks=list(b.chunks), sentences=b.sentences,
                                  tables=list(a.tables), parts=[a, b]))
        pools[MIXED] = {"both": mixed}
    for source in list(pools):
        for shape in pools[source]:
            if difficulties:
                pools[source][shape] = [s for s in pools[source][shape]
                                        if s.difficulty in difficulties]
            rng.shuffle(pools[source][shape])
        if not any(pools[source].values()):
            del pools[source]

    # quotas: per source, then per shape; what a short pool cannot fill goes to the others
    shares = {s: w for s, w in SOURCE_SHARES.items() if s in pools}
    quotas: dict[tuple[str, str], int] = {}
    for source, count in _allocate(n, shares).items():
        weights = {shape: w for shape, w in SHARES[source].items()
                   if pools[source].get(shape)}
        for shape, k in _allocate(count, weights).items():
            quotas[(source, shape)] = k
    sql_route, corpus_route = routes_of(pipeline)
    duplicates = Duplicates(c.question for c in existing)
    ids = {c.id for c in existing}
    accepted: dict[tuple[str, str], list[Case]] = {k: [] for k in quotas}
    rejected: list[dict[str, Any]] = []
    filtered: Counter[str] = Counter()
    cursor = {k: 0 for k in quotas}

    def fill(key: tuple[str, str], want: int) -> None:
        pool = pools[key[0]][key[1]]
        while want > 0 and cursor[key] < len(pool):
            start = cursor[key]
            batch = pool[start: start + max(4, want + want // 2)]
            cursor[key] += len(batch)
            texts = writer.write_many(batch, rng)
            reasons = [_check(s, w, duplicates, corpus) for s, w in zip(batch, texts,
                                                                        strict=True)]
            needs = [i for i, r in enumerate(reasons) if r is None and batch[i].chunks
                     and judge is not None]
            for i, why in zip(needs, unsupported(judge, [
                    (texts[i].question, texts[i].answer, _context(batch[i], corpus))
                    for i in needs]), strict=True):
                if why is not None:
                    reasons[i] = f"unsupported_answer: {why}"
            # in pool order; what is left when enough are accepted stays in the pool, uncounted
            for i, (s, w, reason) in enumerate(zip(batch, texts, reasons, strict=True)):
                if want <= 0:
                    cursor[key] = start + i
                    break
                if reason is not None:
                    filtered[reason.split(":")[0]] += 1
                    rejected.append({"shape": s.shape, "question": w.question,
                                     "answer": w.answer, "reason": reason})
                    continue
                case = _case(s, w, seed, writer, sql_route, corpus_route)
                if case.id in ids or duplicates.is_duplicate(w.question):  # within the batch
                    filtered["near_duplicate"] += 1
                    rejected.append({"shape": s.shape, "question": w.question,
                                     "answer": w.answer, "reason": "near_duplicate"})
                    continue
                ids.add(case.id)
                duplicates.add(w.question)
                accepted[key].append(case)
                want -= 1
                if progress is not None:
                    progress(1)

    for key, want in quotas.items():
        fill(key, want)
    short = n - sum(len(v) for v in accepted.values())
    while short > 0:
        open_keys = [k for k in quotas if cursor[k] < len(pools[k[0]][k[1]])]
        if not open_keys:
            break
        before = short
        for key in open_keys:
            if short <= 0:
                break
            had = len(accepted[key])
            fill(key, 1)
            short -= len(accepted[key]) - had
        if short == before and not any(cursor[k] < len(pools[k[0]][k[1]]) for k in open_keys):
            break
    cases = [c for key in quotas for c in accepted[key]]
    summary = _summary(n, cases, dropped, filtered, schema, chunks_total, index, writer, seed)
    return SynthResult(cases, summary, rejected)


def _context(seed: Seed, corpus: dict[str, Chunk] | None) -> str:
    """What a reference answer may draw on: the gold chunks (title and text), and for a
    mixed case the gold rows, as the offline writer renders them."""
    chunks = [corpus[c] for c in seed.chunks] if corpus else []
    parts = [f"{c.title or ''}\n{c.text}".strip() for c in chunks]
    if seed.source == MIXED:
        parts.insert(0, sql_answer(seed.parts[0]))
    return "\n\n".join(parts)


def _check(seed: Seed, written: Written, duplicates: Duplicates,
           corpus: dict[str, Chunk] | None) -> str | None:
    """The cheap filters, in order; ``None`` when the candidate passes them."""
    if written.error or not written.question or not written.answer:
        return f"writer_error: {written.error or 'no question or answer'}"
    if duplicates.is_duplicate(written.question):
        return "near_duplicate"
    if seed.source != UNANSWERABLE:
        rows = seed.rows if seed.source == SQL else None
        if leaks(written.question, written.answer, rows):
            return "leaks_answer"
    if seed.source in (CORPUS, MIXED):
        missing = missing_facts(written.answer, _context(seed, corpus))
        if missing:
            return f"unsupported_answer: {', '.join(missing[:3])} not in the gold chunks"
    return None


def _case(seed: Seed, written: Written, rng_seed: int, writer: Writer, sql_route: str | None,
          corpus_route: str | None) -> Case:
    routes: list[str] | None
    if seed.source == SQL:
        routes, where = [sql_route] if sql_route else None, "sql-only"
    elif seed.source == CORPUS:
        routes, where = [corpus_route] if corpus_route else None, "corpus-only"
    elif seed.source == MIXED:
        routes = [r for r in (sql_route, corpus_route) if r] or None
        where = "both"
    else:
        routes, where = [], "unanswerable"
    gold: dict[str, Any] = {"routes": routes, "answer": written.answer}
    if seed.sql is not None:
        gold["sql"] = seed.sql
    if seed.source in (CORPUS, MIXED):
        gold["relevant"] = {c: 2 for c in seed.chunks}
    if seed.source == UNANSWERABLE:
        gold["relevant"] = {}
        if "refusal" in Gold.model_fields:
            gold["refusal"] = True
    provenance: dict[str, Any] = {
        "writer": writer.identity(), "seed": rng_seed, "source": seed.source,
        "shape": seed.shape, "difficulty": seed.difficulty,
    }
    if seed.tables:
        provenance["tables"] = seed.tables
    if seed.chunks:
        provenance["chunks"] = seed.chunks
    if seed.rows is not None:
        provenance["columns"] = seed.columns
        provenance["rows"] = seed.rows
    if written.prompt_sha256:
        provenance["prompt_sha256"] = written.prompt_sha256
    tags = [TAG, where, seed.shape.replace("_", "-"), f"difficulty-{seed.difficulty}"]
    return Case(id=_case_id(seed, written.question), question=written.question,
                gold=Gold.model_validate(gold), tags=tags,
                metadata={"synth": provenance})


def _summary(n: int, cases: list[Case], dropped: Counter, filtered: Counter, schema,
             chunks_total: int, index: CorpusIndex, writer: Writer, seed: int
             ) -> dict[str, Any]:
    meta = [c.metadata["synth"] for c in cases]
    tables = Counter(t for m in meta for t in m.get("tables", []))
    chunks = {c for m in meta for c in m.get("chunks", [])}
    routes = Counter("+".join(c.gold.routes) if c.gold.routes else "none" for c in cases)
    return {
        "requested": n, "written": len(cases), "seed": seed, "writer": writer.identity(),
        "filtered": dict(sorted(filtered.items())),
        "seeds_dropped": dict(sorted(dropped.items())),
        "by_route": dict(sorted(routes.items())),
        "by_source": dict(sorted(Counter(m["source"] for m in meta).items())),
        "by_shape": dict(sorted(Counter(m["shape"] for m in meta).items())),
        "by_difficulty": dict(sorted(Counter(m["difficulty"] for m in meta).items())),
        "tables": {t: tables.get(t, 0) for t in sorted(schema.tables)} if schema else {},
        "chunks": {"covered": len(chunks), "total": chunks_total, "cut": len(index.cut),
                   "max_chars": index.max_chars},
    }


def write_cases(path: Path, cases: Sequence[Case], append: bool = False) -> None:
    """One JSON line per case (``append``: after the file's existing lines)."""
    text = "".join(json.dumps(c.model_dump(mode="json", exclude_none=True),
                              ensure_ascii=False) + "\n" for c in cases)
    if append and path.is_file():
        existing = path.read_bytes()
        if existing and not existing.endswith(b"\n"):
            text = "\n" + text
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
