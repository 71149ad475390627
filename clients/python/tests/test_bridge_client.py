"""The Python client over the event-bus bridge door (``OrbitKvClient.connect_bridge``, :mod:`orbitkv.bridge`): the
same sessions, publishes, queries and leases as over gRPC, and the same typed refusals, name and text."""

import hashlib
import os

import pytest

from orbitkv import OrbitKvError, identity, pb
from manager import wait_until

PAGE_BYTES = 4096


def make_identity(model):
    return identity(model, "test:NHD", "layers=2;kv_heads=2;head_dim=64;dtype=bf16", 16,
                    [(0, pb.FULL_ATTENTION, PAGE_BYTES)])


def page(position: int) -> bytes:
    return bytes((position * 13 + i) & 0xFF for i in range(PAGE_BYTES))


def test_a_session_over_the_bridge_publishes_queries_and_copies_byte_exact(manager):
    run = os.urandom(8).hex()  # fresh keys: the session's Manager may hold this test's pages from an earlier run
    keys = [hashlib.sha256(f"bridge-client/{run}/{i}".encode()).digest() for i in range(6)]
    with manager.bridge_client() as client:
        client.ping()
        with client.register(make_identity("py-bridge/client"), label="bridge") as session:
            published = session.publish([(0, k, page(i)) for i, k in enumerate(keys)])
            assert published.sealed_pages == 6 and all(published.written)
            reply = session.query({0: keys})
            assert reply.status == pb.READY and reply.ready_blocks == 6
            with session.lease(reply) as lease:
                for leased in lease.pages:
                    assert bytes(lease.read(leased)) == page(leased.position)
            # The heartbeat thread shares the bridge connection with the calls above.
            wait_until(lambda: session.heartbeats_sent >= 1, timeout_seconds=session.ttl_seconds,
                       message="a heartbeat over the bridge")
            assert session.heartbeat_error is None
            assert session.stats().session_leases == 0


def test_refusals_carry_the_same_reason_and_text_as_on_grpc(manager):
    with manager.client() as grpc_client, manager.bridge_client() as bridge_client:
        with grpc_client.register(make_identity("py-bridge/parity")) as session:
            ref = session.ref
            stale = pb.SessionRef(instance_id=ref.instance_id, session_epoch=ref.session_epoch + 3)
            bad_identity = make_identity("py-bridge/parity")
            bad_identity.page_size_tokens = 0
            cases = [
                ("ReleaseLease", pb.ReleaseLeaseRequest(session=ref, lease_id=987654), "UNKNOWN_LEASE"),
                ("PollQuery", pb.PollQueryRequest(session=ref, ticket=123123), "UNKNOWN_TICKET"),
                ("Heartbeat", pb.HeartbeatRequest(session=stale), "STALE_SESSION_EPOCH"),
                ("Register", pb.RegisterRequest(identity=bad_identity), "INVALID_IDENTITY"),
                ("AllocatePublish", pb.AllocatePublishRequest(session=ref, namespace_id=bytes(16),
                                                              pages=[pb.PageKey(block_hash=bytes(32))]),
                 "NAMESPACE_MISMATCH"),
            ]
            for method, request, reason in cases:
                with pytest.raises(OrbitKvError) as over_grpc:
                    grpc_client.call(method, request)
                with pytest.raises(OrbitKvError) as over_bridge:
                    bridge_client.call(method, request)
                assert over_bridge.value.reason == over_grpc.value.reason == reason, method
                assert over_bridge.value.message == over_grpc.value.message, method
                assert over_bridge.value.reason_code == pb.ErrorReason.Value(reason)
