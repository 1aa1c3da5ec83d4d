"""Held-out set C of answers built from SQL rows: written once, measured once.

    python benchmarks/row_claims_c.py          # (re)write data/row_claims/items_c.jsonl

What it is. A labelled set for estimating how well a faithfulness judge generalises to
answers it was not developed against. Every item is a question about the shop scenario's
catalog (``scenarios/shop/catalog.sql``, loaded into an in-memory SQLite database), the SQL a
text-to-SQL step would run for it, the rows that SQL really returns (``columns``, typed
``rows``), those rows rendered as the shop assistant's generator sees them (``contexts``, via
``row_claims.render_rows``) and an ``answer``: either fully supported by the rows
(``supported: true``, ``error: null``) or with exactly one planted error (``supported: false``,
``error`` names it). Items come in pairs, one correct and one wrong answer over the same
question, SQL and rows, so the labels are exactly balanced; pairs are shuffled and the order
inside a pair is random.

How it was built. Authored independently of the development sets (A, B) and of the judge: the
author read only ``row_claims.py``'s module docstring and its helpers ``catalog``, ``query``,
``render_rows`` — not its ``build()``, not ``row_claims_b.py``, not the judge's source, not the
other sets' items — and never ran a judge on this set. It is meant as a held-out set, measured
ONCE; do not tune anything against it, and do not regenerate it with a different seed to get a
friendlier number. It is deterministic: ``random.Random(seed)`` (default 32) drives every
choice, and every value comes from the catalog.

Answers are written as if by four different authors (a "voice" per answer, drawn at random):
a terse assistant, a chatty and warm one (American spelling: color, gray, catalog, canceled),
a formal report-like one and human support agents (British spelling, greetings and
sign-offs). Openers and closings never carry claims. Money is written in several formats
(€89, €89.00, 89.00 EUR, EUR 89.00, 89 euros, 89,00 €), counts in digits or number words,
dates as ISO, "12 March 2026", "March 12, 2026", "12 Mar 2026", "12th March 2026", sizes as
codes or words, lists inline, bulleted or numbered. Each kind has several answer templates
(about 150 overall); the correct and the wrong answer of a pair draw their template
independently, and a wrong answer differs from what its own template would say with the
correct values (checked when building). A few choices are forced rather than drawn so that
every required phrasing occurs: each hedge ("about", "around", "roughly", "approximately",
"close to", "in the region of") and bound ("just under", "a bit over", "under", "less than",
"more than"), a grey product answered as "gray", a cancelled order answered as "canceled".

Labels were checked by reading: every item once while building, then 25 random items
against their rows. ``main()`` prints the counts.

Kinds (40; 4 pairs each, except price_hedged with 6 and price_bound with 5, so that every
hedge and bound phrase occurs on both sides: 163 pairs, 326 items), with the error planted
in the wrong answer:

  attr_colour, attr_material, attr_brand   one attribute; wrong value (clearly different:
                    no near-synonym colours or materials of the same family)
  attrs_several     brand, colour, material, price together; one of them wrong
  price_exact       exact price; a different price
  price_hedged      about/around/roughly/approximately/close to X; X far off
  price_bound       just under / a bit over / under / less than / more than X; bound false
  stock_count       "only N left", "N units"; wrong N
  in_stock          stock > 0: available/in stock/orderable; says sold out
  sold_out          stock 0: sold out/out of stock/unavailable; says available
  sizes_codes       in-stock sizes as codes (XS, 32, EU 42); one sold-out or absent size added
  sizes_words       in-stock sizes in words (small, extra large); one size added
  count_rows_digits / count_rows_words   number of rows; wrong count
  count_column      a COUNT(*) column; wrong count
  avg_column, sum_column, minmax_column   AVG / SUM / MIN or MAX column; wrong value
  sum_computed      total stock summed from rows; wrong total
  avg_computed      mean price computed from rows; wrong mean
  cheapest, most_expensive, most_stock, newest   superlatives; another row named
  compare_two       which of two is cheaper/dearer; comparison reversed
  price_difference  difference between two prices; wrong difference
  price_range       lowest to highest price; one end wrong
  ordered_list      rows ordered by price; two neighbours swapped
  list_extra        list of names; one invented product added, or a real product that the
                    query did not return
  list_prices_swapped   names with prices; two prices swapped
  group_brand, group_category, group_status   grouped counts; one count wrong
  order_date, order_status, order_total   an order's date / status / total (with
                    quantities); wrong date / status / total
  empty_result      no rows: "nothing matches"; invents a product
  extra_fact        a correct answer; plus one fact not in the rows
  null_value        a NULL material: "not listed"; invents a material
  customer          a customer's city or join date; wrong city or date
"""
from __future__ import annotations

import json
import math
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from row_claims import catalog, query, render_rows  # noqa: E402

OUT = HERE / "data" / "row_claims" / "items_c.jsonl"
SEED = 32
PAIRS = 4

VOICES = ("terse", "warm", "formal", "agent")

# ---------------------------------------------------------------- formatting helpers

ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen").split()
TENS = {2: "twenty", 3: "thirty", 4: "forty", 5: "fifty", 6: "sixty", 7: "seventy",
        8: "eighty", 9: "ninety"}
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
SIZE_WORD = {"XS": "extra small", "S": "small", "M": "medium", "L": "large",
             "XL": "extra large", "XXL": "double extra large", "One Size": "one size"}
LETTER_ORDER = ["XS", "S", "M", "L", "XL", "XXL"]


def words(n: int) -> str:
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("-" + ONES[n % 10] if n % 10 else "")
    return str(n)


def art(word: str) -> str:
    vowel = word[:1].lower() in "aeiou" and not word.lower().startswith("uni")
    return ("an " if vowel else "a ") + word


def cap1(s: str) -> str:
    return s[:1].upper() + s[1:]


def lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def ordinal(d: int) -> str:
    suf = "th" if 11 <= d % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(d % 10, "th")
    return f"{d}{suf}"


class Fmt:
    """How one answer writes values. Every choice is fixed from ``seed`` so the same template
    rendered twice with the same seed writes values the same way."""

    MONEY = {"terse": ["sym", "sym", "comma_tight"], "warm": ["sym", "euros", "sym"],
             "formal": ["code_after", "code_before", "sym2"],
             "agent": ["sym2", "comma", "sym"]}
    DATES = {"terse": ["iso", "short"], "warm": ["mdy", "mdy_short"],
             "formal": ["dmy", "iso"], "agent": ["dmy", "ord", "short"]}

    def __init__(self, voice: str, seed: int):
        r = random.Random(f"fmt-{seed}")
        self.voice = voice
        self.money = r.choice(self.MONEY[voice])
        self.dates = r.choice(self.DATES[voice])
        self.use_words = voice == "warm" or (voice == "agent" and r.random() < 0.4)
        self.size_words = voice == "warm" and r.random() < 0.6
        self.us = voice == "warm"
        self._pick = random.Random(f"pick-{seed}")

    def pick(self, options):
        return self._pick.choice(options)

    # money
    def eur(self, x: float, whole: bool = False) -> str:
        x = round(float(x), 2)
        if whole:
            x = float(round(x))
        integral = abs(x - round(x)) < 1e-9
        en2 = f"{x:,.2f}"
        en = f"{int(round(x)):,}" if integral else en2
        de2 = en2.replace(",", "_").replace(".", ",").replace("_", ".")
        de = en.replace(",", ".") if integral else de2
        m = self.money
        if m == "sym":
            return "€" + en
        if m == "sym2":
            return "€" + (en if whole else en2)
        if m == "comma_tight":
            return (de if whole else de2) + "€"
        if m == "comma":
            return (de if whole else de2) + " €"
        if m == "euros":
            return en + " euros"
        if m == "code_after":
            return (en if whole else en2) + " EUR"
        return "EUR " + (en if whole else en2)

    # numbers
    def num(self, n: int) -> str:
        return words(n) if self.use_words and n <= 20 else str(n)

    # dates
    def date(self, iso: str) -> str:
        y, m, d = int(iso[:4]), int(iso[5:7]), int(iso[8:10])
        s = self.dates
        if s == "iso":
            return iso[:10]
        if s == "short":
            return f"{d} {MONTHS[m - 1][:3]} {y}"
        if s == "dmy":
            return f"{d} {MONTHS[m - 1]} {y}"
        if s == "mdy":
            return f"{MONTHS[m - 1]} {d}, {y}"
        if s == "mdy_short":
            return f"{MONTHS[m - 1][:3]} {d}, {y}"
        return f"{ordinal(d)} {MONTHS[m - 1]} {y}"

    def time(self, hms: str) -> str:
        h, mi = int(hms[:2]), hms[3:5]
        if self.us:
            return f"{(h % 12) or 12}:{mi} {'AM' if h < 12 else 'PM'}"
        return f"{h:02d}:{mi}"

    # sizes
    def size(self, code: str) -> str:
        """A size as a noun phrase to follow 'in': 'size M', 'medium', 'EU 42', 'waist 32'."""
        if code in SIZE_WORD:
            if code == "One Size":
                return "one size"
            return SIZE_WORD[code] if self.size_words else f"size {code}"
        n = int(code)
        if n <= 34:
            return f"waist {code}" if self.size_words else f"size {code}"
        return f"EU {code}" if self.size_words or self.voice == "formal" else f"size {code}"

    def size_code(self, code: str) -> str:
        if code in SIZE_WORD:
            return code
        return code if int(code) <= 34 else f"EU {code}"

    # words
    def colour_word(self) -> str:
        return "color" if self.us else "colour"

    def cat_word(self) -> str:
        return "catalog" if self.us else "catalogue"

    def colour(self, c: str) -> str:
        return c.replace("grey", "gray") if self.us else c

    def join(self, items: list[str]) -> str:
        items = list(items)
        if len(items) == 1:
            return items[0]
        if self.voice == "terse":
            return ", ".join(items)
        if self.us:
            return ", ".join(items[:-1]) + (", and " if len(items) > 2 else " and ") + items[-1]
        return ", ".join(items[:-1]) + " and " + items[-1]

    def bullets(self, lines: list[str], numbered: bool = False) -> str:
        if numbered:
            sep = self.pick([". ", ") "])
            return "\n".join(f"{i}{sep}{line}" for i, line in enumerate(lines, 1))
        mark = self.pick(["- ", "• ", "* "])
        return "\n".join(mark + line for line in lines)


OPEN = {
    "terse": ["", "", "", ""],
    "warm": ["Great question! ", "Happy to help! ", "Ooh, good one! ", "Sure thing! ",
             "Hi there! ", ""],
    "formal": ["", "Based on the records retrieved:\n", "Please find the requested "
               "information below.\n", "Summary of the query results:\n"],
    "agent": ["Hi there,\n\n", "Hello, and thanks for getting in touch!\n\n",
              "Hi! Thanks for your message.\n\n", "Hey,\n\n", "Good afternoon,\n\n"],
}
CLOSE = {
    "terse": ["", "", ""],
    "warm": [" Hope that helps!", " Happy shopping! 🛍️", " Let me know if you'd like "
             "anything else!", " Enjoy!", ""],
    "formal": ["", "", "\n\nPlease let me know if further detail is required."],
    "agent": ["\n\nKind regards,\nPriya – Customer Care", "\n\nBest,\nTom",
              "\n\nCheers,\nJess (Support team)", "\n\nThanks,\nMarta",
              "\n\nIs there anything else I can help with?"],
}

Template = tuple[str, Callable[[dict, Fmt], str]]

PLURAL = {"is": "are", "comes": "come", "costs": "cost", "retails": "retail",
          "carries": "carry", "exceeds": "exceed", "has": "have"}


def plural_fix(text: str) -> str:
    """Product names such as 'Wide-Leg Linen Trousers' take a plural verb."""
    def fix(m: re.Match) -> str:
        before = text[:m.start()]
        if before.endswith(("for the ", "of the ")):  # "the price of the … Trousers is"
            return m.group(0)
        return f"{m.group(1)} {PLURAL[m.group(2)]}"
    return re.sub(r"((?:[A-Z][\w-]* )*Trousers) (is|comes|costs|retails|carries|exceeds|has)"
                  r"\b", fix, text)


# ---------------------------------------------------------------- builder


class Builder:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.conn = catalog()
        self.pairs: list[list[dict]] = []
        self.templates_used: set[tuple[str, int]] = set()

    def q(self, sql: str) -> tuple[list[str], list[list]]:
        return query(self.conn, sql)

    def col(self, sql: str) -> list:
        return [r[0] for r in self.q(sql)[1]]

    def pair(self, kind: str, question: str, sql: str, cols: list[str], rows: list[list],
             templates: list[Template], good: dict, bad: dict, error: str) -> None:
        out = []
        for supported, v in ((True, good), (False, bad)):
            ti = self.rng.randrange(len(templates))
            voice, fn = templates[ti]
            self.templates_used.add((kind, ti))
            seed = self.rng.randrange(10 ** 9)
            text = fn(v, Fmt(voice, seed))
            if not supported:
                same = fn(good, Fmt(voice, seed))
                assert text != same, (kind, text)
            close = self.rng.choice(CLOSE[voice])
            if "\n" in text and close and not close.startswith("\n"):
                close = "\n\n" + close.strip()
            text = self.rng.choice(OPEN[voice]) + plural_fix(text) + close
            out.append({"kind": kind, "question": question, "sql": sql,
                        "columns": list(cols), "rows": [list(r) for r in rows],
                        "contexts": render_rows(cols, rows), "answer": text,
                        "supported": supported, "error": None if supported else error})
        self.rng.shuffle(out)
        self.pairs.append(out)


# ---------------------------------------------------------------- shared data

CAT_JOIN = ("FROM products p JOIN categories c ON c.category_id = p.category_id "
            "JOIN brands b ON b.brand_id = p.brand_id")
GENDER_ADJ = {"women": "women's", "men": "men's", "unisex": "unisex"}

WRONG_COLOURS = ["red", "pink", "yellow", "orange", "purple", "green", "white", "black"]
COLOUR_CLASH = {  # wrong colours that would be too close to the true one
    "black": {"black"}, "charcoal": {"black"}, "white": {"white"},
    "cream": {"white", "yellow"}, "ivory": {"white", "yellow"}, "ecru": {"white", "yellow"},
    "champagne": {"white", "yellow", "pink"}, "burgundy": {"red", "pink", "purple"},
    "red": {"red", "pink", "orange"}, "olive": {"green"}, "emerald": {"green"},
    "camel": {"yellow", "orange"}, "tan": {"yellow", "orange"}, "cognac": {"orange", "red"},
    "sand": {"yellow"}, "beige": {"yellow"}, "stone": {"yellow"}, "taupe": set(),
    "yellow": {"yellow", "orange"},
}
MATERIAL_FAMILY = [
    {"wool", "merino wool", "lambswool", "wool blend", "recycled wool", "cashmere",
     "mohair blend"},
    {"cotton", "organic cotton", "waxed cotton", "denim", "raw denim", "canvas",
     "cotton/elastane"},
    {"polyester", "recycled polyester", "nylon"},
    {"leather", "suede", "nubuck"},
    {"silk", "satin", "viscose"},
    {"linen"},
]
WRONG_MATERIALS = ["linen", "silk", "leather", "wool", "cotton", "polyester", "cashmere",
                   "denim"]


def fmt_err(x: Any) -> str:
    return f"{x:.2f}" if isinstance(x, float) else str(x)


def wrong_colour(rng: random.Random, c: str) -> str:
    bad = COLOUR_CLASH.get(c, set()) | {c}
    return rng.choice([x for x in WRONG_COLOURS if x not in bad])


def wrong_material(rng: random.Random, m: str) -> str:
    fam = next((f for f in MATERIAL_FAMILY if m in f), {m})
    return rng.choice([x for x in WRONG_MATERIALS if x not in fam and x != m])


def product_specs(b: Builder) -> list[tuple[str, str]]:
    """(description, WHERE clause) of product lists: by category, category and gender,
    brand, brand and category."""
    specs = []
    for cat in b.col("SELECT name FROM categories ORDER BY category_id"):
        specs.append((cat, f"c.name = {lit(cat)}"))
        for g, adj in GENDER_ADJ.items():
            specs.append((f"{adj} {cat}", f"c.name = {lit(cat)} AND p.gender = {lit(g)}"))
    for brand in b.col("SELECT name FROM brands ORDER BY brand_id"):
        specs.append((f"{brand} products", f"b.name = {lit(brand)}"))
        for cat in b.col("SELECT DISTINCT c.name " + CAT_JOIN + f" WHERE b.name = {lit(brand)}"):
            specs.append((f"{brand} {cat}", f"b.name = {lit(brand)} AND c.name = {lit(cat)}"))
    return specs


def list_candidates(b: Builder, select: str, lo: int, hi: int, order: str = "p.name",
                    check: Callable[[list[str], list[list]], bool] | None = None):
    out = []
    for desc, where in product_specs(b):
        sql = f"SELECT {select} {CAT_JOIN} WHERE {where} ORDER BY {order}"
        cols, rows = b.q(sql)
        if not lo <= len(rows) <= hi:
            continue
        names = [r[0] for r in rows]
        if len(set(names)) != len(names):
            continue
        if check and not check(cols, rows):
            continue
        out.append((desc, sql, cols, rows))
    return out


def sample(b: Builder, pool: list, k: int = PAIRS) -> list:
    assert len(pool) >= k, (len(pool), k)
    return b.rng.sample(pool, k)


def unique_names(b: Builder, where: str = "1=1") -> list[str]:
    return b.col(f"SELECT p.name {CAT_JOIN} WHERE {where} GROUP BY p.name "
                 "HAVING COUNT(*) = 1 ORDER BY p.name")


def wrong_price(rng: random.Random, p: float) -> float:
    deltas = [d for d in (10, 20, 30, 40, -10, -20, -30) if p + d > 5]
    return round(p + rng.choice(deltas), 2)


def units(n: int, f: Fmt | None = None) -> str:
    text = f.num(n) if f else str(n)
    return f"{text} unit" if n == 1 else f"{text} units"


def shift(rng: random.Random, n: int, lo: int = 1, hi: int = 3) -> int:
    """A wrong count near ``n``; never 0 or 1, so a wrong answer is never ungrammatical."""
    opts = [n + d for d in range(lo, hi + 1)] + [n - d for d in range(lo, hi + 1) if n - d >= 2]
    return rng.choice(opts)


# ---------------------------------------------------------------- kinds: attributes

T_COLOUR: list[Template] = [
    ("terse", lambda v, f: f"{f.colour(v['c']).capitalize()}."),
    ("terse", lambda v, f: f"{v['name']}: {f.colour(v['c'])}."),
    ("warm", lambda v, f: f"The {v['name']} comes in {f.colour(v['c'])}!"),
    ("warm", lambda v, f: f"That one's {f.colour(v['c'])} 😊 — the only {f.colour_word()} "
                          f"listed for the {v['name']}."),
    ("formal", lambda v, f: f"The colour recorded for the {v['name']} is {v['c']}."),
    ("agent", lambda v, f: f"The {v['name']} is {f.colour(v['c'])}."),
]


def k_colour(b: Builder) -> None:
    """One of the four products is grey and answered by the warm assistant ("gray")."""
    grey = b.rng.choice(unique_names(b, "p.colour = 'grey'"))
    others = [n for n in unique_names(b) if n != grey]
    for name in [grey] + sample(b, others, PAIRS - 1):
        templates = [t for t in T_COLOUR if t[0] == "warm"] if name == grey else T_COLOUR
        sql = f"SELECT name, colour FROM products WHERE name = {lit(name)}"
        cols, rows = b.q(sql)
        c = rows[0][1]
        bad = wrong_colour(b.rng, c)
        q = b.rng.choice([f"What colour is the {name}?", f"what color is the {name}",
                          f"Which colour does the {name} come in?"])
        b.pair("attr_colour", q, sql, cols, rows, templates, {"name": name, "c": c},
               {"name": name, "c": bad}, f"colour: says {bad}, the row says {c}")


T_MATERIAL: list[Template] = [
    ("terse", lambda v, f: f"{v['m'].capitalize()}."),
    ("terse", lambda v, f: f"Material: {v['m']}."),
    ("warm", lambda v, f: f"The {v['name']} is made from {v['m']} ✨"),
    ("formal", lambda v, f: f"The material on record for the {v['name']} is {v['m']}."),
    ("agent", lambda v, f: f"The {v['name']} is made of {v['m']}."),
    ("agent", lambda v, f: f"I've checked and the {v['name']} is listed as {v['m']}."),
]


def k_material(b: Builder) -> None:
    for name in sample(b, unique_names(b, "p.material IS NOT NULL")):
        sql = f"SELECT name, material FROM products WHERE name = {lit(name)}"
        cols, rows = b.q(sql)
        m = rows[0][1]
        bad = wrong_material(b.rng, m)
        q = b.rng.choice([f"What is the {name} made of?", f"What material is the {name}?",
                          f"{name} - fabric?"])
        b.pair("attr_material", q, sql, cols, rows, T_MATERIAL, {"name": name, "m": m},
               {"name": name, "m": bad}, f"material: says {bad}, the row says {m}")


T_BRAND: list[Template] = [
    ("terse", lambda v, f: f"{v['brand']}."),
    ("terse", lambda v, f: f"Brand: {v['brand']}."),
    ("warm", lambda v, f: f"That's {art(v['brand'])} piece! The {v['name']} is one of theirs."),
    ("formal", lambda v, f: f"The {v['name']} is produced by {v['brand']}."),
    ("agent", lambda v, f: f"The {v['name']} is made by {v['brand']}."),
]


def k_brand(b: Builder) -> None:
    brands = b.col("SELECT name FROM brands")
    for name in sample(b, unique_names(b)):
        sql = (f"SELECT p.name, b.name AS brand FROM products p JOIN brands b "
               f"ON b.brand_id = p.brand_id WHERE p.name = {lit(name)}")
        cols, rows = b.q(sql)
        br = rows[0][1]
        bad = b.rng.choice([x for x in brands if x != br])
        q = b.rng.choice([f"Who makes the {name}?", f"Which brand is the {name} from?",
                          f"what brand is {name}"])
        b.pair("attr_brand", q, sql, cols, rows, T_BRAND, {"name": name, "brand": br},
               {"name": name, "brand": bad}, f"brand: says {bad}, the row says {br}")


T_SEVERAL: list[Template] = [
    ("terse", lambda v, f: f"{v['name']} — {v['brand']}, {f.colour(v['c'])}, {v['m']}, "
                           f"{f.eur(v['p'])}."),
    ("warm", lambda v, f: f"The {v['name']} is by {v['brand']}: it's {f.colour(v['c'])}, made "
                          f"of {v['m']}, and it's {f.eur(v['p'])}. It's listed as "
                          f"{art(GENDER_ADJ[v['g']])} style."),
    ("formal", lambda v, f: f"Product details for the {v['name']}:\n" + f.bullets([
        f"Brand: {v['brand']}", f"Colour: {v['c']}", f"Material: {v['m']}",
        f"Price: {f.eur(v['p'])}"])),
    ("agent", lambda v, f: f"The {v['name']} is from {v['brand']}. It comes in "
                           f"{f.colour(v['c'])}, it's made from {v['m']} and it costs "
                           f"{f.eur(v['p'])}."),
    ("agent", lambda v, f: f"Here are the details: {v['brand']}, {v['m']}, "
                           f"{f.colour(v['c'])}, {f.eur(v['p'])}."),
]


def k_several(b: Builder) -> None:
    brands = b.col("SELECT name FROM brands")
    fields = ["c", "m", "brand", "p"]
    b.rng.shuffle(fields)
    for i, name in enumerate(sample(b, unique_names(b, "p.material IS NOT NULL"))):
        sql = (f"SELECT p.name, b.name AS brand, p.colour, p.material, p.price, p.gender "
               f"FROM products p JOIN brands b ON b.brand_id = p.brand_id "
               f"WHERE p.name = {lit(name)}")
        cols, rows = b.q(sql)
        _, br, c, m, p, g = rows[0]
        good = {"name": name, "brand": br, "c": c, "m": m, "p": p, "g": g}
        bad = dict(good)
        field = fields[i]
        if field == "c":
            bad["c"] = wrong_colour(b.rng, c)
        elif field == "m":
            bad["m"] = wrong_material(b.rng, m)
        elif field == "brand":
            bad["brand"] = b.rng.choice([x for x in brands if x != br])
        else:
            bad["p"] = wrong_price(b.rng, p)
        label = {"c": "colour", "m": "material", "brand": "brand", "p": "price"}[field]
        q = b.rng.choice([f"Tell me about the {name}.", f"Can you give me the details of the "
                          f"{name}?", f"{name} specs please"])
        b.pair("attrs_several", q, sql, cols, rows, T_SEVERAL, good, bad,
               f"{label}: says {fmt_err(bad[field])}, the row says {fmt_err(good[field])}")


# ---------------------------------------------------------------- kinds: prices

T_PRICE: list[Template] = [
    ("terse", lambda v, f: f"{f.eur(v['p'])}."),
    ("terse", lambda v, f: f"{v['name']}: {f.eur(v['p'])}"),
    ("warm", lambda v, f: f"The {v['name']} is {f.eur(v['p'])}!"),
    ("warm", lambda v, f: f"You can get the {v['name']} for {f.eur(v['p'])} 💸"),
    ("formal", lambda v, f: f"The listed price of the {v['name']} is {f.eur(v['p'])}."),
    ("agent", lambda v, f: f"The {v['name']} costs {f.eur(v['p'])}."),
]


def k_price_exact(b: Builder) -> None:
    for name in sample(b, unique_names(b)):
        sql = f"SELECT name, price FROM products WHERE name = {lit(name)}"
        cols, rows = b.q(sql)
        p = rows[0][1]
        bad = wrong_price(b.rng, p)
        q = b.rng.choice([f"How much is the {name}?", f"What does the {name} cost?",
                          f"price of {name}?"])
        b.pair("price_exact", q, sql, cols, rows, T_PRICE, {"name": name, "p": p},
               {"name": name, "p": bad}, f"price: says {bad:.2f}, the row says {p:.2f}")


T_HEDGE: list[Template] = [
    ("terse", lambda v, f: f"{v['h'].capitalize()} {f.eur(v['t'], whole=True)}."),
    ("terse", lambda v, f: f"{v['name']}: {v['h']} {f.eur(v['t'], whole=True)}."),
    ("warm", lambda v, f: f"The {v['name']} costs {v['h']} {f.eur(v['t'], whole=True)}!"),
    ("formal", lambda v, f: f"The price of the {v['name']} is {v['h']} "
                            f"{f.eur(v['t'], whole=True)}."),
    ("agent", lambda v, f: f"It's {v['h']} {f.eur(v['t'], whole=True)}."),
    ("agent", lambda v, f: f"The {v['name']} is {v['h']} {f.eur(v['t'], whole=True)} at "
                           f"the moment."),
]
HEDGES = ["about", "around", "roughly", "approximately", "close to", "in the region of"]


def near(p: float) -> int:
    t = int(round(p / 10.0) * 10)
    if abs(t - p) / p > 0.06:
        t = int(round(p / 5.0) * 5)
    return t


def k_price_hedged(b: Builder) -> None:
    """Six pairs: every hedge word appears once in a correct and once in a wrong answer."""
    wrong_hedges = b.rng.sample(HEDGES, len(HEDGES))
    for i, name in enumerate(sample(b, unique_names(b), len(HEDGES))):
        sql = f"SELECT name, price FROM products WHERE name = {lit(name)}"
        cols, rows = b.q(sql)
        p = rows[0][1]
        t = near(p)
        assert abs(t - p) / p <= 0.06
        while True:
            far = int(round(p * b.rng.choice([0.45, 0.55, 1.6, 1.8, 2.2]) / 10.0) * 10)
            if far > 0 and abs(far - p) >= max(25, 0.35 * p):
                break
        h1, h2 = HEDGES[i], wrong_hedges[i]
        q = b.rng.choice([f"Roughly what does the {name} cost?", f"How much is the {name}?",
                          f"Ballpark price for the {name}?"])
        b.pair("price_hedged", q, sql, cols, rows, T_HEDGE, {"name": name, "h": h1, "t": t},
               {"name": name, "h": h2, "t": far},
               f"hedged price far off: says {h2} {far}, the row says {p:.2f}")


T_BOUND: list[Template] = [
    ("terse", lambda v, f: f"{v['h'].capitalize()} {f.eur(v['t'], whole=True)}."),
    ("warm", lambda v, f: f"The {v['name']} is {v['h']} {f.eur(v['t'], whole=True)} 🙂"),
    ("warm", lambda v, f: f"It's {v['h']} {f.eur(v['t'], whole=True)}, so keep that in "
                          f"mind for your budget!"),
    ("formal", lambda v, f: f"The {v['name']} retails at {v['h']} "
                            f"{f.eur(v['t'], whole=True)}."),
    ("agent", lambda v, f: f"The {v['name']} is priced at {v['h']} "
                           f"{f.eur(v['t'], whole=True)}."),
]


def bounds_true(p: float) -> list[tuple[str, int]]:
    out = []
    up5 = int(math.floor(p / 5) * 5 + 5)
    if 0 < up5 - p <= 2:
        out.append(("just under", up5))
    dn5 = int(math.ceil(p / 5) * 5 - 5)
    if 0 < p - dn5 <= 0.08 * p:
        out.append(("a bit over", dn5))
    up50 = int(math.floor(p / 50) * 50 + 50)
    out += [("under", up50), ("less than", up50)]
    lows = [int(math.floor(p / 50) * 50), int(math.floor(p / 10) * 10),
            int(math.floor(p / 10) * 10 - 10)]
    lows = [x for x in lows if 0 < x and 5 <= p - x <= 0.25 * p]
    if lows:
        out.append(("more than", max(lows)))
    return out


def bounds_false(p: float) -> list[tuple[str, int]]:
    low = int(math.floor(p * 0.65 / 10) * 10)
    high = int(math.ceil(p * 1.4 / 10) * 10)
    out = [("a bit over", high), ("more than", high)]
    if low >= 10:
        out += [("just under", low), ("under", low), ("less than", low)]
    return out


BOUNDS = ["just under", "a bit over", "under", "less than", "more than"]


def k_price_bound(b: Builder) -> None:
    """Five pairs: every bound phrase appears once in a correct and once in a wrong answer
    (each pair's product is one whose price allows the correct phrase)."""
    wrong = b.rng.sample(BOUNDS, len(BOUNDS))
    names = unique_names(b)
    b.rng.shuffle(names)
    used: set[str] = set()
    for want, want_bad in zip(BOUNDS, wrong, strict=True):
        name = next(n for n in names if n not in used and any(
            h == want for h, _ in bounds_true(b.q(f"SELECT price FROM products WHERE name = "
                                                  f"{lit(n)}")[1][0][0])) and any(
            h == want_bad for h, _ in bounds_false(b.q(f"SELECT price FROM products WHERE "
                                                       f"name = {lit(n)}")[1][0][0])))
        used.add(name)
        sql = f"SELECT name, price FROM products WHERE name = {lit(name)}"
        cols, rows = b.q(sql)
        p = rows[0][1]
        h1, t1 = next(x for x in bounds_true(p) if x[0] == want)
        h2, t2 = next(x for x in bounds_false(p) if x[0] == want_bad)
        q = b.rng.choice([f"Is the {name} expensive?", f"How much roughly is the {name}?",
                          f"How pricey is the {name}?"])
        b.pair("price_bound", q, sql, cols, rows, T_BOUND, {"name": name, "h": h1, "t": t1},
               {"name": name, "h": h2, "t": t2},
               f"price bound false: says {h2} {t2}, the row says {p:.2f}")


# ---------------------------------------------------------------- kinds: stock

SIZE_SQL = ("SELECT p.name, s.size, s.stock FROM products p JOIN product_sizes s "
            "ON s.product_id = p.product_id")


def size_rows(b: Builder, where: str) -> list[tuple[str, str]]:
    uniq = set(unique_names(b))
    _, rows = b.q(SIZE_SQL + f" WHERE {where} AND s.size <> 'One Size'")
    return [(r[0], r[1]) for r in rows if r[0] in uniq]


def only_or_units(v: dict, f: Fmt) -> str:
    n = v["n"]
    if n <= 3:
        return f"Only {f.num(n)} left in {f.size(v['size'])}."
    return f"{cap1(units(n, f))} in {f.size(v['size'])}."


T_STOCK: list[Template] = [
    ("terse", only_or_units),
    ("terse", lambda v, f: f"{v['n']} in stock ({f.size_code(v['size'])})."),
    ("warm", lambda v, f: f"We've got {f.num(v['n'])} of the {v['name']} in "
                          f"{f.size(v['size'])} right now!"),
    ("warm", lambda v, f: f"Hurry — there are only {f.num(v['n'])} left in "
                          f"{f.size(v['size'])}!"),
    ("formal", lambda v, f: f"Current stock of the {v['name']} in {f.size(v['size'])}: "
                            f"{units(v['n'])}."),
    ("agent", lambda v, f: f"We currently have {units(v['n'], f)} of the {v['name']} in "
                           f"{f.size(v['size'])}."),
]


def k_stock_count(b: Builder) -> None:
    for name, size in sample(b, size_rows(b, "s.stock > 0")):
        sql = SIZE_SQL + f" WHERE p.name = {lit(name)} AND s.size = {lit(size)}"
        cols, rows = b.q(sql)
        n = rows[0][2]
        bad = n + b.rng.randint(3, 7) if n <= 3 else b.rng.choice(
            [n + b.rng.randint(3, 6), max(2, n - b.rng.randint(3, 6))])
        assert bad != n
        q = b.rng.choice([f"How many of the {name} do you have in size {size}?",
                          f"stock of {name} size {size}?",
                          f"How many of the {name} are left in {size}?"])
        b.pair("stock_count", q, sql, cols, rows, T_STOCK,
               {"name": name, "size": size, "n": n}, {"name": name, "size": size, "n": bad},
               f"stock: says {bad}, the row says {n}")


def _avail_terse(v, f):
    if v["ok"]:
        return f"Yes, in stock in {f.size(v['size'])}."
    return f"No — sold out in {f.size(v['size'])}."


def _avail_warm(v, f):
    if v["ok"]:
        return f"Yes! The {v['name']} is available in {f.size(v['size'])} 🎉"
    return f"Oh no, the {v['name']} is sold out in {f.size(v['size'])} right now 😔"


def _avail_warm2(v, f):
    if v["ok"]:
        return f"Good news: you can order the {v['name']} in {f.size(v['size'])} right now."
    return f"Unfortunately the {v['name']} can't be ordered in {f.size(v['size'])} right now."


def _avail_formal(v, f):
    state = "in stock" if v["ok"] else "out of stock"
    return f"The {v['name']} is currently {state} in {f.size(v['size'])}."


def _avail_agent(v, f):
    if v["ok"]:
        return f"Yes, the {v['name']} in {f.size(v['size'])} is in stock and orderable."
    return f"Sorry, the {v['name']} in {f.size(v['size'])} is unavailable at the moment."


def _avail_agent2(v, f):
    if v["ok"]:
        return (f"I've just checked: the {v['name']} is available in {f.size(v['size'])} "
                f"({f.num(v['n'])} in stock).")
    return f"I've just checked: the {v['name']} is out of stock in {f.size(v['size'])}."


T_AVAIL: list[Template] = [("terse", _avail_terse), ("warm", _avail_warm),
                           ("warm", _avail_warm2), ("formal", _avail_formal),
                           ("agent", _avail_agent), ("agent", _avail_agent2)]


def _sold_terse(v, f):
    if not v["ok"]:
        return f"Out of stock in {f.size_code(v['size'])}."
    return f"In stock in {f.size_code(v['size'])}."


def _sold_warm(v, f):
    if not v["ok"]:
        return (f"Ah, sorry! The {v['name']} is completely sold out in {f.size(v['size'])} "
                f"at the moment.")
    return f"Yes, the {v['name']} is available in {f.size(v['size'])}! Grab it while you can."


def _sold_formal(v, f):
    if not v["ok"]:
        return (f"Stock for the {v['name']} in {f.size(v['size'])} stands at zero; the item "
                f"cannot currently be ordered in that size.")
    return f"The {v['name']} can currently be ordered in {f.size(v['size'])}."


def _sold_agent(v, f):
    if not v["ok"]:
        return f"I'm afraid the {v['name']} is sold out in {f.size(v['size'])}."
    return f"Good news, the {v['name']} is in stock in {f.size(v['size'])}."


T_SOLD: list[Template] = [("terse", _sold_terse), ("warm", _sold_warm),
                          ("formal", _sold_formal), ("agent", _sold_agent)]


def k_in_stock(b: Builder) -> None:
    for name, size in sample(b, size_rows(b, "s.stock > 0")):
        sql = SIZE_SQL + f" WHERE p.name = {lit(name)} AND s.size = {lit(size)}"
        cols, rows = b.q(sql)
        n = rows[0][2]
        q = b.rng.choice([f"Is the {name} available in {size}?",
                          f"Can I order the {name} in size {size}?",
                          f"{name} in {size} - in stock?"])
        b.pair("in_stock", q, sql, cols, rows, T_AVAIL,
               {"name": name, "size": size, "n": n, "ok": True},
               {"name": name, "size": size, "n": n, "ok": False},
               f"availability: says sold out, the row has stock {n}")


def k_sold_out(b: Builder) -> None:
    for name, size in sample(b, size_rows(b, "s.stock = 0")):
        sql = SIZE_SQL + f" WHERE p.name = {lit(name)} AND s.size = {lit(size)}"
        cols, rows = b.q(sql)
        assert rows[0][2] == 0
        q = b.rng.choice([f"Do you have the {name} in {size}?",
                          f"Is the {name} in stock in size {size}?",
                          f"can i still buy {name} size {size}"])
        b.pair("sold_out", q, sql, cols, rows, T_SOLD,
               {"name": name, "size": size, "ok": False},
               {"name": name, "size": size, "ok": True},
               "availability: says available, the row has stock 0")


def _sizes_products(b: Builder, letters_only: bool) -> list[tuple[str, list[str], list[str]]]:
    out = []
    for name in unique_names(b):
        _, rows = b.q(SIZE_SQL + f" WHERE p.name = {lit(name)}")
        sizes = [r[1] for r in rows]
        if "One Size" in sizes:
            continue
        if letters_only and not all(s in SIZE_WORD for s in sizes):
            continue
        avail = sorted((r[1] for r in rows if r[2] > 0), key=size_order)
        zero = [r[1] for r in rows if r[2] == 0]
        if len(avail) >= 2:
            out.append((name, avail, zero))
    return out


def absent_size(sizes: list[str]) -> str:
    if sizes[0] in SIZE_WORD:
        for s in reversed(LETTER_ORDER):
            if s not in sizes:
                return s
    n = max(int(s) for s in sizes) + 1
    while str(n) in sizes:
        n += 1
    return str(n)


def size_order(s: str) -> float:
    return LETTER_ORDER.index(s) if s in LETTER_ORDER else float(s)


def _sizes_question(b: Builder, kind: str, name: str, avail: list[str], zero: list[str],
                    templates: list[Template]) -> None:
    if zero and b.rng.random() < 0.6:
        sql = (f"SELECT s.size, s.stock FROM product_sizes s JOIN products p "
               f"ON p.product_id = s.product_id WHERE p.name = {lit(name)}")
        extra = b.rng.choice(zero)
        err = f"sizes: adds {extra}, which has stock 0"
    else:
        sql = (f"SELECT s.size, s.stock FROM product_sizes s JOIN products p "
               f"ON p.product_id = s.product_id WHERE p.name = {lit(name)} AND s.stock > 0")
        _, allrows = b.q(SIZE_SQL + f" WHERE p.name = {lit(name)}")
        extra = absent_size([r[1] for r in allrows])
        err = f"sizes: adds {extra}, which is not in the rows"
    cols, rows = b.q(sql)
    bad = sorted(avail + [extra], key=size_order)
    q = b.rng.choice([f"Which sizes of the {name} are in stock?",
                      f"What sizes can I get the {name} in?",
                      f"{name} — available sizes?"])
    b.pair(kind, q, sql, cols, rows, templates, {"name": name, "s": avail},
           {"name": name, "s": bad}, err)


T_SIZES_CODES: list[Template] = [
    ("terse", lambda v, f: f"{', '.join(f.size_code(s) for s in v['s'])}."),
    ("warm", lambda v, f: f"You're in luck, the {v['name']} is in stock in sizes "
                          f"{f.join([f.size_code(s) for s in v['s']])}!"),
    ("formal", lambda v, f: f"In-stock sizes for the {v['name']}: "
                            f"{', '.join(f.size_code(s) for s in v['s'])}."),
    ("formal", lambda v, f: f"The {v['name']} is available in the following sizes:\n"
                            + f.bullets([f.size_code(s) for s in v['s']])),
    ("agent", lambda v, f: f"The {v['name']} is currently available in "
                           f"{f.join([f.size_code(s) for s in v['s']])}."),
]
T_SIZES_WORDS: list[Template] = [
    ("terse", lambda v, f: f"In stock: {', '.join(SIZE_WORD[s] for s in v['s'])}."),
    ("warm", lambda v, f: f"The {v['name']} is available in "
                          f"{f.join([SIZE_WORD[s] for s in v['s']])} 😊"),
    ("formal", lambda v, f: f"The {v['name']} can presently be ordered in "
                            f"{f.join([SIZE_WORD[s] for s in v['s']])}."),
    ("agent", lambda v, f: f"You can order the {v['name']} in "
                           f"{f.join([SIZE_WORD[s] for s in v['s']])}."),
    ("agent", lambda v, f: f"We have the {v['name']} in "
                           f"{f.join([SIZE_WORD[s] + ' (' + s + ')' for s in v['s']])}."),
]


def k_sizes_codes(b: Builder) -> None:
    pool = _sizes_products(b, letters_only=False)
    numeric = [x for x in pool if x[1][0] not in SIZE_WORD]
    letters = [x for x in pool if x[1][0] in SIZE_WORD]
    for name, avail, zero in b.rng.sample(numeric, 2) + b.rng.sample(letters, 2):
        _sizes_question(b, "sizes_codes", name, avail, zero, T_SIZES_CODES)


def k_sizes_words(b: Builder) -> None:
    for name, avail, zero in sample(b, _sizes_products(b, letters_only=True)):
        _sizes_question(b, "sizes_words", name, avail, zero, T_SIZES_WORDS)


# ---------------------------------------------------------------- kinds: counts

T_COUNT_DIGITS: list[Template] = [
    ("terse", lambda v, f: f"{v['n']}."),
    ("terse", lambda v, f: f"{v['n']} {v['desc']}."),
    ("warm", lambda v, f: f"We've got {v['n']} {v['desc']} for you to choose from!"),
    ("formal", lambda v, f: f"The {f.cat_word()} lists {v['n']} {v['desc']}."),
    ("agent", lambda v, f: f"We currently carry {v['n']} {v['desc']}."),
]
T_COUNT_WORDS: list[Template] = [
    ("terse", lambda v, f: f"{words(v['n']).capitalize()}."),
    ("warm", lambda v, f: f"There are {words(v['n'])} {v['desc']} in the {f.cat_word()}!"),
    ("warm", lambda v, f: f"You've got {words(v['n'])} {v['desc']} to pick from 🙌"),
    ("formal", lambda v, f: f"A total of {words(v['n'])} {v['desc']} were returned."),
    ("agent", lambda v, f: f"We have {words(v['n'])} {v['desc']} at the moment."),
]


def _count_rows(b: Builder, kind: str, templates: list[Template], select: str,
                avoid: set[str]) -> None:
    pool = [c for c in list_candidates(b, select, 3, 12) if c[0] not in avoid]
    for desc, sql, cols, rows in sample(b, pool):
        avoid.add(desc)
        n = len(rows)
        bad = shift(b.rng, n, 1, 2)
        q = b.rng.choice([f"How many {desc} do you have?", f"how many {desc} are there",
                          f"Number of {desc}?"])
        b.pair(kind, q, sql, cols, rows, templates, {"n": n, "desc": desc},
               {"n": bad, "desc": desc}, f"count: says {bad}, there are {n} rows")


def k_count_rows(b: Builder) -> None:
    used: set[str] = set()
    _count_rows(b, "count_rows_digits", T_COUNT_DIGITS, "p.name, p.price", used)
    _count_rows(b, "count_rows_words", T_COUNT_WORDS, "p.name, p.colour", used)


T_COUNT_COL: list[Template] = [
    ("terse", lambda v, f: f"{v['n']}."),
    ("warm", lambda v, f: f"Looks like there are {f.num(v['n'])} {v['what']}!"),
    ("formal", lambda v, f: f"Count of {v['what']}: {v['n']}."),
    ("agent", lambda v, f: f"I've looked it up, and the number of {v['what']} is "
                           f"{f.num(v['n'])}."),
]


def k_count_column(b: Builder) -> None:
    pool = []
    for country in b.col("SELECT DISTINCT country FROM customers"):
        pool.append((f"How many customers do we have in {country}?",
                     f"SELECT COUNT(*) AS n_customers FROM customers WHERE country = "
                     f"{lit(country)}", f"customers in {country}"))
    for status in ("delivered", "returned"):
        pool.append((f"How many orders have been {status}?",
                     f"SELECT COUNT(*) AS n_orders FROM orders WHERE status = {lit(status)}",
                     f"{status} orders"))
    for colour in ("black", "navy", "olive", "white", "camel"):
        pool.append((f"How many {colour} products are there?",
                     f"SELECT COUNT(*) AS n_products FROM products WHERE colour = "
                     f"{lit(colour)}", f"{colour} products"))
    pool.append(("How many products are sold out in at least one size?",
                 "SELECT COUNT(DISTINCT product_id) AS n_products FROM product_sizes "
                 "WHERE stock = 0", "products sold out in at least one size"))
    for name in ("Clara Laurent", "Lucas Moreau", "Freya Murphy", "Hannah Schmidt"):
        pool.append((f"How many orders has {name} placed?",
                     f"SELECT COUNT(*) AS n_orders FROM orders o JOIN customers cu ON "
                     f"cu.customer_id = o.customer_id WHERE cu.name = {lit(name)}",
                     f"orders placed by {name}"))
    pool = [x for x in pool if b.q(x[1])[1][0][0] >= 2]
    for question, sql, what in sample(b, pool):
        cols, rows = b.q(sql)
        n = rows[0][0]
        bad = shift(b.rng, n, 1, 3)
        b.pair("count_column", question, sql, cols, rows, T_COUNT_COL, {"n": n, "what": what},
               {"n": bad, "what": what}, f"count: says {bad}, the COUNT column is {n}")


# ---------------------------------------------------------------- kinds: aggregates

def off(rng: random.Random, x: float, lo: float = 0.15, hi: float = 0.3) -> float:
    return round(x * (1 + rng.choice([-1, 1]) * rng.uniform(lo, hi)), 2)


T_AVG_COL: list[Template] = [
    ("terse", lambda v, f: f"Avg {f.eur(v['x'])}."),
    ("warm", lambda v, f: f"On average, our {v['desc']} cost about {f.eur(v['x'], whole=True)}."),
    ("formal", lambda v, f: f"The mean price across {v['desc']} is {f.eur(v['x'])}."),
    ("agent", lambda v, f: f"The average price of our {v['desc']} is {f.eur(v['x'])}."),
    ("agent", lambda v, f: f"Our {v['desc']} average out at roughly "
                           f"{f.eur(v['x'], whole=True)} each."),
]


def k_avg_column(b: Builder) -> None:
    pool = []
    for desc, where in product_specs(b):
        sql = f"SELECT ROUND(AVG(p.price), 2) AS avg_price, COUNT(*) AS n {CAT_JOIN} WHERE {where}"
        cols, rows = b.q(sql)
        if rows[0][1] >= 3 and " products" not in desc:
            pool.append((desc, sql[:sql.index(", COUNT(*)")] + sql[sql.index(" FROM"):]))
    for desc, sql in sample(b, pool):
        cols, rows = b.q(sql)
        x = rows[0][0]
        bad = off(b.rng, x)
        q = b.rng.choice([f"What's the average price of {desc}?",
                          f"How much do {desc} cost on average?"])
        b.pair("avg_column", q, sql, cols, rows, T_AVG_COL, {"x": x, "desc": desc},
               {"x": bad, "desc": desc}, f"average: says {bad:.2f}, the AVG column is {x:.2f}")


T_SUM_COL: list[Template] = [
    ("terse", lambda v, f: v["say"](v["x"], f) + "."),
    ("warm", lambda v, f: f"Here you go: the total {v['what']} comes to "
                          f"{v['say'](v['x'], f)}!"),
    ("formal", lambda v, f: f"Total {v['what']}: {v['say'](v['x'], f)}."),
    ("agent", lambda v, f: f"I've added it up for you: the total {v['what']} is "
                           f"{v['say'](v['x'], f)}."),
]


def k_sum_column(b: Builder) -> None:
    units = lambda x, f: f"{x} units"  # noqa: E731
    money = lambda x, f: f.eur(x)  # noqa: E731
    pool = []
    for cat in ("jeans", "dresses", "sweaters", "boots", "coats", "sneakers"):
        pool.append((f"How many units of {cat} are in stock in total?",
                     f"SELECT SUM(s.stock) AS total_stock FROM product_sizes s JOIN products p "
                     f"ON p.product_id = s.product_id JOIN categories c ON c.category_id = "
                     f"p.category_id WHERE c.name = {lit(cat)}",
                     f"stock of {cat}", units, "int"))
    for month, label in (("2026-05", "May 2026"), ("2026-06", "June 2026"),
                         ("2026-08", "August 2026"), ("2026-09", "September 2026")):
        pool.append((f"What was our revenue from orders in {label}?",
                     f"SELECT ROUND(SUM(oi.quantity * oi.unit_price), 2) AS revenue FROM "
                     f"order_items oi JOIN orders o ON o.order_id = oi.order_id WHERE "
                     f"o.ordered_at LIKE '{month}%'",
                     f"revenue from orders placed in {label}", money, "money"))
    for month, label in (("2026-07", "July 2026"), ("2026-10", "October 2026")):
        pool.append((f"How many items did customers order in {label}?",
                     f"SELECT SUM(oi.quantity) AS items_ordered FROM order_items oi JOIN "
                     f"orders o ON o.order_id = oi.order_id WHERE o.ordered_at LIKE '{month}%'",
                     f"number of items ordered in {label}",
                     lambda x, f: f"{x} items", "int"))
    for question, sql, what, say, typ in sample(b, pool):
        cols, rows = b.q(sql)
        x = rows[0][0]
        if typ == "int":
            bad = x + b.rng.choice([-1, 1]) * b.rng.randint(max(3, x // 8), max(5, x // 4))
        else:
            bad = off(b.rng, x, 0.12, 0.25)
        b.pair("sum_column", question, sql, cols, rows, T_SUM_COL,
               {"x": x, "what": what, "say": say}, {"x": bad, "what": what, "say": say},
               f"sum: says {fmt_err(bad)}, the SUM column is {fmt_err(x)}")


T_MINMAX: list[Template] = [
    ("terse", lambda v, f: f"{v['word'].capitalize()}: {v['say'](v['x'], f)}."),
    ("warm", lambda v, f: f"The {v['word']} {v['what']} is {v['say'](v['x'], f)}!"),
    ("formal", lambda v, f: f"The {v['word']} {v['what']} on record is {v['say'](v['x'], f)}."),
    ("agent", lambda v, f: f"I can confirm the {v['word']} {v['what']} is "
                           f"{v['say'](v['x'], f)}."),
]


def k_minmax_column(b: Builder) -> None:
    money = lambda x, f: f.eur(x)  # noqa: E731
    date = lambda x, f: f.date(x)  # noqa: E731
    pool = []
    for cat in ("dresses", "jackets", "coats", "boots", "bags", "shirts", "t-shirts"):
        for fn, word in (("MIN", "lowest"), ("MAX", "highest")):
            pool.append((f"What's the {word} price among our {cat}?",
                         f"SELECT {fn}(p.price) AS {word}_price FROM products p JOIN "
                         f"categories c ON c.category_id = p.category_id WHERE c.name = "
                         f"{lit(cat)}", word, f"price for {cat}", money, cat))
    for name in ("Lucas Moreau", "Clara Laurent", "Freya Murphy", "Mateo García"):
        pool.append((f"When did {name} last order?",
                     f"SELECT MAX(o.ordered_at) AS last_order FROM orders o JOIN customers cu "
                     f"ON cu.customer_id = o.customer_id WHERE cu.name = {lit(name)}",
                     "latest", f"order date for {name}", date, name))
    b.rng.shuffle(pool)
    seen: set[str] = set()
    chosen = []
    for x in pool:
        if x[5] not in seen:
            seen.add(x[5])
            chosen.append(x)
    for question, sql, word, what, say, key in chosen[:PAIRS]:
        cols, rows = b.q(sql)
        x = rows[0][0]
        if isinstance(x, str):
            orders = b.col("SELECT ordered_at FROM orders ORDER BY ordered_at")
            bad = b.rng.choice([o for o in orders if o[:10] != x[:10]])
            bad_s, x_s = bad, x
        else:
            prices = b.col(f"SELECT p.price FROM products p JOIN categories c ON c.category_id"
                           f" = p.category_id WHERE c.name = {lit(key)}")
            bad = b.rng.choice([p for p in prices if abs(p - x) >= 10])
            bad_s = f"{bad:.2f}"
            x_s = f"{x:.2f}"
        b.pair("minmax_column", question, sql, cols, rows, T_MINMAX,
               {"x": x, "word": word, "what": what, "say": say},
               {"x": bad, "word": word, "what": what, "say": say},
               f"{word}: says {bad_s}, the column is {x_s}")


T_STOCK_TOTAL: list[Template] = [
    ("terse", lambda v, f: f"{v['n']} total."),
    ("warm", lambda v, f: f"Across all sizes we have {f.num(v['n'])} of the {v['name']} "
                          f"in stock!"),
    ("formal", lambda v, f: f"Summed over its sizes, stock of the {v['name']} totals "
                            f"{v['n']} units."),
    ("agent", lambda v, f: f"Adding up every size, there are {f.num(v['n'])} units of the "
                           f"{v['name']} available."),
]


def k_sum_computed(b: Builder) -> None:
    pool = []
    for name in unique_names(b):
        sql = (f"SELECT s.size, s.stock FROM product_sizes s JOIN products p "
               f"ON p.product_id = s.product_id WHERE p.name = {lit(name)}")
        cols, rows = b.q(sql)
        if len(rows) >= 3 and sum(r[1] for r in rows) >= 6:
            pool.append((name, sql, cols, rows))
    for name, sql, cols, rows in sample(b, pool):
        n = sum(r[1] for r in rows)
        bad = shift(b.rng, n, 2, 5)
        q = b.rng.choice([f"How many of the {name} do you have in total?",
                          f"Total stock of the {name} across sizes?"])
        b.pair("sum_computed", q, sql, cols, rows, T_STOCK_TOTAL, {"n": n, "name": name},
               {"n": bad, "name": name}, f"total stock: says {bad}, the rows sum to {n}")


T_AVG_COMP: list[Template] = [
    ("terse", lambda v, f: f"Average: {f.eur(v['x'])}."),
    ("warm", lambda v, f: f"Those {f.num(v['k'])} {v['desc']} average out to about "
                          f"{f.eur(v['x'], whole=True)}."),
    ("formal", lambda v, f: f"The mean price of the {v['k']} {v['desc']} is {f.eur(v['x'])}."),
    ("agent", lambda v, f: f"On average our {v['desc']} cost {f.eur(v['x'])}."),
]


def k_avg_computed(b: Builder) -> None:
    pool = list_candidates(b, "p.name, p.price", 3, 6)
    for desc, sql, cols, rows in sample(b, pool):
        x = round(sum(r[1] for r in rows) / len(rows), 2)
        bad = off(b.rng, x, 0.15, 0.3)
        q = b.rng.choice([f"What's the average price of {desc}?",
                          f"How much are {desc} on average?"])
        b.pair("avg_computed", q, sql, cols, rows, T_AVG_COMP,
               {"x": x, "k": len(rows), "desc": desc}, {"x": bad, "k": len(rows), "desc": desc},
               f"average: says {bad:.2f}, the rows average {x:.2f}")


# ---------------------------------------------------------------- kinds: superlatives

def unique_extreme(values: list, fn) -> bool:
    target = fn(values)
    return values.count(target) == 1


T_CHEAP: list[Template] = [
    ("terse", lambda v, f: f"{v['name']}, {f.eur(v['p'])}."),
    ("warm", lambda v, f: f"The cheapest is the {v['name']} at just {f.eur(v['p'])}!"),
    ("formal", lambda v, f: f"The lowest-priced of the {v['desc']} is the {v['name']} "
                            f"({f.eur(v['p'])})."),
    ("agent", lambda v, f: f"Our most affordable option there is the {v['name']}, which "
                           f"costs {f.eur(v['p'])}."),
]
T_DEAR: list[Template] = [
    ("terse", lambda v, f: f"Most expensive: {v['name']} ({f.eur(v['p'])})."),
    ("warm", lambda v, f: f"The priciest one is the {v['name']}, which comes in at "
                          f"{f.eur(v['p'])}!"),
    ("formal", lambda v, f: f"Of the {v['desc']}, the {v['name']} carries the highest price, "
                            f"{f.eur(v['p'])}."),
    ("agent", lambda v, f: f"The most expensive is the {v['name']} at {f.eur(v['p'])}."),
]


def _superlative_price(b: Builder, kind: str, cheap: bool, templates, avoid: set) -> None:
    fn = min if cheap else max
    pool = [c for c in list_candidates(b, "p.name, p.price", 3, 8,
                                       check=lambda cols, rows: unique_extreme(
                                           [r[1] for r in rows], fn)) if c[0] not in avoid]
    for desc, sql, cols, rows in sample(b, pool):
        avoid.add(desc)
        ordered = sorted(rows, key=lambda r: r[1], reverse=not cheap)
        best, second = ordered[0], b.rng.choice(ordered[1:])
        word = "cheapest" if cheap else "most expensive"
        q = b.rng.choice([f"What's the {word} of the {desc}?",
                          f"Which of your {desc} is the {word}?"])
        b.pair(kind, q, sql, cols, rows, templates,
               {"name": best[0], "p": best[1], "desc": desc},
               {"name": second[0], "p": second[1], "desc": desc},
               f"{word}: names {second[0]}, the rows' {word} is {best[0]}")


def k_cheapest(b: Builder) -> None:
    used: set = set()
    _superlative_price(b, "cheapest", True, T_CHEAP, used)
    _superlative_price(b, "most_expensive", False, T_DEAR, used)


T_MOST_STOCK: list[Template] = [
    ("terse", lambda v, f: f"{cap1(v['what'])} — {units(v['n'])}."),
    ("warm", lambda v, f: f"{cap1(v['what'])} has the most stock, with {f.num(v['n'])} "
                          f"available!"),
    ("formal", lambda v, f: f"The highest stock level is for {v['what']}, at {units(v['n'])}."),
    ("agent", lambda v, f: f"We have the most of {v['what']}: {f.num(v['n'])} in stock."),
]


def k_most_stock(b: Builder) -> None:
    sizes = []
    for name in unique_names(b):
        sql = (f"SELECT s.size, s.stock FROM product_sizes s JOIN products p "
               f"ON p.product_id = s.product_id WHERE p.name = {lit(name)}")
        cols, rows = b.q(sql)
        if len(rows) >= 3 and unique_extreme([r[1] for r in rows], max):
            sizes.append((name, sql, cols, rows))
    prods = []
    for cat in b.col("SELECT name FROM categories"):
        sql = (f"SELECT p.name, SUM(s.stock) AS total_stock FROM products p JOIN product_sizes "
               f"s ON s.product_id = p.product_id JOIN categories c ON c.category_id = "
               f"p.category_id WHERE c.name = {lit(cat)} GROUP BY p.product_id, p.name")
        cols, rows = b.q(sql)
        names = [r[0] for r in rows]
        if 3 <= len(rows) and len(set(names)) == len(names) and unique_extreme(
                [r[1] for r in rows], max):
            prods.append((cat, sql, cols, rows))
    for name, sql, cols, rows in b.rng.sample(sizes, 2):
        ordered = sorted(rows, key=lambda r: -r[1])
        best, other = ordered[0], b.rng.choice([r for r in ordered[1:] if r[1] >= 2])
        q = f"Which size of the {name} do you have the most of?"
        w = lambda s: f"size {s}"  # noqa: E731
        b.pair("most_stock", q, sql, cols, rows, T_MOST_STOCK,
               {"what": w(best[0]), "n": best[1]}, {"what": w(other[0]), "n": other[1]},
               f"most stock: names size {other[0]}, the most is size {best[0]}")
    for cat, sql, cols, rows in b.rng.sample(prods, 2):
        ordered = sorted(rows, key=lambda r: -r[1])
        best, other = ordered[0], b.rng.choice([r for r in ordered[1:] if r[1] >= 2])
        q = f"Which of the {cat} has the most stock?"
        b.pair("most_stock", q, sql, cols, rows, T_MOST_STOCK,
               {"what": f"the {best[0]}", "n": best[1]},
               {"what": f"the {other[0]}", "n": other[1]},
               f"most stock: names {other[0]}, the most is {best[0]}")


T_NEWEST: list[Template] = [
    ("terse", lambda v, f: f"{v['name']} ({f.date(v['d'])})."),
    ("warm", lambda v, f: f"The newest addition is the {v['name']}, added on "
                          f"{f.date(v['d'])}!"),
    ("formal", lambda v, f: f"The most recently added of the {v['desc']} is the {v['name']}, "
                            f"created on {f.date(v['d'])}."),
    ("agent", lambda v, f: f"Our latest one is the {v['name']} — it went into the "
                           f"{f.cat_word()} on {f.date(v['d'])}."),
]


def k_newest(b: Builder) -> None:
    pool = list_candidates(b, "p.name, p.created_at", 3, 8,
                           check=lambda cols, rows: unique_extreme([r[1] for r in rows], max))
    for desc, sql, cols, rows in sample(b, pool):
        ordered = sorted(rows, key=lambda r: r[1], reverse=True)
        best = ordered[0]
        other = b.rng.choice([r for r in ordered[1:] if r[1] != best[1]])
        q = b.rng.choice([f"What's the newest of the {desc}?",
                          f"Which {desc} were added most recently?"])
        b.pair("newest", q, sql, cols, rows, T_NEWEST,
               {"name": best[0], "d": best[1], "desc": desc},
               {"name": other[0], "d": other[1], "desc": desc},
               f"newest: names {other[0]} ({other[1]}), the newest is {best[0]} ({best[1]})")


# ---------------------------------------------------------------- kinds: comparisons, ranges

def two_products(b: Builder, min_gap: float) -> list[tuple[list[str], list[list], str]]:
    out = []
    uniq = set(unique_names(b))
    for cat in b.col("SELECT name FROM categories"):
        _, rows = b.q(f"SELECT p.name, p.price {CAT_JOIN} WHERE c.name = {lit(cat)}")
        rows = [r for r in rows if r[0] in uniq]
        for i in range(len(rows)):
            for j in range(i + 1, len(rows)):
                if abs(rows[i][1] - rows[j][1]) >= min_gap:
                    out.append((rows[i][0], rows[j][0], cat))
    return out


def T_cmp_text(v, f, style):
    lo, hi, pr = v["lo"], v["hi"], v["price"]
    if style == 0:
        return f"The {lo} is cheaper."
    if style == 1:
        return (f"The {lo} is the cheaper of the two at {f.eur(pr[lo])}, compared with "
                f"{f.eur(pr[hi])} for the {hi}.")
    if style == 2:
        return f"The {hi} ({f.eur(pr[hi])}) costs more than the {lo} ({f.eur(pr[lo])})."
    if style == 3:
        return f"Comparing the two, the {hi} is the more expensive item."
    return f"If you're watching your budget, the {lo} is the less expensive one!"


T_COMPARE: list[Template] = [
    ("terse", lambda v, f: T_cmp_text(v, f, 0)),
    ("warm", lambda v, f: T_cmp_text(v, f, 4)),
    ("formal", lambda v, f: T_cmp_text(v, f, 3)),
    ("agent", lambda v, f: T_cmp_text(v, f, 1)),
    ("agent", lambda v, f: T_cmp_text(v, f, 2)),
]


def _two_sql(a: str, c: str) -> str:
    return f"SELECT name, price FROM products WHERE name IN ({lit(a)}, {lit(c)})"


def k_compare_two(b: Builder) -> None:
    for a, c, _cat in sample(b, two_products(b, 10)):
        sql = _two_sql(a, c)
        cols, rows = b.q(sql)
        pr = {r[0]: r[1] for r in rows}
        lo, hi = sorted(pr, key=pr.get)
        q = b.rng.choice([f"Which is cheaper, the {a} or the {c}?",
                          f"{a} vs {c} — which costs more?"])
        b.pair("compare_two", q, sql, cols, rows, T_COMPARE,
               {"lo": lo, "hi": hi, "price": pr}, {"lo": hi, "hi": lo, "price": pr},
               f"comparison reversed: {lo} ({pr[lo]:.2f}) is cheaper than {hi} ({pr[hi]:.2f})")


T_DIFF: list[Template] = [
    ("terse", lambda v, f: f"{f.eur(v['d'])} difference."),
    ("warm", lambda v, f: f"The {v['hi']} is {f.eur(v['d'])} more than the {v['lo']}."),
    ("formal", lambda v, f: f"The {v['hi']} ({f.eur(v['price'][v['hi']])}) exceeds the "
                            f"{v['lo']} ({f.eur(v['price'][v['lo']])}) by {f.eur(v['d'])}."),
    ("agent", lambda v, f: f"The {v['lo']} would save you {f.eur(v['d'])} compared with "
                           f"the {v['hi']}."),
]


def k_price_difference(b: Builder) -> None:
    for a, c, _cat in sample(b, two_products(b, 15)):
        sql = _two_sql(a, c)
        cols, rows = b.q(sql)
        pr = {r[0]: r[1] for r in rows}
        lo, hi = sorted(pr, key=pr.get)
        d = round(pr[hi] - pr[lo], 2)
        bad = round(d + b.rng.choice([10, 20, -10]) if d > 12 else d + b.rng.choice([10, 20]), 2)
        q = b.rng.choice([f"How much more is the {hi} than the {lo}?",
                          f"What's the price difference between the {a} and the {c}?"])
        b.pair("price_difference", q, sql, cols, rows, T_DIFF,
               {"lo": lo, "hi": hi, "price": pr, "d": d},
               {"lo": lo, "hi": hi, "price": pr, "d": bad},
               f"difference: says {bad:.2f}, the rows differ by {d:.2f}")


T_RANGE: list[Template] = [
    ("terse", lambda v, f: f"{f.eur(v['lo'])}–{f.eur(v['hi'])}."),
    ("warm", lambda v, f: f"Our {v['desc']} go from {f.eur(v['lo'])} up to {f.eur(v['hi'])}!"),
    ("formal", lambda v, f: f"Prices for the {v['desc']} range from {f.eur(v['lo'])} to "
                            f"{f.eur(v['hi'])}."),
    ("agent", lambda v, f: f"The {v['desc']} are priced between {f.eur(v['lo'])} and "
                           f"{f.eur(v['hi'])}."),
]


def k_price_range(b: Builder) -> None:
    pool = list_candidates(b, "p.name, p.price", 3, 8,
                           check=lambda cols, rows: len({r[1] for r in rows}) >= 2)
    for desc, sql, cols, rows in sample(b, pool):
        lo, hi = min(r[1] for r in rows), max(r[1] for r in rows)
        good = {"lo": lo, "hi": hi, "desc": desc}
        bad = dict(good)
        if b.rng.random() < 0.5 and lo > 40:
            bad["lo"] = round(lo - b.rng.choice([15, 20, 30]), 2)
            err = f"range: lower end says {bad['lo']:.2f}, the cheapest row is {lo:.2f}"
        else:
            bad["hi"] = round(hi + b.rng.choice([20, 30, 50]), 2)
            err = f"range: upper end says {bad['hi']:.2f}, the dearest row is {hi:.2f}"
        q = b.rng.choice([f"What price range are the {desc} in?",
                          f"How much do {desc} cost, from cheapest to most expensive?"])
        b.pair("price_range", q, sql, cols, rows, T_RANGE, good, bad, err)


def _ordered(v, f, style):
    items = v["items"]
    if style == 0:
        return " < ".join(n for n, _ in items) + "."
    if style == 1:
        return ("From cheapest to most expensive:\n"
                + f.bullets([f"{n} – {f.eur(p)}" for n, p in items], numbered=True))
    if style == 2:
        return ("Here they are, cheapest first: "
                + f.join([f"the {n} ({f.eur(p)})" for n, p in items]) + ".")
    return ("Sorted by ascending price:\n"
            + f.bullets([f"{n}: {f.eur(p)}" for n, p in items], numbered=True))


T_ORDERED: list[Template] = [
    ("terse", lambda v, f: _ordered(v, f, 0)),
    ("agent", lambda v, f: _ordered(v, f, 1)),
    ("warm", lambda v, f: _ordered(v, f, 2)),
    ("formal", lambda v, f: _ordered(v, f, 3)),
]


def k_ordered_list(b: Builder) -> None:
    pool = list_candidates(b, "p.name, p.price", 3, 6,
                           check=lambda cols, rows: len({r[1] for r in rows}) == len(rows))
    for desc, sql, cols, rows in sample(b, pool):
        items = sorted(((r[0], r[1]) for r in rows), key=lambda x: x[1])
        i = b.rng.randrange(len(items) - 1)
        bad = list(items)
        bad[i], bad[i + 1] = bad[i + 1], bad[i]
        q = b.rng.choice([f"List the {desc} from cheapest to most expensive.",
                          f"Can you sort the {desc} by price, lowest first?"])
        b.pair("ordered_list", q, sql, cols, rows, T_ORDERED, {"items": items},
               {"items": bad},
               f"order: {items[i + 1][0]} placed before {items[i][0]}, which is cheaper")


INVENTED = {"dresses": ["Smocked Midi Dress", "Linen Shift Dress"],
            "jeans": ["Bootcut Jean", "Mom Jean"],
            "t-shirts": ["Ribbed Tank Top", "Long-Sleeve Waffle Tee"],
            "sweaters": ["Cable-Knit Cardigan", "Fleece Half-Zip"],
            "jackets": ["Cropped Denim Jacket", "Corduroy Blazer"],
            "coats": ["Wool Peacoat", "Quilted Duffle Coat"],
            "sneakers": ["Suede Slip-On Sneaker", "Mesh Trail Runner"],
            "boots": ["Lug-Sole Chelsea Boot", "Shearling Snow Boot"],
            "scarves": ["Printed Silk Scarf", "Merino Snood"],
            "bags": ["Canvas Tote", "Quilted Shoulder Bag"],
            "skirts": ["Satin Slip Skirt", "Corduroy Mini Skirt"],
            "shirts": ["Corduroy Overshirt", "Striped Poplin Shirt"],
            "trousers": ["Pleated Wide Trousers", "Drawstring Linen Trousers"]}
INVENTED_ANY = ["Merino Beanie", "Quilted Gilet", "Linen Blazer", "Wool Bucket Hat",
                "Leather Loafer", "Puffer Vest"]


def _names_list(v, f, style):
    names = v["names"]
    if style == 0:
        return "; ".join(names) + "."
    if style == 1:
        return f"We have the {f.join(names)} in {v['desc']}!"
    if style == 2:
        return f"The following {v['desc']} were found:\n" + f.bullets(names)
    if style == 3:
        return "Here's what we have:\n" + f.bullets(names, numbered=True)
    return f"Sure, our {v['desc']} are: {f.join(names)}."


T_NAMES: list[Template] = [
    ("terse", lambda v, f: _names_list(v, f, 0)),
    ("warm", lambda v, f: _names_list(v, f, 4)),
    ("formal", lambda v, f: _names_list(v, f, 2)),
    ("agent", lambda v, f: _names_list(v, f, 3)),
]


def k_list_extra(b: Builder) -> None:
    """Two pairs add an invented product (of the same category where there is one), two add
    a real product that the query did not return (same category, other gender or brand)."""
    all_names = set(b.col("SELECT name FROM products"))
    cats = b.col("SELECT name FROM categories")
    pool = list_candidates(b, "p.name", 3, 6)
    for i, (desc, sql, cols, rows) in enumerate(sample(b, pool)):
        names = [r[0] for r in rows]
        cat = next((c for c in cats if desc.endswith(" " + c) or desc == c), None)
        others = [] if cat is None else sorted(
            set(b.col(f"SELECT p.name {CAT_JOIN} WHERE c.name = {lit(cat)}")) - set(names))
        if i % 2 == 0 or not others:
            extra = b.rng.choice(INVENTED.get(cat, INVENTED_ANY))
            assert extra not in all_names
            err = f"list: adds {extra}, an invented product not in the rows"
        else:
            extra = b.rng.choice(others)
            err = f"list: adds {extra}, a real product that is not in the rows"
        bad = list(names)
        bad.insert(b.rng.randrange(len(bad) + 1), extra)
        q = b.rng.choice([f"Which {desc} do you have?", f"list {desc}",
                          f"What {desc} are there?"])
        b.pair("list_extra", q, sql, cols, rows, T_NAMES, {"names": names, "desc": desc},
               {"names": bad, "desc": desc}, err)


def _prices_list(v, f, style):
    items = v["items"]
    if style == 0:
        return ", ".join(f"{n} {f.eur(p)}" for n, p in items) + "."
    if style == 1:
        return "Here are the prices:\n" + f.bullets([f"{n}: {f.eur(p)}" for n, p in items])
    if style == 2:
        return "Sure! " + cap1(f.join([f"the {n} is {f.eur(p)}" for n, p in items])) + "."
    return "Prices as listed:\n" + f.bullets([f"{n} — {f.eur(p)}" for n, p in items],
                                             numbered=True)


T_PRICES: list[Template] = [
    ("terse", lambda v, f: _prices_list(v, f, 0)),
    ("agent", lambda v, f: _prices_list(v, f, 1)),
    ("warm", lambda v, f: _prices_list(v, f, 2)),
    ("formal", lambda v, f: _prices_list(v, f, 3)),
]


def k_list_prices_swapped(b: Builder) -> None:
    pool = list_candidates(b, "p.name, p.price", 3, 6,
                           check=lambda cols, rows: len({r[1] for r in rows}) >= 3)
    for desc, sql, cols, rows in sample(b, pool):
        items = [(r[0], r[1]) for r in rows]
        while True:
            i, j = sorted(b.rng.sample(range(len(items)), 2))
            if abs(items[i][1] - items[j][1]) >= 5:
                break
        bad = list(items)
        bad[i], bad[j] = (items[i][0], items[j][1]), (items[j][0], items[i][1])
        q = b.rng.choice([f"What are the prices of the {desc}?",
                          f"How much are the {desc}?"])
        b.pair("list_prices_swapped", q, sql, cols, rows, T_PRICES, {"items": items},
               {"items": bad},
               f"prices of {items[i][0]} and {items[j][0]} swapped")


# ---------------------------------------------------------------- kinds: grouped counts

def _groups(v, f, style):
    g = v["groups"]
    unit = v["unit"]
    if style == 0:
        return ", ".join(f"{k} {n}" for k, n in g) + "."
    if style == 1:
        return (f"Here's the breakdown by {v['by']}:\n"
                + f.bullets([f"{k}: {f.num(n)}" for k, n in g]))
    if style == 2:
        return ("By " + v["by"] + ": "
                + f.join([f"{k} has {n} {unit if n != 1 else unit[:-1]}" for k, n in g]) + ".")
    return (f"Breakdown of {v['what']} by {v['by']}:\n"
            + "\n".join(f"{k} | {n}" for k, n in g))


T_GROUPS: list[Template] = [
    ("terse", lambda v, f: _groups(v, f, 0)),
    ("warm", lambda v, f: _groups(v, f, 1)),
    ("agent", lambda v, f: _groups(v, f, 2)),
    ("formal", lambda v, f: _groups(v, f, 3)),
]


def _group_pair(b: Builder, kind: str, q: str, sql: str, by: str, what: str, unit: str):
    cols, rows = b.q(sql)
    groups = [(r[0], r[1]) for r in rows]
    i = b.rng.randrange(len(groups))
    bad = list(groups)
    k, n = groups[i]
    newn = n + b.rng.choice([1, 2]) if n <= 1 else n + b.rng.choice([-1, 1, 2])
    bad[i] = (k, newn)
    b.pair(kind, q, sql, cols, rows, T_GROUPS,
           {"groups": groups, "by": by, "what": what, "unit": unit},
           {"groups": bad, "by": by, "what": what, "unit": unit},
           f"grouped count: says {k} {newn}, the row says {n}")


def k_group_brand(b: Builder) -> None:
    pool = []
    for cat in b.col("SELECT name FROM categories"):
        sql = (f"SELECT b.name AS brand, COUNT(*) AS n_products {CAT_JOIN} WHERE c.name = "
               f"{lit(cat)} GROUP BY b.name ORDER BY n_products DESC, brand")
        if len(b.q(sql)[1]) >= 3:
            pool.append((cat, sql))
    for cat, sql in sample(b, pool):
        q = b.rng.choice([f"How many {cat} does each brand have?",
                          f"Break down our {cat} by brand."])
        _group_pair(b, "group_brand", q, sql, "brand", cat, "products")


def k_group_category(b: Builder) -> None:
    pool = []
    for brand in b.col("SELECT name FROM brands"):
        sql = (f"SELECT c.name AS category, COUNT(*) AS n_products {CAT_JOIN} WHERE b.name = "
               f"{lit(brand)} GROUP BY c.name ORDER BY n_products DESC, category")
        if 3 <= len(b.q(sql)[1]) <= 7:
            pool.append((brand, sql))
    for brand, sql in sample(b, pool):
        q = b.rng.choice([f"How many products does {brand} have per category?",
                          f"{brand}: product count by category?"])
        _group_pair(b, "group_category", q, sql, "category", f"{brand} products", "products")


def k_group_status(b: Builder) -> None:
    pool = []
    for m, label in (("2026-05", "May 2026"), ("2026-06", "June 2026"), ("2026-07", "July 2026"),
                     ("2026-08", "August 2026"), ("2026-10", "October 2026"),
                     ("2026-11", "November 2026")):
        sql = (f"SELECT status, COUNT(*) AS n_orders FROM orders WHERE ordered_at LIKE '{m}%' "
               f"GROUP BY status ORDER BY status")
        pool.append((f"What's the status breakdown of orders placed in {label}?", sql,
                     f"{label} orders"))
    for country in ("France", "Germany", "Portugal", "Netherlands", "Ireland"):
        sql = (f"SELECT o.status, COUNT(*) AS n_orders FROM orders o JOIN customers cu ON "
               f"cu.customer_id = o.customer_id WHERE cu.country = {lit(country)} "
               f"GROUP BY o.status ORDER BY o.status")
        where = "the Netherlands" if country == "Netherlands" else country
        pool.append((f"How many orders from customers in {where} are in each status?", sql,
                     f"orders from {where}"))
    pool = [x for x in pool if len(b.q(x[1])[1]) >= 2]
    for q, sql, what in sample(b, pool):
        _group_pair(b, "group_status", q, sql, "status", what, "orders")


# ---------------------------------------------------------------- kinds: orders, customers

ORDER_SQL = "SELECT order_id, ordered_at, status FROM orders WHERE order_id = {}"


def _order_date(v, f, style):
    d, t = v["at"][:10], v["at"][11:]
    if style == 0:
        return f"{f.date(d)}."
    if style == 1:
        return f"Order #{v['id']} was placed on {f.date(d)} at {f.time(t)}."
    if style == 2:
        return f"You placed order {v['id']} on {f.date(d)}!"
    return f"Order {v['id']}: placed {f.date(d)}, {f.time(t)}."


T_ORDER_DATE: list[Template] = [
    ("terse", lambda v, f: _order_date(v, f, 0)),
    ("agent", lambda v, f: _order_date(v, f, 1)),
    ("warm", lambda v, f: _order_date(v, f, 2)),
    ("formal", lambda v, f: _order_date(v, f, 3)),
]


def k_order_date(b: Builder) -> None:
    import datetime as dt
    ids = sample(b, b.col("SELECT order_id FROM orders"))
    for oid in ids:
        sql = ORDER_SQL.format(oid)
        cols, rows = b.q(sql)
        at = rows[0][1]
        d = dt.date.fromisoformat(at[:10])
        bad_d = d + dt.timedelta(days=b.rng.choice([-9, -5, -3, 4, 6, 11, 30]))
        bad = bad_d.isoformat() + at[10:]
        q = b.rng.choice([f"When was order {oid} placed?", f"what date is order #{oid} from?"])
        b.pair("order_date", q, sql, cols, rows, T_ORDER_DATE, {"id": oid, "at": at},
               {"id": oid, "at": bad}, f"date: says {bad[:10]}, the row says {at[:10]}")


STATUS_WRONG = {"delivered": ["cancelled", "returned"], "shipped": ["delivered", "cancelled"],
                "returned": ["cancelled"], "cancelled": ["delivered", "shipped"]}


def status_phrase(s: str, f: Fmt) -> str:
    return {"delivered": "has been delivered", "shipped": "has been shipped",
            "returned": "was returned",
            "cancelled": "was canceled" if f.us else "was cancelled"}[s]


T_ORDER_STATUS: list[Template] = [
    ("terse", lambda v, f: f"{v['s'].capitalize()}."),
    ("terse", lambda v, f: f"#{v['id']}: {v['s']}."),
    ("warm", lambda v, f: f"Order #{v['id']} {status_phrase(v['s'], f)}!"),
    ("formal", lambda v, f: f"The current status of order {v['id']} is \"{v['s']}\"."),
    ("agent", lambda v, f: f"I've checked order {v['id']} for you: it "
                           f"{status_phrase(v['s'], f)}."),
]


def k_order_status(b: Builder) -> None:
    by_status = {s: b.col(f"SELECT order_id FROM orders WHERE status = '{s}'")
                 for s in STATUS_WRONG}
    picks = [b.rng.choice(by_status[s]) for s in ("shipped", "returned", "cancelled")]
    picks.append(b.rng.choice(by_status["delivered"]))
    for oid in picks:
        sql = ORDER_SQL.format(oid)
        cols, rows = b.q(sql)
        s = rows[0][2]
        bad = b.rng.choice(STATUS_WRONG[s])
        q = b.rng.choice([f"What's the status of order {oid}?", f"where is my order #{oid}?",
                          f"Order {oid} status?"])
        templates = T_ORDER_STATUS
        if s == "cancelled":  # the warm assistant writes "canceled"
            templates = [t for t in T_ORDER_STATUS if t[0] == "warm"]
        b.pair("order_status", q, sql, cols, rows, templates, {"id": oid, "s": s},
               {"id": oid, "s": bad}, f"status: says {bad}, the row says {s}")


def _total(v, f, style):
    t = f.eur(v["t"])
    if style == 0:
        return f"Total: {t}."
    if style == 1:
        parts = " + ".join(f"{q} × {f.eur(p)}" for _, q, p in v["lines"])
        return f"{parts} = {t}."
    if style == 2:
        return f"Your order #{v['id']} came to {t} altogether!"
    if style == 3:
        return (f"Order {v['id']} comprises {v['k']} line items with a combined value of "
                f"{t}.")
    lines = [f"{q} × {n} at {f.eur(p)}" for n, q, p in v["lines"]]
    return "Breakdown:\n" + f.bullets(lines) + f"\nOrder total: {t}"


T_TOTAL: list[Template] = [
    ("terse", lambda v, f: _total(v, f, 0)),
    ("terse", lambda v, f: _total(v, f, 1)),
    ("warm", lambda v, f: _total(v, f, 2)),
    ("formal", lambda v, f: _total(v, f, 3)),
    ("agent", lambda v, f: _total(v, f, 4)),
]


def k_order_total(b: Builder) -> None:
    multi = b.col("SELECT order_id FROM order_items GROUP BY order_id "
                  "HAVING COUNT(*) >= 2 AND MAX(quantity) >= 2")
    single = b.col("SELECT order_id FROM order_items GROUP BY order_id "
                   "HAVING COUNT(*) >= 2 AND MAX(quantity) = 1")
    for oid in b.rng.sample(multi, 3) + b.rng.sample(single, 1):
        sql = (f"SELECT p.name, oi.size, oi.quantity, oi.unit_price FROM order_items oi JOIN "
               f"products p ON p.product_id = oi.product_id WHERE oi.order_id = {oid}")
        cols, rows = b.q(sql)
        lines = [(r[0], r[2], r[3]) for r in rows]
        t = round(sum(q * p for _, q, p in lines), 2)
        if any(q > 1 for _, q, _ in lines):
            bad = round(sum(p for _, _, p in lines), 2)
            err = f"total: says {bad:.2f} (ignores quantities), the rows total {t:.2f}"
        else:
            bad = round(t + b.rng.choice([10, 20, -10]), 2)
            err = f"total: says {bad:.2f}, the rows total {t:.2f}"
        q = b.rng.choice([f"What's the total of order {oid}?",
                          f"How much did order #{oid} cost in total?"])
        good = {"id": oid, "t": t, "lines": lines, "k": len(lines)}
        b.pair("order_total", q, sql, cols, rows, T_TOTAL, good, dict(good, t=bad), err)


def _customer(v, f, style):
    if style == 0:
        return f"{v['city']}, {v['country']}; joined {f.date(v['j'])}."
    if style == 1:
        return (f"{v['name']} is based in {v['city']}, {v['country']}, and has been a "
                f"customer since {f.date(v['j'])}!")
    if style == 2:
        return (f"Customer record: {v['name']}, located in {v['city']} ({v['country']}), "
                f"registered on {f.date(v['j'])}.")
    return f"{v['name']} lives in {v['city']} and joined us on {f.date(v['j'])}."


T_CUSTOMER: list[Template] = [
    ("terse", lambda v, f: _customer(v, f, 0)),
    ("warm", lambda v, f: _customer(v, f, 1)),
    ("formal", lambda v, f: _customer(v, f, 2)),
    ("agent", lambda v, f: _customer(v, f, 3)),
]


def k_customer(b: Builder) -> None:
    import datetime as dt
    cities = b.col("SELECT DISTINCT city FROM customers")
    for i, name in enumerate(sample(b, b.col("SELECT name FROM customers"))):
        sql = (f"SELECT name, city, country, joined_at FROM customers WHERE name = "
               f"{lit(name)}")
        cols, rows = b.q(sql)
        _, city, country, j = rows[0]
        good = {"name": name, "city": city, "country": country, "j": j}
        if i % 2 == 0:
            bad = dict(good, city=b.rng.choice([c for c in cities if c != city]))
            err = f"city: says {bad['city']}, the row says {city}"
        else:
            bd = dt.date.fromisoformat(j) + dt.timedelta(days=b.rng.choice([-60, -31, 45, 92]))
            bad = dict(good, j=bd.isoformat())
            err = f"join date: says {bad['j']}, the row says {j}"
        q = b.rng.choice([f"Where is {name} based, and when did they join?",
                          f"Customer info for {name}?"])
        b.pair("customer", q, sql, cols, rows, T_CUSTOMER, good, bad, err)


# ---------------------------------------------------------------- kinds: empty, extra, NULL

EMPTY = [
    ("red dresses", "c.name = 'dresses' AND p.colour = 'red'", "Scarlet Wrap Dress", 95.0),
    ("leather jeans", "c.name = 'jeans' AND p.material = 'leather'", "Leather Straight Jean",
     199.0),
    ("sneakers under €50", "c.name = 'sneakers' AND p.price < 50", "Canvas Slip-On Sneaker",
     45.0),
    ("coats under €150", "c.name = 'coats' AND p.price < 150", "Lightweight Mac Coat", 129.0),
    ("silk jackets", "c.name = 'jackets' AND p.material = 'silk'", "Silk Bomber Jacket", 189.0),
    ("yellow boots", "c.name = 'boots' AND p.colour = 'yellow'", "Yellow Rain Boot", 79.0),
    ("cashmere dresses", "c.name = 'dresses' AND p.material = 'cashmere'",
     "Cashmere Knit Dress", 229.0),
    ("Indigo Mill items under €100", "b.name = 'Indigo Mill' AND p.price < 100",
     "Indigo Mill Selvedge Tee", 69.0),
    ("linen coats", "c.name = 'coats' AND p.material = 'linen'", "Linen Duster Coat", 169.0),
]


def _empty(v, f, style):
    inv = v["found"]
    d = v["desc"]
    if style == 0:
        return "No matches." if inv is None else f"{inv[0]}, {f.eur(inv[1])}."
    if style == 1:
        if inv is None:
            return (f"Aw, I looked but nothing matches — there aren't any {d} in the "
                    f"{f.cat_word()} right now.")
        return f"Yes! We have the {inv[0]} for {f.eur(inv[1])} — it's one of our {d}."
    if style == 2:
        if inv is None:
            return f"The query returned no results: there are no {d} in the {f.cat_word()}."
        return f"The query returned one result: the {inv[0]}, priced at {f.eur(inv[1])}."
    if inv is None:
        return f"I'm afraid we don't have any {d} at the moment."
    return f"We do: the {inv[0]}, which is {f.eur(inv[1])}."


T_EMPTY: list[Template] = [
    ("terse", lambda v, f: _empty(v, f, 0)),
    ("warm", lambda v, f: _empty(v, f, 1)),
    ("formal", lambda v, f: _empty(v, f, 2)),
    ("agent", lambda v, f: _empty(v, f, 3)),
]


def k_empty(b: Builder) -> None:
    names = set(b.col("SELECT name FROM products"))
    for desc, where, inv, price in sample(b, EMPTY):
        sql = f"SELECT p.name, p.price {CAT_JOIN} WHERE {where}"
        cols, rows = b.q(sql)
        assert rows == [] and inv not in names
        q = b.rng.choice([f"Do you have any {desc}?", f"Show me {desc}.",
                          f"any {desc}?"])
        b.pair("empty_result", q, sql, cols, rows, T_EMPTY, {"desc": desc, "found": None},
               {"desc": desc, "found": (inv, price)},
               f"invents a product ({inv}); the query returned no rows")


EXTRA_FACTS = ["It's machine washable.", "It's one of our best sellers.",
               "Shipping on it is free.", "It runs true to size.",
               "It was restocked last week.", "It's made in Portugal.",
               "It comes with a two-year warranty.", "It's part of the new autumn collection.",
               "Members get 10% off it."]


def _extra(v, f, style):
    name, c, p = v["name"], f.colour(v["c"]), f.eur(v["p"])
    if style == 0:
        base = f"{c.capitalize()}, {p}."
    elif style == 1:
        base = f"The {name} is {c} and it's {p}!"
    elif style == 2:
        base = f"The {name} is listed in {c} at a price of {p}."
    else:
        base = f"The {name} comes in {c} and costs {p}."
    return base if v["extra"] is None else base + " " + v["extra"]


T_EXTRA: list[Template] = [
    ("terse", lambda v, f: _extra(v, f, 0)),
    ("warm", lambda v, f: _extra(v, f, 1)),
    ("formal", lambda v, f: _extra(v, f, 2)),
    ("agent", lambda v, f: _extra(v, f, 3)),
]


def k_extra_fact(b: Builder) -> None:
    for name in sample(b, unique_names(b)):
        sql = f"SELECT name, colour, price FROM products WHERE name = {lit(name)}"
        cols, rows = b.q(sql)
        _, c, p = rows[0]
        fact = b.rng.choice(EXTRA_FACTS)
        q = b.rng.choice([f"What colour is the {name} and how much is it?",
                          f"{name}: colour and price?"])
        good = {"name": name, "c": c, "p": p, "extra": None}
        b.pair("extra_fact", q, sql, cols, rows, T_EXTRA, good, dict(good, extra=fact),
               f"adds a fact not in the rows: {fact!r}")


NULL_GUESS = {"Logo Graphic Tee": "cotton", "Beaded Evening Clutch": "satin",
              "Flannel Overshirt": "wool", "Tailored Cigarette Trousers": "wool blend"}


def _null_single(v, f, style):
    m, name, c = v["m"], v["name"], f.colour(v["c"])
    if style == 0:
        return "Material: not listed." if m is None else f"Material: {m}."
    if style == 1:
        if m is None:
            return (f"Hmm, the material isn't listed for the {name}, but I can tell you "
                    f"it's {c}!")
        return f"The {name} is made from {m}, and it's {c}!"
    if style == 2:
        if m is None:
            return f"No material is recorded for the {name} (the field is empty)."
        return f"The material recorded for the {name} is {m}."
    if m is None:
        return (f"I'm sorry, our {f.cat_word()} doesn't say what the {name} is made of — "
                f"only that it's {c}.")
    return f"The {name} is made of {m} and comes in {c}."


def _null_multi(v, f, style):
    lines = [f"{n} ({f.colour(c)}): {m if m is not None else 'material not listed'}"
             for n, c, m in v["rows"]]
    if style == 0:
        return "; ".join(lines) + "."
    if style == 1:
        return "Here's what each one is made of:\n" + f.bullets(lines)
    return "Materials on record:\n" + f.bullets(lines, numbered=True)


T_NULL_SINGLE: list[Template] = [
    ("terse", lambda v, f: _null_single(v, f, 0)),
    ("warm", lambda v, f: _null_single(v, f, 1)),
    ("formal", lambda v, f: _null_single(v, f, 2)),
    ("agent", lambda v, f: _null_single(v, f, 3)),
]
T_NULL_MULTI: list[Template] = [
    ("terse", lambda v, f: _null_multi(v, f, 0)),
    ("agent", lambda v, f: _null_multi(v, f, 1)),
    ("formal", lambda v, f: _null_multi(v, f, 2)),
]


def k_null_value(b: Builder) -> None:
    _, nulls = b.q(f"SELECT p.name, c.name, p.gender {CAT_JOIN} WHERE p.material IS NULL "
                   "ORDER BY p.product_id")
    multi = set(b.rng.sample(range(len(nulls)), 2))
    for i, (name, cat, gender) in enumerate(nulls):
        guess = NULL_GUESS[name]
        if i in multi:
            sql = (f"SELECT p.name, p.colour, p.material {CAT_JOIN} WHERE c.name = {lit(cat)} "
                   f"AND p.gender = {lit(gender)}")
            cols, rows = b.q(sql)
            assert len(rows) >= 2
            bad_rows = [[n, c, guess if n == name else m] for n, c, m in rows]
            q = f"What are the {GENDER_ADJ[gender]} {cat} made of?"
            b.pair("null_value", q, sql, cols, rows, T_NULL_MULTI, {"rows": rows},
                   {"rows": bad_rows},
                   f"NULL material: says {name} is {guess}, the row's material is NULL")
            continue
        sql = f"SELECT name, colour, material FROM products WHERE name = {lit(name)}"
        cols, rows = b.q(sql)
        q = b.rng.choice([f"What is the {name} made of?", f"{name} material?"])
        good = {"name": name, "c": rows[0][1], "m": None}
        b.pair("null_value", q, sql, cols, rows, T_NULL_SINGLE, good, dict(good, m=guess),
               f"NULL material: says {guess}, the row's material is NULL")


# ---------------------------------------------------------------- build

KINDS = [k_colour, k_material, k_brand, k_several, k_price_exact, k_price_hedged,
         k_price_bound, k_stock_count, k_in_stock, k_sold_out, k_sizes_codes, k_sizes_words,
         k_count_rows, k_count_column, k_avg_column, k_sum_column, k_minmax_column,
         k_sum_computed, k_avg_computed, k_cheapest, k_most_stock, k_newest, k_compare_two,
         k_price_difference, k_price_range, k_ordered_list, k_list_extra,
         k_list_prices_swapped, k_group_brand, k_group_category, k_group_status,
         k_order_date, k_order_status, k_order_total, k_customer, k_empty, k_extra_fact,
         k_null_value]


def build(seed: int = SEED) -> list[dict]:
    """The held-out set: pairs (one correct, one with one planted error) of every kind,
    pairs shuffled, ids ``rc_c0000``…"""
    b = Builder(seed)
    for k in KINDS:
        k(b)
    b.rng.shuffle(b.pairs)
    items = []
    for pair in b.pairs:
        for it in pair:
            items.append({"id": f"rc_c{len(items):04d}", **it})
    build.templates_used = len(b.templates_used)  # type: ignore[attr-defined]
    return items


def main() -> None:
    items = build()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", encoding="utf-8") as fh:
        for it in items:
            fh.write(json.dumps(it, ensure_ascii=False) + "\n")
    kinds = sorted({it["kind"] for it in items})
    pos = sum(it["supported"] for it in items)
    print(f"wrote {len(items)} items ({pos} supported, {len(items) - pos} with one error), "
          f"{len(kinds)} kinds, {build.templates_used} answer templates used -> "  # type: ignore
          f"{OUT.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
