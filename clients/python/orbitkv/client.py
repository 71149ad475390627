"""The OrbitKV engine client: a session with a Manager, its pool mapping, publish, query and leases.

Design note (ownership, threads, crash):

* :class:`OrbitKvClient` owns one transport: a gRPC channel (Unix socket by default, or TCP), a connection to the
  event-bus bridge door (:mod:`orbitkv.bridge`) or to the co-located channel (:mod:`orbitkv.colocated`), and adds the
  engine token to every call. It is thread-safe (grpc
  channels are; the bridge transport serialises calls); close it last.
* :class:`Session` is one registered engine instance. It owns its :class:`~orbitkv.pool.PoolMapping` and one daemon
  heartbeat thread that calls ``Heartbeat`` every third of the session ttl. ``close()`` stops the thread,
  unregisters (which releases every lease, aborts unsealed publishes and cancels queries of the session) and unmaps the
  pool; it is idempotent. If the process dies, the Manager notices the silence after the ttl and releases the same
  things; the mapping dies with the process.
* The lease contract (engine.proto ``ReleaseLeaseReply``): copy the leased pages, then release. Only
  ``lease_valid == True`` means the copy is the leased state. :meth:`Session.lease` is a context manager that releases
  on exit and raises :class:`~orbitkv.errors.LeaseInvalidError` when the release says the lease did not stay valid,
  or when the release itself fails; the caller then discards what it copied and recomputes.
* A publish is allocate → write into the slots → seal with one CRC32C per written page; any failure in between
  aborts the publish so no slot stays reserved.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import threading
import time
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import grpc

from orbitkv._proto import engine_pb2 as pb
from orbitkv._proto import engine_pb2_grpc as pb_grpc
from orbitkv.checksum import crc32c, require_native
from orbitkv.errors import (ChecksumMismatchError, LeaseInvalidError, OrbitKvError, QueryTimeoutError,
                            from_rpc_error)
from orbitkv.pool import PoolMapping

TOKEN_HEADER = "x-orbitkv-token"
DEFAULT_CALL_TIMEOUT_SECONDS = 30.0
# The Manager's default grpc.max-message; the client accepts at least as much.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# The Manager is local (a Unix socket or a nearby port): after it restarts, the channel must find it within about a
# second, not after gRPC's default reconnect backoff (which grows to two minutes while the Manager is away).
RECONNECT_BACKOFF_MAX_MS = 1000
RENEW_CHANNEL_SECONDS = 0.5
# Shortest pause between polls when the Manager gives no retry_after hint.
MIN_POLL_SECONDS = 0.0005
# Refusals that mean the session no longer exists on the Manager.
SESSION_GONE = ("STALE_SESSION_EPOCH", "UNKNOWN_INSTANCE")


def read_token(token_file: str | os.PathLike) -> str:
    return Path(token_file).read_text().strip()


class GrpcTransport:
    """Unary gRPC calls on one channel with the engine token; refusals become :class:`OrbitKvError`.

    A call failing ``UNAVAILABLE`` renews the channel (at most every ``RENEW_CHANNEL_SECONDS``): a fresh channel
    connects at once, where the old one may sit in gRPC's reconnect backoff for seconds after a restarted Manager is
    back. Calls still in flight on the old channel end with it (they were failing anyway)."""

    def __init__(self, target: str, token: str):
        self._target = target
        self._metadata = ((TOKEN_HEADER, token),)
        self._lock = threading.Lock()
        self._renewed_at = time.monotonic()
        self._channel, self._stub = self._open()

    def _open(self):
        channel = grpc.insecure_channel(self._target, options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MAX_MS),
        ])
        return channel, pb_grpc.EngineServiceStub(channel)

    def call(self, method: str, request, timeout: float | None):
        stub = self._stub
        try:
            return getattr(stub, method)(request, metadata=self._metadata, timeout=timeout)
        except grpc.RpcError as e:
            if hasattr(e, "code") and e.code() == grpc.StatusCode.UNAVAILABLE:
                self._renew(stub)
            raise from_rpc_error(e) from None

    def _renew(self, failed_stub) -> None:
        with self._lock:
            if failed_stub is not self._stub or time.monotonic() - self._renewed_at < RENEW_CHANNEL_SECONDS:
                return
            old = self._channel
            self._channel, self._stub = self._open()
            self._renewed_at = time.monotonic()
        old.close()

    def close(self) -> None:
        with self._lock:
            self._channel.close()


class OrbitKvClient:
    """A channel to one Manager. ``OrbitKvClient.from_data_dir("./data")`` uses its socket and token.

    The transport is gRPC (Unix socket or TCP) unless given: :meth:`connect_bridge` uses the event-bus bridge door
    (:class:`orbitkv.bridge.BridgeTransport`) with the same calls, replies and typed errors."""

    def __init__(self, target: str, token: str, call_timeout_seconds: float = DEFAULT_CALL_TIMEOUT_SECONDS,
                 transport=None):
        require_native()  # refuse here, at engine start, rather than stall in the first verification
        self.target = target
        self.call_timeout_seconds = call_timeout_seconds
        self._transport = transport if transport is not None else GrpcTransport(target, token)

    @classmethod
    def connect_unix(cls, socket_path: str | os.PathLike, token: str, **kwargs) -> "OrbitKvClient":
        return cls("unix:" + str(Path(socket_path).absolute()), token, **kwargs)

    @classmethod
    def connect_tcp(cls, host: str, port: int, token: str, **kwargs) -> "OrbitKvClient":
        return cls(f"{host}:{port}", token, **kwargs)

    @classmethod
    def connect_bridge(cls, host: str, port: int, token: str, **kwargs) -> "OrbitKvClient":
        """Over the event-bus bridge door (``bridge.port``) instead of gRPC."""
        from orbitkv.bridge import BridgeTransport

        return cls(f"bridge:{host}:{port}", token, transport=BridgeTransport(host, port, token), **kwargs)

    @classmethod
    def connect_colocated(cls, socket_path: str | os.PathLike, token: str, grpc_target: str | None = None,
                          **kwargs) -> "OrbitKvClient":
        """Over the co-located channel (:mod:`orbitkv.colocated`, the Manager's ``colocated.sock``) instead of gRPC;
        a request above the channel's frame bound goes over gRPC at ``grpc_target`` when given."""
        from orbitkv.colocated import ColocatedTransport

        fallback = GrpcTransport(grpc_target, token) if grpc_target else None
        return cls(f"colocated:{Path(socket_path).absolute()}", token,
                   transport=ColocatedTransport(socket_path, token, fallback=fallback), **kwargs)

    @classmethod
    def from_data_dir(cls, data_dir: str | os.PathLike = "./data", tcp: str | None = None, colocated: bool = False,
                      **kwargs) -> "OrbitKvClient":
        """The Manager's data directory holds ``engine.token`` and ``engine.sock``; ``tcp="host:port"`` uses TCP.
        ``colocated``: use the co-located channel (``colocated.sock``) when the Manager offers it, gRPC otherwise
        (and for requests above the channel's frame bound)."""
        from orbitkv import colocated as channel

        data_dir = Path(data_dir)
        token = read_token(data_dir / "engine.token")
        if tcp:
            host, _, port = tcp.rpartition(":")
            return cls.connect_tcp(host, int(port), token, **kwargs)
        grpc_target = "unix:" + str((data_dir / "engine.sock").absolute())
        if colocated and channel.available(data_dir / channel.SOCKET_NAME):
            try:
                return cls.connect_colocated(data_dir / channel.SOCKET_NAME, token, grpc_target=grpc_target, **kwargs)
            except OSError:
                pass  # a socket file without a Manager behind it (stale): gRPC says what is wrong, if anything
        return cls.connect_unix(data_dir / "engine.sock", token, **kwargs)

    def call(self, method: str, request, timeout: float | None = None):
        """One unary call with the token; a refusal becomes :class:`OrbitKvError` with the Manager's reason."""
        return self._transport.call(method, request, timeout if timeout is not None else self.call_timeout_seconds)

    def ping(self) -> None:
        self.call("Ping", pb.PingRequest())

    def sessions_ended_with_transport(self) -> bool:
        """Whether the transport broke in a way that ended the sessions registered over it (the co-located channel:
        the Manager ends them when the connection ends). gRPC and the bridge do not tie sessions to a connection."""
        return bool(getattr(self._transport, "sessions_ended", False))

    def register(self, identity: pb.InstanceIdentity, role: int = pb.PREFILL_AND_DECODE, label: str = "",
                 tenant: str = "", resume_instance_id: int = 0, prefill_tokens_per_second: float = 0.0,
                 timeout: float | None = None) -> "Session":
        """``prefill_tokens_per_second``: the engine's prefill rate (0: not declared); with it the Manager may answer a
        shorter legal boundary whose first token comes earlier (``QueryReply.boundary_reason``). ``timeout``: for this
        call only (default: the client's call timeout)."""
        reply = self.call("Register", pb.RegisterRequest(identity=identity, role=role, instance_label=label,
                                                          tenant=tenant, resume_instance_id=resume_instance_id,
                                                          prefill_tokens_per_second=prefill_tokens_per_second),
                          timeout)
        return Session(self, identity, reply)

    def close(self) -> None:
        self._transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def identity(model_fingerprint: str, layout: str, geometry: str, page_size_tokens: int,
             groups: Sequence[tuple[int, int, int]] | Sequence[pb.GroupSpec], *, tp_rank: int = 0, tp_size: int = 1,
             pp_rank: int = 0, pp_size: int = 1) -> pb.InstanceIdentity:
    """An ``InstanceIdentity`` (representation RAW). ``groups``: GroupSpecs or ``(group_id, GroupKind, bytes_per_page)``."""
    specs = [g if isinstance(g, pb.GroupSpec) else pb.GroupSpec(group_id=g[0], kind=g[1], bytes_per_page=g[2])
             for g in groups]
    return pb.InstanceIdentity(model_fingerprint=model_fingerprint, representation=pb.RAW, layout=layout,
                               geometry=geometry, page_size_tokens=page_size_tokens, tp_rank=tp_rank, tp_size=tp_size,
                               pp_rank=pp_rank, pp_size=pp_size, groups=specs)


@dataclasses.dataclass(frozen=True)
class PublishResult:
    publish_id: int
    sealed_pages: int
    sealed_bytes: int
    # One per requested page, in request order: True when this call wrote it, False when it was already present or
    # NOT_STORED (beyond max_stored_tokens).
    written: tuple[bool, ...]


class Lease:
    """The pages of a READY (or RESIDENT) answer, readable until the lease is released."""

    def __init__(self, session: "Session", reply: pb.QueryReply):
        self._session = session
        self.reply = reply
        self.pages = list(reply.lease.pages)  # first: a reply read lazily (the co-located channel's) is parsed once
        self.lease_id = reply.lease.lease_id
        self.boundary_tokens = reply.boundary_tokens
        self.ready_blocks = reply.ready_blocks

    def view(self, page: pb.LeasedPage) -> memoryview:
        """The slot's bytes in the pool (no copy): copy them out before the lease ends."""
        return self._session.pool.view(page.slot)

    def copy_into(self, page: pb.LeasedPage, destination, verify: bool = True) -> None:
        """Copies the page into a writable buffer of exactly its length; with ``verify``, checks the copy's CRC32C
        against the one the Manager leased it with (when known) and raises :class:`ChecksumMismatchError`."""
        target = memoryview(destination).cast("B")
        if target.nbytes != page.slot.length:
            raise ValueError(f"destination of {target.nbytes} bytes for a page of {page.slot.length}")
        with self.view(page) as source:
            target[:] = source
        if verify and page.HasField("crc32c"):
            actual = crc32c(target)
            if actual != page.crc32c:
                raise ChecksumMismatchError(page.group_id, page.position, page.crc32c, actual)

    def read(self, page: pb.LeasedPage, verify: bool = True) -> bytearray:
        copy = bytearray(page.slot.length)
        self.copy_into(page, copy, verify)
        return copy


class Session:
    """One registered engine instance (see the module's design note)."""

    def __init__(self, client: OrbitKvClient, identity: pb.InstanceIdentity, registration: pb.RegisterReply):
        self.client = client
        self.identity = identity
        self.registration = registration
        self.ref = pb.SessionRef(instance_id=registration.instance_id, session_epoch=registration.session_epoch)
        self.namespace = registration.namespace_id
        self.pool = PoolMapping(registration.pool.region_id, registration.pool.path, registration.pool.size_bytes)
        self._operation_ids = itertools.count(1)
        self._closed = threading.Event()
        # Set when the Manager says this session is gone (unknown instance, stale epoch, or a release answered
        # SESSION_ENDED): re-register to go on. Listeners (an adapter's SessionKeeper) hear it once, on the thread
        # that found out.
        self.lost_reason: str | None = None
        self._lost_listeners: list = []
        self.heartbeat_error: OrbitKvError | None = None
        self.heartbeats_sent = 0
        period = max(0.05, registration.session_ttl_millis / 3000.0)
        self._heartbeat = threading.Thread(target=self._heartbeat_loop, args=(period,), name="orbitkv-heartbeat",
                                           daemon=True)
        self._heartbeat.start()

    def _call(self, method: str, request):
        try:
            return self.client.call(method, request)
        except OrbitKvError as e:
            if e.reason in SESSION_GONE:
                self.mark_lost(e.reason)
            elif self.client.sessions_ended_with_transport():
                # Registered over the co-located channel, which broke: the Manager ended the session with it.
                self.mark_lost("CHANNEL_CLOSED")
            raise

    def add_lost_listener(self, listener) -> None:
        """``listener(session, reason)`` is called once when the session is found gone (at once if it already is)."""
        self._lost_listeners.append(listener)
        if self.lost_reason is not None:
            listener(self, self.lost_reason)

    def mark_lost(self, reason: str) -> None:
        if self.lost_reason is not None:
            return
        self.lost_reason = reason
        for listener in list(self._lost_listeners):
            listener(self, reason)

    @property
    def instance_id(self) -> int:
        return self.registration.instance_id

    @property
    def ttl_seconds(self) -> float:
        return self.registration.session_ttl_millis / 1000.0

    def _heartbeat_loop(self, period: float) -> None:
        while not self._closed.wait(period):
            try:
                self._call("Heartbeat", pb.HeartbeatRequest(session=self.ref))
                self.heartbeats_sent += 1
                self.heartbeat_error = None
            except OrbitKvError as e:
                # Kept for the engine to see; a stale epoch or unknown instance means the session is gone for good.
                self.heartbeat_error = e
                if self.lost_reason is not None:
                    return

    def stop_heartbeats(self) -> None:
        """Stops heartbeats without unregistering: the session lapses after its ttl (for tests of that path)."""
        self._closed.set()
        self._heartbeat.join()

    def next_operation_id(self) -> int:
        return next(self._operation_ids)

    # --- publish -----------------------------------------------------------------------------------------------
    def allocate(self, keys: Iterable[tuple[int, bytes]], *, do_not_store: bool = False,
                 max_stored_tokens: int = 0, request_id: str = "") -> pb.AllocatePublishReply:
        """Allocates slots for ``(group_id, block_hash)`` pages. ``do_not_store``: transient pages (served while resident,
        never written to SSD, never retained, evicted first). ``max_stored_tokens`` (non-zero): of each group only the
        first max_stored_tokens // page_size_tokens pages are stored; the rest are answered NOT_STORED. ``request_id``:
        the request these pages were computed for (a prefill's); once sealed they satisfy a consumer's demand that names
        this session and this request as its producer (:meth:`producer`)."""
        pages = [pb.PageKey(group_id=g, block_hash=h) for g, h in keys]
        return self._call("AllocatePublish", pb.AllocatePublishRequest(
            session=self.ref, namespace_id=self.namespace, pages=pages, do_not_store=do_not_store,
            max_stored_tokens=max_stored_tokens, request_id=request_id))

    def seal(self, publish_id: int, crcs: Sequence[int] = (), written: Sequence[pb.PoolDescriptor] = ()
             ) -> pb.SealPublishReply:
        return self._call("SealPublish", pb.SealPublishRequest(session=self.ref, publish_id=publish_id,
                                                                     crc32c=list(crcs), written=list(written)))

    def abort(self, publish_id: int) -> pb.AbortPublishReply:
        return self._call("AbortPublish", pb.AbortPublishRequest(session=self.ref, publish_id=publish_id))

    def publish(self, pages: Sequence[tuple[int, bytes, object]], *, do_not_store: bool = False,
                max_stored_tokens: int = 0, request_id: str = "") -> PublishResult:
        """Publishes ``(group_id, block_hash, data)`` pages: allocate, write each ALLOCATED slot, seal with CRC32C.
        Pages already present or NOT_STORED are skipped (their data is not read). Any failure after allocating aborts
        the publish. ``do_not_store``, ``max_stored_tokens`` and ``request_id`` as in :meth:`allocate`."""
        allocated = self.allocate(((g, h) for g, h, _ in pages), do_not_store=do_not_store,
                                  max_stored_tokens=max_stored_tokens, request_id=request_id)
        written_flags = []
        crcs = []
        descriptors = []
        try:
            for (group_id, block_hash, data), slot in zip(pages, allocated.slots):
                if slot.status != pb.ALLOCATED:
                    written_flags.append(False)
                    continue
                self.pool.write(slot.slot, data)
                with self.pool.view(slot.slot) as written:
                    crcs.append(crc32c(written))
                descriptors.append(slot.slot)
                written_flags.append(True)
            if not descriptors:
                return PublishResult(allocated.publish_id, 0, 0, tuple(written_flags))
            sealed = self.seal(allocated.publish_id, crcs, descriptors)
        except BaseException:
            with contextlib.suppress(OrbitKvError):
                self.abort(allocated.publish_id)
            raise
        return PublishResult(allocated.publish_id, sealed.sealed_pages, sealed.sealed_bytes, tuple(written_flags))

    # --- retention hints ------------------------------------------------------------------------------------
    def retain(self, chains: dict[int, Sequence[bytes]], ttl_ms: int, priority: int = 0) -> pb.RetainReply:
        """Keeps these chains' pages resident for ``ttl_ms`` within this session's tenant's retained budget; a higher
        ``priority`` survives longer under pressure. Refusals raise OrbitKvError with RETENTION_OVER_BUDGET,
        INVALID_RETENTION_TTL, RETENTION_CHAIN_TOO_LONG or NAMESPACE_MISMATCH, and change nothing. The retention
        outlives this session; end it with :meth:`unretain` (same tenant) or let its ttl pass."""
        groups = [pb.GroupChain(group_id=g, block_hashes=list(h)) for g, h in chains.items()]
        return self._call("Retain", pb.RetainRequest(session=self.ref, namespace_id=self.namespace, groups=groups,
                                                     ttl_millis=ttl_ms, priority=priority))

    def unretain(self, retention_id: int) -> pb.UnretainReply:
        return self._call("Unretain", pb.UnretainRequest(session=self.ref, retention_id=retention_id))

    # --- query ------------------------------------------------------------------------------------------------
    def submit_query(self, chains: dict[int, Sequence[bytes]], revision: int = 0) -> pb.QueryReply:
        """The prefix form: ``{group_id: [block hashes from block 0]}``, every group full attention."""
        request = pb.SubmitQueryRequest(session=self.ref, namespace_id=self.namespace, revision=revision)
        for g, h in chains.items():
            request.groups.add(group_id=g, block_hashes=h)  # built in place: a GroupChain passed in would be copied
        return self._call("SubmitQuery", request)

    def submit_demand(self, demand: pb.Demand) -> pb.QueryReply:
        """The exact form. An empty namespace is filled with this session's; a zero operation id gets a fresh one."""
        if not demand.namespace_id:
            demand.namespace_id = self.namespace
        if demand.operation_id == 0:
            demand.operation_id = self.next_operation_id()
        return self._call("SubmitDemand", pb.SubmitDemandRequest(session=self.ref, demand=demand))

    def producer(self, request_id: str, member: str = "") -> pb.Producer:
        """This session as the producer of ``request_id``, for a consumer's demand (``prefix_demand(producer=...)``):
        hand it to the consumer (a decode engine) with the request. ``member``: this Manager's cluster member id when the
        consumer registered with another Manager."""
        return pb.Producer(instance_id=self.ref.instance_id, session_epoch=self.ref.session_epoch, member=member,
                           request_id=request_id)

    def prefix_demand(self, request_id: str, block_hashes: Sequence[bytes], *, start_block: int = 0,
                      end_block: int | None = None, group_id: int = 0, revision: int = 0,
                      max_wait_micros: int | None = None, speculative: bool = False, first_use_micros: int = 0,
                      prefill_tokens_per_second: float = 0.0, requested_route: int = pb.ROUTE_DEFAULT,
                      producer: pb.Producer | None = None) -> pb.Demand:
        """A full-attention demand for blocks ``[start_block, end_block)`` of one chain; blocks below ``start_block``
        are already in the engine (the valid prefix). ``first_use_micros``: when the engine will use the state (a
        speculative demand is prepared by then); ``prefill_tokens_per_second`` overrides the registered rate;
        ``requested_route`` asks for one route explicitly (refused ``ROUTE_UNAVAILABLE`` if it cannot run here);
        ``producer`` (P/D): wait (PENDING, detail WAITING_FOR_PRODUCER) until that session sealed these pages under its
        request (:meth:`producer`); MISS if it ends first or the budget runs out."""
        page = self.identity.page_size_tokens
        end_block = len(block_hashes) if end_block is None else end_block
        demand = pb.Demand(request_id=request_id, revision=revision, namespace_id=self.namespace,
                           page_size_tokens=page, valid_prefix_tokens=start_block * page,
                           selected_end_tokens=end_block * page, selected_group_id=group_id,
                           groups=[pb.GroupDemand(group_id=group_id, block_hashes=list(block_hashes[:end_block]),
                                                  ranges=[pb.BlockSpan(start=start_block, end=end_block)]
                                                  if end_block > start_block else [])],
                           target_instance_id=self.instance_id, target_tp_rank=self.identity.tp_rank,
                           target_pp_rank=self.identity.pp_rank, speculative=speculative,
                           first_use_micros=first_use_micros, prefill_tokens_per_second=prefill_tokens_per_second,
                           requested_route=requested_route)
        if max_wait_micros is not None:
            demand.max_wait_micros = max_wait_micros
        if producer is not None:
            demand.producer.CopyFrom(producer)
        return demand

    def poll(self, ticket: int) -> pb.QueryReply:
        return self._call("PollQuery", pb.PollQueryRequest(session=self.ref, ticket=ticket))

    def cancel(self, ticket: int) -> pb.CancelQueryReply:
        return self._call("CancelQuery", pb.CancelQueryRequest(session=self.ref, ticket=ticket))

    def settle(self, reply: pb.QueryReply, timeout_seconds: float = 30.0) -> pb.QueryReply:
        """Polls a PENDING answer, sleeping ``retry_after_micros`` between polls, until it is not PENDING. Past the
        deadline the ticket is cancelled and :class:`QueryTimeoutError` raised."""
        started = time.monotonic()
        while reply.status == pb.PENDING:
            waited = time.monotonic() - started
            if waited > timeout_seconds:
                with contextlib.suppress(OrbitKvError):
                    self.cancel(reply.ticket)
                raise QueryTimeoutError(reply.ticket, waited)
            time.sleep(max(MIN_POLL_SECONDS, reply.retry_after_micros / 1e6))
            reply = self.poll(reply.ticket)
        return reply

    def query(self, chains: dict[int, Sequence[bytes]], timeout_seconds: float = 30.0) -> pb.QueryReply:
        return self.settle(self.submit_query(chains), timeout_seconds)

    def demand(self, demand: pb.Demand, timeout_seconds: float = 30.0) -> pb.QueryReply:
        return self.settle(self.submit_demand(demand), timeout_seconds)

    # --- leases -----------------------------------------------------------------------------------------------
    def release(self, lease_id: int) -> pb.ReleaseLeaseReply:
        reply = self._call("ReleaseLease", pb.ReleaseLeaseRequest(session=self.ref, lease_id=lease_id))
        if not reply.lease_valid and reply.invalid_reason == pb.SESSION_ENDED:
            # A release after this session ended (lapse, unregister, resume) is answered like this, not with an
            # error: the session is gone for good, as after UNKNOWN_INSTANCE. Re-register to go on.
            self.mark_lost(pb.LeaseInvalidReason.Name(reply.invalid_reason))
        return reply

    @contextlib.contextmanager
    def lease(self, reply: pb.QueryReply) -> Iterator[Lease]:
        """``with session.lease(ready) as lease: ...copy pages...`` — releases on exit and raises
        :class:`LeaseInvalidError` unless the release confirms the lease stayed valid (discard the copy then).
        If the body raises, the lease is still released and the body's exception propagates."""
        if reply.status not in (pb.READY, pb.RESIDENT) or not reply.HasField("lease"):
            raise ValueError(f"no lease in a {pb.QueryStatus.Name(reply.status)} answer")
        held = Lease(self, reply)
        try:
            yield held
        except BaseException:
            with contextlib.suppress(OrbitKvError):
                self.release(held.lease_id)
            raise
        try:
            released = self.release(held.lease_id)
        except OrbitKvError as e:
            raise LeaseInvalidError(held.lease_id, None,
                                    f"releasing lease {held.lease_id} failed ({e}): discard what was copied") from e
        if not released.lease_valid:
            reason = pb.LeaseInvalidReason.Name(released.invalid_reason)
            raise LeaseInvalidError(held.lease_id, reason,
                                    f"lease {held.lease_id} did not stay valid ({reason}): discard what was copied")

    # --- session ----------------------------------------------------------------------------------------------
    def stats(self) -> pb.StatsReply:
        return self._call("Stats", pb.StatsRequest(session=self.ref))

    def unregister(self) -> pb.UnregisterReply:
        self._closed.set()
        return self._call("Unregister", pb.UnregisterRequest(session=self.ref))

    def close(self) -> None:
        """Unregisters (best effort: the Manager may be gone), stops heartbeats and unmaps the pool. Idempotent."""
        if not self._closed.is_set():
            with contextlib.suppress(OrbitKvError):
                self.unregister()
        self._closed.set()
        if self._heartbeat is not threading.current_thread():
            self._heartbeat.join()
        self.pool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
