"""The SGLang HiCache backend called the way SGLang's cache controller calls it, against a real Manager.

Mirrors SGLang commit 001067fffe33: ``storage/backend_factory.py`` ``_create_dynamic_backend`` (import
``module_path``, check ``issubclass(cls, HiCacheStorage)``, construct ``cls(storage_config, kwargs)``);
``managers/cache_controller.py`` ``attach_storage_backend`` (then ``register_mem_pool_host(host_pool)``; the dynamic
backend with ``interface_v1`` gets ``_page_get_zero_copy`` / ``_page_set_zero_copy``); the prefetch path
(``_storage_hit_query``: page keys by ``get_hash_str`` in batches, ``batch_exists``, stop at a partial batch; then
``batch_get_v1(hash_values, host_indices, extra_info)`` counting leading successes) and the backup path
(``all(batch_set_v1(hash_values, host_indices, extra_info))``). Host KV pools are CPU torch tensors with the page API
of SGLang's host pools (``get_data_page``, ``set_from_flat_data_page``). It has not run inside SGLang.
"""

import hashlib
import importlib
import threading
from types import SimpleNamespace

import pytest
import torch

from manager import wait_until
from orbitkv import pb
from orbitkv.sglang.storage import HiCacheStorage, key_to_block_hash

PAGE = 16
LAYERS = 2
HEADS = 2
HEAD_DIM = 8
HOST_TOKENS = 64 * PAGE


class HostPool:
    """SGLang's MHA host pool page API, layout ``layer_first``: kv_buffer [2, layers, tokens, heads, dim]."""

    layout = "layer_first"
    page_size = PAGE

    def __init__(self):
        self.kv_buffer = torch.zeros((2, LAYERS, HOST_TOKENS, HEADS, HEAD_DIM), dtype=torch.bfloat16)

    def get_data_page(self, index, flat=True):
        page = self.kv_buffer[:, :, index:index + PAGE]
        return page.flatten() if flat else page

    def set_from_flat_data_page(self, index, data_page):
        self.kv_buffer[:, :, index:index + PAGE] = data_page.reshape(2, LAYERS, PAGE, HEADS, HEAD_DIM)


def get_hash_str(token_ids, prior_hash=None):
    """SGLang's page key: SHA-256 over the prior key's bytes and each token as 4-byte little-endian, as hex."""
    sha = hashlib.sha256()
    if prior_hash:
        sha.update(bytes.fromhex(prior_hash))
    for token in token_ids:
        sha.update(int(token).to_bytes(4, "little", signed=False))
    return sha.hexdigest()


def page_keys(tokens):
    keys, prior = [], None
    for start in range(0, len(tokens) - len(tokens) % PAGE, PAGE):
        prior = get_hash_str(tokens[start:start + PAGE], prior)
        keys.append(prior)
    return keys


def create_like_sglang(data_dir, tp_rank=0, cp_rank=0, cp_size=1, model_name="orbitkv-test/sglang-tiny", **options):
    # options: more extra config (``--hicache-storage-backend-extra-config``), e.g. orbitkv_do_not_store=True.
    extra = {"backend_name": "orbitkv", "module_path": "orbitkv.sglang", "class_name": "OrbitKvHiCacheStorage",
             "interface_v1": 1, "orbitkv_data_dir": data_dir, **options}
    backend_class = getattr(importlib.import_module(extra["module_path"]), extra["class_name"])
    assert issubclass(backend_class, HiCacheStorage)
    config = SimpleNamespace(tp_rank=tp_rank, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=cp_rank, attn_cp_size=cp_size,
                             is_mla_model=False, enable_storage_metrics=False, is_page_first_layout=False,
                             model_name=model_name, extra_config=extra)
    backend = backend_class(config, {})
    host = HostPool()
    backend.register_mem_pool_host(host)
    return backend, host


@pytest.fixture
def backends(manager):
    made = []

    def make():
        made.append(create_like_sglang(str(manager.data_dir)))
        return made[-1]

    yield make
    for backend, _ in made:
        backend.close()


def fill(host, host_indices, seed):
    generator = torch.Generator().manual_seed(seed)
    for start in range(0, len(host_indices), PAGE):
        index = int(host_indices[start])
        host.set_from_flat_data_page(index, torch.randn(2 * LAYERS * PAGE * HEADS * HEAD_DIM,
                                                        generator=generator).to(torch.bfloat16))


def test_miss(backends):
    backend, _ = backends()
    keys = page_keys(list(range(3 * PAGE)))
    assert backend.batch_exists(keys) == 0
    assert backend.batch_get_v1(keys, torch.arange(3 * PAGE)) == [False] * 3
    assert not backend.exists(keys[0])


def test_backup_then_another_instance_prefetches_byte_exact(backends):
    producer, producer_host = backends()
    consumer, consumer_host = backends()
    tokens = [(i * 31) % 5000 for i in range(4 * PAGE + 3)]
    keys = page_keys(tokens)
    source = torch.arange(4 * PAGE) + 5 * PAGE
    fill(producer_host, source, seed=11)
    assert all(producer.batch_set_v1(keys, source))
    # Prefetch on the consumer: existence first, then the zero-copy get into other host slots.
    hits = consumer.batch_exists(keys)
    assert hits == 4
    target = torch.arange(4 * PAGE) + 20 * PAGE
    assert consumer.batch_get_v1(keys[:hits], target[:hits * PAGE]) == [True] * 4
    for i in range(4):
        assert torch.equal(consumer_host.get_data_page(int(target[i * PAGE])),
                           producer_host.get_data_page(int(source[i * PAGE])))
    assert consumer.session.stats().session_leases == 0


def test_partial_hit_counts_leading_pages(backends):
    backend, host = backends()
    tokens = [(i * 17) % 3000 for i in range(5 * PAGE)]
    keys = page_keys(tokens)
    indices = torch.arange(2 * PAGE)
    fill(host, indices, seed=3)
    assert backend.batch_set_v1(keys[:2], indices) == [True, True]
    assert backend.batch_exists(keys) == 2
    got = backend.batch_get_v1(keys, torch.arange(5 * PAGE) + 30 * PAGE)
    assert got == [True, True, False, False, False]


def test_generic_get_set_and_exists(backends):
    backend, host = backends()
    keys = page_keys(list(range(100, 100 + 2 * PAGE)))
    value = torch.randn(2 * LAYERS * PAGE * HEADS * HEAD_DIM, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    assert backend.set(keys[0], value)
    assert backend.exists(keys[0]) and not backend.exists(keys[1])
    assert torch.equal(backend.get(keys[0]), value)
    dummy = torch.zeros_like(value)
    assert backend.batch_get(keys, [dummy, torch.zeros_like(value)])[0] is dummy and torch.equal(dummy, value)
    assert backend.get(keys[1]) is None


def test_exists_waits_out_pending_until_the_publish_seals(backends, manager):
    backend, host = backends()
    writer, writer_host = backends()
    keys = page_keys(list(range(7, 7 + 2 * PAGE)))
    indices = torch.arange(2 * PAGE)
    fill(writer_host, indices, seed=9)
    # The writer's pages are allocated and written but not sealed: a query answers PENDING meanwhile.
    session = writer.session
    allocated = session.allocate((0, key_to_block_hash(k)) for k in keys)
    slots = [s.slot for s in allocated.slots]
    for i, slot in enumerate(slots):
        session.pool.write(slot, writer._page_buffer(writer_host.get_data_page(i * PAGE)))
    answer = {}
    reader = threading.Thread(target=lambda: answer.setdefault("hits", backend.batch_exists(keys)))
    reader.start()
    wait_until(lambda: manager.metric("orbitkv_queries_outstanding") >= 1, message="a PENDING ticket")
    assert reader.is_alive(), "the exists call polls while the pages are being published"
    session.seal(allocated.publish_id, [], slots)
    reader.join(timeout=20)
    assert answer["hits"] == 2


def test_invalid_lease_fails_the_whole_get(backends, manager):
    producer, producer_host = backends()
    consumer, consumer_host = backends()
    keys = page_keys(list(range(900, 900 + 3 * PAGE)))
    fill(producer_host, torch.arange(3 * PAGE), seed=21)
    assert all(producer.batch_set_v1(keys, torch.arange(3 * PAGE)))
    instances = manager.metric("orbitkv_instances")

    def stall(_keys):
        consumer.session.stop_heartbeats()
        wait_until(lambda: manager.metric("orbitkv_instances") < instances, timeout_seconds=30,
                   message="the consumer's session lapsing")

    consumer.after_copy = stall
    assert consumer.batch_get_v1(keys, torch.arange(3 * PAGE) + 10 * PAGE) == [False] * 3
    consumer.after_copy = None
    # The backend registers again (in the background, once) and the next prefetch succeeds.
    assert consumer.keeper.wait_for_session(10) is not None
    assert (consumer.keeper.sessions_lost, consumer.keeper.registrations) == (1, 2)
    assert consumer.batch_get_v1(keys, torch.arange(3 * PAGE) + 10 * PAGE) == [True] * 3
    assert torch.equal(consumer_host.get_data_page(10 * PAGE), producer_host.get_data_page(0))


def test_context_parallel_ranks_keep_their_own_slices(manager):
    """Attention CP: both ranks store their own slice of the same pages under the same keys; each gets its own back,
    and neither (nor a backend without CP) ever sees the other's."""
    made = [create_like_sglang(str(manager.data_dir), cp_rank=rank, cp_size=2) for rank in (0, 1)]
    plain, _ = create_like_sglang(str(manager.data_dir))
    try:
        (rank0, host0), (rank1, host1) = made
        keys = page_keys(list(range(1200, 1200 + 2 * PAGE)))
        source = torch.arange(2 * PAGE)
        fill(host0, source, seed=61)
        fill(host1, source, seed=62)
        assert all(rank0.batch_set_v1(keys, source))
        assert rank1.batch_exists(keys) == 0 and plain.batch_exists(keys) == 0
        assert all(rank1.batch_set_v1(keys, source))
        target = torch.arange(2 * PAGE) + 40 * PAGE
        for backend, host in made:
            assert backend.batch_get_v1(keys, target) == [True, True]
        for i in range(2):
            assert torch.equal(host0.get_data_page((40 + i) * PAGE), host0.get_data_page(i * PAGE))
            assert torch.equal(host1.get_data_page((40 + i) * PAGE), host1.get_data_page(i * PAGE))
        assert not torch.equal(host0.get_data_page(40 * PAGE), host1.get_data_page(40 * PAGE))
    finally:
        for backend, _ in made:
            backend.close()
        plain.close()
