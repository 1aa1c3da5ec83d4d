"""Stage 1, parse: both queries through sqlglot; an unparsable or forbidden prediction is decided here."""

from __future__ import annotations

from sqlglot.errors import SqlglotError

from evalharness_sql.sandbox import parse_statements, refusal
from evalharness_sql.verdict import Pair, Verdict


def parse(pair: Pair) -> Verdict | None:
    """Parse the gold query in the scenario's dialect and the prediction in its own (then
    transpile it to the scenario's dialect). Decides *not equivalent* when the prediction is
    refused by the sandbox (not a single SELECT) or is invalid SQL — unparsable by sqlglot
    and, when there is a database, rejected by the engine too (SQL the engine accepts but
    sqlglot cannot read goes on, unparsed, to execution).

    >>> parse(Pair("SELECT 1", "SELEC name FRM singer")).reason
    'invalid SQL: the predicted query does not parse as sqlite: Invalid expression / Unexpected token. Line 1, Col: 14.'
    >>> parse(Pair("SELECT 1", "DROP TABLE singer")).category
    'refused'
    >>> pair = Pair("SELECT 1", "SELECT TOP 1 name FROM singer", predicted_dialect="tsql")
    >>> parse(pair) is None, pair.predicted_sql
    (True, 'SELECT name FROM singer LIMIT 1')
    """
    try:
        statements = parse_statements(pair.gold, pair.dialect)
        if len(statements) == 1:
            pair.gold_tree = statements[0]
        else:
            pair.notes["gold_parse"] = f"the gold SQL holds {len(statements)} statements"
    except SqlglotError as exc:
        pair.notes["gold_parse"] = f"the gold SQL does not parse: {_first_line(exc)}"

    read = pair.predicted_dialect or pair.dialect
    try:
        statements = parse_statements(pair.predicted, read)
    except SqlglotError as exc:
        reason = refusal(pair.predicted, read)
        if reason is not None:
            pair.valid_sql = False
            return Verdict(False, "parse", reason, {"kind": "refused", "reason": reason},
                           "refused")
        message = f"the predicted query does not parse as {read}: {_first_line(exc)}"
        if pair.engine is not None and read == pair.dialect and pair.connection is not None:
            error = compile_error(pair.connection, pair.predicted)
            if error is None:
                pair.predicted_sql = pair.predicted
                pair.notes["predicted_parse"] = message + " (the engine accepts it)"
                return None
            message = f"the predicted query is rejected by {pair.engine.name}: {error}"
        pair.valid_sql = False
        return Verdict(False, "parse", f"invalid SQL: {message}",
                       {"kind": "invalid_sql", "error": message}, "invalid_sql")
    reason = refusal(pair.predicted, read, statements)
    if reason is not None:
        pair.valid_sql = False
        return Verdict(False, "parse", reason, {"kind": "refused", "reason": reason}, "refused")
    pair.predicted_tree = statements[0]
    if read != pair.dialect:
        try:
            pair.predicted_sql = statements[0].sql(dialect=pair.dialect)
            pair.predicted_tree = parse_statements(pair.predicted_sql, pair.dialect)[0]
        except SqlglotError as exc:
            pair.valid_sql = False
            return Verdict(False, "parse", f"invalid SQL: cannot transpile from {read} to "
                           f"{pair.dialect}: {_first_line(exc)}",
                           {"kind": "invalid_sql", "error": str(exc)}, "invalid_sql")
    else:
        pair.predicted_sql = pair.predicted
    if pair.engine is None:
        pair.valid_sql = True
    return None


def compile_error(conn: object, sql: str) -> str | None:
    """The engine's complaint about ``sql`` without running it (SQLite: ``EXPLAIN``), or None."""
    import sqlite3

    if not isinstance(conn, sqlite3.Connection):
        return None
    try:
        conn.execute("EXPLAIN " + sql).fetchmany(1)
    except (sqlite3.Error, sqlite3.Warning, ValueError) as exc:
        return str(exc)
    return None


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
