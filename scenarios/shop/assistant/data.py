"""The data the components read: the product catalog (an in-memory SQLite copy of
``catalog.sql``) with the vocabularies slot extraction uses, and the blog corpus with its
TF-IDF index; both built once and shared."""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .text import content_terms, norm_phrase

HERE = Path(__file__).resolve().parent.parent
"""``scenarios/shop/``, where the catalog script and the blog chunks are."""
CATALOG_SQL = HERE / "catalog.sql"
BLOG_CHUNKS = HERE / "blog_chunks.jsonl"

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
