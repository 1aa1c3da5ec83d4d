"""Text-to-SQL evaluators: is the predicted query the gold query — and if not, how is it wrong?

Two evaluators:

* ``exact_match``: 1 when the predicted and gold queries have the same normal form (sqlglot
  parsing and the normalisation rules of :mod:`evalharness_sql.rules`, qualified against the
  schema when the scenario has a database). Unparsable predictions score 0; an unparsable
  *gold* query is an error.
* ``equivalence``: the equivalence cascade (:mod:`evalharness_sql.cascade`) — parse,
  normalise, execute in a sandbox, a test suite of perturbed and generated databases, the
  LLM judge last — with the metrics ``equivalent`` (the verdict, with its stage, reason,
  counterexample and error category in the details), ``execution_accuracy`` (same result on
  the scenario's database), ``valid_sql``, ``clause_f1`` and ``exec_time_ratio``.

The cascade is also a public API: :func:`check_equivalence`. See docs/metrics/sql.md.
"""

from __future__ import annotations

from evalharness import Evaluator, Init, LabelGold, Metric, Oracle, hookimpl
from evalharness.registry import run_evaluator
from evalharness_sql import evaluators, health, section
from evalharness_sql.cascade import STAGES, check_equivalence
from evalharness_sql.cascade import run_cascade as run_cascade
from evalharness_sql.clauses import items_f1 as items_f1
from evalharness_sql.engines import Column as Column
from evalharness_sql.engines import Schema as Schema
from evalharness_sql.engines import Table as Table
from evalharness_sql.engines import open_engine as open_engine
from evalharness_sql.evaluators import EQUIVALENCE_METRICS, normal_form
from evalharness_sql.evaluators import ORACLE_MAX_ROWS as ORACLE_MAX_ROWS
from evalharness_sql.evaluators import pair_key as pair_key
from evalharness_sql.memo import engine_key as engine_key
from evalharness_sql.memo import memo_for as memo_for
from evalharness_sql.memo import normal_form_entry as normal_form_entry
from evalharness_sql.memo import pair_clauses as pair_clauses
from evalharness_sql.memo import prefetch_normal_forms as prefetch_normal_forms
from evalharness_sql.parallel import check_many
from evalharness_sql.rules import RULES
from evalharness_sql.rules import normalize as normalize
from evalharness_sql.sandbox import parse_statements as parse_statements
from evalharness_sql.settings import EquivalenceSettings, ExactMatchSettings, HealthSettings
from evalharness_sql.stages.execute import execute as execute
from evalharness_sql.verdict import Options, Verdict
from evalharness_sql.verdict import Pair as Pair

# (``name as name``: a re-export. Those beyond ``__all__`` are the plugin's names this module
# held before the evaluators' work moved to evaluators.py, still importable from it.)

__version__ = "0.2.0"

__all__ = ["EQUIVALENCE_METRICS", "RULES", "STAGES", "EquivalenceSettings", "ExactMatchSettings", "Options", "Verdict",
           "check_equivalence", "check_many", "normal_form"]


SQL = LabelGold(field="sql", step="sql")
"""A ``yes`` on a query's correctness makes its SQL the gold; a correction becomes it."""

METRICS = {
    "exact_match": Metric(
        "exact_match", verdict=">= 1", precedence=2,
        description="predicted and gold SQL have the same normal form"),
    "equivalent": Metric(
        "equivalent", verdict=">= 1", review=True, gold=SQL,
        question="Does the SQL return what the gold SQL returns (for any data)?",
        description="the same rows as the gold SQL, on every test database"),
    "execution_accuracy": Metric(
        "execution_accuracy", verdict=">= 1", precedence=1, gold=SQL,
        question="Does the SQL answer the question correctly?",
        description="the same result as the gold SQL on the scenario's database"),
    "valid_sql": Metric("valid_sql", description="the SQL parses and runs"),
    "clause_f1": Metric("clause_f1", description="F1 of the query's clause items against "
                        "the gold's"),
    "exec_time_ratio": Metric(
        "exec_time_ratio", range=(0, None), direction="lower", unit="×",
        description="execution time of the predicted query over the gold's"),
    "sql_parses": Metric(
        "sql_parses", verdict=">= 1", reference_free=True,
        description="the predicted SQL is one statement that parses (no gold needed)"),
    "empty_result": Metric(
        "empty_result", direction="lower", reference_free=True,
        description="1 when the query returned no rows (no gold needed)"),
    "result_rows": Metric(
        "result_rows", range=(0, None), direction="neutral", unit="rows",
        reference_free=True, description="rows the query returned (no gold needed)"),
    "latency_ms": Metric(
        "latency_ms", range=(0, None), direction="lower", unit="ms", reference_free=True,
        description="the text-to-SQL step's latency, as the trace records it"),
}
"""Every text-to-SQL metric's declaration."""


def exact_match(batch, settings, context):
    """The ``exact_match`` evaluator (:func:`evalharness_sql.evaluators.exact_match_rows`)."""
    return evaluators.exact_match_rows(batch, settings, context)


def equivalence(batch, settings, context):
    """The ``equivalence`` evaluator (:func:`evalharness_sql.evaluators.equivalence_rows`)."""
    return evaluators.equivalence_rows(batch, settings, context)


@hookimpl
def register_evaluators(register):
    register(Evaluator(
        name="exact_match", component="text2sql", metrics=[METRICS["exact_match"]],
        settings=ExactMatchSettings, evaluate=exact_match, init=Init(entry="exact_match"),
        description="1 when predicted and gold SQL have the same normal form (sqlglot "
                    "normalisation and sound rewrite rules)"))
    register(Evaluator(
        name="equivalence", component="text2sql",
        metrics=[METRICS[m] for m in EQUIVALENCE_METRICS],
        settings=EquivalenceSettings, needs_judge=True, needs_database=True,
        evaluate=equivalence,
        init=Init(entry="equivalence", comment="executes both queries on test databases",
                  gate=">= 0.9"),
        description="the equivalence cascade (normalise, sandboxed execution, perturbed test "
                    "databases, judge last) with execution accuracy, valid-SQL rate, "
                    "clause F1 and the execution time ratio"))

    register(Evaluator(
        name="sql_health", component="text2sql",
        metrics=[METRICS[m] for m in health.HEALTH_METRICS],
        settings=HealthSettings, evaluate=health.health_rows,
        description="without gold SQL: the query parses (sql_parses), returned no rows "
                    "(empty_result), how many (result_rows), the step's latency_ms; for "
                    "`evalharness monitor`"))


def evaluate_text2sql(evaluator, batch, settings=None, context=None):
    """Run one of this plugin's evaluators by name on a batch of ``(case, step)`` pairs (for
    notebooks and tests; a run calls each evaluator's ``evaluate`` itself); ``None`` for a
    name it does not have."""
    return run_evaluator(register_evaluators, evaluator, batch, settings, context)


def perfect_text2sql(case, context):
    """A perfect text-to-SQL step writes the gold query and gets its rows: the gold SQL is run
    in the sandbox on the scenario's database (for oracle headroom;
    :func:`evalharness_sql.evaluators.oracle_output`)."""
    return evaluators.oracle_output(case, context)


@hookimpl
def register_oracles(register):
    register(Oracle(kind="text2sql", output=perfect_text2sql,
                    description="the gold SQL and its rows on the scenario's database"))


@hookimpl
def report_sections(report, results):
    """Verdicts per stage, error categories and the smallest counterexamples
    (:mod:`evalharness_sql.section`)."""
    return section.sections(results)
