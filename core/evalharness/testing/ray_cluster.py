"""A Ray cluster of this machine, for tests and benchmarks: `ray start` nodes in the
foreground (``--block``), each in its own process group, stopped by process id — never
``ray stop``, which would stop every Ray process of the machine — and listening on 127.0.0.1
only (a plain ``ray start`` listens on every interface; docs/scale.md).

Example (it starts real nodes, so it is no doctest)::

    with localhost_cluster([2]) as address:
        run(..., executor="ray", address=address)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
"""What the nodes and the driver need here: no usage stats, and no token (a cluster of this
machine only, which nothing else can reach through it)."""


JOIN_ON_LOOPBACK = """
import sys
import ray._private.services as services
services.get_node_ip_address = lambda address=None: "127.0.0.1"
from ray.scripts.scripts import main
sys.argv[0] = "ray"
main()
"""
"""`ray` (its command line, the arguments after ``-c``) for a node that joins the head on
127.0.0.1 and keeps that address: Ray would replace it with the machine's address, and its
servers would listen on every interface."""


def ray_command() -> str:
    found = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    if found is None:
        raise RuntimeError("the `ray` command is missing: pip install -e '.[ray]'")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def localhost_cluster(cpus: Sequence[int], *, object_store_mb: int = 80,
                      cwd: Path | None = None) -> Iterator[str]:
    """A head node with ``cpus[0]`` CPUs and one more node per further entry; the head's
    address (``127.0.0.1:PORT``) while it lasts. Set :data:`ENV` in the driver's
    environment too."""
    ray_bin, port = ray_command(), _free_port()
    env = {**os.environ, **ENV}
    common = ["--block", "--disable-usage-stats", "--node-ip-address", "127.0.0.1",
              "--object-store-memory", str(object_store_mb * 1024 * 1024)]
    address = f"127.0.0.1:{port}"
    nodes: list[subprocess.Popen] = []

    def start(command: list[str], args: list[str], n: int, extra: dict[str, str]) -> None:
        nodes.append(subprocess.Popen([*command, "start", *args, "--num-cpus", str(n), *common],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      env={**env, **extra}, start_new_session=True, cwd=cwd))

    try:
        # the head keeps 127.0.0.1 as its address, so its servers bind to it (Ray's switch
        # for "no multi-machine cluster": a node with it refuses to join one, so the others
        # keep 127.0.0.1 through JOIN_ON_LOOPBACK instead)
        start([ray_bin], ["--head", "--port", str(port), "--include-dashboard", "false"],
              cpus[0], {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        for n in cpus[1:]:
            start([sys.executable, "-c", JOIN_ON_LOOPBACK], ["--address", address], n, {})
        time.sleep(1.0)  # the raylets register after the head's port opens
        yield address
    finally:
        for node in nodes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGTERM)
        for node in nodes:
            try:
                node.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.pid, signal.SIGKILL)
                node.wait(timeout=10)
        _forget(port)


def _forget(port: int) -> None:
    """Remove Ray's note of "the cluster of this machine" when it names ours: a later
    ``ray.init()`` would try to join the stopped cluster."""
    import tempfile

    note = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    with contextlib.suppress(OSError):
        if note.read_text().strip().endswith(f":{port}"):
            note.unlink()
