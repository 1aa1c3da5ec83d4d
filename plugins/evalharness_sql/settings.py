"""Settings of the text-to-SQL evaluators (``exact_match``, ``equivalence``,
``sql_health``): plain pydantic models, below both the registration (the package's
``__init__``) and the evaluator logic (:mod:`evalharness_sql.evaluators`, ``health``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ExactMatchSettings(BaseModel):
    """Settings of the ``exact_match`` evaluator."""

    model_config = ConfigDict(extra="forbid")

    dialect: str | None = None
    """SQL dialect; default: the scenario database's dialect, else ``sqlite``."""


class EquivalenceSettings(BaseModel):
    """Settings of the ``equivalence`` evaluator."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    dialect: str | None = None
    """SQL dialect of the gold queries; default: the scenario database's, else ``sqlite``."""
    predicted_dialect: str | None = None
    """Dialect the system writes its SQL in, when it differs (the SQL is transpiled)."""
    test_suite_size: int = Field(default=32, ge=0, le=256)
    """K: how many perturbed or generated databases the test-suite stage tries (0: skip it)."""
    timeout_s: float = Field(default=5.0, gt=0)
    """Time limit of one query, in seconds."""
    max_rows: int = Field(default=100_000, ge=1)
    """Row cap of one result."""
    max_value_bytes: int = Field(default=10_000_000, ge=1)
    """Bytes of one value (string or blob); a query making a larger one is stopped."""
    max_result_bytes: int = Field(default=100_000_000, ge=1)
    """Bytes of one whole result, counted while it is fetched."""
    max_memory_bytes: int = Field(default=2_000_000_000, ge=16_000_000)
    """Memory of one DuckDB query (its sandbox process); the most PostgreSQL's ``work_mem``
    and ``temp_file_limit`` are set to."""
    float_tolerance: float = Field(default=1e-6, ge=0)
    """Relative and absolute tolerance for floating-point values."""
    seed: int = 0
    """Seed of the test-suite databases."""
    use_judge: bool = True
    """Send what execution cannot decide to the scenario's judge."""


class HealthSettings(BaseModel):
    """Settings of the ``sql_health`` evaluator (no gold SQL needed)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    dialect: str | None = None
    """SQL dialect of the predicted queries; default: the scenario database's, else
    ``sqlite``."""
