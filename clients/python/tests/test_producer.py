"""P/D readiness through the Python client, on each door (gRPC, the event-bus bridge, the co-located channel): a
consumer's demand naming a producer session and request waits (PENDING, WAITING_FOR_PRODUCER) until that session
publishes the pages under the request, then is READY with the producer's bytes; a producer that ends answers MISS; a
bad producer is refused INVALID_PRODUCER. The Manager is checked for leaked leases after every test."""

import uuid

import pytest

from orbitkv import OrbitKvError, pb
from test_client import hashes, make_identity, page

DOORS = ["grpc", "bridge", "colocated"]


def open_client(manager, door):
    if door == "bridge":
        return manager.bridge_client()
    if door == "colocated":
        return manager.colocated_client(fallback=False)
    return manager.client()


@pytest.mark.parametrize("door", DOORS)
def test_a_consumer_waits_for_its_producer_and_reads_its_bytes(manager, door):
    ident = make_identity(f"py-pd/{door}/{uuid.uuid4()}")  # a namespace of its own, also when run again
    seed = 700 + DOORS.index(door)
    with open_client(manager, door) as client, client.register(ident, role=pb.PREFILL) as prefill, \
            client.register(ident, role=pb.DECODE) as decode:
        keys = hashes(seed, 4)
        producer = prefill.producer("prefill-req-1")
        assert producer.instance_id == prefill.instance_id and producer.session_epoch == prefill.ref.session_epoch
        first = decode.submit_demand(decode.prefix_demand("decode-req-1", keys, max_wait_micros=20_000_000,
                                                          producer=producer))
        assert first.status == pb.PENDING and first.detail == pb.WAITING_FOR_PRODUCER
        assert decode.poll(first.ticket).detail == pb.WAITING_FOR_PRODUCER
        assert decode.stats().active_leases == 0

        published = prefill.publish([(0, h, page(seed, i)) for i, h in enumerate(keys)], request_id="prefill-req-1")
        assert published.sealed_pages == 4
        ready = decode.settle(first, timeout_seconds=20)
        assert ready.status == pb.READY and ready.ready_blocks == 4
        with decode.lease(ready) as lease:
            for leased in lease.pages:
                assert bytes(lease.read(leased)) == page(seed, leased.position)
        assert decode.stats().session_leases == 0


def test_an_ended_producer_is_a_miss_and_bad_producers_are_refused(manager):
    ident = make_identity(f"py-pd/ended/{uuid.uuid4()}")
    with manager.client() as client, client.register(ident, role=pb.DECODE) as decode:
        keys = hashes(710, 2)
        prefill = client.register(ident, role=pb.PREFILL)
        first = decode.submit_demand(decode.prefix_demand("decode-req-2", keys, max_wait_micros=20_000_000,
                                                          producer=prefill.producer("prefill-req-2")))
        assert first.detail == pb.WAITING_FOR_PRODUCER
        prefill.close()
        assert decode.settle(first, timeout_seconds=20).status == pb.MISS

        for bad in (decode.producer("r"),                                   # the consumer itself
                    pb.Producer(instance_id=decode.instance_id + 1, session_epoch=0, request_id="r"),
                    pb.Producer(instance_id=decode.instance_id + 1, session_epoch=1, request_id="r",
                                member="manager-9")):                       # another Manager, and no cluster
            with pytest.raises(OrbitKvError) as raised:
                decode.submit_demand(decode.prefix_demand("decode-bad", keys, producer=bad))
            assert raised.value.reason == "INVALID_PRODUCER"
        assert decode.stats().session_outstanding_queries == 0


def test_the_readme_example_runs(manager):
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "pd_handoff.py"
    result = subprocess.run([sys.executable, str(example), "--data-dir", str(manager.data_dir), "--pages", "4",
                             "--page-bytes", "8192"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert '"ok": true, "waited_for_producer": true' in result.stdout
