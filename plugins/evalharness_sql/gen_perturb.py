"""Perturbed copies of the real data (:func:`perturbed`): a sample of the real rows that keeps
the parents of the sampled children (and rows holding the values the queries compare with),
then NULLs, duplicate rows, ties, shifted numbers, the queries' boundary values or dropped
child rows.
"""

from __future__ import annotations

import random
import re
from typing import Any

from evalharness_sql.engines import Column, Schema, Table
from evalharness_sql.gen_hints import ColumnKey, Hints, unique
from evalharness_sql.gen_pools import Pool


def perturbed(schema: Schema, order: list[str], real: dict[str, list[tuple[Any, ...]]],
               h: Hints, pools: dict[ColumnKey, tuple[list[Any], list[Any]]],
               rng: random.Random, perturbations: str
               ) -> tuple[dict[str, list[tuple[Any, ...]]], list[str]]:
    data = _sample(schema, order, real, rng, pools)
    steps = ["sampled " + ", ".join(f"{len(data[t])} of {len(real[t])} rows of "
                                    f"{schema.tables[t].name}" for t in order)]
    for name in perturbations.split(","):
        step = _PERTURBATIONS[name](schema, order, data, h, pools, rng)
        if step:
            steps.append(step)
    return data, steps


def _sample(schema: Schema, order: list[str], real: dict[str, list[tuple[Any, ...]]],
            rng: random.Random, pools: dict[ColumnKey, Pool]
            ) -> dict[str, list[tuple[Any, ...]]]:
    """A random sample of each table, children first, keeping the parents they refer to and
    a few rows holding the values the queries compare with."""
    chosen: dict[str, list[tuple[Any, ...]]] = {}
    needed: dict[str, set[tuple[str, Any]]] = {t: set() for t in order}
    for t in reversed(order):
        rows = real[t]
        table = schema.tables[t]
        m = min(len(rows), rng.choice([2, 3, 4, 6, 8, 12]))
        picked = set(rng.sample(range(len(rows)), m)) if rows else set()
        names = [c.name.lower() for c in table.columns]
        wanted = {i: set(pools[(t, n)].exact) if (t, n) in pools else set()
                  for i, n in enumerate(names)}
        hits = [j for j, r in enumerate(rows)
                if any(wanted[i] and r[i] in wanted[i] for i in range(len(names)))]
        if hits:
            picked.update(rng.sample(hits, min(len(hits), rng.choice([1, 2, 4]))))
        for i, r in enumerate(rows):
            if any((col, r[names.index(col)]) in needed[t] for col, _ in needed[t]
                   if col in names):
                picked.add(i)
        if len(picked) > 40:
            picked = set(sorted(picked)[:40])
        chosen[t] = [rows[i] for i in sorted(picked)]
        for fk in table.foreign_keys:
            parent = fk.table.lower()
            if parent not in needed:
                continue
            for col, ref in zip(fk.columns, fk.ref_columns, strict=False):
                if col.lower() in names and ref:
                    j = names.index(col.lower())
                    needed[parent].update((ref.lower(), r[j]) for r in chosen[t]
                                          if r[j] is not None)
    # keep only children whose parents are there: the copy must respect the foreign keys
    # (also where the real data does not)
    for t in order:
        table = schema.tables[t]
        names = [c.name.lower() for c in table.columns]
        for fk in table.foreign_keys:
            parent = fk.table.lower()
            if parent not in chosen:
                continue
            pnames = [c.name.lower() for c in schema.tables[parent].columns]
            for col, ref in zip(fk.columns, fk.ref_columns, strict=False):
                if not ref or col.lower() not in names or ref.lower() not in pnames:
                    continue
                j, pj = names.index(col.lower()), pnames.index(ref.lower())
                present = {_key_value(r[pj]) for r in chosen[parent]}
                chosen[t] = [r for r in chosen[t] if r[j] is None or _key_value(r[j]) in present]
    return chosen


def _key_value(value: Any) -> Any:
    """How a foreign key matches its parent: ``'3'`` in a TEXT column matches ``3``."""
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?\d+", text) and text == value:
            return int(text)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _key_columns(table: Table) -> set[str]:
    keys = {k.lower() for k in table.primary_key}
    for fk in table.foreign_keys:
        keys.update(c.lower() for c in fk.columns)
    for u in table.unique:
        keys.update(c.lower() for c in u)
    return keys


def _cells(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]], h: Hints,
           *, nullable: bool = False, numeric: bool = False, keys: bool = False
           ) -> list[tuple[str, int, Column]]:
    """Candidate columns ``(table, index, column)`` to perturb; those the queries use first."""
    out = []
    for t in order:
        if not data[t]:
            continue
        table = schema.tables[t]
        protected = _key_columns(table) if not keys else {k.lower() for k in table.primary_key}
        for i, c in enumerate(table.columns):
            name = c.name.lower()
            if name in protected and not (nullable and not c.notnull and not c.pk):
                continue
            if nullable and c.notnull:
                continue
            if numeric and c.kind not in ("int", "real"):
                continue
            out.append((t, i, c))
    used = [x for x in out if (x[0], x[2].name.lower()) in h.columns]
    return used or out


def _set(data: dict[str, list[tuple[Any, ...]]], t: str, row: int, col: int, value: Any) -> None:
    r = list(data[t][row])
    r[col] = value
    data[t][row] = tuple(r)


def _nulls(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]], h: Hints,
           pools: Any, rng: random.Random) -> str | None:
    cells = _cells(schema, order, data, h, nullable=True)
    if not cells:
        return None
    done = []
    for _ in range(rng.randint(1, 4)):
        t, i, c = rng.choice(cells)
        row = rng.randrange(len(data[t]))
        _set(data, t, row, i, None)
        done.append(f"{schema.tables[t].name}.{c.name}")
    return "NULL in " + ", ".join(sorted(set(done)))


def _duplicates(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]],
                h: Hints, pools: Any, rng: random.Random) -> str | None:
    done = []
    for t in order:
        if not data[t] or (h.tables and t not in h.tables) or rng.random() < 0.3:
            continue
        table = schema.tables[t]
        unique_cols = [{k.lower() for k in table.primary_key}] if table.primary_key else []
        unique_cols += [{k.lower() for k in u} for u in table.unique]
        names = [c.name.lower() for c in table.columns]
        row = list(rng.choice(data[t]))
        ok = True
        for cols in unique_cols:
            if len(cols) != 1:
                ok = False
                break
            (col,) = cols
            j = names.index(col)
            column = table.columns[j]
            existing = {r[j] for r in data[t]}
            if column.kind in ("int", "real"):
                value = max((v for v in existing if isinstance(v, int | float)), default=0) + 1
                row[j] = int(value) if column.kind == "int" else value
            else:
                row[j] = f"{row[j]}_copy"
            if row[j] in existing:
                ok = False
        if ok:
            data[t].append(tuple(row))
            done.append(table.name)
    return ("duplicated a row of " + ", ".join(done)) if done else None


def _ties(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]], h: Hints,
          pools: Any, rng: random.Random) -> str | None:
    cells = [x for x in _cells(schema, order, data, h) if len(data[x[0]]) > 1]
    if not cells:
        return None
    done = []
    for _ in range(rng.randint(1, 3)):
        t, i, c = rng.choice(cells)
        a, b = rng.sample(range(len(data[t])), 2)
        _set(data, t, b, i, data[t][a][i])
        done.append(f"{schema.tables[t].name}.{c.name}")
    return "tied values in " + ", ".join(sorted(set(done)))


def _shift(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]], h: Hints,
           pools: Any, rng: random.Random) -> str | None:
    cells = _cells(schema, order, data, h, numeric=True)
    if not cells:
        return None
    done = []
    for _ in range(rng.randint(1, 3)):
        t, i, c = rng.choice(cells)
        row = rng.randrange(len(data[t]))
        value = data[t][row][i]
        if isinstance(value, int | float) and not isinstance(value, bool):
            _set(data, t, row, i, value + rng.choice([-1, 1]))
            done.append(f"{schema.tables[t].name}.{c.name}")
    return ("shifted values in " + ", ".join(sorted(set(done)))) if done else None


def _literals(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]],
              h: Hints, pools: dict[ColumnKey, tuple[list[Any], list[Any]]],
              rng: random.Random) -> str | None:
    done = []
    for t in order:
        if not data[t]:
            continue
        table = schema.tables[t]
        protected = _key_columns(table)
        for i, c in enumerate(table.columns):
            pool = pools.get((t, c.name.lower()))
            tied = unique([*pool.exact, *pool.passing, *pool.failing]) if pool else []
            if not tied or c.name.lower() in protected:
                continue
            for _ in range(rng.randint(1, 3)):
                _set(data, t, rng.randrange(len(data[t])), i, rng.choice(tied))
            done.append(f"{table.name}.{c.name}")
    return ("boundary values in " + ", ".join(done)) if done else None


def _subset(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]],
            h: Hints, pools: Any, rng: random.Random) -> str | None:
    """Drop some child rows (so that parents lose children), never a row that another row
    refers to."""
    referenced: dict[str, set[tuple[int, Any]]] = {t: set() for t in order}
    for t in order:
        names = [c.name.lower() for c in schema.tables[t].columns]
        for fk in schema.tables[t].foreign_keys:
            parent = fk.table.lower()
            if parent not in referenced:
                continue
            pnames = [c.name.lower() for c in schema.tables[parent].columns]
            for col, ref in zip(fk.columns, fk.ref_columns, strict=False):
                if ref and col.lower() in names and ref.lower() in pnames:
                    j, pj = names.index(col.lower()), pnames.index(ref.lower())
                    referenced[parent].update((pj, _key_value(r[j])) for r in data[t])
    done = []
    for t in order:
        table = schema.tables[t]
        if not table.foreign_keys or len(data[t]) < 2:
            continue
        free = [r for r in data[t]
                if not any((i, _key_value(v)) in referenced[t] for i, v in enumerate(r))]
        if not free:
            continue
        drop = rng.sample(free, rng.randint(1, max(1, len(free) // 2)))
        data[t] = [r for r in data[t] if r not in drop]
        done.append(table.name)
    return ("dropped child rows of " + ", ".join(done)) if done else None


_PERTURBATIONS = {"nulls": _nulls, "duplicates": _duplicates, "ties": _ties, "shift": _shift,
                  "literals": _literals, "subset": _subset}
