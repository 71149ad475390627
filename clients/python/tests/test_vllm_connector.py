"""The vLLM connector driven like vLLM drives it (tests/vllm_harness.py says which vLLM lines it mirrors), against
a real Manager. It has not run inside vLLM: vLLM cannot be installed here."""

from types import SimpleNamespace

import pytest

from manager import wait_until
from vllm_harness import BLOCK, MiniVllm, Request


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


# --- lookups leave nothing behind; preemption, abort and resume in vLLM's order ------------------------------------
def empty_scheduler_output():
    return SimpleNamespace(scheduled_new_reqs=[], num_scheduled_tokens={}, finished_req_ids=set(),
                           scheduled_cached_reqs=SimpleNamespace(req_ids=[], new_block_ids=[], num_computed_tokens=[],
                                                                 resumed_req_ids=set()))


def test_a_lookup_lease_ends_with_the_step_that_answered(engines, manager):
    a, b = engines(), engines()
    tokens = prompt(20, 3 * BLOCK + 1)
    a.add_request("p-20", tokens)
    a.run()
    request = Request("c-20", tokens)
    # vLLM may ask and then not schedule the request this step (no free blocks): nothing may stay held.
    assert b.scheduler.get_num_new_matched_tokens(request, 0) == (3 * BLOCK, True)
    assert manager.metric("orbitkv_leases_active") >= 1, "the answer is backed by a lease while its step runs"
    b.scheduler.build_connector_meta(empty_scheduler_output())
    assert manager.metric("orbitkv_leases_active") == 0
    assert manager.metric("orbitkv_queries_outstanding") == 0
    assert b.scheduler.open_lookups() == 0
    # Asked again next step: a fresh demand, the same answer.
    assert b.scheduler.get_num_new_matched_tokens(request, 0) == (3 * BLOCK, True)
    b.scheduler.build_connector_meta(empty_scheduler_output())
    assert b.scheduler.requires_kv_delivery is False


def test_abort_while_the_lookup_is_pending_cancels_its_ticket(engines, manager):
    a, b = engines(), engines()
    tokens = prompt(21, 2 * BLOCK + 1)
    a.add_request("p-21", tokens)
    b.add_request("c-21", tokens)

    def b_asks_then_aborts():
        b.step()
        assert b.matched["c-21"] == [(None, False)]
        assert b.scheduler.open_lookups() == 1
        b.abort("c-21")
        assert b.scheduler.open_lookups() == 0
        assert manager.metric("orbitkv_queries_outstanding") == 0

    a.step(before_wait_for_save=b_asks_then_aborts)
    a.run()
    b.run()
    assert b.finished["c-21"].status == "FINISHED_ABORTED"


def test_abort_while_decoding_frees_everything(engines, manager):
    a = engines()
    running = a.add_request("d-22", prompt(22, 2 * BLOCK + 3), max_tokens=20)
    a.step()
    a.step()
    assert running.status == "RUNNING"
    a.abort("d-22")
    a.run()
    assert manager.metric("orbitkv_leases_active") == 0


@pytest.mark.parametrize("resumed_style", ["ids", "flags"])
def test_preempted_request_resumes_and_saves_only_its_own_blocks(engines, resumed_style):
    """A request preempted mid-decode loses its blocks, comes back through the lookup (its saved blocks load), is
    scheduled as resumed with a whole new block table, and keeps decoding into blocks it did not have. Newer vLLM
    names resumed requests in ``resumed_req_ids``, older vLLM flags them in ``resumed_from_preemption``: read wrongly,
    the new table is appended to the old one and later saves publish other blocks under this request's hashes."""
    a, checker = engines(resumed_style=resumed_style), engines()
    seed = {"ids": 23, "flags": 24}[resumed_style]  # the Manager is shared: each run its own prompt
    request = a.add_request("r-23", prompt(seed, 2 * BLOCK + 10), max_tokens=2 * BLOCK + 2)
    a.step()  # prefill: blocks 0 and 1 are saved
    a.step()
    a.preempt("r-23")
    a.run()
    assert a.matched["r-23"][0] == (0, False)
    assert a.matched["r-23"][-1] == (2 * BLOCK, True), "the resumed request loads what it saved before"
    assert request.status == "FINISHED_LENGTH_CAPPED"
    assert request.num_tokens >= 4 * BLOCK
    a.assert_kv_exact(request, request.num_tokens - 1)
    # Every block it published after resuming holds its own K/V: another instance restores them exactly.
    tokens = request.all_token_ids[:4 * BLOCK]
    restored = checker.add_request("check-23", tokens)
    checker.run()
    assert checker.matched["check-23"] == [(4 * BLOCK - 1, True)]
    assert not checker.load_errors
    checker.assert_kv_exact(restored, 4 * BLOCK)


# --- context parallelism ---------------------------------------------------------------------------------------------
def test_decode_context_parallel_ranks_are_keyed_apart(engines):
    """With DCP each rank holds its own slice of a block: rank 1 must never load what rank 0 saved under the same
    block hashes. (The harness's model gives both ranks the same values, so a wrongly shared key would load without an
    error; the load errors show the keys are apart.)"""
    rank0 = engines(decode_context_parallel_size=2, extra={"orbitkv.dcp_rank": 0})
    rank1 = engines(decode_context_parallel_size=2, extra={"orbitkv.dcp_rank": 1})
    other1 = engines(decode_context_parallel_size=2, extra={"orbitkv.dcp_rank": 1})
    plain = engines()
    assert len({e.worker.session.namespace for e in (rank0, rank1, plain)}) == 3
    assert rank1.worker.session.namespace == other1.worker.session.namespace
    tokens = prompt(30, 3 * BLOCK + 1)
    rank0.add_request("cp-0", tokens)
    rank0.run()
    # rank 1's scheduler looks through rank 0's slice (a hit), its worker finds no rank-1 slice: load errors; after the
    # one retry a request gets, vLLM computes.
    victim = rank1.add_request("cp-1", tokens)
    rank1.run()
    assert rank1.matched["cp-1"] == [(3 * BLOCK, True), (3 * BLOCK, True), (0, False)]
    assert len(rank1.load_errors) == 3
    rank1.assert_kv_exact(victim, len(tokens))
    # rank 1 saved its own slice meanwhile: another rank-1 worker restores it.
    again = other1.add_request("cp-2", tokens)
    other1.run()
    assert not other1.load_errors
    other1.assert_kv_exact(again, len(tokens))


def test_context_parallel_without_a_known_rank_is_refused(manager):
    with pytest.raises(ValueError, match="DCP size 2 but this rank's DCP rank is unknown"):
        MiniVllm(str(manager.data_dir), decode_context_parallel_size=2)
