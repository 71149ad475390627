"""A real OrbitKV Manager for Python tests: the fat jar started as a subprocess, stopped by its pid.

Like the Java ``RunningManager``: its own temporary data directory, a small pool in /dev/shm, gRPC on the Unix socket
and an ephemeral TCP port, metrics on an ephemeral port. ``stop()`` sends SIGTERM to the pid it started, waits, and
checks that the pool file and socket are gone; ``assert_no_leaks()`` reads the real /metrics endpoint.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
READY_LINE = re.compile(r"OrbitKV Manager ready: grpc unix:(?P<socket>\S+) and tcp (?P<host>[^:\s]+):(?P<port>\d+), "
                        r"metrics http://(?P<mhost>[^:\s]+):(?P<mport>\d+)/metrics, pool (?P<pool>\d+) bytes at "
                        r"(?P<poolpath>\S+), token (?P<token>[^,\s]+), bridge "
                        r"(?:tcp (?P<bhost>[^:\s]+):(?P<bport>\d+)|off)")
JVM_FLAGS = ["--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow"]


def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK) and _major(os.path.join(home, "bin", "java")) >= 25:
        return os.path.join(home, "bin", "java")
    for candidate in sorted(glob.glob("/usr/lib/jvm/*/bin/java")):
        if _major(candidate) >= 25:
            return candidate
    raise RuntimeError("no Java >= 25 found (set JAVA_HOME); ./scripts/test finds one for you")


def _major(java: str) -> int:
    out = subprocess.run([java, "-XshowSettings:properties", "-version"], capture_output=True, text=True).stderr
    match = re.search(r"java\.specification\.version = (\d+)", out)
    return int(match.group(1)) if match else 0


def jar_path() -> Path:
    jar = Path(os.environ.get("ORBITKV_JAR", REPO_ROOT / "app" / "target" / "orbitkv.jar"))
    if not jar.is_file():
        raise RuntimeError(f"{jar} is missing: build it first (./scripts/orbitkv --help builds it, ./scripts/test too)")
    return jar


class ManagerProcess:
    def __init__(self, settings: dict[str, str] | None = None, data_dir: str | None = None):
        self.owns_data_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="orbitkv-py-"))
        self.settings = {"pool.size": "64MiB", "ssd.capacity": "64MiB", **(settings or {})}
        self.process: subprocess.Popen | None = None
        self.output: list[str] = []

    def start(self, timeout_seconds: float = 90.0) -> "ManagerProcess":
        command = [java_executable(), *JVM_FLAGS, "-jar", str(jar_path()), "manager", "--data-dir", str(self.data_dir),
                   "--grpc-port", "0", "--metrics-port", "0"]
        for key, value in self.settings.items():
            command += ["--set", f"{key}={value}"]
        self.process = subprocess.Popen(command, cwd=self.data_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, start_new_session=True)
        ready = threading.Event()
        match_holder = {}

        def pump():
            for line in self.process.stdout:
                self.output.append(line.rstrip())
                found = READY_LINE.search(line)
                if found:
                    match_holder["m"] = found
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(timeout_seconds) or "m" not in match_holder:
            self.kill()
            raise RuntimeError("the Manager did not start:\n" + "\n".join(self.output[-40:]))
        m = match_holder["m"]
        self.socket = m.group("socket")
        self.tcp_port = int(m.group("port"))
        self.metrics_port = int(m.group("mport"))
        self.pool_path = m.group("poolpath")
        self.token = Path(m.group("token")).read_text().strip()
        # The co-located channel's socket (engine.colocated-socket, on by default beside the data directory's).
        self.colocated_socket = str(self.data_dir / "colocated.sock")
        # The event-bus bridge door's port when the settings turned it on (bridge.port), else None.
        self.bridge_port = int(m.group("bport")) if m.group("bport") else None
        return self

    @property
    def pid(self) -> int:
        return self.process.pid

    def client(self, tcp: bool = False):
        from orbitkv import OrbitKvClient

        if tcp:
            return OrbitKvClient.connect_tcp("127.0.0.1", self.tcp_port, self.token)
        return OrbitKvClient.connect_unix(self.socket, self.token)

    def colocated_client(self, fallback: bool = True):
        """Over the co-located channel; requests above its frame bound over gRPC unless ``fallback`` is False."""
        from orbitkv import OrbitKvClient

        return OrbitKvClient.connect_colocated(self.colocated_socket, self.token,
                                               grpc_target="unix:" + self.socket if fallback else None)

    def bridge_client(self):
        from orbitkv import OrbitKvClient

        return OrbitKvClient.connect_bridge("127.0.0.1", self.bridge_port, self.token)

    def scrape(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=20) as response:
            return response.read().decode()

    def metric(self, name_and_labels: str) -> float:
        body = self.scrape()
        for line in body.splitlines():
            if line.startswith(name_and_labels + " "):
                return float(line[len(name_and_labels) + 1:].strip())
        raise AssertionError(f"metric {name_and_labels} not in the scrape")

    def assert_no_leaks(self) -> None:
        """Nothing a test did may leave a lease, a pinned image or an outstanding query behind."""
        names = ["orbitkv_leases_active", "orbitkv_leases_bytes", "orbitkv_images_pinned", "orbitkv_queries_outstanding"]
        if self.bridge_port is not None:
            names.append("orbitkv_bridge_outstanding")
        for name in names:
            value = self.metric(name)
            assert value == 0, f"{name} = {value} after the test"

    def stop(self) -> None:
        """SIGTERM to the pid this object started, then waits; checks the pool file and socket are removed."""
        if self.process is None:
            return
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError("the Manager did not stop within 60 s of SIGTERM")
        self.process = None
        assert not os.path.exists(self.pool_path), f"pool file {self.pool_path} left behind"
        assert not os.path.exists(self.socket), f"socket {self.socket} left behind"
        assert not os.path.exists(self.colocated_socket), f"socket {self.colocated_socket} left behind"

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def crash(self) -> None:
        """SIGKILL to the pid this object started (a Manager that dies mid-step), then removes what a killed Manager
        leaves behind (its pool file in /dev/shm and its socket), so the test leaves nothing and a restart on the
        same data directory starts clean."""
        self.kill()
        self.process = None
        for leftover in (self.pool_path, self.socket, self.colocated_socket):
            if os.path.exists(leftover):
                os.unlink(leftover)

    def remove_data_dir(self) -> None:
        if self.owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def wait_until(condition, timeout_seconds: float = 20.0, interval_seconds: float = 0.02, message: str = "condition"):
    """Awaits a condition (never a fixed sleep standing in for one)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} not reached within {timeout_seconds} s")
        time.sleep(interval_seconds)
