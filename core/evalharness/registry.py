"""What plugins hand to the ``register`` callbacks, and the registry that collects it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from evalharness.declarations import (
    Init,
    Metric,
    call_with,
    check_arguments,
    declarations,
    resolve,
    undeclared,
)
from evalharness.errors import PluginError


class NoSettings(BaseModel):
    """Settings model of an evaluator that takes no settings."""

    model_config = ConfigDict(extra="forbid")


EVALUATE_ARGUMENTS = ("batch", "settings", "context", "component", "evaluator")
"""What an evaluator's ``evaluate`` may take (it names the ones it wants)."""

RUN_ARGUMENTS = ("results", "settings", "context", "component", "evaluator")
"""What an evaluator's ``evaluate_run`` may take."""

ORACLE_ARGUMENTS = ("case", "context", "component", "kind")
"""What an oracle's ``output`` may take."""


ANY_KIND = "*"
"""The ``component`` of an evaluator that works on every component kind, those a plugin adds
included (the core's ``judged``)."""


@dataclass(frozen=True)
class Evaluator:
    """An evaluator: a set of declared metrics for one component kind, and the work that
    computes them.

    ``metrics`` declares the per-case metrics (:class:`evalharness.Metric`; a plain string is
    a metric named without a declaration). A pattern such as ``Metric("recall@{k}")`` needs
    ``names``, a function of the settings returning the concrete names (``recall@5``), each of
    which must match a declaration. The core validates gates and verdicts against them before
    anything runs, and rejects a result naming other metrics.

    ``evaluate`` computes them for a batch: it is called with the arguments it names of
    ``batch`` (``(case, step)`` pairs), ``settings``, ``context``, ``component`` and
    ``evaluator`` (this evaluator's name), and returns one ``{metric: MetricValue}`` per batch
    item, in order.

    ``run_metrics`` (declared likewise, ``run_names`` for patterns) are the *run-level*
    metrics, one value for the whole run (a macro-F1, an expected calibration error: numbers
    that are not means of per-case values); ``evaluate_run`` computes them after every case is
    evaluated, called with the arguments it names of ``results``, ``settings``, ``context``,
    ``component`` and ``evaluator``. They can be gated, never used as verdict criteria.

    Without ``evaluate`` the core calls the plugin's ``evaluate_<kind>`` hook, and without
    ``evaluate_run`` its ``evaluate_run`` hook: the way of evalharness 0.1, deprecated (see
    docs/writing-a-plugin.md, "Migrating from the evaluate hooks").
    """

    name: str
    component: str
    metrics: Sequence[Metric | str] | Callable[[Any], list[str]]
    settings: type[BaseModel] = NoSettings
    needs_judge: bool = False
    needs_database: bool = False
    description: str = ""
    run_metrics: Sequence[Metric | str] | Callable[[Any], list[str]] = ()
    evaluate: Callable[..., Any] | None = None
    evaluate_run: Callable[..., Any] | None = None
    names: Callable[[Any], list[str]] | None = None
    run_names: Callable[[Any], list[str]] | None = None
    init: Init | None = None
    """How ``evalharness init`` lists it (``None``: in a comment only)."""
    declare: Callable[[Any], Sequence[Metric]] | None = None
    """Declarations that depend on the settings, ``declare(settings) -> [Metric]``: a metric
    the scenario names and judges as it says (the core's ``judged`` evaluator: its name,
    scale and threshold are settings). Its metric names are those it declares."""
    needs_llm: bool = False
    """It asks the judge what only a language model can answer (a criterion written in
    words): a scenario whose judge backend is not a language model (the offline heuristic)
    is refused before anything runs."""

    def declared_with(self, settings: BaseModel, scope: str = "case") -> list[Metric]:
        """Its declarations for these settings: the static ones, and ``declare``'s."""
        found = self.declared(scope)
        if self.declare is not None and scope == "case":
            found = [*found, *declarations(list(self.declare(settings)), scope)]
        return found

    def metric_names(self, settings: BaseModel) -> list[str]:
        """The metric names this evaluator produces with these settings."""
        return self._names(self.metrics, self.names, settings)

    def run_metric_names(self, settings: BaseModel) -> list[str]:
        """The run-level metric names it computes with these settings."""
        return self._names(self.run_metrics, self.run_names, settings)

    def declared(self, scope: str = "case") -> list[Metric]:
        """Its declarations (``scope`` ``run``: of its run-level metrics)."""
        items = self.metrics if scope == "case" else self.run_metrics
        return [] if callable(items) else declarations(items, scope)

    def declaration(self, name: str, scope: str = "case") -> Metric:
        """The declaration of one concrete metric it produces (undeclared: a bare one)."""
        return resolve(self.declared(scope), name) or undeclared(name, scope)

    @staticmethod
    def _names(items: Any, names: Callable[[Any], list[str]] | None, settings: BaseModel
               ) -> list[str]:
        if callable(items):  # evalharness 0.1: a function of the settings, names only
            return list(items(settings))
        if names is not None:
            return list(names(settings))
        return [m.name for m in declarations(items)]

    def metric_names_with(self, settings: BaseModel) -> list[str]:
        """:meth:`metric_names`, and the names ``declare`` gives these settings."""
        found = self.metric_names(settings)
        if self.declare is not None:
            found += [m.name for m in self.declare(settings) if m.name not in found]
        return found

    def check(self, plugin: str) -> None:
        """A :class:`PluginError` naming the plugin when the declarations do not hold
        together (called when the plugin registers it)."""
        label = f"plugin {plugin!r} registers evaluator {self.name!r}"
        for scope, items, names in (("case", self.metrics, self.names),
                                    ("run", self.run_metrics, self.run_names)):
            if callable(items):
                continue
            try:
                declared = declarations(items, scope)
            except PluginError as exc:
                raise PluginError(f"{label}: {exc}") from None
            patterns = [m.name for m in declared if m.is_pattern]
            if patterns and names is None:
                field_ = "names" if scope == "case" else "run_names"
                raise PluginError(f"{label} with the metric pattern {patterns[0]!r} but no "
                                  f"`{field_}`: give a function of the settings that returns "
                                  "the concrete names")
            seen = [m.name for m in declared]
            dup = next((n for n in seen if seen.count(n) > 1), None)
            if dup is not None:
                raise PluginError(f"{label} declaring metric {dup!r} twice")
        if self.evaluate is not None:
            check_arguments(self.evaluate, EVALUATE_ARGUMENTS, f"{label}: its `evaluate`")
        if self.evaluate_run is not None:
            check_arguments(self.evaluate_run, RUN_ARGUMENTS, f"{label}: its `evaluate_run`")


@dataclass(frozen=True)
class ComponentKind:
    """A kind of pipeline component: its trace step model (what a trace records for it).

    Its evaluators carry their work (``Evaluator.evaluate``), so a kind needs no hook. ``hook``
    and ``hookspecs`` name an ``evaluate_<kind>`` hook and its specification for plugins
    written for evalharness 0.1, whose evaluators have no ``evaluate`` (deprecated).
    """

    name: str
    step: type[BaseModel]
    hook: str | None = None
    hookspecs: Any = None
    description: str = ""


@dataclass(frozen=True)
class Oracle:
    """What a component of one kind would output if it were perfect, built from the gold
    (for oracle headroom and the gold check; docs/bottleneck.md).

    ``output`` is called with the arguments it names of ``case``, ``context``, ``component``
    and ``kind``, and returns fields of the kind's step model as the system should take them
    (``{"routes": ["sql"]}``); it raises :class:`evalharness.errors.NoOracle` with the reason
    when the case lacks the gold it needs. One plugin offers the oracle of a kind: two are an
    error naming both.
    """

    kind: str
    output: Callable[..., dict[str, Any]]
    description: str = ""


@dataclass(frozen=True)
class JudgeBackend:
    """A judge backend: ``factory(config)`` builds a judge from the scenario's ``judge:`` block."""

    name: str
    factory: Callable[[Any], Any]
    description: str = ""
    offline: bool = False
    llm: bool = True
    """Whether its judge is a language model (``False`` for the offline heuristic): an
    evaluator that ``needs_llm`` is refused with a backend that is not."""


@dataclass(frozen=True)
class Executor:
    """Where a run's cases execute: ``factory(address)`` returns the executor (an object with
    ``run(spec, work, emit, stopped)`` or ``async arun(...)``, and ``close()``, see
    :mod:`evalharness.executors`); ``None`` means the local one (this process)."""

    name: str
    factory: Callable[[str | None], Any]
    description: str = ""


@dataclass(frozen=True)
class AlertSender:
    """A way to send the monitor's drift alarms (docs/monitor.md, "Alerts"):
    ``send(alert, settings)`` for each alarm that starts firing or resolves
    (:class:`evalharness.monitor.alerts.Alert`); ``settings`` validates the sender's entry
    under MONITOR.yaml's ``alerts:``. Raising is a failure to send, reported as a warning;
    the monitor goes on."""

    name: str
    send: Callable[[Any, Any], Any]
    settings: type[BaseModel] = NoSettings
    description: str = ""


@dataclass(frozen=True)
class ReportSection:
    """A block a plugin adds to the report: markdown for ``report.md``, data for JSON.

    ``view`` says how report.html draws it: ``""`` renders its Markdown; ``"routing"`` draws
    a classification view from ``data`` (``accuracy``, ``jaccard``, ``macro_f1``,
    ``micro_f1``, ``per_route`` {class: {precision, recall, f1, support}},
    ``confusion_matrix``, ``calibration`` {metric, reliability bins}, ``abstention``; the
    router plugin's section, docs/metrics/router.md), under its own tab.
    """

    title: str
    markdown: str
    data: dict[str, Any] = field(default_factory=dict)
    view: str = ""


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
    alert_senders: dict[str, Registered] = field(default_factory=dict)
    oracles: dict[str, Registered] = field(default_factory=dict)

    def add(self, table: str, key: Any, plugin: str, item: Any) -> None:
        store = getattr(self, table)
        if key in store:
            other = store[key].plugin
            if table == "oracles":
                raise PluginError(
                    f"plugins {other!r} and {plugin!r} both offer the oracle of component kind "
                    f"{key!r}; a kind has one oracle: leave one of them out with "
                    "EVALHARNESS_LOAD_PLUGINS, or drop its `register_oracles`")
            raise PluginError(
                f"plugin {plugin!r} registers {table[:-1].replace('_', ' ')} {key!r}, which "
                f"plugin {other!r} already registered; rename one of them, or limit which "
                "plugins load with EVALHARNESS_LOAD_PLUGINS"
            )
        store[key] = Registered(plugin, item)

    def evaluator(self, component_kind: str, name: str) -> Registered | None:
        """The evaluator ``name`` of a kind: registered for that kind, else for every kind
        (``component="*"``)."""
        return self.evaluators.get((component_kind, name)) or self.evaluators.get(
            (ANY_KIND, name))

    def oracle(self, kind: str) -> Registered | None:
        """The oracle of a component kind, with the plugin that offers it."""
        return self.oracles.get(kind)

    def evaluators_for(self, component_kind: str) -> list[str]:
        return sorted({name for kind, name in self.evaluators
                       if kind in (component_kind, ANY_KIND)})


def run_evaluator(register_evaluators: Callable[[Callable[[Evaluator], None]], None], name: str,
                  batch: Sequence[tuple[Any, Any]],
                  settings: BaseModel | dict[str, Any] | None = None,
                  context: Any = None) -> Any:
    """Run a plugin's evaluator by name on a batch, outside a run (notebooks, tests): the
    plugin's ``register_evaluators`` says what it has. ``None`` when it has no such evaluator;
    ``settings`` as the evaluator's settings model or a dict of them (as a scenario writes
    them, validated the same way); ``context`` defaults to an empty
    :class:`evalharness.context.EvalContext` (no judge, no database, no corpus).
    """
    found: list[Evaluator] = []
    register_evaluators(found.append)
    chosen = next((e for e in found if e.name == name), None)
    if chosen is None:
        return None
    if chosen.evaluate is None:
        raise PluginError(f"evaluator {name!r} has no `evaluate` to run")
    if context is None:
        from evalharness.context import EvalContext

        context = EvalContext()
    if isinstance(settings, dict):
        settings = chosen.settings.model_validate(settings)
    return call_with(chosen.evaluate, batch=batch, context=context, component=chosen.component,
                     settings=settings if settings is not None else chosen.settings(),
                     evaluator=name)
