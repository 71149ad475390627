"""The co-located channel (SOCK_SEQPACKET) against a real Manager: the same calls, replies and typed errors as gRPC,
its bounds, its authentication, and a disconnect that releases what the connection held."""

import os
import socket
import stat
import struct

import pytest

from orbitkv import OrbitKvError, pb
from orbitkv.client import OrbitKvClient
from orbitkv.colocated import HEADER, OP_HELLO, OPCODES, VERSION
from manager import wait_until
from test_client import PAGE_BYTES, hashes, make_identity, page


@pytest.fixture
def colocated(manager):
    with manager.colocated_client() as client:
        yield client


def test_the_socket_is_owner_only(manager):
    mode = os.stat(manager.colocated_socket).st_mode
    assert stat.S_ISSOCK(mode) and oct(mode & 0o777) == "0o600"


def test_a_whole_session_over_the_channel_byte_exact(manager, colocated):
    assert colocated.target.startswith("colocated:")
    colocated.ping()
    keys = hashes(41, 6)
    with colocated.register(make_identity("py-colocated/own"), label="colocated") as session:
        result = session.publish([(0, h, page(41, i)) for i, h in enumerate(keys)])
        assert result.sealed_pages == 6
        reply = session.query({0: keys})
        assert reply.status == pb.READY and reply.ready_blocks == 6
        assert session.poll(reply.ticket).lease.lease_id == reply.lease.lease_id
        with session.lease(reply) as lease:
            for leased in lease.pages:
                assert bytes(lease.read(leased)) == page(41, leased.position)
        assert session.stats().session_leases == 0


def test_a_spinning_transport_answers_the_same(manager):
    from orbitkv.colocated import ColocatedTransport

    transport = ColocatedTransport(manager.colocated_socket, manager.token, spin_seconds=0.001)
    with OrbitKvClient(f"colocated:{manager.colocated_socket}", manager.token, transport=transport) as client:
        keys = hashes(47, 3)
        with client.register(make_identity("py-colocated/spin"), label="spin") as session:
            session.publish([(0, h, page(47, i)) for i, h in enumerate(keys)])
            reply = session.query({0: keys})
            assert reply.status == pb.READY and reply.ready_blocks == 3
            assert session.poll(reply.ticket).lease.lease_id == reply.lease.lease_id
            with session.lease(reply) as lease:
                for leased in lease.pages:
                    assert bytes(lease.read(leased)) == page(47, leased.position)
            with pytest.raises(OrbitKvError) as refused:
                session.poll(reply.ticket + 987654)
            assert refused.value.reason == "UNKNOWN_TICKET"
            assert session.stats().session_leases == 0
    with pytest.raises(ValueError):
        ColocatedTransport(manager.colocated_socket, manager.token, spin_seconds=-1)


def test_refusals_carry_the_same_reasons_as_grpc(manager, colocated):
    with manager.client() as grpc_client, grpc_client.register(make_identity("py-colocated/err")) as session:
        for transport in (colocated, grpc_client):
            with pytest.raises(OrbitKvError) as refused:
                transport.call("PollQuery", pb.PollQueryRequest(session=session.ref, ticket=987654))
            assert refused.value.reason == "UNKNOWN_TICKET"
            stale = pb.SessionRef(instance_id=session.instance_id, session_epoch=session.ref.session_epoch + 1)
            with pytest.raises(OrbitKvError) as refused:
                transport.call("ReleaseLease", pb.ReleaseLeaseRequest(session=stale, lease_id=1))
            assert refused.value.reason == "STALE_SESSION_EPOCH"
        colocated.ping()


def test_a_wrong_token_is_refused_typed(manager):
    with pytest.raises(OrbitKvError) as refused:
        OrbitKvClient.connect_colocated(manager.colocated_socket, "not-the-token-0123456789")
    assert refused.value.reason == "UNAUTHENTICATED_CALLER"


def test_frames_beyond_the_bound_go_over_grpc_or_are_refused(manager):
    too_many = {0: hashes(7, 9000)}  # about 300 KiB of block hashes: above the default 256 KiB frame bound
    with manager.client() as grpc_client, grpc_client.register(make_identity("py-colocated/big")) as session:
        request = pb.SubmitQueryRequest(session=session.ref, namespace_id=session.namespace,
                                        groups=[pb.GroupChain(group_id=0, block_hashes=too_many[0])])
        with manager.colocated_client(fallback=False) as strict:
            with pytest.raises(OrbitKvError) as refused:
                strict.call("SubmitQuery", request)
            assert refused.value.reason == "OVERSIZED_REQUEST"
            strict.ping()
        with manager.colocated_client(fallback=True) as lenient:
            reply = lenient.call("SubmitQuery", request)  # over gRPC: nothing was published, so a miss
            assert reply.status == pb.MISS
    # A raw frame above the bound is refused with its request id, and the connection goes on.
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    raw.connect(manager.colocated_socket)
    try:
        raw.send(HEADER.pack(VERSION, OP_HELLO, 0, 0) + manager.token.encode())
        max_frame, _ = struct.unpack_from("<II", raw.recv(64), HEADER.size)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * max_frame)
        raw.send(HEADER.pack(VERSION, OPCODES["Ping"], 0, 77) + bytes(max_frame))
        _, _, status, request_id = HEADER.unpack_from(raw.recv(max_frame))
        assert (request_id, pb.ErrorReason.Name(status)) == (77, "OVERSIZED_REQUEST")
        raw.send(HEADER.pack(VERSION, OPCODES["Ping"], 0, 78))
        assert HEADER.unpack_from(raw.recv(max_frame))[2:] == (0, 78)
    finally:
        raw.close()


def test_a_disconnect_releases_the_session_and_its_leases(manager):
    keys = hashes(43, 4)
    with manager.client() as grpc_client, grpc_client.register(make_identity("py-colocated/held")) as keeper:
        keeper.publish([(0, h, page(43, i)) for i, h in enumerate(keys)])
        instances = keeper.stats().registered_instances
        dying = manager.colocated_client()
        session = dying.register(make_identity("py-colocated/held"))
        session.stop_heartbeats()
        reply = session.query({0: keys})
        assert reply.status == pb.READY
        assert manager.metric("orbitkv_leases_active") == 1
        dying.close()  # the engine dies: no release, no unregister
        wait_until(lambda: manager.metric("orbitkv_leases_active") == 0
                   and keeper.stats().registered_instances == instances, message="the dead connection's holdings")
        session.pool.close()


def test_the_vllm_connector_looks_up_over_the_channel_when_it_is_there(manager):
    from vllm_harness import MiniVllm

    engine = MiniVllm(str(manager.data_dir))
    try:
        session = engine.scheduler.keeper.wait_for_session(30)
        assert session is not None and session.client.target.startswith("colocated:")
    finally:
        engine.shutdown()
    grpc_engine = MiniVllm(str(manager.data_dir), extra={"orbitkv.colocated": False})
    try:
        session = grpc_engine.scheduler.keeper.wait_for_session(30)
        assert session is not None and session.client.target.startswith("unix:")
    finally:
        grpc_engine.shutdown()


def test_every_engine_call_has_the_same_opcode_on_both_sides():
    """The Manager refuses to start when an engine.proto call has no opcode: both tables follow the service."""
    import pathlib
    import re
    from orbitkv.colocated import METHODS
    java = pathlib.Path(__file__).resolve().parents[3] / "protocol/src/main/java/io/orbitkv/protocol/colocated/ColocatedFrame.java"
    listed = re.search(r"METHODS = List\.of\((.*?)\);", java.read_text(), re.S).group(1)
    assert tuple(re.findall(r'"(\w+)"', listed)) == METHODS
    assert set(METHODS) == set(pb.DESCRIPTOR.services_by_name["EngineService"].methods_by_name)


def _full_reply() -> pb.QueryReply:
    """A QueryReply with every field set, the lease's pages with and without a checksum."""
    reply = pb.QueryReply(ticket=2**40 + 3, status=pb.READY, ready_blocks=3, revision=9, retry_after_micros=250,
                          detail=pb.READY, boundary_tokens=48, request_id="req-é", operation_id=2**33,
                          boundary_reason=pb.EARLIER_FIRST_TOKEN,
                          leased_ranges=[pb.GroupSpans(group_id=1, spans=[pb.BlockSpan(start=0, end=3)])],
                          restore=pb.RestoreOutcome(restored_pages=3, restored_bytes=3 * PAGE_BYTES))
    reply.lease.lease_id = 2**63 + 5
    for i in range(3):
        leased = reply.lease.pages.add(group_id=1, position=i)
        leased.slot.region_id, leased.slot.offset, leased.slot.length, leased.slot.generation = 4, i * PAGE_BYTES, \
            PAGE_BYTES, 2**35 + i
        if i != 1:
            leased.crc32c = 0xFFFFFFFF - i
    return reply


def test_a_query_reply_view_reads_every_field_as_the_whole_message():
    from orbitkv.colocated import QueryReplyView

    full = _full_reply()
    view = QueryReplyView(full.SerializeToString())
    assert (view.status, view.ready_blocks, view.lease.lease_id, view.HasField("lease")) == (pb.READY, 3, 2**63 + 5,
                                                                                             True)
    assert view._full is None  # the head alone answered: the pages are not parsed yet
    for field in pb.QueryReply.DESCRIPTOR.fields:
        assert getattr(view, field.name) == getattr(full, field.name), field.name
    assert view.HasField("restore") and view.lease.pages[1].HasField("crc32c") is False
    assert view == full and view.lease == full.lease and view.SerializeToString() == full.SerializeToString()
    assert str(view) == str(full)
    # A lease sent in two pieces is merged, as protobuf merges a repeated message field: the head agrees.
    second = pb.QueryReply()
    second.lease.lease_id = 77
    second.lease.pages.add(position=9)
    merged = QueryReplyView(full.SerializeToString() + second.SerializeToString())
    assert merged.lease.lease_id == 77 and len(merged.lease.pages) == 4
    # No lease: absent as in the message, and a zero id; unknown fields (a newer Manager's) are skipped.
    miss = QueryReplyView(pb.QueryReply(ticket=5, status=pb.MISS).SerializeToString() + b"\xa8\x06\x01")
    assert not miss.HasField("lease") and miss.lease.lease_id == 0 and miss.status == pb.MISS and miss.ticket == 5
    with pytest.raises(AttributeError):
        miss.no_such_field


def test_query_replies_over_the_channel_equal_the_grpc_ones(manager, colocated):
    from orbitkv.colocated import QueryReplyView

    keys = hashes(53, 5)
    with manager.client() as grpc_client, grpc_client.register(make_identity("py-colocated/view")) as session:
        session.publish([(0, h, page(53, i)) for i, h in enumerate(keys)])
        request = pb.SubmitQueryRequest(session=session.ref, namespace_id=session.namespace,
                                        groups=[pb.GroupChain(group_id=0, block_hashes=keys)])
        reply = colocated.call("SubmitQuery", request)
        assert isinstance(reply, QueryReplyView)
        assert reply.status == pb.READY and reply.ready_blocks == 5
        polled = pb.PollQueryRequest(session=session.ref, ticket=reply.ticket)
        over_grpc = grpc_client.call("PollQuery", polled)
        assert colocated.call("PollQuery", polled) == over_grpc and reply == over_grpc
        assert reply.message() == over_grpc  # a protobuf message compares equal only to a message
        with session.lease(reply) as lease:
            for leased in lease.pages:
                assert bytes(lease.read(leased)) == page(53, leased.position)
        miss = colocated.call("SubmitQuery", pb.SubmitQueryRequest(
            session=session.ref, namespace_id=session.namespace, groups=[pb.GroupChain(group_id=0,
                                                                                       block_hashes=hashes(54, 2))]))
        assert miss.status == pb.MISS and not miss.HasField("lease")
        assert session.stats().session_leases == 0
