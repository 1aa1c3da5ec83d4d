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
``answer(case, overrides=...)`` implements evalharness's oracle protocol: a component's output
replaced by the one given (its gold, for the bottleneck report's headroom).

The assistant only ever reads ``case.question``; gold labels and tags are never looked at.
Its mistakes are those of its simple design: keyword routing misses paraphrases, templates
handle one intent with conjunctive filters, bag-of-words retrieval confuses close topics.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from evalharness.models import (
    Case,
    GeneratorStep,
    RetrieverStep,
    RouterStep,
    Text2SQLStep,
    Trace,
    Usage,
)

HERE = Path(__file__).resolve().parent
CATALOG_SQL = HERE / "catalog.sql"
BLOG_CHUNKS = HERE / "blog_chunks.jsonl"

TOP_K = 5
MAX_ROWS = 50

# ----------------------------------------------------------------------------------------------
# Text utilities
# ----------------------------------------------------------------------------------------------

_WORD_RE = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
_LLM_TOKEN_RE = re.compile(r"\w+|[^\w\s]")

STOPWORDS = frozenset(
    """a an the and or but if of to in on at by for with from about as into over under is are
    was were be been being do does did i me my you your we our it its this that these those
    what which who whom how when where why can could should would will shall may might must
    have has had there their they them so than then too very just any some all also not no
    get got up out one s t i'm i'd it's what's""".split()
)

IRREGULAR_PLURALS = {"scarves": "scarf", "knives": "knife", "shelves": "shelf", "wolves": "wolf"}


def approx_tokens(text: str) -> int:
    """Approximate LLM token count: words and punctuation marks."""
    return len(_LLM_TOKEN_RE.findall(text))


def words(text: str) -> list[str]:
    """Lower-cased word tokens (apostrophes kept inside words)."""
    return [w.replace("’", "'") for w in _WORD_RE.findall(text.lower().replace("’", "'"))]


def stem(word: str) -> str:
    """A very light suffix stripper: plurals, -ing/-ed, a final -e and doubled consonants."""
    w = IRREGULAR_PLURALS.get(word, word)
    if len(w) <= 3:
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "shes", "ches", "xes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    stripped = False
    if w.endswith("ing") and len(w) > 5:
        w, stripped = w[:-3], True
    elif w.endswith("ed") and len(w) > 4:
        w, stripped = w[:-2], True
    if stripped and len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


def content_terms(text: str) -> list[str]:
    """Stemmed, stop-word-free terms used by the retriever and sentence scorer."""
    out = []
    for w in words(text):
        w = w.removesuffix("'s")
        if w not in STOPWORDS and len(w) > 1:
            out.append(stem(w))
    return out


def singular(word: str) -> str:
    """Singular form of a simple English plural (``dresses`` -> ``dress``)."""
    if word in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[word]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us")) and len(word) > 3:
        return word[:-1]
    return word


def norm_phrase(text: str) -> str:
    """Lower-case words joined by single spaces, each made singular."""
    return " ".join(singular(w) for w in words(text))


def contains_phrase(haystack: str, phrase: str) -> bool:
    """Whether ``phrase`` occurs in ``haystack`` on word boundaries (both normalised)."""
    return bool(phrase) and f" {phrase} " in f" {haystack} "


_UNITS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
    "ninety": 90,
}
_NUMBER_WORDS_RE = re.compile(
    r"\b(?:(a|one|two|three|four|five)\s+hundred(?:\s+and)?(?:\s+(twenty|thirty|forty|fifty|"
    r"sixty|seventy|eighty|ninety))?|(twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)"
    r"(?:[\s-](one|two|three|four|five|six|seven|eight|nine))?|(ten|eleven|twelve|fifteen))\b",
    re.I,
)


def numbers_as_digits(text: str) -> str:
    """Spell-out amounts as digits: "a hundred" -> "100", "thirty-five" -> "35"."""

    def repl(m: re.Match[str]) -> str:
        hundreds, hundred_tens, tens, units, small = (g.lower() if g else g for g in m.groups())
        if hundreds:
            value = (1 if hundreds == "a" else _UNITS[hundreds]) * 100
            return str(value + (_UNITS[hundred_tens] if hundred_tens else 0))
        if tens:
            return str(_UNITS[tens] + (_UNITS[units] if units else 0))
        return str(_UNITS[small])

    return _NUMBER_WORDS_RE.sub(repl, text)


# ----------------------------------------------------------------------------------------------
# Catalog (SQLite) and its vocabulary
# ----------------------------------------------------------------------------------------------

# User words -> candidate catalog category names (the first one that exists is used).
CATEGORY_SYNONYMS: dict[str, list[str]] = {
    "trainer": ["sneaker", "trainer", "shoe"],
    "sneaker": ["sneaker", "trainer", "shoe"],
    "running shoe": ["sneaker", "trainer", "shoe"],
    "kick": ["sneaker", "trainer"],
    "pant": ["trouser", "pant", "chino"],
    "slack": ["trouser", "pant"],
    "trouser": ["trouser", "pant"],
    "chino": ["chino", "trouser", "pant"],
    "jumper": ["sweater", "knitwear", "jumper"],
    "pullover": ["sweater", "knitwear", "jumper"],
    "sweater": ["sweater", "knitwear", "jumper"],
    "cardigan": ["cardigan", "knitwear", "sweater"],
    "knit": ["knitwear", "sweater"],
    "knitwear": ["knitwear", "sweater"],
    "tee": ["t-shirt", "tshirt", "t shirt", "top"],
    "t shirt": ["t-shirt", "tshirt", "t shirt", "top"],
    "tshirt": ["t-shirt", "tshirt", "t shirt", "top"],
    "jean": ["jean", "denim"],
    "coat": ["coat", "jacket", "outerwear"],
    "jacket": ["jacket", "coat", "outerwear"],
    "parka": ["coat", "jacket", "outerwear"],
    "blazer": ["blazer", "jacket", "suit"],
    "boot": ["boot", "shoe"],
    "heel": ["heel", "shoe"],
    "sandal": ["sandal", "shoe"],
    "loafer": ["loafer", "shoe"],
    "footwear": ["shoe", "sneaker", "boot"],
    "shoe": ["shoe", "footwear"],
    "frock": ["dress"],
    "gown": ["dress"],
    "handbag": ["bag", "accessory"],
    "purse": ["bag", "accessory"],
    "backpack": ["bag", "accessory"],
    "tote": ["bag", "accessory"],
    "clutch": ["bag", "accessory"],
    "hat": ["hat", "accessory"],
    "cap": ["hat", "cap", "accessory"],
    "belt": ["belt", "accessory"],
    "blouse": ["blouse", "shirt", "top"],
    "top": ["top", "shirt"],
    "hoodie": ["hoodie", "sweatshirt", "sweater"],
    "sweatshirt": ["sweatshirt", "hoodie", "sweater"],
    "swimsuit": ["swimwear", "swimsuit"],
}

COLOUR_SYNONYMS: dict[str, str] = {
    "gray": "grey",
    "navy blue": "navy",
    "dark gray": "charcoal",
    "maroon": "burgundy",
}

GENDER_WORDS: dict[str, list[str]] = {
    "men": ["men", "man", "male", "mens", "men's", "gentlemen", "menswear"],
    "women": ["women", "woman", "female", "womens", "women's", "ladies", "lady", "womenswear"],
    "unisex": ["unisex"],
    "kids": ["kids", "kid", "children", "child", "boys", "girls"],
}

SIZE_WORDS: dict[str, str] = {
    "extra small": "XS", "small": "S", "medium": "M", "large": "L", "extra large": "XL",
}

NATIONALITIES: dict[str, str] = {
    "british": "United Kingdom", "english": "United Kingdom", "uk": "United Kingdom",
    "scottish": "United Kingdom", "french": "France", "american": "United States",
    "us": "United States", "usa": "United States", "portuguese": "Portugal",
    "norwegian": "Norway", "italian": "Italy", "german": "Germany", "swedish": "Sweden",
    "japanese": "Japan", "dutch": "Netherlands", "spanish": "Spain", "danish": "Denmark",
}

# Words customers use for an order status -> the status word to look up in the catalog.
STATUS_SYNONYMS: dict[str, str] = {
    "sent back": "returned", "send back": "returned", "return": "returned",
    "returned": "returned", "canceled": "cancelled", "cancelled": "cancelled",
    "cancel": "cancelled", "shipped": "shipped", "dispatched": "shipped",
    "delivered": "delivered", "pending": "pending", "refunded": "refunded",
}

MONTHS = {
    m: i + 1
    for i, m in enumerate(
        "january february march april may june july august september october november "
        "december".split()
    )
}
MONTHS.update({k[:3]: v for k, v in list(MONTHS.items()) if k != "may"})


@dataclass
class Catalog:
    """The in-memory database plus the vocabularies read from it."""

    conn: sqlite3.Connection
    lock: threading.Lock
    schema: str
    categories: dict[str, str]  # normalised name -> name as stored
    brands: dict[str, str]
    countries: dict[str, str]
    colours: dict[str, str]
    materials: dict[str, str]
    genders: dict[str, str]  # canonical key (men/women/...) -> stored value
    sizes: list[str]
    statuses: dict[str, str]
    products: dict[str, str]  # normalised product name -> stored name
    product_tails: dict[str, str]  # unambiguous trailing words of a name -> stored name

    def run(self, sql: str) -> tuple[list[str], list[list[Any]]]:
        """Execute ``sql`` on the shared connection (serialised by a lock)."""
        with self.lock:
            cur = self.conn.execute(sql)
            columns = [d[0] for d in cur.description or []]
            rows = [list(r) for r in cur.fetchall()]
        return columns, rows


def _distinct(conn: sqlite3.Connection, sql: str) -> list[str]:
    try:
        return [str(r[0]) for r in conn.execute(sql).fetchall() if r[0] is not None]
    except sqlite3.Error:
        return []


def _gender_map(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        for key, forms in GENDER_WORDS.items():
            if value.lower() in forms:
                out.setdefault(key, value)
    return out


def _product_tails(names: list[str], reserved: set[str]) -> dict[str, str]:
    """Trailing word sequences (2+ words) of product names that point at one name only.

    "Packable Down Jacket" -> "down jacket"; phrases made only of category, colour or
    material words ("wool trouser"), or that end two different names, are dropped."""
    owners: dict[str, set[str]] = {}
    for name in names:
        parts = norm_phrase(name).split()
        for i in range(1, len(parts) - 1):
            owners.setdefault(" ".join(parts[i:]), set()).add(name)
    return {
        tail: next(iter(names_))
        for tail, names_ in owners.items()
        if len(names_) == 1 and not all(w in reserved for w in tail.split())
    }


def build_catalog(path: Path = CATALOG_SQL) -> Catalog:
    """Load ``catalog.sql`` into an in-memory SQLite database and read its vocabularies."""
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.executescript(path.read_text(encoding="utf-8"))
    schema = "\n".join(
        r[0]
        for r in conn.execute("SELECT sql FROM sqlite_master WHERE type='table' ORDER BY name")
        if r[0]
    )

    def vocab(sql: str) -> dict[str, str]:
        return {norm_phrase(v): v for v in _distinct(conn, sql) if norm_phrase(v)}

    categories = vocab("SELECT name FROM categories")
    colours = vocab("SELECT DISTINCT colour FROM products")
    materials = vocab("SELECT DISTINCT material FROM products")
    names = _distinct(conn, "SELECT DISTINCT name FROM products")
    return Catalog(
        conn=conn,
        lock=threading.Lock(),
        schema=schema,
        categories=categories,
        brands=vocab("SELECT name FROM brands"),
        countries=vocab("SELECT DISTINCT country FROM brands"),
        colours=colours,
        materials=materials,
        genders=_gender_map(_distinct(conn, "SELECT DISTINCT gender FROM products")),
        sizes=_distinct(conn, "SELECT DISTINCT size FROM product_sizes"),
        statuses=vocab("SELECT DISTINCT status FROM orders"),
        products={norm_phrase(n): n for n in names},
        product_tails=_product_tails(
            names, {w for v in (*categories, *colours, *materials) for w in v.split()}
        ),
    )


# ----------------------------------------------------------------------------------------------
# Blog corpus and TF-IDF index
# ----------------------------------------------------------------------------------------------


@dataclass
class Corpus:
    """The blog chunks and a TF-IDF index over their title and text."""

    ids: list[str]
    titles: list[str]
    texts: list[str]
    vocab: dict[str, int]
    idf: np.ndarray
    matrix: np.ndarray  # (n_chunks, n_terms), rows L2-normalised

    def vector(self, text: str) -> np.ndarray:
        """L2-normalised TF-IDF vector of ``text`` (unknown terms are dropped)."""
        vec = np.zeros(len(self.vocab))
        for term, tf in Counter(content_terms(text)).items():
            j = self.vocab.get(term)
            if j is not None:
                vec[j] = (1.0 + math.log(tf)) * self.idf[j]
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm > 0 else vec


def build_corpus(path: Path = BLOG_CHUNKS) -> Corpus:
    """Read the blog chunks and index them with sublinear TF and smoothed IDF."""
    lines = path.read_text(encoding="utf-8").splitlines()
    chunks = [json.loads(line) for line in lines if line.strip()]
    ids = [str(c["id"]) for c in chunks]
    titles = [str(c.get("title", "")) for c in chunks]
    texts = [str(c.get("text", "")) for c in chunks]
    docs = [Counter(content_terms(f"{t}. {x}")) for t, x in zip(titles, texts, strict=True)]
    vocab = {t: i for i, t in enumerate(sorted({t for d in docs for t in d}))}
    df = np.zeros(len(vocab))
    for d in docs:
        for t in d:
            df[vocab[t]] += 1
    n = len(docs)
    idf = np.log((1 + n) / (1 + df)) + 1.0
    matrix = np.zeros((n, len(vocab)))
    for i, d in enumerate(docs):
        for t, tf in d.items():
            matrix[i, vocab[t]] = (1.0 + math.log(tf)) * idf[vocab[t]]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms > 0, norms, 1.0)
    return Corpus(ids, titles, texts, vocab, idf, matrix)


_LOCK = threading.Lock()
_CATALOG: Catalog | None = None
_CORPUS: Corpus | None = None


def catalog() -> Catalog:
    """The shared catalog, built on first use."""
    global _CATALOG
    with _LOCK:
        if _CATALOG is None:
            _CATALOG = build_catalog()
        return _CATALOG


def corpus() -> Corpus:
    """The shared blog index, built on first use."""
    global _CORPUS
    with _LOCK:
        if _CORPUS is None:
            _CORPUS = build_corpus()
        return _CORPUS


# ----------------------------------------------------------------------------------------------
# Router
# ----------------------------------------------------------------------------------------------

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


# ----------------------------------------------------------------------------------------------
# Text-to-SQL: slot extraction
# ----------------------------------------------------------------------------------------------

_NUM = r"(\d+(?:[.,]\d{1,2})?)"
_CUR = r"\s*(?:€|eur\b|euros?\b|dollars?\b|\$)?"


@dataclass
class Slots:
    """What the text-to-SQL step understood from a question."""

    intent: str = "list"
    category: str | None = None
    colour: str | None = None
    brand: str | None = None
    country: str | None = None
    material: str | None = None
    material_like: str | None = None  # a word of a material name ("organic")
    gender: str | None = None
    size: str | None = None
    product: str | None = None
    min_price: float | None = None
    max_price: float | None = None
    max_inclusive: bool = True
    status: str | None = None
    month: str | None = None  # 'YYYY-MM', or '%-MM' when no year is given
    year: str | None = None
    since: str | None = None  # 'YYYY-MM-DD'
    in_stock: bool = False
    group_by: str | None = None  # "brand" | "category"


def find_vocab(normalised: str, vocab: dict[str, str]) -> str | None:
    """The longest vocabulary entry occurring in the normalised question."""
    for key in sorted(vocab, key=lambda k: (-len(k), k)):
        if contains_phrase(normalised, key):
            return vocab[key]
    return None


def find_category(normalised: str, cat: Catalog) -> str | None:
    """A catalog category named directly or through a synonym (longest phrase wins)."""
    candidates: list[tuple[int, int, str]] = []
    for key, name in cat.categories.items():
        pos = f" {normalised} ".find(f" {key} ")
        if pos >= 0:
            candidates.append((pos, -len(key), name))
    for word, targets in CATEGORY_SYNONYMS.items():
        pos = f" {normalised} ".find(f" {word} ")
        if pos < 0:
            continue
        for target in targets:
            name = cat.categories.get(norm_phrase(target))
            if name:
                candidates.append((pos, -len(word), name))
                break
    if not candidates:
        return None
    # The first category mentioned; at equal position the longer phrase ("t shirt" > "shirt").
    return min(candidates)[2]


def find_colour(normalised: str, cat: Catalog) -> str | None:
    """A catalog colour, directly or through a synonym."""
    direct = find_vocab(normalised, cat.colours)
    if direct:
        return direct
    for word, target in COLOUR_SYNONYMS.items():
        if contains_phrase(normalised, word) and target in cat.colours:
            return cat.colours[target]
    return None


def find_material(normalised: str, cat: Catalog) -> tuple[str | None, str | None]:
    """A full material name, or else a distinctive word of one (used with LIKE)."""
    full = find_vocab(normalised, cat.materials)
    if full:
        return full, None
    tokens = set(normalised.split())
    for key in sorted(cat.materials):
        for word in key.split():
            if len(word) > 3 and word in tokens and word not in cat.colours:
                return None, word
    return None, None


def find_gender(question: str, cat: Catalog) -> str | None:
    """The gender a question asks for (``men's``, ``for women`` ...)."""
    tokens = set(words(question))
    for key, forms in GENDER_WORDS.items():
        if key in cat.genders and tokens & set(forms):
            return cat.genders[key]
    return None


def find_country(question: str, cat: Catalog) -> str | None:
    """A brand country, named or as a nationality adjective."""
    normalised = norm_phrase(question)
    direct = find_vocab(normalised, cat.countries)
    if direct:
        return direct
    tokens = set(words(question))
    for adjective, country in NATIONALITIES.items():
        if adjective in tokens and norm_phrase(country) in cat.countries:
            return cat.countries[norm_phrase(country)]
    return None


def find_size(question: str, cat: Catalog) -> str | None:
    """A size the catalog knows: "size M", "in a 42", "a 32 waist", "in a medium", "XL"."""
    text = numbers_as_digits(question)
    sizes = {s.lower(): s for s in cat.sizes}
    patterns = [
        r"\bsize\s+([a-z0-9.]+)\b",
        r"\bin\s+(?:an?\s+)?(\d{1,2}(?:\.5)?|xxs|xs|s|m|l|xl|xxl|xxxl)\b(?!\s*(?:€|eur|euro|%))",
        r"\b(\d{2})(?:\s*-?\s*inch)?\s+waist\b",
    ]
    for pattern in patterns:
        m = re.search(pattern, text, re.I)
        if m and m.group(1).lower() in sizes:
            return sizes[m.group(1).lower()]
    words_re = "extra small|extra large|small|medium|large"
    m = re.search(rf"\b(?:in|size)\s+(?:an?\s+)?({words_re})\b", text, re.I)
    if m and SIZE_WORDS[m.group(1).lower()].lower() in sizes:
        return sizes[SIZE_WORDS[m.group(1).lower()].lower()]
    for token in re.findall(r"\b(XXS|XS|XXL|XXXL|XL)\b", question):
        if token.lower() in sizes:
            return sizes[token.lower()]
    return None


def _price(text: str) -> float:
    return float(text.replace(",", "."))


def find_price_bounds(question: str) -> tuple[float | None, float | None]:
    """Lower and upper price bounds ("under 60", "between 50 and 80", "over a hundred")."""
    lo, hi, _ = _price_bounds(question)
    return lo, hi


def _price_bounds(question: str) -> tuple[float | None, float | None, bool]:
    text = numbers_as_digits(question.lower())
    m = re.search(rf"between\s*€?\s*{_NUM}{_CUR}\s*(?:and|-|to)\s*€?\s*{_NUM}", text)
    if m:
        a, b = sorted((_price(m.group(1)), _price(m.group(2))))
        return a, b, True
    lo: float | None = None
    hi: float | None = None
    inclusive = True
    m = re.search(rf"(under|below|less than|cheaper than|up to|at most|no more than|max(?:imum)?)"
                  rf"\s*€?\s*{_NUM}(?!\s*(?:%|cm|inch|waist))", text)
    if m:
        hi = _price(m.group(2))
        inclusive = m.group(1) in {"up to", "at most", "no more than", "max", "maximum"}
    m = re.search(rf"(?:over|above|more than|at least|upwards of|min(?:imum)?)\s*€?\s*{_NUM}"
                  r"(?!\s*(?:%|cm|inch|waist|wears|times|years|months|days))", text)
    if m:
        lo = _price(m.group(1))
    return lo, hi, inclusive


def find_dates(question: str) -> tuple[str | None, str | None, str | None]:
    """(month 'YYYY-MM' or '%-MM', year, since 'YYYY-MM-DD') mentioned in the question."""
    text = question.lower()
    year_m = re.search(r"\b(20\d\d)\b", text)
    year = year_m.group(1) if year_m else None
    month: str | None = None
    m = re.search(r"\b(20\d\d)-(\d{2})\b", text)
    if m:
        month = f"{m.group(1)}-{m.group(2)}"
    else:
        for name, number in sorted(MONTHS.items(), key=lambda kv: (-len(kv[0]), kv[0])):
            may_as_month = r"\b(?:in|of|since|after) may\b|\bmay 20\d\d\b"
            if name == "may" and not re.search(may_as_month, text):
                continue
            if re.search(rf"\b{name}\b", text):
                month = f"{year}-{number:02d}" if year else f"%-{number:02d}"
                break
    since: str | None = None
    anchor = r"\b(?:since|after|from)\s+(?:the\s+)?(?:(?:start|beginning)\s+of\s+)?"
    month_names = "|".join(sorted(MONTHS, key=len, reverse=True))
    if re.search(anchor + rf"(?:(?:{month_names})\b|20\d\d\b)", text) and (month or year):
        if month and "%" not in month:
            since = f"{month}-01"
        elif year and not month:
            since = f"{year}-01-01"
        if since:
            month = None
            year = None
    return month, year, since


def find_status(question: str, cat: Catalog) -> str | None:
    """An order status, directly or through a customer word ("sent back" -> returned)."""
    text = " " + " ".join(words(question)) + " "
    for word in sorted(STATUS_SYNONYMS, key=lambda w: (-len(w), w)):
        if f" {word} " in text:
            status = STATUS_SYNONYMS[word]
            if status in cat.statuses:
                return cat.statuses[status]
    return None


# (intent, pattern) pairs, tried in order on " lower-cased words of the question ".
INTENT_PATTERNS: list[tuple[str, str]] = [
    ("best_seller", r" (best ?selling|bestsellers?|best sellers?|most popular|top selling) "),
    ("best_seller", r" (sold (the )?most|sold best|sells best) "),
    ("best_seller", r" (sent back|returned|cancelled|canceled) (the )?most "),
    ("best_seller", r" most (often )?(returned|sent back|cancelled) "),
    ("revenue", r" (revenue|turnover|total sales|takings) "),
    ("count_orders", r" (how many|number of|count) (\w+ )?orders? "),
    ("list_orders", r" (which|what|list|show)( \w+)* orders? "),
    ("count_by", r" (each|per|every) (brand|category) | by (brand|category) "),
    ("top_group", r" which (brand|category) (has|carries|sells|offers|makes) (the )?most "),
    ("average_price", r" (average|(mean|typical) (price|cost)) "),
    ("sold_out", r" (sold out|out of stock) "),
    ("sizes", r" (what|which) sizes | sizes (does|do|is|are|available|can) | come in "),
    ("stock_units", r" (how many|number of) (\w+ )?(units|pairs|pieces) (are )?(left|in stock)"),
    ("count", r" (how many|number of|count) "),
    ("cheapest", r" (cheapest|least expensive|lowest price|lowest priced|most affordable) "),
    ("most_expensive", r" (most expensive|priciest|highest price|highest priced|dearest) "),
    ("newest", r" (what's new|new in|newest|latest|most recent|recently added|new arrivals?) "),
    ("brands", r" (which|what) (of your )?brands? "),
    ("price_of", r" (how much|price of|cost of) "),
]


def detect_intent(question: str) -> str:
    """The query template the question asks for (``list`` when no pattern matches)."""
    q = " " + " ".join(words(question)) + " "
    for intent, pattern in INTENT_PATTERNS:
        if re.search(pattern, q):
            return intent
    return "list"


def _drop_slots_named_by_product(slots: Slots, product: str) -> None:
    """A product name pins the slots whose words it contains ("Cashmere Scarf")."""
    name = norm_phrase(product)
    for attr in ("category", "colour", "material", "material_like"):
        value = getattr(slots, attr)
        if value is None:
            continue
        words_of_value = norm_phrase(value).split()
        if any(contains_phrase(name, w) for w in words_of_value) or attr == "category":
            setattr(slots, attr, None)


AVAILABILITY = r" (in stock|available|availability|still|left|can i get|have you got|do you have) "


def extract_slots(question: str, cat: Catalog) -> Slots:
    """Fill every slot the question mentions (vocabularies come from the catalog)."""
    normalised = norm_phrase(question)
    text = " " + " ".join(words(question)) + " "
    slots = Slots(intent=detect_intent(question))
    slots.product = find_vocab(normalised, cat.products) or find_vocab(
        normalised, cat.product_tails
    )
    slots.brand = find_vocab(normalised, cat.brands)
    slots.country = find_country(question, cat)
    slots.category = find_category(normalised, cat)
    slots.colour = find_colour(normalised, cat)
    slots.material, slots.material_like = find_material(normalised, cat)
    slots.gender = find_gender(question, cat)
    slots.size = find_size(question, cat)
    slots.min_price, slots.max_price, slots.max_inclusive = _price_bounds(question)
    slots.month, slots.year, slots.since = find_dates(question)
    slots.in_stock = bool(re.search(AVAILABILITY, text))
    if slots.intent in {"best_seller", "count_orders", "list_orders", "revenue"}:
        slots.status = find_status(question, cat)
    grouped = re.search(r" (each|per|every|by|which) (brand|category) ", text)
    if grouped:
        slots.group_by = grouped.group(2)
    if slots.product:
        _drop_slots_named_by_product(slots, slots.product)
    return slots


# ----------------------------------------------------------------------------------------------
# Text-to-SQL: templates
# ----------------------------------------------------------------------------------------------

PRODUCT_FROM = (
    "FROM products p JOIN brands b ON b.brand_id = p.brand_id "
    "JOIN categories c ON c.category_id = p.category_id"
)
SIZES_JOIN = " JOIN product_sizes s ON s.product_id = p.product_id"
PRODUCT_COLUMNS = "p.name, b.name AS brand, p.colour, p.price"


def lit(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _num(value: float) -> str:
    return f"{value:g}"


def product_filters(s: Slots) -> list[str]:
    """WHERE conditions on the product attributes of the filled slots (not size or stock)."""
    where: list[str] = []
    if s.product:
        where.append(f"p.name = {lit(s.product)}")
    if s.category:
        where.append(f"c.name = {lit(s.category)}")
    if s.brand:
        where.append(f"b.name = {lit(s.brand)}")
    if s.country:
        where.append(f"b.country = {lit(s.country)}")
    if s.colour:
        where.append(f"p.colour = {lit(s.colour)}")
    if s.material:
        where.append(f"p.material = {lit(s.material)}")
    if s.material_like:
        where.append(f"p.material LIKE {lit('%' + s.material_like + '%')}")
    if s.gender:
        where.append(f"p.gender = {lit(s.gender)}")
    if s.min_price is not None:
        where.append(f"p.price >= {_num(s.min_price)}")
    if s.max_price is not None:
        where.append(f"p.price {'<=' if s.max_inclusive else '<'} {_num(s.max_price)}")
    if s.since:
        where.append(f"p.created_at >= {lit(s.since)}")
    return where


IN_STOCK = "p.product_id IN (SELECT ps.product_id FROM product_sizes ps WHERE ps.stock > 0)"


def stock_filters(s: Slots) -> tuple[str, str, list[str]]:
    """(extra columns, extra join, conditions) for the size / availability slots.

    A size joins ``product_sizes`` (one row per product in that size, with its stock); a bare
    availability question ("do you still have ...") keeps products with any size in stock."""
    if s.size:
        return ", s.stock", SIZES_JOIN, [f"s.size = {lit(s.size)}", "s.stock > 0"]
    if s.in_stock:
        return "", "", [IN_STOCK]
    return "", "", []


def _where(conditions: list[str]) -> str:
    return (" WHERE " + " AND ".join(conditions)) if conditions else ""


def order_filters(s: Slots) -> list[str]:
    """WHERE conditions on orders (status, month, year, since)."""
    where: list[str] = []
    if s.status:
        where.append(f"o.status = {lit(s.status)}")
    if s.month and "%" in s.month:
        where.append(f"strftime('%m', o.ordered_at) = {lit(s.month[-2:])}")
    elif s.month:
        where.append(f"strftime('%Y-%m', o.ordered_at) = {lit(s.month)}")
    elif s.year:
        where.append(f"strftime('%Y', o.ordered_at) = {lit(s.year)}")
    if s.since:
        where.append(f"o.ordered_at >= {lit(s.since)}")
    return where


def _sizes_sql(s: Slots) -> str:
    where = product_filters(s) + ["s.stock > 0"]
    return (
        f"SELECT s.size, SUM(s.stock) AS stock {PRODUCT_FROM}{SIZES_JOIN}{_where(where)} "
        "GROUP BY s.size ORDER BY CAST(s.size AS INTEGER), s.size"
    )


def _best_seller_sql(s: Slots) -> str:
    # A "since" date is about the orders here, not about when products were added.
    where = product_filters(replace(s, since=None)) + order_filters(s)
    return (
        "SELECT p.name, p.colour, SUM(oi.quantity) AS units FROM order_items oi "
        "JOIN orders o ON o.order_id = oi.order_id "
        "JOIN products p ON p.product_id = oi.product_id "
        "JOIN brands b ON b.brand_id = p.brand_id "
        f"JOIN categories c ON c.category_id = p.category_id{_where(where)} "
        "GROUP BY p.product_id ORDER BY units DESC, p.name LIMIT 1"
    )


def _group_sql(s: Slots, top: bool) -> str:
    key = "c.name" if s.group_by == "category" else "b.name"
    if s.group_by == "category":
        s = replace(s, category=None)
    _, join, stock = stock_filters(s)
    where = product_filters(s) + stock
    order = " ORDER BY n DESC, 1 LIMIT 1" if top else " ORDER BY n DESC, 1"
    return (
        f"SELECT {key}, COUNT(DISTINCT p.product_id) AS n {PRODUCT_FROM}{join}{_where(where)} "
        f"GROUP BY {key}{order}"
    )


def _orders_sql(s: Slots) -> str | None:
    where = _where(order_filters(s))
    if s.intent == "count_orders":
        return f"SELECT COUNT(*) FROM orders o{where}"
    if s.intent == "list_orders":
        return (
            f"SELECT o.order_id, o.ordered_at, o.status FROM orders o{where} "
            "ORDER BY o.ordered_at"
        )
    if s.intent == "revenue":
        return (
            "SELECT ROUND(SUM(oi.quantity * oi.unit_price), 2) AS revenue, "
            "COUNT(DISTINCT o.order_id) AS n_orders FROM orders o "
            f"JOIN order_items oi ON oi.order_id = o.order_id{where}"
        )
    if s.intent == "best_seller":
        return _best_seller_sql(s)
    return None


def _brands_sql(s: Slots) -> str:
    if s.country and not any(
        (s.category, s.colour, s.material, s.material_like, s.gender, s.size, s.product)
    ):
        return f"SELECT b.name FROM brands b WHERE b.country = {lit(s.country)} ORDER BY b.name"
    _, join, stock = stock_filters(s)
    where = product_filters(s) + stock
    return f"SELECT DISTINCT b.name {PRODUCT_FROM}{join}{_where(where)} ORDER BY b.name"


def build_sql(s: Slots) -> str:
    """Fill the template of the slots' intent."""
    intent = s.intent
    orders = _orders_sql(s)
    if orders:
        return orders
    if intent == "sizes":
        return _sizes_sql(s)
    if intent in {"count_by", "top_group"}:
        return _group_sql(s, top=intent == "top_group")
    if intent == "brands":
        return _brands_sql(s)
    if intent == "sold_out":
        where = product_filters(s) + [f"p.product_id NOT {IN_STOCK[len('p.product_id '):]}"]
        return f"SELECT p.name, p.colour {PRODUCT_FROM}{_where(where)} ORDER BY p.name"
    extra, join, stock = stock_filters(s)
    from_where = f"{PRODUCT_FROM}{join}{_where(product_filters(s) + stock)}"
    if intent == "count":
        return f"SELECT COUNT(DISTINCT p.product_id) {from_where}"
    if intent == "average_price":
        return f"SELECT ROUND(AVG(p.price), 2) AS avg_price, COUNT(*) AS n {from_where}"
    if intent == "stock_units":
        where = product_filters(s) + ([f"s.size = {lit(s.size)}"] if s.size else [])
        return f"SELECT SUM(s.stock) {PRODUCT_FROM}{SIZES_JOIN}{_where(where)}"
    if intent in {"cheapest", "most_expensive"}:
        direction = "ASC" if intent == "cheapest" else "DESC"
        return (
            f"SELECT {PRODUCT_COLUMNS}{extra} {from_where} "
            f"ORDER BY p.price {direction}, p.name LIMIT 1"
        )
    if intent == "newest":
        limit = "" if s.since else " LIMIT 10"
        return (
            f"SELECT p.name, p.colour, p.price, p.created_at{extra} {from_where} "
            f"ORDER BY p.created_at DESC, p.name{limit}"
        )
    return f"SELECT {PRODUCT_COLUMNS}{extra} {from_where} ORDER BY p.price, p.name"


@lru_cache(maxsize=8)
def _schema_tokens(schema: str) -> int:
    """``approx_tokens`` of the schema, which every text-to-SQL prompt includes."""
    return approx_tokens(schema)


def text_to_sql(
    question: str, cat: Catalog, *, drop_filter: bool = False
) -> tuple[Text2SQLStep, Slots]:
    """Extract slots, fill a template, run it (``drop_filter``: the ``text2sql`` fault)."""
    start = time.perf_counter()
    slots = extract_slots(question, cat)
    if drop_filter:
        slots = drop_one_filter(slots)
    sql = build_sql(slots)
    columns: list[str] | None = None
    rows: list[list[Any]] | None = None
    error: str | None = None
    try:
        columns, all_rows = cat.run(sql)
        rows = all_rows[:MAX_ROWS]
    except sqlite3.Error as exc:
        error = f"{type(exc).__name__}: {exc}"
    usage = Usage(
        prompt_tokens=approx_tokens(question) + _schema_tokens(cat.schema),
        completion_tokens=approx_tokens(sql),
    )
    step = Text2SQLStep(
        sql=sql,
        columns=columns,
        rows=rows,
        error=error,
        usage=usage,
        latency_ms=(time.perf_counter() - start) * 1000.0,
    )
    return step, slots


# ----------------------------------------------------------------------------------------------
# Retriever
# ----------------------------------------------------------------------------------------------


def expand_query(question: str) -> str:
    """The question plus the catalog word for any category synonym it uses (jumper -> sweater)."""
    normalised = norm_phrase(question)
    extra = [
        targets[0]
        for word, targets in CATEGORY_SYNONYMS.items()
        if contains_phrase(normalised, word) and targets[0] != word
    ]
    return " ".join([question, *extra])


def retrieve(question: str, corp: Corpus, k: int = TOP_K) -> RetrieverStep:
    """Top-k chunks by cosine similarity of TF-IDF vectors."""
    start = time.perf_counter()
    return top_k(corp.matrix @ corp.vector(expand_query(question)), corp, k, start)


def top_k(sims: np.ndarray, corp: Corpus, k: int, start: float) -> RetrieverStep:
    """The step of the ``k`` chunks with the highest similarity (ties by chunk id), timed
    from ``start``."""
    order = sorted(range(len(corp.ids)), key=lambda i: (-round(float(sims[i]), 12), corp.ids[i]))
    order = order[:k]
    return RetrieverStep(
        ids=[corp.ids[i] for i in order],
        texts=[corp.texts[i] for i in order],
        scores=[round(float(sims[i]), 6) for i in order],
        latency_ms=(time.perf_counter() - start) * 1000.0,
    )


# ----------------------------------------------------------------------------------------------
# Generator
# ----------------------------------------------------------------------------------------------

_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")


def sentence_vector(corp: Corpus, sentence: str) -> np.ndarray:
    """``corp.vector(sentence)`` for a sentence of a chunk, computed once per sentence and
    corpus (the corpus has a few hundred; every blog answer scores those of its top chunks)."""
    known: dict[str, np.ndarray] = corp.__dict__.setdefault("_sentence_vectors", {})
    vec = known.get(sentence)
    if vec is None:
        vec = corp.vector(sentence)
        vec.flags.writeable = False
        if len(known) < 8192:
            known[sentence] = vec
    return vec


def fmt_value(value: Any) -> str:
    """Floats with two decimals (prices), everything else as text."""
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def render_rows(columns: list[str], rows: list[list[Any]]) -> list[str]:
    """One ``col: value; ...`` line per row (the SQL context as the generator sees it)."""
    return [
        "; ".join(f"{c}: {fmt_value(v)}" for c, v in zip(columns, row, strict=False))
        for row in rows
    ]


def _product_phrase(row: dict[str, Any]) -> str:
    text = str(row.get("name", ""))
    if row.get("colour"):
        text = f"{row['colour']} {text}"
    if row.get("brand"):
        text += f" by {row['brand']}"
    details = [f"{fmt_value(row['price'])} €"] if "price" in row else []
    if "stock" in row:
        details.append(f"{row['stock']} in stock in that size")
    return text + (f" ({', '.join(details)})" if details else "")


def sql_sentence(slots: Slots, step: Text2SQLStep) -> str:
    """A templated sentence stating the SQL result."""
    if step.error or step.rows is None:
        return "I could not look that up in the catalog."
    if not step.rows or all(v is None for v in step.rows[0]):
        return "I found nothing in the catalog matching that."
    columns = step.columns or []
    first = [fmt_value(v) for v in step.rows[0]]
    rows = [dict(zip(columns, r, strict=False)) for r in step.rows]
    intent = slots.intent
    templates = {
        "count": "We have {0} matching products.",
        "count_orders": "There were {0} matching orders.",
        "average_price": "The average price is {0} € across {1} products.",
        "revenue": "The revenue was {0} € from {1} orders.",
        "stock_units": "There are {0} units in stock.",
        "best_seller": "The top product is the {1} {0} with {2} units.",
        "top_group": "{0} has the most, with {1}.",
    }
    if intent in templates:
        return templates[intent].format(*first)
    if intent in {"cheapest", "most_expensive"}:
        label = "cheapest" if intent == "cheapest" else "most expensive"
        return f"The {label} is the {_product_phrase(rows[0])}."
    if intent == "sizes":
        return "In stock in sizes: " + ", ".join(f"{r[0]} ({r[1]})" for r in step.rows) + "."
    if intent == "brands":
        return "Brands: " + ", ".join(str(r[0]) for r in step.rows) + "."
    if intent == "count_by":
        return "; ".join(f"{r[0]}: {r[1]}" for r in step.rows) + "."
    if intent == "list_orders":
        ids = ", ".join(str(r[0]) for r in step.rows[:10])
        return f"{len(step.rows)} orders match: {ids}."
    shown = ", ".join(_product_phrase(r) for r in rows[:5])
    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
    lead = "sold out" if intent == "sold_out" else "matching"
    noun = "product" if len(rows) == 1 else "products"
    return f"I found {len(rows)} {lead} {noun}: the {shown}{more}."


def best_sentences(question: str, texts: list[str], corp: Corpus, n: int = 2) -> list[str]:
    """The ``n`` sentences of ``texts`` most similar to the question."""
    qv = corp.vector(expand_query(question))
    scored: list[tuple[float, int, str]] = []
    for ti, text in enumerate(texts):
        for sentence in _SENTENCE_RE.split(text.strip()):
            if len(sentence.split()) < 4:
                continue
            score = float(sentence_vector(corp, sentence) @ qv) - 0.02 * ti  # prefer higher-ranked chunks
            scored.append((score, len(scored), sentence.strip()))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [s for _, _, s in scored[:n]]


def generate(
    question: str,
    slots: Slots | None,
    sql_step: Text2SQLStep | None,
    ret_step: RetrieverStep | None,
    corp: Corpus | None,
) -> GeneratorStep:
    """Compose the answer from the SQL rows and the best sentences of the top chunks."""
    start = time.perf_counter()
    contexts: list[str] = []
    parts: list[str] = []
    if sql_step is not None and slots is not None:
        contexts.extend(render_rows(sql_step.columns or [], sql_step.rows or []))
        parts.append(sql_sentence(slots, sql_step))
    if ret_step is not None and corp is not None:
        texts = ret_step.texts or []
        contexts.extend(texts)
        parts.extend(best_sentences(question, texts[:3], corp))
    answer = " ".join(p for p in parts if p) or "Sorry, I don't know."
    usage = Usage(
        prompt_tokens=approx_tokens(question) + sum(approx_tokens(c) for c in contexts),
        completion_tokens=approx_tokens(answer),
    )
    return GeneratorStep(
        answer=answer,
        contexts=contexts,
        usage=usage,
        latency_ms=(time.perf_counter() - start) * 1000.0,
    )


# ----------------------------------------------------------------------------------------------
# Fault injection: options that degrade exactly one component (scenarios/shop-fault-*.yaml)
# ----------------------------------------------------------------------------------------------

FAULTS = ("router", "text2sql", "retriever", "generator")
"""Valid values of ``answer(case, fault=...)``; each degrades only the component it names."""


def single_route(step: RouterStep) -> RouterStep:
    """The ``router`` fault: single-label routing. Only the most likely route is kept, so a
    question that needs the catalog *and* the blog goes to one branch only."""
    if len(step.routes) <= 1:
        return step
    scores = step.scores or {}
    top = max(step.routes, key=lambda r: (scores.get(r, 0.0), r))
    confidence = math.prod(
        (v if r == top else 1.0 - v) for r, v in scores.items()
    ) if scores else None
    return step.model_copy(
        update={
            "routes": [top],
            "confidence": None if confidence is None else round(confidence, 4),
        }
    )


# The slot whose WHERE condition the ``text2sql`` fault forgets: the first filled one in this
# order (the most specific constraints first, the category last).
_DROPPABLE_SLOTS = (
    "colour", "material", "material_like", "gender", "size", "max_price", "min_price",
    "brand", "country", "status", "month", "year", "since", "product", "category",
)


def drop_one_filter(slots: Slots) -> Slots:
    """The ``text2sql`` fault: the query loses one WHERE filter (the first filled slot of
    :data:`_DROPPABLE_SLOTS`), as an LLM that forgets a constraint of the question would."""
    for name in _DROPPABLE_SLOTS:
        if getattr(slots, name) is not None:
            return replace(slots, **{name: None})
    return slots


WEAK_VOCAB = 75
"""Terms the ``retriever`` fault's embedding knows: the corpus's most frequent ones."""

_WEAK_INDEX: tuple[int, np.ndarray, np.ndarray] | None = None


def _weak_index(corp: Corpus) -> tuple[np.ndarray, np.ndarray]:
    """(term mask, chunk matrix) of the truncated vocabulary, built once per corpus: only the
    :data:`WEAK_VOCAB` terms in most chunks (ties by term) keep their weight; rows renormalised."""
    global _WEAK_INDEX
    with _LOCK:
        if _WEAK_INDEX is None or _WEAK_INDEX[0] != id(corp):
            df = (corp.matrix > 0).sum(axis=0)
            terms = sorted(corp.vocab, key=lambda t: (-int(df[corp.vocab[t]]), t))
            mask = np.zeros(len(corp.vocab))
            mask[[corp.vocab[t] for t in terms[:WEAK_VOCAB]]] = 1.0
            matrix = corp.matrix * mask
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            _WEAK_INDEX = (id(corp), mask, matrix / np.where(norms > 0, norms, 1.0))
        return _WEAK_INDEX[1], _WEAK_INDEX[2]


def retrieve_weak(question: str, corp: Corpus, k: int = TOP_K) -> RetrieverStep:
    """The ``retriever`` fault: the same ranking with a weak embedding, a vocabulary truncated
    to the corpus's :data:`WEAK_VOCAB` most frequent terms, so the distinctive words of a
    question ("cashmere", "moths") are out of vocabulary. Ties by chunk id: deterministic."""
    start = time.perf_counter()
    mask, matrix = _weak_index(corp)
    query = corp.vector(expand_query(question)) * mask
    norm = float(np.linalg.norm(query))
    return top_k(matrix @ (query / norm if norm > 0 else query), corp, k, start)


_FIGURE_RE = re.compile(r"(?<![\w.])(\d+)(?:\.(\d{2}))?(?!\w)")
INVENTED_CLAIMS = (
    "Good news: members get an extra 15% off this week, and delivery is free on orders over "
    "40 €.",
    "Every piece we sell also comes with a three-year guarantee and free alterations in store.",
)
"""What the ``generator`` fault adds to every answer: claims no context supports."""


def _altered_figure(m: re.Match[str]) -> str:
    whole, cents = m.group(1), m.group(2)
    if cents is not None:  # a price: marked up and "rounded" to a .99 price point
        return f"{math.ceil(float(f'{whole}.{cents}') * 1.15) - 0.01:.2f}"
    return str(int(whole) + 2)  # a count, a size, a temperature: off by two


def invent_figures(step: GeneratorStep) -> GeneratorStep:
    """The ``generator`` fault: the answer misquotes every figure of its contexts (prices marked
    up to a .99 price point, other numbers off by two) and adds an invented promotion and an
    invented guarantee (:data:`INVENTED_CLAIMS`)."""
    text = _FIGURE_RE.sub(_altered_figure, step.answer or "")
    text = " ".join([text, *INVENTED_CLAIMS]).strip()
    usage = step.usage
    if usage is not None:
        usage = usage.model_copy(update={"completion_tokens": approx_tokens(text)})
    return step.model_copy(update={"answer": text, "usage": usage})


# ----------------------------------------------------------------------------------------------
# Entry point
# ----------------------------------------------------------------------------------------------


OVERRIDABLE = ("router", "text2sql", "retriever")
"""Components whose output ``answer(case, overrides=...)`` accepts in place of its own."""


def answer(
    case: Case, *, fault: str | None = None, overrides: dict[str, dict[str, Any]] | None = None
) -> Trace:
    """Run the pipeline on ``case.question`` and return the trace (gold is never read).

    ``fault`` (a scenario's ``system.options``) degrades exactly one component, for the
    fault-injected variants ``scenarios/shop-fault-*.yaml``: one of :data:`FAULTS`, or None
    for the reference assistant.

    ``overrides`` is evalharness's oracle protocol (docs/bottleneck.md): component -> the
    output it must take instead of computing its own (the fields of its trace step) — the
    router's ``routes``; text-to-SQL's ``sql``, ``columns`` and ``rows``; the retriever's
    ``ids`` and ``texts``. The downstream components then work from that output, and the trace
    records it. An override replaces the component, fault included."""
    if fault is not None and fault not in FAULTS:
        raise ValueError(
            f"unknown fault {fault!r}; valid values: {', '.join(FAULTS)} (or none)"
        )
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
            sql_step, slots = text_to_sql(question, cat, drop_filter=fault == "text2sql")
    if "blog" in router_step.routes:
        corp = corpus()
        if "retriever" in overrides:
            given = overrides["retriever"]
            ret_step = RetrieverStep(ids=list(given["ids"]), texts=given.get("texts"),
                                     latency_ms=0.0)
        elif fault == "retriever":
            ret_step = retrieve_weak(question, corp)
        else:
            ret_step = retrieve(question, corp)
    gen_step = generate(question, slots, sql_step, ret_step, corp)
    if fault == "generator":
        gen_step = invent_figures(gen_step)
    return Trace(
        case_id=case.id,
        router=router_step,
        text2sql=sql_step,
        retriever=ret_step,
        generator=gen_step,
    )
