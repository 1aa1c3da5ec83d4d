"""Users' feedback for the monitor (evalharness.monitor.feedback): the file format, idempotent
ingestion, attribute keys resolved when the trace arrives, the HTTP endpoint."""

from __future__ import annotations

import datetime as dt
import http.client
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("duckdb")

from evalharness.cli import Commands  # noqa: E402
from evalharness.errors import InputError  # noqa: E402
from evalharness.monitor import feedback as F  # noqa: E402
from evalharness.monitor.store import connect, hash_user_id, user_salt  # noqa: E402

T0 = dt.datetime(2026, 12, 6, 9, 0)


def add_trace(con, trace_id: str, *, start: dt.datetime = T0, join_key: str | None = None,
              attributes: dict | None = None) -> None:
    """A ``traces`` row as the monitor's intake writes it (only what feedback reads)."""
    con.execute(
        "INSERT INTO traces (trace_id, start_time, end_time, stored_at, source, join_key, "
        "attributes, sampled, sample_reason, status) VALUES (?, ?, ?, ?, 'test', ?, ?, TRUE, "
        "'rate', 'evaluated')",
        [trace_id, start, start, start, join_key, json.dumps(attributes or {})])


def write_lines(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                            for r in records))
    return path


@pytest.fixture
def store(monitor_store):
    """A fresh store's target, on each backend (:func:`conftest.store_backend`)."""
    return monitor_store.target


GOOD = [
    {"trace_id": "t1", "thumbs": "down", "labels": ["wrong price"], "user_id": "ana",
     "at": "2026-12-06T10:00:00Z"},
    {"trace_id": "t2", "score": 4, "comment": "fine", "user_id": "bo",
     "at": "2026-12-06T10:01:00+01:00"},
    {"key": {"session.id": "s9"}, "thumbs": "up", "at": "2026-12-06T10:02:00Z"},
    {"trace_id": "t-unknown", "thumbs": "up", "feedback_id": "given-1"},
]


def test_file_ingested_once_however_often_added(store: Path, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "fb.jsonl", [*GOOD, ""])
    with connect(store) as con:
        add_trace(con, "t1")
        add_trace(con, "t2")
        first = F.ingest_file(con, path)
        again = F.ingest_file(con, path)
        rows = con.execute("SELECT feedback_id, trace_id, key_attribute, key_value, thumbs, "
                           "score, labels, received_at, source FROM feedback "
                           "ORDER BY key_value").fetchall()
    assert (first.read, first.stored, first.duplicates, first.resolved, first.unresolved) \
        == (4, 4, 0, 2, 2)
    assert (again.stored, again.duplicates) == (0, 4)
    assert len(rows) == 4
    by_key = {r[3]: r for r in rows}
    assert by_key["t1"][1:7] == ("t1", "trace_id", "t1", -1, None, '["wrong price"]')
    assert by_key["t2"][7] == dt.datetime(2026, 12, 6, 9, 1)  # +01:00 → UTC
    assert by_key["s9"][1:4] == (None, "session.id", "s9")
    assert by_key["t-unknown"][0] == "given-1" and by_key["t-unknown"][1] is None
    assert by_key["t1"][8] == f"{path}:1"


@pytest.mark.parametrize(("line", "field", "valid"), [
    ({"trace_id": "t1", "thumbs": "meh"}, "thumbs", '"up" or "down"'),
    ({"trace_id": "t1", "score": 7}, "score", "from 1 to 5"),
    ({"trace_id": "t1", "score": True}, "score", "from 1 to 5"),
    ({"trace_id": "t1", "labels": "wrong"}, "labels", "a list"),
    ({"trace_id": "t1", "at": "yesterday", "thumbs": "up"}, "at", "ISO 8601"),
    ({"thumbs": "up"}, "trace_id", "exactly one of trace_id, or key"),
    ({"trace_id": "t1", "key": {"session.id": "s"}, "thumbs": "up"}, "trace_id", "exactly one"),
    ({"key": {"a": "1", "b": "2"}, "thumbs": "up"}, "key", "one attribute"),
    ({"trace_id": "t1"}, "thumbs", "at least one of"),
    ({"trace_id": "t1", "thumb": "up"}, "thumb", "valid fields: trace_id"),
    ("{not json", "not JSON", "one JSON object a line"),
    ([1, 2], "record", "a JSON object"),
])
def test_bad_line_names_file_line_field_and_stores_nothing(store: Path, tmp_path: Path, line,
                                                           field: str, valid: str) -> None:
    path = write_lines(tmp_path / "fb.jsonl", [GOOD[0], line])
    with connect(store) as con:
        with pytest.raises(InputError) as err:
            F.ingest_file(con, path)
        assert con.execute("SELECT count(*) FROM feedback").fetchone()[0] == 0
    assert f"{path} line 2: {field}" in str(err.value)
    assert valid in str(err.value)
    assert "nothing was stored" in str(err.value)


def test_a_growing_files_torn_last_line_waits(store: Path, tmp_path: Path) -> None:
    path = tmp_path / "fb.jsonl"
    path.write_text(json.dumps(GOOD[0]) + "\n" + '{"trace_id": "t2", "thu')
    with connect(store) as con:
        first = F.ingest_file(con, path)
        with path.open("a") as f:
            f.write('mbs": "up"}\n')
        second = F.ingest_file(con, path)
    assert (first.stored, first.pending) == (1, 1)
    assert (second.stored, second.duplicates, second.pending) == (1, 1, 0)


def test_configured_key_attribute_as_a_field(store: Path, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "fb.jsonl", [{"message.id": "m1", "thumbs": "down"}])
    with connect(store) as con:
        with pytest.raises(InputError, match="unknown field"):
            F.ingest_file(con, path)  # without the key, message.id is not a field
        stats = F.ingest_file(con, path, key="message.id")
        assert stats.stored == 1
        assert con.execute("SELECT key_attribute, key_value FROM feedback").fetchone() \
            == ("message.id", "m1")


def test_attribute_keyed_feedback_resolves_when_the_trace_arrives(store: Path) -> None:
    with connect(store) as con:
        F.ingest_records(con, [
            {"key": {"session.id": "s9"}, "thumbs": "down", "at": "2026-12-06T10:30:00Z"},
            {"key": {"order": "42"}, "score": 2},
            {"trace_id": "t7", "thumbs": "up"},
        ], source="test")
        assert F.summary(con)["unresolved"] == 3
        assert F.resolve(con) == 0
        # two turns of the session: the latest one before the feedback wins
        add_trace(con, "turn-1", start=dt.datetime(2026, 12, 6, 10, 0),
                  attributes={"session.id": "s9"})
        add_trace(con, "turn-2", start=dt.datetime(2026, 12, 6, 10, 20),
                  attributes={"session.id": "s9"})
        add_trace(con, "turn-3", start=dt.datetime(2026, 12, 6, 11, 0),
                  attributes={"session.id": "s9"})
        add_trace(con, "t7")
        add_trace(con, "o", join_key="42")
        assert F.resolve(con) == 2  # order=42 matches only through join_key, not named here
        assert F.resolve(con, join_key_attribute="order") == 1
        got = dict(con.execute("SELECT key_value, trace_id FROM feedback").fetchall())
        summary = F.summary(con)
    assert got == {"s9": "turn-2", "42": "o", "t7": "t7"}
    assert (summary["resolved"], summary["unresolved"]) == (3, 0)


def test_user_ids_redacted(store: Path) -> None:
    rec = {"trace_id": "t1", "thumbs": "up", "user_id": "ana@example.org", "at": "2026-12-06"}
    with connect(store) as con:
        F.ingest_records(con, [rec], redact_user_ids="hash")
        F.ingest_records(con, [rec], redact_user_ids="drop")  # same record: not again
        F.ingest_records(con, [{**rec, "trace_id": "t2"}], redact_user_ids="drop")
        users = con.execute("SELECT key_value, user_id FROM feedback ORDER BY 1").fetchall()
        salt = user_salt(con)
    assert users == [("t1", hash_user_id("ana@example.org", salt)), ("t2", None)]
    assert "ana" not in users[0][1]


def test_feedback_view_the_users_label_of_a_trace(store: Path) -> None:
    def at(minute: int) -> str:
        return f"2026-12-06T10:{minute:02d}:00Z"

    with connect(store) as con:
        for t in ("t1", "t2", "t3"):
            add_trace(con, t)
        F.ingest_records(con, [
            # t1: ana says up, then down, then comments: her thumbs is down
            {"trace_id": "t1", "user_id": "ana", "thumbs": "up", "at": at(0)},
            {"trace_id": "t1", "user_id": "ana", "thumbs": "down", "labels": ["slow"],
             "at": at(1)},
            {"trace_id": "t1", "user_id": "ana", "comment": "too slow", "at": at(2)},
            # t2: two users up, one down: up; scores averaged over users' latest
            {"trace_id": "t2", "user_id": "a", "thumbs": "up", "score": 5, "at": at(0)},
            {"trace_id": "t2", "user_id": "b", "thumbs": "up", "score": 1, "at": at(1)},
            {"trace_id": "t2", "user_id": "b", "score": 3, "at": at(2)},
            {"trace_id": "t2", "user_id": "c", "thumbs": "down", "labels": ["wrong price"],
             "at": at(3)},
            # t3: a tie: the latest thumbs wins
            {"trace_id": "t3", "user_id": "a", "thumbs": "down", "at": at(0)},
            {"trace_id": "t3", "user_id": "b", "thumbs": "up", "labels": ["b", "a"],
             "at": at(1)},
            {"trace_id": "nowhere", "thumbs": "down"},
        ])
    with connect(store, read_only=True) as con:
        F.feedback_view(con)
        rows = con.execute("SELECT trace_id, users, thumbs_up, thumbs_down, thumbs, score, "
                           "labels, comments FROM feedback_by_trace ORDER BY 1").fetchall()
    assert rows == [
        ("t1", 1, 0, 1, -1, None, ["slow"], 1),
        ("t2", 3, 2, 1, 1, 4.0, ["wrong price"], 0),
        ("t3", 2, 1, 1, 1, None, ["a", "b"], 0),
    ]


def test_cli_add_reads_the_monitor_file(tmp_path: Path, monitor_store) -> None:
    monitor = tmp_path / "monitor.yaml"
    monitor.write_text("scenario: shop.yaml\nsources: [received/]\n"
                       f"store: {{{monitor_store.yaml}}}\nfeedback: {{key: session.id}}\n")
    good = write_lines(tmp_path / "fb.jsonl", [{"session.id": "s1", "thumbs": "down",
                                                 "user_id": "ana"}])
    bad = write_lines(tmp_path / "bad.jsonl", [{"session.id": "s1", "score": 9}])
    group = Commands()
    group.add_command(F.feedback_group)
    runner = CliRunner()
    done = runner.invoke(group, ["feedback", "add", str(monitor), str(good)])
    assert done.exit_code == 0, done.output
    assert "1 records, 1 stored" in done.output
    again = runner.invoke(group, ["feedback", "add", str(monitor), str(good)])
    assert "0 stored, 1 already stored" in again.output
    failed = runner.invoke(group, ["feedback", "add", str(monitor), str(bad)])
    assert failed.exit_code == 2
    assert f"{bad} line 1: score" in failed.output
    with monitor_store.connect() as con:
        assert con.execute("SELECT key_attribute, user_id LIKE 'u-%' FROM feedback"
                           ).fetchall() == [("session.id", True)]
    helped = runner.invoke(group, ["feedback", "serve", "--help"])
    assert "Examples:" in helped.output and "Authorization: Bearer" in helped.output


# -- the HTTP endpoint ------------------------------------------------------------------------


@pytest.fixture
def endpoint(store: Path):
    """A running endpoint on 127.0.0.1, a free port; always shut down."""
    server = F.make_server(store, token="s3cret-token", max_body=20_000)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert not thread.is_alive()


def request(server, method: str, path: str, body=None, *, token: str | None = "s3cret-token",
            ctype: str = "application/json", raw: bytes | None = None):
    con = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    headers = {"Content-Type": ctype}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    try:
        con.request(method, path, body=data, headers=headers)
        answer = con.getresponse()
        return answer.status, json.loads(answer.read() or b"null")
    finally:
        con.close()


def test_endpoint_needs_the_token(endpoint) -> None:
    rec = {"trace_id": "t1", "thumbs": "down"}
    assert request(endpoint, "POST", "/feedback", rec, token=None)[0] == 401
    assert request(endpoint, "POST", "/feedback", rec, token="wrong")[0] == 401
    assert request(endpoint, "GET", "/feedback/stats", token=None)[0] == 401
    status, stats = request(endpoint, "GET", "/feedback/stats")
    assert status == 200 and stats["store"]["records"] == 0


def test_endpoint_stores_good_and_counts_bad(endpoint, store: Path) -> None:
    with connect(store) as con:
        add_trace(con, "t1")
    status, answer = request(endpoint, "POST", "/feedback",
                             [{"trace_id": "t1", "thumbs": "down", "feedback_id": "f1"},
                              {"key": {"session.id": "s"}, "score": 3}])
    assert status == 200, answer
    assert (answer["stored"], answer["resolved"], answer["unresolved"]) == (2, 1, 1)
    again = request(endpoint, "POST", "/feedback", {"trace_id": "t1", "thumbs": "down",
                                                    "feedback_id": "f1"})[1]
    assert (again["stored"], again["duplicates"]) == (0, 1)
    status, answer = request(endpoint, "POST", "/feedback",
                             [{"trace_id": "t1", "thumbs": "up"},
                              {"trace_id": "t1", "thumbs": "sideways"}])
    assert status == 400
    assert answer["errors"] == [{"index": 1, "field": "thumbs",
                                 "error": "'sideways' is not valid; give \"up\" or \"down\""}]
    assert "nothing was stored" in answer["error"]
    assert request(endpoint, "POST", "/feedback", raw=b"{nope")[0] == 400
    assert request(endpoint, "POST", "/feedback", {"trace_id": "t1"}, ctype="text/plain"
                   )[0] == 415
    assert request(endpoint, "POST", "/feedback", raw=b" " * 30_000)[0] == 413
    assert request(endpoint, "POST", "/elsewhere", {})[0] == 404
    stats = request(endpoint, "GET", "/feedback/stats")[1]
    assert stats["server"] == {"requests": 6, "stored": 2, "duplicates": 1, "rejected": 2}
    assert stats["store"]["records"] == 2 and stats["store"]["rejected"] == 2
    assert stats["store"]["unresolved"] == 1


def test_endpoint_refuses_other_host_names(endpoint) -> None:
    con = http.client.HTTPConnection("127.0.0.1", endpoint.server_address[1], timeout=10)
    try:
        con.request("GET", "/feedback/stats", headers={
            "Host": "evil.example", "Authorization": "Bearer s3cret-token"})
        assert con.getresponse().status == 403
    finally:
        con.close()


def test_endpoint_concurrent_posts(endpoint, store: Path) -> None:
    def post(i: int) -> int:
        return request(endpoint, "POST", "/feedback", [
            {"trace_id": f"t{i}", "thumbs": "up", "at": "2026-12-06T10:00:00Z"},
            {"trace_id": "shared", "score": 5, "at": "2026-12-06T10:00:00Z"}])[0]

    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(post, range(12)))
    assert statuses == [200] * 12
    with connect(store) as con:
        assert con.execute("SELECT count(*) FROM feedback").fetchone()[0] == 13


def test_serve_warns_beyond_loopback_and_stops(store: Path, capsys) -> None:
    servers = []

    def ready(server) -> None:
        servers.append(server)
        threading.Thread(target=server.shutdown, daemon=True).start()

    counts = F.serve(store, "0.0.0.0", 0, ready=ready)
    assert counts == {}
    assert "listens beyond this machine" in capsys.readouterr().err
    assert servers[0].app.token  # generated


# -- feedback for unknown traces --------------------------------------------------------------


def test_a_file_line_for_an_unknown_trace_is_an_error_naming_it(tmp_path: Path,
                                                                 monitor_store) -> None:
    """`feedback add` of a line whose trace the store does not hold although it holds traffic
    that started more than `feedback.wait` after the feedback: exit 2 naming the file, line
    and key, nothing stored; --keep-unknown stores it (counted as unknown); feedback newer
    than that waits for its trace, and a trace that arrives later resolves it."""
    monitor = tmp_path / "monitor.yaml"
    monitor.write_text("scenario: shop.yaml\nsources: [received/]\n"
                       f"store: {{{monitor_store.yaml}}}\nfeedback: {{wait: 2h}}\n")
    with monitor_store.connect() as con:
        add_trace(con, "t1", start=T0)
        add_trace(con, "t2", start=T0 + dt.timedelta(hours=5))
    path = write_lines(tmp_path / "fb.jsonl", [
        {"trace_id": "t1", "thumbs": "up", "at": "2026-12-06T09:01:00Z"},
        {"trace_id": "typo", "thumbs": "down", "at": "2026-12-06T09:02:00Z"},
        {"trace_id": "later", "thumbs": "down", "at": "2026-12-06T13:30:00Z"}])
    group = Commands()
    group.add_command(F.feedback_group)
    runner = CliRunner()
    refused = runner.invoke(group, ["feedback", "add", str(monitor), str(path)])
    assert refused.exit_code == 2, refused.output
    out = " ".join(refused.output.split())
    assert f"{path} line 2, field `trace_id`: no stored trace has this id ('typo')" in out
    assert "more than 2 h older than the newest stored trace (2026-12-06T14:00Z)" in out
    assert "line 3" not in out and "--keep-unknown" in out
    with monitor_store.connect() as con:
        assert con.execute("SELECT count(*) FROM feedback").fetchone()[0] == 0
    kept = runner.invoke(group, ["feedback", "add", str(monitor), str(path), "--keep-unknown"])
    assert kept.exit_code == 0, kept.output
    assert "3 stored" in kept.output and "1 in the store wait for their trace, 1 are for " \
        "unknown traces" in kept.output
    with monitor_store.connect() as con:
        add_trace(con, "later", start=T0 + dt.timedelta(hours=4, minutes=29))
        assert F.resolve(con) == 1
        s = F.summary(con, dt.timedelta(hours=2))
        assert (s["resolved"], s["unresolved"], s["unknown"]) == (2, 1, 1)
        # with a longer wait the typo's record would still wait
        assert F.summary(con, dt.timedelta(hours=6))["unknown"] == 0


def test_an_empty_store_makes_no_trace_unknown(store: Path, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "fb.jsonl", [{"trace_id": "x", "thumbs": "up",
                                                 "at": "2020-01-01T00:00:00Z"}])
    with connect(store) as con:
        stats = F.ingest_file(con, path, refuse_unknown=True)
    assert (stats.stored, stats.unresolved, stats.unknown) == (1, 1, 0)


def test_the_endpoint_rejects_and_counts_feedback_for_unknown_traces(endpoint, store) -> None:
    with connect(store) as con:
        add_trace(con, "t1", start=T0)
        add_trace(con, "t2", start=T0 + dt.timedelta(hours=26))
    status, answer = request(endpoint, "POST", "/feedback", [
        {"trace_id": "t1", "thumbs": "up", "at": "2026-12-06T09:05:00Z"},
        {"trace_id": "gone", "thumbs": "down", "at": "2026-12-06T09:05:00Z"}])
    assert status == 400, answer
    assert answer["rejected"] == 1 and answer["errors"][0]["index"] == 1
    assert answer["errors"][0]["field"] == "trace_id"
    assert "its trace is not coming" in answer["errors"][0]["error"]
    # a record without `at` is dated on receipt: it waits for its trace
    status, answer = request(endpoint, "POST", "/feedback", {"trace_id": "soon", "thumbs": "up"})
    assert status == 200 and answer["unresolved"] == 1 and answer["unknown"] == 0
    stats = request(endpoint, "GET", "/feedback/stats")[1]
    assert stats["server"]["rejected"] == 1 and stats["store"]["rejected"] == 1
    assert stats["store"]["records"] == 1


def test_retention_deletes_unresolved_feedback_given_before_it(store: Path) -> None:
    from evalharness.monitor.store import apply_retention

    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    with connect(store) as con:
        add_trace(con, "old", start=now - dt.timedelta(days=40))
        add_trace(con, "new", start=now - dt.timedelta(days=1))
        F.ingest_records(con, [
            {"trace_id": "old", "thumbs": "down"}, {"trace_id": "new", "thumbs": "up"},
            {"trace_id": "never", "thumbs": "up",
             "at": (now - dt.timedelta(days=31)).isoformat()},
            {"trace_id": "waiting", "thumbs": "up",
             "at": (now - dt.timedelta(days=29)).isoformat()}])
        assert apply_retention(con, 30) == 1
        left = con.execute("SELECT key_value FROM feedback ORDER BY 1").fetchall()
        assert left == [("new",), ("waiting",)]
        assert con.execute("SELECT trace_id FROM traces").fetchall() == [("new",)]
