"""Per-request hints through the vLLM connector (``kv_transfer_params["orbitkv"]``), driven like vLLM drives it
(tests/vllm_harness.py) against a real Manager: do_not_store publishes nothing, max_stored_tokens caps what is stored,
a retained prefix survives pool pressure that evicts an unretained one, a consumer naming its producer waits for it
(and computes when the producer ends), and bad values or a refused retention are one WARNING with the request served."""

import logging
import uuid

import pytest

from orbitkv import OrbitKvClient, pb
from test_client import hashes, make_identity, page
from vllm_harness import BLOCK, LAYER_PAGE_BYTES, LAYERS, MiniVllm


def prompt(seed: int, length: int) -> list[int]:
    return [(seed * 7919 + i * 104729 + 17) % 32000 for i in range(length)]


def hints(**values) -> dict:
    return {"orbitkv": values}


@pytest.fixture
def engines(manager):
    made = []

    def make(**kwargs):
        kwargs.setdefault("model", f"orbitkv-test/hints/{uuid.uuid4()}")
        engine = MiniVllm(str(manager.data_dir), **kwargs)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.shutdown()


def second_engine(first: MiniVllm) -> MiniVllm:
    """Another instance of the same model (same namespace) on the same Manager."""
    return MiniVllm(first.vllm_config.kv_transfer_config.kv_connector_extra_config["orbitkv.data_dir"],
                    model=first.vllm_config.model_config.model)


def test_do_not_store_publishes_nothing(engines):
    a = engines()
    quiet, plain = prompt(1, 3 * BLOCK + 1), prompt(2, 3 * BLOCK + 1)
    a.add_request("quiet", quiet, kv_transfer_params=hints(do_not_store=True))
    a.add_request("plain", plain)
    a.run()
    b = engines(model=a.vllm_config.model_config.model)
    b.add_request("quiet-again", quiet)
    b.add_request("plain-again", plain)
    b.run()
    assert b.matched["quiet-again"] == [(0, False)]
    assert b.matched["plain-again"] == [(3 * BLOCK, True)]  # the same engine stores a request without the hint


def test_max_stored_tokens_caps_what_is_stored(engines):
    a = engines()
    tokens = prompt(3, 5 * BLOCK + 1)
    a.add_request("capped", tokens, kv_transfer_params=hints(max_stored_tokens=2 * BLOCK + 5))
    a.run()
    b = engines(model=a.vllm_config.model_config.model)
    again = b.add_request("capped-again", tokens)
    b.run()
    assert b.matched["capped-again"] == [(2 * BLOCK, True)]  # whole blocks below the cap only
    b.assert_kv_exact(again, len(tokens))


def test_a_consumer_waits_for_its_producer_then_loads_its_pages(engines):
    prefill = engines()
    decode = engines(model=prefill.vllm_config.model_config.model)
    tokens = prompt(4, 3 * BLOCK + 1)
    producer = prefill.worker.producer_params("pd-prefill")
    assert producer is not None
    waiting = decode.add_request("pd-decode", tokens, kv_transfer_params=hints(producer=producer))
    decode.step()
    decode.step()
    # WAITING_FOR_PRODUCER: vLLM's "not yet" (the request stays waiting, asked again next step), never a miss.
    assert decode.matched["pd-decode"] == [(None, False), (None, False)]
    assert decode.computed_tokens["pd-decode"] == 0
    prefill.add_request("pd-prefill", tokens, kv_transfer_params=hints(handoff=True))
    prefill.run()
    decode.run()
    assert decode.matched["pd-decode"][-1] == (3 * BLOCK, True)
    assert decode.computed_tokens["pd-decode"] == 1
    decode.assert_kv_exact(waiting, len(tokens))


def test_a_consumer_whose_producer_ends_computes(engines):
    prefill = engines()
    decode = engines(model=prefill.vllm_config.model_config.model)
    tokens = prompt(5, 2 * BLOCK + 1)
    producer = prefill.worker.producer_params("pd-gone")
    decode.add_request("pd-orphan", tokens, kv_transfer_params=hints(producer=producer))
    decode.step()
    assert decode.matched["pd-orphan"] == [(None, False)]
    prefill.worker.keeper.close()  # the producer's session ends before it published anything
    decode.run()
    assert decode.matched["pd-orphan"][-1] == (0, False)
    assert decode.computed_tokens["pd-orphan"] == len(tokens)
    assert decode.scheduler.open_lookups() == 0


def test_bad_hint_values_are_one_warning_and_the_request_is_served(engines, caplog):
    a = engines()
    tokens = prompt(6, 4 * BLOCK + 1)
    with caplog.at_level(logging.WARNING, logger="orbitkv"):
        a.add_request("bad", tokens, kv_transfer_params=hints(retain_ttl_ms=-5, do_not_store="yes",
                                                              max_stored_tokens=BLOCK, bogus=1,
                                                              producer={"instance_id": "x"}))
        a.add_request("not-a-dict", prompt(7, 2 * BLOCK + 1), kv_transfer_params={"orbitkv": "retain please"})
        a.run()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "hints of" in r.getMessage()]
    assert len(warnings) == 2, warnings
    bad = next(w for w in warnings if "request bad" in w)
    for named in ("retain_ttl_ms=-5", "do_not_store='yes'", "'bogus'", "producer="):
        assert named in bad, bad
    assert a.computed_tokens["bad"] == len(tokens) and a.computed_tokens["not-a-dict"] == 2 * BLOCK + 1
    b = engines(model=a.vllm_config.model_config.model)
    b.add_request("bad-again", tokens)
    b.run()
    assert b.matched["bad-again"] == [(BLOCK, True)]  # the valid hint (the cap) held, the bad ones were ignored


def test_a_refused_retention_is_one_warning_and_the_pages_are_still_stored(engines, caplog):
    a = engines()
    first, second = prompt(8, 2 * BLOCK + 1), prompt(9, 2 * BLOCK + 1)
    too_long = hints(retain_ttl_ms=10 ** 12)  # past retention.max-ttl-ms: INVALID_RETENTION_TTL
    with caplog.at_level(logging.WARNING, logger="orbitkv"):
        a.add_request("refused-1", first, kv_transfer_params=too_long)
        a.add_request("refused-2", second, kv_transfer_params=too_long)
        a.run()
    refusals = [r.getMessage() for r in caplog.records if "retention" in r.getMessage() and "refused" in r.getMessage()]
    assert len(refusals) == 1 and "INVALID_RETENTION_TTL" in refusals[0], refusals
    b = engines(model=a.vllm_config.model_config.model)
    b.add_request("again-1", first)
    b.add_request("again-2", second)
    b.run()
    assert b.matched["again-1"] == [(2 * BLOCK, True)] and b.matched["again-2"] == [(2 * BLOCK, True)]


def test_a_retained_prefix_survives_pool_pressure_that_evicts_the_others(small_pool):
    a = MiniVllm(str(small_pool.data_dir), model=f"orbitkv-test/retain/{uuid.uuid4()}")
    b = None
    try:
        kept, plain = prompt(10, 4 * BLOCK + 1), prompt(11, 4 * BLOCK + 1)
        a.add_request("plain", plain)
        a.add_request("kept", kept, kv_transfer_params=hints(retain_ttl_ms=600_000, retain_priority=5))
        a.run()
        # Pressure: pages of the vLLM pages' size, twice the pool, from another engine; the unretained pages go.
        page_bytes = LAYER_PAGE_BYTES * len(LAYERS)
        with OrbitKvClient.from_data_dir(small_pool.data_dir) as client, \
                client.register(make_identity(f"py-pressure/{uuid.uuid4()}", page_bytes)) as filler:
            pool_pages = 4 * 1024 * 1024 // page_bytes
            for batch in range(2 * pool_pages // 256):
                keys = hashes(5000 + batch, 256)
                filler.publish([(0, h, page(batch, i, page_bytes)) for i, h in enumerate(keys)])
        b = second_engine(a)
        kept_again = b.add_request("kept-again", kept)
        b.add_request("plain-again", plain)
        b.run()
        assert b.matched["kept-again"] == [(4 * BLOCK, True)]
        assert b.matched["plain-again"] == [(0, False)]
        b.assert_kv_exact(kept_again, len(kept))
        small_pool.assert_no_leaks()
    finally:
        a.shutdown()
        if b is not None:
            b.shutdown()
