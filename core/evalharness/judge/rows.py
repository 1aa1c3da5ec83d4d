"""The row verifier: the offline judge's CLAIM_SUPPORT rule for claims about rows a query returned.

A text context can only be compared word for word; rows are data, so a claim about them can be
*checked*. For each claim the verifier reads what it asserts and settles each assertion against
the tables (:class:`~evalharness.judge.tasks.RowTable`), keeping the evidence:

- **values** — a name, a word or a figure the claim gives must be a cell of the row it speaks
  about (the row whose values it mentions; in a claim about several rows, the row mentioned
  nearest before the figure). Figures match at the precision they are written in, or within the
  tolerance their hedge allows (:data:`HEDGES`);
- **counts** — a number of things is the number of rows, or a cell (a COUNT column);
- **aggregates** — a figure the claim calls a total or an average is the sum or mean of a
  numeric column over the rows;
- **superlatives and order** — "the cheapest", "the most", "A is cheaper than B": the rows'
  minimum or maximum, or their comparison, in the column the claim names (or the only column
  that fits);
- **availability** — "in stock", "available" need a quantity above 0 in the row's quantity
  column; "sold out", "none left" need 0 (the column the scenario declares, else the one the
  claim names, else the only column of whole numbers that is not an id);
- **emptiness** — "nothing matched" needs a table without rows.

A claim is supported when every assertion it makes is settled in its favour and none against
it; a word or a name the rows, the question and the claim's own framing cannot explain is
something the rows cannot settle, and then the claim is supported only if the text context
supports it (the lexical rule of :mod:`evalharness.judge.heuristic`). Every verdict's
``evidence`` says which row and column, or which computation. The policy and its limits are in
docs/metrics/row-verifier.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from evalharness.judge.tasks import RowTable
from evalharness.judge.words import STOPWORDS, fold, stem

# == the policy ================================================================================

HEDGES: dict[str, tuple[str, float]] = {
    # approximately: within the tolerance on either side
    "about": ("near", 0.10), "around": ("near", 0.10), "roughly": ("near", 0.10),
    "approximately": ("near", 0.10), "approx": ("near", 0.10), "circa": ("near", 0.10),
    "ca": ("near", 0.10), "some": ("near", 0.10), "~": ("near", 0.10),
    "close to": ("near", 0.10), "in the region of": ("near", 0.10),
    # just below / above the figure: on that side and within the tolerance
    "just under": ("below", 0.10), "just below": ("below", 0.10),
    "a little under": ("below", 0.10), "a bit under": ("below", 0.10),
    "slightly under": ("below", 0.10), "slightly below": ("below", 0.10),
    "slightly less than": ("below", 0.10), "a little less than": ("below", 0.10),
    "nearly": ("below", 0.10), "almost": ("below", 0.10), "not quite": ("below", 0.10),
    "just over": ("above", 0.10), "just above": ("above", 0.10),
    "a little over": ("above", 0.10), "a bit over": ("above", 0.10),
    "slightly over": ("above", 0.10), "slightly above": ("above", 0.10),
    "slightly more than": ("above", 0.10), "a little more than": ("above", 0.10),
    # bounds: on that side, at any distance
    "under": ("below", math.inf), "below": ("below", math.inf),
    "less than": ("below", math.inf), "cheaper than": ("below", math.inf),
    "fewer than": ("below", math.inf), "up to": ("at_most", math.inf),
    "at most": ("at_most", math.inf), "no more than": ("at_most", math.inf),
    "over": ("above", math.inf), "above": ("above", math.inf),
    "more than": ("above", math.inf), "at least": ("at_least", math.inf),
    "upwards of": ("above", math.inf), "from": ("at_least", math.inf),
}
"""Words before a figure that loosen how it must match, with the side and the relative
tolerance they allow: ``near`` ±10% ("about €50" for 45–55), ``below`` the figure and within
10% ("just under €50", "almost €50" for 45–49.99), ``above`` likewise; bounds ("under",
"more than", "at least", "up to") hold at any distance. An unhedged figure must equal the value
at the precision it is written in ("€50" for 49.90 or 50.00, not for 49.40; "49.95" not for
49.90)."""

QUANTITY_WORDS = ("in stock", "left", "remaining", "available", "units", "unit", "pieces",
                  "piece", "pairs", "pair", "on hand", "in store")
"""Words after a figure that make it a quantity of a row's thing (compared with the quantity
column first)."""

AVAILABLE = ("in stock", "available", "can be ordered", "can order", "you can get", "we have",
             "we've got", "we carry", "there is", "there are", "is there", "are there",
             "still have", "have it", "comes in", "come in", "ready to ship", "yes")
"""Phrases that say a row's thing can be had: a quantity column must be above 0."""

UNAVAILABLE = ("have zero", "have 0", "sold out", "out of stock", "none left", "no longer available", "unavailable",
               "not available", "not in stock", "no stock", "run out", "ran out",
               "have none", "none in stock", "nothing left", "zero left", "0 left",
               "not have any", "don't have any", "do not have any", "isn't available",
               "aren't available", "is not available", "are not available",
               "isn't in stock", "aren't in stock", "can't be ordered", "cannot be ordered",
               "no more", "all gone", "currently unavailable")
"""Phrases that say a row's thing cannot be had: the quantity column must be 0."""

EMPTY = ("nothing matched", "nothing matches", "nothing match", "no match", "no matches",
         "no matching", "no results", "no result", "found nothing", "find nothing",
         "nothing found", "no such", "none match", "none matched", "nothing in",
         "couldn't find any", "could not find any", "can't find any", "cannot find any",
         "didn't find any", "did not find any", "no items", "no products", "no records",
         "no entries", "no rows", "we have no", "there are no", "there is no", "we don't have",
         "we do not have", "not carry", "don't carry", "do not carry", "none of",
         "nothing like", "nothing that", "nothing fits", "nothing under", "nothing over",
         "not find", "no options", "no option", "zero results", "0 results", "returned nothing",
         "came up empty", "empty")
"""Phrases that say the query found nothing: the table must have no rows."""

SUM_WORDS = ("adding up", "added up", "add up to", "summed", "all sizes", "every size",
             "all together", "total", "together", "altogether", "combined", "in all", "sum", "come to",
             "comes to", "add up", "adds up", "all of them", "for all", "all together",
             "in sum", "overall", "revenue")
DIFFERENCE_WORDS = ("difference", "differ", "more than", "less than", "cheaper", "dearer",
                    "pricier", "more expensive", "less expensive", "saving", "save", "apart",
                    "gap", "higher", "lower", "extra", "exceeds", "exceed")
"""Words that make a figure the difference of two rows' values."""
MEAN_WORDS = ("average", "on average", "mean", "typically", "avg")
"""Words that make a figure a sum (or a mean) over the rows."""

DATE_ORDER = ("newest", "latest", "most recent", "most recently", "oldest", "earliest",
              "first added", "longest-standing")
"""Superlatives about dates: compared in the one column of dates."""

LOW = ("oldest", "earliest", "first added", "longest-standing", "is cheaper", "are cheaper",
       "is less expensive", "costs less", "the cheaper", "cheaper one", "the less expensive", "less expensive of", "the lower",
       "cheapest", "least expensive", "lowest", "lowest-priced", "lowest priced",
       "most affordable", "least costly", "smallest", "fewest", "least", "minimum",
       "bottom", "cheapest one", "best price", "best-priced")
HIGH = ("newest", "latest", "most recent", "most recently", "is pricier", "is more expensive",
        "is dearer", "costs more", "the pricier", "pricier one", "the more expensive", "more expensive of", "the dearer",
        "tops the list", "best-stocked", "best stocked", "most expensive", "priciest", "dearest", "highest", "highest-priced", "costliest",
        "most costly", "largest", "biggest", "greatest", "most", "maximum", "top", "best-selling",
        "best selling", "best seller", "bestseller", "top-selling", "the most popular")
"""Superlatives: the row they name must hold the minimum (``LOW``) or maximum (``HIGH``)."""

ASCENDING = ("cheapest first", "lowest first", "least expensive first", "ascending",
             "low to high", "lowest to highest", "cheapest to", "from cheapest", "from lowest",
             "from the cheapest", "increasing", "smallest first", "fewest first")
DESCENDING = ("priciest first", "most expensive first", "highest first", "highest price first",
              "dearest first", "descending", "high to low", "highest to lowest",
              "from most expensive", "from the most expensive", "from priciest",
              "from highest", "decreasing", "largest first", "most first")
"""Words that say a list is ordered: the rows it names must follow the column's order."""

MONEY_CUES = ("cheap", "expensive", "pric", "cost", "afford", "dear", "pay", "spend", "budget")
"""Word starts of superlatives and comparatives about money: compared in a money column."""

LESS = ("cheaper than", "less expensive than", "lower than", "less than", "fewer than",
        "smaller than", "costs less than", "below")
MORE = ("more expensive than", "pricier than", "dearer than", "higher than", "more than",
        "larger than", "bigger than", "costs more than", "above")
"""Comparatives between two rows the claim names (first named, then second)."""

CURRENCY = {"€": "EUR", "eur": "EUR", "euro": "EUR", "euros": "EUR", "$": "USD", "usd": "USD",
            "dollar": "USD", "dollars": "USD", "£": "GBP", "gbp": "GBP", "pound": "GBP",
            "pounds": "GBP", "chf": "CHF", "francs": "CHF", "¥": "JPY", "yen": "JPY"}

NUMBER_WORDS = {
    "no": 0, "zero": 0, "one": 1, "a single": 1, "single": 1, "two": 2, "three": 3, "four": 4,
    "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11,
    "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40,
    "fifty": 50, "a dozen": 12, "a couple of": 2, "a pair of": 2, "a hundred": 100,
}
"""Number words read as counts ("three products", "both"); "no" only before a noun."""

VALUE_WORDS = {"xxs": ("extra extra small", "double extra small", "2xs"), "xs": ("extra small", "x-small"),
               "s": ("small",), "m": ("medium",), "l": ("large",),
               "xl": ("extra large", "x-large"), "xxl": ("extra extra large", "double extra large", "2xl", "xx-large"),
               "xxxl": ("3xl",), "y": ("yes", "true"), "n": ("no", "false"),
               "true": ("yes",), "false": ("no",)}
"""Words a cell's short code is written as ("M" = "medium"): matched like the cell itself."""

CODES = {k: v for k, v in VALUE_WORDS.items() if k not in ("y", "n", "true", "false")}
"""The codes of :data:`VALUE_WORDS` that name a value of a kind (a size): a claim that writes
another code of the kind, or its word, than the row holds is contradicted."""

FRAME = frozenset("""
yes yeah sorry unfortunately here there found find finds match matches matched matching search
searched searching query result results item items option options product products entry
entries record records catalog catalogue selection range list listed following available
availability stock left remaining cost costs costing costed price priced prices pricing pay
paying buy buying order ordered ordering get got gets have has had having come comes came
unit units piece pieces pair pairs size sizes currently right now today also only just still
both each every all none nothing anything something any some other another more most less
least many much few number numbers count counted total totals altogether together combined
sum overall average mean typically value values amount amounts brand brands sold sell sells
selling carry carries carried offer offers offered stocked in-stock out ready ship shipping
ordering orderable exist exists existing inventory database data show shows showing
matched look looking looked check checked checking see saw can could may might
will would that's it's there's here's they're we're we've i'm i've let note please kindly
cheap cheaper cheapest expensive pricier priciest dear dearest affordable costly lowest low
lower highest high higher largest large larger smallest small smaller biggest big bigger
fewest greatest maximum minimum top bottom best worst first last next whole across from
euro euros eur usd dollar dollars pound pounds gbp chf franc francs yen
thing things one ones kind kinds type types version versions model models style styles
currently presently moment time times per each apiece approx approximately about around
roughly nearly almost under over above below circa close slightly little bit just well
new old
sure course certainly absolutely great good news question happy glad help helps helpful
nice lovely choice pick go check let moment hold list listed file record say says shows
design designs piece pieces item items label labels line lines look looking option
make makes made making worth hold holds holding took take takes sales sale sold
afraid plenty away since placed place places based lives live located eu uk us waist
hurry sorted ascending descending
""".split())
"""Words that frame a claim about rows ("we found", "costs", "in stock"), not assert a value."""


# == reading a claim ===========================================================================

_NUM = re.compile(
    r"(?P<pre>[€$£¥]\s?)?(?P<num>(?<![\w.,])(?:\d{1,3}(?: \d{3})+[.,]\d{1,2}"
    r"|\d{1,3}(?:[,.]\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d+)?))(?![\d])"
    r"(?P<post>\s?(?:[€$£¥]|eur\b|euros?\b|usd\b|dollars?\b|gbp\b|pounds?\b|"
    r"chf\b|francs\b|yen\b|%))?", re.IGNORECASE)


def readings(raw: str) -> list[tuple[float, int]]:
    """The values a written number may mean, with the decimals written, most likely first:
    thousands separators of either convention, decimal points and commas.

    >>> readings("1,299.00"), readings("22.568,00"), readings("4 328,90"), readings("49,90")
    ([(1299.0, 2)], [(22568.0, 2)], [(4328.9, 2)], [(49.9, 2)])
    >>> readings("3.700"), readings("1,299")
    ([(3700.0, 0), (3.7, 3)], [(1299.0, 0), (1.299, 3)])
    """
    raw = raw.replace(" ", "")
    m = re.fullmatch(r"(\d{1,3}(?:([,.])\d{3})+)(?:([.,])(\d{1,2}))?", raw)
    out: list[tuple[float, int]] = []
    if m and (m.group(3) is None or m.group(3) != m.group(2)):
        whole = re.sub(r"[,.]", "", m.group(1))
        frac = m.group(4) or ""
        out.append((float(f"{whole}.{frac}" if frac else whole), len(frac)))
    if re.fullmatch(r"\d+[.,]\d+", raw):
        value = raw.replace(",", ".")
        out.append((float(value), len(value.split(".")[1])))
    elif not out and re.fullmatch(r"\d+", raw):
        out.append((float(raw), 0))
    return out
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*|[€$£¥~]", re.UNICODE)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("’", "'").replace("–", "-").replace("—", "-")
                  .replace("\u00a0", " ")).strip()


SPELLINGS = {"grey": "gray", "colour": "color", "cancelled": "canceled",
             "favourite": "favorite", "centre": "center", "catalogue": "catalog",
             "jewellery": "jewelry", "aluminium": "aluminum", "pyjamas": "pajamas",
             "travelling": "traveling", "organise": "organize"}
"""A cell's British spellings, also matched in their American form ("gray" is "grey")."""
_SPELLING = re.compile(r"\b(" + "|".join(SPELLINGS) + r")\b")



def _has(text: str, phrases: Sequence[str]) -> str | None:
    """The first phrase of ``phrases`` found in ``text`` (folded, on word boundaries)."""
    for p in phrases:
        if p in text and _phrase(p).search(text):  # the substring test first: most are absent
            return p
    return None


@lru_cache(maxsize=8192)
def _phrase(p: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){re.escape(p)}(?![\w-])")


@dataclass
class Figure:
    """A number the claim states."""

    value: float
    decimals: int
    start: int
    end: int
    text: str
    money: bool = False
    percent: bool = False
    hedge: str | None = None
    word: bool = False
    quantity: bool = False
    others: tuple[tuple[float, int], ...] = ()
    """Other values the written number may mean ("3.700": 3700, or 3.7)."""


_HEDGE_BEFORE = re.compile(r"(?<![\w-])(" + "|".join(
    re.escape(h) for h in sorted(HEDGES, key=len, reverse=True)) + r")\s*$")
"""A hedge right before a figure, the longest that fits ("just under" before "under")."""


def _figures(claim: str) -> list[Figure]:
    """The figures of a claim: digits (with currency, thousands separators, decimal commas)
    and number words before a noun; each with the hedge written before it."""
    out: list[Figure] = []
    low = claim.lower()
    for m in _NUM.finditer(claim):
        read = readings(m.group("num"))
        if not read:
            continue
        (value, decimals), *others = read
        post = (m.group("post") or "").strip().lower()
        out.append(Figure(value, decimals, m.start(), m.end(), m.group(0).strip(),
                          money=bool(m.group("pre")) or (bool(post) and post != "%"),
                          percent=post == "%", others=tuple(others)))
    for word, value in NUMBER_WORDS.items():
        follow = r"(?=\s+[a-z])" if word in ("no", "one", "single", "a single") else \
            r"(?=\s+[a-z]|\s*[-:,.;]|\s*$)"
        if word not in low:
            continue
        for m in re.finditer(rf"(?<![\w-]){re.escape(word)}{follow}", low):
            after = low[m.end():].split()
            nxt = after[0] if after else ""
            if word == "no" and (nxt in ("longer", "more", "such", "matching", "results",
                                         "match", "one", "stock", "items", "products")):
                continue  # "no longer", "no such": not a count of 0
            if word in ("one", "single", "a single") and nxt in ("of", "another", "more"):
                continue
            before = low[:m.start()].split()[-1:] or [""]
            if word == "one" and (before[0] in ("the", "a", "this", "that", "our", "which",
                                                "every", "each", "any", "no")
                                  or before[0].endswith(("est", "er"))
                                  or nxt in ("is", "was", "which", "that", "who", "i", "we",
                                             "you", "it", "for", "with", "in", "at", "by")):
                continue  # "the one with ...", "the priciest one is": a pronoun
            if any(f.start <= m.start() < f.end for f in out):
                continue
            out.append(Figure(float(value), 0, m.start(), m.end(), claim[m.start():m.end()],
                              word=True))
    for f in out:
        before = low[max(0, f.start - 28):f.start]
        hedge = _HEDGE_BEFORE.search(before)
        f.hedge = hedge.group(1) if hedge else None
        after = low[f.end:f.end + 24]
        f.quantity = not f.money and bool(re.match(
            r"\s*(?:\w+\s+)?(?:" + "|".join(map(re.escape, QUANTITY_WORDS)) + r")\b", after))
    out = [f for f in out if not _ENUMERATED.match(claim, f.start)]
    out.sort(key=lambda f: f.start)
    return out


_ENUMERATED = re.compile(r"\d{1,2}\)(?=\s)|(?<![^\s:,;(])\d{1,2}\.(?=\s+[A-Z])")
"""A list's enumerator ("1)", "2. Name"): not a figure."""


def matches(value: float, figure: Figure) -> bool:
    """Whether a cell's (or a computation's) ``value`` is what ``figure`` states, with its
    hedge (:data:`HEDGES`).

    >>> f = _figures("It is just under €50.")[0]
    >>> matches(49.9, f), matches(50.0, f), matches(44.0, f)
    (True, False, False)
    >>> g = _figures("It costs €50.")[0]
    >>> matches(49.9, g), matches(49.4, g), matches(50.0, g)
    (True, False, True)
    """
    if figure.others:
        return any(matches(value, replace(figure, value=v, decimals=d, others=()))
                   for v, d in ((figure.value, figure.decimals), *figure.others))
    stated = figure.value
    if figure.hedge is None:
        if figure.word:
            return value == stated
        return round(value, figure.decimals) == round(stated, figure.decimals) or \
            abs(value - stated) < 1e-9
    side, tol = HEDGES[figure.hedge]
    near = abs(value - stated) <= max(tol * abs(stated), 0.5 * 10 ** -figure.decimals)
    if side == "near":
        return near
    if side == "below":
        return value < stated and (tol == math.inf or near)
    if side == "above":
        return value > stated and (tol == math.inf or near)
    if side == "at_most":
        return value <= stated
    return value >= stated  # at_least


# == dates =====================================================================================

MONTHS = {m: i for i, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
    ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
    ("october", "oct"), ("november", "nov"), ("december", "dec")), 1) for m in names}
_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_DATES = [re.compile(p, re.IGNORECASE) for p in (
    r"(?<!\d)(?P<year>\d{4})-(?P<mnum>\d{1,2})-(?P<day>\d{1,2})(?:[ t](?P<time>\d{1,2}:\d{2}))?",
    r"(?<!\d)(?P<day>\d{1,2})[./](?P<mnum>\d{1,2})[./](?P<year>\d{4})",
    rf"(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+(?P<year>\d{{4}}))?",
    rf"{_MONTH}\s+{_DAY}(?:,?\s+(?P<year>\d{{4}}))?(?![\d:])",
    rf"{_MONTH}\s+(?P<year>\d{{4}})",
    r"(?<![\d:])(?P<time>\d{1,2}:\d{2})(?::\d{2})?(?![\d:])",
    rf"(?<![\w-]){_MONTH}(?![\w-])",
)]

@dataclass(frozen=True)
class DateText:
    """A date (or a time) a claim writes, with the parts it gives."""

    start: int
    end: int
    year: int | None
    month: int | None
    day: int | None
    time: str | None

    def fits(self, cell: tuple[int, int, int | None, str | None]) -> bool:
        y, m, d, t = cell
        return (self.year in (None, y) and self.month in (None, m)
                and (self.day is None or d == self.day)
                and (self.time is None or (t is not None and t == self.time.zfill(5))))


def _dates(text: str, claim: str = "") -> list[DateText]:
    """Dates and times written in a (folded) claim: ISO, day month year, month day year,
    month year, a time, a month's name (capitalised in the claim: "May", not "may")."""
    out: list[DateText] = []
    for n, pattern in enumerate(_DATES):
        for m in pattern.finditer(text):
            if n == len(_DATES) - 1 and (len(claim) != len(text)
                                         or not claim[m.start()].isupper()):
                continue
            if any(d.start <= m.start() < d.end or m.start() <= d.start < m.end() for d in out):
                continue
            g = m.groupdict()
            month = MONTHS.get((g.get("month") or "").lower()) or (
                int(g["mnum"]) if g.get("mnum") else None)
            day = int(g["day"]) if g.get("day") else None
            if day is not None and not 1 <= day <= 31 or month is not None and not 1 <= month <= 12:
                continue
            out.append(DateText(m.start(), m.end(), int(g["year"]) if g.get("year") else None,
                                month, day, g.get("time")))
    return out


def _date_cell(v: object) -> tuple[int, int, int | None, str | None] | None:
    """A cell that is a date (``2026-05-08``, ``2026-05-08 13:49:44``) or a month
    (``2026-05``): (year, month, day or None, "HH:MM" or None)."""
    if isinstance(v, str):
        m = re.match(r"(\d{4})-(\d{2})(?:-(\d{2})(?:[ T](\d{2}):(\d{2})(?::\d{2})?)?)?$",
                     v.strip())
        if m:
            time = f"{m.group(4)}:{m.group(5)}" if m.group(4) else None
            return (int(m.group(1)), int(m.group(2)), int(m.group(3)) if m.group(3) else None,
                    time)
    return None


# == the tables ================================================================================


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(float(v)) else None
    if isinstance(v, str):
        s = v.strip().replace(",", "")
        if re.fullmatch(r"-?\d+(?:\.\d+)?", s):
            return float(s)
    return None


@dataclass
class Table:
    """A table prepared for checking: value phrases, numeric columns, quantity columns."""

    raw: RowTable
    index: int
    phrases: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    numeric: list[int] = field(default_factory=list)
    quantity: list[int] = field(default_factory=list)
    money: list[int] = field(default_factory=list)
    codes: list[int] = field(default_factory=list)
    ordered: list[str] = field(default_factory=list)
    """The phrases, longest first."""

    @property
    def n(self) -> int:
        return len(self.raw.rows)

    def label(self, row: int, col: int) -> str:
        name = self.raw.columns[col] if col < len(self.raw.columns) else f"col{col + 1}"
        prefix = f"table {self.index + 1} " if self.index else ""
        return f"{prefix}row {row + 1} {name} = {_show(self.raw.rows[row][col])}"

    def column(self, col: int) -> list[float]:
        return [x for x in (_number(r[col]) for r in self.raw.rows if col < len(r))
                if x is not None]


def _show(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}" if abs(v) < 1e15 else str(v)
    return "NULL" if v is None else str(v)


_ID = re.compile(r"(^|_)(id|no|num|number|code|key)$|^id_")
"""Column names of identifiers: their whole numbers name a row, like text values."""


def prepare(raw: RowTable, index: int = 0) -> Table:
    """Index a table: each text cell (and its :data:`VALUE_WORDS`) as a folded phrase; which
    columns are numeric, which hold quantities (declared, else whole numbers >= 0 that are not
    ids), which money (numbers with decimals)."""
    t = Table(raw, index)
    cols = raw.columns
    ids = {c for c, name in enumerate(cols) if _ID.search(name.lower())}
    for r, row in enumerate(raw.rows):
        for c, v in enumerate(row):
            if v is None or isinstance(v, bool):
                continue
            if c in ids and isinstance(v, int):
                t.phrases.setdefault(str(v), []).append((r, c))  # "order 57" names its row
                continue
            if isinstance(v, str) and v.strip():
                text = fold(_norm(v))
                american = _SPELLING.sub(lambda m: SPELLINGS[m.group(1)], text)
                for phrase in dict.fromkeys((text, american, *VALUE_WORDS.get(text, ()))):
                    t.phrases.setdefault(phrase, []).append((r, c))
    for c in range(len(cols)):
        values = [row[c] for row in raw.rows if c < len(row) and row[c] is not None]
        if values and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                          for v in values):
            t.numeric.append(c)
            if any(isinstance(v, float) for v in values):
                t.money.append(c)  # measured: a price, an average, a weight
        if any(isinstance(v, str) and fold(v.strip()) in CODES for v in values):
            t.codes.append(c)
    t.ordered = sorted(t.phrases, key=len, reverse=True)
    declared = [c.lower() for c in (raw.quantity_columns or [])]
    if declared:
        t.quantity = [c for c, name in enumerate(cols) if name.lower() in declared]
    else:
        t.quantity = [c for c in t.numeric if c not in t.money and not _ID.search(
            cols[c].lower()) and not re.search(r"(^|_)(year|zip)$", cols[c].lower())]
    if not t.money:
        t.money = [c for c in t.numeric if c not in t.quantity]
    return t


# == checking a claim ==========================================================================


@dataclass
class Check:
    """What the verifier found for one claim."""

    for_: list[str] = field(default_factory=list)
    against: list[str] = field(default_factory=list)
    unsettled: list[str] = field(default_factory=list)
    named: int = 0
    """How many row values the claim names."""

    def ok(self, line: str) -> None:
        self.for_.append(line)

    def bad(self, line: str) -> None:
        self.against.append(line)


@dataclass
class Mention:
    start: int
    end: int
    table: int
    cells: list[tuple[int, int]]


def _mentions(text: str, tables: list[Table]) -> list[Mention]:
    """The cell values a (folded) claim names, longest first, without overlaps."""
    found: list[Mention] = []
    taken = [False] * len(text)
    for ti, t in enumerate(tables):
        for phrase in t.ordered:
            if phrase not in text or (len(phrase) == 1 and not phrase.isalnum()):
                continue
            for m in re.finditer(rf"(?<![\w-]){re.escape(phrase)}(?![\w-]|\.\d)", text):
                if any(taken[m.start():m.end()]):
                    continue
                cells = t.phrases[phrase]
                if len(phrase) <= 2 and phrase.isalpha():
                    # a one- or two-letter code ("m", "s", "xl") counts only where the claim
                    # writes it in capitals (a size), never as a word ("a", "is")
                    continue
                for k in range(m.start(), m.end()):
                    taken[k] = True
                found.append(Mention(m.start(), m.end(), ti, cells))
    return found


def _codes(claim: str, text: str, tables: list[Table]) -> list[Mention]:
    """One- and two-letter codes the claim writes in capitals ("size M", "XL") that are cells."""
    out = []
    for m in re.finditer(r"(?<![\w&'-])([A-Z]{1,3}|\d?X{1,3}[SL])(?![\w&'-])", claim):
        code = m.group(1).lower()
        if m.start() == 0 and code in ("a", "i"):
            continue
        for ti, t in enumerate(tables):
            cells = [rc for rc in t.phrases.get(code, [])]
            if cells:
                out.append(Mention(m.start(), m.end(), ti, cells))
    return out


def check_claim(claim: str, tables: list[Table], question: str = "") -> tuple[Check, list[str]]:
    """Settle what ``claim`` asserts against the tables: the evidence for and against it, and
    the words nothing explains."""
    claim = _norm(claim)
    text = fold(claim)
    chk = Check()
    mentions = sorted(_mentions(text, tables) + _codes(claim, text, tables),
                      key=lambda m: m.start)
    figures = _figures(claim)
    # spans the mentions explain; figures that are a mentioned numeric-text cell ("size 43")
    # are explained by the mention
    covered = [False] * len(text)
    for m in mentions:
        for k in range(m.start, m.end):
            covered[k] = True
    dates = _dates(text, claim)
    figures = [f for f in figures if not any(m.start <= f.start and f.end <= m.end
                                             for m in mentions)
               and not any(d.start <= f.start and f.end <= d.end for d in dates)]
    for d in dates:
        for k in range(d.start, d.end):
            covered[k] = True
    # a date that is some rows' date cell names them, like any value ("June: 8")
    unplaced = []
    for d in dates:
        found = [Mention(d.start, d.end, t.index, cells) for t in tables
                 if (cells := [(r, c) for r, row in enumerate(t.raw.rows)
                               for c, v in enumerate(row)
                               if (cell := _date_cell(v)) is not None and d.fits(cell)])]
        if found and len({r for r, _ in found[0].cells}) < tables[found[0].table].n:
            mentions.append(found[0])
        else:
            unplaced.append(d)
    mentions.sort(key=lambda m: m.start)
    chk.named = len(mentions)
    groups = _groups(mentions, chk, tables, claim)
    for d in unplaced:
        _date(chk, claim, d, tables, groups, question)
    bound = sorted({(g.table, r) for g in groups for r in g.rows})
    _other_codes(chk, claim, text, tables, mentions, bound)
    # cue words are read outside the values named ("Low Top" is a name, not "low")
    named = list(text)
    for m in mentions:
        named[m.start:m.end] = " " * (m.end - m.start)
    text = "".join(named)
    empty_tables = [t for t in tables if t.n == 0]
    nonempty = [t for t in tables if t.n > 0]

    # -- emptiness -----------------------------------------------------------------------------
    available, unavailable = _cue(text)
    empty = _has(text, EMPTY) if not unavailable else (
        unavailable if empty_tables and not nonempty else None)
    if empty and not bound:
        if nonempty and not empty_tables:
            t = nonempty[0]
            chk.bad(f"{_tname(t)}has {t.n} row{'s' if t.n != 1 else ''}, so something "
                    f"matched ('{empty}')")
        elif empty_tables:
            chk.ok(f"{_tname(empty_tables[0])}has no rows: '{empty}' holds")
    elif empty_tables and not nonempty and (bound or available or figures):
        # something claimed from nothing
        if any(f.value != 0 for f in figures):
            f = next(f for f in figures if f.value != 0)
            chk.bad(f"{_tname(empty_tables[0])}has no rows, but the claim states '{f.text}'")
        elif available:
            chk.bad(f"{_tname(empty_tables[0])}has no rows, but the claim says '{available}'")
        elif unavailable or any(f.value == 0 for f in figures):
            chk.ok(f"{_tname(empty_tables[0])}has no rows: nothing to have")

    # -- availability --------------------------------------------------------------------------
    if (available or unavailable) and nonempty:
        _availability(chk, text, tables, groups, fold(question))

    # -- superlatives and comparatives ---------------------------------------------------------
    _order(chk, text, tables, mentions, groups, question)

    # -- figures -------------------------------------------------------------------------------
    figures = _spans(chk, text, figures, tables, groups)
    for f in figures:
        if unavailable and f.value == 0:
            continue  # "0 left" is the availability claim, settled above
        _figure(chk, text, f, tables, groups, fold(question))

    _column_slots(chk, claim, fold(claim), tables, mentions, groups)

    # -- values named: each a cell of the row its group is about (conflicts found above) ----
    for m in mentions:
        t = tables[m.table]
        rows = set(_rows_at(groups, m.start, m.table))
        r, c = next(((r, c) for r, c in m.cells if r in rows), m.cells[0])
        chk.ok(t.label(r, c) + f": '{claim[m.start:m.end]}'")

    # -- what nothing explains -----------------------------------------------------------------
    for k in range(len(text)):
        if any(f.start <= k < f.end for f in figures):
            covered[k] = True
    residual = _residual(claim, text, covered, tables, question, mentions)
    if residual and len(groups) <= 1:
        # a leftover word where the row it is about has a text value the claim does not give
        # (or none): it may be saying another value ("the coat comes in yellow" of beige)
        spoken = {(m.table, r, c) for m in mentions for r, c in m.cells}
        for g in groups or [Group(0, set(range(tables[0].n)), 0)] if tables else []:
            t = tables[g.table]
            silent = [(r, c) for r in g.rows for c in range(len(t.raw.columns))
                      if c not in t.numeric and (g.table, r, c) not in spoken
                      and not _date_cell(t.raw.rows[r][c])]
            if silent and len(g.rows) == 1:
                residual = [(w, True) for w, _ in residual]
                break
    return chk, residual


def _column_slots(chk: Check, claim: str, text: str, tables: list[Table],
                  mentions: list[Mention], groups: list[Group]) -> None:
    """A text column named as a label ("Status: returned", "colour is red") must be followed
    by that column's value in the row the claim is about: the words after the label, up to
    the next punctuation, must hold a value of the column unless they are framing ("size is
    available")."""
    framing = {stem(w) for w in FRAME} | {stem(w) for phrase in (*AVAILABLE, *UNAVAILABLE)
                                          for w in phrase.split()}
    for t in tables:
        for c, name in enumerate(t.raw.columns):
            if c in t.numeric or not t.n:
                continue
            label = re.escape(fold(name).replace("_", " "))
            for m in re.finditer(rf"(?<![\w-]){label}s?\s*(?::|\bis\b|\bwas\b|=)\s*", text):
                if any(x.start <= m.start() < x.end for x in mentions):
                    continue  # the label is inside a value ("One Size is ...")
                end = re.search(r"[,.;:()!?]|$", text[m.end():]).start() + m.end()
                if any(m.end() <= x.start < end for x in mentions):
                    continue  # a value follows: checked as a value of its row
                words = [w for w in _WORD.findall(text[m.end():end])
                         if w not in STOPWORDS and stem(w) not in framing and not w.isdigit()]
                rows = _rows_at(groups, m.start(), t.index) or list(range(t.n))
                if words and len(rows) == 1:
                    chk.bad(f"'{claim[m.end():end].strip()}' is not {t.label(rows[0], c)}")


def _date(chk: Check, claim: str, d: DateText, tables: list[Table], groups: list[Group],
          question: str = "") -> None:
    """A date the claim writes: a date cell of the row it is about, with every part given."""
    written = claim[d.start:d.end]
    seen = None
    for t in tables:
        rows = _rows_at(groups, d.start, t.index) or list(range(t.n))
        for r in rows:
            for c, v in enumerate(t.raw.rows[r]):
                cell = _date_cell(v)
                if cell is None:
                    continue
                seen = seen or (t, r, c)
                if d.fits(cell):
                    chk.ok(f"{t.label(r, c)}: '{written}'")
                    return
    if seen is not None:
        t, r, c = seen
        chk.bad(f"'{written}' is not {t.label(r, c)}")
    elif any(q.year == d.year and q.month == d.month and (d.day is None or q.day == d.day)
             for q in _dates(fold(question), question)):
        chk.ok(f"'{written}' is the date the question names (the query's condition)")
    else:
        chk.unsettled.append(f"'{written}': no date in the rows")


def _other_codes(chk: Check, claim: str, text: str, tables: list[Table],
                 mentions: list[Mention], bound: list[tuple[int, int]]) -> None:
    """A code ("XS") or its word ("extra small") of a kind one of the tables' columns holds,
    written in the claim but held by no row the claim is about."""
    spans = [(m.start, m.end) for m in mentions]
    for t in tables:
        if not t.codes or not t.n:
            continue
        rows = bound_rows(bound, t.index) or list(range(t.n))
        held = {fold(str(t.raw.rows[r][c])) for r in rows for c in t.codes}
        for code, words in CODES.items():
            for phrase in sorted((code, *words), key=len, reverse=True):
                pattern = (rf"(?<![\w&'-]){re.escape(code.upper())}(?![\w&'-])" if phrase == code
                           else rf"(?<![\w-]){re.escape(phrase)}(?![\w-])")
                source = claim if phrase == code else text
                for m in re.finditer(pattern, source):
                    if any(a <= m.start() < b for a, b in spans) or code in held:
                        continue
                    spans.append((m.start(), m.end()))
                    c = t.codes[0]
                    chk.bad(f"'{source[m.start():m.end()]}' is {code.upper()}, but "
                            + ", ".join(t.label(r, c) for r in rows[:3]))


def bound_rows(bound: list[tuple[int, int]], table: int) -> list[int]:
    return [r for t, r in bound if t == table]


def _tname(t: Table) -> str:
    return f"table {t.index + 1} " if t.index else "the result "


@dataclass
class Group:
    """The values a claim names about one row (or the rows they all fit): a list names one
    group per item, each starting where a column already named is named again."""

    table: int
    rows: set[int]
    start: int
    columns: set[int] = field(default_factory=set)
    end: int = 0


def _groups(mentions: list[Mention], chk: Check, tables: list[Table],
            claim: str) -> list[Group]:
    """Walk the mentions in order: a mention joins the current group when its rows fit the
    group's and its column is new to it; a column named again starts a new group (the next
    item of a list); a value of another column that fits none of the group's rows contradicts
    the claim (a name with another row's brand)."""
    groups: list[Group] = []
    for m in sorted(mentions, key=lambda m: m.start):
        rows = {r for r, _ in m.cells}
        cols = {c for _, c in m.cells}
        g = groups[-1] if groups and groups[-1].table == m.table else None
        if g is not None and not (cols & g.columns) and rows & g.rows:
            g.rows &= rows
            g.columns |= cols
            g.end = m.end
        elif g is not None and not (cols & g.columns) and len(g.rows) < tables[m.table].n:
            t = tables[m.table]
            chk.bad(f"'{claim[m.start:m.end]}' is a value of row "
                    f"{', '.join(str(x + 1) for x in sorted(rows))}, not of row "
                    f"{', '.join(str(x + 1) for x in sorted(g.rows))}, which the claim names "
                    f"before it ({t.label(min(g.rows), min(g.columns))})")
        else:
            groups.append(Group(m.table, set(rows), m.start, set(cols), m.end))
    return groups


_LEADS = re.compile(r"\s*(?:\(\s*(?:the\s+|for\s+(?:the\s+)?)?|for\s+(?:the\s+)?|(?:(?:were|was|is|are|have|has|"
                    r"had|x|×|of|in|units?|orders?|items?|pieces?|styles?|products?)\s+){0,2})")


def _rows_at(groups: list[Group], pos: int, table: int, end: int | None = None,
             text_between: str | None = None) -> list[int]:
    """The rows the claim is about at ``pos``: the group the position falls in (from its first
    value to the next group's), else every group's. A figure that leads the next item ("13
    delivered, 4 returned": after a comma, right before the value) belongs to that item."""
    mine = [g for g in groups if g.table == table]
    if end is not None and text_between is not None:
        after = [g for g in mine if g.start >= end]
        before = [g for g in mine if g.end <= pos]
        if after and _LEADS.fullmatch(text_between[end:after[0].start]) and (
                not before or re.search(r"[,;:\n]|\band\b|\bvs\b|\bversus\b",
                                        text_between[before[-1].end:pos])):
            return sorted(after[0].rows)
    inside = [g for g in mine if g.start <= pos]
    if inside:
        return sorted(inside[-1].rows)
    return sorted(set().union(*(g.rows for g in mine))) if mine else []


def _belongs(text: str, f: Figure, groups: list[Group]) -> bool:
    """Whether a figure is an item's value ("delivered: 13", "Alba Knit has 2", "13
    delivered"), not a count of the items ("… and Northvale — that's four brands")."""
    before = [g for g in groups if g.end <= f.start]
    after = [g for g in groups if g.start >= f.end]
    if before and re.fullmatch(r"\s*(?:[:(=\-]|has|had|have|with|at|costs?|is|are|was|were|"
                               r"for)?\s*(?:only\s+)?", text[before[-1].end:f.start]):
        return True
    return bool(after) and _LEADS.fullmatch(text[f.end:after[0].start]) is not None


def _arithmetic(before: str) -> float | None:
    """The value of the arithmetic a claim writes before an "=" ("2 × €59 + 1 × €69.90 ="),
    or ``None`` when what precedes it is not arithmetic.

    >>> round(_arithmetic("2 × €59 + 1 × €69.90 = "), 2), _arithmetic("it is = ")
    (187.9, None)
    """
    expr = re.split(r"[:;\n]", before.rstrip().rstrip("=").rstrip())[-1]
    expr = re.sub(r"(?<=\d)\s*(?:eur|euros?|usd|€|\$|£)\b|[€$£]", "", expr, flags=re.I)
    parts = re.findall(r"\d[\d.,]*|[+\-×x*/]", expr)
    if len(parts) < 3 or not re.fullmatch(r"[\d.,+\-×x*/()\s]*", expr.strip() or "x"):
        return None
    terms: list[float] = []
    sign, product, op = 1.0, None, None
    for part in parts:
        if part[0].isdigit():
            read = readings(part)
            if not read:
                return None
            value = read[0][0]
            product = value if product is None else (
                product * value if op in ("×", "x", "*") else product / value if value else None)
            if product is None:
                return None
        elif part in "+-":
            if product is None:
                return None
            terms.append(sign * product)
            sign, product = (1.0 if part == "+" else -1.0), None
        else:
            op = part
    if product is None:
        return None
    terms.append(sign * product)
    return sum(terms)


def _aggregate(chk: Check, t: Table, f: Figure, shown: str, sum_word: str | None,
               mean_word: str | None) -> bool:
    """Whether the figure is a sum (of a column, or of a quantity times a price per row) or a
    mean over the rows; the evidence says which."""
    for c in (t.money + [c for c in t.numeric if c not in t.money]):
        values = t.column(c)
        if not values:
            continue
        total, mean = round(sum(values), 6), round(sum(values) / len(values), 6)
        name = t.raw.columns[c]
        per_unit = bool(t.quantity) and re.search(r"(^|_|\b)(unit|each|per)(_|\b|$)",
                                                  name.lower()) is not None
        if sum_word and matches(total, f) and not per_unit:
            # a price per unit adds up only times its quantity (below)
            chk.ok(f"sum of {name} over {len(values)} rows = {_show(total)}: {shown}")
            return True
        if mean_word and matches(mean, f):
            chk.ok(f"mean of {name} over {len(values)} rows = {_show(mean)}: {shown}")
            return True
    if sum_word:
        for q in t.quantity:
            for c in t.money:
                products = [(_number(r[q]) or 0) * (_number(r[c]) or 0) for r in t.raw.rows]
                total = round(sum(products), 6)
                if matches(total, f):
                    chk.ok(f"sum of {t.raw.columns[q]} × {t.raw.columns[c]} over {t.n} rows = "
                           f"{_show(total)}: {shown}")
                    return True
    return False


_CLAUSE = re.compile(r";|:(?=\s)|,?\s(?:but|while|whereas|although|though)\b|\s-(?=\s)")


def _cue(text: str) -> tuple[str | None, str | None]:
    """(available, unavailable): the availability phrase a piece of a claim uses."""
    unavailable = _has(text, UNAVAILABLE)
    if not unavailable and re.search(r"\b(?:not|n't|never)\b[^.]*\b(?:in stock|available)\b",
                                     text):
        unavailable = "not available"
    return (None if unavailable else _has(text, AVAILABLE)), unavailable


def _availability(chk: Check, text: str, tables: list[Table], groups: list[Group],
                  question: str) -> None:
    """Availability, clause by clause ("in stock in S and M; L is sold out"): the rows a
    clause names (else the claim's, else all) against the quantity column — every named row
    above 0 for "available", every one at 0 for "sold out"."""
    cuts = [0, *(m.end() for m in _CLAUSE.finditer(text)), len(text)]
    for a, b in zip(cuts, cuts[1:], strict=False):
        available, unavailable = _cue(text[a:b])
        if not (available or unavailable):
            continue
        mine = [g for g in groups if a <= g.start < b]
        rest = not mine and re.search(r"\b(?:every|all|any)\s+other\b|\bthe rest\b|\bothers\b|"
                                      r"\bremaining\b", text[a:b])
        mine = mine or groups
        for t in tables:
            if not t.n:
                continue
            named = sorted({r for g in mine if g.table == t.index for r in g.rows})
            if rest:  # "every other size": the rows the claim does not name
                named = sorted(set(range(t.n)) - set(named))
            _settle_availability(chk, text, t, named, available, unavailable, question)
            break


def _settle_availability(chk: Check, text: str, t: Table, named: list[int],
                         available: str | None, unavailable: str | None,
                         question: str) -> None:
    cols = _named(text, t, t.quantity) or t.quantity
    if not cols:
        if available:
            chk.ok(f"{_tname(t)}has {t.n} row{'s' if t.n != 1 else ''} and no quantity "
                   f"column: '{available}' rests on the row existing")
        elif _has(question, (unavailable,)):
            chk.ok(f"{_tname(t)}has no quantity column; '{unavailable}' is the question's "
                   "condition, which the query applied")
        else:
            chk.unsettled.append(f"'{unavailable}': {_tname(t)}has no quantity column")
        return
    c = cols[0]
    rows = named or list(range(t.n))
    values = [(r, _number(t.raw.rows[r][c])) for r in rows]
    if available:
        short = [(r, v) for r, v in values if v is None or v <= 0]
        if named and short or not named and len(short) == len(values):
            chk.bad(t.label(short[0][0], c) + f": '{available}' needs more than 0")
        else:
            r = next(r for r, v in values if v is not None and v > 0)
            chk.ok(t.label(r, c) + f": '{available}' needs more than 0"
                   + (f" (and {len(rows) - 1} more named)" if named and len(rows) > 1 else ""))
    else:
        stocked = [(r, v) for r, v in values if v is not None and v > 0]
        if stocked:
            chk.bad(t.label(stocked[0][0], c) + f": '{unavailable}' needs 0")
        else:
            chk.ok(t.label(values[0][0], c) + f": '{unavailable}' holds")


def _named(text: str, t: Table, among: list[int]) -> list[int]:
    """The columns of ``among`` whose name (or a word of it) the claim uses."""
    out = []
    for c in among:
        words = [w for w in re.split(r"[_\W]+", fold(t.raw.columns[c])) if len(w) > 2]
        if any(re.search(rf"\b{re.escape(w[:max(4, len(w) - 2)])}", text) for w in words):
            out.append(c)
    return out


def _order(chk: Check, text: str, tables: list[Table], mentions: list[Mention],
           groups: list[Group], question: str = "") -> None:
    """Superlatives ("the cheapest is A") and comparatives ("A is cheaper than B"). An answer
    that names one row of several to a question asking for the cheapest, the most … ("That's
    the Slim Chino.") states the question's superlative of it."""
    low = _has(text, LOW)
    high = _has(text, HIGH) if not low else None
    less, more = _has(text, LESS), _has(text, MORE)
    if not (low or high or less or more) and len(groups) == 1 and len(groups[0].rows) == 1 \
            and tables[groups[0].table].n >= 2:
        asked = fold(question)
        low = _has(asked, LOW) or _has(asked, ("cheaper", "less expensive", "costs less",
                                               "fewer", "lower"))
        high = _has(asked, HIGH) or _has(asked, ("pricier", "more expensive", "costs more",
                                                 "higher"))
        if (low and high) or re.search(r"\d|\b(?:list|sort|rank|order|top|all)\b", asked):
            low = high = None  # a question for a list or an order, not for one row
        elif low:
            high = None
        text = text + " " + asked  # the column the question names counts as named
    order = _has(text, ASCENDING) and "ascending" or _has(text, DESCENDING) and "descending"
    items = [g for g in groups if len(g.rows) == 1]
    if order and len(items) >= 2 and len({g.table for g in items}) == 1:
        t = tables[items[0].table]
        col = _order_column(text, "cheap" if order else "", t)
        if col is not None:
            values = [(next(iter(g.rows)), _number(t.raw.rows[next(iter(g.rows))][col]))
                      for g in items]
            pairs = list(zip(values, values[1:], strict=False))
            wrong = next(((a, b) for a, b in pairs if a[1] is not None and b[1] is not None
                          and (a[1] > b[1] if order == "ascending" else a[1] < b[1])), None)
            name = t.raw.columns[col]
            if wrong is None:
                chk.ok(f"rows {', '.join(str(r + 1) for r, _ in values)} are in {order} order "
                       f"of {name}")
            else:
                (a, va), (b, vb) = wrong
                chk.bad(f"{t.label(a, col)} comes before {t.label(b, col)}: not {order}")
            return
    word = low or high
    pair = (less or more) and len(groups) >= 2 and groups[0].table == groups[1].table and \
        len(groups[0].rows) == 1 and len(groups[1].rows) == 1
    if word and groups and not pair:
        ti = groups[0].table
        t = tables[ti]
        rows = sorted(groups[0].rows)
        if t.n < 2:
            chk.ok(f"{_tname(t)}has one row, the query's answer: '{word}' is its order")
            return
        col = _order_column(text, word, t)
        if col is None:
            chk.unsettled.append(f"'{word}': no single numeric column to order by")
            return
        values = [v for r in range(t.n) if (v := _value(t, r, col)) is not None]
        target = min(values) if low else max(values)
        got = [(r, _value(t, r, col)) for r in rows]
        name = t.raw.columns[col]
        if any(v == target for _, v in got):
            r = next(r for r, v in got if v == target)
            chk.ok(f"{t.label(r, col)} is the {'minimum' if low else 'maximum'} of {name} over "
                   f"{t.n} rows: '{word}'")
        else:
            best = next(r for r in range(t.n) if _value(t, r, col) == target)
            chk.bad(f"{t.label(got[0][0], col)}, but the {'minimum' if low else 'maximum'} of "
                    f"{name} over {t.n} rows is {t.label(best, col)}: not '{word}'")
    elif pair:
        t = tables[groups[0].table]
        col = _order_column(text, less or more, t)
        if col is None:
            return
        (a,), (b,) = groups[0].rows, groups[1].rows
        va, vb = _number(t.raw.rows[a][col]), _number(t.raw.rows[b][col])
        if va is None or vb is None:
            return
        holds = va < vb if less else va > vb
        line = f"{t.label(a, col)} vs {t.label(b, col)}: '{less or more}'"
        (chk.ok if holds else chk.bad)(line)


_CUR = r"(?:\s*(?:eur|usd|gbp|chf)\b)?"
_RANGE = re.compile(r"(?P<word>from|between|starts? at|starting at|start from|starts from)"
                    + _CUR + r"\s*$")
_RANGE_MID = re.compile(r"^\s*(?:\([^()]{0,60}\)\s*)?(?:to|and|-|(?:and\s+)?(?:go(?:es)?|run|"
                        r"runs|rise|rises)\s+(?:up\s+)?to|up to)" + _CUR + r"\s*$")
_DIFFERENCE = re.compile(r"^\s*(?:(?:more|less|fewer|extra)(?:\s+expensive)?\s+than|cheaper|pricier|"
                         r"dearer|higher|lower)\b")


def _spans(chk: Check, text: str, figures: list[Figure], tables: list[Table],
           groups: list[Group]) -> list[Figure]:
    """Figures that go together: a range ("from 59.90 to 99 €", "between 20 and 50") is the
    minimum and maximum of a column over the rows; a difference ("20 € more than B") is two
    named rows' values apart. Settled here and taken out of the figures checked one by one."""
    out: list[Figure] = []
    skip: set[int] = set()
    for k, f in enumerate(figures):
        if k in skip:
            continue
        nxt = figures[k + 1] if k + 1 < len(figures) else None
        if nxt is not None and _RANGE.search(text[max(0, f.start - 24):f.start]) and \
                _RANGE_MID.match(text[f.end:nxt.start]) and f.hedge in (None, "from"):
            between_word = _RANGE.search(text[max(0, f.start - 24):f.start]).group("word")
            nonempty = [t for t in tables if t.n > 1 or (t.n and between_word == "between")]
            if nonempty:
                t = nonempty[0]
                money = f.money or nxt.money
                cols = _named(text, t, t.numeric) or (t.money if money else t.numeric)
                lo, hi = replace(f, hedge=None), replace(nxt, hedge=None)
                between = _RANGE.search(text[max(0, f.start - 24):f.start]).group("word") \
                    == "between"
                if between:  # bounds: every value within them
                    hit = next((c for c in cols if t.column(c) and all(
                        lo.value <= v <= hi.value for v in t.column(c))), None)
                else:  # "from X to Y": the smallest and the largest value
                    hit = next((c for c in cols if t.column(c)
                                and matches(min(t.column(c)), lo)
                                and matches(max(t.column(c)), hi)), None)
                if hit is not None:
                    chk.ok(f"{t.raw.columns[hit]} over {t.n} rows ranges from "
                           f"{_show(min(t.column(hit)))} to {_show(max(t.column(hit)))}: "
                           f"{'between' if between else 'from'} '{f.text}' and '{nxt.text}'")
                else:
                    c = cols[0] if cols else None
                    chk.bad(f"'{f.text}' to '{nxt.text}' is not the range of " + (
                        f"{t.raw.columns[c]} ({_show(min(t.column(c)))} to "
                        f"{_show(max(t.column(c)))})" if c is not None and t.column(c)
                        else "any numeric column"))
                skip.add(k + 1)
                continue
        diff = _DIFFERENCE.match(text[f.end:f.end + 40])
        if diff and not f.hedge:
            two = [g for g in groups if len(g.rows) == 1]
            if len(two) >= 2 and two[0].table == two[1].table:
                t = tables[two[0].table]
                (a,), (b,) = two[0].rows, two[1].rows
                cols = _named(text, t, t.numeric) or (t.money if f.money else t.numeric)
                for c in cols:
                    va, vb = _number(t.raw.rows[a][c]), _number(t.raw.rows[b][c])
                    if va is not None and vb is not None and matches(round(abs(va - vb), 6), f):
                        chk.ok(f"{t.label(a, c)} and {t.label(b, c)} differ by "
                               f"{_show(round(abs(va - vb), 6))}: '{f.text}'")
                        break
                else:
                    chk.bad(f"'{f.text}' is no difference of row {a + 1} and row {b + 1} in "
                            + ", ".join(t.raw.columns[c] for c in cols))
                continue
        out.append(f)
    return out


def _value(t: Table, r: int, c: int) -> float | None:
    """A cell as a comparable number: numbers as they are, dates as YYYYMMDD.HHMM."""
    v = t.raw.rows[r][c]
    cell = _date_cell(v)
    if cell is not None:
        y, m, d, time = cell
        return y * 10000 + m * 100 + (d or 0) + (int(time.replace(":", "")) / 10000
                                                 if time else 0.0)
    return _number(v)


def _order_column(text: str, word: str, t: Table) -> int | None:
    if word in DATE_ORDER:
        dated = [c for c in range(len(t.raw.columns))
                 if t.n and all(_date_cell(row[c]) is not None for row in t.raw.rows
                                if row[c] is not None)]
        return dated[0] if len(dated) == 1 else None
    named = _named(text, t, t.numeric)
    if len(named) == 1:
        return named[0]
    about_money = any(cue in text for cue in MONEY_CUES)
    pool = t.money if about_money and t.money else (t.numeric if not about_money else [])
    if len(pool) == 1:
        return pool[0]
    return None


def _figure(chk: Check, text: str, f: Figure, tables: list[Table],
            groups: list[Group], question: str = "") -> None:
    """Settle one figure: a cell of the row it is about, a count, or an aggregate."""
    shown = f"'{f.text}'" + (f" ({f.hedge})" if f.hedge else "")
    if f.percent:
        chk.unsettled.append(f"{shown}: a percentage")
        return
    if re.match(r"\s*(?:more|others?|further|additional|besides)\b", text[f.end:]) and groups:
        # "and 3 more": the rows the claim does not name
        t = tables[groups[-1].table]
        named = len({r for g in groups if g.table == t.index for r in g.rows})
        if matches(float(t.n - named), f):
            chk.ok(f"{_tname(t)}has {t.n} rows, the claim names {named}: {shown} more")
        else:
            chk.bad(f"{_tname(t)}has {t.n} rows and the claim names {named}, so "
                    f"{t.n - named} more, not {shown}")
        return
    if re.search(r"=\s*(?:[€$£¥]\s*)?$", text[:f.start]):
        computed = _arithmetic(text[:f.start])
        if computed is not None:
            (chk.ok if matches(round(computed, 6), f) else chk.bad)(
                f"the claim's own sum {_show(round(computed, 6))} vs {shown}")
            return
    sum_word, mean_word = _has(text, SUM_WORDS), _has(text, MEAN_WORDS)
    for t in tables:
        if not t.n:
            continue
        rows = _rows_at(groups, f.start, t.index, f.end, text) or list(range(t.n))
        if f.hedge and HEDGES[f.hedge][1] == math.inf:
            # a bound ("under €100", "at least 3") holds for every value it is about
            cols = [c for c in (t.money if f.money else t.numeric)
                    if c not in t.quantity or not f.money]
            values = [(r, c, _number(t.raw.rows[r][c])) for r in rows for c in cols]
            values = [(r, c, v) for r, c, v in values if v is not None]
            if values:
                miss = next(((r, c) for r, c, v in values if not matches(v, f)), None)
                if miss is None:
                    r, c, _ = values[0]
                    chk.ok(f"{t.label(r, c)}" + (f" and {len(values) - 1} more values"
                                                 if len(values) > 1 else "") + f": {shown}")
                else:
                    chk.bad(f"{t.label(*miss)}: not {shown}")
                return
        whole = (sum_word or mean_word) and t.n > 1 and \
            not any(g.table == t.index and g.start <= f.start for g in groups)
        if whole:  # "together they cost X", "on average X": the rows' sum or mean, no cell
            if _aggregate(chk, t, f, shown, sum_word, mean_word):
                return
            if not f.money and matches(float(t.n), f):
                chk.ok(f"{_tname(t)}has {t.n} rows: {shown}")
                return
            continue
        cols = list(range(len(t.raw.columns)))
        if f.money:
            cols = [c for c in cols if c not in t.quantity or c in t.money]
        elif f.quantity:
            cols = (_named(text, t, t.quantity) or t.quantity or cols)
        for r in rows:
            for c in cols:
                v = _number(t.raw.rows[r][c]) if c < len(t.raw.rows[r]) else None
                if v is not None and matches(v, f):
                    chk.ok(f"{t.label(r, c)}: {shown}")
                    return
        item = len(rows) == 1 and sum(g.table == t.index for g in groups) >= 2 and \
            _belongs(text, f, [g for g in groups if g.table == t.index])
        if not f.money and not f.quantity and not item and matches(float(t.n), f):
            chk.ok(f"{_tname(t)}has {t.n} row{'s' if t.n != 1 else ''}: {shown}")
            return
        if (sum_word or mean_word) and _aggregate(chk, t, f, shown, sum_word, mean_word):
            return
    if _has(text, DIFFERENCE_WORDS):
        for t in tables:
            rows = sorted({r for g in groups if g.table == t.index for r in g.rows}) \
                if len(groups) >= 2 else list(range(t.n))
            if not 2 <= len(rows) <= 12:
                continue
            for c in (t.money if f.money else t.numeric):
                for i, a in enumerate(rows):
                    for b in rows[i + 1:]:
                        va, vb = _number(t.raw.rows[a][c]), _number(t.raw.rows[b][c])
                        if va is not None and vb is not None and \
                                matches(round(abs(va - vb), 6), f):
                            chk.ok(f"{t.label(a, c)} and {t.label(b, c)} differ by "
                                   f"{_show(round(abs(va - vb), 6))}: {shown}")
                            return
    if f.word and f.value == 0:
        return  # "no <thing>" without a table to count: left to emptiness/availability
    if not f.money and f.decimals == 0 and 1900 <= f.value <= 2100 and \
            re.search(rf"(?<!\d){int(f.value)}(?!\d)", question):
        chk.ok(f"{shown}: a year the question names (the query's condition)")
        return
    where = [t for t in tables if t.n]
    if not where:
        return  # settled by the emptiness check
    t = where[0]
    rows = _rows_at(groups, f.start, t.index)
    scope = (f"row {', '.join(str(r + 1) for r in rows)}" if rows else f"{t.n} rows")
    if not f.money and not f.quantity:
        scope += f" (and the row count {t.n})"
    chk.bad(f"{shown} is in no cell of {scope}"
            + (" nor their sum or mean" if sum_word or mean_word else ""))


_CAPITAL = re.compile(r"(?<![\w'])[A-Z][\w'&-]*")


@lru_cache(maxsize=1)
def _framing() -> tuple[frozenset[str], frozenset[str]]:
    """The stems of :data:`FRAME`, and of every word of the cue lists (computed once)."""
    frame = frozenset(stem(w) for w in FRAME)
    lexicon = frozenset(stem(w) for phrase in (
        *AVAILABLE, *UNAVAILABLE, *EMPTY, *SUM_WORDS, *MEAN_WORDS, *LOW, *HIGH, *LESS, *MORE,
        *HEDGES, *QUANTITY_WORDS, *NUMBER_WORDS, *DIFFERENCE_WORDS, *ASCENDING, *DESCENDING)
        for w in phrase.split())
    return frame, lexicon


def _residual(claim: str, text: str, covered: list[bool], tables: list[Table],
              question: str, mentions: list[Mention]) -> list[tuple[str, bool]]:
    """Words of the claim that neither a cell, a column's name, the question nor the claim's
    framing explains, each with whether it *asserts a value*: a name (capitalised inside the
    sentence), a word in a value's place — right before a row's value ("the red Slim Chino"),
    right after a column's name ("colour: red") — or the claim's only content besides its
    framing. Other leftover words are phrasing ("cut for women", "plenty")."""
    columns = {stem(w) for t in tables for c in t.raw.columns
               for w in re.split(r"[_\W]+", fold(c)) if w}
    qwords = {stem(w) for w in _WORD.findall(fold(question))}
    qstarts = {w[:4] for w in _WORD.findall(fold(question)) if len(w) >= 5}
    frame, lexicon = _framing()
    starts = sorted(m.start for m in mentions)
    out = []
    for m in _WORD.finditer(text):
        if any(covered[m.start():m.end()]):
            continue
        w = m.group()
        if w in STOPWORDS or w in CURRENCY or len(w) < 2 or w.isdigit():
            continue
        s = stem(w)
        original = claim[m.start():m.end()] if len(claim) == len(text) else w
        is_name = bool(_CAPITAL.fullmatch(original)) and m.start() > 0 and \
            not re.search(r"[.!?:;\n-]\s*$", claim[:m.start()])
        if s in columns or s in qwords or (len(w) >= 5 and w[:4] in qstarts):
            continue
        if (not is_name or (original.isupper() and len(w) <= 3)) and (s in frame or s in lexicon):
            continue
        nxt = next((x for x in starts if x >= m.end()), None)
        before_value = nxt is not None and re.fullmatch(r"[\s,]*", text[m.end():nxt]) is not None
        after_column = re.search(r"(?:^|\W)(\w+)\s*:\s*$", text[:m.start()])
        named_column = after_column is not None and stem(after_column.group(1)) in columns
        out.append((original, is_name or before_value or named_column))
    return out


# == the verdicts ==============================================================================

@dataclass(frozen=True)
class RowSettlement:
    """What the rows settle about one claim."""

    claim: str
    for_: tuple[str, ...]
    """Evidence for it: a row and column and its value, or a computation."""
    against: tuple[str, ...]
    """Evidence against it (empty when nothing contradicts it)."""
    unsettled: tuple[str, ...]
    """What the rows cannot settle: an assertion without a column to check, or words nothing
    explains."""
    named: int
    """How many row values the claim names (0: it may be about the text, not the rows)."""
    loose: tuple[str, ...] = ()
    """One leftover word of phrasing, tolerated because the rows settle the rest."""


def settle_claims(tables: Sequence[RowTable], claims: Sequence[str],
                  question: str | None = None) -> list[RowSettlement]:
    """Settle each claim against the tables (see the module's docstring).

    >>> t = RowTable(columns=["name", "brand", "colour", "price", "stock"],
    ...              rows=[["Slim Chino", "Hollis & Reed", "navy", 49.9, 4]])
    >>> ok, bad = settle_claims([t], ["I found 1 matching product: the navy Slim Chino by "
    ...     "Hollis & Reed (49.90 €, 4 in stock in that size).", "It costs €59.90."])
    >>> ok.against, ok.unsettled, len(ok.for_)
    ((), (), 7)
    >>> bad.against
    ("'€59.90' is in no cell of 1 rows",)
    """
    prepared = [prepare(t, i) for i, t in enumerate(tables)]
    out = []
    for claim in claims:
        chk, residual = check_claim(claim, prepared, question or "")
        words = list(dict.fromkeys(w for w, _ in residual))
        strong = any(value for _, value in residual)
        loose: list[str] = []
        if residual and not strong and len({stem(fold(w)) for w in words}) == 1 and chk.for_:
            loose = [f"'{words[0]}' is not in the rows (a word of phrasing, tolerated)"]
        elif residual:
            chk.unsettled.append(f"nothing in the rows says {', '.join(words[:6])}")
        out.append(RowSettlement(claim, tuple(chk.for_), tuple(chk.against),
                                 tuple(chk.unsettled), chk.named, tuple(loose)))
    return out
