"""The router: keyword lexicons and catalog cues score each route; a logistic turns the
scores into probabilities and every route at or above 0.5 is chosen."""

from __future__ import annotations

import math
import re
import time

from evalharness.models import (
    RouterStep,
)

from .data import Catalog
from .text import contains_phrase, norm_phrase
from .text2sql import find_dates, find_price_bounds, find_size

SQL_LEXICON: dict[str, float] = {
    # money and numbers
    "price": 2.0, "prices": 2.0, "priced": 2.0, "cost": 1.5, "costs": 1.5, "cheapest": 2.5,
    "cheaper": 1.5, "expensive": 2.0, "priciest": 2.5, "euro": 2.0, "euros": 2.0, "eur": 2.0,
    "€": 2.0, "budget": 1.0, "average": 2.0, "on average": 2.5, "total": 1.5, "revenue": 2.5,
    "how many": 2.5, "how much": 2.0, "number of": 2.0, "count": 2.0,
    # stock and sizes
    "in stock": 3.0, "stock": 2.0, "available": 1.5, "availability": 2.0, "sold out": 2.5,
    "sizes": 1.5, "in size": 2.5, "still have": 2.0, "still get": 2.0,
    # catalog words
    "brand": 1.0, "brands": 1.5, "catalog": 2.0, "catalogue": 2.0, "products": 1.5,
    "items": 1.5, "pieces": 1.0, "sell": 1.5, "do you have": 2.0, "have you got": 2.0,
    "do you sell": 2.5, "do you carry": 2.5, "do you stock": 2.5, "you've got": 1.5,
    "what do you have": 2.5, "do you have them": 2.0, "which ones": 1.5, "carry": 1.0,
    "list": 1.5, "show me": 1.5, "everything": 1.0, "anything in": 2.0, "any of your": 2.0,
    "your shop": 1.5, "in the shop": 1.5, "what's new": 2.5, "new in": 2.0, "newest": 2.0,
    "latest": 1.0, "added": 1.0,
    # orders
    "order": 2.0, "orders": 2.5, "ordered": 2.0, "customer": 2.0, "customers": 2.0,
    "shipped": 2.0, "delivered": 2.0, "cancelled": 2.0, "canceled": 2.0, "returned": 1.5,
    "sent back": 2.0, "bestselling": 2.5, "best selling": 2.5, "best-selling": 2.5,
    "sold": 2.0, "sold best": 2.5, "units": 1.5, "purchased": 1.5,
}

BLOG_LEXICON: dict[str, float] = {
    "how to": 2.5, "how do i": 2.5, "how should i": 2.5, "how do you": 2.0, "how can i": 2.0,
    "how often": 2.5, "how formal": 2.0, "should i": 2.0, "supposed to": 1.0, "tips": 2.5,
    "tip": 2.0, "advice": 2.5, "guide": 2.0, "idea": 1.5, "ideas": 1.5, "wear": 2.0,
    "wearing": 2.0, "style": 2.5, "styling": 2.5, "outfit": 2.5, "outfits": 2.5, "look": 1.0,
    "pair": 1.0, "pairing": 2.0, "match": 1.5, "combine": 2.0, "go with": 2.0,
    "goes with": 2.0, "go well": 2.0, "care": 2.5, "care for": 3.0, "look after": 3.0,
    "wash": 3.0, "washing": 3.0, "clean": 2.5, "cleaning": 2.5, "iron": 2.0, "ironing": 2.0,
    "storing": 2.0, "moths": 2.0, "shrink": 2.5, "shrunk": 2.5, "stain": 2.5, "stains": 2.5,
    "marks": 1.5, "pilling": 2.5, "fit": 1.5, "fits": 1.5, "fitting": 1.5, "flattering": 2.5,
    "body type": 2.5, "occasion": 2.0, "wedding": 2.0, "interview": 2.0, "office": 1.5,
    "work": 0.8, "date": 1.0, "party": 1.0, "casual": 1.0, "formal": 1.5, "dress code": 2.5,
    "attire": 2.0, "mean": 1.0, "layer": 2.0, "layering": 2.5, "capsule": 2.5,
    "wardrobe": 2.0, "trend": 2.0, "trends": 2.0, "trending": 2.0, "sustainable": 1.5,
    "last longer": 2.5, "break in": 2.5, "what to wear": 3.0, "difference between": 2.0,
    "why": 1.0, "choose": 1.5, "recommend": 1.0, "best way": 2.0, "worth it": 2.0,
    "is it bad": 2.0, "faulty": 1.5, "season": 1.0, "summer": 0.8, "winter": 0.8,
    "travel": 1.5, "pack": 2.0, "packing": 2.0, "measure": 2.0, "tailor": 2.0,
    "tailoring": 2.0, "colours": 0.5, "colors": 0.5, "between two sizes": 3.0,
    "which size should": 2.5, "what size should": 2.5, "size up": 2.5, "size down": 2.5,
}

ROUTE_BIAS = {"sql": -2.0, "blog": -2.0}
CUE_WEIGHTS = {"entity": 1.0, "size": 1.5, "price": 2.0, "date": 1.0}


def _lexicon_score(text: str, lexicon: dict[str, float]) -> float:
    padded = f" {text} "
    hits = [k for k in lexicon if f" {k} " in padded]
    # A multi-word hit subsumes single-word hits contained in it ("how many" vs "many").
    hits = [k for k in hits if not any(k != o and f" {k} " in f" {o} " for o in hits)]
    return sum(lexicon[k] for k in hits)


def _router_text(question: str) -> str:
    text = question.lower().replace("€", " € ").replace("’", "'")
    text = re.sub(r"[^\w€'\s-]", " ", text)
    return " ".join(text.split())


def catalog_cues(question: str, cat: Catalog) -> dict[str, bool]:
    """Signals that the question is about the catalog rather than about advice."""
    normalised = norm_phrase(question)
    entity = any(contains_phrase(normalised, b) for b in cat.brands) or any(
        contains_phrase(normalised, p) for p in list(cat.products) + list(cat.product_tails)
    )
    lo, hi = find_price_bounds(question)
    month, year, since = find_dates(question)
    return {
        "entity": entity,
        "size": find_size(question, cat) is not None,
        "price": lo is not None or hi is not None,
        "date": bool(month or year or since),
    }


def route(question: str, cat: Catalog) -> RouterStep:
    """Keyword router: a per-route score from lexicon hits and catalog cues, squashed."""
    start = time.perf_counter()
    text = _router_text(question)
    raw = {"sql": _lexicon_score(text, SQL_LEXICON), "blog": _lexicon_score(text, BLOG_LEXICON)}
    for cue, present in catalog_cues(question, cat).items():
        if present:
            raw["sql"] += CUE_WEIGHTS[cue]
    scores = {r: 1.0 / (1.0 + math.exp(-(raw[r] + ROUTE_BIAS[r]))) for r in ("sql", "blog")}
    routes = [r for r in ("sql", "blog") if scores[r] >= 0.5]
    if not routes:
        routes = [max(("blog", "sql"), key=lambda r: scores[r])]
    confidence = math.prod(scores[r] if r in routes else 1.0 - scores[r] for r in scores)
    return RouterStep(
        routes=routes,
        scores={k: round(v, 4) for k, v in scores.items()},
        confidence=round(confidence, 4),
        latency_ms=(time.perf_counter() - start) * 1000.0,
    )
