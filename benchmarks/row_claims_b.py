"""Answers built from SQL rows, set B: a second labelled set, authored independently of the
row verifier, for measuring how well a judge's faithfulness separates correct answers from
answers with exactly one planted error.

    python benchmarks/row_claims_b.py        # (re)write data/row_claims/items_b.jsonl

How it is built
---------------
Every item starts from a real query against the shop scenario's catalogue
(``scenarios/shop/catalog.sql``, loaded into an in-memory SQLite database with the set-A
helpers ``catalog``/``query``). The SQL text that ran is stored with the item (``sql``),
together with the result (``columns``, typed ``rows``) and the contexts as the shop assistant
renders them (``render_rows``: one ``col: value; …`` line per row). For each query two
answers are written from the same rows:

* a correct one (``supported: true``) — every fact in it can be read off the rows, or is a
  repetition of the question's own words (e.g. the category name it asked about);
* one with exactly ONE planted error (``supported: false``, ``error`` says what): one wrong
  value, one invented entity, a wrong count / sum / average, a wrong superlative, a reversed
  comparison, two swapped prices, availability claimed for a stock-0 row, a hedged price that is
  too far off, or a single extra sentence stating something no column holds.

Answers are drawn from several hand-written phrasings per kind (typically 4-6 for correct
answers, 2-5 for wrong ones; wrong values are often written with the same templates as the
correct ones; about 210 answer templates in all), cycling through them so that all are used.
Surface form varies on purpose: currency as ``€49.90``, ``49.90 €``, ``EUR 49.90``,
``49.90 euros``, ``49,90 €``, ``€89``,
large amounts with thousands separators (``€12,054.30``, ``12.054,30 €``, ``12 054,30 €``);
numbers as digits or words; sizes as codes (``M``) or words (``medium``); lists inline, as
bullets or numbered; optional openers ("Good news!", "Sure —", "Unfortunately,") and polite
closings ("Anything else?", "Happy to help.") that carry no claim.

Independence: this file was written without reading the row verifier
(``core/evalharness/judge/rows.py``), the heuristic judge, or set A's ``build()``; only set A's
docstring, helpers and item schema were looked at. The phrasings are this file's own.

Kinds (41; ``PER_KIND`` = 5 pairs each, 4 for attr_null which has only four NULL rows, a few
more for price_hedged, stock_count, size_availability and extra_fact) — 420 items in all:
attr_brand, attr_colour, attr_material, attr_null, attr_gender, attr_multi, date_added,
price_exact, price_hedged, stock_count, in_stock, sold_out, sizes_listed, size_availability,
count_rows, count_column, sum_rows, avg_column, avg_rows, minmax_column, cheapest,
most_expensive, stock_extreme, comparative, difference, range_rows, ordered_list,
list_products, list_brands, list_prices, group_by_brand, group_by_status, top_n,
order_facts, order_customer, order_total, orders_per_month, revenue_month, stock_value,
empty_result, extra_fact.

Item schema: ``{"id": "rb0000", "kind", "question", "sql", "columns", "rows", "contexts",
"answer", "supported", "error"}``; pairs are adjacent (correct first). Deterministic for a
given seed (``random.Random(seed)``), the same on every machine.
"""

# The answer templates are lambdas over the current loop iteration's values; each is called
# at once (``Builder.pick``) inside that iteration, never later, so B023 does not apply.
# ruff: noqa: B023

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from row_claims import catalog, fmt_value, query, render_rows  # noqa: E402

OUT = HERE / "data" / "row_claims" / "items_b.jsonl"
SEED = 31
PER_KIND = 5

FROM = ("FROM products p JOIN brands b ON b.brand_id = p.brand_id "
        "JOIN categories c ON c.category_id = p.category_id")
SIZE_ORDER = ("CASE s.size WHEN 'XS' THEN 1 WHEN 'S' THEN 2 WHEN 'M' THEN 3 WHEN 'L' THEN 4 "
              "WHEN 'XL' THEN 5 WHEN 'XXL' THEN 6 ELSE 7 END, s.size")
LETTER = ["XS", "S", "M", "L", "XL", "XXL"]
SIZE_WORD = {"XS": "extra small", "S": "small", "M": "medium", "L": "large",
             "XL": "extra large", "XXL": "double extra large"}
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
         "eighteen", "nineteen", "twenty"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
SINGULAR = {"dresses": "dress", "jeans": "pair of jeans", "t-shirts": "t-shirt",
            "sweaters": "sweater", "jackets": "jacket", "coats": "coat",
            "sneakers": "pair of sneakers", "boots": "pair of boots", "scarves": "scarf",
            "bags": "bag", "skirts": "skirt", "shirts": "shirt", "trousers": "pair of trousers"}

COLOUR_FAMILY = {
    "navy": "blue", "indigo": "blue", "dark blue": "blue", "light blue": "blue",
    "mid blue": "blue", "sand": "light", "beige": "light", "camel": "light", "ecru": "light",
    "cream": "light", "ivory": "light", "champagne": "light", "white": "light",
    "stone": "light", "taupe": "light", "tan": "brown", "black": "dark", "charcoal": "dark",
    "grey": "dark", "olive": "green", "emerald": "green", "burgundy": "red", "red": "red",
    "brown": "brown", "cognac": "brown", "dark brown": "brown", "yellow": "yellow",
    "pink": "pink", "orange": "orange"}
WRONG_COLOURS = ["red", "yellow", "pink", "orange", "white", "black", "navy", "brown", "olive"]
MATERIAL_FAMILY = {
    "cotton": "cotton", "organic cotton": "cotton", "waxed cotton": "cotton",
    "cotton/elastane": "cotton", "denim": "cotton", "raw denim": "cotton", "canvas": "cotton",
    "wool": "wool", "merino wool": "wool", "lambswool": "wool", "cashmere": "wool",
    "mohair blend": "wool", "recycled wool": "wool", "wool blend": "wool",
    "polyester": "synthetic", "recycled polyester": "synthetic", "nylon": "synthetic",
    "satin": "synthetic",  # satin is a weave, often polyester: keep it away from those
    "leather": "leather", "suede": "leather", "nubuck": "leather", "silk": "silk",
    "viscose": "viscose", "linen": "linen"}
WRONG_MATERIALS = ["linen", "silk", "leather", "wool", "polyester", "cotton", "cashmere",
                   "denim", "nylon", "velvet"]
MATERIAL_FAMILY["velvet"] = "velvet"

# Sentences that state facts no column of any query holds (the extra_fact kind).
EXTRA_FACTS = [
    "It's machine washable at 30 degrees.",
    "It ships free of charge within two days.",
    "It's made in Portugal.",
    "It was one of our bestsellers last season.",
    "It comes with a two-year warranty.",
    "It runs a little small, so consider sizing up.",
    "Customers rate it 4.8 out of 5.",
    "It's part of our new autumn collection.",
    "It's currently 15% off with code WELCOME15.",
    "It's fully recyclable.",
]


OPENERS = {"neutral": ["Sure — ", "Of course. ", "Let me check… ", "Here you go: ",
                       "Happy to help! ", "Great question. "],
           "pos": ["Good news! ", "Yes! ", "Great news — ", "Sure — "],
           "neg": ["Unfortunately, ", "Sorry — ", "I'm sorry, but "]}
ALL_OPENERS = [o for os_ in OPENERS.values() for o in os_] + ["Sorry", "Yes", "No", "Sure"]
LOWER_OK = {"It", "It's", "The", "We", "We've", "Size", "Our", "That", "There", "That's",
            "You", "Nothing", "No"}


def words(n: int) -> str:
    return WORDS[n] if 0 <= n < len(WORDS) else str(n)


def an(word: str) -> str:
    """The word with its indefinite article."""
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def q(s: str) -> str:
    """A SQL string literal."""
    return "'" + s.replace("'", "''") + "'"


class Builder:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.conn = catalog()
        self.items: list[dict[str, Any]] = []
        self._cycle: dict[str, list[int]] = {}
        cols, rows = query(self.conn, "SELECT p.product_id, p.name, b.name, c.name, p.colour, "
                           "p.material, p.price, p.gender, p.created_at " + FROM
                           + " ORDER BY p.product_id")
        keys = ["id", "name", "brand", "category", "colour", "material", "price", "gender",
                "created"]
        self.products = [dict(zip(keys, r, strict=True)) for r in rows]
        names = Counter(p["name"] for p in self.products)
        self.unique = [p for p in self.products if names[p["name"]] == 1]
        self.sizes: dict[int, list[tuple[str, int]]] = {}
        _, srows = query(self.conn, "SELECT s.product_id, s.size, s.stock FROM product_sizes s "
                         "ORDER BY s.product_id, " + SIZE_ORDER)
        for pid, size, stock in srows:
            self.sizes.setdefault(pid, []).append((size, stock))
        self.categories = [r[0] for r in query(self.conn,
                                               "SELECT name FROM categories ORDER BY 1")[1]]
        self.brands = [r[0] for r in query(self.conn, "SELECT name FROM brands ORDER BY 1")[1]]

    # -- randomness -----------------------------------------------------------------------
    def choice(self, xs: list) -> Any:
        return self.rng.choice(xs)

    def sample(self, xs: list, n: int) -> list:
        return self.rng.sample(xs, min(n, len(xs)))

    def pick(self, key: str, templates: list[Callable[[], str]]) -> str:
        """Cycle through a kind's phrasings in a shuffled order, so each one is used."""
        key = f"{key}/{len(templates)}"
        order = self._cycle.get(key)
        if not order:
            order = list(range(len(templates)))
            self.rng.shuffle(order)
            self._cycle[key] = order
        return templates[order.pop()]()

    # -- surface forms --------------------------------------------------------------------
    def num(self, n: int, p: float = 0.5) -> str:
        return words(n) if n <= 20 and self.rng.random() < p else str(n)

    def money(self, v: float) -> str:
        whole = abs(v - round(v)) < 0.005
        if v >= 1000:
            en = f"{v:,.2f}"
            de = en.replace(",", "_").replace(".", ",").replace("_", ".")
            fr = en.replace(",", " ").replace(".", ",")
            return self.choice([f"€{en}", f"{de} €", f"{fr} €", f"EUR {en}", f"{en} euros",
                                f"€{v:.2f}"])
        s = f"{v:.2f}"
        opts = [f"€{s}", f"{s} €", f"EUR {s}", f"{s} euros", f"{s.replace('.', ',')} €",
                f"€ {s}"]
        if whole:
            n = int(round(v))
            opts += [f"€{n}", f"{n} euros", f"{n} €", f"{n} EUR"]
        return self.choice(opts)

    def round_money(self, n: float, style: int | None = None) -> str:
        n = int(n)
        if n >= 1000:
            opts = [f"€{n:,}", f"{n:,} euros", f"{n:,}".replace(",", ".") + " €", f"EUR {n:,}"]
        else:
            opts = [f"€{n}", f"{n} euros", f"{n} €", f"EUR {n}"]
        return opts[style % len(opts)] if style is not None else self.choice(opts)

    def size(self, size: str, mode: str | None = None) -> str:
        if size in SIZE_WORD:
            mode = mode or self.choice(["word", "code", "size"])
            return {"word": SIZE_WORD[size], "code": size, "size": f"size {size}"}[mode]
        if size == "One Size":
            return "one size"
        return f"size {size}"

    def sizes_list(self, sizes: list[str]) -> list[str]:
        mode = self.choice(["word", "code"])
        return [self.size(s, mode) for s in sizes]

    def join(self, xs: list[str]) -> str:
        xs = list(xs)
        if len(xs) == 1:
            return xs[0]
        oxford = self.rng.random() < 0.3 and len(xs) > 2
        return ", ".join(xs[:-1]) + ("," if oxford else "") + " and " + xs[-1]

    def listing(self, xs: list[str], intro: str) -> str:
        """A list inline, as bullets or numbered."""
        style = self.choice(["inline", "bullets", "numbered", "inline"])
        if style == "inline":
            return f"{intro} {self.join(xs)}."
        if style == "bullets":
            mark = self.choice(["-", "•", "*"])
            return intro + "\n" + "\n".join(f"{mark} {x}" for x in xs)
        return intro + "\n" + "\n".join(f"{i}. {x}" for i, x in enumerate(xs, 1))

    def date(self, iso: str) -> str:
        d = date.fromisoformat(iso[:10])
        m = MONTHS[d.month - 1]
        suffix = "th" if 10 <= d.day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(d.day % 10,
                                                                                      "th")
        return self.choice([f"{d.day} {m} {d.year}", f"{m} {d.day}, {d.year}", iso[:10],
                            f"{d.day} {m[:3]} {d.year}", f"the {d.day}{suffix} of {m} {d.year}"])

    def wrap(self, text: str, mood: str = "neutral", force: bool = False) -> str:
        """Optional opener and closing words that carry no claim."""
        closers = ["Anything else?", "Happy to help.", "Let me know if you need anything else!",
                   "Hope that helps.", "Is there anything else I can do for you?"]
        already = any(text.startswith(o.strip(" —,")) for o in ALL_OPENERS)
        if not already and (force or self.rng.random() < 0.4):
            o = self.choice(OPENERS[mood])
            first = text.split(" ", 1)[0]
            if o.endswith((", ", "but ", "— ")) and first in LOWER_OK:
                text = text[:1].lower() + text[1:]
            text = o + text
        if force:
            return text
        if self.rng.random() < 0.35:
            closer = self.choice([c for c in closers if c.rstrip(".!") not in text])
            text = text + ("\n\n" if "\n" in text else " ") + closer
        return text

    # -- items ----------------------------------------------------------------------------
    def run(self, sql: str) -> tuple[list[str], list[list]]:
        return query(self.conn, sql)

    def add(self, kind: str, question: str, sql: str, cols: list[str], rows: list[list],
            good: str, bad: str, error: str) -> None:
        assert good != bad, (kind, good)
        for answer, ok in ((good, True), (bad, False)):
            self.items.append({
                "id": f"rb{len(self.items):04d}", "kind": kind, "question": question,
                "sql": sql, "columns": cols, "rows": rows,
                "contexts": render_rows(cols, rows), "answer": answer, "supported": ok,
                "error": None if ok else error})


# --------------------------------------------------------------------------------------------
# single-product attributes


def k_attr_brand(b: Builder, n: int) -> None:
    for p in b.sample(b.unique, n):
        sql = f"SELECT p.name, b.name AS brand {FROM} WHERE p.name = {q(p['name'])}"
        cols, rows = b.run(sql)
        brand = rows[0][1]
        wrong = b.choice([x for x in b.brands if x != brand])
        question = b.choice([f"Who makes the {p['name']}?", f"What brand is the {p['name']}?",
                             f"Which label is behind the {p['name']}?"])

        def t(br: str) -> list[Callable[[], str]]:
            return [lambda: f"The {p['name']} is made by {br}.",
                    lambda: f"That one's from {br}.",
                    lambda: f"{br} makes it.",
                    lambda: f"It's {an(br)} piece.",
                    lambda: f"Brand: {br}.",
                    lambda: f"You're looking at {an(br)} design."]
        b.add("attr_brand", question, sql, cols, rows,
              b.wrap(b.pick("brand+", t(brand))), b.wrap(b.pick("brand-", t(wrong))),
              f"brand is {brand}, answer says {wrong}")


def k_attr_colour(b: Builder, n: int) -> None:
    for p in b.sample(b.unique, n):
        sql = f"SELECT p.name, p.colour {FROM} WHERE p.name = {q(p['name'])}"
        cols, rows = b.run(sql)
        colour = rows[0][1]
        wrong = b.choice([c for c in WRONG_COLOURS
                          if COLOUR_FAMILY[c] != COLOUR_FAMILY[colour]])
        question = b.choice([f"What colour is the {p['name']}?",
                             f"Which colour does the {p['name']} come in?",
                             f"What shade is the {p['name']}?"])

        def t(c: str) -> list[Callable[[], str]]:
            return [lambda: f"It's {c}.",
                    lambda: f"The {p['name']} comes in {c}.",
                    lambda: f"Colour: {c}.",
                    lambda: f"We list it in {c}.",
                    lambda: f"That one is {c} — a nice choice."]
        b.add("attr_colour", question, sql, cols, rows,
              b.wrap(b.pick("colour+", t(colour))), b.wrap(b.pick("colour-", t(wrong))),
              f"colour is {colour}, answer says {wrong}")


def k_attr_material(b: Builder, n: int) -> None:
    pool = [p for p in b.unique if p["material"]]
    for p in b.sample(pool, n):
        sql = f"SELECT p.name, p.material {FROM} WHERE p.name = {q(p['name'])}"
        cols, rows = b.run(sql)
        mat = rows[0][1]
        bad_pool = [m for m in WRONG_MATERIALS if MATERIAL_FAMILY[m] != MATERIAL_FAMILY[mat]]
        wrong = b.choice(bad_pool)
        question = b.choice([f"What is the {p['name']} made of?",
                             f"What material is the {p['name']}?",
                             f"Which fabric does the {p['name']} use?"])

        def t(m: str) -> list[Callable[[], str]]:
            return [lambda: f"It's made of {m}.",
                    lambda: f"The {p['name']} is {m}.",
                    lambda: f"Material: {m}.",
                    lambda: f"It's {m} — the catalogue lists {m} as the material.",
                    lambda: f"That's {an(m)} piece."]
        b.add("attr_material", question, sql, cols, rows,
              b.wrap(b.pick("mat+", t(mat))), b.wrap(b.pick("mat-", t(wrong))),
              f"material is {mat}, answer says {wrong}")


def k_attr_null(b: Builder, n: int) -> None:
    pool = [p for p in b.products if p["material"] is None]
    for i in range(n):
        p = pool[i % len(pool)]
        sql = (f"SELECT p.name, b.name AS brand, p.material, p.price {FROM} "
               f"WHERE p.name = {q(p['name'])}")
        cols, rows = b.run(sql)
        wrong = b.choice(["cotton", "polyester", "wool", "leather", "linen"])
        question = b.choice([f"What's the {p['name']} made of?",
                             f"Which material is the {p['name']}?"])
        good = b.pick("null+", [
            lambda: f"The catalogue doesn't list a material for the {p['name']}.",
            lambda: "I'm sorry, I don't have fabric details for that one.",
            lambda: f"There's no material on file for it. It's {an(rows[0][1])} item at "
                    f"{b.money(rows[0][3])}, if that helps.",
            lambda: "The material isn't specified for this item, unfortunately.",
            lambda: f"Good question — our data doesn't say what the {p['name']} is made of."])
        bad = b.pick("null-", [
            lambda: f"It's made of {wrong}.",
            lambda: f"The {p['name']} is {wrong}, by {rows[0][1]}.",
            lambda: f"That one is {wrong} and costs {b.money(rows[0][3])}."])
        b.add("attr_null", question, sql, cols, rows, b.wrap(good), b.wrap(bad),
              f"material is NULL; answer invents {wrong}")


def k_attr_gender(b: Builder, n: int) -> None:
    for p in b.sample(b.unique, n):
        sql = f"SELECT p.name, p.gender {FROM} WHERE p.name = {q(p['name'])}"
        cols, rows = b.run(sql)
        g = rows[0][1]
        wrong = b.choice([x for x in ["women", "men", "unisex"] if x != g])
        question = b.choice([f"Is the {p['name']} for men or women?",
                             f"Who is the {p['name']} designed for?"])

        def t(x: str) -> list[Callable[[], str]]:
            if x == "unisex":
                return [lambda: "It's unisex.", lambda: f"The {p['name']} is a unisex style.",
                        lambda: "It's listed as unisex, so it's for everyone.",
                        lambda: "Gender: unisex."]
            poss = "women's" if x == "women" else "men's"
            return [lambda: f"It's a {poss} style.", lambda: f"The {p['name']} is cut for {x}.",
                    lambda: f"It's listed under {x}.", lambda: f"Gender: {x}."]
        b.add("attr_gender", question, sql, cols, rows,
              b.wrap(b.pick("gen+" + g, t(g))), b.wrap(b.pick("gen-" + wrong, t(wrong))),
              f"gender is {g}, answer says {wrong}")


def k_attr_multi(b: Builder, n: int) -> None:
    pool = [p for p in b.unique if p["material"]]
    for p in b.sample(pool, n):
        sql = (f"SELECT p.name, b.name AS brand, p.colour, p.material, p.price {FROM} "
               f"WHERE p.name = {q(p['name'])}")
        cols, rows = b.run(sql)
        _, brand, colour, mat, price = rows[0]
        field = b.choice(["brand", "colour", "material", "price"])
        vals = {"brand": brand, "colour": colour, "material": mat, "price": price}
        if field == "brand":
            wrong = b.choice([x for x in b.brands if x != brand])
        elif field == "colour":
            wrong = b.choice([c for c in WRONG_COLOURS
                              if COLOUR_FAMILY[c] != COLOUR_FAMILY[colour]])
        elif field == "material":
            wrong = b.choice([m for m in WRONG_MATERIALS
                              if MATERIAL_FAMILY[m] != MATERIAL_FAMILY[mat]])
        else:
            wrong = price + b.choice([-20, -10, 10, 20, 30])
        bad_vals = dict(vals, **{field: wrong})
        question = b.choice([f"Tell me about the {p['name']}.",
                             f"Can you give me the details of the {p['name']}?",
                             f"What do you know about the {p['name']}?"])

        def t(v: dict) -> list[Callable[[], str]]:
            return [
                lambda: f"The {p['name']} is {an(v['colour'])} {v['material']} piece by "
                        f"{v['brand']}, priced at {b.money(v['price'])}.",
                lambda: f"Here are the details:\n- Brand: {v['brand']}\n- Colour: {v['colour']}"
                        f"\n- Material: {v['material']}\n- Price: {b.money(v['price'])}",
                lambda: f"{v['brand']}'s {p['name']} comes in {v['colour']}, is made of "
                        f"{v['material']} and costs {b.money(v['price'])}.",
                lambda: f"It costs {b.money(v['price'])}. It's by {v['brand']}, in "
                        f"{v['colour']}, and the material is {v['material']}.",
                lambda: f"{p['name']} — {v['brand']} — {v['colour']}, {v['material']} — "
                        f"{b.money(v['price'])}."]
        shown = b.money(wrong) if field == "price" else wrong
        b.add("attr_multi", question, sql, cols, rows,
              b.wrap(b.pick("multi+", t(vals))), b.wrap(b.pick("multi-", t(bad_vals))),
              f"{field} is {fmt_value(vals[field])}, answer says {shown}")


def k_date_added(b: Builder, n: int) -> None:
    for p in b.sample(b.unique, n):
        sql = f"SELECT p.name, p.created_at {FROM} WHERE p.name = {q(p['name'])}"
        cols, rows = b.run(sql)
        iso = rows[0][1]
        d = date.fromisoformat(iso)
        shift = b.choice([-3, -2, 2, 4])
        m = (d.month - 1 + shift) % 12 + 1
        wrong_d = date(d.year + (d.month - 1 + shift) // 12, m, min(d.day, 28))
        question = b.choice([f"When was the {p['name']} added to the shop?",
                             f"Since when do you sell the {p['name']}?"])

        def t(iso_: str, dd: date) -> list[Callable[[], str]]:
            return [lambda: f"It was added on {b.date(iso_)}.",
                    lambda: f"The {p['name']} has been in the catalogue since {b.date(iso_)}.",
                    lambda: f"We've carried it since {MONTHS[dd.month - 1]} {dd.year}.",
                    lambda: f"Added: {iso_}."]
        b.add("date_added", question, sql, cols, rows,
              b.wrap(b.pick("date+", t(iso, d))),
              b.wrap(b.pick("date-", t(wrong_d.isoformat(), wrong_d))),
              f"added {iso}, answer says {wrong_d.isoformat()}")


# --------------------------------------------------------------------------------------------
# prices


def k_price_exact(b: Builder, n: int) -> None:
    for p in b.sample(b.unique, n):
        sql = f"SELECT p.name, p.price {FROM} WHERE p.name = {q(p['name'])}"
        cols, rows = b.run(sql)
        price = rows[0][1]
        ip = int(price)
        swapped = int(str(ip)[::-1]) if len(set(str(ip))) > 1 and str(ip)[-1] != "0" else None
        options = [price + d for d in (-10, 10, 20, -20) if price + d > 5]
        if swapped and abs(swapped - ip) >= 5:
            options.append(swapped + (price - ip))
        wrong = round(b.choice(options), 2)
        question = b.choice([f"How much is the {p['name']}?", f"What does the {p['name']} cost?",
                             f"Price of the {p['name']}?"])

        def t(v: float) -> list[Callable[[], str]]:
            return [lambda: f"The {p['name']} costs {b.money(v)}.",
                    lambda: f"It's {b.money(v)}.",
                    lambda: f"{b.money(v)} — that's the current price.",
                    lambda: f"Price: {b.money(v)}",
                    lambda: f"You can get the {p['name']} for {b.money(v)}."]
        b.add("price_exact", question, sql, cols, rows,
              b.wrap(b.pick("price+", t(price))), b.wrap(b.pick("price-", t(wrong))),
              f"price is {price:.2f}, answer says {wrong:.2f}")


def true_hedges(b: Builder, p: float) -> list[str]:
    out = []
    for step in (10, 5):
        r = round(p / step) * step
        if abs(p - r) <= 0.03 * p:
            w = b.choice(["about", "around", "roughly", "approximately", "close to"])
            out.append(f"{w} {b.round_money(r)}")
    c = (int(p) // 10 + 1) * 10
    if 0 < c - p <= 2:
        out.append(f"{b.choice(['just under', 'almost', 'a bit less than', 'nearly'])} "
                   f"{b.round_money(c)}")
    f = (int(p) // 50) * 50
    if 0 < p - f <= 0.1 * p and f > 0:
        out.append(f"{b.choice(['a little over', 'just over', 'slightly more than'])} "
                   f"{b.round_money(f)}")
    u = (int(p) // 50 + 1) * 50
    if u - p <= 0.4 * p:
        out.append(f"{b.choice(['under', 'less than', 'below'])} {b.round_money(u)}")
    lo = (int(p) // 10) * 10 if p - (int(p) // 10) * 10 >= 1 else (int(p) // 10) * 10 - 10
    style = b.rng.randrange(4)
    out.append(f"between {b.round_money(lo, style)} and {b.round_money(lo + 20, style)}")
    return out


def false_hedges(b: Builder, p: float) -> list[tuple[str, str]]:
    far_hi = round(p * b.choice([1.5, 1.6, 1.8]) / 10) * 10
    far_lo = round(p * b.choice([0.5, 0.55, 0.6]) / 10) * 10
    lo_cap = (int(p * 0.75) // 10) * 10
    return [(f"{b.choice(['about', 'around', 'roughly'])} {b.round_money(far_hi)}",
             f"hedged price {far_hi} is far above {p:.2f}"),
            (f"{b.choice(['about', 'roughly', 'approximately'])} {b.round_money(far_lo)}",
             f"hedged price {far_lo} is far below {p:.2f}"),
            (f"{b.choice(['under', 'less than'])} {b.round_money(lo_cap)}",
             f"says under {lo_cap}, price is {p:.2f}"),
            (f"{b.choice(['just under', 'almost'])} {b.round_money(far_hi)}",
             f"says just under {far_hi}, price is {p:.2f}"),
            (f"{b.choice(['well over', 'more than'])} {b.round_money(far_hi)}",
             f"says over {far_hi}, price is {p:.2f}")]


def k_price_hedged(b: Builder, n: int) -> None:
    for p in b.sample([x for x in b.unique if x["price"] >= 40], n):
        sql = f"SELECT p.name, p.price {FROM} WHERE p.name = {q(p['name'])}"
        cols, rows = b.run(sql)
        price = rows[0][1]
        good_h = b.choice(true_hedges(b, price))
        bad_h, error = b.choice(false_hedges(b, price))
        question = b.choice([f"Roughly how much is the {p['name']}?",
                             f"Is the {p['name']} expensive?",
                             f"What sort of price is the {p['name']}?"])

        def t(h: str) -> list[Callable[[], str]]:
            return [lambda: f"The {p['name']} is {h}.",
                    lambda: f"It costs {h}.",
                    lambda: f"That one comes in at {h}.",
                    lambda: f"You'd pay {h} for it.",
                    lambda: f"It's priced at {h}."]
        b.add("price_hedged", question, sql, cols, rows,
              b.wrap(b.pick("hedge+", t(good_h))), b.wrap(b.pick("hedge-", t(bad_h))), error)


# --------------------------------------------------------------------------------------------
# stock and sizes


def size_rows(b: Builder, pred: Callable[[str, int], bool]) -> list[tuple[dict, str, int]]:
    return [(p, s, st) for p in b.unique for s, st in b.sizes[p["id"]] if pred(s, st)]


def one_size_sql(p: dict, size: str) -> str:
    return (f"SELECT p.name, s.size, s.stock FROM products p JOIN product_sizes s "
            f"ON s.product_id = p.product_id WHERE p.name = {q(p['name'])} "
            f"AND s.size = {q(size)}")


def k_stock_count(b: Builder, n: int) -> None:
    low = size_rows(b, lambda s, st: 1 <= st <= 3)
    high = size_rows(b, lambda s, st: st >= 5)
    picks = b.sample(low, n - n // 2) + b.sample(high, n // 2)
    for p, size, _ in picks:
        sql = one_size_sql(p, size)
        cols, rows = b.run(sql)
        st = rows[0][2]
        wrong = st + b.choice([2, 3]) if st <= 3 else st + b.choice([-3, -2, 3, 4])
        question = b.choice([f"How many {p['name']} do you have left in {size}?",
                             f"What's the stock of the {p['name']} in size {size}?"])

        def t(k: int) -> list[Callable[[], str]]:
            z = b.size(size)
            pieces = "piece" if k == 1 else "pieces"
            if k <= 3:
                return [lambda: f"Only {b.num(k, .7)} left in {z}!",
                        lambda: f"We've got just {b.num(k)} in {z} — better be quick.",
                        lambda: f"There {'is' if k == 1 else 'are'} {b.num(k)} {pieces} "
                                f"left in {z}.",
                        lambda: f"Stock in {z}: {k}."]
            return [lambda: f"We have {b.num(k)} in {z}.",
                    lambda: f"There are {k} {pieces} in stock in {z}.",
                    lambda: f"Stock in {z}: {k}.",
                    lambda: f"Plenty — {b.num(k)} in {z}."]
        b.add("stock_count", question, sql, cols, rows,
              b.wrap(b.pick("cnt+" + str(st <= 3), t(st))),
              b.wrap(b.pick("cnt-" + str(st <= 3), t(wrong))),
              f"stock is {st}, answer says {wrong}")


def k_in_stock(b: Builder, n: int) -> None:
    for p, size, _ in b.sample(size_rows(b, lambda s, st: st > 0), n):
        sql = one_size_sql(p, size)
        cols, rows = b.run(sql)
        st = rows[0][2]
        z = b.size(size)
        question = b.choice([f"Is the {p['name']} available in {size}?",
                             f"Can I order the {p['name']} in size {size}?",
                             f"Do you have the {p['name']} in {SIZE_WORD.get(size, size)}?"])
        good = b.pick("in+", [
            lambda: f"Yes, it's in stock in {z}.",
            lambda: b.wrap(f"{cap(z)} is available, so you can order it right away.", "pos", True),
            lambda: f"Yes! We have {b.num(st)} in {z}.",
            lambda: f"It is — {z} can be ordered.",
            lambda: f"Yes, the {p['name']} is available in {z} ({st} in stock)."])
        bad = b.pick("in-", [
            lambda: f"Sorry, {z} is sold out.",
            lambda: b.wrap(f"The {p['name']} is out of stock in {z}.", "neg", True),
            lambda: f"We have none left in {z}, I'm afraid."])
        b.add("in_stock", question, sql, cols, rows, b.wrap(good), b.wrap(bad),
              f"stock is {st}, answer says sold out")


def k_sold_out(b: Builder, n: int) -> None:
    for p, size, _ in b.sample(size_rows(b, lambda s, st: st == 0), n):
        sql = one_size_sql(p, size)
        cols, rows = b.run(sql)
        z = b.size(size)
        question = b.choice([f"Is the {p['name']} available in {size}?",
                             f"Can I still get the {p['name']} in size {size}?",
                             f"Any {p['name']} left in {SIZE_WORD.get(size, size)}?"])
        good = b.pick("out+", [
            lambda: b.wrap(f"It's sold out in {z}.", "neg", True),
            lambda: f"Sorry, none left in {z}.",
            lambda: f"{cap(z)} is out of stock right now.",
            lambda: f"I'm afraid we have zero in {z} at the moment.",
            lambda: f"No — the {p['name']} can't be ordered in {z} currently; stock is 0."])
        bad = b.pick("out-", [
            lambda: f"Yes, it's available in {z}.",
            lambda: b.wrap(f"You can order it in {z}.", "pos", True),
            lambda: f"We still have a few in {z}.",
            lambda: f"Yes — {z} is in stock."])
        b.add("sold_out", question, sql, cols, rows, b.wrap(good), b.wrap(bad),
              f"stock in {size} is 0, answer says available")


def product_sizes_sql(p: dict, stock: bool = True) -> str:
    col = "s.size, s.stock" if stock else "s.size"
    return (f"SELECT {col} FROM products p JOIN product_sizes s ON s.product_id = p.product_id "
            f"WHERE p.name = {q(p['name'])} ORDER BY {SIZE_ORDER}")


def k_sizes_listed(b: Builder, n: int) -> None:
    pool = [p for p in b.unique if all(s in LETTER for s, _ in b.sizes[p["id"]])
            and len(b.sizes[p["id"]]) >= 2]
    for p in b.sample(pool, n):
        sql = product_sizes_sql(p, stock=False)
        cols, rows = b.run(sql)
        have = [r[0] for r in rows]
        idx = [LETTER.index(s) for s in have]
        extra = [LETTER[i] for i in (min(idx) - 1, max(idx) + 1) if 0 <= i < len(LETTER)]
        add = b.choice(extra)
        bad_sizes = sorted(have + [add], key=LETTER.index)
        question = b.choice([f"What sizes does the {p['name']} come in?",
                             f"Which sizes is the {p['name']} made in?"])
        contiguous = max(idx) - min(idx) + 1 == len(idx)

        def t(ss: list[str]) -> list[Callable[[], str]]:
            out = [lambda: f"It comes in {b.join(b.sizes_list(ss))}.",
                   lambda: f"Available sizes: {', '.join(ss)}.",
                   lambda: b.listing(b.sizes_list(ss), "The sizes are:"),
                   lambda: f"You can choose between {b.join(b.sizes_list(ss))}."]
            if contiguous and len(ss) >= 3:
                mode = b.choice(["word", "code"])
                out.append(lambda: f"Sizes run from {b.size(ss[0], mode)} to "
                                   f"{b.size(ss[-1], mode)}.")
            return out
        b.add("sizes_listed", question, sql, cols, rows,
              b.wrap(b.pick("sz+", t(have))), b.wrap(b.pick("sz-", t(bad_sizes)[:4])),
              f"no {add} row for this product")


def k_size_availability(b: Builder, n: int) -> None:
    pool = [p for p in b.unique if len(b.sizes[p["id"]]) >= 3
            and any(st == 0 for _, st in b.sizes[p["id"]])
            and any(st > 0 for _, st in b.sizes[p["id"]])]
    for p in b.sample(pool, n):
        sql = product_sizes_sql(p)
        cols, rows = b.run(sql)
        avail = [s for s, st in rows if st > 0]
        zero = [s for s, st in rows if st == 0]
        mode = b.choice(["word", "code"])
        zs = [b.size(s, mode) for s in zero]
        av = [b.size(s, mode) for s in avail]
        question = b.choice([f"Which sizes of the {p['name']} are in stock?",
                             f"Is the {p['name']} available in all sizes?"])
        goods = [lambda: f"It's in stock in {b.join(av)}; {b.join(zs)} "
                         f"{'is' if len(zs) == 1 else 'are'} sold out.",
                 lambda: f"You can order it in {b.join(av)}. {cap(b.join(zs))} "
                         f"{'is' if len(zs) == 1 else 'are'} out of stock.",
                 lambda: "Available:\n" + "\n".join(f"- {b.size(s, mode)} ({st} left)"
                                                    for s, st in rows if st > 0)
                         + f"\nSold out: {', '.join(zs)}",
                 lambda: f"Not all of them: {b.join(zs)} {'has' if len(zs) == 1 else 'have'} "
                         f"none left, but {b.join(av)} {'is' if len(av) == 1 else 'are'} "
                         f"available."]
        if len(zero) == 1:
            goods.append(lambda: f"Only {zs[0]} is sold out — every other size is available.")
        # planted error: one sold-out size called available, or one available size sold out
        if b.rng.random() < 0.6 or len(avail) == 1:
            z = b.choice(zero)
            av2 = [b.size(s, mode) for s, st in rows if st > 0 or s == z]
            zs2 = [b.size(s, mode) for s in zero if s != z]
            error = f"{z} has stock 0, answer says available"
            if zs2:
                bads = [lambda: f"It's in stock in {b.join(av2)}; {b.join(zs2)} "
                                f"{'is' if len(zs2) == 1 else 'are'} sold out.",
                        lambda: f"You can order it in {b.join(av2)}."]
            else:
                bads = [lambda: f"Yes, it's available in every size: {b.join(av2)}.",
                        lambda: f"You can order it in {b.join(av2)}."]
        else:
            a = b.choice(avail)
            av2 = [b.size(s, mode) for s in avail if s != a]
            zs2 = [b.size(s, mode) for s, st in rows if st == 0 or s == a]
            error = f"{a} is in stock, answer says sold out"
            bads = [lambda: f"It's in stock in {b.join(av2)}; {b.join(zs2)} are sold out.",
                    lambda: f"You can order it in {b.join(av2)}. {cap(b.join(zs2))} are out of "
                            f"stock."]
        b.add("size_availability", question, sql, cols, rows,
              b.wrap(b.pick("avail+", goods)), b.wrap(b.pick("avail-", bads)), error)


def k_sum_rows(b: Builder, n: int) -> None:
    pool = [p for p in b.unique if len(b.sizes[p["id"]]) >= 3]
    for p in b.sample(pool, n):
        sql = product_sizes_sql(p)
        cols, rows = b.run(sql)
        total = sum(r[1] for r in rows)
        wrong = total + b.choice([-4, -3, -2, 2, 3, 5])
        question = b.choice([f"How many {p['name']} do you have in stock in total?",
                             f"What's the total stock of the {p['name']} across sizes?"])
        mode = b.choice(["word", "code"])
        breakdown = ", ".join(f"{b.size(s, mode)}: {st}" for s, st in rows)

        def t(k: int, bd: bool) -> list[Callable[[], str]]:
            out = [lambda: f"{k} in total across all sizes.",
                   lambda: f"Adding up all sizes, that's {b.num(k)} pieces.",
                   lambda: f"Total stock: {k}."]
            if bd:
                out += [lambda: f"Altogether we have {k} in stock ({breakdown}).",
                        lambda: f"{cap(breakdown)} — so {k} overall."]
            return out
        b.add("sum_rows", question, sql, cols, rows,
              b.wrap(b.pick("sum+", t(total, True))), b.wrap(b.pick("sum-", t(wrong, True))),
              f"sizes sum to {total}, answer says {wrong}")


def k_stock_extreme(b: Builder, n: int) -> None:
    pool = []
    for p in b.unique:
        st = [x for _, x in b.sizes[p["id"]]]
        if len(st) >= 3 and st.count(max(st)) == 1 and st.count(min(st)) == 1:
            pool.append(p)
    for p in b.sample(pool, n):
        sql = product_sizes_sql(p)
        cols, rows = b.run(sql)
        most = b.rng.random() < 0.5
        target = (max if most else min)(rows, key=lambda r: r[1])
        other = b.choice([r for r in rows if r != target])
        if most:
            question = b.choice([f"Which size of the {p['name']} do you have the most of?",
                                 f"In which size is the {p['name']} best stocked?"])
        else:
            question = b.choice([f"Which size of the {p['name']} is running lowest?",
                                 f"Which size of the {p['name']} has the fewest in stock?"])

        def t(r: list) -> list[Callable[[], str]]:
            z = b.size(r[0])
            if most:
                return [lambda: f"{cap(z)} — we have {r[1]} of those.",
                        lambda: f"We have the most in {z} ({b.num(r[1])}).",
                        lambda: f"The best-stocked size is {z}.",
                        lambda: f"That would be {z}, with {r[1]} in stock."]
            if r[1] == 0:
                return [lambda: f"{cap(z)} — it's completely sold out.",
                        lambda: f"The lowest is {z}, with none left.",
                        lambda: f"That would be {z}: stock is 0."]
            return [lambda: f"{cap(z)} — only {b.num(r[1])} left.",
                    lambda: f"The lowest is {z}, with {r[1]} in stock.",
                    lambda: f"That would be {z} ({r[1]})."]
        word = "most" if most else "fewest"
        b.add("stock_extreme", question, sql, cols, rows,
              b.wrap(b.pick("ext+" + str(most) + str(target[1] == 0), t(target))),
              b.wrap(b.pick("ext-" + str(most) + str(other[1] == 0), t(other))),
              f"{word} stock is {target[0]} ({target[1]}), answer names {other[0]} ({other[1]})")


# --------------------------------------------------------------------------------------------
# counts and aggregates


def combos(b: Builder, lo: int, hi: int) -> list[tuple[str, str, str]]:
    """(filter description, SQL WHERE, question noun) with lo..hi products, names unique."""
    out = []
    for cat in b.categories:
        for br in b.brands:
            ps = [p for p in b.products if p["category"] == cat and p["brand"] == br]
            if lo <= len(ps) <= hi and len({p["name"] for p in ps}) == len(ps):
                out.append((f"{br} {cat}", f"c.name = {q(cat)} AND b.name = {q(br)}", cat))
        for col in sorted({p["colour"] for p in b.products}):
            ps = [p for p in b.products if p["category"] == cat and p["colour"] == col]
            if lo <= len(ps) <= hi and len({p["name"] for p in ps}) == len(ps):
                out.append((f"{col} {cat}", f"c.name = {q(cat)} AND p.colour = {q(col)}", cat))
        for g in ("women", "men"):
            ps = [p for p in b.products if p["category"] == cat and p["gender"] in (g, "unisex")]
            if lo <= len(ps) <= hi and len({p["name"] for p in ps}) == len(ps):
                out.append((f"{cat} for {g}",
                            f"c.name = {q(cat)} AND p.gender IN ({q(g)}, 'unisex')", cat))
        ps = [p for p in b.products if p["category"] == cat]
        if lo <= len(ps) <= hi and len({p["name"] for p in ps}) == len(ps):
            out.append((cat, f"c.name = {q(cat)}", cat))
    return out


def k_count_rows(b: Builder, n: int) -> None:
    for desc, where, _ in b.sample(combos(b, 2, 6), n):
        sql = f"SELECT p.name, p.price {FROM} WHERE {where} ORDER BY p.name"
        cols, rows = b.run(sql)
        k = len(rows)
        wrong = k + b.choice([1, 2]) if k <= 2 else k + b.choice([-1, 1, 2])
        names = [r[0] for r in rows]
        question = b.choice([f"Which {desc} do you have?", f"Show me your {desc}.",
                             f"Do you sell any {desc}?"])

        def t(c: int) -> list[Callable[[], str]]:
            return [lambda: f"{cap(b.num(c, .8))} products match: {b.join(names)}.",
                    lambda: f"I found {b.num(c)} — {b.join(names)}.",
                    lambda: b.listing(names, f"There are {b.num(c)} {desc}:"),
                    lambda: f"We have {b.num(c)} of them.",
                    lambda: f"{c} results: " + "; ".join(f"{r[0]} ({b.money(r[1])})"
                                                          for r in rows) + "."]
        b.add("count_rows", question, sql, cols, rows,
              b.wrap(b.pick("cr+", t(k))), b.wrap(b.pick("cr-", t(wrong))),
              f"{k} rows, answer says {wrong}")


def k_count_column(b: Builder, n: int) -> None:
    specs = []
    for cat in b.categories:
        specs.append((f"SELECT COUNT(*) AS n FROM products p JOIN categories c "
                      f"ON c.category_id = p.category_id WHERE c.name = {q(cat)}",
                      f"How many {cat} do you sell?", cat))
    for st in ("returned", "cancelled", "delivered", "shipped"):
        specs.append((f"SELECT COUNT(*) AS n FROM orders WHERE status = {q(st)}",
                      f"How many orders are {st}?", f"{st} orders"))
    for country in ("Germany", "United Kingdom", "France", "Italy", "Portugal"):
        where = f"the {country}" if country == "United Kingdom" else country
        specs.append((f"SELECT COUNT(*) AS customers FROM customers WHERE country = "
                      f"{q(country)}", f"How many customers do we have in {where}?",
                      f"customers in {where}"))
    for sql, question, noun in b.sample(specs, n):
        cols, rows = b.run(sql)
        k = rows[0][0]
        wrong = k + b.choice([-2, -1, 1, 2]) if k > 2 else k + b.choice([1, 2])

        def t(c: int) -> list[Callable[[], str]]:
            return [lambda: f"There are {b.num(c)} {noun}.",
                    lambda: f"{cap(b.num(c))}.",
                    lambda: f"The count is {c}.",
                    lambda: f"We have {b.num(c)} {noun} in total.",
                    lambda: f"{noun[:1].upper() + noun[1:]}: {c}."]
        b.add("count_column", question, sql, cols, rows,
              b.wrap(b.pick("cc+", t(k))), b.wrap(b.pick("cc-", t(wrong))),
              f"count is {k}, answer says {wrong}")


def k_avg_column(b: Builder, n: int) -> None:
    for cat in b.sample(b.categories, n):
        sql = (f"SELECT ROUND(AVG(p.price), 2) AS avg_price FROM products p JOIN categories c "
               f"ON c.category_id = p.category_id WHERE c.name = {q(cat)}")
        cols, rows = b.run(sql)
        avg = rows[0][0]
        wrong = round(avg * b.choice([0.8, 0.85, 1.15, 1.2]), 2)
        question = b.choice([f"What's the average price of your {cat}?",
                             f"How much do {cat} cost on average?"])

        def t(v: float) -> list[Callable[[], str]]:
            return [lambda: f"The average {SINGULAR[cat]} costs {b.money(v)}.",
                    lambda: f"On average, {cat} come to {b.money(v)}.",
                    lambda: f"Average price: {b.money(v)}.",
                    lambda: f"They average out at around {b.round_money(round(v))}.",
                    lambda: f"Roughly {b.round_money(round(v))} on average."]
        b.add("avg_column", question, sql, cols, rows,
              b.wrap(b.pick("avgc+", t(avg))), b.wrap(b.pick("avgc-", t(wrong))),
              f"average is {avg:.2f}, answer says {wrong:.2f}")


def k_avg_rows(b: Builder, n: int) -> None:
    for desc, where, _ in b.sample(combos(b, 2, 5), n):
        sql = f"SELECT p.name, p.price {FROM} WHERE {where} ORDER BY p.name"
        cols, rows = b.run(sql)
        prices = [r[1] for r in rows]
        avg = round(sum(prices) / len(prices), 2)
        wrong = round(avg * b.choice([0.8, 1.2, 1.25]), 2)
        question = b.choice([f"What's the average price of the {desc}?",
                             f"On average, what do your {desc} cost?"])
        sums = " + ".join(f"{x:.2f}" for x in prices)

        def t(v: float) -> list[Callable[[], str]]:
            return [lambda: f"They average {b.money(v)}.",
                    lambda: f"The mean price is about {b.round_money(round(v))}.",
                    lambda: f"({sums}) / {len(prices)} = {v:.2f}, so about {b.money(v)} each.",
                    lambda: f"Across the {b.num(len(prices))} of them, the average is "
                            f"{b.money(v)}.",
                    lambda: f"Average: {b.money(v)}."]
        b.add("avg_rows", question, sql, cols, rows,
              b.wrap(b.pick("avgr+", t(avg))), b.wrap(b.pick("avgr-", t(wrong))),
              f"average of rows is {avg:.2f}, answer says {wrong:.2f}")


def k_minmax_column(b: Builder, n: int) -> None:
    for cat in b.sample(b.categories, n):
        sql = (f"SELECT MIN(p.price) AS min_price, MAX(p.price) AS max_price FROM products p "
               f"JOIN categories c ON c.category_id = p.category_id WHERE c.name = {q(cat)}")
        cols, rows = b.run(sql)
        lo, hi = rows[0]
        if b.rng.random() < 0.5:
            wlo, whi = lo + b.choice([10, 20]), hi
            error = f"minimum is {lo:.2f}, answer says {wlo:.2f}"
        else:
            wlo, whi = lo, hi + b.choice([-30, -20, 30, 50])
            error = f"maximum is {hi:.2f}, answer says {whi:.2f}"
        question = b.choice([f"What are the cheapest and the most expensive prices for {cat}?",
                             f"How cheap and how expensive do your {cat} get?"])
        sing = SINGULAR[cat]

        def t(a: float, z: float) -> list[Callable[[], str]]:
            return [lambda: f"The cheapest {sing} is {b.money(a)} and the most expensive "
                            f"{b.money(z)}.",
                    lambda: f"Minimum {b.money(a)}, maximum {b.money(z)}.",
                    lambda: f"{cap(cat)} start at {b.money(a)}; the top price is {b.money(z)}.",
                    lambda: f"Lowest price: {b.money(a)}\nHighest price: {b.money(z)}",
                    lambda: f"You'll pay at most {b.money(z)}, and at least {b.money(a)}."]
        b.add("minmax_column", question, sql, cols, rows,
              b.wrap(b.pick("mm+", t(lo, hi))), b.wrap(b.pick("mm-", t(wlo, whi))), error)


# --------------------------------------------------------------------------------------------
# superlatives, comparisons, ranges, orderings


def priced_groups(b: Builder, lo: int, hi: int) -> list[tuple[str, str, str]]:
    """Combos whose prices are all distinct."""
    out = []
    for desc, where, cat in combos(b, lo, hi):
        _, rows = b.run(f"SELECT p.price {FROM} WHERE {where}")
        prices = [r[0] for r in rows]
        if len(set(prices)) == len(prices):
            out.append((desc, where, cat))
    return out


def k_superlative(b: Builder, n: int, cheapest: bool) -> None:
    kind = "cheapest" if cheapest else "most_expensive"
    for desc, where, _ in b.sample(priced_groups(b, 3, 8), n):
        sql = f"SELECT p.name, p.price {FROM} WHERE {where} ORDER BY p.name"
        cols, rows = b.run(sql)
        ranked = sorted(rows, key=lambda r: r[1], reverse=not cheapest)
        top = ranked[0]
        other = b.choice(ranked[1:3])
        if cheapest:
            question = b.choice([f"What's the cheapest of your {desc}?",
                                 f"Which of the {desc} is the most affordable?"])
        else:
            question = b.choice([f"What's the most expensive of your {desc}?",
                                 f"Which of the {desc} costs the most?"])

        def t(r: list) -> list[Callable[[], str]]:
            if cheapest:
                return [lambda: f"The cheapest is the {r[0]} at {b.money(r[1])}.",
                        lambda: f"The {r[0]} is your most affordable option ({b.money(r[1])}).",
                        lambda: f"If budget matters, go for the {r[0]} — at {b.money(r[1])} "
                                f"it's the lowest-priced one.",
                        lambda: f"Lowest price: {r[0]}, {b.money(r[1])}.",
                        lambda: f"That would be the {r[0]}."]
            return [lambda: f"The most expensive is the {r[0]} at {b.money(r[1])}.",
                    lambda: f"The {r[0]} tops the list at {b.money(r[1])}.",
                    lambda: f"At {b.money(r[1])}, the {r[0]} is the priciest.",
                    lambda: f"Highest price: {r[0]} ({b.money(r[1])}).",
                    lambda: f"That's the {r[0]}."]
        b.add(kind, question, sql, cols, rows,
              b.wrap(b.pick(kind + "+", t(top))), b.wrap(b.pick(kind + "-", t(other))),
              f"{kind.replace('_', ' ')} is {top[0]} ({top[1]:.2f}), answer names {other[0]} "
              f"({other[1]:.2f})")


def two_products(b: Builder) -> tuple[dict, dict]:
    while True:
        a, c = b.sample(b.unique, 2)
        if a["price"] != c["price"] and (a["category"] == c["category"] or b.rng.random() < .3):
            return a, c


def two_sql(a: dict, c: dict) -> str:
    return (f"SELECT p.name, p.price {FROM} WHERE p.name IN ({q(a['name'])}, {q(c['name'])}) "
            f"ORDER BY p.name")


def k_comparative(b: Builder, n: int) -> None:
    for _ in range(n):
        a, c = two_products(b)
        sql = two_sql(a, c)
        cols, rows = b.run(sql)
        lo, hi = sorted(rows, key=lambda r: r[1])
        question = b.choice([f"Which is cheaper, the {a['name']} or the {c['name']}?",
                             f"Is the {a['name']} more expensive than the {c['name']}?",
                             f"{a['name']} vs {c['name']}: which costs less?"])

        def t(x: list, y: list, prices: bool) -> list[Callable[[], str]]:
            # x claimed cheaper than y
            out = [lambda: f"The {x[0]} is cheaper than the {y[0]}.",
                   lambda: f"The {y[0]} costs more than the {x[0]}.",
                   lambda: f"The {x[0]} — it's the less expensive of the two."]
            if prices:
                out.append(lambda: f"The {x[0]} is the cheaper one: {b.money(x[1])} vs "
                                   f"{b.money(y[1])} for the {y[0]}.")
            return out
        b.add("comparative", question, sql, cols, rows,
              b.wrap(b.pick("cmp+", t(lo, hi, True))), b.wrap(b.pick("cmp-", t(hi, lo, False))),
              f"{lo[0]} ({lo[1]:.2f}) is cheaper than {hi[0]} ({hi[1]:.2f}); answer reverses it")


def k_difference(b: Builder, n: int) -> None:
    for _ in range(n):
        a, c = two_products(b)
        sql = two_sql(a, c)
        cols, rows = b.run(sql)
        lo, hi = sorted(rows, key=lambda r: r[1])
        diff = round(hi[1] - lo[1], 2)
        wrong = round(diff + b.choice([-10, 10, 20]) if diff > 15 else diff + 10, 2)
        question = b.choice([f"How much more is the {hi[0]} than the {lo[0]}?",
                             f"What's the price difference between the {a['name']} and the "
                             f"{c['name']}?"])

        def t(d: float) -> list[Callable[[], str]]:
            return [lambda: f"The {hi[0]} costs {b.money(d)} more than the {lo[0]}.",
                    lambda: f"The difference is {b.money(d)}.",
                    lambda: f"The {lo[0]} is {b.money(d)} cheaper.",
                    lambda: f"{b.money(hi[1])} vs {b.money(lo[1])}, so a difference of "
                            f"{b.money(d)}."]
        b.add("difference", question, sql, cols, rows,
              b.wrap(b.pick("diff+", t(diff))), b.wrap(b.pick("diff-", t(wrong)[:3])),
              f"difference is {diff:.2f}, answer says {wrong:.2f}")


def k_range_rows(b: Builder, n: int) -> None:
    for desc, where, _ in b.sample(priced_groups(b, 3, 9), n):
        sql = f"SELECT p.name, p.price {FROM} WHERE {where} ORDER BY p.name"
        cols, rows = b.run(sql)
        ranked = sorted(rows, key=lambda r: r[1])
        lo, hi = ranked[0], ranked[-1]
        if b.rng.random() < 0.5:
            wlo, whi = ranked[1], hi
            error = f"cheapest is {lo[1]:.2f}, answer starts at {ranked[1][1]:.2f}"
        else:
            whi = ["invented", round(hi[1] + b.choice([20, 30, 50]), 2)]
            wlo = lo
            error = f"most expensive is {hi[1]:.2f}, answer says {whi[1]:.2f}"
        question = b.choice([f"What's the price range for {desc}?",
                             f"How much are the {desc}, from cheapest to priciest?"])

        def t(x: list, y: list, names: bool) -> list[Callable[[], str]]:
            out = [lambda: f"Prices range from {b.money(x[1])} to {b.money(y[1])}.",
                   lambda: f"Between {b.money(x[1])} and {b.money(y[1])}.",
                   lambda: f"They start at {b.money(x[1])} and go up to {b.money(y[1])}."]
            if names:
                out.append(lambda: f"Anywhere from {b.money(x[1])} (the {x[0]}) to "
                                   f"{b.money(y[1])} (the {y[0]}).")
            return out
        b.add("range_rows", question, sql, cols, rows,
              b.wrap(b.pick("rng+", t(lo, hi, True))),
              b.wrap(b.pick("rng-", t(wlo, whi, False))), error)


def k_ordered_list(b: Builder, n: int) -> None:
    for desc, where, _ in b.sample(priced_groups(b, 3, 5), n):
        sql = f"SELECT p.name, p.price {FROM} WHERE {where} ORDER BY p.name"
        cols, rows = b.run(sql)
        asc = b.rng.random() < 0.6
        ranked = sorted(rows, key=lambda r: r[1], reverse=not asc)
        i = b.rng.randrange(len(ranked) - 1)
        bad = list(ranked)
        bad[i], bad[i + 1] = bad[i + 1], bad[i]
        with_prices = b.rng.random() < 0.6
        question = b.choice([f"Can you sort the {desc} by price?",
                             f"List the {desc} from {'cheapest' if asc else 'most expensive'} "
                             f"to {'most expensive' if asc else 'cheapest'}."])
        head = b.choice(["From cheapest to dearest:", "Lowest to highest price:",
                         "Sorted by price, cheapest first:"] if asc else
                        ["From most expensive to cheapest:", "Highest price first:",
                         "Sorted by price, priciest first:"])

        def show(rs: list) -> list[str]:
            return [f"{r[0]} ({b.money(r[1])})" if with_prices else r[0] for r in rs]

        def t(rs: list) -> list[Callable[[], str]]:
            return [lambda: b.listing(show(rs), head),
                    lambda: head + " " + " → ".join(show(rs)) + ".",
                    lambda: head + "\n" + "\n".join(f"{k}. {x}" for k, x in
                                                    enumerate(show(rs), 1))]
        b.add("ordered_list", question, sql, cols, rows,
              b.wrap(b.pick("ord+", t(ranked))), b.wrap(b.pick("ord-", t(bad))),
              f"{bad[i][0]} and {bad[i + 1][0]} are in the wrong order")


# --------------------------------------------------------------------------------------------
# lists


def k_list_products(b: Builder, n: int) -> None:
    for desc, where, _ in b.sample(combos(b, 2, 6), n):
        sql = f"SELECT p.name {FROM} WHERE {where} ORDER BY p.name"
        cols, rows = b.run(sql)
        names = [r[0] for r in rows]
        outsiders = [p["name"] for p in b.unique if p["name"] not in names]
        fake = b.choice(outsiders + ["Velvet Blazer", "Quilted Gilet", "Corduroy Overall"])
        bad = list(names)
        bad.insert(b.rng.randrange(len(bad) + 1), fake)
        question = b.choice([f"Which {desc} do you have?", f"What {desc} are there?",
                             f"List the {desc}, please."])

        def t(ns: list[str]) -> list[Callable[[], str]]:
            return [lambda: b.listing(ns, "Here's what we have:"),
                    lambda: f"We carry the {b.join(ns)}.",
                    lambda: b.listing(ns, f"{cap(desc)}:"),
                    lambda: f"You can choose from {b.num(len(ns))} styles: {b.join(ns)}."]
        b.add("list_products", question, sql, cols, rows,
              b.wrap(b.pick("lp+", t(names))), b.wrap(b.pick("lp-", t(bad))),
              f"{fake} is not among the rows")


def k_list_brands(b: Builder, n: int) -> None:
    for cat in b.sample(b.categories, n):
        sql = (f"SELECT DISTINCT b.name AS brand {FROM} WHERE c.name = {q(cat)} "
               f"ORDER BY b.name")
        cols, rows = b.run(sql)
        names = [r[0] for r in rows]
        fake = b.choice([x for x in b.brands if x not in names])
        bad = list(names)
        bad.insert(b.rng.randrange(len(bad) + 1), fake)
        question = b.choice([f"Which brands do you carry for {cat}?",
                             f"Who makes your {cat}?", f"What labels can I find in {cat}?"])

        def t(ns: list[str]) -> list[Callable[[], str]]:
            return [lambda: f"Our {cat} come from {b.join(ns)}.",
                    lambda: b.listing(ns, "These brands:"),
                    lambda: f"{b.join(ns)} — that's {b.num(len(ns))} brands in total.",
                    lambda: f"You'll find {cat} by {b.join(ns)}."]
        b.add("list_brands", question, sql, cols, rows,
              b.wrap(b.pick("lb+", t(names))), b.wrap(b.pick("lb-", t(bad)[:2] + t(bad)[3:])),
              f"{fake} makes no {cat} in the rows")


def k_list_prices(b: Builder, n: int) -> None:
    for desc, where, _ in b.sample(priced_groups(b, 3, 6), n):
        sql = f"SELECT p.name, p.price {FROM} WHERE {where} ORDER BY p.name"
        cols, rows = b.run(sql)
        i, j = sorted(b.rng.sample(range(len(rows)), 2))
        bad = [list(r) for r in rows]
        bad[i][1], bad[j][1] = bad[j][1], bad[i][1]
        question = b.choice([f"What do the {desc} cost?", f"Prices for the {desc}, please.",
                             f"How much are your {desc}?"])
        sep = b.choice([" — ", ": ", " at ", " for "])

        def t(rs: list) -> list[Callable[[], str]]:
            items = [f"{r[0]}{sep}{b.money(r[1])}" for r in rs]
            return [lambda: b.listing(items, "Here are the prices:"),
                    lambda: "; ".join(items) + ".",
                    lambda: " ".join(f"The {r[0]} is {b.money(r[1])}." for r in rs),
                    lambda: b.listing(items, f"{cap(desc)}:")]
        b.add("list_prices", question, sql, cols, rows,
              b.wrap(b.pick("lpr+", t(rows))), b.wrap(b.pick("lpr-", t(bad))),
              f"prices of {rows[i][0]} and {rows[j][0]} are swapped")


def k_group_by_brand(b: Builder, n: int) -> None:
    pool = []
    for cat in b.categories:
        _, rows = b.run(f"SELECT b.name, COUNT(*) {FROM} WHERE c.name = {q(cat)} GROUP BY b.name")
        if 2 <= len(rows) <= 5:
            pool.append(cat)
    for cat in b.sample(pool, n):
        sql = (f"SELECT b.name AS brand, COUNT(*) AS products {FROM} WHERE c.name = {q(cat)} "
               f"GROUP BY b.name ORDER BY products DESC, b.name")
        cols, rows = b.run(sql)
        i = b.rng.randrange(len(rows))
        bad = [list(r) for r in rows]
        bad[i][1] = bad[i][1] + (1 if bad[i][1] == 1 else b.choice([-1, 1, 2]))
        question = b.choice([f"How many {cat} does each brand have?",
                             f"Break down our {cat} by brand."])
        sing = SINGULAR[cat]

        def t(rs: list) -> list[Callable[[], str]]:
            def part(r: list) -> str:
                return f"{r[0]} has {b.num(r[1])} {cat if r[1] != 1 else sing}"
            return [lambda: cap(b.join([part(r) for r in rs])) + ".",
                    lambda: b.listing([f"{r[0]}: {r[1]}" for r in rs], f"{cap(cat)} by brand:"),
                    lambda: f"{rs[0][0]} leads with {b.num(rs[0][1])}; then "
                            + b.join([f"{r[0]} ({r[1]})" for r in rs[1:]]) + ".",
                    lambda: " | ".join(f"{r[0]} – {r[1]}" for r in rs)]
        b.add("group_by_brand", question, sql, cols, rows,
              b.wrap(b.pick("gb+", t(rows)[:2] + (t(rows)[2:] if rows[0][1] > rows[1][1]
                                                  else [t(rows)[3]]))),
              b.wrap(b.pick("gb-", [t(bad)[0], t(bad)[1], t(bad)[3]])),
              f"{rows[i][0]} has {rows[i][1]}, answer says {bad[i][1]}")


def k_group_by_status(b: Builder, n: int) -> None:
    windows = [("2026-03", "2026-06", "between March and May"),
               ("2026-06", "2026-09", "in the summer (June to August)"),
               ("2026-07", "2026-11", "from July to October"),
               ("2026-09", "2026-12", "since September"),
               ("2026-01", "2027-01", "this year"),
               ("2026-05", "2026-08", "from May to July")]
    for lo, hi, label in b.sample(windows, n):
        sql = (f"SELECT status, COUNT(*) AS orders FROM orders WHERE ordered_at >= '{lo}-01' "
               f"AND ordered_at < '{hi}-01' GROUP BY status ORDER BY orders DESC")
        cols, rows = b.run(sql)
        i = b.rng.randrange(len(rows))
        bad = [list(r) for r in rows]
        bad[i][1] += b.choice([1, 2, 3]) if bad[i][1] < 3 else b.choice([-2, -1, 2])
        question = f"How many orders were delivered, returned etc. {label}?"

        def t(rs: list) -> list[Callable[[], str]]:
            return [lambda: b.listing([f"{r[0]}: {r[1]}" for r in rs], "Orders by status:"),
                    lambda: cap(b.join([f"{b.num(r[1])} {'was' if r[1] == 1 else 'were'} {r[0]}"
                                        for r in rs])) + ".",
                    lambda: ", ".join(f"{r[1]} {r[0]}" for r in rs) + ".",
                    lambda: f"Status counts {label}: "
                            + "; ".join(f"{r[0]} = {r[1]}" for r in rs) + "."]
        b.add("group_by_status", question, sql, cols, rows,
              b.wrap(b.pick("gs+", t(rows))), b.wrap(b.pick("gs-", t(bad))),
              f"{rows[i][0]} count is {rows[i][1]}, answer says {bad[i][1]}")


def k_top_n(b: Builder, n: int) -> None:
    pool = []
    for cat in b.categories:
        _, rows = b.run(f"SELECT p.name, p.price {FROM} WHERE c.name = {q(cat)} "
                        f"ORDER BY p.price DESC")
        prices = [r[1] for r in rows]
        names = [r[0] for r in rows]
        if prices[2] != prices[3] and len(set(names[:4])) == 4:
            pool.append((cat, True))
        rp = prices[::-1]
        rn = names[::-1]
        if rp[2] != rp[3] and len(set(rn[:4])) == 4:
            pool.append((cat, False))
    for cat, priciest in b.sample(pool, n):
        order = "DESC" if priciest else "ASC"
        sql = (f"SELECT p.name, p.price {FROM} WHERE c.name = {q(cat)} "
               f"ORDER BY p.price {order} LIMIT 3")
        cols, rows = b.run(sql)
        _, full = b.run(f"SELECT p.name, p.price {FROM} WHERE c.name = {q(cat)} "
                        f"ORDER BY p.price {order}")
        fourth = full[3]
        bad = [list(r) for r in rows]
        i = b.rng.randrange(3)
        bad[i] = list(fourth)
        adj = "most expensive" if priciest else "cheapest"
        question = b.choice([f"What are your three {adj} {cat}?", f"Top 3 {adj} {cat}?"])

        def t(rs: list) -> list[Callable[[], str]]:
            return [lambda: f"Our three {adj} {cat} are the {b.join([r[0] for r in rs])}.",
                    lambda: b.listing([f"{r[0]} ({b.money(r[1])})" for r in rs],
                                      f"The {adj} three:"),
                    lambda: "Top 3 by price: " + ", ".join(f"{k}) {r[0]}"
                                                            for k, r in enumerate(rs, 1)),
                    lambda: " ".join(f"{r[0]}: {b.money(r[1])}." for r in rs)]
        b.add("top_n", question, sql, cols, rows,
              b.wrap(b.pick("top+", t(rows))), b.wrap(b.pick("top-", t(bad))),
              f"{fourth[0]} is not among the three rows")


# --------------------------------------------------------------------------------------------
# orders


STATUS_TEXT = {"delivered": ["has been delivered", "was delivered", "arrived — it's delivered"],
               "shipped": ["has shipped", "is on its way (shipped)", "has been shipped"],
               "returned": ["was returned", "has been returned"],
               "cancelled": ["was cancelled", "has been cancelled"]}


def k_order_facts(b: Builder, n: int) -> None:
    _, ids = b.run("SELECT order_id FROM orders")
    for (oid,) in b.sample(ids, n):
        sql = f"SELECT order_id, ordered_at, status FROM orders WHERE order_id = {oid}"
        cols, rows = b.run(sql)
        _, at, status = rows[0]
        if b.rng.random() < 0.5:
            wst = b.choice([s for s in STATUS_TEXT if s != status])
            wat = at
            error = f"status is {status}, answer says {wst}"
        else:
            d = date.fromisoformat(at[:10])
            wd = date(d.year, d.month + (1 if d.month < 11 else -2), min(d.day, 28))
            wst, wat = status, wd.isoformat() + at[10:]
            error = f"ordered {at[:10]}, answer says {wat[:10]}"
        question = b.choice([f"What's the status of order {oid}?",
                             f"When was order #{oid} placed and where is it now?"])

        def t(a: str, s: str) -> list[Callable[[], str]]:
            return [lambda: f"Order {oid} was placed on {b.date(a)} and "
                            f"{b.choice(STATUS_TEXT[s])}.",
                    lambda: f"Order #{oid}: placed {a[:10]} at {a[11:16]}, status {s}.",
                    lambda: f"It {b.choice(STATUS_TEXT[s])}. The order was placed on "
                            f"{b.date(a)}.",
                    lambda: f"Placed: {b.date(a)}\nStatus: {s}"]
        b.add("order_facts", question, sql, cols, rows,
              b.wrap(b.pick("of+", t(at, status))), b.wrap(b.pick("of-", t(wat, wst))), error)


def k_order_customer(b: Builder, n: int) -> None:
    _, ids = b.run("SELECT order_id FROM orders")
    _, cities = b.run("SELECT DISTINCT city FROM customers")
    for (oid,) in b.sample(ids, n):
        sql = (f"SELECT o.order_id, c.name AS customer, c.city, c.country FROM orders o "
               f"JOIN customers c ON c.customer_id = o.customer_id WHERE o.order_id = {oid}")
        cols, rows = b.run(sql)
        _, name, city, country = rows[0]
        wrong = b.choice([c for (c,) in cities if c != city])
        question = b.choice([f"Who placed order {oid}?", f"Whose order is #{oid}?"])

        def t(ci: str) -> list[Callable[[], str]]:
            return [lambda: f"Order {oid} was placed by {name} from {ci}.",
                    lambda: f"That's {name}'s order — they're based in {ci}.",
                    lambda: f"Customer: {name} ({ci}).",
                    lambda: f"{name}, who lives in {ci}, placed it."]
        b.add("order_customer", question, sql, cols, rows,
              b.wrap(b.pick("oc+", t(city))), b.wrap(b.pick("oc-", t(wrong))),
              f"{name} is in {city}, answer says {wrong}")


def k_order_total(b: Builder, n: int) -> None:
    _, ids = b.run("SELECT order_id FROM order_items GROUP BY order_id HAVING COUNT(*) > 1")
    ids = [i for (i,) in ids]
    _, multi = b.run("SELECT DISTINCT order_id FROM order_items WHERE quantity > 1")
    multi = {i for (i,) in multi}
    picks = b.sample([i for i in ids if i in multi], n // 2 + 1)
    picks += b.sample([i for i in ids if i not in picks], n - len(picks))
    for oid in picks:
        sql = (f"SELECT p.name, oi.size, oi.quantity, oi.unit_price FROM order_items oi "
               f"JOIN products p ON p.product_id = oi.product_id WHERE oi.order_id = {oid}")
        cols, rows = b.run(sql)
        total = round(sum(r[2] * r[3] for r in rows), 2)
        flat = round(sum(r[3] for r in rows), 2)
        wrong = flat if flat != total else round(total + b.choice([-10, 10, 20]), 2)
        question = b.choice([f"What did order {oid} cost in total?",
                             f"What's the total of order #{oid}?"])

        def t(v: float) -> list[Callable[[], str]]:
            return [lambda: f"The total for order {oid} comes to {b.money(v)}.",
                    lambda: f"{b.money(v)} altogether.",
                    lambda: "Items:\n" + "\n".join(f"- {r[0]} ({r[1]}) × {r[2]} at "
                                                   f"{b.money(r[3])}" for r in rows)
                            + f"\nTotal: {b.money(v)}",
                    lambda: f"Order #{oid} totals {b.money(v)} for {b.num(len(rows))} "
                            f"different items."]
        b.add("order_total", question, sql, cols, rows,
              b.wrap(b.pick("ot+", t(total))), b.wrap(b.pick("ot-", t(wrong))),
              f"total is {total:.2f}, answer says {wrong:.2f}"
              + (" (quantities ignored)" if wrong == flat else ""))


def k_orders_per_month(b: Builder, n: int) -> None:
    starts = [3, 4, 5, 6, 7, 8, 9]
    for s in b.sample(starts, n):
        lo, hi = f"2026-{s:02d}-01", f"2026-{s + 3:02d}-01"
        sql = (f"SELECT substr(ordered_at, 1, 7) AS month, COUNT(*) AS orders FROM orders "
               f"WHERE ordered_at >= '{lo}' AND ordered_at < '{hi}' GROUP BY month "
               f"ORDER BY month")
        cols, rows = b.run(sql)
        i = b.rng.randrange(len(rows))
        bad = [list(r) for r in rows]
        bad[i][1] += b.choice([-2, -1, 1, 2]) if bad[i][1] > 2 else b.choice([1, 2])
        months = [MONTHS[int(r[0][5:]) - 1] for r in rows]
        question = f"How many orders did we get per month from {months[0]} to {months[-1]}?"

        def t(rs: list) -> list[Callable[[], str]]:
            out = [lambda: ", ".join(f"{m}: {r[1]}" for m, r in zip(months, rs, strict=True)) + ".",
                   lambda: "We had " + b.join([f"{b.num(r[1])} orders in {m}"
                                               for m, r in zip(months, rs, strict=True)]) + ".",
                   lambda: b.listing([f"{r[0]}: {r[1]}" for r in rs], "Orders per month:")]
            counts = [r[1] for r in rs]
            top = max(range(len(rs)), key=lambda k: counts[k])
            if counts.count(counts[top]) == 1:
                rest = [k for k in range(len(rs)) if k != top]
                out.append(lambda: f"{months[top]} was the busiest with {counts[top]} orders; "
                                   + b.join([f"{months[k]} had {counts[k]}" for k in rest])
                                   + ".")
            return out
        b.add("orders_per_month", question, sql, cols, rows,
              b.wrap(b.pick("opm+", t(rows))), b.wrap(b.pick("opm-", t(bad)[:3])),
              f"{rows[i][0]} has {rows[i][1]} orders, answer says {bad[i][1]}")


def k_revenue_month(b: Builder, n: int) -> None:
    _, ms = b.run("SELECT substr(o.ordered_at, 1, 7) FROM orders o JOIN order_items oi "
                  "ON oi.order_id = o.order_id GROUP BY 1 HAVING SUM(oi.quantity * "
                  "oi.unit_price) >= 1000")
    for (m,) in b.sample(ms, n):
        sql = (f"SELECT ROUND(SUM(oi.quantity * oi.unit_price), 2) AS revenue FROM orders o "
               f"JOIN order_items oi ON oi.order_id = o.order_id "
               f"WHERE substr(o.ordered_at, 1, 7) = '{m}'")
        cols, rows = b.run(sql)
        rev = rows[0][0]
        wrong = round(rev + b.choice([-1000, 1000, -300, 400]), 2)
        month = f"{MONTHS[int(m[5:]) - 1]} {m[:4]}"
        question = b.choice([f"What was our revenue in {month}?",
                             f"How much did we sell in {month}?"])

        def t(v: float) -> list[Callable[[], str]]:
            return [lambda: f"Revenue in {month} was {b.money(v)}.",
                    lambda: f"We took {b.money(v)} in {month}.",
                    lambda: f"{month}: {b.money(v)} in sales.",
                    lambda: f"Roughly {b.round_money(round(v / 100) * 100)} — "
                            f"{b.money(v)} to be exact."]
        b.add("revenue_month", question, sql, cols, rows,
              b.wrap(b.pick("rev+", t(rev))), b.wrap(b.pick("rev-", t(wrong)[:3])),
              f"revenue is {rev:.2f}, answer says {wrong:.2f}")


def k_stock_value(b: Builder, n: int) -> None:
    for cat in b.sample(b.categories, n):
        sql = (f"SELECT ROUND(SUM(p.price * s.stock), 2) AS stock_value, SUM(s.stock) AS units "
               f"FROM products p JOIN categories c ON c.category_id = p.category_id "
               f"JOIN product_sizes s ON s.product_id = p.product_id WHERE c.name = {q(cat)}")
        cols, rows = b.run(sql)
        val, units = rows[0]
        if b.rng.random() < 0.6:
            wval, wunits = round(val + b.choice([-1000, 1000, 2000, -500]), 2), units
            error = f"stock value is {val:.2f}, answer says {wval:.2f}"
        else:
            wval, wunits = val, units + b.choice([-10, 10, 20])
            error = f"units are {units}, answer says {wunits}"
        question = b.choice([f"What's the value of our {cat} stock?",
                             f"How much is the {cat} inventory worth?"])

        def t(v: float, u: int) -> list[Callable[[], str]]:
            return [lambda: f"{u} units of {cat} in stock, worth {b.money(v)} in total.",
                    lambda: f"The {cat} stock is worth {b.money(v)} ({u} pieces).",
                    lambda: f"Stock value: {b.money(v)}\nUnits: {u}",
                    lambda: f"We hold {u} {cat} with a total value of {b.money(v)}."]
        b.add("stock_value", question, sql, cols, rows,
              b.wrap(b.pick("sv+", t(val, units))), b.wrap(b.pick("sv-", t(wval, wunits))),
              error)


# --------------------------------------------------------------------------------------------
# empty results and unsupported extras


def k_empty_result(b: Builder, n: int) -> None:
    cands = []
    for cat in b.categories:
        for col in ("red", "yellow", "pink", "green", "orange", "purple"):
            cands.append((f"{col} {cat}", f"c.name = {q(cat)} AND p.colour = {q(col)}", cat))
        cands.append((f"{cat} under 20 euros", f"c.name = {q(cat)} AND p.price < 20", cat))
        for br in b.brands:
            cands.append((f"{cat} by {br}", f"c.name = {q(cat)} AND b.name = {q(br)}", cat))
    empty = []
    for desc, where, cat in cands:
        _, rows = b.run(f"SELECT p.name {FROM} WHERE {where}")
        if not rows:
            empty.append((desc, where, cat))
    for desc, where, cat in b.sample(empty, n):
        sql = f"SELECT p.name, p.price {FROM} WHERE {where}"
        cols, rows = b.run(sql)
        real = b.choice([p for p in b.unique if p["category"] == cat])
        question = b.choice([f"Do you have any {desc}?", f"I'm looking for {desc}.",
                             f"Show me {desc}."])
        good = b.pick("em+", [
            lambda: f"Sorry, we don't have any {desc}.",
            lambda: "Nothing matched that — we don't carry anything like that right now.",
            lambda: b.wrap(f"I couldn't find any {desc} in our catalogue.", "neg", True),
            lambda: "No results, I'm afraid.",
            lambda: f"We currently have no {desc}. Would you like to see something similar?"])
        bad = b.pick("em-", [
            lambda: f"Yes! The {real['name']} would be perfect — it's {b.money(real['price'])}.",
            lambda: f"We have two options: the {real['name']} and the Classic "
                    f"{cap(SINGULAR[cat])}.",
            lambda: f"Sure, try the {real['name']}."])
        b.add("empty_result", question, sql, cols, rows, b.wrap(good), b.wrap(bad),
              "query returned no rows; answer invents a result")


def k_extra_fact(b: Builder, n: int) -> None:
    facts = list(EXTRA_FACTS)
    b.rng.shuffle(facts)
    for p in b.sample(b.unique, n):
        sql = (f"SELECT p.name, b.name AS brand, p.colour, p.price {FROM} "
               f"WHERE p.name = {q(p['name'])}")
        cols, rows = b.run(sql)
        _, brand, colour, price = rows[0]
        fact = facts.pop()
        question = b.choice([f"Can you tell me about the {p['name']}?",
                             f"Is the {p['name']} any good? What does it cost?",
                             f"Info on the {p['name']}, please."])
        base = b.pick("xf", [
            lambda: f"The {p['name']} is by {brand}, comes in {colour} and costs "
                    f"{b.money(price)}.",
            lambda: f"It's {an(colour)} {brand} piece priced at {b.money(price)}.",
            lambda: f"{brand} makes it; it's {colour} and sells for {b.money(price)}.",
            lambda: f"Brand: {brand}. Colour: {colour}. Price: {b.money(price)}.",
            lambda: f"You're looking at {b.money(price)} for this {colour} design from "
                    f"{brand}."])
        if b.rng.random() < 0.5:
            bad = base + " " + fact
        else:
            bad = fact + " " + base
        closer = b.choice(["", " Anything else?", " Happy to help."])
        b.add("extra_fact", question, sql, cols, rows, base + closer, bad + closer,
              f"adds a claim no column holds: {fact!r}")


KINDS: list[tuple[Callable[[Builder, int], None], int]] = [
    (k_attr_brand, PER_KIND), (k_attr_colour, PER_KIND), (k_attr_material, PER_KIND),
    (k_attr_null, 4), (k_attr_gender, PER_KIND), (k_attr_multi, PER_KIND),
    (k_date_added, PER_KIND), (k_price_exact, PER_KIND), (k_price_hedged, 8),
    (k_stock_count, PER_KIND + 1), (k_in_stock, PER_KIND), (k_sold_out, PER_KIND),
    (k_sizes_listed, PER_KIND), (k_size_availability, PER_KIND + 1), (k_count_rows, PER_KIND),
    (k_count_column, PER_KIND), (k_sum_rows, PER_KIND), (k_avg_column, PER_KIND),
    (k_avg_rows, PER_KIND), (k_minmax_column, PER_KIND),
    (lambda b, n: k_superlative(b, n, True), PER_KIND),
    (lambda b, n: k_superlative(b, n, False), PER_KIND),
    (k_stock_extreme, PER_KIND), (k_comparative, PER_KIND), (k_difference, PER_KIND),
    (k_range_rows, PER_KIND), (k_ordered_list, PER_KIND), (k_list_products, PER_KIND),
    (k_list_brands, PER_KIND), (k_list_prices, PER_KIND), (k_group_by_brand, PER_KIND),
    (k_group_by_status, PER_KIND), (k_top_n, PER_KIND), (k_order_facts, PER_KIND),
    (k_order_customer, PER_KIND), (k_order_total, PER_KIND), (k_orders_per_month, PER_KIND),
    (k_revenue_month, PER_KIND), (k_stock_value, PER_KIND), (k_empty_result, PER_KIND),
    (k_extra_fact, PER_KIND + 1),
]


def build(seed: int = SEED) -> list[dict[str, Any]]:
    b = Builder(seed)
    for fn, n in KINDS:
        fn(b, n)
    return b.items


def main() -> None:
    items = build()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items),
                   encoding="utf-8")
    per_kind = Counter(i["kind"] for i in items)
    good = sum(i["supported"] for i in items)
    print(f"wrote {len(items)} items ({good} correct, {len(items) - good} with one planted "
          f"error; {len(per_kind)} kinds) to {OUT.relative_to(HERE.parent)}")
    for kind, k in per_kind.items():
        print(f"  {kind:<20} {k}")


if __name__ == "__main__":
    main()
