import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("PYTHONHASHSEED", "0")

from manager import ManagerProcess  # noqa: E402


# A short session ttl so a test can let a session lapse in seconds; heartbeats every third of it keep others alive.
SESSION_TTL_MS = 3000


@pytest.fixture(scope="session")
def manager_process():
    """One real Manager for the whole run (a JVM start costs 10-20 s on 2 shared cores); every test checks for leaks."""
    # The event-bus bridge door on an ephemeral port too (tests/test_bridge.py); the other tests use gRPC.
    process = ManagerProcess({"session.ttl-ms": str(SESSION_TTL_MS), "bridge.port": "0"}).start()
    try:
        yield process
    finally:
        try:
            process.stop()
        finally:
            process.remove_data_dir()


@pytest.fixture
def manager(manager_process):
    yield manager_process
    manager_process.assert_no_leaks()


@pytest.fixture
def small_pool(tmp_path):
    """A Manager of its own: a 4 MiB pool and no SSD, so pool pressure evicts (nothing comes back from SSD)."""
    (tmp_path / "data").mkdir()
    process = ManagerProcess({"pool.size": "4MiB", "ssd.enabled": "false", "session.ttl-ms": "3000"},
                             data_dir=str(tmp_path / "data")).start()
    try:
        yield process
    finally:
        process.stop()
