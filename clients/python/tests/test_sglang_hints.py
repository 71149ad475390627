"""Storage hints through the SGLang backend against a real Manager. SGLang passes its storage backend no per-request
hint, so they are backend-wide (``--hicache-storage-backend-extra-config``): do_not_store publishes nothing,
max_stored_tokens caps the stored prefix (counted after ``extra_info.prefix_keys``), retained pages survive pool
pressure that evicts the others; a call's own ``extra_info.extra_info["orbitkv"]`` overrides them; bad values are one
WARNING and the backend serves."""

import logging
import uuid
from types import SimpleNamespace

import pytest
import torch

from orbitkv import OrbitKvClient
from test_client import hashes, make_identity, page
from test_sglang_storage import PAGE, create_like_sglang, fill, page_keys


@pytest.fixture
def model():
    return f"orbitkv-test/sglang-hints/{uuid.uuid4()}"  # a namespace of its own per test


@pytest.fixture
def backends(manager, model):
    made = []

    def make(data_dir=None, **options):
        made.append(create_like_sglang(str(data_dir or manager.data_dir), model_name=model, **options))
        return made[-1]

    yield make
    for backend, _ in made:
        backend.close()


def written(backend, host, keys, seed, extra_info=None):
    indices = torch.arange(len(keys) * PAGE)
    fill(host, indices, seed)
    return backend.batch_set_v1(keys, indices, extra_info)


def test_do_not_store_publishes_nothing(backends):
    quiet, quiet_host = backends(orbitkv_do_not_store=True)
    reader, _ = backends()
    keys = page_keys([(i * 13) % 4000 for i in range(3 * PAGE)])
    assert written(quiet, quiet_host, keys, seed=1) == [True] * 3  # a hint, not a failed backup
    assert reader.batch_exists(keys) == 0
    assert written(reader, quiet_host, keys, seed=1) == [True] * 3  # the same pages from a backend without the hint
    assert reader.batch_exists(keys) == 3


def test_max_stored_tokens_caps_the_stored_prefix(backends):
    capped, host = backends(orbitkv_max_stored_tokens=2 * PAGE + 3)
    reader, _ = backends()
    keys = page_keys([(i * 7) % 4000 for i in range(5 * PAGE)])
    assert written(capped, host, keys, seed=2) == [True] * 5
    assert reader.batch_exists(keys) == 2
    # A later call continues the prefix: its pages count after extra_info.prefix_keys, so none is under the cap.
    later = SimpleNamespace(prefix_keys=keys[:3], extra_info=None)
    assert written(capped, host, keys[3:], seed=2, extra_info=later) == [True] * 2
    assert reader.batch_exists(keys) == 2


def test_a_calls_own_hints_override_the_backend_wide_ones(backends):
    backend, host = backends()
    reader, _ = backends()
    keys = page_keys([(i * 11) % 4000 for i in range(2 * PAGE)])
    quiet = SimpleNamespace(prefix_keys=None, extra_info={"orbitkv": {"do_not_store": True}})
    assert written(backend, host, keys, seed=3, extra_info=quiet) == [True] * 2
    assert reader.batch_exists(keys) == 0


def test_bad_extra_config_values_are_one_warning_and_the_backend_serves(backends, caplog):
    with caplog.at_level(logging.WARNING, logger="orbitkv"):
        backend, host = backends(orbitkv_do_not_store="yes", orbitkv_max_stored_tokens=-1, orbitkv_retain_ttl_ms=60_000)
    warnings = [r.getMessage() for r in caplog.records if "hints of" in r.getMessage()]
    assert len(warnings) == 1 and "orbitkv_do_not_store='yes'" in warnings[0] \
        and "orbitkv_max_stored_tokens=-1" in warnings[0], warnings
    keys = page_keys([(i * 5) % 4000 for i in range(2 * PAGE)])
    assert written(backend, host, keys, seed=4) == [True] * 2
    assert backend.batch_exists(keys) == 2  # stored: the bad do_not_store was ignored


def test_retained_pages_survive_pool_pressure_that_evicts_the_others(small_pool, backends):
    kept, kept_host = backends(small_pool.data_dir, orbitkv_retain_ttl_ms=600_000, orbitkv_retain_priority=5)
    plain, plain_host = backends(small_pool.data_dir)
    kept_keys = page_keys([(i * 3) % 4000 for i in range(3 * PAGE)])
    plain_keys = page_keys([(i * 3 + 1) % 4000 for i in range(3 * PAGE)])
    assert written(plain, plain_host, plain_keys, seed=5) == [True] * 3
    assert written(kept, kept_host, kept_keys, seed=6) == [True] * 3
    page_bytes = kept._page_bytes
    with OrbitKvClient.from_data_dir(small_pool.data_dir) as client, \
            client.register(make_identity(f"py-pressure/{uuid.uuid4()}", page_bytes)) as filler:
        batch_pages = 64
        for batch in range(2 * (4 * 1024 * 1024 // page_bytes) // batch_pages):
            keys = hashes(9000 + batch, batch_pages)
            filler.publish([(0, h, page(batch, i, page_bytes)) for i, h in enumerate(keys)])
    assert plain.batch_exists(kept_keys) == 3
    assert plain.batch_exists(plain_keys) == 0
    small_pool.assert_no_leaks()
