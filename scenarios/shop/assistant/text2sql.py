"""Text-to-SQL: slots extracted with regular expressions and the catalog's vocabularies,
one intent template filled, the query run on the catalog."""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from evalharness.models import (
    Text2SQLStep,
    Usage,
)

from .data import (
    CATEGORY_SYNONYMS,
    COLOUR_SYNONYMS,
    GENDER_WORDS,
    MONTHS,
    NATIONALITIES,
    SIZE_WORDS,
    STATUS_SYNONYMS,
    Catalog,
)
from .faults import drop_one_filter
from .text import approx_tokens, contains_phrase, norm_phrase, numbers_as_digits, words

MAX_ROWS = 50
"""Rows of a query's result kept in the trace."""

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
