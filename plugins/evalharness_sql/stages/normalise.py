"""Stage 2, normalise: identical normal forms are equivalent queries (the only verdict it gives)."""

from __future__ import annotations

from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError

from evalharness_sql.rules import normalize
from evalharness_sql.verdict import Pair, Verdict


def normal_forms(pair: Pair) -> tuple[exp.Expression, exp.Expression, bool] | None:
    """Both queries' normal forms and whether both were qualified against the schema."""
    if pair.gold_tree is None or pair.predicted_tree is None:
        return None
    schema = pair.engine.schema() if pair.engine is not None else None
    gold_state: dict[str, Any] = {}
    pred_state: dict[str, Any] = {}
    try:
        gold = normalize(pair.gold_tree, schema=schema, dialect=pair.dialect, state=gold_state)
        pred = normalize(pair.predicted_tree, schema=schema, dialect=pair.dialect,
                         state=pred_state)
    except (SqlglotError, RecursionError, ValueError, TypeError, KeyError, AttributeError,
            AssertionError):
        return None
    qualified = bool(gold_state.get("qualified")) and bool(pred_state.get("qualified"))
    if bool(gold_state.get("qualified")) != bool(pred_state.get("qualified")):
        return None  # normalised to different depths: not comparable
    return gold, pred, qualified


def normalise(pair: Pair) -> Verdict | None:
    """Normalise both queries with the rules of :mod:`evalharness_sql.rules` and decide
    *equivalent* when the normal forms are identical. Different normal forms decide nothing:
    the rules cannot reach every rewrite. Every rule is sound on every database of the
    schema, so this stage never calls a non-equivalent pair equivalent.

    >>> from evalharness_sql.engines import SQLiteEngine
    >>> from evalharness_sql.stages.parse import parse
    >>> engine = SQLiteEngine.from_ddl("CREATE TABLE singer (name TEXT, age INT)")
    >>> pair = Pair("SELECT name FROM singer WHERE age IN (30, 20)",
    ...             "select NAME from SINGER s where s.age = 20 or s.age = 30", engine=engine)
    >>> parse(pair), normalise(pair).reason
    (None, 'identical normal forms (qualified against the schema)')
    """
    forms = normal_forms(pair)
    if forms is None:
        return None
    gold, pred, qualified = forms
    pair.gold_normal, pair.predicted_normal = gold, pred
    gold_sql = gold.sql(dialect=pair.dialect, comments=False)
    pred_sql = pred.sql(dialect=pair.dialect, comments=False)
    if gold_sql != pred_sql:
        return None
    how = "identical normal forms" + (" (qualified against the schema)" if qualified else "")
    return Verdict(True, "normalise", how, details={"normal_form": gold_sql})
