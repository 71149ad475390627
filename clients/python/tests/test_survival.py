"""Production faults, for both adapters, against real Managers started and stopped by these tests: a Manager restarted
in the middle of a run, an engine started before any Manager, a Manager killed in the middle of a step.

What must hold (both adapters): the engine's calls never raise; while there is no session the cache is off (misses,
load errors, skipped saves) and nothing wrong is loaded (every restored K/V value is checked against the model); each
adapter role registers again by itself, once per loss, within two session ttls of the Manager's return; one WARNING
per outage, not one per attempt. Each test owns its Manager (not the shared one of conftest.py)."""

import logging
import threading
import time

import pytest
import torch

from manager import ManagerProcess, wait_until
from test_sglang_storage import PAGE, create_like_sglang, fill, page_keys
from test_vllm_connector import prompt
from vllm_harness import BLOCK, MiniVllm

# Long enough that "within two ttls" measures the adapters, not a JVM that just started on two loaded cores (its
# first calls take seconds there); the heartbeat, which finds the loss, runs every third of it.
TTL_MS = 5000
TTL_SECONDS = TTL_MS / 1000


@pytest.fixture
def own_manager(tmp_path):
    """A Manager of the test's own on a fixed data directory (so it can be stopped, killed and started again)."""
    process = ManagerProcess({"session.ttl-ms": str(TTL_MS)}, data_dir=str(tmp_path / "data"))
    (tmp_path / "data").mkdir()
    yield process
    try:
        if process.process is not None:
            process.assert_no_leaks()
    finally:
        process.stop()


@pytest.fixture
def vllms(own_manager):
    made = []

    def make(**kwargs):
        made.append(MiniVllm(str(own_manager.data_dir), **kwargs))
        return made[-1]

    yield make
    for engine in made:
        engine.shutdown()


@pytest.fixture
def sglangs(own_manager):
    made = []

    def make(**kwargs):
        made.append(create_like_sglang(str(own_manager.data_dir), **kwargs))
        return made[-1]

    yield make
    for backend, _ in made:
        backend.close()


def keepers(*engines):
    return [k for e in engines for k in (e.scheduler.keeper, e.worker.keeper)]


def warnings_about(caplog, text):
    return [r for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()]


# --- vLLM ------------------------------------------------------------------------------------------------------------
def test_vllm_manager_restart_mid_run(own_manager, vllms, caplog):
    own_manager.start()
    a, b = vllms(), vllms()
    first = prompt(40, 3 * BLOCK + 2)
    a.add_request("a-1", first)
    a.run()
    b.add_request("b-1", first)
    b.run()
    assert b.matched["b-1"] == [(3 * BLOCK, True)]

    own_manager.stop()
    # No Manager: misses, no exception, exact K/V (computed), saves skipped.
    down = b.add_request("b-down", prompt(41, 2 * BLOCK + 1))
    b.run()
    assert b.matched["b-down"] == [(0, False)]
    b.assert_kv_exact(down, 2 * BLOCK + 1)

    with caplog.at_level(logging.WARNING, logger="orbitkv"):
        own_manager.start()
        back = time.monotonic()
        # Every role of both engines registers again by itself: the heartbeat finds its session unknown.
        wait_until(lambda: all(k.registrations == 2 for k in keepers(a, b)), timeout_seconds=2 * TTL_SECONDS,
                   message="all four roles registered again")
        within = time.monotonic() - back
    assert within <= 2 * TTL_SECONDS
    assert [k.sessions_lost for k in keepers(a, b)] == [1, 1, 1, 1]
    assert len(warnings_about(caplog, "lost")) == 4, "one WARNING per role and outage"

    # Lookups hit again: a publishes a new prompt, b restores it byte for byte.
    second = prompt(42, 4 * BLOCK)
    a.add_request("a-2", second)
    a.run()
    restored = b.add_request("b-2", second)
    b.run()
    assert b.matched["b-2"] == [(4 * BLOCK - 1, True)]
    assert not b.load_errors
    b.assert_kv_exact(restored, 4 * BLOCK)
    # The first prompt hits (recovered from SSD) or misses; whatever loads is exact.
    again = b.add_request("b-3", first)
    b.run()
    b.assert_kv_exact(again, len(first))


def test_vllm_starts_without_a_manager_then_connects(own_manager, vllms, caplog):
    with caplog.at_level(logging.WARNING, logger="orbitkv"):
        a = vllms()  # the data directory has no token and no socket yet
        assert len(warnings_about(caplog, "no Manager")) == 2, "one WARNING per role"
        assert a.scheduler.session is None and a.worker.session is None
        tokens = prompt(50, 3 * BLOCK + 1)
        early = a.add_request("early", tokens)
        a.run()
        assert a.matched["early"] == [(0, False)]
        a.assert_kv_exact(early, len(tokens))

        own_manager.start()
        for keeper in keepers(a):
            assert keeper.wait_for_session(30) is not None
        assert len(warnings_about(caplog, "no Manager")) == 2, "failed attempts are counted, not logged"
    assert all(k.failed_attempts >= 1 for k in keepers(a))

    produced = a.add_request("later", prompt(51, 3 * BLOCK))
    a.run()
    b = vllms()
    restored = b.add_request("b-later", prompt(51, 3 * BLOCK))
    b.run()
    assert b.matched["b-later"] == [(3 * BLOCK - 1, True)]
    for position in range(3):
        assert b.block_bytes(restored, position) == a.block_bytes(produced, position)


def test_vllm_manager_killed_mid_step(own_manager, vllms):
    own_manager.start()
    a, b = vllms(), vllms()
    tokens = prompt(60, 3 * BLOCK + 3)
    a.add_request("p", tokens)
    a.run()
    victim = b.add_request("c", tokens)
    # The Manager dies after the worker copied and before it released: the release fails, the copy is discarded.
    b.worker.after_copy = lambda spec: own_manager.crash()
    b.step()
    b.worker.after_copy = None
    assert b.matched["c"] == [(3 * BLOCK, True)]
    assert b.load_errors == set(victim.block_ids[:3])
    assert victim.num_computed_tokens == 0
    b.run()  # no Manager any more: the lookup misses and vLLM recomputes
    assert b.matched["c"][-1] == (0, False)
    b.assert_kv_exact(victim, len(tokens))
    # A save in flight when the Manager is gone: skipped, the request still finishes and its blocks are freed.
    saver = a.add_request("p-2", prompt(61, 2 * BLOCK + 1))
    a.run()
    a.assert_kv_exact(saver, 2 * BLOCK + 1)


# --- SGLang -----------------------------------------------------------------------------------------------------------
def test_sglang_manager_restart_mid_run(own_manager, sglangs, caplog):
    own_manager.start()
    (producer, producer_host), (consumer, consumer_host) = sglangs(), sglangs()
    keys = page_keys([(i * 13) % 4000 for i in range(3 * PAGE)])
    fill(producer_host, torch.arange(3 * PAGE), seed=31)
    assert all(producer.batch_set_v1(keys, torch.arange(3 * PAGE)))
    assert consumer.batch_exists(keys) == 3

    own_manager.stop()
    assert consumer.batch_exists(keys) == 0
    assert consumer.batch_get_v1(keys, torch.arange(3 * PAGE) + 10 * PAGE) == [False] * 3
    assert producer.batch_set_v1(keys, torch.arange(3 * PAGE)) == [False] * 3

    with caplog.at_level(logging.WARNING, logger="orbitkv"):
        own_manager.start()
        back = time.monotonic()
        # SGLang's prefetch, backup and scheduler threads all call at once: one registration per backend.
        stop = threading.Event()

        def hammer(backend):
            # Paced like SGLang's threads (a call per batch, not a spin that would starve every other thread).
            while not stop.wait(0.002):
                backend.batch_exists(keys)

        threads = [threading.Thread(target=hammer, args=(b,)) for b in (producer, consumer) for _ in range(3)]
        for thread in threads:
            thread.start()
        try:
            wait_until(lambda: producer.keeper.registrations == 2 and consumer.keeper.registrations == 2,
                       timeout_seconds=2 * TTL_SECONDS, message="both backends registered again")
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        within = time.monotonic() - back
    assert within <= 2 * TTL_SECONDS
    assert (producer.keeper.sessions_lost, consumer.keeper.sessions_lost) == (1, 1)
    assert (producer.keeper.registrations, consumer.keeper.registrations) == (2, 2)
    assert len(warnings_about(caplog, "lost")) == 2

    assert all(producer.batch_set_v1(keys, torch.arange(3 * PAGE)))
    assert consumer.batch_get_v1(keys, torch.arange(3 * PAGE) + 10 * PAGE) == [True] * 3
    for i in range(3):
        assert torch.equal(consumer_host.get_data_page((10 + i) * PAGE), producer_host.get_data_page(i * PAGE))


def test_sglang_starts_without_a_manager_then_connects(own_manager, sglangs, caplog):
    with caplog.at_level(logging.WARNING, logger="orbitkv"):
        backend, host = sglangs()
        assert len(warnings_about(caplog, "no Manager")) == 1
    keys = page_keys(list(range(300, 300 + 2 * PAGE)))
    fill(host, torch.arange(2 * PAGE), seed=41)
    assert backend.batch_exists(keys) == 0
    assert backend.batch_set_v1(keys, torch.arange(2 * PAGE)) == [False, False]
    assert backend.batch_get_v1(keys, torch.arange(2 * PAGE)) == [False, False]
    assert backend.get_stats()["connected"] is False

    own_manager.start()
    assert backend.keeper.wait_for_session(30) is not None
    assert backend.batch_set_v1(keys, torch.arange(2 * PAGE)) == [True, True]
    assert backend.batch_exists(keys) == 2


def test_sglang_manager_killed_mid_get(own_manager, sglangs):
    own_manager.start()
    (producer, producer_host), (consumer, _) = sglangs(), sglangs()
    keys = page_keys(list(range(700, 700 + 3 * PAGE)))
    fill(producer_host, torch.arange(3 * PAGE), seed=51)
    assert all(producer.batch_set_v1(keys, torch.arange(3 * PAGE)))
    consumer.after_copy = lambda _keys: own_manager.crash()
    assert consumer.batch_get_v1(keys, torch.arange(3 * PAGE) + 10 * PAGE) == [False] * 3
    consumer.after_copy = None
    assert consumer.batch_exists(keys) == 0
    assert producer.batch_set_v1(keys, torch.arange(3 * PAGE)) == [False] * 3
