"""The Python client against a real Manager: register, heartbeat, publish, query, leases, typed errors."""

import os

import pytest

from orbitkv import ChecksumMismatchError, LeaseInvalidError, OrbitKvError, crc32c, identity, pb
from orbitkv.client import Session
from manager import wait_until

PAGE_BYTES = 4096


def make_identity(model="py-test/model", page_bytes=PAGE_BYTES):
    return identity(model, "test:NHD", "layers=2;kv_heads=2;head_dim=64;dtype=bf16", 16,
                    [(0, pb.FULL_ATTENTION, page_bytes)])


def page(seed: int, position: int, size=PAGE_BYTES) -> bytes:
    # Deterministic bytes that differ per (seed, position): enough to catch a page served from the wrong slot.
    block = (seed * 1_000_003 + position * 7919).to_bytes(8, "little") * 8
    return (block * (size // len(block) + 1))[:size]


def hashes(seed: int, count: int):
    import hashlib

    return [hashlib.sha256(f"{seed}/{i}".encode()).digest() for i in range(count)]


@pytest.fixture
def session(manager):
    with manager.client() as client:
        with client.register(make_identity(), label="pytest") as s:
            yield s


def test_register_maps_pool_and_heartbeats(manager, session):
    assert session.instance_id > 0 and len(session.namespace) == 16
    assert session.pool.size_bytes == 64 * 1024 * 1024
    assert oct(os.stat(session.pool.path).st_mode & 0o777) == "0o600"
    # The heartbeat thread keeps the session alive; wait for real heartbeats, not a sleep.
    wait_until(lambda: session.heartbeats_sent >= 1, timeout_seconds=session.ttl_seconds, message="a heartbeat")
    assert session.heartbeat_error is None
    assert session.stats().registered_instances >= 1


def test_tcp_door_works_like_the_socket(manager):
    with manager.client(tcp=True) as client:
        client.ping()
        with client.register(make_identity("py-test/tcp")) as s:
            assert s.stats().pool_bytes_total == 64 * 1024 * 1024


def test_publish_query_copy_release_byte_exact(manager, session):
    keys = hashes(1, 8)
    result = session.publish([(0, h, page(1, i)) for i, h in enumerate(keys)])
    assert result.sealed_pages == 8 and result.sealed_bytes == 8 * PAGE_BYTES and all(result.written)
    again = session.publish([(0, h, page(1, i)) for i, h in enumerate(keys)])
    assert again.written == (False,) * 8 and again.sealed_pages == 0

    reply = session.query({0: keys + hashes(99, 3)})
    assert reply.status == pb.READY and reply.ready_blocks == 8 and reply.boundary_tokens == 8 * 16
    with session.lease(reply) as lease:
        for leased in lease.pages:
            copy = lease.read(leased)  # verifies the CRC32C when the Manager leases the page with one
            if leased.HasField("crc32c"):
                assert leased.crc32c == crc32c(page(1, leased.position))
            assert bytes(copy) == page(1, leased.position)
    assert session.stats().session_leases == 0


def test_copy_with_a_wrong_checksum_is_refused(manager, session):
    keys = hashes(7, 1)
    session.publish([(0, keys[0], page(7, 0))])
    reply = session.query({0: keys})
    with session.lease(reply) as lease:
        leased = pb.LeasedPage()
        leased.CopyFrom(lease.pages[0])
        leased.crc32c = crc32c(page(7, 0)) ^ 1  # what a corrupted slot would look like to the engine
        with pytest.raises(ChecksumMismatchError):
            lease.read(leased)
        leased.crc32c = crc32c(page(7, 0))
        assert bytes(lease.read(leased)) == page(7, 0)


def test_miss_and_partial_hit(manager, session):
    keys = hashes(2, 6)
    session.publish([(0, h, page(2, i)) for i, h in enumerate(keys[:3])])
    miss = session.query({0: hashes(3, 4)})
    assert miss.status == pb.MISS
    partial = session.query({0: keys})
    assert partial.status == pb.READY and partial.ready_blocks == 3
    with session.lease(partial) as lease:
        assert sorted(p.position for p in lease.pages) == [0, 1, 2]


def test_demand_form_restores_only_requested_range(manager, session):
    keys = hashes(4, 6)
    session.publish([(0, h, page(4, i)) for i, h in enumerate(keys)])
    reply = session.demand(session.prefix_demand("req-1", keys, start_block=2, end_block=5))
    assert reply.status == pb.READY and reply.boundary_tokens == 5 * 16
    with session.lease(reply) as lease:
        assert sorted(p.position for p in lease.pages) == [2, 3, 4]
        for leased in lease.pages:
            assert bytes(lease.read(leased)) == page(4, leased.position)


def test_planning_fields_boundary_reason_and_an_unavailable_route(manager):
    with manager.client() as client:
        with client.register(make_identity("py-test/planning"), prefill_tokens_per_second=5000.0) as s:
            keys = hashes(11, 4)
            s.publish([(0, h, page(11, i)) for i, h in enumerate(keys)])
            reply = s.demand(s.prefix_demand("plan-1", keys, first_use_micros=1000))
            assert reply.status == pb.READY and reply.boundary_reason == pb.LONGEST
            s.release(reply.lease.lease_id)
            with pytest.raises(OrbitKvError) as raised:
                s.submit_demand(s.prefix_demand("plan-2", keys, requested_route=pb.ROUTE_HOST_FROM_PEER_DRAM))
            assert raised.value.reason == "ROUTE_UNAVAILABLE"


def test_release_failure_raises_lease_invalid_and_body_errors_still_release(manager, session):
    keys = hashes(5, 2)
    session.publish([(0, h, page(5, i)) for i, h in enumerate(keys)])
    reply = session.query({0: keys})
    # Released behind the context manager's back: its own release then fails (UNKNOWN_LEASE) -> discard the copy.
    with pytest.raises(LeaseInvalidError) as raised:
        with session.lease(reply):
            session.release(reply.lease.lease_id)
    assert raised.value.invalid_reason is None
    assert isinstance(raised.value.__cause__, OrbitKvError) and raised.value.__cause__.reason == "UNKNOWN_LEASE"

    reply = session.query({0: keys})
    with pytest.raises(KeyError):
        with session.lease(reply):
            raise KeyError("engine failed mid-copy")
    assert session.stats().session_leases == 0


def test_typed_errors_from_the_trailer(manager, session):
    with pytest.raises(OrbitKvError) as raised:
        session.release(424242)
    assert raised.value.reason == "UNKNOWN_LEASE" and raised.value.grpc_status != "OK"
    with pytest.raises(OrbitKvError) as raised:
        session.client.call("SubmitQuery", pb.SubmitQueryRequest(session=session.ref, namespace_id=b"\x00" * 16,
                                                                 groups=[pb.GroupChain(group_id=0, block_hashes=[b"x"])]))
    assert raised.value.reason == "NAMESPACE_MISMATCH"
    from orbitkv import OrbitKvClient

    with OrbitKvClient.connect_unix(manager.socket, "not-the-token") as intruder:
        with pytest.raises(OrbitKvError) as raised:
            intruder.ping()
        assert raised.value.reason == "UNAUTHENTICATED_CALLER"


def test_publish_of_wrong_size_aborts_and_leaves_nothing(manager, session):
    used_before = session.stats().pool_bytes_used
    with pytest.raises(ValueError):
        session.publish([(0, hashes(6, 1)[0], b"short")])
    assert session.stats().pool_bytes_used == used_before, "the aborted publish freed its slot"
    assert session.query({0: hashes(6, 1)}).status == pb.MISS


def test_close_unregisters_and_unmaps(manager):
    with manager.client() as client:
        s = client.register(make_identity("py-test/close"))
        instance = s.instance_id
        s.close()
        s.close()  # idempotent
        with pytest.raises(ValueError):
            s.pool.view(pb.PoolDescriptor(region_id=s.pool.region_id, offset=0, length=1))
        with pytest.raises(OrbitKvError) as raised:
            client.call("Heartbeat", pb.HeartbeatRequest(session=pb.SessionRef(instance_id=instance,
                                                                                session_epoch=s.ref.session_epoch)))
        assert raised.value.reason in ("UNKNOWN_INSTANCE", "STALE_SESSION_EPOCH")


def test_descriptor_outside_pool_is_refused_locally(session):
    with pytest.raises(ValueError):
        session.pool.view(pb.PoolDescriptor(region_id=session.pool.region_id, offset=session.pool.size_bytes, length=1))
    with pytest.raises(ValueError):
        session.pool.view(pb.PoolDescriptor(region_id=session.pool.region_id + 1, offset=0, length=1))


def test_retain_unretain_and_typed_refusals(manager, session):
    chain = hashes(77, 3)
    session.publish([(0, h, page(77, i)) for i, h in enumerate(chain)])
    retained = session.retain({0: chain}, ttl_ms=60_000, priority=3)
    assert retained.retained_bytes == 3 * PAGE_BYTES and retained.resident_pages == 3
    assert retained.tenant_retained_bytes == 3 * PAGE_BYTES <= retained.tenant_budget_bytes
    with pytest.raises(OrbitKvError) as raised:
        session.retain({0: chain}, ttl_ms=0)
    assert raised.value.reason == "INVALID_RETENTION_TTL"
    with pytest.raises(OrbitKvError) as raised:
        session.unretain(retained.retention_id + 1000)
    assert raised.value.reason == "UNKNOWN_RETENTION"
    assert session.unretain(retained.retention_id).released_bytes == 3 * PAGE_BYTES


def test_max_stored_tokens_and_do_not_store(manager, session):
    page_tokens = session.identity.page_size_tokens
    chain = hashes(78, 4)
    result = session.publish([(0, h, page(78, i)) for i, h in enumerate(chain)], max_stored_tokens=2 * page_tokens)
    assert result.sealed_pages == 2 and result.written == (True, True, False, False)
    transient = hashes(79, 2)
    assert session.publish([(0, h, page(79, i)) for i, h in enumerate(transient)], do_not_store=True).sealed_pages == 2
    reply = session.query({0: transient})
    assert reply.ready_blocks == 2
    session.release(reply.lease.lease_id)
