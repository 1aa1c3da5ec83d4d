"""What plugins hand to the ``register`` callbacks, and the registry that collects it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from evalharness.errors import PluginError


class NoSettings(BaseModel):
    """Settings model of an evaluator that takes no settings."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Evaluator:
    """An evaluator: a named set of metrics for one component kind.

    ``metrics`` is the list of metric names it produces, or a function of its settings that
    returns them (for metrics whose name carries a cutoff, like ``recall@5``). The core uses it
    to validate gates before anything runs, and rejects a hook result naming other metrics.

    ``run_metrics`` names the *run-level* metrics it computes once over the whole run (a
    macro-F1, an expected calibration error: numbers that are not means of per-case values),
    likewise a list or a function of the settings; the core asks for them through the
    ``evaluate_run`` hook after every case is evaluated. They can be gated, never used as
    per-case verdict criteria.
    """

    name: str
    component: str
    metrics: list[str] | Callable[[Any], list[str]]
    settings: type[BaseModel] = NoSettings
    needs_judge: bool = False
    needs_database: bool = False
    description: str = ""
    run_metrics: list[str] | Callable[[Any], list[str]] = ()

    def metric_names(self, settings: BaseModel) -> list[str]:
        """The metric names this evaluator produces with these settings."""
        names = self.metrics(settings) if callable(self.metrics) else self.metrics
        return list(names)

    def run_metric_names(self, settings: BaseModel) -> list[str]:
        """The run-level metric names it computes with these settings."""
        names = self.run_metrics(settings) if callable(self.run_metrics) else self.run_metrics
        return list(names)


@dataclass(frozen=True)
class ComponentKind:
    """A kind of pipeline component: its trace step model and its evaluator hook.

    ``hookspecs`` is a class or module holding the hook's specification, for kinds added by
    plugins (the four built-in kinds' hooks are in :mod:`evalharness.hookspecs`).
    """

    name: str
    step: type[BaseModel]
    hook: str
    hookspecs: Any = None
    description: str = ""


@dataclass(frozen=True)
class JudgeBackend:
    """A judge backend: ``factory(config)`` builds a judge from the scenario's ``judge:`` block."""

    name: str
    factory: Callable[[Any], Any]
    description: str = ""
    offline: bool = False


@dataclass(frozen=True)
class Executor:
    """Where a run's cases execute: ``factory(address)`` returns the executor (an object with
    ``run(spec, work, emit, stopped)`` and ``close()``, see
    :mod:`evalharness.executors`), or ``None`` for the built-in in-process path."""

    name: str
    factory: Callable[[str | None], Any]
    description: str = ""


@dataclass(frozen=True)
class ReportSection:
    """A block a plugin adds to the report: markdown for ``report.md``, data for JSON."""

    title: str
    markdown: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Registered:
    """Something registered, with the plugin that registered it."""

    plugin: str
    item: Any


@dataclass
class Registry:
    """Everything the loaded plugins registered, keyed by name."""

    evaluators: dict[tuple[str, str], Registered] = field(default_factory=dict)
    component_kinds: dict[str, Registered] = field(default_factory=dict)
    judge_backends: dict[str, Registered] = field(default_factory=dict)
    executors: dict[str, Registered] = field(default_factory=dict)

    def add(self, table: str, key: Any, plugin: str, item: Any) -> None:
        store = getattr(self, table)
        if key in store:
            other = store[key].plugin
            raise PluginError(
                f"plugin {plugin!r} registers {table[:-1].replace('_', ' ')} {key!r}, which "
                f"plugin {other!r} already registered; rename one of them, or limit which "
                "plugins load with EVALHARNESS_LOAD_PLUGINS"
            )
        store[key] = Registered(plugin, item)

    def evaluator(self, component_kind: str, name: str) -> Registered | None:
        return self.evaluators.get((component_kind, name))

    def evaluators_for(self, component_kind: str) -> list[str]:
        return sorted(name for kind, name in self.evaluators if kind == component_kind)
