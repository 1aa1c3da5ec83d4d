"""The test-suite databases: perturbed copies of the scenario's data and databases generated
from the schema, shaped by what the two queries compare.

Equal results on one database can be luck: the difference between ``>`` and ``>=`` needs a
row on the boundary, ``LEFT`` versus ``INNER JOIN`` a parent without children, ``COUNT(x)``
versus ``COUNT(*)`` a NULL, ``ORDER BY ... LIMIT 1`` versus ``= (SELECT MAX ...)`` a tie. The
recipes here produce such rows on purpose:

* **generated** databases are filled from the schema alone (so they work on an empty or
  absent database): a few rows per table, primary keys unique, foreign keys pointing at
  existing parents (or NULL), values drawn from small pools — so that ties and duplicates
  are common — made of the literals the queries compare each column with and their
  neighbours (``30`` gives 29, 30, 31; ``'France'`` gives ``'france'``, ``'France '``; a
  ``LIKE`` pattern gives strings that do and do not match), values of the real data, and
  type defaults; nullable columns sometimes NULL.
* **perturbed** copies start from a sample of the real rows (parents of the sampled children
  kept, so foreign keys hold) and then add NULLs, duplicate rows, ties, shifted numbers or
  the queries' boundary values.

Only the tables the queries read are filled. Every recipe is deterministic: its seed comes
from the pair, the stage's seed and the recipe's number.

This module makes each pair's recipes (:data:`PLAN`, :func:`plan`, :func:`recipes`) and is
the face of the generation: its parts, each with one job, are :mod:`~evalharness_sql.gen_hints`
(what the queries compare), :mod:`~evalharness_sql.gen_pools` (candidate values per column),
:mod:`~evalharness_sql.gen_rows` (databases generated from the schema),
:mod:`~evalharness_sql.gen_groups` (groups at an aggregate's threshold, repeated undeclared
keys) and :mod:`~evalharness_sql.gen_perturb` (perturbed copies of the real data).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from evalharness_sql.compare import jsonable
from evalharness_sql.contract import conform
from evalharness_sql.engines import Engine, Schema
from evalharness_sql.gen_groups import MAX_GROUP
from evalharness_sql.gen_hints import (
    Aim,
    ColumnKey,
    Hints,
    hints,
    like_matches,
    literal_value,
    neighbours,
)
from evalharness_sql.gen_perturb import perturbed
from evalharness_sql.gen_pools import Pool, column_pools
from evalharness_sql.gen_rows import generated

__all__ = ["MAX_GROUP", "PLAN", "Aim", "ColumnKey", "Hints", "Pool", "Recipe", "hints",
           "like_matches", "literal_value", "neighbours", "plan", "recipes"]


@dataclass
class Recipe:
    """One test database: how it was made, and its rows."""

    number: int
    kind: str
    seed: int
    steps: list[str]
    data: dict[str, list[tuple[Any, ...]]]

    def describe(self) -> str:
        return f"test database {self.number} ({self.kind}: {'; '.join(self.steps[:4])})"

    def to_dict(self, schema: Schema, max_rows: int = 30) -> dict[str, Any]:
        """The recipe as a counterexample: seed, steps, and the rows of the tables."""
        tables = {}
        for key, rows in self.data.items():
            t = schema.tables[key]
            tables[t.name] = {"columns": [c.name for c in t.columns],
                              "rows": [jsonable(r) for r in rows[:max_rows]],
                              **({"rows_total": len(rows)} if len(rows) > max_rows else {})}
        return {"recipe": self.kind, "number": self.number, "seed": self.seed,
                "steps": self.steps, "tables": tables}


PLAN = ("generated:pass", "generated:fail", "perturbed:ties,duplicates",
        "generated:near,nulls", "generated:pass,sparse", "generated:fail,nulls",
        "perturbed:nulls", "generated:pass,wide,skew", "generated:near",
        "perturbed:literals,shift", "generated:fail", "generated:pass,nulls",
        "generated:random,skew", "perturbed:subset,duplicates", "generated:fail,wide",
        "generated:near,sparse", "generated:pass,skew", "perturbed:nulls,ties",
        "generated:fail,nulls,skew", "generated:random,wide,skew")
"""The recipes, in order; K databases take the first K (cycling when K is larger)."""


def recipes(engine: Engine, h: Hints, k: int, seed: int, pair_key: str,
            sample_limit: int = 2000) -> Iterator[Recipe]:
    """The ``k`` test databases of one pair, in order.

    >>> from evalharness_sql.engines import SQLiteEngine
    >>> engine = SQLiteEngine.from_ddl(
    ...     "CREATE TABLE p (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
    ...     "CREATE TABLE c (id INTEGER PRIMARY KEY, p_id INT REFERENCES p(id), x REAL)")
    >>> h = Hints(tables={"p", "c"}, literals={("c", "x"): [9.5, 10.5]})
    >>> dbs = list(recipes(engine, h, 3, seed=0, pair_key="example"))
    >>> [d.kind for d in dbs]
    ['generated:pass', 'generated:fail', 'generated:fail,ties,duplicates']
    >>> parents = {r[0] for r in dbs[0].data["p"]}
    >>> all(r[1] in parents or r[1] is None for d in dbs[:1] for r in d.data["c"])
    True
    """
    schema = engine.schema()
    used = sorted(h.tables) or sorted(k for k, t in schema.tables.items() if not t.is_view)
    used = [t for t in used if t in schema.tables and not schema.tables[t].is_view]
    order = [t for t in schema.order() if t in used]
    real = {t: engine.rows(schema.tables[t].name, sample_limit) for t in order}
    has_data = any(real.values())
    strict = engine.name != "sqlite"
    pools = column_pools(schema, order, real, h, strict)
    base = zlib.crc32(pair_key.encode("utf-8"))
    variants: dict[str, int] = {}
    for i, kind in enumerate(plan(h, k)):
        rng = random.Random((seed * 1_000_003 + base) * 7919 + i)
        if kind.startswith("perturbed") and has_data:
            data, steps = perturbed(schema, order, real, h, pools, rng, kind.split(":")[1])
        else:
            flavour = kind.split(":")[1] if ":" in kind else "random"
            if kind.startswith("perturbed"):
                flavour = "fail," + flavour
                kind = "generated:" + flavour
            variant = variants[flavour] = variants.get(flavour, -1) + 1
            data, steps = generated(schema, order, h, pools, rng, flavour, variant)
        changed = conform(schema, order, data)  # real rows may break their own schema
        if changed:
            steps.append(f"{changed} values or rows outside the schema's types and keys "
                         "converted or dropped")
        yield Recipe(i + 1, kind, rng.randrange(2**31), steps, data)


def plan(h: Hints, k: int) -> list[str]:
    """The kinds of a pair's ``k`` test databases: :data:`PLAN` (cycled), with databases
    aimed at the queries' aggregate thresholds (six per :class:`Aim`: its boundaries, with
    and without a NULL-keyed group) and at keys the schema does not declare (3) spread over it
    from the second database on — a third of the databases at most.

    >>> h = Hints(aggregates=[Aim("count", None, False, 4)])
    >>> plan(h, 8)
    ['generated:pass', 'generated:aggregate', 'generated:fail', 'perturbed:ties,duplicates', \
'generated:aggregate', 'generated:near,nulls', 'generated:pass,sparse', 'generated:fail,nulls']
    """
    base = [PLAN[i % len(PLAN)] for i in range(k)]
    aggregate = ["generated:aggregate"] * min(10, 6 * len(h.aggregates))
    undeclared = ["generated:undeclared"] * (3 if h.grouped else 0)
    special = [kind for n in range(10) for kind in (aggregate[n:n + 1] + undeclared[n:n + 1])]
    special = special[:max(2, k // 3)]  # two thirds of the databases stay general
    if not special:
        return base
    step = 3 if len(special) * 3 <= k else 2
    out = base[:1]
    rest = base[1:]
    while len(out) < k and (special or rest):
        if special:
            out.append(special.pop(0))
        out.extend(rest[:step - 1])
        rest = rest[step - 1:]
    return out[:k]
