"""Stage 2, normalise: identical normal forms are equivalent queries (the only verdict it gives)."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import SqlglotError

from evalharness_sql.empty import never_returns_rows
from evalharness_sql.engines import Engine
from evalharness_sql.memo import normal_form_entry
from evalharness_sql.normalform import NormalForm
from evalharness_sql.verdict import Pair, Verdict


def normal_forms(pair: Pair) -> tuple[exp.Expression, exp.Expression, bool] | None:
    """Both queries' normal forms and whether both were qualified against the schema."""
    forms = _forms(pair)
    if forms is None:
        return None
    gold, pred = forms
    return gold.tree, pred.tree, gold.qualified and pred.qualified


def _forms(pair: Pair) -> tuple[NormalForm, NormalForm] | None:
    """Both queries' memoised normal forms (computed once per query text and database, and
    shared with ``exact_match``; see :func:`evalharness_sql.memo.normal_form_entry`), or
    ``None`` when either cannot be made or they were normalised to different depths."""
    if pair.gold_tree is None or pair.predicted_tree is None:
        return None
    try:
        gold = normal_form_entry(pair.gold, pair.dialect, pair.engine)
        pred = normal_form_entry(pair.predicted_sql or pair.predicted, pair.dialect, pair.engine)
    except (SqlglotError, RecursionError, ValueError, TypeError, KeyError, AttributeError,
            AssertionError):
        return None
    if gold.qualified != pred.qualified:
        return None  # normalised to different depths: not comparable
    return gold, pred


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
    forms = _forms(pair)
    if forms is None:
        return None
    gold, pred = forms
    pair.normal_forms = (gold, pred)  # the trees, pair.gold_normal etc., are made when used
    if gold.sql != pred.sql:
        return _both_empty(gold, pred, pair.engine if gold.qualified and pred.qualified else None)
    qualified = gold.qualified and pred.qualified
    how = "identical normal forms" + (" (qualified against the schema)" if qualified else "")
    return Verdict(True, "normalise", how, details={"normal_form": gold.sql})


def _both_empty(gold: NormalForm, pred: NormalForm, engine: Engine | None) -> Verdict | None:
    """*Equivalent* when neither query can return a row on any database
    (:func:`evalharness_sql.empty.never_returns_rows`): a contradiction only the normal form
    shows, since every test database would give both an empty result."""
    if not all(" WHERE " in form.sql.upper() or "LIMIT 0" in form.sql.upper()
               for form in (gold, pred)):
        return None  # the common case, decided without unpickling the trees
    schema = engine.schema() if engine is not None else None
    why_gold, why_pred = never_returns_rows(gold.tree, schema), never_returns_rows(pred.tree, schema)
    if why_gold is None or why_pred is None:
        return None
    return Verdict(True, "normalise",
                   f"both queries can never return a row: the gold query because {why_gold}, "
                   f"the predicted query because {why_pred}",
                   details={"normal_form": gold.sql, "predicted_normal_form": pred.sql})
