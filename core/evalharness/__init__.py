"""evalharness: evaluate a multi-component RAG application component by component."""

from evalharness.hookspecs import hookimpl
from evalharness.models import (
    Case,
    CaseResult,
    GeneratorStep,
    Gold,
    MetricValue,
    Report,
    RetrieverStep,
    RouterStep,
    Step,
    Text2SQLStep,
    Trace,
    Usage,
)

__version__ = "0.1.0"

__all__ = [
    "Case",
    "CaseResult",
    "GeneratorStep",
    "Gold",
    "MetricValue",
    "Report",
    "RetrieverStep",
    "RouterStep",
    "Step",
    "Text2SQLStep",
    "Trace",
    "Usage",
    "__version__",
    "hookimpl",
]
