"""The SQL equivalence cascade on the fixture files of tests/data/sql/ (pairs with `# title:`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from evalharness_sql import check_equivalence
from evalharness_sql.engines import SQLiteEngine
from evalharness_sql.stages import normalise, parse
from evalharness_sql.verdict import Pair

DATA = Path(__file__).parent / "data" / "sql"


def sql_pairs(name: str) -> list[tuple[str, str, str]]:
    """``(title, gold, predicted)`` for each `# title:` block of a fixture file."""
    pairs, title, statements = [], None, []
    for line in (DATA / name).read_text(encoding="utf-8").splitlines() + ["# title: end"]:
        if line.startswith("# title:"):
            if title is not None:
                assert len(statements) == 2, f"{name}: {title!r} needs exactly two statements"
                pairs.append((title, *statements))
            title, statements = line.removeprefix("# title:").strip(), []
        elif line.strip() and not line.startswith("#"):
            if statements and not statements[-1].endswith(";"):
                statements[-1] += " " + line.strip()
            else:
                statements.append(line.strip())
    return [(t, g.rstrip(";"), p.rstrip(";")) for t, g, p in pairs]


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sql") / "fixtures.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript((DATA / "schema.sql").read_text(encoding="utf-8"))
    conn.commit()
    conn.close()
    return path


def ids(pairs):
    return [p[0] for p in pairs]


EQUIVALENT = sql_pairs("normalise_equivalent.sql")
NOT_EQUIVALENT = sql_pairs("not_equivalent.sql")
CASCADE = sql_pairs("cascade_equivalent.sql")


def test_fixture_files_parse():
    assert len(EQUIVALENT) >= 25 and len(NOT_EQUIVALENT) >= 12 and len(CASCADE) >= 6


@pytest.mark.parametrize("title, gold, pred", EQUIVALENT, ids=ids(EQUIVALENT))
def test_normalise_merges(title, gold, pred, database):
    pair = Pair(gold, pred, engine=SQLiteEngine(database))
    assert parse(pair) is None
    verdict = normalise(pair)
    assert verdict is not None, (pair.gold_normal.sql(), pair.predicted_normal.sql())
    assert verdict.equivalent is True and verdict.stage == "normalise"


@pytest.mark.parametrize("title, gold, pred", NOT_EQUIVALENT, ids=ids(NOT_EQUIVALENT))
def test_normalise_keeps_apart_and_the_cascade_finds_a_counterexample(title, gold, pred,
                                                                      database):
    pair = Pair(gold, pred, engine=SQLiteEngine(database))
    assert parse(pair) is None
    assert normalise(pair) is None
    verdict = check_equivalence(gold, pred, database)
    assert verdict.equivalent is False, verdict
    assert verdict.stage in ("execute", "test_suite")
    assert verdict.counterexample and verdict.reason and verdict.category


@pytest.mark.parametrize("title, gold, pred", CASCADE, ids=ids(CASCADE))
def test_cascade_finds_no_difference(title, gold, pred, database):
    verdict = check_equivalence(gold, pred, database)
    assert verdict.equivalent is True, verdict
    assert verdict.stage == "test_suite"
    assert verdict.reason.startswith("equivalent by test suite (32 databases)")
