"""Answers built from SQL rows: a labelled set made from the shop's catalog, and how well a
judge's faithfulness separates the correct answers from those with one planted error.

    python benchmarks/row_claims.py                 # build the set, measure the offline judge
    python benchmarks/row_claims.py --write         # also (re)write data/row_claims/items.jsonl
    python benchmarks/row_claims.py --by-kind       # per kind: mean score of each label

Each item is a question, the rows a text-to-SQL step returned for it (``columns``, typed
``rows``), the generator's contexts as the shop assistant renders them (one ``col: value; …``
line per row), and an answer written from the rows in one of several phrasings per kind:
either correct (``supported: true``) or with exactly one planted error (``supported: false``,
``error`` says which). The kinds are what answers built from rows say: a product's
attributes, prices (exact and hedged), stock and availability ("sold out", "in stock in S"),
counts (of rows, or a COUNT column), aggregates (a mean column, a sum or a minimum computed
from the rows), superlatives, lists with several values, brands, sizes in words, empty results.
The generator is seeded and every value comes from the catalog, so the set is the same on
every machine; it is for developing against (issue 30), never for tuning to one phrasing —
an independently built set is what measures.

The measurement is the generation plugin's own ``faithfulness`` evaluator (through
``evalharness.registry.run_evaluator``), exactly as a run computes it, with the offline
heuristic judge, each item's rows on the same trace's text-to-SQL step: ROC-AUC, and accuracy
at the default verdict threshold (0.5), overall and per kind — for the row verifier's
``faithfulness`` and ``faithfulness_all`` beside the previous judge, which read the rows as
text (``rows: text``), on the same items.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CATALOG = ROOT / "scenarios" / "shop" / "catalog.sql"
OUT = HERE / "data" / "row_claims" / "items.jsonl"
SEED = 30
THRESHOLD = 0.5

SIZE_WORDS = {"XS": "extra small", "S": "small", "M": "medium", "L": "large",
              "XL": "extra large"}
NUMBER_WORDS = {0: "no", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six",
                7: "seven", 8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve"}


def fmt_value(value: Any) -> str:
    """As the shop assistant renders a value: floats with two decimals."""
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def render_rows(columns: list[str], rows: list[list[Any]]) -> list[str]:
    """One ``col: value; …`` line per row, as the shop assistant's generator sees its rows."""
    return ["; ".join(f"{c}: {fmt_value(v)}" for c, v in zip(columns, row, strict=True))
            for row in rows]


def euro(value: float, rng: random.Random) -> str:
    """A price as answers write it, in one of several ways."""
    return rng.choice([f"{value:.2f} €", f"€{value:.2f}", f"{value:.2f} euros",
                       f"EUR {value:.2f}"])


def catalog() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.executescript(CATALOG.read_text(encoding="utf-8"))
    return conn


def query(conn: sqlite3.Connection, sql: str, *args: Any) -> tuple[list[str], list[list]]:
    cur = conn.execute(sql, args)
    return [d[0] for d in cur.description], [list(r) for r in cur.fetchall()]


PRODUCT = """SELECT p.name, b.name AS brand, p.colour, p.material, p.price, s.size, s.stock
FROM products p JOIN brands b ON b.brand_id = p.brand_id
JOIN product_sizes s ON s.product_id = p.product_id
JOIN categories c ON c.category_id = p.category_id"""


def _item(kind: str, question: str, columns: list[str], rows: list[list], answer: str,
          supported: bool, error: str | None = None) -> dict[str, Any]:
    return {"kind": kind, "question": question, "columns": columns, "rows": rows,
            "contexts": render_rows(columns, rows), "answer": answer,
            "supported": supported, "error": error}


def _pairs(rng: random.Random, kind: str, question: str, columns: list[str],
           rows: list[list], good: list[str], bad: list[tuple[str, str]]) -> list[dict]:
    """One correct and one planted-error item of a kind, each in a phrasing drawn at random."""
    text, error = rng.choice(bad)
    return [_item(kind, question, columns, rows, rng.choice(good), True),
            _item(kind, question, columns, rows, text, False, error)]


def build(seed: int = SEED, per_kind: int = 10) -> list[dict[str, Any]]:
    """The labelled set: ``per_kind`` pairs (one correct, one wrong) of every kind."""
    rng = random.Random(seed)
    conn = catalog()
    out: list[dict[str, Any]] = []
    cols, stocked = query(conn, PRODUCT + " WHERE s.stock > 0 ORDER BY p.product_id, s.size")
    _, sold_out = query(conn, PRODUCT + " WHERE s.stock = 0 ORDER BY p.product_id, s.size")
    categories = [r[0] for r in query(conn, "SELECT name FROM categories ORDER BY name")[1]]
    colours = sorted({r[2] for r in stocked if r[2]})
    brands = sorted({r[1] for r in stocked})

    def pick(rows: list[list]) -> dict[str, Any]:
        return dict(zip(cols, rng.choice(rows), strict=True))

    for _ in range(per_kind):
        # -- one product: attributes, price, stock ------------------------------------------
        p = pick(stocked)
        row = [[p[c] for c in cols]]
        other_colour = rng.choice([c for c in colours if c != p["colour"]])
        other_brand = rng.choice([b for b in brands if b != p["brand"]])
        q = f"Do you have the {p['name']} in size {p['size']}?"
        out += _pairs(rng, "product_attributes", q, cols, row, [
            f"Yes: the {p['colour']} {p['name']} by {p['brand']} is available in "
            f"{p['size']}, {euro(p['price'], rng)}.",
            f"We have the {p['name']} from {p['brand']} in {p['colour']}, size {p['size']}, "
            f"for {euro(p['price'], rng)}.",
            f"The {p['brand']} {p['name']} ({p['colour']}, {p['material']}) costs "
            f"{euro(p['price'], rng)} and size {p['size']} is in stock."],
            [(f"Yes: the {other_colour} {p['name']} by {p['brand']} is available in "
              f"{p['size']}, {euro(p['price'], rng)}.", "wrong colour"),
             (f"We have the {p['name']} from {other_brand} in {p['colour']}, size "
              f"{p['size']}, for {euro(p['price'], rng)}.", "wrong brand")])
        wrong_price = round(p["price"] + rng.choice([10, 15, 20, -5]), 2)
        out += _pairs(rng, "price", f"How much is the {p['name']}?", cols, row, [
            f"The {p['name']} costs {euro(p['price'], rng)}.",
            f"It is {euro(p['price'], rng)}.",
            f"You can get the {p['colour']} {p['name']} for {euro(p['price'], rng)}."],
            [(f"The {p['name']} costs {euro(wrong_price, rng)}.", "wrong price"),
             (f"It is {euro(wrong_price, rng)}.", "wrong price")])
        hedge_ok = {"just under": (p["price"] + 0.10, p["price"] + 1),
                    "about": (p["price"], p["price"]), "around": (p["price"], p["price"])}
        word = rng.choice(list(hedge_ok))
        shown = int(round(hedge_ok[word][0])) if word != "just under" else int(
            hedge_ok[word][0]) + 1
        far = int(round(p["price"] * 1.6 + 10))
        out += _pairs(rng, "price_hedged", f"Is the {p['name']} expensive?", cols, row, [
            f"The {p['name']} costs {word} {shown} €.",
            f"It is {word} €{shown}."],
            [(f"The {p['name']} costs {word} {far} €.", "hedged price far off"),
             (f"It is {word} €{far}.", "hedged price far off")])
        n = p["stock"]
        wrong_n = n + rng.choice([2, 3, 5])
        out += _pairs(rng, "stock_count", f"How many {p['name']} are left in "
                      f"{p['size']}?", cols, row, [
                          f"There are {n} left in size {p['size']}.",
                          f"We have {NUMBER_WORDS.get(n, n)} in {p['size']}.",
                          f"{n} in stock in that size."],
                      [(f"There are {wrong_n} left in size {p['size']}.", "wrong stock"),
                       (f"We have {NUMBER_WORDS.get(wrong_n, wrong_n)} in {p['size']}.",
                        "wrong stock")])
        word_size = SIZE_WORDS.get(p["size"])
        if word_size:
            other = rng.choice([w for s, w in SIZE_WORDS.items() if s != p["size"]])
            out += _pairs(rng, "size_in_words", f"Is the {p['name']} there in {word_size}?",
                          cols, row, [f"Yes, the {p['name']} is available in {word_size}.",
                                      f"We have it in {word_size}."],
                          [(f"Yes, the {p['name']} is available in {other}.", "wrong size"),
                           (f"We have it in {other}.", "wrong size")])
        # -- availability: in stock vs sold out ----------------------------------------------
        s = pick(sold_out)
        srow = [[s[c] for c in cols]]
        out += _pairs(rng, "sold_out", f"Can I order the {s['name']} in {s['size']}?", cols,
                      srow, [f"Sorry, the {s['name']} is sold out in {s['size']}.",
                             f"Size {s['size']} of the {s['name']} is out of stock.",
                             f"Unfortunately we have none left in {s['size']}."],
                      [(f"Yes, size {s['size']} is in stock.", "in stock claimed at 0"),
                       (f"The {s['name']} is available in {s['size']}.",
                        "in stock claimed at 0")])
        out += _pairs(rng, "in_stock", f"Is the {p['name']} in stock in {p['size']}?", cols,
                      row, [f"Yes, size {p['size']} is in stock.",
                            f"Yes, the {p['name']} is available in {p['size']}."],
                      [(f"Sorry, the {p['name']} is sold out in {p['size']}.",
                        "sold out claimed with stock"),
                       (f"Size {p['size']} is out of stock.", "sold out claimed with stock")])
        # -- several rows: counts, lists, superlatives, aggregates ---------------------------
        cat = rng.choice(categories)
        lcols, listed = query(conn, "SELECT p.name, b.name AS brand, p.colour, p.price FROM "
                              "products p JOIN brands b ON b.brand_id = p.brand_id JOIN "
                              "categories c ON c.category_id = p.category_id WHERE c.name = ? "
                              "ORDER BY p.price, p.name LIMIT ?", cat, rng.randint(2, 4))
        if len(listed) >= 2:
            k = len(listed)
            wrong_k = k + rng.choice([1, 2])
            out += _pairs(rng, "count_rows", f"How many {cat} do you have under 100 €?",
                          lcols, listed, [
                              f"{NUMBER_WORDS[k].capitalize()} products match your search.",
                              f"We found {k} {cat}.", f"There are {k} of them."],
                          [(f"{NUMBER_WORDS[wrong_k].capitalize()} products match your "
                            "search.", "wrong count"),
                           (f"We found {wrong_k} {cat}.", "wrong count")])
            lines = [f"- {r[0]} by {r[1]}: {euro(r[3], rng)}" for r in listed]
            swapped = [list(r) for r in listed]
            swapped[0][3], swapped[1][3] = listed[1][3], listed[0][3]
            if swapped[0][3] != listed[0][3]:
                bad_lines = [f"- {r[0]} by {r[1]}: {euro(r[3], rng)}" for r in swapped]
                out += _pairs(rng, "list_prices", f"Which {cat} do you have?", lcols, listed,
                              ["Here they are:\n" + "\n".join(lines),
                               "We have:\n" + "\n".join(lines)],
                              [("Here they are:\n" + "\n".join(bad_lines), "swapped prices")])
            cheap, dear = listed[0], listed[-1]
            if cheap[3] != dear[3]:
                out += _pairs(rng, "superlative", f"What are your cheapest {cat}?", lcols,
                              listed, [f"The cheapest is the {cheap[0]} at {euro(cheap[3], rng)}.",
                                       f"The {cheap[0]} by {cheap[1]} is the least expensive."],
                              [(f"The cheapest is the {dear[0]} at {euro(dear[3], rng)}.",
                                "superlative names the most expensive"),
                               (f"The {dear[0]} by {dear[1]} is the least expensive.",
                                "superlative names the most expensive")])
            total = round(sum(r[3] for r in listed), 2)
            out += _pairs(rng, "sum_from_rows", f"How much would all these {cat} cost?",
                          lcols, listed, [f"Together they cost {euro(total, rng)}.",
                                          f"All {k} would come to {euro(total, rng)}."],
                          [(f"Together they cost {euro(round(total + 25, 2), rng)}.",
                            "wrong sum")])
            lbrands = sorted({r[1] for r in listed})
            invented = rng.choice([b for b in brands if b not in lbrands])
            out += _pairs(rng, "brands", f"Which brands make {cat}?", lcols, listed,
                          [f"Brands: {', '.join(lbrands)}.",
                           f"We carry {cat} from {' and '.join(lbrands)}."],
                          [(f"Brands: {', '.join([*lbrands, invented])}.", "invented brand")])
        acols, agg = query(conn, "SELECT COUNT(*) AS n, ROUND(AVG(p.price), 2) AS avg_price "
                           "FROM products p JOIN categories c ON c.category_id = p.category_id "
                           "WHERE c.name = ?", cat)
        count, avg = agg[0]
        if count:
            out += _pairs(rng, "count_column", f"How many {cat} are there?", acols, agg,
                          [f"We have {count} {cat}.", f"There are {count} products in {cat}."],
                          [(f"We have {count + 3} {cat}.", "wrong count column")])
            out += _pairs(rng, "average_column", f"What do {cat} cost on average?", acols, agg,
                          [f"The average price is {euro(avg, rng)}.",
                           f"On average {cat} cost {euro(avg, rng)}."],
                          [(f"The average price is {euro(round(avg * 1.3, 2), rng)}.",
                            "wrong average")])
        # -- an empty result ------------------------------------------------------------------
        ecols = ["name", "brand", "price"]
        nothing = f"Do you have {rng.choice(colours)} {rng.choice(categories)} for under 5 €?"
        out += _pairs(rng, "empty", nothing, ecols, [], [
            "Nothing matched your search.", "Sorry, we have no such products.",
            "I found nothing in the catalog matching that."],
            [("Yes, we have two matching products.", "results claimed from nothing")])
    for n, item in enumerate(out):
        item["id"] = f"rc{n:04d}"
    return out


def scores(items: list[dict[str, Any]], rows: str = "table",
           availability: list[str] | None = None) -> dict[str, list[float | None]]:
    """Per item, ``faithfulness`` and ``faithfulness_all`` as a run computes them: the
    generation plugin's evaluator with the offline judge, each item's rows on the same trace's
    text-to-SQL step (as a run records them) and its rendered rows as the generator's contexts.
    ``rows="text"`` gives the judge the rows as text, as before the row verifier."""
    from evalharness.context import EvalContext
    from evalharness.judge import JudgeConfig
    from evalharness.judge.heuristic import HeuristicJudge
    from evalharness.models import Case, GeneratorStep, Text2SQLStep, Trace
    from evalharness.registry import run_evaluator
    from evalharness_generation import register_evaluators

    judge = HeuristicJudge(JudgeConfig(cache_mode="off"))
    batch, traces = [], {}
    for i in items:
        step = GeneratorStep(answer=i["answer"], contexts=i["contexts"])
        batch.append((Case(id=i["id"], question=i["question"]), step))
        traces[i["id"]] = Trace(case_id=i["id"], text2sql=Text2SQLStep(
            sql=i.get("sql"), columns=i["columns"], rows=i["rows"]), generator=step)
    settings = {"rows": rows, "availability": availability}
    out = run_evaluator(register_evaluators, "faithfulness", batch, settings,
                        context=EvalContext(judge=judge, traces=traces))
    judge.close()
    return {m: [r[m].value for r in out] for m in ("faithfulness", "faithfulness_all")}


def measure(items: list[dict[str, Any]], values: list[float | None]) -> dict[str, Any]:
    """ROC-AUC and accuracy at the threshold of one metric's values, overall and per kind
    (items without a value — a metric that could not be computed — are counted apart)."""
    from evalharness.review.stats import roc_auc

    kept = [(s, i) for s, i in zip(values, items, strict=True) if s is not None]
    labels = [i["supported"] for _, i in kept]
    vals = [s for s, _ in kept]
    by_kind: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for s, i in kept:
        by_kind[i["kind"]].append((s, i["supported"]))
    return {
        "items": len(items), "scored": len(kept),
        "auc": roc_auc(vals, labels),
        "accuracy": sum((s >= THRESHOLD) == y for s, y in zip(vals, labels, strict=True))
        / max(1, len(kept)),
        "correct_passed": sum(s >= THRESHOLD for s, y in zip(vals, labels, strict=True) if y)
        / max(1, sum(labels)),
        "kinds": {k: {"n": len(v), "pass_correct": _mean([s >= THRESHOLD for s, y in v if y]),
                      "pass_wrong": _mean([s >= THRESHOLD for s, y in v if not y])}
                  for k, v in sorted(by_kind.items())},
    }


def _mean(xs: list[bool]) -> float | None:
    return sum(xs) / len(xs) if xs else None


SETS = {"A": OUT, "B": HERE / "data" / "row_claims" / "items_b.jsonl",
        "C": HERE / "data" / "row_claims" / "items_c.jsonl"}
"""Set A: built by this script; set B: written independently of the verifier
(``row_claims_b.py``), then used to develop it further; set C: written independently too
(``row_claims_c.py``) and held out — measured once, after the verifier was done."""


def load(name: str) -> list[dict[str, Any]]:
    path = SETS[name]
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    parser.add_argument("--by-kind", action="store_true", help="per kind pass rates")
    parser.add_argument("--per-kind", type=int, default=10, help="pairs per kind (set A)")
    parser.add_argument("--set", choices=[*SETS, "all"], default="all",
                        help="which labelled set to measure on (default: all)")
    args = parser.parse_args(argv)
    if args.write:
        items = build(per_kind=args.per_kind)
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items),
                       encoding="utf-8")
        print(f"wrote {len(items)} items to {OUT.relative_to(ROOT)}", file=sys.stderr)
    names = list(SETS) if args.set == "all" else [args.set]
    for name in names:
        items = build(per_kind=args.per_kind) if name == "A" else load(name)
        report(name, items, args.by_kind)


def report(name: str, items: list[dict[str, Any]], by_kind: bool) -> None:
    """Print one set's figures: the previous judge (rows as text) beside the row verifier,
    each metric's ROC-AUC and accuracy at the threshold."""
    kinds = len({i["kind"] for i in items})
    print(f"set {name}: {len(items)} row-grounded answers ({sum(i['supported'] for i in items)} "
          f"correct, {sum(not i['supported'] for i in items)} with one planted error; {kinds} "
          "kinds)")
    before = scores(items, rows="text")
    after = scores(items, rows="table")
    rows = [("rows as text (the judge before)", "faithfulness", before["faithfulness"]),
            ("row verifier", "faithfulness", after["faithfulness"]),
            ("row verifier", "faithfulness_all", after["faithfulness_all"])]
    print(f"  {'judge':<36} {'metric':<17} {'ROC-AUC':>7} {'accuracy':>8} {'correct passed':>14}"
          f" {'scored':>6}")
    results = []
    for judge, metric, values in rows:
        r = measure(items, values)
        results.append(r)
        print(f"  {judge:<36} {metric:<17} {r['auc']:>7.3f} {r['accuracy']:>8.3f} "
              f"{r['correct_passed']:>14.3f} {r['scored']:>6}")
    if by_kind:
        old, new, strict = results
        print(f"  {'kind':<24} {'n':>3}  pass correct/wrong: text      verifier   all-claims")
        for kind, k in new["kinds"].items():
            cells = [_pass_rates(r["kinds"].get(kind)) for r in (old, new, strict)]
            print(f"  {kind:<24} {k['n']:>3}  {cells[0]:>25} {cells[1]:>10} {cells[2]:>12}")


def _pass_rates(kind: dict | None) -> str:
    """``correct/wrong`` pass rates of one kind, ``—`` where there is none."""
    if kind is None:
        return "—"
    pc = "—" if kind["pass_correct"] is None else f"{kind['pass_correct']:.2f}"
    pw = "—" if kind["pass_wrong"] is None else f"{kind['pass_wrong']:.2f}"
    return f"{pc}/{pw}"


if __name__ == "__main__":
    main()
