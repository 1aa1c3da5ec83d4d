"""Shared fixtures: run the CLI in a subprocess, write small scenarios, build test plugins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Runs in this suite must not append to the job summary of the CI that runs the suite
# (tests that check the append set the variable themselves).
os.environ.pop("GITHUB_STEP_SUMMARY", None)

ROOT = Path(__file__).resolve().parent.parent
SHOP = ROOT / "scenarios" / "shop.yaml"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the package's sources once, up front. The suite starts evalharness in a
    subprocess hundreds of times; where ``PYTHONDONTWRITEBYTECODE`` is set (as on this CI's
    machines) none of them writes its compiled modules, so each compiled every module of the
    core and the plugins again: 0.6 s of each start. Explicit compilation writes them anyway,
    and a module whose source is newer is compiled again as usual."""
    import compileall

    for folder in ("core", "plugins", "scenarios"):
        compileall.compile_dir(ROOT / folder, quiet=2)


def shop_text_elsewhere() -> str:
    """shop.yaml's text for a copy kept outside ``scenarios/``: its relative paths made
    absolute, and its system (the ``shop.assistant`` package, found from the scenario's
    folder) named by the package folder's absolute path."""
    text = SHOP.read_text(encoding="utf-8")
    assert "system: shop.assistant:answer" in text
    text = text.replace("system: shop.assistant:answer", "system: shop/assistant:answer")
    return text.replace(" shop/", f" {SHOP.parent}/shop/")


class CLIResult:
    """What a user sees of one command: its exit code, stdout and stderr."""

    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    @classmethod
    def of(cls, proc: subprocess.CompletedProcess) -> CLIResult:
        return cls(proc.returncode, proc.stdout, proc.stderr)

    def __repr__(self) -> str:
        return f"<exit {self.code}\nstdout:\n{self.out}\nstderr:\n{self.err}>"


def run_cli(*args: str | Path, cwd: Path | None = None, env: dict | None = None,
            timeout: float = 300, separate: bool = False) -> CLIResult:
    """Run ``evalharness ARGS`` as a user would: its exit code, stdout and stderr.

    By default in this process: the console script's ``main`` (plugins loaded from the entry
    points, their commands added, one paragraph and exit code 2 for bad input) under click's
    runner, with the environment, the working folder and ``sys.argv`` of the command — the
    same outcome without a new interpreter's start-up, most of a second each, which made the
    suite a minute longer. ``separate=True`` starts ``python -m evalharness.cli`` in a
    subprocess (``timeout`` applies there), for what only a process of its own shows:
    signals, a hang, Ray's driver, what happens at interpreter start-up or exit."""
    if separate:
        full_env = {k: v for k, v in os.environ.items() if k != "EVALHARNESS_LOAD_PLUGINS"}
        full_env.update(env or {})
        proc = subprocess.run(
            [sys.executable, "-m", "evalharness.cli", *map(str, args)],
            cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout,
            stdin=subprocess.DEVNULL)
        return CLIResult.of(proc)
    return _run_here([str(a) for a in args], cwd, env)


def _run_here(args: list[str], cwd: Path | None, env: dict | None) -> CLIResult:
    """``evalharness ARGS`` in this process (see :func:`run_cli`)."""
    import traceback

    from click.testing import CliRunner

    from evalharness import cli as cli_module

    here, argv = os.getcwd(), sys.argv
    with CliRunner().isolation(env={"EVALHARNESS_LOAD_PLUGINS": None, **(env or {})}) as (
            out, err, _):
        sys.argv = ["evalharness", *args]
        try:
            if cwd is not None:
                os.chdir(cwd)
            cli_module.main()
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:  # sys.exit("message"): printed, exit code 1
                print(exc.code, file=sys.stderr)
                code = 1
        except Exception:  # what the interpreter would print before exiting 1
            traceback.print_exc()
            code = 1
        finally:
            os.chdir(here)
            sys.argv = argv
            sys.stdout.flush()
            sys.stderr.flush()
        return CLIResult(code, out.getvalue().decode("utf-8", "replace"),
                         err.getvalue().decode("utf-8", "replace"))


@pytest.fixture
def cli():
    return run_cli


def another_run(run: Path, folder: Path) -> Path:
    """A copy of the run folder ``run`` at ``folder`` that is another run (its own start time,
    so its own run id): the B of a pairwise review or a comparison."""
    import shutil

    shutil.copytree(run, folder)
    manifest = json.loads((folder / "run.json").read_text())
    manifest["started_at"] = "2026-01-01T00:00:00+00:00"
    (folder / "run.json").write_text(json.dumps(manifest))
    return folder


def traced_shop():
    """scenarios/shop/traced.py, the instrumented shop, loaded once per session under a name
    of its own (it is not a package module; the tests that record or send traffic share it)."""
    import importlib.util

    name = "shop_traced_under_test"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scenarios" / "shop" / "traced.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


CASES = [
    {"id": "c1", "question": "cheap navy coats?", "gold": {
        "routes": ["sql"], "sql": "SELECT name FROM items WHERE price < 50",
        "relevant": None, "answer": "The Navy Coat at 40."}},
    {"id": "c2", "question": "how to wash wool?", "gold": {
        "routes": ["blog"], "relevant": {"d1": 2, "d2": 1, "d3": 0},
        "answer": "Hand wash wool at 30 degrees."}},
    {"id": "c3", "question": "cheap coats and how to care for them?", "gold": {
        "routes": ["sql", "blog"], "sql": "SELECT name FROM items WHERE price < 50",
        "relevant": {"d2": 2}, "answer": "The Navy Coat at 40; brush it."}},
]

TRACES = [
    {"case_id": "c1", "router": {"routes": ["sql"]},
     "text2sql": {"sql": "select NAME from items where price<50", "rows": [["Navy Coat"]]},
     "generator": {"answer": "The Navy Coat costs 40.", "latency_ms": 2.0,
                   "usage": {"prompt_tokens": 10, "completion_tokens": 5}}},
    {"case_id": "c2", "router": {"routes": ["blog", "sql"]},
     "retriever": {"ids": ["d9", "d2", "d1"]},
     "generator": {"answer": "", "latency_ms": 4.0}},
    {"case_id": "c3", "router": {"routes": ["sql", "blog"]},
     "text2sql": {"sql": "SELECT name FROM items WHERE price > 50"},
     "retriever": {"ids": ["d2", "d1"]},
     "generator": {"answer": "Navy Coat.", "latency_ms": 6.0,
                   "usage": {"prompt_tokens": 20, "completion_tokens": 2}}},
]

SMALL_SCENARIO = """
name: small
cases: cases.jsonl
traces: traces.jsonl
database: {build: items.sql}
evaluators:
  router: [route_accuracy]
  text2sql: [exact_match]
  retriever:
    - ranking: {k: [1, 2]}
  generator: [answer_present]
gates:
  - router.route_accuracy >= 0.5
"""


ITEMS_SQL = """
    CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price REAL);
    INSERT INTO items VALUES (1, 'Navy Coat', 40), (2, 'Camel Coat', 120);
"""


def small_scenario(folder: Path, *, gate: str = "router.route_accuracy >= 0.5",
                   traces: list[dict] = TRACES, system: str | None = None, extra: str = ""
                   ) -> Path:
    """The :func:`small` scenario in ``folder`` with one ``gate``, ``traces`` (default
    :data:`TRACES`) or, with ``system``, the source of system.py (``answer(case)``) instead
    of recorded traces, and ``extra`` YAML appended; returns the YAML path."""
    write_jsonl(folder / "cases.jsonl", CASES)
    write(folder / "items.sql", ITEMS_SQL)
    text = SMALL_SCENARIO.replace("router.route_accuracy >= 0.5", gate) + extra
    if system is not None:
        write(folder / "system.py", system)
        text = text.replace("traces: traces.jsonl", "system: system.py:answer")
    else:
        write_jsonl(folder / "traces.jsonl", traces)
    return write(folder / "small.yaml", text)


JUDGED_UNREACHABLE = """
judge: {backend: openai, base_url: "http://127.0.0.1:9/v1", model: judge-1, max_retries: 0,
        timeout_s: 5}
"""
"""A judge at a port nobody listens on (append to a scenario)."""


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """A small recorded-traces scenario with hand-checkable metrics; returns the YAML path."""
    return small_scenario(tmp_path)


@pytest.fixture(scope="session")
def shop_sample_run(tmp_path_factory):
    """A seeded 12-case sample of the shop scenario (``sample=12, seed=1``, no oracle reruns),
    run once per session through the Python API: ``(run folder, the report returned)``. Most
    of its cases fail end to end, so it also serves as the earlier run of ``--rerun-failed``."""
    import evalharness

    out = tmp_path_factory.mktemp("shop-sample") / "run"
    report = evalharness.run_scenario(SHOP, out=out, sample=12, seed=1, headroom=False)
    return out, report


@pytest.fixture
def shop_sample(shop_sample_run) -> Path:
    """The run folder of :func:`shop_sample_run` (do not write into it)."""
    return shop_sample_run[0]


@pytest.fixture(scope="session")
def shop_cli_run(tmp_path_factory) -> tuple[CLIResult, Path]:
    """The whole shop scenario run once per session through the CLI, as a user would
    (``evalharness scenario scenarios/shop.yaml --out DIR``, oracle headroom included):
    ``(the CLI's result, the run folder)``. Read it; never write into it."""
    out = tmp_path_factory.mktemp("shop-cli") / "run"
    return run_cli("scenario", SHOP, "--out", out, separate=True), out


@pytest.fixture(scope="session")
def postgres_dsn():
    """A scratch PostgreSQL database: $EVALHARNESS_TEST_POSTGRES_DSN, or a temporary server
    started from this machine's PostgreSQL binaries (initdb, pg_ctl) for the test session."""
    import glob
    import shutil
    import socket
    import tempfile

    dsn = os.environ.get("EVALHARNESS_TEST_POSTGRES_DSN")
    if dsn:
        yield dsn
        return
    found = shutil.which("initdb") or next(iter(sorted(glob.glob(
        "/usr/lib/postgresql/*/bin/initdb"))), None)
    if found is None:
        pytest.skip("no PostgreSQL server binaries (initdb) here; set "
                    "EVALHARNESS_TEST_POSTGRES_DSN to run the PostgreSQL tests")
    bindir = Path(found).resolve().parent
    folder = Path(tempfile.mkdtemp(prefix="evalharness-pg-", dir="/tmp"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        shutil.chown(folder, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = folder / "data"
    subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data), "--auth=trust",
                    "-U", "postgres", "-E", "UTF8", "--no-sync"], check=True,
                   capture_output=True)
    subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-w", "-l",
                    str(folder / "log"), "-o", f"-p {port} -k {folder} "
                    "-c listen_addresses=127.0.0.1 -c fsync=off", "start"],
                   check=True, capture_output=True)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                        "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


# --- the monitor's store on both backends ----------------------------------------------------


class MonitorStore:
    """A fresh monitor store on one backend: ``target`` is what
    :func:`evalharness.monitor.store.connect` opens (a DuckDB path or a PostgreSQL schema),
    ``yaml`` the keys MONITOR.yaml's ``store:`` mapping gives for it (``path: …`` or
    ``url: …, schema: …``), ``folder`` a scratch folder beside it."""

    def __init__(self, target, yaml: str, folder: Path) -> None:
        self.target, self.yaml, self.folder = target, yaml, folder

    def connect(self, read_only: bool = False):
        from evalharness.monitor.store import connect

        return connect(self.target, read_only=read_only)


class StoreBackend:
    """``duckdb`` or ``postgresql``; :meth:`new` makes a fresh store (PostgreSQL: a new
    schema of the session's server, dropped when the fixture's scope ends)."""

    def __init__(self, name: str, dsn: str | None) -> None:
        self.name, self.dsn, self.schemas = name, dsn, []

    def new(self, folder: Path, name: str = "store.duckdb") -> MonitorStore:
        if self.dsn is None:
            path = folder / name
            return MonitorStore(path, f'path: "{path}"', folder)
        import uuid

        from evalharness.monitor.store import PostgresTarget

        schema = f"t_{uuid.uuid4().hex[:12]}"
        self.schemas.append(schema)
        return MonitorStore(PostgresTarget(self.dsn, schema),
                            f'url: "{self.dsn}", schema: {schema}', folder)

    def copy(self, made: MonitorStore, folder: Path) -> MonitorStore:
        """A fresh store holding what ``made`` holds (a test that writes leaves a module's
        shared store as it was)."""
        if self.dsn is None:
            import shutil

            shutil.copy(made.target, folder / "copy.duckdb")
            return MonitorStore(folder / "copy.duckdb", f'path: "{folder / "copy.duckdb"}"',
                                folder)
        import psycopg

        fresh = self.new(folder)
        old, new = made.target.schema, fresh.target.schema
        with psycopg.connect(self.dsn, autocommit=True) as con:
            con.execute(f"CREATE SCHEMA {new}")
            for (table,) in con.execute("SELECT table_name FROM information_schema.tables "
                                        "WHERE table_schema = %s", [old]).fetchall():
                con.execute(f"CREATE TABLE {new}.{table} (LIKE {old}.{table} INCLUDING ALL)")
                con.execute(f"INSERT INTO {new}.{table} OVERRIDING SYSTEM VALUE "
                            f"SELECT * FROM {old}.{table}")
        return fresh

    def drop(self) -> None:
        if not self.schemas:
            return
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as con:
            for schema in self.schemas:
                con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        self.schemas.clear()


STORE_BACKENDS = ["duckdb", pytest.param("postgresql", marks=pytest.mark.postgresql)]
"""The params of :func:`store_backend`: every store test runs on both."""


@pytest.fixture(scope="module", params=STORE_BACKENDS)
def store_backend(request) -> StoreBackend:
    """The monitor store's backend a test runs on, ``duckdb`` then ``postgresql`` (a
    temporary server, :func:`postgres_dsn`; skipped without PostgreSQL's binaries or
    psycopg). Module-scoped, so a module's shared stores are built once per backend; a test
    takes a fresh store with :func:`monitor_store` (or ``store_backend.new(folder)``)."""
    pytest.importorskip("duckdb")
    if request.param == "duckdb":
        yield StoreBackend("duckdb", None)
        return
    pytest.importorskip("psycopg")
    backend = StoreBackend("postgresql", request.getfixturevalue("postgres_dsn"))
    try:
        yield backend
    finally:
        backend.drop()


@pytest.fixture
def monitor_store(store_backend: StoreBackend, tmp_path: Path):
    """A fresh store for one test on :func:`store_backend`'s backend (dropped afterwards)."""
    made = store_backend.new(tmp_path)
    yield made
    if store_backend.dsn is not None:
        import psycopg

        with psycopg.connect(store_backend.dsn, autocommit=True) as con:
            con.execute(f"DROP SCHEMA IF EXISTS {made.target.schema} CASCADE")
        store_backend.schemas.remove(made.target.schema)


# --- a headless browser for the pages' browser tests -------------------------------------------


def browser_program(program: str, package: str, what: str) -> str:
    """Where ``program`` is; skipped without it — except under CI (``$CI`` set), where it
    fails: .ci/run installs Debian's ``chromium`` and ``chromium-driver``."""
    import shutil

    found = shutil.which(program) or (
        f"/usr/bin/{program}" if Path(f"/usr/bin/{program}").exists() else None)
    if found is None:
        message = f"{program} is not installed (Debian: apt-get install {package}); {what}"
        if os.environ.get("CI"):
            pytest.fail(f"{message} — CI must install it (.ci/run does)")
        pytest.skip(message)
    return found


def headless_chromium(what: str):
    """A context manager: headless Chromium through WebDriver, offline (Selenium Manager
    never fetches a driver), quit on exit. ``what`` says which test needs it, for the skip."""
    import contextlib

    @contextlib.contextmanager
    def started():
        chromium = browser_program("chromium", "chromium", what)
        chromedriver = browser_program("chromedriver", "chromium-driver", what)
        from selenium import webdriver

        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu",
                    "--window-size=1280,1600", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run"):
            options.add_argument(arg)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("SE_OFFLINE", "1")  # never let Selenium Manager fetch a driver
            drv = webdriver.Chrome(options=options, service=webdriver.ChromeService(
                executable_path=chromedriver))
        drv.set_page_load_timeout(30)
        try:
            yield drv
        finally:
            drv.quit()

    return started()
