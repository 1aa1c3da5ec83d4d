"""What the equivalence cascade passes from stage to stage (a `Pair`) and what it returns (a `Verdict`)."""

from __future__ import annotations

import functools
import math
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlglot import exp

    from evalharness_sql.engines import Engine
    from evalharness_sql.sandbox import Limits, Result


@dataclass
class Verdict:
    """Whether two queries are equivalent, which stage decided it, why, and — when they are
    not — a counterexample.

    ``equivalent`` is ``True``, ``False``, or ``None`` when the cascade could not decide.
    ``category`` is the error taxonomy of a wrong prediction (``invalid_sql``,
    ``unknown_table``, ``unknown_column``, ``wrong_filter``, ``wrong_aggregation``,
    ``wrong_join``, ``wrong_columns``, ``ordering_limit``, ``too_large``, ``timeout``,
    ``refused``, ``other``); ``None`` for equivalent or undecided pairs.

    >>> v = Verdict(False, "execute", "results differ", {"only_in_gold": [[1]]}, "wrong_filter")
    >>> v.to_dict()["stage"], bool(v)
    ('execute', False)
    """

    equivalent: bool | None
    stage: str
    reason: str
    counterexample: dict[str, Any] | None = None
    category: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.equivalent is True

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (what ``results.jsonl`` stores)."""
        return asdict(self)


@dataclass
class Options:
    """Settings of one cascade run (the ``equivalence`` evaluator's settings map onto these).

    >>> Options().test_suite_size
    32
    """

    timeout_s: float = 5.0
    """Time limit of one query, in seconds; the query is interrupted when it is reached."""
    max_rows: int = 100_000
    """Row cap: a result with more rows is not compared."""
    max_value_bytes: int = 10_000_000
    """Bytes of one value (a string or blob): a query making a larger one is stopped."""
    max_result_bytes: int = 100_000_000
    """Bytes of one whole result, counted while it is fetched."""
    max_memory_bytes: int = 2_000_000_000
    """Memory of one DuckDB query (its sandbox process); caps PostgreSQL's ``work_mem``."""
    budget_s: float | None = None
    """Seconds the cascade may spend on one pair (``None``: no budget). Each query's time
    limit is cut to what is left; when nothing is left the remaining test databases and
    timing runs are skipped, and the pair is undecided with a reason naming the budget."""
    test_suite_size: int = 32
    """K: how many perturbed or generated databases the test-suite stage tries."""
    seed: int = 0
    """Seed of the test-suite databases (each pair's databases depend on it and on the pair)."""
    float_tolerance: float = 1e-6
    """Relative (and absolute) tolerance when comparing floating-point values."""
    judge: Any = None
    """A judge with ``run_many(task, inputs, metric=...)``, for what stays undecided."""
    measure_time: bool = False
    """Time both queries (fastest of a few runs) for the execution time ratio."""
    stages: tuple[str, ...] | None = None
    """Names of the stages to run (default: all, in order); e.g. to measure one alone."""

    def limits(self) -> Limits:
        """The sandbox's caps for one query.

        >>> Options(max_rows=5).limits().max_rows
        5
        """
        return _limits(self.max_rows, self.max_value_bytes, self.max_result_bytes,
                       self.max_memory_bytes)


@functools.lru_cache(maxsize=64)
def _limits(max_rows: int, max_value_bytes: int, max_result_bytes: int,
            max_memory_bytes: int) -> Limits:
    from evalharness_sql.sandbox import Limits

    return Limits(max_rows=max_rows, max_value_bytes=max_value_bytes,
                  max_result_bytes=max_result_bytes, max_memory_bytes=max_memory_bytes)


class Clock:
    """The evaluation time one pair has spent, against its budget. Stages run pair by pair,
    so the cascade runs each stage of a pair inside ``with pair.clock:``; the time in between
    (other pairs' stages) is not the pair's.

    >>> clock = Clock(None)
    >>> clock.remaining() == math.inf
    True
    >>> clock = Clock(10.0)
    >>> with clock:
    ...     0 < clock.remaining() <= 10.0
    True
    """

    def __init__(self, budget_s: float | None) -> None:
        self.budget_s = budget_s
        self.spent_s = 0.0
        self._since: float | None = None
        self._depth = 0

    def __enter__(self) -> Clock:
        if self._depth == 0:
            self._since = time.perf_counter()
        self._depth += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        self._depth -= 1
        if self._depth == 0 and self._since is not None:
            self.spent_s += time.perf_counter() - self._since
            self._since = None

    def elapsed(self) -> float:
        """Seconds spent so far."""
        running = time.perf_counter() - self._since if self._since is not None else 0.0
        return self.spent_s + running

    def remaining(self) -> float:
        """Seconds left (``math.inf`` without a budget; never below 0)."""
        if self.budget_s is None:
            return math.inf
        return max(0.0, self.budget_s - self.elapsed())


@dataclass
class Pair:
    """One (gold, predicted) pair as it moves through the cascade; stages fill in what they learn."""

    gold: str
    predicted: str
    dialect: str = "sqlite"
    predicted_dialect: str | None = None
    engine: Engine | None = None
    options: Options = field(default_factory=Options)
    connection: Any = None
    """A sandboxed connection to the scenario's database, opened by the cascade."""

    # filled in by the parse stage
    gold_tree: exp.Expression | None = None
    predicted_tree: exp.Expression | None = None
    predicted_sql: str | None = None
    """The predicted SQL to execute (transpiled to the scenario's dialect when needed)."""
    gold_error: str | None = None
    valid_sql: bool | None = None

    # filled in by the normalise stage: both queries' memoised normal forms
    # (:class:`evalharness_sql.memo.NormalForm`); their trees, ``gold_normal`` and
    # ``predicted_normal``, are made on first use (most pairs are decided without them)
    normal_forms: tuple[Any, Any] | None = None

    # filled in by the execute stage
    gold_result: Result | None = None
    predicted_result: Result | None = None
    execution_match: bool | None = None
    permutations: list[tuple[int, ...]] | None = None

    notes: dict[str, Any] = field(default_factory=dict)
    """What the stages noticed; ``notes["budget"]`` is the reason when the pair's evaluation
    budget ran out (the values computed before it stand, the rest are errors)."""
    verdict: Verdict | None = None
    clock: Clock = field(default=None, repr=False, compare=False)  # type: ignore[assignment]
    """The pair's evaluation time against ``options.budget_s``."""
    _normal: list[Any] = field(default_factory=lambda: [_UNSET, _UNSET], repr=False,
                               compare=False)

    def __post_init__(self) -> None:
        if self.clock is None:
            self.clock = Clock(self.options.budget_s)

    @property
    def decided(self) -> bool:
        return self.verdict is not None

    @property
    def gold_normal(self) -> exp.Expression | None:
        """The gold query's normal form (``None`` when the normalise stage made none)."""
        return self._normal_tree(0)

    @gold_normal.setter
    def gold_normal(self, tree: exp.Expression | None) -> None:
        self._set_normal(0, tree)

    @property
    def predicted_normal(self) -> exp.Expression | None:
        """The predicted query's normal form (``None`` when the normalise stage made none)."""
        return self._normal_tree(1)

    @predicted_normal.setter
    def predicted_normal(self, tree: exp.Expression | None) -> None:
        self._set_normal(1, tree)

    def _normal_tree(self, i: int) -> exp.Expression | None:
        if self._normal[i] is _UNSET:
            self._normal[i] = self.normal_forms[i].tree if self.normal_forms is not None else None
        return self._normal[i]

    def _set_normal(self, i: int, tree: exp.Expression | None) -> None:
        if self.normal_forms is not None:  # a tree set by hand: the memoised forms no longer apply
            self._normal_tree(1 - i)
            self.normal_forms = None
        self._normal[i] = tree


_UNSET = object()
