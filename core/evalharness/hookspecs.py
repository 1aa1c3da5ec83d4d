"""The hook specifications: every way a plugin can extend evalharness, one function each.

Implementations may accept fewer arguments than a spec declares (pluggy passes only the
arguments an implementation names). Hooks register things (evaluators with their declared
metrics and their work, component kinds, oracles, judge backends, executors, commands) or
add to a finished run (report sections). Evaluation itself is no hook: an evaluator carries
its work (``Evaluator.evaluate``), and the core calls it directly.

The ``evaluate_<kind>``, ``evaluate_run`` and ``oracle_output`` hooks are how evalharness
0.1 dispatched evaluation: they keep working for one release, with a deprecation warning
(docs/writing-a-plugin.md, "Migrating from the evaluate hooks").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import click
    from pydantic import BaseModel

    from evalharness.context import EvalContext
    from evalharness.models import (
        Case,
        CaseResult,
        GeneratorStep,
        MetricValue,
        Report,
        RetrieverStep,
        RouterStep,
        Text2SQLStep,
    )
    from evalharness.registry import (
        AlertSender,
        ComponentKind,
        Evaluator,
        Executor,
        JudgeBackend,
        Oracle,
        ReportSection,
    )

hookspec = pluggy.HookspecMarker("evalharness")
hookimpl = pluggy.HookimplMarker("evalharness")

MetricRows = list[dict[str, "MetricValue"]]
"""What an evaluator hook returns: one ``{metric name: MetricValue}`` per batch item, in order."""


# --------------------------------------------------------------------------------------------
# Registration: called once, right after the plugins are loaded.
# --------------------------------------------------------------------------------------------


@hookspec
def register_evaluators(register: Callable[[Evaluator], None]) -> None:
    """Declare the evaluators this plugin provides, with their metrics and their work.

    Called once per plugin manager, after loading, before any scenario is validated. Every
    implementation is called; each calls ``register`` once per evaluator. An evaluator declares
    each metric with :class:`evalharness.Metric` (range, direction, unit, default verdict,
    review question, what a label makes gold) and computes them with ``evaluate``, a function
    called with the arguments it names of ``batch``, ``settings``, ``context``, ``component``
    and ``evaluator``. The core reads nothing about a metric but its declaration.

    :param register: call it with an :class:`evalharness.Evaluator`.
    :returns: nothing.

    Example::

        def within_budget(batch, settings):
            return [{"within_budget": MetricValue.of((s.latency_ms or 0) <= settings.ms)}
                    for _, s in batch]

        @hookimpl
        def register_evaluators(register):
            register(Evaluator(
                name="latency_budget", component="retriever", settings=BudgetSettings,
                metrics=[Metric("within_budget", verdict=">= 1",
                                question="Did the retriever answer within its budget?")],
                evaluate=within_budget))
    """


@hookspec
def register_component_kinds(register: Callable[[ComponentKind], None]) -> None:
    """Declare component kinds beyond the four built-in ones (router, text2sql, retriever,
    generator), e.g. a reranker.

    Called once, before :func:`register_evaluators`. Every implementation is called. A kind
    names its step model (what a trace records for it, under ``trace.steps[<name>]``); its
    evaluators, with their declared metrics and default verdicts, say how its cases fail, and
    an :class:`evalharness.Oracle` (:func:`register_oracles`) what a perfect one outputs.

    :param register: call it with an :class:`evalharness.ComponentKind`.
    :returns: nothing.

    Example::

        @hookimpl
        def register_component_kinds(register):
            register(ComponentKind(name="reranker", step=RerankerStep,
                                   description="reorders the retrieved chunks"))
    """


@hookspec
def register_oracles(register: Callable[[Oracle], None]) -> None:
    """Declare what a perfect component of a kind outputs, built from a case's gold: the
    oracle that oracle headroom imposes on the component (docs/bottleneck.md); ``validate``
    also runs each case's gold SQL through text-to-SQL's oracle.

    Called once, after loading. Every implementation is called. Oracles are keyed by component
    kind: two plugins offering one for the same kind are an error naming both.

    :param register: call it with an :class:`evalharness.Oracle`, whose ``output`` is called
        with the arguments it names of ``case``, ``context``, ``component`` and ``kind``.
    :returns: nothing.

    Example::

        def perfect_reranker(case):
            if case.gold.relevant is None:
                raise NoOracle("the case has no relevance labels (gold.relevant)")
            return {"ids": sorted(case.gold.relevant, key=case.gold.relevant.get,
                                  reverse=True)}

        @hookimpl
        def register_oracles(register):
            register(Oracle(kind="reranker", output=perfect_reranker))
    """


@hookspec
def register_judge_backends(register: Callable[[JudgeBackend], None]) -> None:
    """Declare judge backends a scenario can select with ``judge: {backend: NAME}``.

    Called once, after loading. Every implementation is called.

    :param register: call it with an :class:`evalharness.registry.JudgeBackend`, whose
        ``factory(config)`` builds the judge from the scenario's ``judge:`` block.
    :returns: nothing.

    Example::

        @hookimpl
        def register_judge_backends(register):
            register(JudgeBackend(name="constant", factory=lambda config: ConstantJudge(config),
                                  description="always says yes; for tests"))
    """


@hookspec
def register_executors(register: Callable[[Executor], None]) -> None:
    """Declare executors a run can select with ``--executor NAME``: where its cases run.

    Called once, after loading. Every implementation is called. The core registers
    ``local`` (this process) and ``ray`` (a Ray cluster).

    :param register: call it with an :class:`evalharness.registry.Executor`, whose
        ``factory(address)`` builds the executor for ``--address`` (see
        :mod:`evalharness.executors` for what it must do).
    :returns: nothing.

    Example::

        @hookimpl
        def register_executors(register):
            register(Executor(name="dask", factory=lambda address: DaskExecutor(address),
                              description="a Dask cluster"))
    """


@hookspec
def register_alert_senders(register: Callable[[AlertSender], None]) -> None:
    """Declare ways to send the monitor's drift alarms: a pager, a chat, a ticket
    (docs/monitor.md, "Alerts").

    Called once, after loading. Every implementation is called. The core registers
    ``webhook`` (a JSON POST) this way. MONITOR.yaml's ``alerts:`` names senders and gives
    their settings; ``send(alert, settings)`` is called once when an alarm starts firing and
    once when it resolves.

    :param register: call it with an :class:`evalharness.registry.AlertSender`: its
        ``name``, ``send(alert, settings)`` (``alert`` an
        :class:`evalharness.monitor.alerts.Alert`; raising is a failure to send, a warning)
        and the pydantic model of its ``settings``.
    :returns: nothing.

    Example::

        class PagerSettings(BaseModel):
            service: str

        def page(alert, settings):
            if alert.state == "firing":
                pager.trigger(settings.service, alert.message)

        @hookimpl
        def register_alert_senders(register):
            register(AlertSender("pager", page, settings=PagerSettings))
    """


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``evalharness`` command line.

    Called once when the CLI starts, with the top-level click group. Every implementation is
    called.

    :param cli: the ``evalharness`` click group; decorate new commands with ``@cli.command()``.
    :returns: nothing.

    Example::

        @hookimpl
        def register_commands(cli):
            @cli.command()
            def hello():
                "Say hello."
                click.echo("hello")
    """


# --------------------------------------------------------------------------------------------
# Deprecated (evalharness 0.1): evaluation through hooks. Called once per batch of cases, for
# each configured evaluator that has no ``evaluate`` of its own, on the plugin that registered
# it; loading such a plugin warns. Give the evaluator ``evaluate=`` instead.
# --------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def evaluate_router(
    evaluator: str,
    batch: Sequence[tuple[Case, RouterStep]],
    settings: BaseModel,
    context: EvalContext,
) -> MetricRows | None:
    """Deprecated: give the evaluator ``evaluate=`` (:func:`register_evaluators`). Score the
    router's decisions for a batch of cases.

    Called during a run for each batch of cases whose trace has a router step, once per
    router evaluator configured in the scenario, on the plugin that registered that evaluator.
    A step that carries an ``error`` is never in a batch (of this hook or any other evaluator
    hook): the core records each of its metrics as an error with the step's reason.

    :param evaluator: name of the evaluator to run (as registered).
    :param batch: ``(case, step)`` pairs; ``case.gold.routes`` is the gold route set.
    :param settings: the evaluator's settings, an instance of its settings model.
    :param context: the run's :class:`evalharness.context.EvalContext` (judge, database,
        corpus, pipeline; ``budget_s``, the seconds the evaluator may spend per case).
    :returns: one ``{metric: MetricValue}`` per batch item, in batch order. First non-``None``
        result wins. Anything else — or an exception, or ``sys.exit()`` — is recorded as
        every declared metric's error for the batch, naming the plugin; the run goes on.

    Example::

        @hookimpl
        def evaluate_router(evaluator, batch):
            if evaluator == "abstention":
                return [{"abstained": MetricValue.of(not step.routes)} for case, step in batch]
    """


@hookspec(firstresult=True)
def evaluate_text2sql(
    evaluator: str,
    batch: Sequence[tuple[Case, Text2SQLStep]],
    settings: BaseModel,
    context: EvalContext,
) -> MetricRows | None:
    """Deprecated: give the evaluator ``evaluate=``. Score the text-to-SQL step's queries for a batch of cases.

    Called like :func:`evaluate_router`, for cases whose trace has a ``text2sql`` step.
    ``context.database`` is the scenario's database (``None`` if it has none).

    :param evaluator: name of the evaluator to run.
    :param batch: ``(case, step)`` pairs; ``case.gold.sql`` is the gold query.
    :param settings: the evaluator's settings.
    :param context: the run's context.
    :returns: one ``{metric: MetricValue}`` per batch item, in order.

    Example::

        @hookimpl
        def evaluate_text2sql(evaluator, batch):
            if evaluator == "has_limit":
                return [{"has_limit": MetricValue.of("limit" in (s.sql or "").lower())}
                        for _, s in batch]
    """


@hookspec(firstresult=True)
def evaluate_retriever(
    evaluator: str,
    batch: Sequence[tuple[Case, RetrieverStep]],
    settings: BaseModel,
    context: EvalContext,
) -> MetricRows | None:
    """Deprecated: give the evaluator ``evaluate=``. Score the retriever's ranked lists for a batch of cases.

    Called like :func:`evaluate_router`, for cases whose trace has a ``retriever`` step. The
    whole batch arrives at once so that ranking metrics can be vectorised.

    :param evaluator: name of the evaluator to run.
    :param batch: ``(case, step)`` pairs; ``case.gold.relevant`` maps chunk ids to grades.
    :param settings: the evaluator's settings.
    :param context: the run's context; ``context.corpus`` maps chunk ids to chunks.
    :returns: one ``{metric: MetricValue}`` per batch item, in order.

    Example::

        @hookimpl
        def evaluate_retriever(evaluator, batch, settings):
            if evaluator == "depth":
                return [{"depth": MetricValue.of(len(step.ids))} for _, step in batch]
    """


@hookspec(firstresult=True)
def evaluate_generator(
    evaluator: str,
    batch: Sequence[tuple[Case, GeneratorStep]],
    settings: BaseModel,
    context: EvalContext,
) -> MetricRows | None:
    """Deprecated: give the evaluator ``evaluate=``. Score the generator's answers for a batch of cases.

    Called like :func:`evaluate_router`, for cases whose trace has a ``generator`` step.
    ``context.judge`` is the scenario's judge, for evaluators that declared ``needs_judge``.

    :param evaluator: name of the evaluator to run.
    :param batch: ``(case, step)`` pairs; ``step.contexts`` is what the generator was given.
    :param settings: the evaluator's settings.
    :param context: the run's context.
    :returns: one ``{metric: MetricValue}`` per batch item, in order.

    Example::

        @hookimpl
        def evaluate_generator(evaluator, batch):
            if evaluator == "politeness":
                return [{"says_thanks": MetricValue.of("thank" in (s.answer or "").lower())}
                        for _, s in batch]
    """


@hookspec(firstresult=True)
def evaluate_run(
    evaluator: str,
    component: str,
    results: Sequence[CaseResult],
    settings: BaseModel,
    context: EvalContext,
) -> dict[str, MetricValue] | None:
    """Deprecated: give the evaluator ``evaluate_run=`` (:func:`register_evaluators`).
    Compute an evaluator's run-level metrics: one value for the whole run.

    Called once per run, after every case is evaluated (also when a ``--resume`` run
    finishes), for each configured evaluator that declared ``run_metrics``, on the plugin
    that registered it, once per component it is configured on. Run-level metrics are numbers
    that are not means of per-case values — a macro-F1, an expected calibration error — and
    can then be gated like any metric (``router.macro_f1 >= 0.8``).

    :param evaluator: name of the evaluator (as registered).
    :param component: the component it is configured on.
    :param results: every :class:`evalharness.models.CaseResult` of the run, in case order
        (``results[i].components[component]`` holds the per-case metrics): a sequence read
        lazily from ``results.jsonl`` — ``len()`` is free, but iterating (or indexing) parses
        each case from disk again, so iterate once and keep only what you need.
    :param settings: the evaluator's settings.
    :param context: the run's context.
    :returns: ``{metric: MetricValue}`` for exactly the declared run metrics;
        ``MetricValue.failed(reason)`` for one that cannot be computed. A value's details may
        give ``ci95`` (``[low, high]``) and ``n`` (the cases it was computed from); the rest of
        its details are kept in the report. First non-``None`` result wins.

    Example::

        @hookimpl
        def evaluate_run(evaluator, component, results):
            if evaluator == "coverage":  # one pass, nothing kept
                ran = sum(r.components[component].status == "evaluated" for r in results)
                return {"coverage": MetricValue.of(ran / len(results), n=len(results))}
    """


# --------------------------------------------------------------------------------------------
# Deprecated (evalharness 0.1): oracles through a broadcast hook. Asked only for kinds no
# registered Oracle covers; loading a plugin that implements it warns. Use register_oracles.
# --------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def oracle_output(component: str, kind: str, case: Case,
                  context: EvalContext) -> dict[str, Any] | None:
    """Deprecated: register an :class:`evalharness.Oracle` (:func:`register_oracles`). What
    ``component`` would output for ``case`` if it were perfect, built from the gold.

    Called after a run whose system accepts ``overrides`` (see docs/bottleneck.md), for each
    case that failed end to end and each component of the pipeline: the case is run again
    with this output imposed on the component, and if it then passes end to end, fixing the
    component would have fixed the case (the component's *headroom*).

    :param component: the component's name in the pipeline.
    :param kind: its kind (``router``, ``text2sql``, ``retriever``, ``generator``, or a kind
        a plugin registered).
    :param case: the case; its ``gold`` holds what the output is built from.
    :param context: the run's context (the database to run gold SQL on, the corpus).
    :returns: fields of the kind's step model as the system should take them (e.g.
        ``{"routes": ["sql"]}``), or ``None`` when this plugin has no oracle for ``kind``.
        Raise :class:`evalharness.errors.NoOracle` with the reason when it has one but the
        case lacks the gold it needs. First non-``None`` result wins.

    Example::

        @hookimpl
        def oracle_output(kind, case):
            if kind == "reranker":
                if case.gold.relevant is None:
                    raise NoOracle("the case has no relevance labels (gold.relevant)")
                return {"ids": sorted(case.gold.relevant, key=case.gold.relevant.get,
                                      reverse=True)}
    """


# --------------------------------------------------------------------------------------------
# Reporting: called once per run, after every case is evaluated.
# --------------------------------------------------------------------------------------------


@hookspec
def report_sections(report: Report, results: Sequence[Any]) -> list[ReportSection] | None:
    """Add sections to ``report.md`` and ``report.json`` (under ``sections``).

    Called once per run, after aggregation and gates. Every implementation is called; their
    sections appear keyed by plugin name, in plugin-name order.

    :param report: the aggregated :class:`evalharness.models.Report`.
    :param results: every :class:`evalharness.models.CaseResult` of the run, in case order: a
        sequence read lazily from ``results.jsonl`` (iterating parses each case from disk
        again: iterate once).
    :returns: a list of :class:`evalharness.registry.ReportSection`, or ``None``.

    Example::

        @hookimpl
        def report_sections(report, results):
            slow = [r.case.id for r in results if (r.trace.generator and
                    (r.trace.generator.latency_ms or 0) > 1000)]
            return [ReportSection(title="Slow answers", markdown=", ".join(slow) or "none",
                                  data={"slow": slow})]
    """
