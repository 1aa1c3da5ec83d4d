"""The run sliced by case tag (``Case.tags``): per tag, the cases, each component's verdict
pass rate and metric means, and the end-to-end pass rate, with seeded bootstrap 95% CIs; and
the pseudo-slice pair synthetic (tagged ``synthetic``) vs hand-written (not). See
docs/slices.md.

Gathered in the report's one pass over the results (:class:`SliceTally`: per case its tags'
positions, its verdicts as one byte each and one byte per metric saying whether it has a
value; the values themselves are those the report's metric tallies keep anyway), then
computed per slice with numpy: one set of bootstrap resamples per slice serves every
statistic of it (:func:`evalharness.stats.bootstrap_sums`).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence

import numpy as np

from evalharness.models import (
    CaseResult,
    Slice,
    SliceComponent,
    SliceMetric,
    Slices,
    SliceVerdicts,
)
from evalharness.stats import bootstrap_sums, percentile_ci, seed_for

MIN_CASES = 5
"""A tag is sliced when at least this many cases of the run carry it; a smaller slice's
intervals would span most of 0–100%. Smaller tags are listed with their count only."""

MAX_TAGS = 50
"""At most this many tags are sliced, the most frequent (ties by tag): a run of 10,000 cases
may carry hundreds of tags, and each slice holds every per-case metric of every component."""

MAX_LISTED = 200
"""Tags listed with their count only (below :data:`MIN_CASES`, or beyond :data:`MAX_TAGS`):
at most this many, the most frequent; the rest are only counted (``Slices.unlisted``)."""

SYNTHETIC_TAG = "synthetic"
"""Cases carrying this tag form the ``synthetic`` pseudo-slice, the others ``hand-written``."""

HAND_WRITTEN = "hand-written"
"""The name of the pseudo-slice of the cases not tagged :data:`SYNTHETIC_TAG`."""

_STATUSES = ("pass", "fail", "not_applicable", "error")
_CODE = {s: i for i, s in enumerate(_STATUSES)}
_NONE = 255  # no verdict for this case


class SliceTally:
    """What the slices need, case by case (cases in case order, as the report reads them):
    per tag the positions of its cases; per case whether it is synthetic, one byte per
    verdict (each judged component, then end to end) and one byte per per-case metric
    (``columns``) saying whether it has a value. About 50 bytes a case for the shop's 42
    per-case metrics, plus 4 per tag a case carries.

    ``components``: the pipeline's, in order; ``judged``: those with a verdict criterion;
    ``columns``: (component, metric) of every per-case metric, in report order.
    """

    def __init__(self, components: Sequence[str], judged: Sequence[str],
                 columns: Sequence[tuple[str, str]]) -> None:
        self.components = list(components)
        self.judged = list(judged)
        self.columns = list(columns)
        self.by_component: dict[str, list[tuple[int, str]]] = {}
        for j, (component, metric) in enumerate(self.columns):
            self.by_component.setdefault(component, []).append((j, metric))
        self.n = 0
        self.members: dict[str, array] = {}
        self.synthetic = bytearray()
        self.verdicts = bytearray()
        self.present = bytearray()
        self.untagged = 0
        self._blank = bytes(len(self.columns))
        self.groups: array | None = None
        """With repeats: each result's case (from 0): a slice's intervals resample cases."""

    def add(self, r: CaseResult, group: int | None = None) -> None:
        """Count one case (``group``: its case, in a run with repeats)."""
        position = self.n
        self.n += 1
        if group is not None:
            if self.groups is None:
                self.groups = array("q")
            self.groups.append(group)
        tags = r.case.tags
        if not tags:
            self.untagged += 1
        for tag in dict.fromkeys(tags):
            members = self.members.get(tag)
            if members is None:
                members = self.members[tag] = array("i")
            members.append(position)
        self.synthetic.append(SYNTHETIC_TAG in tags)
        verdicts = r.verdicts
        for component in self.judged:
            v = verdicts.get(component)
            self.verdicts.append(_NONE if v is None else _CODE[v.status])
        e2e = r.end_to_end
        self.verdicts.append(_NONE if e2e is None else _CODE[e2e.status])
        row = bytearray(self._blank)
        for component, metrics in self.by_component.items():
            comp = r.components.get(component)
            if comp is None:
                continue
            values = comp.metrics
            for j, metric in metrics:
                value = values.get(metric)
                if value is not None and value.error is None:
                    row[j] = 1
        self.present += row

    def summary(self, values: Mapping[tuple[str, str], Sequence[float]]) -> Slices | None:
        """The slices of the cases added; ``values``: per column, its computed values in case
        order (one per case whose byte says it has one: the report's metric tallies). ``None``
        when no case has a tag."""
        if not self.members:
            return None
        n, width = self.n, len(self.judged) + 1
        verdicts = np.frombuffer(bytes(self.verdicts), dtype=np.uint8).reshape(n, width)
        present = np.frombuffer(bytes(self.present), dtype=np.uint8).reshape(
            n, len(self.columns)).astype(bool)
        aligned = np.zeros(present.shape)
        for j, column in enumerate(self.columns):
            found = np.asarray(values.get(column, ()), dtype=float)
            if found.size == present[:, j].sum():
                aligned[present[:, j], j] = found
            else:  # never expected: the tallies saw other cases; leave the metric out
                present[:, j] = False
        frame = _Frame(self, verdicts, present, aligned)

        counts = sorted(((self.cases_of(m), tag) for tag, m in self.members.items()),
                        key=lambda x: (-x[0], x[1]))
        big = [(k, tag) for k, tag in counts if k >= MIN_CASES]
        chosen, over = big[:MAX_TAGS], big[MAX_TAGS:]
        small = [(k, tag) for k, tag in counts if k < MIN_CASES]
        listed = [*over, *small][:MAX_LISTED]
        over_listed = {tag: k for k, tag in listed if k >= MIN_CASES}
        small_listed = {tag: k for k, tag in listed if k < MIN_CASES}
        tags = [frame.slice(tag, np.frombuffer(self.members[tag], dtype=np.int32))
                for _, tag in chosen]
        origin = None
        synthetic = np.frombuffer(bytes(self.synthetic), dtype=np.uint8).astype(bool)
        if 0 < int(synthetic.sum()) < n:
            positions = np.arange(n, dtype=np.int32)
            origin = [frame.slice(HAND_WRITTEN, positions[~synthetic], pseudo=True),
                      frame.slice(SYNTHETIC_TAG, positions[synthetic], pseudo=True)]
        return Slices(min_cases=MIN_CASES, max_tags=MAX_TAGS, tags=tags, origin=origin,
                      small=small_listed, beyond_cap=over_listed,
                      unlisted=len(counts) - len(chosen) - len(listed),
                      untagged=self.untagged)


    def cases_of(self, positions: Sequence[int]) -> int:
        """How many cases the results at ``positions`` are (with repeats, a case's results
        count once)."""
        if self.groups is None:
            return len(positions)
        groups = np.frombuffer(self.groups, dtype=np.int64)[np.asarray(positions, dtype=np.intp)]
        return int(np.unique(groups).size)


class _Frame:
    """The run's per-case arrays, and how one slice is computed from them."""

    def __init__(self, tally: SliceTally, verdicts: np.ndarray, present: np.ndarray,
                 aligned: np.ndarray) -> None:
        self.tally = tally
        self.verdicts = verdicts
        self.present = present
        self.aligned = aligned

    def slice(self, name: str, idx: np.ndarray, *, pseudo: bool = False) -> Slice:
        """The slice of the cases at positions ``idx``."""
        tally = self.tally
        codes = self.verdicts[idx]
        present = self.present[idx]
        has = present.sum(axis=0)
        used = np.flatnonzero(has)
        values = self.aligned[idx][:, used]
        # columns summed per resample: per verdict its passes and decided cases, per metric
        # the sum of its values and its count (values are 0 where there is none)
        passed = (codes == _CODE["pass"]).astype(float)
        decided = (codes <= _CODE["fail"]).astype(float)
        rows = np.hstack([passed, decided, values, present[:, used].astype(float)])
        if tally.groups is not None:  # repeats: a case's results summed, cases resampled
            groups = np.frombuffer(tally.groups, dtype=np.int64)[idx]
            starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
            rows = np.add.reduceat(rows, starts, axis=0)
        width = codes.shape[1]
        # the ratios: passes / decided per verdict, then sum / count per metric
        nums = np.r_[np.arange(width), 2 * width + np.arange(used.size)]
        dens = np.r_[width + np.arange(width), 2 * width + used.size + np.arange(used.size)]
        cis: list[list[float] | None] = [None] * nums.size
        if rows.shape[0] >= 2:
            # identical columns (all-ones counts, metrics of one evaluator present together)
            # are summed once and each distinct ratio is bootstrapped once: the draws depend
            # on the number of cases alone, so the intervals are the same
            keep, back = _distinct(rows)
            distinct = rows[:, keep]
            boot = bootstrap_sums(distinct, seed=seed_for(
                "slice", "origin" if pseudo else "tag", name))
            pairs: dict[tuple[int, int], int] = {}
            which = [pairs.setdefault((back[a], back[b]), len(pairs))
                     for a, b in zip(nums, dens, strict=True)]
            pn, pd = (np.array(x, dtype=np.intp) for x in zip(*pairs, strict=True))
            found = _intervals(boot, pn, pd, distinct.sum(axis=0)[pd])
            mask = present[:, used]
            low = np.r_[np.zeros(width), np.where(mask, values, np.inf).min(axis=0)]
            high = np.r_[np.ones(width), np.where(mask, values, -np.inf).max(axis=0)]
            cis = [_within(found[w], low[k], high[k]) for k, w in enumerate(which)]

        def verdicts(q: int) -> SliceVerdicts | None:
            column = codes[:, q]
            if (column == _NONE).all():
                return None
            counts = [int((column == i).sum()) for i in range(len(_STATUSES))]
            ok, bad, na, err = counts
            return SliceVerdicts(passed=ok, failed=bad, not_applicable=na, errors=err,
                                 pass_rate=ok / (ok + bad) if ok + bad else None,
                                 ci95=cis[q])

        sums = values.sum(axis=0)
        metrics: dict[str, dict[str, SliceMetric]] = {c: {} for c in tally.components}
        for k, j in enumerate(used):
            component, metric = tally.columns[j]
            count = int(has[j])
            metrics[component][metric] = SliceMetric(
                mean=float(sums[k]) / count, ci95=cis[width + k], n=count)
        judged = {c: q for q, c in enumerate(tally.judged)}
        components = {
            c: SliceComponent(verdicts=verdicts(judged[c]) if c in judged else None,
                              metrics=metrics[c])
            for c in tally.components}
        return Slice(name=name, cases=tally.cases_of(idx), end_to_end=verdicts(width - 1),
                     components=components)


def _distinct(rows: np.ndarray) -> tuple[list[int], list[int]]:
    """The first of each group of identical columns of ``rows``, and for every column the
    position of its group among them.

    >>> _distinct(np.array([[1.0, 0.0, 1.0], [1.0, 2.0, 1.0]]))
    ([0, 1], [0, 1, 0])
    """
    seen: dict[bytes, int] = {}
    keep: list[int] = []
    back: list[int] = []
    for j, column in enumerate(np.ascontiguousarray(rows.T)):
        k = seen.setdefault(column.tobytes(), len(keep))
        if k == len(keep):
            keep.append(j)
        back.append(k)
    return keep, back


def _within(ci: list[float] | None, low: float, high: float) -> list[float] | None:
    """``ci`` kept within ``low``–``high``: the range of the values, which a mean of resampled
    values never leaves but a ratio of float sums may, by a rounding error.

    >>> _within([0.8993, 0.8993000000000001], 0.8993, 0.8993), _within(None, 0.0, 1.0)
    ([0.8993, 0.8993], None)
    """
    if ci is None:
        return None
    low, high = float(low), float(high)
    return [min(max(ci[0], low), high), max(min(ci[1], high), low)]


def _intervals(boot: np.ndarray, nums: np.ndarray, dens: np.ndarray, observed: np.ndarray
               ) -> list[list[float] | None]:
    """The 95% percentile interval of each ratio ``boot[:, num] / boot[:, den]``; ``None``
    where the observed denominator (cases with a verdict that passes or fails, or with a
    value) is below 2. Resamples where a ratio is undefined (0 / 0) are left out
    (:func:`percentile_ci`); the columns where none is are done in one call.

    >>> boot = np.array([[1.0, 2.0], [2.0, 2.0], [0.0, 0.0], [1.0, 1.0]])  # 4 resamples
    >>> _intervals(boot, np.array([0]), np.array([1]), np.array([2.0]))  # 0/0 left out
    [[0.525, 1.0]]
    >>> _intervals(boot, np.array([0]), np.array([1]), np.array([1.0]))  # one case only
    [None]
    """
    out: list[list[float] | None] = [None] * nums.size
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = boot[:, nums] / boot[:, dens]
    wanted = observed >= 2
    undefined = np.isnan(ratios).any(axis=0)
    plain = np.flatnonzero(wanted & ~undefined)
    if plain.size:
        lo, hi = np.quantile(ratios[:, plain], [0.025, 0.975], axis=0)
        for k, a, b in zip(plain, lo, hi, strict=True):
            out[k] = [float(a), float(b)]
    for k in np.flatnonzero(wanted & undefined):
        found = percentile_ci(ratios[:, k])
        out[k] = None if found is None else [found[0], found[1]]
    return out


def weakest_first(slices: Sequence[Slice]) -> list[Slice]:
    """Slices by end-to-end pass rate, lowest first (then by their lowest component pass
    rate, then the larger slice, then the name); slices without a pass rate last.

    >>> def s(name, rate, cases=10):
    ...     e2e = SliceVerdicts(passed=0, failed=0, pass_rate=rate)
    ...     return Slice(name=name, cases=cases, end_to_end=e2e)
    >>> [x.name for x in weakest_first([s("a", 0.5), s("b", None), s("c", 0.2), s("d", 0.5, 20)])]
    ['c', 'd', 'a', 'b']
    """
    def key(s: Slice) -> tuple:
        e2e = s.end_to_end.pass_rate if s.end_to_end is not None else None
        rates = [c.verdicts.pass_rate for c in s.components.values()
                 if c.verdicts is not None and c.verdicts.pass_rate is not None]
        low = min(rates) if rates else None
        return (e2e is None, e2e or 0.0, low is None, low or 0.0, -s.cases, s.name)

    return sorted(slices, key=key)
