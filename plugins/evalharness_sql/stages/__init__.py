"""The stages of the equivalence cascade, one per module, in the order they run."""

from evalharness_sql.stages.execute import execute
from evalharness_sql.stages.judge import judge
from evalharness_sql.stages.normalise import normalise
from evalharness_sql.stages.parse import parse
from evalharness_sql.stages.testsuite import test_suite

__all__ = ["execute", "judge", "normalise", "parse", "test_suite"]
