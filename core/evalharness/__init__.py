"""evalharness: evaluate a multi-component RAG application component by component."""

from typing import TYPE_CHECKING

from evalharness.declarations import Init, LabelGold, Metric
from evalharness.hookspecs import hookimpl
from evalharness.models import (
    Case,
    CaseResult,
    GeneratorStep,
    Gold,
    MetricValue,
    Price,
    Report,
    RetrieverStep,
    RouterStep,
    Step,
    Text2SQLStep,
    Trace,
    Usage,
)
from evalharness.registry import ComponentKind, Evaluator, Oracle
from evalharness.version import __version__

if TYPE_CHECKING:  # the lazily imported API, for type checkers and editors
    from evalharness.api import RunFolder, RunInterrupted, compare_runs, load_run, run_scenario
    from evalharness.notebook import evaluate

_API = {"run_scenario": "api", "load_run": "api", "compare_runs": "api", "RunFolder": "api",
        "RunInterrupted": "api", "evaluate": "notebook"}
"""The lazily imported API: name -> its module under ``evalharness``."""


def __getattr__(name: str):
    """The Python API (docs/api.md), imported on first use: ``import evalharness`` stays
    light for plugins, which import it for ``hookimpl`` and the models."""
    if name in _API:
        import importlib

        return getattr(importlib.import_module(f"evalharness.{_API[name]}"), name)
    raise AttributeError(f"module 'evalharness' has no attribute {name!r}")


__all__ = [
    "Case",
    "CaseResult",
    "ComponentKind",
    "Evaluator",
    "Init",
    "LabelGold",
    "Metric",
    "Oracle",
    "GeneratorStep",
    "Gold",
    "MetricValue",
    "Price",
    "Report",
    "RunFolder",
    "RunInterrupted",
    "RetrieverStep",
    "RouterStep",
    "Step",
    "Text2SQLStep",
    "Trace",
    "Usage",
    "__version__",
    "compare_runs",
    "evaluate",
    "hookimpl",
    "load_run",
    "run_scenario",
]
