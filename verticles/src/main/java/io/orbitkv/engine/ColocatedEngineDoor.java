package io.orbitkv.engine;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.Message;
import io.netty.channel.IoEvent;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.channel.epoll.EpollIoHandle;
import io.netty.channel.epoll.EpollIoOps;
import io.netty.channel.unix.FileDescriptor;
import io.orbitkv.common.OrbitException;
import io.orbitkv.engine.EngineAuthenticator.Caller;
import io.orbitkv.nativeio.libc.NativeIoException;
import io.orbitkv.nativeio.unix.SeqPacketSocket;
import io.orbitkv.protocol.colocated.ColocatedFrame;
import io.orbitkv.protocol.engine.CancelQueryRequest;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.PollQueryRequest;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.protocol.engine.RegisterReply;
import io.orbitkv.protocol.engine.ReleaseLeaseRequest;
import io.orbitkv.protocol.engine.SessionRef;
import io.orbitkv.protocol.engine.SubmitDemandRequest;
import io.orbitkv.protocol.engine.SubmitQueryRequest;
import io.orbitkv.protocol.engine.UnregisterRequest;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.internal.ContextInternal;
import io.vertx.grpc.common.GrpcMessage;
import io.vertx.grpc.common.WireFormat;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The co-located door of the engine role: engines on this host call the same {@link EngineCall}s as through gRPC over a
 * Unix {@code SOCK_SEQPACKET} socket, one message per frame ({@link ColocatedFrame}: an 8-byte header, then the
 * engine.proto message), without HTTP/2 and gRPC framing. gRPC stays the general door; this one is for the calls an
 * engine makes per request (query, poll, release).
 *
 * <p>Design note (why a socket, not shared-memory rings): the Python engine client must use it with the standard
 * library alone, and a ring needs a waiting side: either it spins (on a loaded host a spinning Python thread and a
 * spinning Manager thread take two cores to save one wake-up) or it parks on a futex, which Python cannot reach without
 * native code. Measured from Python on the loaded 2-core VM ({@code perf/colocated/transport_choice.py}): a spinning
 * ring's median round trip is under a microsecond, but its p99 was 16-40 ms in three runs of four (a spinner
 * descheduled) while it burns two cores; a SEQPACKET round trip's median is 18-22 µs (p99 2-3 ms), below the Python
 * client's own protobuf work for a 64-page query (about 30 µs). A SEQPACKET round trip is two syscalls a side with message boundaries kept
 * by the kernel, so a frame needs no length prefix or reassembly. The channel's hit query and its no-op round trip are
 * measured in {@code bench dram} and {@code clients/python/bench_colocated.py} (perf/README.md).
 *
 * <p>Design note (threads and ownership): an acceptor thread blocks in accept and hands each connection to the engine
 * role's event loop, which polls the socket itself: the connection is registered with the loop's epoll (netty's
 * generic {@link EpollIoHandle}), and when it is readable the loop receives the frames without blocking, checks each
 * (bounds, version, opcode, in-flight count), decodes it and runs the call, and sends the reply without blocking
 * ({@code MSG_DONTWAIT}). A call thus costs the Manager one wake-up (the loop's, by the kernel) and no thread hand-off;
 * a call that completes later (its role on another loop) answers from its completion. A client that leaves its socket
 * full (does not read its replies) is disconnected. At most {@value #FRAMES_PER_WAKEUP} frames are taken per wake-up,
 * so one busy engine does not starve the loop's other work (the poll is level-triggered: the rest waits one turn).
 * Everything about a connection after accept is loop-confined: the loop drops it from epoll, then closes it (no
 * descriptor number is polled after its close), and ends what it held.
 *
 * <p>Design note (authentication, crash): the peer's uid is read by {@code SO_PEERCRED} at accept and checked, with
 * the engine token of the first frame (Hello), by the same {@link EngineAuthenticator} as the gRPC Unix socket; a
 * refused Hello is answered with its typed reason and the connection closed. The socket is bound owner-only like the
 * gRPC socket ({@link GrpcEngineDoor.PrivateSocket}). A connection's end (the engine closed it or died) ends the
 * sessions registered over it (as Unregister) and releases the leases and cancels the tickets it was handed for other
 * sessions, so a crashed engine's holdings are released at once rather than after the session ttl.
 */
final class ColocatedEngineDoor {
    private static final Logger LOG = LoggerFactory.getLogger(ColocatedEngineDoor.class);
    /** Refusal messages are cut to this many bytes. */
    private static final int MAX_REFUSAL_TEXT_BYTES = 1024;
    /** Frames one connection may have handled per wake-up of the loop. */
    private static final int FRAMES_PER_WAKEUP = 16;

    private final Vertx vertx;
    private final Context context;
    /** The engine role's event loop, whose epoll polls the connections; null when it is not on epoll. */
    private final IoEventLoop loop;
    private final EngineSettings settings;
    private final EngineAuthenticator authenticator;
    private final EngineMetrics metrics;
    private final EngineCall<?, ?>[] byOpcode = new EngineCall<?, ?>[ColocatedFrame.METHODS.size() + 1];
    private final Map<String, EngineCall<?, ?>> byName = new HashMap<>();
    private final Set<Connection> connections = ConcurrentHashMap.newKeySet();
    private volatile boolean closing;
    /** Set by the blocking bind, read by {@link #close} on the loop. */
    private volatile SeqPacketSocket listener;
    private volatile Thread acceptor;

    ColocatedEngineDoor(Vertx vertx, Context context, EngineSettings settings, EngineAuthenticator authenticator,
                        List<EngineCall<?, ?>> calls, EngineMetrics metrics) {
        this.vertx = vertx;
        this.context = context;
        this.loop = ((ContextInternal) context).nettyEventLoop() instanceof IoEventLoop io
                && io.isCompatible(Connection.class) ? io : null;
        this.settings = settings;
        this.authenticator = authenticator;
        this.metrics = metrics;
        for (EngineCall<?, ?> call : calls) {
            String name = call.method().methodName();
            int opcode = ColocatedFrame.opcode(name);
            if (opcode < 0) {
                throw new IllegalStateException("engine call " + name + " has no co-located opcode");
            }
            byOpcode[opcode] = call;
            byName.put(name, call);
        }
    }

    /** Binds the socket owner-only and starts accepting. */
    Future<Void> listen() {
        // Everything off the loop, the availability probe included: its first use links the FFM downcalls, which
        // takes seconds on a cold JVM of a loaded host.
        return vertx.executeBlocking(() -> {
            if (!SeqPacketSocket.isAvailable()) {
                LOG.warn("the co-located channel is off: SOCK_SEQPACKET sockets are unavailable here ({}); engines use"
                        + " gRPC", SeqPacketSocket.unavailabilityCause().toString());
                return null;
            }
            if (loop == null) {
                LOG.warn("the co-located channel is off: the engine role's event loop is not on the epoll transport"
                        + " ({}); engines use gRPC", ((ContextInternal) context).nettyEventLoop().getClass().getName());
                return null;
            }
            GrpcEngineDoor.PrivateSocket bind = GrpcEngineDoor.PrivateSocket.prepare(settings.colocatedSocket());
            SeqPacketSocket socket;
            try {
                socket = SeqPacketSocket.listen(bind.bindPath(), 64);
            } catch (NativeIoException | RuntimeException e) {
                bind.discard();
                throw e;
            }
            try {
                bind.publish();
            } catch (Exception e) {
                socket.close();
                bind.discard();
                throw e;
            }
            listener = socket;
            acceptor = Thread.ofPlatform().daemon().name("orbitkv-colocated-accept").start(this::acceptLoop);
            return null;
        });
    }

    /** Stops accepting, disconnects every engine, waits for the threads, removes the socket file. */
    Future<Void> close() {
        closing = true;
        if (listener == null) {
            return Future.succeededFuture();
        }
        listener.shutdown();
        Promise<Void> ended = Promise.promise();
        context.runOnContext(v -> {
            List.copyOf(connections).forEach(Connection::end);
            ended.complete();
        });
        return ended.future().compose(v -> vertx.executeBlocking(() -> {
            acceptor.join(5_000);
            // A connection accepted while closing is ended by its registration (closing is set): none outlives this.
            Files.deleteIfExists(settings.colocatedSocket());
            return null;
        }));
    }

    private void acceptLoop() {
        try {
            while (!closing) {
                SeqPacketSocket accepted;
                try {
                    accepted = listener.accept();
                } catch (NativeIoException e) {
                    if (!closing) {
                        LOG.warn("the co-located channel stopped accepting", e);
                    }
                    return;
                }
                if (closing) {
                    closeQuietly(accepted);
                    return;
                }
                Connection connection = new Connection(accepted);
                if (connections.size() >= settings.colocatedMaxConnections()) {
                    connection.refuseAndClose(0, ColocatedFrame.OP_HELLO, new OrbitException(ErrorReason.TOO_MANY_OUTSTANDING,
                            "the co-located channel holds engine.colocated-max-connections ("
                                    + settings.colocatedMaxConnections() + ") connections"));
                    continue;
                }
                connections.add(connection);
                context.runOnContext(v -> connection.register());
            }
        } finally {
            closeQuietly(listener);
        }
    }

    private static void closeQuietly(SeqPacketSocket socket) {
        try {
            socket.close();
        } catch (NativeIoException e) {
            LOG.debug("closing a co-located socket", e);
        }
    }

    /** One engine's connection: its socket, its registration with the loop, its bounds, what it was handed. */
    private final class Connection implements EpollIoHandle {
        final SeqPacketSocket socket;
        final OptionalInt peerUid;
        private final FileDescriptor descriptor;
        /** The received frame (one byte over the bound, to see an oversized one) and the reply being sent. */
        private final MemorySegment received;
        private final MemorySegment reply;
        /** Loop-confined from registration on. */
        private IoRegistration registration;
        private int inFlight;
        private boolean authenticated;
        private boolean ended;
        private final Map<Long, SessionRef> registered = new HashMap<>();
        private final Map<Long, SessionRef> leases = new HashMap<>();
        private final Map<Long, SessionRef> tickets = new HashMap<>();

        Connection(SeqPacketSocket socket) {
            this.socket = socket;
            this.descriptor = new FileDescriptor(socket.descriptor()); // never closed through netty: the socket owns it
            OptionalInt uid;
            try {
                uid = OptionalInt.of(socket.peerUid());
            } catch (NativeIoException e) {
                uid = OptionalInt.empty(); // refused at Hello: fail closed
            }
            this.peerUid = uid;
            int frame = settings.colocatedMaxFrameBytes();
            try {
                if (socket.sendBufferBytes() < 2 * frame) {
                    socket.sendBufferBytes(2 * frame);
                }
            } catch (NativeIoException e) {
                LOG.debug("could not enlarge a co-located send buffer", e);
            }
            Arena arena = Arena.ofAuto();
            this.received = arena.allocate(frame + 1L, 8);
            this.reply = arena.allocate(Math.max(frame, ColocatedFrame.HEADER_BYTES + MAX_REFUSAL_TEXT_BYTES), 8);
        }

        /** On the loop: polls the socket from now on; a door closing meanwhile ends it at once. */
        void register() {
            if (closing) {
                end();
                return;
            }
            loop.register(this).addListener(done -> {
                if (!done.isSuccess()) {
                    LOG.warn("could not poll a co-located connection on the event loop", done.cause());
                    end();
                    return;
                }
                registration = (IoRegistration) done.getNow();
                if (closing) {
                    end();
                    return;
                }
                registration.submit(EpollIoOps.EPOLLIN.with(EpollIoOps.EPOLLRDHUP));
            });
        }

        @Override
        public FileDescriptor fd() {
            return descriptor;
        }

        /** On the loop, when the socket is readable (a frame, its end, or an error). */
        @Override
        public void handle(IoRegistration registration, IoEvent event) {
            try {
                for (int i = 0; i < FRAMES_PER_WAKEUP && !ended; i++) {
                    long length = socket.receiveNow(received);
                    if (length < 0) {
                        return; // drained: epoll wakes the loop for the next one
                    }
                    if (length == 0 || !onFrame(length, System.nanoTime())) {
                        end(); // end-of-stream (the engine closed or died), or a refused Hello
                        return;
                    }
                }
            } catch (NativeIoException | RuntimeException e) {
                if (!closing) {
                    LOG.debug("a co-located connection failed", e);
                }
                end();
            }
        }

        /** Netty closes what is still registered when its loop stops; the door's own close came first. */
        @Override
        public void close() {
            end();
        }

        /** Checks one frame and runs its call; false when the connection must end. */
        private boolean onFrame(long length, long receivedNanos) {
            if (length < ColocatedFrame.HEADER_BYTES) {
                refuse(0, 0, new OrbitException(ErrorReason.MALFORMED_REQUEST, "a frame of " + length
                        + " bytes is shorter than the " + ColocatedFrame.HEADER_BYTES + "-byte header"));
                return authenticated;
            }
            int opcode = ColocatedFrame.opcode(received);
            int requestId = ColocatedFrame.requestId(received);
            if (length > settings.colocatedMaxFrameBytes()) {
                refuse(opcode, requestId, new OrbitException(ErrorReason.OVERSIZED_REQUEST, "a frame of " + length
                        + " bytes is larger than engine.colocated-max-frame (" + settings.colocatedMaxFrameBytes() + ")"));
                return authenticated;
            }
            if (ColocatedFrame.version(received) != ColocatedFrame.VERSION) {
                refuse(opcode, requestId, new OrbitException(ErrorReason.MALFORMED_REQUEST, "frame version "
                        + ColocatedFrame.version(received) + ", this Manager speaks " + ColocatedFrame.VERSION));
                return authenticated;
            }
            MemorySegment body = received.asSlice(ColocatedFrame.HEADER_BYTES, length - ColocatedFrame.HEADER_BYTES);
            if (!authenticated) {
                return hello(opcode, requestId, body);
            }
            EngineCall<?, ?> call = opcode < byOpcode.length ? byOpcode[opcode] : null;
            if (call == null) {
                refuse(opcode, requestId, new OrbitException(ErrorReason.MALFORMED_REQUEST, opcode == ColocatedFrame.OP_HELLO
                        ? "this connection is already authenticated" : "unknown opcode " + opcode));
                return true;
            }
            if (inFlight >= settings.colocatedMaxInFlight()) {
                refuse(opcode, requestId, new OrbitException(ErrorReason.TOO_MANY_OUTSTANDING, "this connection has "
                        + settings.colocatedMaxInFlight() + " requests in the Manager (engine.colocated-max-in-flight)"));
                return true;
            }
            dispatch(call, opcode, requestId, body, receivedNanos);
            return true;
        }

        /** The first frame: Hello with the token, checked with the peer's uid. A refusal ends the connection. */
        private boolean hello(int opcode, int requestId, MemorySegment body) {
            if (opcode != ColocatedFrame.OP_HELLO) {
                refuse(opcode, requestId, new OrbitException(ErrorReason.UNAUTHENTICATED_CALLER,
                        "the first frame of a co-located connection must be Hello with the engine token"));
                return false;
            }
            String token = new String(body.toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
            try {
                authenticator.check(Caller.unixPeer(token, peerUid));
            } catch (OrbitException refused) {
                refuse(opcode, requestId, refused);
                return false;
            }
            authenticated = true;
            ColocatedFrame.writeHeader(reply, ColocatedFrame.OP_HELLO, ColocatedFrame.STATUS_OK, requestId);
            ColocatedFrame.u32(reply, ColocatedFrame.HEADER_BYTES, settings.colocatedMaxFrameBytes());
            ColocatedFrame.u32(reply, ColocatedFrame.HEADER_BYTES + 4L, settings.colocatedMaxInFlight());
            return send(ColocatedFrame.HEADER_BYTES + ColocatedFrame.HELLO_REPLY_BODY_BYTES);
        }

        /** Decodes and runs the call; answers when its future completes (in place for a call on this loop). */
        private <Q, R> void dispatch(EngineCall<Q, R> call, int opcode, int requestId, MemorySegment body,
                                     long receivedNanos) {
            Q request;
            try {
                request = call.decode(GrpcMessage.message("identity", WireFormat.PROTOBUF,
                        Buffer.buffer(body.toArray(ValueLayout.JAVA_BYTE))));
            } catch (OrbitException e) {
                refuse(opcode, requestId, e);
                return;
            }
            long decodedNanos = System.nanoTime();
            inFlight++;
            call.run(request).onComplete(ar -> {
                long completedNanos = System.nanoTime();
                inFlight--;
                if (ar.succeeded()) {
                    track(call, request, ar.result());
                    if (ended) {
                        releaseHoldings(); // answered after the engine left: nobody will release it
                    } else {
                        answer(call, opcode, requestId, request, ar.result());
                    }
                } else if (!ended) {
                    answerFailure(opcode, requestId, ar.cause(), call);
                }
                ColocatedCallEvent event = new ColocatedCallEvent();
                if (event.isEnabled()) {
                    event.opcode = opcode;
                    event.decodeNanos = decodedNanos - receivedNanos;
                    event.runNanos = completedNanos - decodedNanos;
                    event.replyNanos = System.nanoTime() - completedNanos;
                    event.commit();
                }
            });
        }

        /** Remembers what this connection was handed, so that its end releases it. Loop-confined. */
        private void track(EngineCall<?, ?> call, Object request, Object result) {
            switch (call.method().methodName()) {
                case "Register" -> {
                    RegisterReply r = (RegisterReply) result;
                    registered.put(r.getInstanceId(), SessionRef.newBuilder().setInstanceId(r.getInstanceId())
                            .setSessionEpoch(r.getSessionEpoch()).build());
                }
                case "Unregister" -> registered.remove(((UnregisterRequest) request).getSession().getInstanceId());
                case "SubmitQuery" -> trackQuery(((SubmitQueryRequest) request).getSession(), (QueryReply) result);
                case "SubmitDemand" -> trackQuery(((SubmitDemandRequest) request).getSession(), (QueryReply) result);
                case "PollQuery" -> trackQuery(((PollQueryRequest) request).getSession(), (QueryReply) result);
                case "CancelQuery" -> tickets.remove(((CancelQueryRequest) request).getTicket());
                case "ReleaseLease" -> leases.remove(((ReleaseLeaseRequest) request).getLeaseId());
                default -> { }
            }
        }

        private void trackQuery(SessionRef session, QueryReply reply) {
            if (reply.getStatus() == QueryStatus.PENDING) {
                tickets.put(reply.getTicket(), session);
                return;
            }
            tickets.remove(reply.getTicket());
            if (reply.hasLease() && reply.getLease().getLeaseId() != 0) {
                leases.put(reply.getLease().getLeaseId(), session);
            }
        }

        private <R> void answer(EngineCall<?, R> call, int opcode, int requestId, Object request, R result) {
            Message message = (Message) result;
            int size = message.getSerializedSize();
            if (ColocatedFrame.HEADER_BYTES + (long) size > reply.byteSize()) {
                // A query's reply is smaller than its request (about 19 bytes a page against 36), so only a repeated
                // answer (a poll of a large query submitted over gRPC) or a large Stats gets here: what it carries
                // stays with the session, and with this connection's holdings.
                answerFailure(opcode, requestId, new OrbitException(ErrorReason.OVERSIZED_REQUEST, "the "
                        + call.method().methodName() + " reply (" + size + " bytes) is larger than"
                        + " engine.colocated-max-frame (" + settings.colocatedMaxFrameBytes() + "): use gRPC for it"), call);
                return;
            }
            ColocatedFrame.writeHeader(reply, opcode, ColocatedFrame.STATUS_OK, requestId);
            try { // straight into the native frame: no array, no copy
                CodedOutputStream out = CodedOutputStream.newInstance(
                        reply.asSlice(ColocatedFrame.HEADER_BYTES, size).asByteBuffer());
                message.writeTo(out);
                out.flush();
            } catch (IOException e) {
                throw new UncheckedIOException("encoding a " + call.method().methodName() + " reply", e);
            }
            send(ColocatedFrame.HEADER_BYTES + size);
        }

        private void answerFailure(int opcode, int requestId, Throwable cause, EngineCall<?, ?> call) {
            int status;
            String text;
            if (cause instanceof OrbitException orbit) {
                metrics.rejected(orbit.reason());
                status = orbit.reason().getNumber();
                text = orbit.getMessage();
            } else {
                metrics.internalErrors.increment();
                LOG.warn("engine call {} failed inside the Manager", call.method().methodName(), cause);
                status = ColocatedFrame.STATUS_INTERNAL;
                text = "internal error: " + cause.getClass().getSimpleName() + ": " + cause.getMessage();
            }
            send(writeRefusal(reply, opcode, status, requestId, text));
        }

        private void refuse(int opcode, int requestId, OrbitException refused) {
            metrics.rejected(refused.reason());
            send(writeRefusal(reply, opcode, refused.reason().getNumber(), requestId, refused.getMessage()));
        }

        /** Refuses and closes a connection that was never registered (the acceptor owns it). */
        void refuseAndClose(int requestId, int opcode, OrbitException refused) {
            refuse(opcode, requestId, refused);
            closeQuietly(socket);
        }

        /**
         * Never blocks the loop: a full socket means the engine does not read its replies, so it is disconnected (the
         * shutdown makes the socket readable at its end, and {@link #handle} ends the connection). False then.
         */
        private boolean send(int length) {
            try {
                if (socket.send(reply, length, true)) {
                    return true;
                }
                LOG.warn("a co-located engine does not read its replies (its socket is full): disconnecting it");
            } catch (NativeIoException e) {
                LOG.debug("could not answer on a co-located connection", e);
            }
            socket.shutdown();
            return false;
        }

        private static int writeRefusal(MemorySegment frame, int opcode, int status, int requestId, String text) {
            byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
            int n = (int) Math.min(bytes.length, Math.min(MAX_REFUSAL_TEXT_BYTES, frame.byteSize() - ColocatedFrame.HEADER_BYTES));
            ColocatedFrame.writeHeader(frame, opcode, status, requestId);
            MemorySegment.copy(bytes, 0, frame, ValueLayout.JAVA_BYTE, ColocatedFrame.HEADER_BYTES, n);
            return ColocatedFrame.HEADER_BYTES + n;
        }

        /** On the loop, once: drops the socket from epoll, closes it and releases what the connection held. */
        void end() {
            if (ended) {
                return;
            }
            ended = true;
            if (registration != null) {
                registration.cancel(); // on the loop: removed from epoll now, before the number can be reused
            }
            connections.remove(this);
            closeQuietly(socket);
            releaseHoldings();
        }

        /** Unregisters its sessions (which releases their leases and tickets), then the rest it was handed. */
        private void releaseHoldings() {
            for (SessionRef session : registered.values()) {
                run("Unregister", UnregisterRequest.newBuilder().setSession(session).build());
            }
            for (Map.Entry<Long, SessionRef> ticket : tickets.entrySet()) {
                if (!registered.containsKey(ticket.getValue().getInstanceId())) {
                    run("CancelQuery", CancelQueryRequest.newBuilder().setSession(ticket.getValue())
                            .setTicket(ticket.getKey()).build());
                }
            }
            for (Map.Entry<Long, SessionRef> lease : leases.entrySet()) {
                if (!registered.containsKey(lease.getValue().getInstanceId())) {
                    run("ReleaseLease", ReleaseLeaseRequest.newBuilder().setSession(lease.getValue())
                            .setLeaseId(lease.getKey()).build());
                }
            }
            registered.clear();
            tickets.clear();
            leases.clear();
        }
    }

    /**
     * Runs a call for the door itself (cleanup). Its refusal is expected when the holding already ended (released,
     * lapsed, the Manager stopping) and is only logged.
     */
    @SuppressWarnings("unchecked")
    private <Q> void run(String method, Q request) {
        ((EngineCall<Q, ?>) byName.get(method)).run(request).onFailure(failure ->
                LOG.debug("co-located cleanup: {} was refused: {}", method, failure.getMessage()));
    }

}
