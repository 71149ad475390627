"""A transport for the Manager's event-bus bridge door (the Vert.x TCP event-bus bridge), standard library only.

Use it through :meth:`orbitkv.client.OrbitKvClient.connect_bridge`; sessions, publish, queries and leases then work
exactly as over gRPC. The wire contract (README "The event-bus bridge door"): frames are a 4-byte big-endian length
and UTF-8 JSON; a call is ``{"type": "send", "address": "orbitkv.engine.v1.EngineService/<Method>", "replyAddress":
..., "headers": {"x-orbitkv-token": ...}, "body": base64(protobuf request)}``; its answer comes to the reply address,
``{"type": "message", "body": base64(protobuf reply)}`` or ``{"type": "err", "failureCode": <ErrorReason number>,
"message": "REASON: explanation"}``.

Design note: one TCP connection, one call in flight at a time (a lock), so the session's heartbeat thread can share
it; engine calls are short. A failure frame without an address answers a frame the Manager could not read a reply
address from: it can only be the call in flight. A timeout or a broken stream closes the transport (a half-read
frame would leave the framing unknown); later calls fail and the engine reconnects.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import threading

from orbitkv._proto import engine_pb2 as pb
from orbitkv.errors import OrbitKvError

SERVICE = "orbitkv.engine.v1.EngineService"
TOKEN_HEADER = "x-orbitkv-token"
# The Manager's default bridge.max-frame; a larger answer means the stream is not what we think it is.
MAX_FRAME_BYTES = 24 * 1024 * 1024
_METHODS = pb.DESCRIPTOR.services_by_name["EngineService"].methods_by_name


def address_of(method: str) -> str:
    """The bridge address of an engine call: its gRPC full method name."""
    return f"{SERVICE}/{method}"


def encode_frame(frame: dict) -> bytes:
    data = json.dumps(frame, separators=(",", ":")).encode()
    return struct.pack(">I", len(data)) + data


def failure_error(frame: dict) -> OrbitKvError:
    """An ``err`` frame as an :class:`OrbitKvError` whose ``reason`` is the ErrorReason named by ``failureCode``."""
    message = str(frame.get("message") or frame)
    code = frame.get("failureCode")
    try:
        reason = pb.ErrorReason.Name(code) if isinstance(code, int) else "ERROR_REASON_UNSPECIFIED"
    except ValueError:  # -1: the event bus's own failure (timeout, no handler); or a newer Manager's reason
        reason = "ERROR_REASON_UNSPECIFIED"
    return OrbitKvError(reason, str(frame.get("failureType", "ERROR")), message)


class BridgeTransport:
    """One connection to the bridge; ``call(method, request, timeout)`` like the gRPC transport."""

    def __init__(self, host: str, port: int, token: str, connect_timeout_seconds: float = 10.0):
        self._socket = socket.create_connection((host, port), timeout=connect_timeout_seconds)
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._token = token
        self._lock = threading.Lock()
        self._next_reply = 0
        self._closed = False

    def call(self, method: str, request, timeout: float | None):
        if method not in _METHODS:
            raise ValueError(f"no engine call {method!r}")
        reply_type = getattr(pb, _METHODS[method].output_type.name)
        with self._lock:
            if self._closed:
                raise OrbitKvError("ERROR_REASON_UNSPECIFIED", "UNAVAILABLE", "the bridge connection is closed")
            self._next_reply += 1
            reply_address = f"r-{self._next_reply}"
            frame = {"type": "send", "address": address_of(method), "replyAddress": reply_address,
                     "headers": {TOKEN_HEADER: self._token},
                     "body": base64.b64encode(request.SerializeToString()).decode("ascii")}
            try:
                self._socket.settimeout(timeout)
                self._socket.sendall(encode_frame(frame))
                answer = self._answer_to(reply_address)
            except (OSError, ValueError) as e:  # socket.timeout is an OSError; ValueError: a frame that is not JSON
                self._close_locked()
                raise OrbitKvError("ERROR_REASON_UNSPECIFIED", "UNAVAILABLE",
                                   f"{method} over the bridge failed ({e!r}); the connection is closed") from None
        if answer.get("type") == "message":
            return reply_type.FromString(base64.b64decode(answer.get("body", ""), validate=True))
        raise failure_error(answer)

    def _answer_to(self, reply_address: str) -> dict:
        while True:
            frame = self._read_frame()
            if frame.get("address") == reply_address:
                return frame
            if frame.get("type") == "err" and "address" not in frame:
                return frame
            # Anything else (a late answer to a call that timed out before the connection closed, a pong) is skipped.

    def _read_frame(self) -> dict:
        (length,) = struct.unpack(">I", self._read_exactly(4))
        if length > MAX_FRAME_BYTES:
            raise ValueError(f"a frame of {length} bytes")
        return json.loads(self._read_exactly(length))

    def _read_exactly(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self._socket.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("the Manager closed the bridge connection")
            chunks += chunk
        return bytes(chunks)

    def _close_locked(self) -> None:
        if not self._closed:
            self._closed = True
            self._socket.close()

    def close(self) -> None:
        with self._lock:
            self._close_locked()
