"""Candidate values per column (:class:`Pool`, :func:`column_pools`): the literals the queries
compare it with and their neighbours, sorted into values that pass or fail the gold (and the
predicted) query's comparisons, values of the real data and defaults of the column's type —
only values its type and ``CHECK`` list allow; and the small pool one test database draws a
column's values from (:func:`narrow`).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from evalharness_sql.contract import coerce
from evalharness_sql.engines import Column, Schema
from evalharness_sql.gen_hints import DATE, ColumnKey, Hints, unique

DEFAULTS: dict[str, list[Any]] = {
    "int": [0, 1, 2, 3, -1, 10],
    "real": [0.0, 1.5, 2.5, 10.0, -1.0],
    "text": ["a", "b", "A", "", "9", "10"],
    "date": ["2020-01-01", "2020-06-15", "2021-12-31 23:59:59", "2019-02-28"],
    "bool": [0, 1],
}


def _fits(value: Any, column: Column, strict: bool) -> bool:
    """Whether a value is one the column can hold (its declared type, its CHECK list)."""
    if value is None:
        return False
    if column.allowed is not None and value not in column.allowed:
        return False
    kind = column.kind
    if kind == "bool":  # 0 and 1, or a boolean spelt as text ('T', 'Y', 'true')
        return (value in (0, 1) and not isinstance(value, float)) or isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "real":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "date":
        if not isinstance(value, str):
            return False
        return bool(DATE.match(value)) if strict else True
    return isinstance(value, str)


@dataclass
class Pool:
    """Candidate values of one column, in tiers: values that pass the gold query's
    comparisons of it (``passing``), values that fail them by a little (``failing``), other
    values around the literals the queries use (``near``), and everything else (values of the
    real data and type defaults: ``other``)."""

    passing: list[Any]
    failing: list[Any]
    near: list[Any]
    other: list[Any]
    exact: list[Any] = field(default_factory=list)
    boundary: list[Any] = field(default_factory=list)
    """Values that pass the predicted query's comparisons."""
    boundary_failing: list[Any] = field(default_factory=list)
    """Values that fail them by a little."""

    @property
    def filtered(self) -> bool:
        return bool(self.passing or self.failing or self.boundary or self.boundary_failing)


def column_pools(schema: Schema, order: list[str], real: dict[str, list[tuple[Any, ...]]],
           h: Hints, strict: bool) -> dict[ColumnKey, Pool]:
    """Candidate values of every column (see :class:`Pool`)."""
    tiers = [{k: list(v) for k, v in t.items()}
             for t in (h.literals, h.near, h.passing, h.failing, h.boundary,
                       h.boundary_failing)]
    # a literal compared with a foreign key, or with a column joined to another, matters to
    # the other column too: `flights.source = 'APG'` needs an airport 'APG'
    pairs = list(h.links)
    for t in order:
        for fk in schema.tables[t].foreign_keys:
            for col, ref in zip(fk.columns, fk.ref_columns, strict=False):
                if ref:
                    pairs.append(((t, col.lower()), (fk.table.lower(), ref.lower())))
    for a, b in pairs:
        for tier in tiers:
            merged = unique([*tier.get(a, []), *tier.get(b, [])])
            if merged:
                tier[a] = tier[b] = merged
    exact_of, near_of, pass_of, fail_of, boundary_of, boundary_fail_of = tiers
    pools: dict[ColumnKey, Pool] = {}
    for t in order:
        table = schema.tables[t]
        rows = real.get(t) or []
        for i, column in enumerate(table.columns):
            key = (t, column.name.lower())

            def fit(values: list[Any], column: Column = column) -> list[Any]:
                return unique(v for v in values if _fits(v, column, strict))

            exact = fit(exact_of.get(key, []))
            passing, failing = fit(pass_of.get(key, [])), fit(fail_of.get(key, []))
            boundary = [v for v in fit(boundary_of.get(key, []))
                        if v not in passing and v not in failing]
            boundary_failing = [v for v in fit(boundary_fail_of.get(key, []))
                                if v not in passing and v not in failing and v not in boundary]
            extra = []
            for v in exact:  # a REAL column compared with 30 also needs 29.5 and 30.5
                if column.kind == "real" and isinstance(v, int) and not isinstance(v, bool):
                    extra += [v - 0.5, v + 0.5]
                elif column.kind == "int" and isinstance(v, float):
                    extra += [math.floor(v), math.ceil(v)]
            near = [v for v in fit([*near_of.get(key, []), *extra])
                    if v not in exact and v not in passing and v not in failing]
            if not exact and key in h.columns:  # an untied literal may be meant for it
                near = fit([*near, *h.free])[:8]
            existing = unique(r[i] for r in rows if r[i] is not None)
            existing = sorted(existing, key=lambda v: (type(v).__name__, str(v)))
            if len(existing) > 12:
                step = len(existing) / 12
                existing = [existing[int(j * step)] for j in range(12)]
            taken = {(type(v).__name__, v) for v in [*exact, *near, *passing, *failing,
                                                        *boundary, *boundary_failing]}
            defaults = list(column.allowed) if column.allowed is not None \
                else DEFAULTS[column.kind]
            other = [v for v in fit([*existing, *defaults])
                     if (type(v).__name__, v) not in taken]
            pools[key] = Pool(passing, failing, near, other, exact, boundary,
                              boundary_failing)
    for a, b in h.links:  # joined columns draw from one pool, so that joins find partners
        if a in pools and b in pools:
            pa, pb = pools[a], pools[b]
            tiers = [unique([*x, *y]) for x, y in zip(
                (pa.passing, pa.failing, pa.near, pa.other, pa.exact, pa.boundary,
                 pa.boundary_failing),
                (pb.passing, pb.failing, pb.near, pb.other, pb.exact, pb.boundary,
                 pb.boundary_failing), strict=True)]
            for k in (a, b):  # each column keeps the values of its own type
                column = schema.column(*k)
                if column is None:
                    continue
                own = [[v for v in (coerce(column, x)[1] for x in tier)
                        if v is not None and _fits(v, column, strict)] for tier in tiers]
                pools[k] = Pool(*(unique(tier) for tier in own))
    return pools


def _pick(values: list[Any], rng: random.Random, lo: int, hi: int) -> list[Any]:
    return rng.sample(values, min(len(values), rng.randint(lo, hi))) if values else []


def narrow(pool: Pool, rng: random.Random, mode: str, size: int) -> list[Any]:
    """A small pool for one database: small so that ties and duplicates are common.

    ``pass``: only values that pass the gold query's comparisons (rows get through its
    filters); ``fail``: passing and failing values mixed (for the one column whose filter the
    database tests); ``near``: values around every literal; ``random``: anything.
    """
    chosen: list[Any] = []
    if mode == "pass" and pool.filtered:
        chosen = _pick(pool.passing, rng, 3, 3) or _pick(pool.exact, rng, 1, 2)
        if rng.random() < 0.15:
            chosen += _pick(pool.failing, rng, 1, 1)
    elif mode == "fail" and pool.filtered:
        # the closest values on both sides always (``x > 30``: 31 and 30), others by chance
        chosen = pool.passing[:1] + _pick(pool.passing[1:], rng, 0, 1)
        chosen += pool.failing[:1] + _pick(pool.failing[1:], rng, 0, 1)
        chosen += _pick(pool.boundary, rng, 2, 2) + _pick(pool.boundary_failing, rng, 1, 1)
    elif mode in ("pass", "fail"):
        chosen = _pick(pool.exact, rng, 1, 2)
        if not chosen or rng.random() < 0.3:
            chosen += _pick(pool.near, rng, 0, 1) + _pick(pool.other, rng, 1, max(1, size))
    elif mode == "near":
        chosen = _pick(pool.passing, rng, 1, 2) + _pick(pool.failing, rng, 1, 2)
        chosen += _pick(pool.boundary, rng, 0, 2) + _pick(pool.boundary_failing, rng, 0, 1)
        chosen += _pick(pool.exact, rng, 0, 1) + _pick(pool.near, rng, 0, 2)
        if not chosen or rng.random() < 0.3:
            chosen += _pick(pool.other, rng, 1, 1)
    else:
        everything = unique([*pool.passing, *pool.failing, *pool.boundary,
                              *pool.boundary_failing, *pool.exact, *pool.near])
        chosen = _pick(everything, rng, 0, 2)
        if len(chosen) < size:
            chosen += _pick(pool.other, rng, size - len(chosen), size - len(chosen))
    return unique(chosen) or (pool.other[:1] if pool.other else [0])
