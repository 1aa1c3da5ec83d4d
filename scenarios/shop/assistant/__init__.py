"""Reference shopping assistant for the "shop" scenario: a small, offline, deterministic RAG system.

It answers a ``Case.question`` with four components and records what each did in a ``Trace``:

1. **router** - keyword lexicons (plus a few catalog cues: a size, a price bound, a brand or
   product name, a date) give a raw score per route (``sql`` for the product/order database,
   ``blog`` for fashion advice); a logistic squashes each to a probability and every route at
   or above 0.5 is chosen (the more likely one if none is).
2. **text2sql** - slots (category, colour, brand, brand country, material, gender, size, price
   bounds, product name, order status, month, "since" date, grouping) are extracted with
   regular expressions and vocabularies read from the catalog itself; one intent template
   (cheapest, most expensive, count, average, sizes, sold out, new arrivals, brands, orders,
   revenue, best seller, list ...) is filled and run on an in-memory SQLite copy of
   ``catalog.sql``.
3. **retriever** - TF-IDF (vocabulary built from the corpus, light stemming, query expanded
   with the category synonyms) over the title and text of ``blog_chunks.jsonl``; cosine
   similarity; top 5.
4. **generator** - extractive: renders the SQL rows with a sentence template and adds the
   sentences of the top chunks that are most similar to the question.

No language model is involved. The ``usage`` reported for text2sql and the generator is an
*approximation* of what an LLM version of those steps would read and write: a regex count of
word and punctuation tokens of the prompt (question + schema, or question + contexts) and of
the output (the SQL, or the answer). Router and retriever report no usage.

``answer(case, fault=...)`` (a scenario's ``system.options``) degrades exactly one component
on purpose, for the fault-injected variants ``scenarios/shop-fault-*.yaml``: see ``FAULTS``.
``answer(case, noise=p, noise_seed=s, repeat=r)`` perturbs the components at random, as an LLM
sampled at a temperature above 0 would, deterministically given (seed, case, repeat), for
``scenarios/shop-noisy.yaml`` and ``--repeat N``: see :mod:`.noise`.
``answer(case, overrides=...)`` implements evalharness's oracle protocol: a component's output
replaced by the one given (its gold, for the bottleneck report's headroom).

One module per component — ``router``, ``text2sql``, ``retriever``, ``generator`` — beside
``text`` (word utilities), ``data`` (the catalog and the blog index), ``faults`` and ``noise``; this
module wires them into :func:`answer`, the function a scenario names
(``system: shop.assistant:answer``).

The assistant only ever reads ``case.question``; gold labels and tags are never looked at.
Its mistakes are those of its simple design: keyword routing misses paraphrases, templates
handle one intent with conjunctive filters, bag-of-words retrieval confuses close topics.
"""


from __future__ import annotations

from typing import Any

from evalharness.models import Case, RetrieverStep, RouterStep, Text2SQLStep, Trace

from .data import Catalog, Corpus, catalog, corpus
from .faults import FAULTS, invent_figures, retrieve_weak, single_route
from .generator import generate, sentence_vector
from .noise import Noise, check_noise, flip_route, noisy_retrieve, sloppy_answer
from .retriever import retrieve
from .router import route
from .text2sql import Slots, detect_intent, extract_slots, text_to_sql

__all__ = [
    "FAULTS", "OVERRIDABLE", "Catalog", "Corpus", "Slots", "answer", "catalog", "corpus",
    "detect_intent", "extract_slots", "generate", "retrieve", "route", "sentence_vector",
    "text_to_sql",
]


OVERRIDABLE = ("router", "text2sql", "retriever")
"""Components whose output ``answer(case, overrides=...)`` accepts in place of its own."""


def answer(
    case: Case, *, fault: str | None = None, noise: float = 0.0, noise_seed: int | str = 0,
    overrides: dict[str, dict[str, Any]] | None = None, repeat: int | None = None,
) -> Trace:
    """Run the pipeline on ``case.question`` and return the trace (gold is never read).

    ``fault`` (a scenario's ``system.options``) degrades exactly one component, for the
    fault-injected variants ``scenarios/shop-fault-*.yaml``: one of :data:`FAULTS`, or None
    for the reference assistant.

    ``noise`` (0 to 1) perturbs each component independently with about that probability
    (:mod:`.noise`: a route flipped, a filter dropped, a weaker or jittered ranking, a sentence
    dropped or a price rounded), drawn from ``noise_seed``, the case's id and ``repeat`` (which
    evalharness passes in a run with repeats; None counts as 1): the same call gives the same
    trace, another repeat or seed another draw. ``noise=0`` is the assistant as it is.

    ``overrides`` is evalharness's oracle protocol (docs/bottleneck.md): component -> the
    output it must take instead of computing its own (the fields of its trace step) — the
    router's ``routes``; text-to-SQL's ``sql``, ``columns`` and ``rows``; the retriever's
    ``ids`` and ``texts``. The downstream components then work from that output, and the trace
    records it. An override replaces the component, fault and noise included."""
    if fault is not None and fault not in FAULTS:
        raise ValueError(
            f"unknown fault {fault!r}; valid values: {', '.join(FAULTS)} (or none)"
        )
    noisy = Noise(check_noise(noise), noise_seed, case.id, repeat)
    overrides = overrides or {}
    unknown = sorted(set(overrides) - set(OVERRIDABLE))
    if unknown:
        raise ValueError(
            f"cannot override {', '.join(unknown)}: this assistant accepts overrides for "
            f"{', '.join(OVERRIDABLE)}"
        )
    question = case.question
    cat = catalog()
    if "router" in overrides:
        router_step = RouterStep(routes=list(overrides["router"]["routes"]), latency_ms=0.0)
    else:
        router_step = route(question, cat)
        if fault == "router":
            router_step = single_route(router_step)
        if noisy.draw("router") is not None:
            router_step = flip_route(router_step)
    sql_step: Text2SQLStep | None = None
    slots: Slots | None = None
    ret_step: RetrieverStep | None = None
    corp: Corpus | None = None
    if "sql" in router_step.routes:
        if "text2sql" in overrides:
            given = overrides["text2sql"]
            slots = extract_slots(question, cat)  # the answer template follows the question
            sql_step = Text2SQLStep(sql=given["sql"], columns=given.get("columns"),
                                    rows=given.get("rows"), latency_ms=0.0)
        else:
            drop = fault == "text2sql" or noisy.draw("text2sql") is not None
            sql_step, slots = text_to_sql(question, cat, drop_filter=drop)
    if "blog" in router_step.routes:
        corp = corpus()
        if "retriever" in overrides:
            given = overrides["retriever"]
            ret_step = RetrieverStep(ids=list(given["ids"]), texts=given.get("texts"),
                                     latency_ms=0.0)
        elif (rng := noisy.draw("retriever")) is not None:
            ret_step = noisy_retrieve(question, corp, rng, weak=fault == "retriever")
        elif fault == "retriever":
            ret_step = retrieve_weak(question, corp)
        else:
            ret_step = retrieve(question, corp)
    gen_step = generate(question, slots, sql_step, ret_step, corp)
    if fault == "generator":
        gen_step = invent_figures(gen_step)
    if (rng := noisy.draw("generator")) is not None:
        gen_step = sloppy_answer(gen_step, rng)
    return Trace(
        case_id=case.id,
        router=router_step,
        text2sql=sql_step,
        retriever=ret_step,
        generator=gen_step,
    )
