"""The one case sampler: which of a scenario's cases a run (or a rerun, or a review) takes.

Every place that chooses cases goes through :func:`select` (or :func:`stratified`), so "20
cases, seed 3" means the same 20 cases in a run, in the oracle reruns' sample and in a review:

- ``rerun_failed``: only the cases that failed in an earlier run (:func:`failed_ids`);
- ``ids``: only these case ids (the pytest plugin narrows a run to its selected items);
- ``filters``: ``--filter EXPR``, each a ``key:pattern[,pattern…]`` term — ``id:`` (the
  default key), ``tag:`` or ``route:`` (gold route; ``route:none`` for a case whose gold says
  no route, ``route:unlabelled`` for one without route gold) — with shell-style wildcards;
  patterns of one term are alternatives, several ``--filter`` must all hold, and a leading
  ``!`` negates a term;
- ``sample``: a seeded sample stratified by gold route, so a small sample still covers every
  branch of the pipeline;
- ``limit``: the first N cases in file order.

A case's place in a seeded sample depends only on the seed and its id (a hash), never on the
order or the number of the other cases.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from evalharness.errors import EvalHarnessError
from evalharness.models import Case

T = TypeVar("T")

FILTER_KEYS = ("id", "tag", "route")


class SelectionError(EvalHarnessError):
    """A selection that cannot be made (a bad filter, no case left, an unreadable run)."""


@dataclass(frozen=True)
class Selection:
    """How to choose cases; the default takes them all."""

    limit: int | None = None
    sample: int | None = None
    seed: int = 0
    filters: tuple[str, ...] = ()
    rerun_failed: Path | None = None
    ids: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.limit is not None and self.sample is not None:
            raise SelectionError("--limit and --sample exclude each other: --limit takes the "
                                 "first N cases in file order, --sample a seeded sample "
                                 "stratified by gold route; choose one")
        for name in ("limit", "sample"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise SelectionError(f"--{name} must be a whole number of cases ≥ 1, "
                                     f"not {value!r}")
        for expr in self.filters:
            parse_filter(expr)

    @property
    def everything(self) -> bool:
        """Whether every case is taken (no option given)."""
        return (self.limit is None and self.sample is None and not self.filters
                and self.rerun_failed is None and self.ids is None)


@dataclass(frozen=True)
class Chosen:
    """The result of a selection: the cases, in file order, and how they were chosen."""

    cases: list[Case]
    total: int
    """Cases in the scenario."""
    how: str
    """One sentence for the report, e.g. ``20 of 51 cases: a sample stratified by gold route
    (seed 3)``."""
    strata: dict[str, int] = field(default_factory=dict)
    """Gold route -> cases chosen from it (for a sample)."""
    everything: bool = True

    def record(self) -> dict[str, Any]:
        """What ``run.json`` keeps and ``--resume`` compares, and the report shows."""
        return {"how": self.how, "chosen": len(self.cases), "total": self.total,
                "everything": self.everything,
                "ids_sha256": _digest(c.id for c in self.cases),
                **({"strata": self.strata} if self.strata else {})}


def select(cases: Sequence[Case], selection: Selection, *, source: str = "the scenario"
           ) -> Chosen:
    """The cases ``selection`` takes from ``cases``, in their order (see the module text)."""
    if selection.everything:
        return Chosen(list(cases), len(cases), f"all {len(cases)} cases")
    steps: list[str] = []
    chosen = list(cases)
    if selection.rerun_failed is not None:
        failed = failed_ids(selection.rerun_failed)
        known = {c.id for c in cases}
        chosen = [c for c in chosen if c.id in failed]
        gone = len(failed - known)
        steps.append(f"the {len(failed)} that failed in {selection.rerun_failed}"
                     + (f" ({gone} no longer in {source})" if gone else ""))
    if selection.ids is not None:
        wanted = set(selection.ids)
        unknown = sorted(wanted - {c.id for c in cases})
        if unknown:
            raise SelectionError(f"no case with id {', '.join(map(repr, unknown[:5]))} in "
                                 f"{source}")
        chosen = [c for c in chosen if c.id in wanted]
        steps.append(f"{len(wanted)} named by id")
    for expr in selection.filters:
        test = parse_filter(expr)
        chosen = [c for c in chosen if test(c)]
        steps.append(f"--filter {expr!r}")
    strata: dict[str, int] = {}
    if selection.sample is not None:
        picked = stratified(chosen, selection.sample, selection.seed)
        strata = _count_strata(picked)
        if len(picked) < len(chosen):
            steps.append(f"a sample of {len(picked)} stratified by gold route "
                         f"(seed {selection.seed}: "
                         + ", ".join(f"{k} {v}" for k, v in strata.items()) + ")")
        chosen = picked
    if selection.limit is not None and selection.limit < len(chosen):
        chosen = chosen[: selection.limit]
        steps.append(f"the first {selection.limit} in file order")
    if not chosen:
        raise SelectionError(f"the selection leaves no case of the {len(cases)} in {source} "
                             f"({'; then '.join(steps)}); loosen --filter, or check the run "
                             "given to --rerun-failed")
    if len(chosen) == len(cases):  # nothing left out (--sample/--limit ≥ the cases): all ran
        return Chosen(list(cases), len(cases), f"all {len(cases)} cases")
    how = f"{len(chosen)} of {len(cases)} cases: " + "; then ".join(steps)
    return Chosen(chosen, len(cases), how, strata, everything=False)


def stratum(case: Case) -> str:
    """The gold route of a case as a stratum: ``blog+sql``, ``none`` (gold says no route) or
    ``unlabelled``.

    >>> stratum(Case(id="a", question="q", gold={"routes": ["sql", "blog"]}))
    'blog+sql'
    >>> stratum(Case(id="b", question="q", gold={"routes": []})), stratum(Case(id="c", question="q"))
    ('none', 'unlabelled')
    """
    routes = case.gold.routes
    if routes is None:
        return "unlabelled"
    return "+".join(sorted(set(routes))) or "none"


def stratified(items: Sequence[T], n: int, seed: int, *,
               key: Callable[[T], Case] = lambda item: item,
               by: Callable[[T], str] | None = None) -> list[T]:
    """A seeded sample of ``n`` of ``items`` (in their order), stratified by gold route (or by
    the stratum ``by`` gives an item: a review stratifies by component and verdict):
    every stratum gets one case before any gets a second (when ``n`` allows), the rest is
    shared in proportion to the strata's sizes (largest remainder). ``key`` maps an item to
    its :class:`Case`.

    >>> cases = [Case(id=f"s{i}", question="q", gold={"routes": ["sql"]}) for i in range(8)]
    >>> cases += [Case(id="b0", question="q", gold={"routes": ["blog"]})]
    >>> [c.id for c in stratified(cases, 2, seed=1)][-1], len(stratified(cases, 5, seed=1))
    ('b0', 5)
    >>> stratified(cases, 3, seed=1) == stratified(list(reversed(cases)), 3, seed=1)[::-1]
    True
    """
    if n >= len(items):
        return list(items)
    groups: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        groups.setdefault(by(item) if by is not None else stratum(key(item)), []).append(i)
    for members in groups.values():
        members.sort(key=lambda i: _rank(seed, key(items[i]).id))
    # strata by size (largest first), ties by name: who gets a case when n < strata
    order = sorted(groups, key=lambda s: (-len(groups[s]), s))
    quota = dict.fromkeys(order, 0)
    for s in order[:n]:
        quota[s] = 1
    left = n - sum(quota.values())
    if left > 0:
        room = {s: len(groups[s]) - quota[s] for s in order}
        spare = sum(room.values())
        shares = {s: divmod(left * room[s], spare) for s in order}  # exact: no float ties
        for s in order:
            quota[s] += shares[s][0]
        rest = n - sum(quota.values())
        by_remainder = sorted(order, key=lambda s: (-shares[s][1], s))
        for s in by_remainder:
            if rest == 0:
                break
            if quota[s] < len(groups[s]):
                quota[s] += 1
                rest -= 1
    picked = {i for s in order for i in groups[s][: quota[s]]}
    return [item for i, item in enumerate(items) if i in picked]


def parse_filter(expr: str) -> Callable[[Case], bool]:
    """A ``--filter`` term as a test on a case (see the module text); a bad term is a
    :class:`SelectionError` naming what would be valid.

    >>> case = Case(id="q007", question="q", tags=["price"], gold={"routes": ["sql"]})
    >>> [parse_filter(e)(case) for e in ("q00*", "tag:price", "route:sql,blog", "!route:sql")]
    [True, True, True, False]
    """
    text = expr.strip()
    negate = text.startswith("!")
    if negate:
        text = text[1:].strip()
    key, sep, patterns = text.partition(":")
    if not sep:
        key, patterns = "id", text
    key = key.strip().lower()
    values = [p.strip() for p in patterns.split(",") if p.strip()]
    if key not in FILTER_KEYS or not values:
        raise SelectionError(
            f"--filter {expr!r}: expected KEY:PATTERN[,PATTERN…] with KEY one of "
            f"{', '.join(FILTER_KEYS)} (a bare PATTERN matches ids), e.g. 'q01*', "
            "'tag:price', 'route:sql', '!route:blog+sql'; patterns take * ? [] wildcards")

    def values_of(case: Case) -> list[str]:
        if key == "id":
            return [case.id]
        if key == "tag":
            return list(case.tags)
        return [stratum(case), *(case.gold.routes or [])]

    def test(case: Case) -> bool:
        found = any(fnmatch.fnmatchcase(v, p) for v in values_of(case) for p in values)
        return found != negate

    return test


def failed_ids(run: Path) -> set[str]:
    """The ids of the cases that failed in the run folder ``run``
    (:attr:`~evalharness.models.CaseResult.failed`: an end-to-end verdict ``fail`` or
    ``error``; for a case without one, a component verdict ``fail`` or ``error``, or a system
    failure)."""
    from evalharness.results import Results

    path = Path(run) / "results.jsonl"
    if not path.is_file():
        raise SelectionError(f"--rerun-failed {run}: no results.jsonl there; give the --out "
                             "folder of an earlier `evalharness scenario` run")
    try:
        results = Results.open(path)
    except EvalHarnessError as exc:
        raise SelectionError(f"--rerun-failed {run}: {exc}") from None
    return {r.case.id for r in results if r.failed}


def _rank(seed: int, case_id: str) -> bytes:
    return hashlib.sha256(f"{seed}\0{case_id}".encode("utf-8", "surrogatepass")).digest()


def _count_strata(cases: Iterable[Case]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for case in cases:
        s = stratum(case)
        counts[s] = counts.get(s, 0) + 1
    return dict(sorted(counts.items()))


def _digest(ids: Iterable[str]) -> str:
    return hashlib.sha256(json.dumps(list(ids)).encode()).hexdigest()
