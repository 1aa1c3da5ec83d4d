"""Settings of the ``routing`` evaluator."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RoutingSettings(BaseModel):
    """Settings of the ``routing`` evaluator."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    ece_bins: int = Field(default=10, ge=1, le=1000)
    """Number of equal-width confidence bins of the expected calibration error (report
    section, named ``ece@<bins>bins``)."""

    fallback_routes: list[str] = Field(default_factory=list)
    """Routes that mean "I don't know" (e.g. a generic answer); choosing only these counts as
    an abstention, like choosing no route."""

    brier: Literal["auto", "scores", "confidence"] = "auto"
    """Which forecast ``brier`` scores: ``scores`` (per-route probabilities), ``confidence``
    (the chosen set's confidence against exact match), or ``auto``: scores when the trace has
    them, else the confidence."""
