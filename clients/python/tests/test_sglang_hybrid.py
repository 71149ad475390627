"""SGLang's hybrid HiCache interface (``register_mem_host_pool_v2``, ``batch_exists_v2``, ``batch_get_v2``,
``batch_set_v2``) against a real Manager: a KV pool, a sliding-window pool and a Mamba state pool.

Mirrors SGLang commit 001067fffe33 ``python/sglang/srt/mem_cache/hicache_storage.py``: pools by name (``PoolName``:
``kv``, ``swa``, ``mamba``), ``PoolTransfer(name, host_indices, keys, hit_policy)`` where the extra pools carry only
their trailing keys (``PoolHitPolicy.TRAILING_PAGES``), ``batch_exists_v2`` answering ``PoolTransferResult`` (pages of
the usable KV prefix and per pool), ``batch_get_v2`` / ``batch_set_v2`` answering per pool one bool per key, and
``HiCacheStorageExtraInfo.prefix_keys`` for pages the engine already holds. It has not run inside SGLang.

Every test compares each pool's bytes with the producer's (a page of the wrong pool holds other bytes) and the
answered prefix with the legal one.
"""

import logging
from types import SimpleNamespace

import pytest
import torch

from orbitkv import pb
from test_sglang_storage import PAGE, HostPool, create_like_sglang, fill, page_keys
from test_survival import own_manager  # noqa: F401 (a fixture: a Manager of the test's own)

WINDOW_PAGES = 2
STATE = 24  # floats per Mamba state


class SwaHostPool(HostPool):
    """A sliding-window layer's host pool: one layer, otherwise the KV pool's page API."""

    def __init__(self):
        self.kv_buffer = torch.zeros((2, 1, 64 * PAGE, 2, 8), dtype=torch.bfloat16)

    def set_from_flat_data_page(self, index, data_page):
        self.kv_buffer[:, :, index:index + PAGE] = data_page.reshape(2, 1, PAGE, 2, 8)


class MambaHostPool:
    """SGLang's Mamba host pool as the v2 path uses it: one state per slot (page size 1)."""

    layout = "layer_first"
    page_size = 1

    def __init__(self):
        self.states = torch.zeros((32, STATE), dtype=torch.float32)

    def get_data_page(self, index, flat=True):
        return self.states[index].flatten() if flat else self.states[index]

    def set_from_flat_data_page(self, index, data_page):
        self.states[index] = data_page.reshape(STATE)


def hybrid_backend(data_dir, window_tokens=WINDOW_PAGES * PAGE):
    backend, kv = create_like_sglang(data_dir)
    backend._config.extra_config["orbitkv_swa_window_tokens"] = window_tokens
    backend._swa_window_tokens = window_tokens
    swa, mamba = SwaHostPool(), MambaHostPool()
    # attach_storage_backend: register_mem_pool_host(kv), then each extra host pool by name.
    backend.register_mem_host_pool_v2(mamba, "mamba")
    backend.register_mem_host_pool_v2(swa, "swa")
    return backend, kv, swa, mamba


@pytest.fixture
def hybrids(manager):
    made = []

    def make():
        made.append(hybrid_backend(str(manager.data_dir)))
        return made[-1]

    yield make
    for backend, *_ in made:
        backend.close()


def transfer(name, keys, indices, trailing=False):
    return SimpleNamespace(name=name, keys=list(keys), host_indices=indices,
                           hit_policy="trailing_pages" if trailing else "all_pages", indices_from_pool=None)


def kv_indices(first_page, pages):
    return torch.arange(pages * PAGE) + first_page * PAGE


def produce(backend, kv, swa, mamba, keys, swa_pages, mamba_pages, seed):
    """Backs up KV pages for every key, sliding-window pages and Mamba states at the given positions."""
    fill(kv, kv_indices(0, len(keys)), seed)
    swa_slots = kv_indices(0, len(keys))
    generator = torch.Generator().manual_seed(seed + 1)
    for p in range(len(keys)):
        swa.set_from_flat_data_page(p * PAGE, torch.randn(2 * PAGE * 16, generator=generator).to(torch.bfloat16))
        mamba.states[p] = torch.randn(STATE, generator=generator)
    written = backend.batch_set_v2([
        transfer("kv", keys, kv_indices(0, len(keys))),
        transfer("swa", [keys[p] for p in swa_pages], torch.cat([swa_slots[p * PAGE:(p + 1) * PAGE] for p in swa_pages])),
        transfer("mamba", [keys[p] for p in mamba_pages], torch.tensor(list(mamba_pages))),
    ])
    assert written == {"kv": [True] * len(keys), "swa": [True] * len(swa_pages), "mamba": [True] * len(mamba_pages)}


def prefetch(backend, keys, pages):
    """``batch_exists_v2`` the way the prefetch path asks: the extra pools with their trailing keys."""
    return backend.batch_exists_v2(keys, [transfer("swa", keys[-WINDOW_PAGES:], None, trailing=True),
                                          transfer("mamba", keys[-1:], None, trailing=True)])


def get_into(backend, keys, hit):
    """``batch_get_v2`` for the first ``hit`` pages into fresh host slots: the KV pages, the window's pages and the
    state at the boundary."""
    return backend.batch_get_v2([
        transfer("kv", keys[:hit], kv_indices(20, hit)),
        transfer("swa", keys[max(0, hit - WINDOW_PAGES):hit], kv_indices(20 + max(0, hit - WINDOW_PAGES),
                                                                          min(hit, WINDOW_PAGES)), trailing=True),
        transfer("mamba", keys[hit - 1:hit], torch.tensor([20 + hit - 1]), trailing=True),
    ])


def assert_same(consumer_pools, producer_pools, hit):
    (kv, swa, mamba), (pkv, pswa, pmamba) = consumer_pools, producer_pools
    for p in range(hit):
        assert torch.equal(kv.get_data_page((20 + p) * PAGE), pkv.get_data_page(p * PAGE)), f"kv page {p}"
    for p in range(max(0, hit - WINDOW_PAGES), hit):
        assert torch.equal(swa.get_data_page((20 + p) * PAGE), pswa.get_data_page(p * PAGE)), f"swa page {p}"
    assert torch.equal(mamba.states[20 + hit - 1], pmamba.states[hit - 1]), f"state after page {hit - 1}"


def test_pools_register_as_groups(hybrids):
    backend, *_ = hybrids()
    groups = {g.group_id: g for g in backend.keeper.identity.groups}
    assert [groups[g].kind for g in sorted(groups)] == [pb.FULL_ATTENTION, pb.RECURRENT, pb.SLIDING_WINDOW]
    assert groups[1].checkpoint_interval_tokens == PAGE and groups[1].bytes_per_page == STATE * 4
    assert groups[2].window_tokens == WINDOW_PAGES * PAGE
    assert backend.session is not None


def test_window_pages_and_one_state_are_enough(hybrids):
    """Only the window's pages of the sliding-window pool and one state at 5 pages: all 5 pages hit."""
    producer, *producer_pools = hybrids()
    consumer, *consumer_pools = hybrids()
    keys = page_keys([(i * 37) % 7000 for i in range(5 * PAGE + 3)])
    produce(producer, *producer_pools, keys, swa_pages=[3, 4], mamba_pages=[4], seed=5)

    found = prefetch(consumer, keys, 5)
    assert (found.kv_hit_pages, found.extra_pool_hit_pages) == (5, {"kv": 5, "swa": 5, "mamba": 5})
    assert get_into(consumer, keys, 5) == {"kv": [True] * 5, "swa": [True] * 2, "mamba": [True]}
    assert_same(consumer_pools, producer_pools, 5)
    assert consumer.session.stats().session_leases == 0


def test_a_missing_state_shortens_the_prefix_to_the_last_legal_boundary(hybrids):
    """A state only at 3 pages, the window's pages 1..4: the prefix is 3 pages, not the 5 the KV pool has."""
    producer, *producer_pools = hybrids()
    consumer, *consumer_pools = hybrids()
    keys = page_keys([(i * 41) % 7000 for i in range(5 * PAGE)])
    produce(producer, *producer_pools, keys, swa_pages=[1, 2, 3, 4], mamba_pages=[2], seed=6)

    assert prefetch(consumer, keys, 5).kv_hit_pages == 3
    assert get_into(consumer, keys, 3) == {"kv": [True] * 3, "swa": [True] * 2, "mamba": [True]}
    assert_same(consumer_pools, producer_pools, 3)


def test_no_boundary_every_pool_can_resume_from_is_a_miss(hybrids):
    """A state at 3 pages without the window's pages for it, the window's pages for 5 without a state there."""
    producer, *producer_pools = hybrids()
    consumer, *_ = hybrids()
    keys = page_keys([(i * 43) % 7000 for i in range(5 * PAGE)])
    produce(producer, *producer_pools, keys, swa_pages=[3, 4], mamba_pages=[2], seed=7)

    assert prefetch(consumer, keys, 5).kv_hit_pages == 0
    # Asked anyway for 5 pages: the Manager answers no boundary, so nothing is copied and every key is False.
    assert get_into(consumer, keys, 5) == {"kv": [False] * 5, "swa": [False] * 2, "mamba": [False]}


def test_prefix_keys_are_the_valid_prefix(hybrids):
    """Pages the engine already holds (``extra_info.prefix_keys``) are not asked for; the window may reach into them
    without their pages being in the Manager."""
    producer, *producer_pools = hybrids()
    consumer, *consumer_pools = hybrids()
    keys = page_keys([(i * 47) % 7000 for i in range(5 * PAGE)])
    produce(producer, *producer_pools, keys, swa_pages=[3, 4], mamba_pages=[4], seed=8)
    held = SimpleNamespace(prefix_keys=keys[:4], extra_info=None)

    found = consumer.batch_exists_v2(keys[4:], [transfer("mamba", keys[-1:], None, trailing=True)], held)
    assert found.kv_hit_pages == 1
    result = consumer.batch_get_v2([transfer("kv", keys[4:], kv_indices(24, 1)),
                                    transfer("swa", keys[4:], kv_indices(24, 1), trailing=True),
                                    transfer("mamba", keys[4:], torch.tensor([24]), trailing=True)], held)
    assert result == {"kv": [True], "swa": [True], "mamba": [True]}
    kv, swa, mamba = consumer_pools
    pkv, pswa, pmamba = producer_pools
    assert torch.equal(kv.get_data_page(24 * PAGE), pkv.get_data_page(4 * PAGE))
    assert torch.equal(swa.get_data_page(24 * PAGE), pswa.get_data_page(4 * PAGE))
    assert torch.equal(mamba.states[24], pmamba.states[4])


def test_a_sliding_window_pool_without_its_window_is_refused_at_start(manager):
    backend, _ = create_like_sglang(str(manager.data_dir))
    try:
        with pytest.raises(ValueError, match="orbitkv_swa_window_tokens"):
            backend.register_mem_host_pool_v2(SwaHostPool(), "swa")
    finally:
        backend.close()


def test_a_manager_killed_mid_get_v2_is_a_miss_and_nothing_raises(own_manager):
    own_manager.start()
    producer, *producer_pools = hybrid_backend(str(own_manager.data_dir))
    consumer, *_ = hybrid_backend(str(own_manager.data_dir))
    try:
        keys = page_keys([(i * 53) % 7000 for i in range(3 * PAGE)])
        produce(producer, *producer_pools, keys, swa_pages=[1, 2], mamba_pages=[2], seed=9)
        consumer.after_copy = lambda _keys: own_manager.crash()
        assert get_into(consumer, keys, 3) == {"kv": [False] * 3, "swa": [False] * 2, "mamba": [False]}
        consumer.after_copy = None
        assert prefetch(consumer, keys, 3).kv_hit_pages == 0
        assert producer.batch_set_v2([transfer("kv", keys, kv_indices(0, 3))]) == {"kv": [False] * 3}
    finally:
        producer.close()
        consumer.close()


def test_a_hybrid_backend_starts_without_a_manager_with_one_warning_then_connects(own_manager, caplog):
    """Each pool re-registers the session; without a Manager the start still logs one WARNING, and once the Manager is
    there the session carries every pool's group."""
    with caplog.at_level(logging.WARNING, logger="orbitkv"):
        backend, kv, swa, mamba = hybrid_backend(str(own_manager.data_dir))
    try:
        assert len([r for r in caplog.records if "no Manager" in r.getMessage()]) == 1
        keys = page_keys([(i * 59) % 7000 for i in range(3 * PAGE)])
        assert prefetch(backend, keys, 3).kv_hit_pages == 0
        assert get_into(backend, keys, 3) == {"kv": [False] * 3, "swa": [False] * 2, "mamba": [False]}

        own_manager.start()
        session = backend.keeper.wait_for_session(30)
        assert session is not None and len(session.identity.groups) == 3
        produce(backend, kv, swa, mamba, keys, swa_pages=[1, 2], mamba_pages=[2], seed=10)
        assert prefetch(backend, keys, 3).kv_hit_pages == 3
    finally:
        backend.close()
