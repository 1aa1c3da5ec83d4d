"""Measure names: trec_eval's where trec_eval has the measure, documented names for the rest.

A measure is a family and, for most families, a cutoff: ``P_5`` is precision at 5. Families
are also accepted bare (``P``: trec_eval's default cutoffs) or in trec_eval's parameter form
(``P.5,10``). Reports of the ``ranking`` evaluator use their own names (``precision@5``);
:data:`REPORT_NAMES` maps the two.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TREC_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
"""trec_eval's default cutoffs for P, recall, map_cut and ndcg_cut."""

SUCCESS_CUTOFFS = (1, 5, 10)
"""trec_eval's default cutoffs for success."""

CUT_FAMILIES: dict[str, tuple[int, ...]] = {
    # trec_eval's own
    "P": TREC_CUTOFFS,
    "recall": TREC_CUTOFFS,
    "map_cut": TREC_CUTOFFS,
    "ndcg_cut": TREC_CUTOFFS,
    "success": SUCCESS_CUTOFFS,
    # ours (trec_eval has no such measure)
    "F1": TREC_CUTOFFS,
    "hit": SUCCESS_CUTOFFS,
    "recip_rank_cut": TREC_CUTOFFS,
    "ndcg_exp2_cut": TREC_CUTOFFS,
    "dcg_cut": TREC_CUTOFFS,
    "dcg_exp2_cut": TREC_CUTOFFS,
    "context_precision": TREC_CUTOFFS,
}
"""Families that take a cutoff, with the cutoffs a bare family name expands to."""

PLAIN_FAMILIES = ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "Rprec", "recip_rank")
"""Families without a cutoff."""

SUMMED = frozenset({"num_q", "num_ret", "num_rel", "num_rel_ret"})
"""Counts: their summary over queries is the sum (as trec_eval prints it), not the mean."""

DEFAULT_MEASURES = ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "Rprec",
                    "recip_rank", "P", "recall", "ndcg_cut")
"""What ``evalharness trec`` prints without ``-m``."""

_CUT = re.compile(r"^(?P<family>[A-Za-z0-9_]+?)_(?P<k>\d+)$")


@dataclass(frozen=True)
class Measure:
    """One measure: its name, family and cutoff (``None`` for families without one)."""

    name: str
    family: str
    k: int | None = None


def parse_measures(names) -> list[Measure]:
    """Expand measure names into :class:`Measure` objects, in order, without duplicates.

    Raises ``ValueError`` naming an unknown measure and listing the known ones.

    >>> [m.name for m in parse_measures(["map", "P.5,10", "ndcg_cut_3", "success", "P_5"])]
    ['map', 'P_5', 'P_10', 'ndcg_cut_3', 'success_1', 'success_5', 'success_10']
    >>> parse_measures(["hit_10"])[0]
    Measure(name='hit_10', family='hit', k=10)
    """
    if isinstance(names, str):
        names = [names]
    out: dict[str, Measure] = {}
    for raw in names:
        for m in _expand(str(raw).strip()):
            out.setdefault(m.name, m)
    return list(out.values())


def _expand(name: str) -> list[Measure]:
    if name in PLAIN_FAMILIES:
        return [Measure(name, name)]
    if name == "all":
        return [m for f in (*PLAIN_FAMILIES, *CUT_FAMILIES) for m in _expand(f)]
    if name in CUT_FAMILIES:
        return [Measure(f"{name}_{k}", name, k) for k in CUT_FAMILIES[name]]
    if "." in name:
        family, _, params = name.partition(".")
        if family in CUT_FAMILIES:
            try:
                ks = [int(p) for p in params.split(",") if p.strip()]
            except ValueError:
                ks = []
            if ks and all(k >= 1 for k in ks):
                return [Measure(f"{family}_{k}", family, k) for k in ks]
            raise ValueError(f"measure {name!r}: cutoffs must be positive integers, e.g. "
                             f"{family}.5,10")
    match = _CUT.match(name)
    if match and match["family"] in CUT_FAMILIES:
        k = int(match["k"])
        if k < 1:
            raise ValueError(f"measure {name!r}: the cutoff must be at least 1")
        return [Measure(f"{match['family']}_{k}", match["family"], k)]
    raise ValueError(f"unknown measure {name!r}; known: {', '.join(PLAIN_FAMILIES)}, "
                     f"{', '.join(f'{f}_K' for f in CUT_FAMILIES)} (a bare family name such "
                     "as `P` gives trec_eval's default cutoffs; `P.5,10` picks them; `all`)")


# -- the names the `ranking` evaluator reports -----------------------------------------------

FAMILIES = ("precision", "recall", "f1", "hit_rate", "mrr", "mrr@k", "map", "map@k",
            "r_precision", "ndcg", "dcg")
"""Measure families of the ``ranking`` evaluator's ``measures`` setting, in report order."""

REPORT_NAMES: dict[str, tuple[str, str]] = {
    # report family: (report name pattern, kernel family)
    "precision": ("precision@{k}", "P"),
    "recall": ("recall@{k}", "recall"),
    "f1": ("f1@{k}", "F1"),
    "hit_rate": ("hit_rate@{k}", "success"),
    "mrr": ("mrr", "recip_rank"),
    "mrr@k": ("mrr@{k}", "recip_rank_cut"),
    "map": ("map", "map"),
    "map@k": ("map@{k}", "map_cut"),
    "r_precision": ("r_precision", "Rprec"),
    "ndcg": ("ndcg@{k}", "ndcg_cut"),
    "dcg": ("dcg@{k}", "dcg_cut"),
}
"""Report family -> (metric name, with ``{k}`` for the cutoff; kernel family for linear gain).
``ndcg`` and ``dcg`` use the ``_exp2`` kernel family when the gain is ``exp2``."""


def report_measures(families, ks, gain: str) -> list[tuple[str, Measure]]:
    """``(report name, kernel measure)`` pairs for a ``ranking`` evaluator's settings.

    >>> [(r, m.name) for r, m in report_measures(["mrr", "ndcg", "recall"], [10, 3], "exp2")]
    [('recall@3', 'recall_3'), ('recall@10', 'recall_10'), ('mrr', 'recip_rank'), \
('ndcg@3', 'ndcg_exp2_cut_3'), ('ndcg@10', 'ndcg_exp2_cut_10')]
    """
    chosen = set(families)
    out = []
    for family in FAMILIES:
        if family not in chosen:
            continue
        pattern, kernel = REPORT_NAMES[family]
        if gain == "exp2" and family in ("ndcg", "dcg"):
            kernel = kernel.replace("_cut", "_exp2_cut")
        if "{k}" in pattern:
            out += [(pattern.format(k=k), Measure(f"{kernel}_{k}", kernel, k))
                    for k in sorted(set(ks))]
        else:
            out.append((pattern, Measure(kernel, kernel)))
    return out
