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
    process = ManagerProcess({"session.ttl-ms": str(SESSION_TTL_MS)}).start()
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
