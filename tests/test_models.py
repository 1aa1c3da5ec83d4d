"""Data contracts: documented fields, versioned records, metric values that are never NaN."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from evalharness.models import (
    SCHEMA_VERSION,
    Case,
    CaseResult,
    MetricValue,
    Report,
    RetrieverStep,
    Trace,
)
from evalharness.scenario import ScenarioFile


def _undocumented(schema: dict) -> list[str]:
    missing = []
    for owner in [schema, *schema.get("$defs", {}).values()]:
        for name, prop in owner.get("properties", {}).items():
            if not prop.get("description"):
                missing.append(f"{owner.get('title')}.{name}")
    return missing


@pytest.mark.parametrize("model", [Case, Trace, CaseResult, Report, ScenarioFile])
def test_every_field_is_documented(model):
    assert _undocumented(model.model_json_schema()) == []


def test_records_carry_the_schema_version():
    trace = Trace(case_id="a")
    assert trace.schema_version == SCHEMA_VERSION
    assert CaseResult(case=Case(id="a", question="q"), trace=trace).schema_version == "1"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -math.inf])
def test_metric_values_are_never_nan(bad):
    with pytest.raises(ValidationError, match="not finite"):
        MetricValue(value=bad)


def test_metric_value_is_a_value_or_an_error():
    assert MetricValue.of(True).value == 1.0
    assert MetricValue.failed("no gold").error == "no gold"
    with pytest.raises(ValidationError, match="either `value` or `error`"):
        MetricValue()
    with pytest.raises(ValidationError, match="both"):
        MetricValue(value=1.0, error="x")


def test_retriever_step_lists_must_align():
    with pytest.raises(ValidationError, match="`scores` has 1 entries but `ids` has 2"):
        RetrieverStep(ids=["a", "b"], scores=[0.3])


def test_unknown_fields_are_rejected():
    with pytest.raises(ValidationError, match="extra"):
        Case(id="a", question="q", gold={"route": ["sql"]})


def test_negative_grades_are_rejected():
    with pytest.raises(ValidationError, match=">= 0"):
        Case(id="a", question="q", gold={"relevant": {"d1": -1}})


def test_trace_step_lookup():
    trace = Trace(case_id="a", router={"routes": ["sql"]}, steps={"reranker": {"ids": []}})
    assert trace.step("router").routes == ["sql"]
    assert trace.step("retriever") is None
    assert trace.step("reranker") == {"ids": []}
