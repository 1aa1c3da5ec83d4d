"""How evalharness scales: a shop-like scenario of 1k and 10k cases, run offline end to end.

For each size, a scenario is generated next to its cases: the shop's system (the reference
assistant, ``shop.assistant:answer``), database, corpus, heuristic judge, and
every evaluator and gate of ``scenarios/shop.yaml`` (read from that file, paths made
absolute). It is run in a fresh subprocess::

    python -m evalharness.cli scenario <generated>.yaml --quiet --out <folder>

(with ``--no-headroom`` unless ``--headroom`` is given: the oracle reruns of failed cases
are an extra phase, measured separately) and that subprocess's wall time and peak resident
memory (``os.wait4``'s ``ru_maxrss``) are
measured. Printed: one row per size (cases, wall s, CPU s, peak RSS MB, cases/s, whether
the gates passed), then the growth
factors of the largest size over the smallest, and whether the target is met.

    python benchmarks/scale.py                      # --sizes 1000 10000
    python benchmarks/scale.py --sizes 1000 --keep  # keep the generated scenarios and runs
    python benchmarks/scale.py --headroom           # also the oracle reruns of failed cases

Target on the reference machine: 10k cases in under 60 s and under 1 GB, growing linearly
(time and memory growing no faster than the number of cases, with 20 % slack).

The cases (:func:`generate_cases`, deterministic for a seed) are shop-like, not copies:

* the shop's 51 labelled cases, verbatim, with new ids (the hard cases stay in);
* SQL-only questions from twelve templates (a colour, category, size, material, gender or
  price bound taken from the catalog itself, mostly from an existing product so that the
  filters match something) with the gold SQL written from the same slots, so every gold
  query answers its question; the gold answer is rendered from the gold query's rows;
* blog-only questions: the shop's 17 blog questions with a light, meaning-preserving change
  of wording ("Quick question: ...", "... Thanks!"), their relevance labels and answers kept;
* questions for both routes: a templated SQL question followed by "Also, " and a blog
  question; gold routes ``[sql, blog]``, the template's gold SQL, the blog question's
  relevance labels, and the two gold answers joined.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SHOP_YAML = ROOT / "scenarios" / "shop.yaml"
SHOP = ROOT / "scenarios" / "shop"

TARGET_SECONDS = 60.0
TARGET_MB = 1024.0
LINEAR_SLACK = 1.2
"""Growth counts as linear when time (and memory) grow at most 1.2 times as fast as cases."""

# ---------------------------------------------------------------------------------------------
# Case generation
# ---------------------------------------------------------------------------------------------

CATEGORY_WORDS: dict[str, list[str]] = {
    # Words a customer uses for a catalog category, each meaning exactly that category.
    "dresses": ["dresses"],
    "jeans": ["jeans"],
    "t-shirts": ["t-shirts", "tees", "T-shirts"],
    "sweaters": ["sweaters", "jumpers", "pullovers"],
    "jackets": ["jackets"],
    "coats": ["coats"],
    "sneakers": ["sneakers", "trainers"],
    "boots": ["boots"],
    "scarves": ["scarves"],
    "bags": ["bags"],
    "skirts": ["skirts"],
    "shirts": ["shirts"],
    "trousers": ["trousers", "pants"],
}

NATIONALITY = {"United Kingdom": "British", "France": "French", "United States": "American",
               "Portugal": "Portuguese", "Norway": "Norwegian", "Italy": "Italian",
               "Germany": "German", "Sweden": "Swedish", "Japan": "Japanese",
               "Netherlands": "Dutch"}

MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August",
               "September", "October", "November", "December"]

PRODUCT_JOINS = ("FROM products p JOIN brands b ON b.brand_id = p.brand_id "
                 "JOIN categories c ON c.category_id = p.category_id")
SIZE_JOIN = " JOIN product_sizes s ON s.product_id = p.product_id"


def q(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def euros(value: float) -> str:
    return f"€{value:.2f}"


@dataclass
class Catalog:
    """What the generator reads from ``catalog.sql``: products, their sizes, brands, orders."""

    conn: sqlite3.Connection
    products: list[dict[str, Any]]
    sizes: dict[int, list[str]]  # product id -> sizes in stock
    countries: list[str]
    months: list[tuple[int, str]]  # (month number, status) pairs that occur in orders

    @classmethod
    def load(cls, path: Path = SHOP / "catalog.sql") -> Catalog:
        conn = sqlite3.connect(":memory:")
        conn.executescript(path.read_text(encoding="utf-8"))
        conn.row_factory = sqlite3.Row
        products = [dict(r) for r in conn.execute(
            "SELECT p.product_id, p.name, p.colour, p.material, p.price, p.gender, "
            "b.name AS brand, c.name AS category FROM products p "
            "JOIN brands b ON b.brand_id = p.brand_id "
            "JOIN categories c ON c.category_id = p.category_id ORDER BY p.product_id")]
        sizes: dict[int, list[str]] = {}
        for r in conn.execute("SELECT product_id, size FROM product_sizes WHERE stock > 0 "
                              "ORDER BY product_id, size"):
            sizes.setdefault(r["product_id"], []).append(r["size"])
        countries = [r[0] for r in conn.execute(
            "SELECT DISTINCT country FROM brands ORDER BY country")]
        months = [(int(r[0]), r[1]) for r in conn.execute(
            "SELECT DISTINCT CAST(substr(ordered_at, 6, 2) AS INTEGER), status FROM orders "
            "ORDER BY 1, 2")]
        conn.row_factory = None
        return cls(conn, products, sizes, countries, months)

    def rows(self, sql: str) -> list[tuple]:
        return self.conn.execute(sql).fetchall()


def _price_bound(price: float, rng: random.Random) -> int:
    """A round bound just above a product's price (so that product matches)."""
    step = rng.choice([10, 10, 50])
    return int(math.ceil((price + 0.01) / step) * step)


def _product_list(rows: list[tuple], empty: str) -> str:
    if not rows:
        return empty
    shown = []
    for row in rows[:5]:
        name, brand, colour, price = row[0], row[1], row[2], row[3]
        shown.append(f"the {colour} {name} by {brand} at {euros(price)}")
    more = f", and {len(rows) - 5} more" if len(rows) > 5 else ""
    return f"We have {len(rows)}: " + "; ".join(shown) + more + "."


def _sql_case(cat: Catalog, rng: random.Random) -> dict[str, Any]:
    """One templated SQL question: question, gold SQL, gold answer and tags."""
    product = rng.choice(cat.products)
    category = product["category"]
    word = rng.choice(CATEGORY_WORDS[category])
    template = rng.randrange(12)
    if template == 0:  # colour + category under a price
        bound = _price_bound(product["price"], rng)
        colour = product["colour"]
        question = rng.choice([f"Do you have {colour} {word} under {bound} euros?",
                               f"Any {colour} {word} for less than €{bound}?"])
        sql = (f"SELECT p.name, b.name AS brand, p.colour, p.price {PRODUCT_JOINS} "
               f"WHERE c.name = {q(category)} AND p.colour = {q(colour)} AND p.price < {bound} "
               "ORDER BY p.price, p.name")
        rows = cat.rows(sql)
        answer = _product_list(rows, f"No, we have no {colour} {word} under €{bound}.")
        tags = ["price", "colour", category]
    elif template == 1:  # cheapest in a size, in stock
        size = rng.choice(cat.sizes.get(product["product_id"]) or ["M"])
        question = f"Which of your {word} is the cheapest in stock in size {size}?"
        sql = (f"SELECT p.name, b.name AS brand, p.price, s.stock {PRODUCT_JOINS}{SIZE_JOIN} "
               f"WHERE c.name = {q(category)} AND s.size = {q(size)} AND s.stock > 0 "
               "ORDER BY p.price ASC, p.name LIMIT 1")
        rows = cat.rows(sql)
        answer = (f"The cheapest {word} in stock in {size} is the {rows[0][0]} by {rows[0][1]} "
                  f"at {euros(rows[0][2])}, with {rows[0][3]} left." if rows else
                  f"We have no {word} in stock in size {size}.")
        tags = ["price", "size", "stock", "cheapest", category]
    elif template == 2:  # count by colour
        colour = product["colour"]
        question = f"How many {colour} {word} do you have?"
        sql = (f"SELECT COUNT(*) FROM products p JOIN categories c ON c.category_id = "
               f"p.category_id WHERE c.name = {q(category)} AND p.colour = {q(colour)}")
        n = cat.rows(sql)[0][0]
        answer = f"We have {n} {colour} {word}."
        tags = ["count", "colour", category]
    elif template == 3:  # most expensive
        question = rng.choice([f"What are the most expensive {word} you sell?",
                               f"Which of your {word} costs the most?"])
        sql = (f"SELECT p.name, b.name AS brand, p.colour, p.price {PRODUCT_JOINS} "
               f"WHERE c.name = {q(category)} ORDER BY p.price DESC, p.name LIMIT 1")
        row = cat.rows(sql)[0]
        answer = f"Our most expensive {word} are the {row[2]} {row[0]} by {row[1]} at {euros(row[3])}."
        tags = ["price", "most-expensive", category]
    elif template == 4:  # average price
        question = f"On average, how much do your {word} cost?"
        sql = (f"SELECT ROUND(AVG(p.price), 2) AS avg_price, COUNT(*) AS n FROM products p "
               f"JOIN categories c ON c.category_id = p.category_id WHERE c.name = {q(category)}")
        avg, n = cat.rows(sql)[0]
        answer = f"Across our {n} {word} the average price is {euros(avg)}."
        tags = ["price", "aggregation", category]
    elif template == 5 and product["material"]:  # material + category
        material = product["material"]
        question = f"Which {material} {word} do you have?"
        sql = (f"SELECT p.name, b.name AS brand, p.colour, p.price {PRODUCT_JOINS} "
               f"WHERE c.name = {q(category)} AND p.material = {q(material)} "
               "ORDER BY p.price, p.name")
        rows = cat.rows(sql)
        answer = _product_list(rows, f"We have no {material} {word}.")
        tags = ["material", category]
    elif template == 6:  # gender + size + price, in stock
        gender = product["gender"] if product["gender"] != "unisex" else rng.choice(["men", "women"])
        size = rng.choice(cat.sizes.get(product["product_id"]) or ["M"])
        bound = _price_bound(product["price"], rng)
        question = f"Have you got {gender}'s {word} in size {size} for under {bound}?"
        sql = (f"SELECT p.name, b.name AS brand, p.colour, p.price, s.stock "
               f"{PRODUCT_JOINS}{SIZE_JOIN} WHERE c.name = {q(category)} "
               f"AND p.gender IN ({q(gender)}, 'unisex') AND s.size = {q(size)} "
               f"AND s.stock > 0 AND p.price < {bound} ORDER BY p.price, p.name")
        rows = cat.rows(sql)
        answer = _product_list(rows, f"No {gender}'s {word} are in stock in {size} under "
                                     f"€{bound}.")
        tags = ["gender", "size", "stock", "price", category]
    elif template == 7:  # sizes of one product in stock
        question = f"Which sizes is the {product['colour']} {product['name']} in stock in?"
        sql = (f"SELECT s.size, s.stock FROM products p JOIN product_sizes s ON s.product_id = "
               f"p.product_id WHERE p.name = {q(product['name'])} AND p.colour = "
               f"{q(product['colour'])} AND s.stock > 0 ORDER BY s.size")
        rows = cat.rows(sql)
        answer = ("It is in stock in " + ", ".join(f"{s} ({n})" for s, n in rows) + "."
                  if rows else "It is sold out in every size.")
        tags = ["size", "stock", category]
    elif template == 8:  # orders by status and month
        month, status = rng.choice(cat.months)
        start, end = f"2026-{month:02d}-01", (f"2026-{month + 1:02d}-01" if month < 12
                                              else "2027-01-01")
        question = f"How many orders were {status} in {MONTH_NAMES[month - 1]} 2026?"
        sql = (f"SELECT COUNT(*) FROM orders WHERE status = {q(status)} AND ordered_at >= "
               f"{q(start)} AND ordered_at < {q(end)}")
        n = cat.rows(sql)[0][0]
        answer = f"{n} orders placed in {MONTH_NAMES[month - 1]} 2026 were {status}."
        tags = ["orders", "date"]
    elif template == 9:  # revenue by status and month
        month, status = rng.choice(cat.months)
        start, end = f"2026-{month:02d}-01", (f"2026-{month + 1:02d}-01" if month < 12
                                              else "2027-01-01")
        question = f"What was the revenue from {status} orders in {MONTH_NAMES[month - 1]} 2026?"
        sql = ("SELECT ROUND(SUM(oi.quantity * oi.unit_price), 2) AS revenue, "
               "COUNT(DISTINCT o.order_id) AS n_orders FROM orders o JOIN order_items oi ON "
               f"oi.order_id = o.order_id WHERE o.status = {q(status)} AND o.ordered_at >= "
               f"{q(start)} AND o.ordered_at < {q(end)}")
        revenue, n = cat.rows(sql)[0]
        answer = (f"{status.capitalize()} orders placed in {MONTH_NAMES[month - 1]} 2026 brought "
                  f"in {euros(revenue or 0.0)} across {n} orders.")
        tags = ["orders", "revenue", "date"]
    elif template == 10:  # brands of a country
        country = rng.choice(cat.countries)
        question = f"Which of your brands are {NATIONALITY.get(country, country)}?"
        sql = f"SELECT name FROM brands WHERE country = {q(country)} ORDER BY name"
        names = [r[0] for r in cat.rows(sql)]
        answer = f"Our brands from {country}: {', '.join(names)}."
        tags = ["brand"]
    else:  # everything under a price
        bound = _price_bound(product["price"], rng)
        question = f"Show me everything you've got for under {bound} euros."
        sql = (f"SELECT p.name, b.name AS brand, p.colour, p.price {PRODUCT_JOINS} "
               f"WHERE p.price < {bound} ORDER BY p.price, p.name, p.colour")
        rows = cat.rows(sql)
        answer = _product_list(rows, f"Nothing is under €{bound}.")
        tags = ["price"]
    return {"question": question, "sql": sql, "answer": answer, "tags": tags}


BLOG_PREFIXES = ["", "Quick question: ", "Hi! ", "Hello, ", "Hey there, "]
BLOG_SUFFIXES = ["", " Thanks!", " Thank you.", " Cheers!"]


def _vary(question: str, rng: random.Random) -> str:
    """A light, meaning-preserving change of wording: a greeting or a thank-you."""
    prefix, suffix = rng.choice(BLOG_PREFIXES), rng.choice(BLOG_SUFFIXES)
    if prefix.endswith(", ") and not question.startswith(("I ", "I'")):
        question = question[0].lower() + question[1:]
    return f"{prefix}{question}{suffix}"


def generate_cases(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` shop-like cases (see the module docstring), the same for the same ``n`` and seed."""
    base = [json.loads(line) for line in (SHOP / "cases.jsonl").read_text().splitlines()
            if line.strip()]
    blog = [c for c in base if c["gold"]["routes"] == ["blog"]]
    cat = Catalog.load()
    rng = random.Random(seed)
    cases: list[dict[str, Any]] = []
    for i in range(n):
        case_id = f"c{i:06d}"
        if i < len(base):
            case = json.loads(json.dumps(base[i]))
            case["id"] = case_id
            case["tags"] = [*case.get("tags", []), "original"]
            cases.append(case)
            continue
        kind = rng.choices(["sql", "blog", "both"], weights=[4, 3, 3])[0]
        if kind == "blog":
            source = rng.choice(blog)
            cases.append({"id": case_id, "question": _vary(source["question"], rng),
                          "gold": dict(source["gold"]),
                          "tags": [*source.get("tags", []), "reworded"]})
            continue
        made = _sql_case(cat, rng)
        if kind == "sql":
            cases.append({"id": case_id, "question": made["question"],
                          "gold": {"routes": ["sql"], "sql": made["sql"], "relevant": None,
                                   "answer": made["answer"]},
                          "tags": ["sql-only", "templated", *made["tags"]]})
            continue
        source = rng.choice(blog)
        follow = source["question"]
        follow = follow if follow.startswith(("I ", "I'")) else follow[0].lower() + follow[1:]
        cases.append({"id": case_id, "question": f"{made['question']} Also, {follow}",
                      "gold": {"routes": ["sql", "blog"], "sql": made["sql"],
                               "relevant": dict(source["gold"]["relevant"]),
                               "answer": f"{made['answer']} {source['gold']['answer']}"},
                      "tags": ["both", "templated", *made["tags"], *source.get("tags", [])[1:]]})
    return cases


def write_scenario(folder: Path, n: int, seed: int = 0) -> Path:
    """``cases.jsonl`` and ``scale.yaml`` for ``n`` cases in ``folder``; the scenario's path."""
    from evalharness.importing import is_path

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "cases.jsonl", "w", encoding="utf-8") as fh:
        for case in generate_cases(n, seed):
            fh.write(json.dumps(case, ensure_ascii=False) + "\n")
    shop = yaml.safe_load(SHOP_YAML.read_text(encoding="utf-8"))
    base = SHOP_YAML.parent

    def absolute(rel: str) -> str:
        return str((base / rel).resolve())

    target, _, func = shop["system"].rpartition(":")
    # a module name (`shop.assistant`) is found from the scenario's folder: as an absolute
    # path, it is the package folder
    system_file = target if is_path(target) else target.replace(".", "/")
    spec = {
        "name": f"shop-scale-{n}",
        "description": f"{n} shop-like cases generated by benchmarks/scale.py (seed {seed})",
        "cases": str((folder / "cases.jsonl").resolve()),
        "system": f"{absolute(system_file)}:{func}",
        "database": {**shop["database"], "build": absolute(shop["database"]["build"])},
        "corpus": absolute(shop["corpus"]),
        "judge": {"backend": "heuristic"},
        "pipeline": shop["pipeline"],
        "evaluators": shop["evaluators"],
        "gates": shop["gates"],
        "concurrency": shop.get("concurrency", 4),
    }
    path = folder / "scale.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------


@dataclass
class Measurement:
    cases: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    exit_code: int

    @property
    def rate(self) -> float:
        return self.cases / self.wall_s if self.wall_s else float("nan")


def measure(scenario: Path, out: Path, cases: int, headroom: bool = False) -> Measurement:
    """Run the scenario in a fresh interpreter; its wall time and peak RSS (``os.wait4``).
    Without ``headroom``, the oracle reruns of failed cases are skipped (``--no-headroom``)."""
    command = [sys.executable, "-m", "evalharness.cli", "scenario", str(scenario), "--quiet",
               "--out", str(out), *([] if headroom else ["--no-headroom"])]
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):  # 1: a gate failed, which is a result, not a crash
        raise SystemExit(f"the run of {scenario} failed with exit code {proc.returncode}")
    rss_mb = usage.ru_maxrss / 1024  # Linux reports kilobytes
    return Measurement(cases, wall, usage.ru_utime + usage.ru_stime, rss_mb, proc.returncode)


def print_table(rows: list[Measurement]) -> bool:
    """The table, the growth factors and the verdict; whether the target is met."""
    print(f"{'cases':>8} {'wall s':>9} {'CPU s':>8} {'peak RSS MB':>12} {'cases/s':>9} "
          f"{'gates':>6}")
    for m in rows:
        gates = "pass" if m.exit_code == 0 else "fail"
        print(f"{m.cases:>8} {m.wall_s:>9.2f} {m.cpu_s:>8.2f} {m.peak_rss_mb:>12.1f} "
              f"{m.rate:>9.1f} {gates:>6}")
    small, large = rows[0], rows[-1]
    ok = True
    if len(rows) > 1 and large.cases > small.cases:
        ratio = large.cases / small.cases
        t_growth = large.wall_s / small.wall_s
        m_growth = large.peak_rss_mb / small.peak_rss_mb
        linear = t_growth <= ratio * LINEAR_SLACK and m_growth <= ratio * LINEAR_SLACK
        print(f"\ngrowth {large.cases}/{small.cases} (x{ratio:g} cases): time x{t_growth:.2f}, "
              f"memory x{m_growth:.2f} -> {'linear' if linear else 'SUPERLINEAR'} "
              f"(limit x{ratio * LINEAR_SLACK:g})")
        ok = linear
    biggest = max(rows, key=lambda m: m.cases)
    if biggest.cases >= 10_000:
        per_10k = 10_000 / biggest.cases
        fast = biggest.wall_s * per_10k < TARGET_SECONDS
        small_mem = biggest.peak_rss_mb < TARGET_MB
        print(f"target at {biggest.cases} cases: wall {biggest.wall_s:.1f} s "
              f"(< {TARGET_SECONDS:g} s: {'yes' if fast else 'NO'}), peak RSS "
              f"{biggest.peak_rss_mb:.0f} MB (< {TARGET_MB:g} MB: "
              f"{'yes' if small_mem else 'NO'})")
        ok = ok and fast and small_mem
    else:
        print("target: not checked (no size of 10000 cases or more)")
    print(f"target met: {'yes' if ok else 'NO'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000],
                        help="Numbers of cases to run (default: 1000 10000).")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the case generator.")
    parser.add_argument("--headroom", action="store_true",
                        help="Also rerun the failed cases with oracles (oracle headroom; "
                             "off by default: the target is for the evaluation itself).")
    parser.add_argument("--keep", action="store_true",
                        help="Keep the generated scenarios and output folders (printed).")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="evalharness-scale-"))
    rows = []
    try:
        for n in sorted(args.sizes):
            scenario = write_scenario(work / f"scenario-{n}", n, args.seed)
            rows.append(measure(scenario, work / f"run-{n}", n, args.headroom))
        print(f"shop-like scenario, heuristic judge, every evaluator of {SHOP_YAML.name}; "
              f"oracle headroom {'on' if args.headroom else 'off (--headroom to include)'}; "
              f"{os.cpu_count()} CPUs; python {sys.version.split()[0]}\n")
        ok = print_table(rows)
    finally:
        if args.keep:
            print(f"\nkept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
