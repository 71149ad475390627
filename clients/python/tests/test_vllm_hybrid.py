"""vLLM's hybrid KV cache manager through the connector's ``SupportsHMA`` side: a full-attention group, a
sliding-window group and a Mamba group (``mamba_cache_mode="align"``), driven in vLLM's call order
(tests/vllm_harness.py) against a real Manager. It has not run inside vLLM: vLLM cannot be installed here.

Every test checks what vLLM goes on from, group by group, against the model's own values (a page of the wrong group
holds another layer's values, a wrong state changes every later state), and which boundary the connector answered.
"""

from types import SimpleNamespace

import pytest
import torch

from orbitkv import hashing, pb
from orbitkv.vllm.connector import kv_groups
from test_survival import own_manager  # noqa: F401 (a fixture: a Manager of the test's own)
from vllm_harness import BLOCK, NULL_BLOCK, FullAttentionSpec, MambaSpec, MiniVllm, hybrid_groups

FULL, SWA, MAMBA = 0, 1, 2


def prompt(seed: int, length: int) -> list[int]:
    return [(seed * 7919 + i * 104729) % 32000 for i in range(length)]


@pytest.fixture
def engines(manager):
    made = []

    def make(**kwargs):
        engine = MiniVllm(str(manager.data_dir), groups=hybrid_groups(), **kwargs)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.shutdown()


def publish(engine: MiniVllm, tokens: list[int], pages: dict[int, list[int]]):
    """Publishes, under ``engine``'s identity, the model's pages of each group at the given positions (what an engine
    that computed them and kept only these would have saved)."""
    session = engine.worker.keeper.wait_for_session(20)
    hashes = hashing.chain(tokens, BLOCK)
    result = session.publish([(group, hashes[p], engine.page_bytes(group, tokens, p))
                              for group, positions in sorted(pages.items()) for p in positions])
    assert all(result.written)


def test_the_connector_maps_each_kv_cache_group_to_its_group_spec(engines):
    a = engines()
    groups = {g.group_id: g for g in a.worker.keeper.identity.groups}
    assert groups[FULL].kind == pb.FULL_ATTENTION
    assert (groups[SWA].kind, groups[SWA].window_tokens) == (pb.SLIDING_WINDOW, 2 * BLOCK)  # vLLM's W=33 less itself
    assert (groups[MAMBA].kind, groups[MAMBA].checkpoint_interval_tokens) == (pb.RECURRENT, BLOCK)
    assert groups[MAMBA].bytes_per_page == (4 + 2 * 8) * 4  # the two state tensors of one block, fp32


def test_a_shorter_recurrent_state_caps_a_longer_attention_match(engines):
    """Chunked prefill (32 tokens, Mamba-aligned) saves states at 32 and 64 only; attention pages reach 80. Another
    instance resumes at 64, the last boundary every group can resume from, not at 80."""
    a, b = engines(chunk_tokens=2 * BLOCK), engines(chunk_tokens=2 * BLOCK)
    tokens = prompt(1, 5 * BLOCK + 3)
    produced = a.add_request("a-1", tokens)
    a.run()
    assert a.matched["a-1"] == [(0, False)]
    a.assert_hybrid_exact(produced, len(tokens))

    restored = b.add_request("b-1", tokens)
    b.run()
    assert b.matched["b-1"] == [(4 * BLOCK, True)]
    assert b.computed_tokens["b-1"] == len(tokens) - 4 * BLOCK
    b.assert_hybrid_exact(restored, len(tokens))
    assert not b.load_errors


def test_sliding_window_pages_below_the_window_are_not_needed(engines):
    """Only the window's pages (48..80) of the sliding-window group exist: the Manager answers 80 without the early
    ones, and vLLM's null blocks below the window stay untouched."""
    donor, b = engines(), engines()
    tokens = prompt(2, 5 * BLOCK + 3)
    publish(donor, tokens, {FULL: range(5), SWA: [3, 4], MAMBA: [4]})

    restored = b.add_request("b-2", tokens)
    b.step()  # lookup and allocation, the load in the same step
    assert b.matched["b-2"] == [(5 * BLOCK, True)]
    assert restored.group_blocks[SWA][:3] == [NULL_BLOCK] * 3
    assert restored.group_blocks[MAMBA][:4] == [NULL_BLOCK] * 4
    b.run()
    assert b.computed_tokens["b-2"] == 3
    b.assert_hybrid_exact(restored, len(tokens))


def test_a_state_at_an_earlier_boundary_is_the_answer(engines):
    """Attention pages for 80 tokens, a state only at 48: the answer is 48 (the state's boundary), never 80."""
    donor, b = engines(), engines()
    tokens = prompt(3, 5 * BLOCK + 3)
    publish(donor, tokens, {FULL: range(5), SWA: range(5), MAMBA: [2]})

    restored = b.add_request("b-3", tokens)
    b.run()
    assert b.matched["b-3"] == [(3 * BLOCK, True)]
    assert b.computed_tokens["b-3"] == len(tokens) - 3 * BLOCK
    b.assert_hybrid_exact(restored, len(tokens))


def test_no_boundary_every_group_can_resume_from_is_a_miss(engines):
    """A state at 48 but not the window's pages for it, the window's pages for 80 but no state there: no legal
    boundary, so vLLM computes everything (and nothing is loaded)."""
    donor, b = engines(), engines()
    tokens = prompt(4, 5 * BLOCK + 3)
    publish(donor, tokens, {FULL: range(5), SWA: [3, 4], MAMBA: [2]})

    missed = b.add_request("b-4", tokens)
    b.run()
    assert b.matched["b-4"] == [(0, False)]
    assert b.computed_tokens["b-4"] == len(tokens)
    b.assert_hybrid_exact(missed, len(tokens))


def test_a_whole_prompt_hit_stops_at_the_last_state_before_the_final_token(engines):
    """With recurrent state a boundary is exact: a prompt of exactly 4 blocks resumes at 3 blocks (vLLM computes at
    least one token), not at 4 blocks less one token."""
    donor, b = engines(), engines()
    tokens = prompt(5, 4 * BLOCK)
    publish(donor, tokens, {FULL: range(4), SWA: range(4), MAMBA: range(4)})

    restored = b.add_request("b-5", tokens)
    b.run()
    assert b.matched["b-5"] == [(3 * BLOCK, True)]
    b.assert_hybrid_exact(restored, len(tokens))


@pytest.mark.parametrize("spec, refusal", [
    (MambaSpec(BLOCK, ((4,),), (torch.float32,), mamba_cache_mode="none"), "--mamba-cache-mode align"),
    (MambaSpec(2 * BLOCK, ((4,),), (torch.float32,)), "different block sizes"),
    (SimpleNamespace(block_size=BLOCK, page_size_bytes=64), "no OrbitKV group kind"),
])
def test_layouts_without_an_orbitkv_mapping_are_refused_at_start(spec, refusal):
    full = SimpleNamespace(layer_names=["attn"], kv_cache_spec=FullAttentionSpec(BLOCK, 2, 8, torch.float16, 1024))
    config = SimpleNamespace(num_blocks=8, kv_cache_groups=[full, SimpleNamespace(layer_names=["x"], kv_cache_spec=spec)])
    with pytest.raises(ValueError, match=refusal):
        kv_groups(config, BLOCK)


def test_a_preempted_hybrid_request_resumes_from_its_own_state_and_saves_only_its_own_blocks(engines):
    """Preempted mid-decode, the request comes back through the lookup at its last saved state (32 tokens), is
    scheduled as resumed with whole new block tables in every group, and decodes on; the pages and states it publishes
    afterwards restore exactly in another instance."""
    a, checker = engines(chunk_tokens=2 * BLOCK), engines()
    request = a.add_request("r-1", prompt(6, 2 * BLOCK + 10), max_tokens=2 * BLOCK + 2)
    a.step()  # the first chunk: 32 tokens, a state at 32
    a.step()  # the rest of the prompt and the first output token
    a.preempt("r-1")
    a.run()
    # PENDING (None) while the pages saved before the preemption are still being sealed, then READY at 32.
    answers = a.matched["r-1"]
    assert answers[0] == (0, False) and answers[-1] == (2 * BLOCK, True)
    assert all(answer == (None, False) for answer in answers[1:-1])
    assert request.status == "FINISHED_LENGTH_CAPPED"
    a.assert_hybrid_exact(request, request.num_tokens - 1)
    tokens = request.all_token_ids[:4 * BLOCK]
    restored = checker.add_request("check-1", tokens)
    checker.run()
    assert checker.matched["check-1"] == [(3 * BLOCK, True)]  # the last state before the final token: at 48
    assert not checker.load_errors
    checker.assert_hybrid_exact(restored, len(tokens))


def test_a_manager_killed_mid_hybrid_load_is_load_errors_and_exact_recomputation(own_manager):
    """The Manager dies after the worker copied every group's pages and before the release: the copy is discarded,
    every group's loaded blocks are load errors, and vLLM recomputes the whole prompt exactly (no exception)."""
    own_manager.start()
    a = MiniVllm(str(own_manager.data_dir), groups=hybrid_groups())
    b = MiniVllm(str(own_manager.data_dir), groups=hybrid_groups())
    try:
        tokens = prompt(7, 4 * BLOCK + 3)
        publish(a, tokens, {FULL: range(4), SWA: range(4), MAMBA: [3]})
        victim = b.add_request("c", tokens)
        targets = {}

        def crash(spec):
            targets.update(spec.targets())
            own_manager.crash()

        b.worker.after_copy = crash
        b.step()
        b.worker.after_copy = None
        assert b.matched["c"] == [(4 * BLOCK, True)]
        # The blocks that took pages: every attention position, the window's two, the one state.
        assert {g: sorted(t) for g, t in targets.items()} == {FULL: [0, 1, 2, 3], SWA: [2, 3], MAMBA: [3]}
        assert b.load_errors == {block for table in targets.values() for block in table.values()}
        assert victim.num_computed_tokens == 0
        b.run()
        assert b.matched["c"][-1] == (0, False)
        b.assert_hybrid_exact(victim, len(tokens))
    finally:
        a.shutdown()
        b.shutdown()
