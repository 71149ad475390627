"""The vLLM connector driven like vLLM drives it (tests/vllm_harness.py says which vLLM lines it mirrors), against
a real Manager. It has not run inside vLLM: vLLM cannot be installed here."""

import pytest

from manager import wait_until
from vllm_harness import BLOCK, MiniVllm


def prompt(seed: int, length: int) -> list[int]:
    return [(seed * 7919 + i * 104729) % 32000 for i in range(length)]


@pytest.fixture
def engines(manager):
    made = []

    def make(**kwargs):
        engine = MiniVllm(str(manager.data_dir), **kwargs)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.shutdown()


def test_miss_computes_everything_and_saves(engines):
    a = engines()
    request = a.add_request("a-1", prompt(1, 4 * BLOCK + 5))
    a.run()
    assert a.matched["a-1"] == [(0, False)]
    assert a.computed_tokens["a-1"] == 4 * BLOCK + 5
    a.assert_kv_exact(request, 4 * BLOCK + 5)


def test_saves_restored_by_another_instance_byte_exact(engines):
    a, b = engines(), engines()
    tokens = prompt(2, 4 * BLOCK)
    produced = a.add_request("p-1", tokens)
    a.run()
    restored = b.add_request("c-1", tokens)
    b.run()
    # The whole prompt hits: one token less, so vLLM computes the last one; every block loads asynchronously.
    assert b.matched["c-1"] == [(4 * BLOCK - 1, True)]
    assert b.computed_tokens["c-1"] == 1
    assert not b.load_errors
    for position in range(4):
        assert b.block_bytes(restored, position) == a.block_bytes(produced, position)
    b.assert_kv_exact(restored, 4 * BLOCK)


def test_partial_hit_loads_the_prefix_and_saves_the_rest(engines):
    a, b, c = engines(), engines(), engines()
    shared = prompt(3, 3 * BLOCK)
    a.add_request("p-2", shared)
    a.run()
    longer = shared + prompt(4, 2 * BLOCK + 3)
    partial = b.add_request("c-2", longer)
    b.run()
    assert b.matched["c-2"] == [(3 * BLOCK, True)]
    assert b.computed_tokens["c-2"] == 2 * BLOCK + 3
    b.assert_kv_exact(partial, len(longer))
    # b published blocks 3 and 4 it computed: a third instance now hits 5 full blocks.
    third = c.add_request("c-3", longer)
    c.run()
    assert c.matched["c-3"] == [(5 * BLOCK, True)]
    c.assert_kv_exact(third, len(longer))


def test_pending_while_pages_are_being_published_then_ready(engines):
    a, b = engines(), engines()
    tokens = prompt(5, 2 * BLOCK + 1)
    a.add_request("p-3", tokens)
    waiter = b.add_request("c-4", tokens)
    answers_while_unsealed = []

    def b_asks_while_a_has_not_sealed():
        # a's slots are allocated and written, not sealed: the Manager answers PENDING, vLLM gets None.
        b.step()
        answers_while_unsealed.extend(b.matched["c-4"])

    a.step(before_wait_for_save=b_asks_while_a_has_not_sealed)
    assert answers_while_unsealed == [(None, False)]
    a.run()
    # Once a's seal lands (background thread), a poll answers READY: vLLM's next ask gets the boundary.
    wait_until(lambda: (b.step() or b.matched["c-4"][-1][0] is not None), timeout_seconds=10,
               message="READY after the seal")
    assert b.matched["c-4"][-1] == (2 * BLOCK, True)
    b.run()
    b.assert_kv_exact(waiter, len(tokens))
    assert not b.load_errors


def test_invalid_lease_is_a_load_error_and_vllm_recomputes(engines, manager):
    a, b = engines(), engines()
    tokens = prompt(6, 3 * BLOCK + 2)
    a.add_request("p-5", tokens)
    a.run()
    victim = b.add_request("c-5", tokens)
    instances = manager.metric("orbitkv_instances")

    def stall_past_the_ttl(spec):
        # The worker stalls after copying (a long GC pause, a stuck stream) until its session lapses: the lease did
        # not stay valid for its whole life, so the copy must be discarded.
        b.worker.session.stop_heartbeats()
        wait_until(lambda: manager.metric("orbitkv_instances") < instances, timeout_seconds=30,
                   message="the worker's session lapsing")

    b.worker.after_copy = stall_past_the_ttl
    b.step()  # lookup READY (asynchronous load); the worker copies, stalls, and the release refuses the lease
    b.worker.after_copy = None
    assert b.matched["c-5"] == [(3 * BLOCK, True)]
    assert b.load_errors == set(victim.block_ids[:3]), "every block of the invalid lease is reported"
    assert victim.num_computed_tokens == 0, "vLLM (recompute policy) resumes from the first invalid block"
    # The worker's keeper registers a fresh session in the background (one registration after the loss); then the
    # request starts over: the scheduler asks again and the worker loads for real.
    assert b.worker.keeper.wait_for_session(10) is not None
    assert (b.worker.keeper.sessions_lost, b.worker.keeper.registrations) == (1, 2)
    b.run()
    assert b.matched["c-5"] == [(3 * BLOCK, True), (3 * BLOCK, True)]
    b.assert_kv_exact(victim, len(tokens))
