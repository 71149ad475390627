"""A transport for the Manager's co-located channel: engine.proto calls over a ``SOCK_SEQPACKET`` Unix socket, standard
library only.

Use it through :meth:`orbitkv.client.OrbitKvClient.connect_colocated` (or ``from_data_dir``, which prefers it when the
Manager offers it); sessions, publish, queries and leases then work exactly as over gRPC, with the same typed errors.
The wire contract (docs/engine-api.md "The co-located channel"): one socket message is one frame, an 8-byte header
(``u8 version = 1, u8 opcode, u16 status, u32 request id``, little-endian) and the protobuf message; the first frame
is Hello (opcode 0) with the engine token, answered with ``u32 max frame bytes, u32 max in flight``; a refusal has the
``ErrorReason`` number as its status and ``"REASON: explanation"`` as its body.

Design note: one connection, one call in flight at a time (a lock), so the session's heartbeat thread can share it;
per-request calls are short. A request larger than the Manager's frame bound goes over the ``fallback`` transport
(gRPC) when one is given, else it is refused ``OVERSIZED_REQUEST`` here. A timeout or a broken socket closes the
transport: later calls fail ``UNAVAILABLE``, and the sessions registered over it count as lost (``sessions_ended``):
the Manager ends them, and releases the leases it handed out on the connection, as soon as the connection ends (a
close, a crash of either side), so an adapter's keeper registers again instead of waiting for ``UNKNOWN_INSTANCE``.

The answers of the query calls (``SubmitQuery``, ``SubmitDemand``, ``PollQuery``) come back as :class:`QueryReplyView`:
it reads like the ``QueryReply`` it carries, but parses only the reply's top-level scalar fields at once, the lease id
when asked, and the whole message (the lease's pages: nearly all of a 64-page reply's parse) on the first access that
needs it. A lookup that only counts ready blocks and releases its lease never pays for the pages. A reply whose
pages do not parse raises protobuf's ``DecodeError`` at that access instead of in the call.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import threading
import time

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from orbitkv._proto import engine_pb2 as pb
from orbitkv.errors import OrbitKvError

VERSION = 1
OP_HELLO = 0
STATUS_INTERNAL = 0xFFFF
HEADER = struct.Struct("<BBHI")
HELLO_REPLY = struct.Struct("<II")
# engine.proto's calls in wire order: opcode = index + 1 (io.orbitkv.protocol.colocated.ColocatedFrame.METHODS).
METHODS = ("Register", "Unregister", "Heartbeat", "AllocatePublish", "SealPublish", "AbortPublish", "SubmitQuery",
           "SubmitDemand", "PollQuery", "CancelQuery", "ReleaseLease", "Stats", "Ping", "Retain", "Unretain")
OPCODES = {name: i + 1 for i, name in enumerate(METHODS)}
_SERVICE = pb.DESCRIPTOR.services_by_name["EngineService"].methods_by_name
REPLY_TYPES = {name: getattr(pb, _SERVICE[name].output_type.name) for name in METHODS}
SOCKET_NAME = "colocated.sock"


def _head_types():
    """Message types that read only the head of a ``QueryReply``: its scalar and enum fields as they are, the lease as
    its encoded bytes (each piece: protobuf merges a message field sent in pieces), and nothing of the other nested
    messages (kept as unknown bytes); and a ``Lease`` read for its id alone. Derived from engine.proto's descriptors,
    so a new scalar field is read here without a change. proto2, so that absent and zero stay apart."""
    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="orbitkv/colocated_head.proto", package="orbitkv.colocated_head",
                                              syntax="proto2")
    lease = file.message_type.add(name="LeaseHead")
    lease.field.add(name="lease_id", number=pb.Lease.DESCRIPTOR.fields_by_name["lease_id"].number,
                    type=field.TYPE_UINT64, label=field.LABEL_OPTIONAL)
    head = file.message_type.add(name="QueryReplyHead")
    names = []
    for f in pb.QueryReply.DESCRIPTOR.fields:
        if f.label == f.LABEL_REPEATED:
            continue
        if f.name == "lease":
            head.field.add(name=f.name, number=f.number, type=field.TYPE_BYTES, label=field.LABEL_REPEATED)
        elif f.type != f.TYPE_MESSAGE:
            # An enum travels as its number (a varint), which is what the full message's enum field reads too.
            head.field.add(name=f.name, number=f.number, label=field.LABEL_OPTIONAL,
                           type=field.TYPE_INT32 if f.type == f.TYPE_ENUM else f.type)
            names.append(f.name)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    factory = message_factory.MessageFactory(pool)
    return (factory.GetPrototype(pool.FindMessageTypeByName("orbitkv.colocated_head.QueryReplyHead")),
            factory.GetPrototype(pool.FindMessageTypeByName("orbitkv.colocated_head.LeaseHead")), frozenset(names))


_QUERY_REPLY_HEAD, _LEASE_HEAD, _HEAD_FIELDS = _head_types()


class QueryReplyView:
    """A ``QueryReply`` read lazily (see the module's note): its scalar fields come from the head, parsed at once, and
    ``lease.lease_id`` from the lease's bytes (parsed for the id alone unless the whole message already is); any other
    attribute, ``HasField`` of anything but ``lease``, and comparison parse the whole message once (:meth:`message`)
    and answer from it. It owns a copy of the reply's bytes. It is not a protobuf message: hand :meth:`message` to
    protobuf's own functions (``CopyFrom``, ``text_format``), and compare with the view on the left of ``==`` (a
    message compares equal only to a message)."""

    __slots__ = ("_body", "_head", "_full", "_lease_id")

    def __init__(self, body: bytes):
        self._body = body
        self._head = _QUERY_REPLY_HEAD.FromString(body)
        self._full = None
        self._lease_id = None

    def message(self) -> pb.QueryReply:
        """The whole ``QueryReply`` (parsed on the first call)."""
        if self._full is None:
            self._full = pb.QueryReply.FromString(self._body)
        return self._full

    @property
    def lease(self) -> "_LeaseView":
        return _LeaseView(self)

    def __getattr__(self, name: str):  # what the head does not have (the properties below answer what it has)
        return getattr(self.message(), name)

    def HasField(self, name: str) -> bool:  # noqa: N802 (protobuf's name)
        return len(self._head.lease) > 0 if name == "lease" else self.message().HasField(name)

    def SerializeToString(self, **kwargs) -> bytes:  # noqa: N802
        return self.message().SerializeToString(**kwargs)

    def __eq__(self, other) -> bool:
        return self.message() == (other.message() if isinstance(other, QueryReplyView) else other)

    __hash__ = None  # like a protobuf message

    def __repr__(self) -> str:
        return repr(self.message())

    def __str__(self) -> str:
        return str(self.message())


def _head_property(name: str) -> property:
    return property(lambda view: getattr(view._head, name), doc=f"``QueryReply.{name}``, from the head")


for _name in _HEAD_FIELDS:
    setattr(QueryReplyView, _name, _head_property(_name))
del _name


class _LeaseView:
    """``QueryReplyView.lease``: the id from the head, everything else (``pages`` above all) from the whole message."""

    __slots__ = ("_reply",)

    def __init__(self, reply: QueryReplyView):
        self._reply = reply

    @property
    def lease_id(self) -> int:
        reply = self._reply
        if reply._lease_id is None:
            if reply._full is not None:
                reply._lease_id = reply._full.lease.lease_id
            else:
                pieces = reply._head.lease
                reply._lease_id = _LEASE_HEAD.FromString(pieces[0] if len(pieces) == 1 else b"".join(pieces)).lease_id
        return reply._lease_id

    def __getattr__(self, name: str):
        return getattr(self._reply.message().lease, name)

    def __eq__(self, other) -> bool:
        return self._reply.message().lease == (other._reply.message().lease if isinstance(other, _LeaseView) else other)

    __hash__ = None

    def __repr__(self) -> str:
        return repr(self._reply.message().lease)


def available(socket_path: str | os.PathLike) -> bool:
    """Whether this platform has SEQPACKET Unix sockets and the Manager's channel socket exists."""
    return hasattr(socket, "SOCK_SEQPACKET") and hasattr(socket, "AF_UNIX") and os.path.exists(socket_path)


def _refusal(status: int, body) -> OrbitKvError:
    text = bytes(body).decode("utf-8", "replace")
    if status == STATUS_INTERNAL:
        return OrbitKvError("ERROR_REASON_UNSPECIFIED", "INTERNAL", text)
    try:
        reason = pb.ErrorReason.Name(status)
    except ValueError:  # a newer Manager's reason
        reason = "ERROR_REASON_UNSPECIFIED"
    message = text.split(": ", 1)[1] if text.startswith(reason + ": ") else text
    return OrbitKvError(reason, reason, message)


class ColocatedTransport:
    """One connection to the co-located channel; ``call(method, request, timeout)`` like the gRPC transport."""

    def __init__(self, socket_path: str | os.PathLike, token: str, fallback=None,
                 connect_timeout_seconds: float = 10.0, spin_seconds: float = 0.0):
        """``spin_seconds``: how long a call polls for its reply (non-blocking recv) before it sleeps in recv. A reply
        within it costs no wake-up of the calling thread, at the price of that thread keeping a core busy meanwhile:
        worth it only where the engine's thread has a core to itself. 0 (the default) sleeps at once."""
        if spin_seconds < 0:
            raise ValueError(f"a negative spin: {spin_seconds}")
        self._spin_nanos = int(spin_seconds * 1e9)
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._fallback = fallback
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed = False
        self._timeout = None
        try:
            self._socket.settimeout(connect_timeout_seconds)
            self._socket.connect(os.fspath(socket_path))
            self._socket.send(HEADER.pack(VERSION, OP_HELLO, 0, 0) + token.encode("utf-8"))
            reply = self._socket.recv(4096)
            if len(reply) < HEADER.size:
                raise OrbitKvError("ERROR_REASON_UNSPECIFIED", "UNAVAILABLE",
                                   "the Manager closed the co-located channel during Hello")
            _, _, status, _ = HEADER.unpack_from(reply)
            if status:
                raise _refusal(status, reply[HEADER.size:])
            self.max_frame_bytes, self.max_in_flight = HELLO_REPLY.unpack_from(reply, HEADER.size)
            if self._socket.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) < 2 * self.max_frame_bytes:
                self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2 * self.max_frame_bytes)
            # Blocking without a timeout: a timeout costs a poll() before every recv. A Manager that stops answering
            # closes the socket (its stop, or its death) and the recv returns.
            self._socket.settimeout(None)
        except BaseException:
            self._socket.close()
            if fallback is not None:
                fallback.close()
            raise
        self._received = bytearray(self.max_frame_bytes + 1)
        self._view = memoryview(self._received)

    def call(self, method: str, request, timeout: float | None = None):
        opcode = OPCODES.get(method)
        if opcode is None:
            raise ValueError(f"no engine call {method!r}")
        body = request.SerializeToString()
        if HEADER.size + len(body) > self.max_frame_bytes:
            if self._fallback is not None:
                return self._fallback.call(method, request, timeout)
            raise OrbitKvError("OVERSIZED_REQUEST", "OVERSIZED_REQUEST",
                               f"a {method} request of {len(body)} bytes does not fit the co-located frame bound "
                               f"({self.max_frame_bytes} bytes): use gRPC for it")
        with self._lock:
            if self._closed:
                raise OrbitKvError("ERROR_REASON_UNSPECIFIED", "UNAVAILABLE", "the co-located channel is closed")
            request_id = next(self._ids) & 0xFFFFFFFF
            try:
                self._send(HEADER.pack(VERSION, opcode, 0, request_id) + body)
                return self._decode(method, request_id, self._receive())
            except OSError as e:  # ConnectionError and socket.timeout are OSErrors
                self._close_locked()
                raise OrbitKvError("ERROR_REASON_UNSPECIFIED", "UNAVAILABLE",
                                   f"{method} over the co-located channel failed ({e!r}); the channel is closed") from None

    # The steps of a call, each its own method so that a bench can time them (bench_colocated.py --steps).
    def _send(self, frame: bytes) -> None:
        self._socket.send(frame)

    def _receive(self) -> int:
        """Waits for the reply and reads it into the receive buffer; its length."""
        return self._receive_spinning() if self._spin_nanos else self._socket.recv_into(self._received)

    def _decode(self, method: str, request_id: int, n: int):
        if n == 0:
            raise ConnectionError("the Manager closed the co-located channel")
        if n < HEADER.size or n > self.max_frame_bytes:
            raise ConnectionError(f"a reply of {n} bytes is not a frame")
        _, _, status, answered = HEADER.unpack_from(self._received)
        if answered != request_id:
            raise ConnectionError(f"the reply answers request {answered}, not {request_id}")
        if status:
            raise _refusal(status, self._view[HEADER.size:n])
        reply_type = REPLY_TYPES[method]
        if reply_type is pb.QueryReply:
            return QueryReplyView(bytes(self._view[HEADER.size:n]))
        return reply_type.FromString(self._view[HEADER.size:n])

    def _receive_spinning(self) -> int:
        deadline = time.perf_counter_ns() + self._spin_nanos
        while True:
            try:
                return self._socket.recv_into(self._received, 0, socket.MSG_DONTWAIT)
            except BlockingIOError:
                if time.perf_counter_ns() >= deadline:
                    return self._socket.recv_into(self._received)

    @property
    def sessions_ended(self) -> bool:
        """True once the connection is closed or broken: the Manager then ended the sessions registered over it."""
        return self._closed

    def _close_locked(self) -> None:
        if not self._closed:
            self._closed = True
            self._socket.close()

    def close(self) -> None:
        with self._lock:
            self._close_locked()
        if self._fallback is not None:
            self._fallback.close()
