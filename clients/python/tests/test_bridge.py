"""The event-bus bridge door over a raw TCP socket, with nothing but the standard library and the generated protobuf
module: what an engine that speaks neither gRPC nor Vert.x needs to do. Against the real Manager the session fixture
starts (``bridge.port=0``).

Frames: a 4-byte big-endian length, then UTF-8 JSON. A call: ``{"type": "send", "address":
"orbitkv.engine.v1.EngineService/<Method>", "replyAddress": ..., "headers": {"x-orbitkv-token": ...}, "body":
base64(request)}``; the answer to the reply address is a ``message`` with base64(reply) as its body, or an ``err``
with the ErrorReason number as ``failureCode`` and ``"REASON: explanation"`` as ``message``.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import itertools
import json
import mmap
import os
import socket
import struct
import time
from pathlib import Path

import pytest

# The generated module itself, loaded from its file: this test imports nothing of the orbitkv package.
_spec = importlib.util.spec_from_file_location(
    "engine_pb2", Path(__file__).resolve().parents[1] / "orbitkv" / "_proto" / "engine_pb2.py")
pb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pb)

SERVICE = "orbitkv.engine.v1.EngineService/"
PAGE_BYTES = 4096


def crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli), bit by bit: the checksum SealPublish verifies."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


class RawBridge:
    """Frames over a plain socket; counts every byte both ways."""

    def __init__(self, port: int, token: str | None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.token = token
        self.replies = itertools.count(1)
        self.bytes_sent = 0
        self.bytes_received = 0

    def send(self, frame) -> None:
        data = frame if isinstance(frame, bytes) else json.dumps(frame).encode()
        self.sock.sendall(struct.pack(">I", len(data)) + data)
        self.bytes_sent += 4 + len(data)

    def receive(self) -> dict:
        (length,) = struct.unpack(">I", self._exactly(4))
        frame = json.loads(self._exactly(length))
        self.bytes_received += 4 + length
        return frame

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the Manager closed the connection"
            data += chunk
        return data

    def frame(self, method: str, request=None, *, body=None, token: str | None = "default") -> dict:
        headers = {} if token is None else {"x-orbitkv-token": self.token if token == "default" else token}
        if request is not None:
            body = base64.b64encode(request.SerializeToString()).decode()
        return {"type": "send", "address": SERVICE + method, "replyAddress": f"py-{next(self.replies)}",
                "headers": headers, "body": body}

    def exchange(self, frame: dict) -> dict:
        self.send(frame)
        answer = self.receive()
        assert answer.get("address") == frame["replyAddress"], answer
        return answer

    def call(self, method: str, request, reply_type):
        answer = self.exchange(self.frame(method, request))
        assert answer["type"] == "message", answer
        return reply_type.FromString(base64.b64decode(answer["body"]))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def bridge(manager):
    assert manager.bridge_port, "the test Manager runs with bridge.port=0"
    raw = RawBridge(manager.bridge_port, manager.token)
    yield raw
    raw.close()


def identity(model: str) -> "pb.InstanceIdentity":
    return pb.InstanceIdentity(model_fingerprint=model, representation=pb.RAW, layout="test:NHD",
                               geometry="layers=2;kv_heads=2;head_dim=64;dtype=bf16", page_size_tokens=16, tp_size=1,
                               pp_size=1, groups=[pb.GroupSpec(group_id=0, kind=pb.FULL_ATTENTION,
                                                               bytes_per_page=PAGE_BYTES)])


def page(position: int) -> bytes:
    return bytes((position * 31 + i * 7) & 0xFF for i in range(PAGE_BYTES))


def test_register_publish_query_ready_and_release_lease_valid(manager, bridge):
    registered = bridge.call("Register", pb.RegisterRequest(identity=identity("py-bridge/raw"), role=pb.DECODE),
                             pb.RegisterReply)
    session = pb.SessionRef(instance_id=registered.instance_id, session_epoch=registered.session_epoch)
    run = os.urandom(8).hex()  # fresh keys: the session's Manager may hold this test's pages from an earlier run
    keys = [hashlib.sha256(f"raw/{run}/{i}".encode()).digest() for i in range(4)]
    fd = os.open(registered.pool.path, os.O_RDWR)
    try:
        pool = mmap.mmap(fd, registered.pool.size_bytes)
        allocated = bridge.call("AllocatePublish", pb.AllocatePublishRequest(
            session=session, namespace_id=registered.namespace_id,
            pages=[pb.PageKey(group_id=0, block_hash=k) for k in keys]), pb.AllocatePublishReply)
        assert [s.status for s in allocated.slots] == [pb.ALLOCATED] * 4
        for i, slot in enumerate(allocated.slots):
            pool[slot.slot.offset:slot.slot.offset + slot.slot.length] = page(i)
        sealed = bridge.call("SealPublish", pb.SealPublishRequest(
            session=session, publish_id=allocated.publish_id, crc32c=[crc32c(page(i)) for i in range(4)],
            written=[s.slot for s in allocated.slots]), pb.SealPublishReply)
        assert sealed.sealed_pages == 4 and sealed.sealed_bytes == 4 * PAGE_BYTES

        reply = bridge.call("SubmitQuery", pb.SubmitQueryRequest(
            session=session, namespace_id=registered.namespace_id,
            groups=[pb.GroupChain(group_id=0, block_hashes=keys)]), pb.QueryReply)
        while reply.status == pb.PENDING:
            time.sleep(max(0.0005, reply.retry_after_micros / 1e6))
            reply = bridge.call("PollQuery", pb.PollQueryRequest(session=session, ticket=reply.ticket), pb.QueryReply)
        assert reply.status == pb.READY and reply.ready_blocks == 4
        for leased in reply.lease.pages:
            copy = pool[leased.slot.offset:leased.slot.offset + leased.slot.length]
            assert copy == page(leased.position)
            if leased.HasField("crc32c"):
                assert leased.crc32c == crc32c(copy)
        released = bridge.call("ReleaseLease", pb.ReleaseLeaseRequest(session=session, lease_id=reply.lease.lease_id),
                               pb.ReleaseLeaseReply)
        assert released.lease_valid and released.released_pages == 4
        pool.close()
    finally:
        os.close(fd)
    bridge.call("Unregister", pb.UnregisterRequest(session=session), pb.UnregisterReply)
    # Descriptors only: both directions together carried less than one page of the four published and restored.
    assert bridge.bytes_sent + bridge.bytes_received < PAGE_BYTES
    assert manager.metric("orbitkv_bridge_outstanding") == 0


@pytest.mark.parametrize("token", [None, "0" * 64, 42], ids=["without", "wrong", "not-a-string"])
def test_a_frame_without_or_with_a_wrong_token_is_refused(manager, bridge, token):
    instances = manager.metric("orbitkv_instances")
    frame = bridge.frame("Register", pb.RegisterRequest(identity=identity("py-bridge/no-token")))
    frame["headers"] = {} if token is None else {"x-orbitkv-token": token}
    answer = bridge.exchange(frame)
    assert answer["type"] == "err"
    assert answer["failureCode"] == pb.UNAUTHENTICATED_CALLER
    assert answer["message"].startswith("UNAUTHENTICATED_CALLER: ")
    assert manager.metric("orbitkv_instances") == instances, "a refused Register registered nothing"
    # Checked per frame: the same connection with the token is served.
    assert bridge.call("Ping", pb.PingRequest(), pb.PingReply) == pb.PingReply()


@pytest.mark.parametrize("address", ["orbitkv.storage.stats", "orbitkv.admission.submit", "orbitkv.cost",
                                     SERVICE + "Nothing", "Ping"])
def test_an_address_outside_the_engine_operations_is_refused(bridge, address):
    frame = bridge.frame("Ping", pb.PingRequest())
    frame["address"] = address
    answer = bridge.exchange(frame)
    assert answer["type"] == "err"
    assert answer["failureCode"] == pb.MALFORMED_REQUEST
    assert f"no engine call at address '{address}'" in answer["message"]


def test_subscribing_or_publishing_on_the_bridge_is_refused(bridge):
    for frame_type in ("register", "publish"):
        frame = bridge.frame("Ping", pb.PingRequest())
        frame["type"] = frame_type
        answer = bridge.exchange(frame)
        assert answer["failureCode"] == pb.MALFORMED_REQUEST
        assert f"frame type '{frame_type}' is not served" in answer["message"]


@pytest.mark.parametrize("body", [base64.b64encode(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01").decode(),
                                  "not base64!", {"instance_id": 1}, 7],
                         ids=["undecodable-protobuf", "not-base64", "json-object", "number"])
def test_a_malformed_body_gets_malformed_request(manager, bridge, body):
    before = manager.metric('orbitkv_bridge_rejections_total{reason="malformed_request"}')
    answer = bridge.exchange(bridge.frame("Register", body=body))
    assert answer["type"] == "err"
    assert answer["failureCode"] == pb.MALFORMED_REQUEST
    assert pb.ErrorReason.Name(answer["failureCode"]) == "MALFORMED_REQUEST"
    assert answer["message"].startswith("MALFORMED_REQUEST: ")
    assert manager.metric('orbitkv_bridge_rejections_total{reason="malformed_request"}') == before + 1


def test_a_frame_that_is_not_json_is_answered_without_an_address(bridge):
    bridge.send(b"{this is not json")
    answer = bridge.receive()
    assert answer["type"] == "err" and "address" not in answer
    assert answer["failureCode"] == pb.MALFORMED_REQUEST
    assert bridge.call("Ping", pb.PingRequest(), pb.PingReply) == pb.PingReply()


def test_leak_counters_are_zero_after_the_bridge_tests(manager):
    for name in ("orbitkv_leases_active", "orbitkv_leases_bytes", "orbitkv_images_pinned",
                 "orbitkv_queries_outstanding", "orbitkv_bridge_outstanding"):
        assert manager.metric(name) == 0, name
