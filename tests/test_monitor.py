"""`evalharness monitor`: MONITOR.yaml validated like a scenario (exit 2, file/line/field);
recorded shop traffic evaluated reference-free into the store once (a second `--once` adds
nothing); sampling deterministic, stratified by route, always-rules honoured; the root cause
on the taken path (the generator fault is the top root cause); a batch stored whole or not at
all, and a monitor killed with SIGKILL mid-batch resumes without losing or duplicating a
trace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import MonitorStore, run_cli, write
from evalharness.errors import ScenarioError
from evalharness.models import GeneratorStep, RouterStep, Text2SQLStep, Trace
from evalharness.monitor import store
from evalharness.monitor.config import Rule, Sampling, load_monitor
from evalharness.monitor.intake import Incoming, Sampler, rank
from evalharness.monitor.passes import MonitorRun
from evalharness.spans.mapped import Mapped

duckdb = pytest.importorskip("duckdb")

ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "scenarios" / "shop"
SCENARIO = SHOP / "monitor" / "scenario.yaml"
TRAFFIC = SHOP / "monitor" / "traffic"
FEEDBACK = SHOP / "monitor" / "feedback.jsonl"
FAULTY = TRAFFIC / "spans-0002.jsonl"  # 15 questions with the generator fault


def monitor_file(folder: Path, *, scenario: Path = SCENARIO, sources: list[Path] | None = None,
                 extra: str = "", rate: float = 0.5, batch_size: int = 50,
                 retention: float | None = None, store: MonitorStore | None = None) -> Path:
    """MONITOR.yaml over the recorded shop traffic; ``retention`` in days (default none: the
    recorded traffic is from 2026-12-03 to 05, and would age out of any fixed retention);
    ``store`` on its backend (default: ``store.duckdb`` in ``folder``)."""
    sources = sources or [TRAFFIC]
    keys = store.yaml if store is not None else "path: store.duckdb"
    listed = ", ".join(f'"{s}"' for s in sources)
    return write(folder / "monitor.yaml", f"""
        scenario: "{scenario}"
        sources: [{listed}]
        sampling:
          rate: {rate}
          by: route
          always: [{{feedback: down}}, {{error: true}}]
        store: {{{keys}, retention_days: {"null" if retention is None else retention}}}
        feedback: {{path: "{FEEDBACK}"}}
        batch_size: {batch_size}
        {extra}
        """)


def one_pass(path: Path):
    """One pass of the monitor of MONITOR.yaml ``path``, in this process; its summary."""
    run = MonitorRun(load_monitor(path))
    try:
        return run.run_pass()
    finally:
        run.close()


def counts(path: Path) -> dict[str, int]:
    with store.connect(path, read_only=True) as con:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("traces", "metrics", "verdicts")}


# --- MONITOR.yaml ------------------------------------------------------------------------------


def test_unknown_key_is_exit_2_naming_file_line_field_and_valid_keys(tmp_path):
    path = write(tmp_path / "m.yaml", f"""
        scenario: "{SCENARIO}"
        sources: ["{TRAFFIC}"]
        sampling:
          rat: 0.2
        """)
    result = run_cli("monitor", path)
    assert result.code == 2, result
    assert f"{path}, line 4, field `sampling.rat`: unknown field" in result.err
    assert "valid keys of `sampling`: rate, by, always, seed" in result.err


def test_feedback_wait_must_be_a_span_of_time(tmp_path):
    from evalharness.monitor.config import read_monitor_file

    path = write(tmp_path / "m.yaml", """
        scenario: s.yaml
        sources: [t/]
        feedback:
          wait: soon
        """)
    with pytest.raises(ScenarioError, match=r"line 4, field `feedback.wait`: 'soon' is no span "
                                            r"of time: give one like 90m, 24h, 7d, 2w"):
        read_monitor_file(path)


@pytest.mark.parametrize("store, field, message", [
    ("{path: m.duckdb, url: 'postgresql://u@db/m'}", "store.url",
     "give `store.path` (a DuckDB file) or `store.url` (a PostgreSQL server), not both"),
    ("{url: 'mysql://u@db/m'}", "store.url", "a store's url is a PostgreSQL URL"),
    ("{path: m.duckdb, schema: team}", "store.schema",
     "`store.schema` is a PostgreSQL schema: give it with `store.url`"),
    ("{url: 'postgresql://u@db/m', schema: Team-A}", "store.schema",
     "a schema name is lowercase letters"),
    ("{uri: 'postgresql://u@db/m'}", "store.uri",
     "unknown field; valid keys of `store`: path, url, schema, retention_days"),
])
def test_the_store_is_a_path_or_a_postgresql_url_and_schema(tmp_path, store, field, message):
    path = write(tmp_path / "m.yaml", f"""
        scenario: "{SCENARIO}"
        sources: ["{TRAFFIC}"]
        store: {store}
        """)
    result = run_cli("monitor", path, "--once")
    assert result.code == 2, result
    assert f"{path}, line 3, field `{field}`: {message}" in result.err


def test_an_error_about_a_store_url_never_shows_its_password(tmp_path):
    """A bad `store:` repeats the value it got — without the URL's password (it would land in
    CI logs): the password is masked as the store is shown everywhere else."""
    path = write(tmp_path / "m.yaml", f"""
        scenario: "{SCENARIO}"
        sources: ["{TRAFFIC}"]
        store: {{url: "postgresql://monitor:hunter2@db.internal:5432/evals", path: x.duckdb}}
        """)
    result = run_cli("monitor", path, "--once")
    assert result.code == 2, result
    assert "hunter2" not in result.err
    assert "postgresql://monitor:***@db.internal:5432/evals" in result.err


def test_a_postgresql_store_is_its_url_and_schema(tmp_path):
    from evalharness.monitor.config import read_monitor_file
    from evalharness.monitor.store import PostgresTarget

    path = write(tmp_path / "m.yaml", """
        scenario: s.yaml
        sources: [t/]
        store: {url: "postgresql://monitor:secret@db.internal:5432/evals", schema: shop}
        """)
    target = read_monitor_file(path)[0].store.target(tmp_path)
    assert target == PostgresTarget("postgresql://monitor:secret@db.internal:5432/evals", "shop")
    assert str(target) == "postgresql://monitor:***@db.internal:5432/evals (schema shop)"


def test_a_postgresql_store_without_psycopg_names_the_extra(monkeypatch):
    from evalharness.errors import InputError

    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` fails
    with pytest.raises(InputError, match=r"needs psycopg: pip install "
                                         r"'evalharness\[postgresql\]'"):
        with store.connect(store.PostgresTarget("postgresql://u@db.internal/evals")):
            pass


def test_a_scenario_without_a_trace_mapping_is_exit_2(tmp_path):
    path = write(tmp_path / "m.yaml", f"""
        scenario: "{ROOT / 'scenarios' / 'shop.yaml'}"
        sources: ["{TRAFFIC}"]
        """)
    result = run_cli("monitor", path, "--once")
    assert result.code == 2, result
    assert "field `scenario`" in result.err and "has no `traces:` block" in result.err


def test_evaluators_override_the_scenarios_and_are_checked_as_a_scenarios(tmp_path,
                                                                          monitor_store):
    path = monitor_file(tmp_path, extra="evaluators: {generator: [answer_presnt]}")
    with pytest.raises(ScenarioError, match=r"monitor.yaml, line \d+, field `evaluators"):
        load_monitor(path)
    path = monitor_file(tmp_path, sources=[FAULTY], rate=1.0, store=monitor_store,
                        extra="evaluators: {generator: [answer_present]}")
    one_pass(path)
    with monitor_store.connect(read_only=True) as con:
        names = con.execute("SELECT DISTINCT component, metric FROM metrics").fetchall()
    assert sorted(names) == [("generator", "answer_present"), ("generator", "answer_words")]


def test_redaction_drops_user_ids_and_texts(tmp_path, monitor_store):
    path = monitor_file(tmp_path, sources=[FAULTY], rate=1.0, store=monitor_store,
                        extra="redact: {user_ids: drop, texts: drop}")
    one_pass(path)
    with monitor_store.connect(read_only=True) as con:
        rows = con.execute("SELECT question, answer, user_id, trace FROM traces").fetchall()
        users = con.execute("SELECT count(user_id) FROM feedback").fetchone()[0]
    assert len(rows) == 15
    assert all(q is None and a is None and u is None for q, a, u, _ in rows)
    assert not any("three-year guarantee" in t for *_, t in rows)  # the faulty answers
    assert all('"sql"' in t or '"ids"' in t for *_, t in rows)  # what is not text stays
    assert users == 0


def test_an_always_rule_needs_a_key(tmp_path):
    path = write(tmp_path / "m.yaml", f"""
        scenario: "{SCENARIO}"
        sources: ["{TRAFFIC}"]
        sampling: {{always: [{{}}]}}
        """)
    result = run_cli("monitor", path)
    assert result.code == 2 and "field `sampling.always[0]`" in result.err, result


# --- --once over the shop's recorded traffic ---------------------------------------------------


@pytest.fixture(scope="module")
def shop_store(tmp_path_factory, store_backend) -> tuple[MonitorStore, list]:
    folder = tmp_path_factory.mktemp("monitor")
    made = store_backend.new(folder)
    path = monitor_file(folder, store=made)
    first = run_cli("monitor", path, "--once")
    assert first.code == 0, first
    before = counts(made.target)
    second = run_cli("monitor", path, "--once", "--out", folder / "report")
    assert second.code == 0, second
    return made, [first, second, before]


def test_once_stores_every_trace_once_and_a_second_once_adds_nothing(shop_store):
    made, (first, second, before) = shop_store
    assert before["traces"] == 60  # 45 questions, then 15 with the generator fault
    assert counts(made.target) == before
    # the files were read whole: unchanged, they are not read again
    assert "0 traces stored" in second.err
    assert "2 file(s) unchanged since read whole, skipped" in second.err
    if "report written" in second.err:  # monitor report is installed: --out writes it
        assert (made.folder / "report" / "report.json").is_file()
    with made.connect(read_only=True) as con:
        status = dict(con.execute("SELECT status, count(*) FROM traces GROUP BY 1").fetchall())
        names = {m for (m,) in con.execute("SELECT DISTINCT metric FROM metrics").fetchall()}
        joined = con.execute("SELECT count(*) FROM feedback WHERE trace_id IS NOT NULL"
                             ).fetchone()[0]
        users = con.execute("SELECT count(*) FROM traces WHERE user_id LIKE 'u-%'").fetchone()[0]
    assert status["evaluated"] + status["not sampled"] == 60
    # reference-free metrics only: the gold ones the scenario configures are left out
    assert {"faithfulness", "answer_relevancy", "abstention", "route_confidence", "sql_parses",
            "context_precision@5"} <= names
    assert not names & {"route_accuracy", "exact_match", "correctness_f1", "brier"}
    assert joined == 18  # every feedback line found its trace
    assert users == 60   # user ids hashed (redact: {user_ids: hash} by default)


def test_every_thumbs_down_is_evaluated(shop_store):
    made, _ = shop_store
    with made.connect(read_only=True) as con:
        left_out = con.execute(
            "SELECT count(*) FROM traces t JOIN feedback f USING (trace_id) "
            "WHERE f.thumbs = -1 AND NOT t.sampled").fetchone()[0]
        always = con.execute("SELECT count(*) FROM traces WHERE sample_reason = "
                             "'always: feedback=down'").fetchone()[0]
    assert left_out == 0 and always > 0


def test_the_generator_fault_is_the_top_root_cause(shop_store):
    made, _ = shop_store
    with made.connect(read_only=True) as con:
        faulty = con.execute(
            "SELECT root_cause, count(*) FROM traces WHERE sampled AND source LIKE ? "
            "GROUP BY 1", [f"%{FAULTY.name}"]).fetchall()
        top = con.execute("SELECT root_cause, count(*) n FROM traces WHERE root_cause IS NOT "
                          "NULL GROUP BY 1 ORDER BY n DESC").fetchall()
    assert dict(faulty) == {"generator": 10}  # every evaluated faulty trace
    assert top[0][0] == "generator"


# --- sampling ---------------------------------------------------------------------------------


def incoming(trace_id: str, route: str, *, error: str | None = None) -> Incoming:
    trace = Trace(case_id=trace_id, router=RouterStep(routes=[route]), error=error)
    return Incoming(trace_id=trace_id, spans=[], source="x",
                    mapped=Mapped(trace=trace, trace_id=trace_id))


def decisions(sampling: Sampling, traffic: list[Incoming], thumbs=None) -> list[bool]:
    sampler = Sampler(sampling)
    return [sampler.decide(i, (thumbs or {}).get(i.trace_id))[0] for i in traffic]


def test_sampling_is_deterministic_by_seed_and_trace_id():
    traffic = [incoming(f"t{i:04d}", "blog") for i in range(1000)]
    once = decisions(Sampling(rate=0.2), traffic)
    assert once == decisions(Sampling(rate=0.2), traffic)
    assert once != decisions(Sampling(rate=0.2, seed=1), traffic)
    assert 150 < sum(once) < 250
    assert once == [rank(0, i.trace_id) < 0.2 for i in traffic]  # a hash of seed and id


def test_sampling_by_route_gives_a_rare_route_its_share():
    traffic = [incoming(f"t{i:04d}", "sql" if i % 100 == 0 else "blog") for i in range(1000)]
    taken = decisions(Sampling(rate=0.2, by="route"), traffic)
    sql = [t for i, t in zip(traffic, taken, strict=True) if i.route == "sql"]
    assert sum(sql) >= 2  # ceil(0.2 * 10): its share, whatever the hash says
    blog = [t for i, t in zip(traffic, taken, strict=True) if i.route == "blog"]
    assert abs(sum(blog) / len(blog) - 0.2) < 0.02


def test_always_rules_are_honoured_whatever_the_rate():
    traffic = [incoming("down", "blog"), incoming("fails", "blog", error="boom"),
               incoming("sql", "sql"), incoming("plain", "blog")]
    sampling = Sampling(rate=0.0, always=[Rule(feedback="down"), Rule(error=True),
                                          Rule(route="sql")])
    assert decisions(sampling, traffic, {"down": -1}) == [True, True, True, False]


# --- evaluation: the taken path ---------------------------------------------------------------


def test_root_cause_is_the_first_failing_component_on_the_taken_path(tmp_path):
    monitor = load_monitor(monitor_file(tmp_path))
    run = MonitorRun(monitor)
    try:
        sql_failed = Trace(case_id="a", router=RouterStep(routes=["sql"]),
                           text2sql=Text2SQLStep(sql="SELECT nope FROM", error="OperationalError: "
                                                 "no such column: nope"),
                           generator=GeneratorStep(answer="Sorry, I could not look that up."))
        good = Trace(case_id="b", router=RouterStep(routes=["sql"]),
                     text2sql=Text2SQLStep(sql="SELECT name FROM products", columns=["name"],
                                           rows=[["Navy Coat"]]),
                     generator=GeneratorStep(answer="We have the Navy Coat.",
                                             contexts=["name: Navy Coat"]))
        a, b = run.evaluation.evaluate([("a", sql_failed, "Which coats?"),
                                        ("b", good, "Which coats do you have?")])
    finally:
        run.close()
    assert a.path == ["router", "text2sql", "generator"]  # the retriever was not routed to
    assert a.root_cause == "text2sql" and a.passed is False
    assert "no such column" in a.verdicts["text2sql"].reason
    assert b.path == ["router", "text2sql", "generator"]
    assert "retriever" not in b.verdicts and b.verdicts["text2sql"].passed is True


# --- exactly once -------------------------------------------------------------------------------


def test_a_batch_is_stored_whole_or_not_at_all(tmp_path, monitor_store):
    """Killed inside the transaction of the second evaluation batch (its traces' rows
    updated, its metrics half inserted): that batch is rolled back whole — its traces still
    queued, no metric of theirs stored — and the next pass evaluates exactly them."""
    monitor = load_monitor(monitor_file(tmp_path, sources=[FAULTY], rate=1.0, batch_size=5,
                                        store=monitor_store))
    run = MonitorRun(monitor)
    calls = []

    def crash_in_second_batch(con, head, rows):
        if head == "INSERT INTO metrics" and rows:  # (intake inserts no metrics)
            calls.append(1)
            if len(calls) == 2:
                raise KeyboardInterrupt  # as a kill between the inserts and the commit
        return original(con, head, rows)

    original = store._insert
    store._insert = crash_in_second_batch
    try:
        with pytest.raises(KeyboardInterrupt):
            run.run_pass()
    finally:
        store._insert = original
    with monitor_store.connect(read_only=True) as con:
        assert dict(con.execute("SELECT status, count(*) FROM traces GROUP BY 1").fetchall()) \
            == {"evaluated": 5, "queued": 10}
        assert con.execute("SELECT count(DISTINCT trace_id) FROM metrics").fetchone()[0] == 5
        assert con.execute("SELECT count(*) FROM queue").fetchone()[0] == 10
    again = run.run_pass()
    run.close()
    assert (again.unchanged_files, again.stored, again.evaluated) == (1, 0, 10)
    assert counts(monitor.store_path)["traces"] == 15


def test_an_older_store_is_upgraded_and_another_version_refused(monitor_store):
    """A version-2 store (no ``queue``, no judge budget columns) opened to write is taken to
    the current version; a store of a version this evalharness does not know is refused."""
    from evalharness.errors import InputError

    with monitor_store.connect() as con:
        con.execute("DROP TABLE queue")
        con.execute("ALTER TABLE traces DROP COLUMN judge_cost")
        con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    with monitor_store.connect() as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                           ).fetchone() == (str(store.SCHEMA_VERSION),)
        assert con.execute("SELECT count(judge_cost) FROM traces").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM queue").fetchone() == (0,)
        con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(InputError, match="store schema version 99; this evalharness reads "
                                         f"version {store.SCHEMA_VERSION}"):
        with monitor_store.connect():
            pass


@pytest.mark.postgresql
def test_postgresql_writers_take_turns_and_a_reader_is_not_held_up(postgres_dsn):
    """PostgreSQL has no file lock: a writing connection holds the store's advisory lock, so
    two monitors (or a monitor and the feedback endpoint) write one at a time, as on DuckDB,
    while a report reads the last committed state without waiting. (DuckDB: one process
    holds the file; tests/test_monitor_feedback.py's concurrent POSTs take turns there.)"""
    import threading
    import uuid

    pytest.importorskip("psycopg")
    target = store.PostgresTarget(postgres_dsn, f"t_{uuid.uuid4().hex[:12]}")
    opened: dict[str, float] = {}

    def second_writer() -> None:
        with store.connect(target) as con:
            opened["second"] = time.monotonic()
            con.execute("INSERT INTO meta VALUES ('second', '2')")

    try:
        with store.connect(target) as first:
            first.execute("BEGIN TRANSACTION")
            first.execute("INSERT INTO meta VALUES ('first', '1')")
            other = threading.Thread(target=second_writer)
            other.start()
            started = time.monotonic()
            with store.connect(target, read_only=True) as reader:
                keys = {k for (k,) in reader.execute("SELECT key FROM meta").fetchall()}
            assert time.monotonic() - started < 1.0 and "first" not in keys
            time.sleep(0.5)
            assert "second" not in opened  # waiting for the first writer
            first.execute("COMMIT")
            closed = time.monotonic()
        other.join(10)
        assert opened["second"] >= closed
        with store.connect(target, read_only=True) as reader:
            assert {"first", "second", "schema_version"} <= {
                k for (k,) in reader.execute("SELECT key FROM meta").fetchall()}
    finally:
        import psycopg

        with psycopg.connect(postgres_dsn, autocommit=True) as con:
            con.execute(f"DROP SCHEMA IF EXISTS {target.schema} CASCADE")


def test_a_trace_whose_root_span_has_not_arrived_waits_for_the_next_pass(tmp_path,
                                                                          monitor_store):
    first, second = FAULTY.read_text(encoding="utf-8").splitlines(keepends=True)
    folder = tmp_path / "received"
    write(folder / "spans-1.jsonl", first)  # 64 spans: 14 traces whole, the 15th's root later
    (folder / "spans-2.jsonl.part").write_text(second, encoding="utf-8")  # being written
    monitor = load_monitor(monitor_file(tmp_path, sources=[folder], rate=1.0,
                                        store=monitor_store))
    run = MonitorRun(monitor)
    try:
        before = run.run_pass()
        (folder / "spans-2.jsonl.part").rename(folder / "spans-2.jsonl")
        after = run.run_pass()
    finally:
        run.close()
    assert (before.stored, before.pending) == (14, 1)
    assert (after.stored, after.known, after.pending) == (1, 14, 0)


SLOW_PLUGIN = '''
"""A generator evaluator that takes its time, so a monitor can be killed mid-batch."""
import time
from evalharness import Evaluator, Metric, MetricValue, hookimpl


def slow(batch):
    time.sleep(0.6)
    return [{"slow_words": MetricValue.of(len((step.answer or "").split()))}
            for _, step in batch]


@hookimpl
def register_evaluators(register):
    register(Evaluator(name="slow", component="generator", evaluate=slow, metrics=[
        Metric("slow_words", range=(0, None), reference_free=True)]))
'''


@pytest.mark.slow
def test_sigkill_mid_batch_then_restart_loses_and_duplicates_nothing(tmp_path):
    """DuckDB only: about its write-ahead log after a SIGKILL (PostgreSQL rolls back the
    killed connection's transaction itself)."""
    write(tmp_path / "slow.py", SLOW_PLUGIN)
    scenario = write(tmp_path / "scenario.yaml", f"""
        name: slow-shop-traffic
        cases: "{SHOP / 'cases.jsonl'}"
        traces: {{path: "{FAULTY}", mapping: "{SHOP / 'traces-openinference.yaml'}",
                  join: question}}
        plugins: [slow.py]
        pipeline:
          router: {{routes: {{sql: [text2sql], blog: [retriever]}}}}
          text2sql: {{after: [router]}}
          retriever: {{after: [router]}}
          generator: {{after: [text2sql, retriever]}}
        evaluators:
          router: [routing]
          text2sql: [sql_health]
          generator: [answer_present, slow]
        """)
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    for folder in (killed, whole):
        monitor_file(folder, scenario=scenario, sources=[FAULTY], rate=1.0, batch_size=5)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("EVALHARNESS_LOAD_PLUGINS", None)
    proc = subprocess.Popen([sys.executable, "-m", "evalharness.cli", "monitor",
                             str(killed / "monitor.yaml"), "--once"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            env=env)
    try:
        deadline = time.monotonic() + 60
        for line in proc.stderr:
            if line.startswith("batch 1 evaluated") or time.monotonic() > deadline:
                break
        time.sleep(0.3)  # inside the second batch's evaluation
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    # intake queued all 15 (it asks no judge); the first evaluation batch is stored whole
    # and leaves the queue, the second is not stored at all
    with store.connect(killed / "store.duckdb", read_only=True) as con:
        assert dict(con.execute("SELECT status, count(*) FROM traces GROUP BY 1").fetchall()) \
            == {"evaluated": 5, "queued": 10}
        assert con.execute("SELECT count(*) FROM queue").fetchone()[0] == 10
        assert con.execute("SELECT count(DISTINCT trace_id) FROM metrics").fetchone()[0] == 5
    resumed = run_cli("monitor", killed / "monitor.yaml", "--once", separate=True)
    assert resumed.code == 0, resumed
    # intake had read the file whole before the kill: it is not read again
    assert "1 file(s) unchanged since read whole, skipped" in resumed.err
    assert "10 evaluated" in resumed.err
    assert run_cli("monitor", whole / "monitor.yaml", "--once", separate=True).code == 0
    assert counts(killed / "store.duckdb") == counts(whole / "store.duckdb") == {
        "traces": 15, "metrics": counts(whole / "store.duckdb")["metrics"],
        "verdicts": counts(whole / "store.duckdb")["verdicts"]}
    query = ("SELECT trace_id, component, metric, value FROM metrics "
             "ORDER BY trace_id, component, metric")
    with store.connect(killed / "store.duckdb", read_only=True) as a, \
            store.connect(whole / "store.duckdb", read_only=True) as b:
        rows_a, rows_b = a.execute(query).fetchall(), b.execute(query).fetchall()
    assert [r[:3] for r in rows_a] == [r[:3] for r in rows_b]
    assert [r[3] for r in rows_a if r[2] != "latency_ms"] == \
        [r[3] for r in rows_b if r[2] != "latency_ms"]


def test_retention_deletes_old_traces_and_intake_skips_them_for_good(tmp_path, monitor_store):
    """Traces older than `store.retention_days` are deleted with their rows at the start of a
    pass, and the sources' traces that old are not read again (stored, they would be deleted
    at the next pass and evaluated again at the one after, for ever)."""
    from datetime import UTC, datetime, timedelta

    cut = datetime(2026, 12, 4, 12, 0)  # the recorded traffic runs from 12-03 to 12-05
    days = (datetime.now(UTC).replace(tzinfo=None) - cut) / timedelta(days=1)
    fast = "evaluators: {generator: [answer_present]}"
    assert one_pass(monitor_file(tmp_path, rate=1.0, extra=fast, store=monitor_store)
                    ).stored == 60
    with monitor_store.connect(read_only=True) as con:
        old = con.execute("SELECT count(*) FROM traces WHERE start_time < ?", [cut]).fetchone()[0]
        old_feedback = con.execute("SELECT count(*) FROM feedback f JOIN traces t USING "
                                   "(trace_id) WHERE t.start_time < ?", [cut]).fetchone()[0]
    assert 10 < old < 50 and old_feedback > 0
    run = MonitorRun(load_monitor(monitor_file(tmp_path, rate=1.0, extra=fast, retention=days,
                                               store=monitor_store)))
    try:
        first = run.run_pass()  # the files were read whole before: not read at all
        assert (first.expired, first.stored, first.too_old, first.unchanged_files) == (
            old, 0, 0, 2)
        with monitor_store.connect() as con:  # as if they had changed: read again
            con.execute("DELETE FROM source_files")
        second = run.run_pass()
        assert (second.expired, second.stored, second.too_old) == (0, 0, old)
        third = run.run_pass()
        assert (third.stored, third.too_old, third.unchanged_files) == (0, 0, 2)
    finally:
        run.close()
    with monitor_store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*), min(start_time) >= ? FROM traces", [cut]
                           ).fetchone() == (60 - old, True)
        for table in ("metrics", "verdicts", "feedback"):
            assert con.execute(f"SELECT count(*) FROM {table} WHERE trace_id IS NULL OR "
                               "trace_id NOT IN (SELECT trace_id FROM traces)"
                               ).fetchone()[0] == 0
    assert second.feedback.too_old == old_feedback and second.feedback.stored == 0


def test_a_file_read_whole_is_not_read_again_until_it_changes(tmp_path, monitor_store):
    """A service runs for months over a receiver's growing folder: a file every trace of
    which is decided is not read again while its size and modification time stay the same
    (the store's `source_files`); a file that changed is read again, its new traces taken."""
    import shutil

    folder = tmp_path / "received"
    folder.mkdir()
    shutil.copy(TRAFFIC / "spans-0001.jsonl", folder / "spans-0001.jsonl")
    path = monitor_file(tmp_path, sources=[folder], rate=1.0, store=monitor_store,
                        extra="evaluators: {generator: [answer_present]}")
    run = MonitorRun(load_monitor(path))
    try:
        first = run.run_pass()
        assert (first.stored, first.unchanged_files, first.files) == (45, 0, 1)
        second = run.run_pass()
        assert (second.seen, second.stored, second.unchanged_files, second.files) == (
            0, 0, 1, 0)
        with (folder / "spans-0001.jsonl").open("ab") as out:  # the file grows
            out.write(FAULTY.read_bytes())
        third = run.run_pass()
        assert (third.stored, third.known, third.unchanged_files) == (15, 45, 0)
        assert run.run_pass().unchanged_files == 1
    finally:
        run.close()
    with monitor_store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM traces").fetchone()[0] == 60


def test_without_once_it_keeps_going_until_sigterm_and_picks_up_new_files(tmp_path,
                                                                            monitor_store):
    """The long-running path: a pass, a wait of --interval, another pass that takes up a file
    added meanwhile; SIGTERM stops it after the current pass, exit 0, nothing lost."""
    import shutil

    folder = tmp_path / "received"
    folder.mkdir()
    shutil.copy(TRAFFIC / "spans-0001.jsonl", folder / "spans-0001.jsonl")
    path = monitor_file(tmp_path, sources=[folder], rate=1.0, store=monitor_store,
                        extra="evaluators: {generator: [answer_present]}")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "evalharness.cli", "monitor", str(path),
                             "--interval", "0.3"], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, env=env)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 90
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("pass done: 45 traces stored"):
                shutil.copy(FAULTY, folder / "spans-0002.jsonl")  # the receiver's next file
            if line.startswith("pass done: 15 traces stored") or time.monotonic() > deadline:
                break
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = "".join(lines) + (rest or "")
    assert proc.returncode == 0, text
    assert "pass done: 15 traces stored" in text, text
    assert "1 file(s) unchanged since read whole, skipped" in text, text  # the first file
    assert counts(monitor_store.target)["traces"] == 60
