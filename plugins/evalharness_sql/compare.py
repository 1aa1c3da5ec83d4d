"""Comparing two query results: multisets (or lists, when the gold query orders its rows),
columns matched by content, floats within a tolerance, NULL equal to NULL.

Column names never matter, and neither does column order: a predicted column is matched to
the gold column holding the same values. When the gold query orders its rows, the predicted
rows must come in that order, except that rows the gold ordering leaves tied may come in any
order (and, under a ``LIMIT``, any of the tied rows may fill the last places).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

Row = tuple[Any, ...]

MAX_PERMUTATIONS = 64


def canon(value: Any) -> Any:
    """A hashable, comparable form of one value: numbers to floats rounded to 9 significant
    digits (so that ``2`` equals ``2.0``), dates to ISO text, bools to integers.

    >>> canon(2) == canon(2.0) == canon(True + 1), canon(None), canon("2") == canon(2)
    (True, None, False)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int | float | decimal.Decimal):
        f = float(value)
        if math.isnan(f) or math.isinf(f):
            return ("special", str(f))
        return ("n", float(f"{f:.9g}"))
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return ("b", bytes(value))
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat(sep=" ") if isinstance(value, _dt.datetime) else value.isoformat()
    return ("r", repr(value))


def jsonable(value: Any) -> Any:
    """A value as JSON can hold it (bytes as hex, dates as ISO text, decimals as floats).

    >>> jsonable((1, b"\\x00\\xff", None))
    [1, '00ff', None]
    """
    if isinstance(value, tuple | list):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    return repr(value)


@dataclass
class Ordering:
    """How the gold query orders its rows.

    ``keys`` are the indices, in the gold rows as executed, of the gold ``ORDER BY`` values
    (appended after the ``visible`` columns when they are not selected); ``offset`` and
    ``limit`` are the gold query's ``OFFSET`` / ``LIMIT``, which were removed so that ties at
    the cut are known. ``keys=None`` means the order keys are unknown: lists are compared
    exactly.
    """

    visible: int
    keys: list[int] | None = None
    offset: int = 0
    limit: int | None = None


@dataclass
class Expected:
    """The gold answer in comparable form: rows, and the tie groups an ordering allows."""

    rows: list[Row]
    ordered: bool = False
    groups: list[tuple[int, int, Counter]] = field(default_factory=list)
    """``(start, end, allowed rows)``: positions ``start..end-1`` may hold any rows of the
    multiset ``allowed`` (rows the gold ordering leaves tied)."""


def expected(rows: Sequence[Row], ordering: Ordering | None) -> Expected:
    """The gold answer, from the gold rows as executed (with order keys appended and without
    its ``LIMIT``, when ``ordering`` says so).

    >>> e = expected([("a", 1), ("b", 1), ("c", 2)], Ordering(visible=1, keys=[1], limit=1))
    >>> e.rows, [(s, t, sorted(c)) for s, t, c in e.groups]
    ([('a',)], [(0, 1, [('a',), ('b',)])])
    """
    if ordering is None:
        return Expected([tuple(r) for r in rows])
    visible = [tuple(r[: ordering.visible]) for r in rows]
    start = ordering.offset
    stop = len(visible) if ordering.limit is None else min(len(visible), start + ordering.limit)
    sliced = visible[start:stop]
    if ordering.keys is None:
        return Expected(sliced, ordered=True)
    keys = [tuple(canon(r[k]) for k in ordering.keys) for r in rows]
    groups = []
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and keys[j] == keys[i]:
            j += 1
        lo, hi = max(i, start), min(j, stop)
        if lo < hi:
            groups.append((lo - start, hi - start, Counter(_key(r) for r in visible[i:j])))
        i = j
    return Expected(sliced, ordered=True, groups=groups)


def _key(row: Row) -> tuple[Any, ...]:
    return tuple(canon(v) for v in row)


@dataclass
class Comparison:
    """Outcome of comparing a predicted result with the gold answer."""

    equal: bool
    reason: str
    permutations: list[tuple[int, ...]] | None = None
    """Column matchings (gold column i = predicted column p[i]) consistent with this result;
    ``None`` when any matching is (no rows to tell)."""
    only_in_gold: list[Row] = field(default_factory=list)
    only_in_predicted: list[Row] = field(default_factory=list)

    def counterexample(self, limit: int = 5) -> dict[str, Any]:
        return {"difference": self.reason,
                "only_in_gold": [jsonable(r) for r in self.only_in_gold[:limit]],
                "only_in_predicted": [jsonable(r) for r in self.only_in_predicted[:limit]]}


def compare(gold: Expected, predicted: Sequence[Row], n_gold_columns: int,
            n_predicted_columns: int, *, tolerance: float = 1e-6,
            allowed: list[tuple[int, ...]] | None = None) -> Comparison:
    """Compare ``predicted`` rows with the ``gold`` answer.

    ``allowed`` restricts the column matchings to those found on earlier databases, so that a
    matching that only works by accident on one database does not count.

    >>> g = expected([(1, "a"), (2, "b")], None)
    >>> compare(g, [("b", 2), ("a", 1.0)], 2, 2).equal
    True
    >>> c = compare(g, [("a", 1)], 2, 2)
    >>> c.equal, c.reason, c.only_in_gold
    (False, 'the gold query returns 2 rows, the predicted query 1', [(2, 'b')])
    >>> compare(expected([(None,)], None), [(None,)], 1, 1).equal
    True
    """
    if n_gold_columns != n_predicted_columns:
        return Comparison(False, f"the gold query returns {n_gold_columns} column"
                                 f"{'s' * (n_gold_columns != 1)}, the predicted query "
                                 f"{n_predicted_columns}",
                          only_in_gold=gold.rows[:5], only_in_predicted=list(predicted[:5]))
    predicted = [tuple(r) for r in predicted]
    if not gold.rows and not predicted:
        return Comparison(True, "both return no rows", permutations=allowed)
    candidates = list(_candidate_permutations(gold.rows, predicted, n_gold_columns))
    if allowed is not None:
        keep = set(allowed)
        candidates = [p for p in candidates if p in keep]
    valid = [p for p in candidates if _rows_match(gold, _permute(predicted, p), tolerance)]
    if valid:
        return Comparison(True, "same rows", permutations=valid)
    best = _closest_matching(gold.rows, predicted, n_gold_columns)
    return _difference(gold, _permute(predicted, best), tolerance)


def _closest_matching(gold: list[Row], predicted: list[Row], n: int) -> tuple[int, ...]:
    """For showing a difference: match columns greedily by how many values they share."""
    gsets = [{canon(r[i]) for r in gold} for i in range(n)]
    psets = [{canon(r[j]) for r in predicted} for j in range(n)]
    scores = sorted(((len(gsets[i] & psets[j]), i == j, i, j) for i in range(n)
                     for j in range(n)), reverse=True)
    perm: dict[int, int] = {}
    used: set[int] = set()
    for _, _, i, j in scores:
        if i not in perm and j not in used:
            perm[i] = j
            used.add(j)
    return tuple(perm[i] for i in range(n))


def _permute(rows: list[Row], perm: tuple[int, ...]) -> list[Row]:
    if perm == tuple(range(len(perm))):
        return rows
    return [tuple(r[j] for j in perm) for r in rows]


def _candidate_permutations(gold: list[Row], predicted: list[Row], n: int
                            ) -> Iterator[tuple[int, ...]]:
    """Column matchings whose columns hold the same multiset of values (identity first)."""
    if not gold or not predicted or n == 1:
        yield tuple(range(n))
        return
    gsig = [Counter(canon(r[i]) for r in gold) for i in range(n)]
    psig = [Counter(canon(r[j]) for r in predicted) for j in range(n)]
    options = []
    for i in range(n):
        same = [j for j in range(n) if _close_counters(gsig[i], psig[j])]
        same.sort(key=lambda j: j != i)
        options.append(same)
    if any(not o for o in options):
        yield tuple(range(n))
        return
    count = 0
    chosen: list[int] = []

    def search(i: int) -> Iterator[tuple[int, ...]]:
        nonlocal count
        if count >= MAX_PERMUTATIONS:
            return
        if i == n:
            count += 1
            yield tuple(chosen)
            return
        for j in options[i]:
            if j not in chosen:
                chosen.append(j)
                yield from search(i + 1)
                chosen.pop()

    found = False
    for perm in search(0):
        found = True
        yield perm
    if not found:
        yield tuple(range(n))


def _close_counters(a: Counter, b: Counter) -> bool:
    if a == b:
        return True
    if sum(a.values()) != sum(b.values()):
        return False
    # numbers may differ by rounding: compare the sorted numeric values within tolerance
    na = sorted(v[1] for v in a.elements() if isinstance(v, tuple) and v[0] == "n")
    nb = sorted(v[1] for v in b.elements() if isinstance(v, tuple) and v[0] == "n")
    if len(na) != len(nb) or not na:
        return False
    rest_a = Counter({k: c for k, c in a.items() if not (isinstance(k, tuple) and k[0] == "n")})
    rest_b = Counter({k: c for k, c in b.items() if not (isinstance(k, tuple) and k[0] == "n")})
    return rest_a == rest_b and all(math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9)
                                    for x, y in zip(na, nb, strict=True))


def _rows_match(gold: Expected, predicted: list[Row], tolerance: float) -> bool:
    if len(gold.rows) != len(predicted):
        return False
    if not gold.ordered:
        return _same_multiset(gold.rows, predicted, tolerance)
    if not gold.groups:
        return all(_rows_close(g, p, tolerance) for g, p in zip(gold.rows, predicted, strict=True))
    for start, end, allowed in gold.groups:
        part = Counter(_key(r) for r in predicted[start:end])
        if part - allowed:
            # tolerate float rounding: fall back to close matching within the group
            pool = list(allowed.elements())
            if not _sub_multiset_close(list(part.elements()), pool, tolerance):
                return False
    return True


def _same_multiset(gold: list[Row], predicted: list[Row], tolerance: float) -> bool:
    a, b = Counter(map(_key, gold)), Counter(map(_key, predicted))
    if a == b:
        return True
    left, right = list((a - b).elements()), list((b - a).elements())
    return len(left) == len(right) and _sub_multiset_close(right, left, tolerance)


def _sub_multiset_close(part: list[tuple], pool: list[tuple], tolerance: float) -> bool:
    """Whether every row of ``part`` can be matched to a distinct, close row of ``pool``."""
    pool = sorted(pool, key=_sort_key)
    used = [False] * len(pool)
    for row in sorted(part, key=_sort_key):
        for i, cand in enumerate(pool):
            if not used[i] and _keys_close(row, cand, tolerance):
                used[i] = True
                break
        else:
            return False
    return True


def _sort_key(row: tuple) -> tuple:
    return tuple((0, "") if v is None else (1, str(v)) for v in row)


def _keys_close(a: tuple, b: tuple, tolerance: float) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        if isinstance(x, tuple) and isinstance(y, tuple) and x[0] == y[0] == "n":
            if math.isclose(x[1], y[1], rel_tol=tolerance, abs_tol=tolerance):
                continue
        return False
    return True


def _rows_close(a: Row, b: Row, tolerance: float) -> bool:
    return _keys_close(_key(a), _key(b), tolerance)


def _difference(gold: Expected, predicted: list[Row], tolerance: float) -> Comparison:
    a, b = Counter(map(_key, gold.rows)), Counter(map(_key, predicted))
    by_key_g = {_key(r): r for r in gold.rows}
    by_key_p = {_key(r): r for r in predicted}
    only_g = [by_key_g[k] for k in (a - b).elements()]
    only_p = [by_key_p[k] for k in (b - a).elements()]
    if len(gold.rows) != len(predicted):
        reason = (f"the gold query returns {len(gold.rows)} row{'s' * (len(gold.rows) != 1)}, "
                  f"the predicted query {len(predicted)}")
    elif only_g or only_p:
        reason = f"{len(only_g)} of the {len(gold.rows)} gold rows differ"
    else:
        position = next((i for i, (g, p) in enumerate(zip(gold.rows, predicted, strict=True))
                         if not _rows_close(g, p, tolerance)), 0)
        reason = (f"same rows in a different order (first difference at row {position + 1}, "
                  "and the gold query orders its rows)")
        only_g, only_p = gold.rows[position:position + 3], predicted[position:position + 3]
    return Comparison(False, reason, only_in_gold=only_g, only_in_predicted=only_p)
