"""Names the scenario checks before anything runs and the review modules share: what an
``agreement.COMPONENT.METRIC.STAT`` gate may name. No imports, so the scenario loader can use
it without loading the review machinery."""

from __future__ import annotations

CLAIM = "claim_support"
"""The metric of a claim target (under faithfulness)."""

CHUNK = "chunk_relevance"
"""The metric of a retrieved chunk's target."""

STATS = ("n", "auc", "kappa", "balanced_accuracy", "spearman", "kendall", "weighted_kappa",
         "accuracy", "inter_kappa")
"""What a gate may name: ``agreement.COMPONENT.METRIC.STAT``."""


def split_gate_metric(text: str) -> tuple[str, str, str]:
    """``generator.faithfulness.kappa`` -> (component, metric, statistic).

    >>> split_gate_metric("generator.faithfulness.kappa")
    ('generator', 'faithfulness', 'kappa')
    """
    component, _, rest = text.partition(".")
    metric, _, stat = rest.rpartition(".")
    return component, metric, stat
