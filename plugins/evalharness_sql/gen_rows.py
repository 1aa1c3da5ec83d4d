"""Databases generated from the schema alone (:func:`generated`): rows for each table the
queries read, drawn from small pools of each column's candidate values, that respect primary
keys, ``UNIQUE`` sets and foreign keys (into the table itself too), children mostly under
parents that pass the gold query's filters; aimed at an aggregate's threshold or at a key the
schema does not declare when the recipe says so (:mod:`evalharness_sql.gen_groups`).
"""

from __future__ import annotations

import random
from typing import Any

from evalharness_sql.contract import coerce
from evalharness_sql.engines import Schema, Table
from evalharness_sql.gen_groups import grow_group, repeat_keys
from evalharness_sql.gen_hints import ColumnKey, Hints
from evalharness_sql.gen_pools import Pool, narrow


def generated(schema: Schema, order: list[str], h: Hints, pools: dict[ColumnKey, Pool],
               rng: random.Random, flavour: str, variant: int = 0
               ) -> tuple[dict[str, list[tuple[Any, ...]]], list[str]]:
    flags = set(flavour.split(","))
    aimed = bool(flags & {"aggregate", "undeclared"})
    mode = "pass" if aimed else \
        next((m for m in ("pass", "fail", "near", "random") if m in flags), "random")
    null_rate = 0.3 if "nulls" in flags else (0.1 if rng.random() < 0.25 and not aimed else 0.0)
    width = rng.choice([1, 2, 2, 3, 4])
    sizes = [0, 1, 1, 2, 3] if "sparse" in flags else [1, 2, 3, 3, 4, 5, 6]
    data: dict[str, list[tuple[Any, ...]]] = {}
    links = _link_map(h)
    big = [c for c in h.counts if 1 < c <= 60]
    filtered = sorted(k for k in pools if k[0] in order and pools[k].filtered)
    contested = [k for k in filtered if k in h.contested]
    if contested and rng.random() < 0.7:
        filtered = contested
    tested = rng.choice(filtered) if mode == "fail" and filtered else None
    steps = [f"generated from the schema ({mode} values"
             + (f" — {tested[0]}.{tested[1]} tested" if tested else "")
             + f", pools of up to {width}, NULL rate {null_rate:g})"]
    empty = rng.choice(order) if "sparse" in flags and order else None
    nullable = sorted(k for k in h.columns if k[0] in order and (c := schema.column(*k))
                      is not None and not c.notnull)
    preferred = [k for k in nullable if k in h.sensitive or k in h.contested]
    if preferred and rng.random() < 0.7:
        nullable = preferred
    all_null = rng.choice(nullable) if "nulls" in flags and nullable and \
        rng.random() < 0.5 else None
    if all_null:
        steps[0] += f"; every {all_null[0]}.{all_null[1]} NULL"
    good: dict[str, list[tuple[Any, ...]]] = {}
    for t in order:
        table = schema.tables[t]
        n = 0 if t == empty else rng.choice(sizes)
        if len(table.foreign_keys) >= 2:  # a junction table: more rows, more combinations
            n *= 2
        if "wide" in flags and big:
            n = max(n, rng.choice(big) + rng.choice([0, 1]))
        elif "wide" in flags:
            n = rng.choice([6, 8, 10, 12])
        narrowed = {}
        for c in table.columns:
            key = (t, c.name.lower())
            column_mode = mode if mode != "fail" else ("fail" if key == tested else "pass")
            pool_size = 1 if "wide" in flags and not pools[key].filtered \
                else rng.randint(1, width)
            narrowed[key[1]] = [None] if key == all_null else \
                narrow(pools[key], rng, column_mode, pool_size)
        rows = _fill(schema, table, n, narrowed, data, links, rng, null_rate,
                     skew="skew" in flags, good=good)
        data[t] = rows
        checks = [(i, set(map(repr, pools[(t, c.name.lower())].passing)))
                  for i, c in enumerate(table.columns) if pools[(t, c.name.lower())].passing]
        good[t] = [r for r in rows if all(repr(r[i]) in ok for i, ok in checks)]
        steps.append(f"{len(rows)} rows in {table.name}")
    if "aggregate" in flags and h.aggregates:
        steps.append(grow_group(schema, order, data, good, h, pools, rng, variant))
    if "undeclared" in flags and h.grouped:
        steps.append(repeat_keys(schema, order, data, good, h, pools, rng, variant))
    return data, steps


def _link_map(h: Hints) -> dict[ColumnKey, list[ColumnKey]]:
    out: dict[ColumnKey, list[ColumnKey]] = {}
    for a, b in h.links:
        out.setdefault(a, []).append(b)
        out.setdefault(b, []).append(a)
    return out


def _fill(schema: Schema, table: Table, n: int, narrowed: dict[str, list[Any]],
          data: dict[str, list[tuple[Any, ...]]], links: dict[ColumnKey, list[ColumnKey]],
          rng: random.Random, null_rate: float, *, skew: bool = False,
          good: dict[str, list[tuple[Any, ...]]] | None = None) -> list[tuple[Any, ...]]:
    """``n`` rows (fewer when keys run out) that respect the table's keys. Children mostly
    pick parents whose values pass the gold query's filters (``good``), so that joins keep
    rows; with ``skew``, some parents get many children and others few."""
    weights: dict[str, list[int]] = {}

    def parent_row(parent: str) -> tuple[Any, ...]:
        rows = data[parent]
        passing = (good or {}).get(parent)
        if passing and len(passing) < len(rows) and rng.random() < 0.7:
            return rng.choice(passing)
        if not skew:
            return rng.choice(rows)
        if parent not in weights:
            weights[parent] = [rng.choice([1, 1, 2, 3, 5]) for _ in rows]
        return rng.choices(rows, weights=weights[parent])[0]

    t = table.name.lower()
    names = [c.name.lower() for c in table.columns]
    fk_of: dict[str, tuple[str, int]] = {}
    for fk in table.foreign_keys:
        parent = fk.table.lower()
        if parent not in data:
            continue  # a parent the queries do not read: its rows cannot matter
        pnames = [c.name.lower() for c in schema.tables[parent].columns]
        for col, ref in zip(fk.columns, fk.ref_columns, strict=False):
            if ref and ref.lower() in pnames and col.lower() in names:
                fk_of[col.lower()] = (parent, pnames.index(ref.lower()))
    for col, (parent, _) in fk_of.items():
        column = table.column(col)
        if not data[parent] and column is not None and column.notnull:
            return []  # every row would need a parent, and there is none
    keys = [tuple(k.lower() for k in table.primary_key)] if table.primary_key else []
    n_pk = len(keys)
    keys += [tuple(k.lower() for k in u) for u in table.unique]
    seen: list[set[tuple[Any, ...]]] = [set() for _ in keys]
    rows: list[tuple[Any, ...]] = []
    fresh = 100
    joined: dict[str, list[tuple[str, int]]] = {}  # the columns each column is joined with
    for name in names:
        found = []
        for pt, pc in links.get((t, name), []):
            if pt in data and data[pt]:
                found.append((pt, [c.name.lower() for c in schema.tables[pt].columns].index(pc)))
        joined[name] = found
    for _ in range(n * 3):
        if len(rows) >= n:
            break
        row: dict[str, Any] = {}
        for column, name in zip(table.columns, names, strict=True):
            if name in fk_of:
                parent, idx = fk_of[name]
                if data[parent] and (column.notnull or rng.random() > 0.15):
                    # in the child's type: an INTEGER key is referred to as '3' by TEXT
                    row[name] = coerce(column, parent_row(parent)[idx])[1]
                else:
                    row[name] = None
                continue
            if not column.notnull and rng.random() < null_rate:
                row[name] = None
                continue
            partners = joined[name]
            if partners and rng.random() < 0.7:
                pt, pidx = rng.choice(partners)
                fits, value = coerce(column, parent_row(pt)[pidx])
                if fits and (value is not None or not column.notnull):
                    row[name] = value
                    continue
            row[name] = rng.choice(narrowed[name])
        ok = True
        for i, key in enumerate(keys):
            values = tuple(row[k] for k in key)
            if i >= n_pk and None in values:
                continue  # NULLs never collide in a UNIQUE constraint
            if values in seen[i] or (i < n_pk and None in values):
                free_columns = [k for k in key if k not in fk_of]
                if not free_columns:
                    ok = False
                    continue
                k = rng.choice(free_columns)
                column = table.column(k)
                fresh += 1
                row[k] = fresh if column is None or column.kind in ("int", "real") \
                    else f"k{fresh}"
                values = tuple(row[c] for c in key)
                if values in seen[i] or (i < n_pk and None in values):
                    ok = False
        if not ok:
            continue
        for i, key in enumerate(keys):
            seen[i].add(tuple(row[k] for k in key))
        rows.append(tuple(row[c] for c in names))
    return _self_references(table, rows, rng)


def _self_references(table: Table, rows: list[tuple[Any, ...]],
                     rng: random.Random) -> list[tuple[Any, ...]]:
    """Point a table's foreign keys into itself (``employee.mgr_id``) at its own rows: one
    row is a root (NULL, or itself where NULL is not allowed), the others refer to an
    earlier row."""
    names = [c.name.lower() for c in table.columns]
    for fk in table.foreign_keys:
        if fk.table.lower() != table.name.lower() or len(fk.columns) != 1:
            continue
        col, ref = fk.columns[0].lower(), (fk.ref_columns[0] or "").lower()
        if col not in names or ref not in names:
            continue
        i, j = names.index(col), names.index(ref)
        column = table.columns[i]
        out = []
        for n, row in enumerate(rows):
            if n == 0 or (not column.notnull and rng.random() < 0.2):
                target = None if not column.notnull else row[j]
            else:
                target = rng.choice(out[:n])[j]
            out.append((*row[:i], coerce(column, target)[1], *row[i + 1:]))
        rows = out
    return rows
