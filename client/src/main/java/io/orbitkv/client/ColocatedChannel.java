package io.orbitkv.client;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.Parser;
import io.orbitkv.nativeio.libc.NativeIoException;
import io.orbitkv.nativeio.unix.SeqPacketSocket;
import io.orbitkv.protocol.colocated.ColocatedFrame;
import io.orbitkv.protocol.engine.*;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * An engine's co-located channel to its Manager: the engine.proto calls over the Manager's {@code SOCK_SEQPACKET}
 * socket ({@code <data-dir>/colocated.sock}), one frame per message ({@link ColocatedFrame}), without HTTP/2 and gRPC.
 * Meant for the calls an engine makes per request (query, poll, release); gRPC ({@link OrbitKvClient}) stays the door
 * for everything else and for frames above the channel's bound.
 *
 * <p>Design note: the channel owns one socket and two native buffers sized by the Manager's frame bound (from the
 * Hello reply); {@link #close()} releases them. Calls are blocking and serialised (one request in flight per channel:
 * a thread that needs its own pace opens its own channel); a call sleeps in recv for its reply, or first polls for it
 * for a bounded spin when connected with one. Refusals come back as {@link OrbitKvException} with the
 * Manager's typed reason, as from gRPC. Closing the channel (or the process dying) ends the sessions registered over
 * it and releases the leases it was handed, at once.
 */
public final class ColocatedChannel implements AutoCloseable {
    private final SeqPacketSocket socket;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment sent;
    private final MemorySegment received;
    private final int maxFrameBytes;
    private final int maxInFlight;
    private final AtomicBoolean closing = new AtomicBoolean();
    /** How long a call polls for its reply before it sleeps in recv; 0: it sleeps at once. */
    private final long spinNanos;
    private int nextRequestId = 1;

    private ColocatedChannel(SeqPacketSocket socket, int maxFrameBytes, int maxInFlight, long spinNanos) {
        this.socket = socket;
        this.spinNanos = spinNanos;
        this.maxFrameBytes = maxFrameBytes;
        this.maxInFlight = maxInFlight;
        this.sent = arena.allocate(maxFrameBytes, 8);
        this.received = arena.allocate(maxFrameBytes + 1L, 8);
    }

    /** Whether this JVM can open the channel at all (Linux, FFM allowed); the cause otherwise. */
    public static boolean isAvailable() {
        return SeqPacketSocket.isAvailable();
    }

    /**
     * Connects and authenticates with the engine token; a refused token or user is an {@link OrbitKvException}
     * (UNAUTHENTICATED_CALLER, PEER_NOT_ALLOWED), a socket that is not there an {@link IOException}.
     */
    public static ColocatedChannel connect(Path socketPath, String token) throws IOException {
        return connect(socketPath, token, Duration.ZERO);
    }

    /**
     * Like {@link #connect(Path, String)}, with each call polling for its reply for up to {@code spin} before it sleeps
     * in recv: a reply that comes within it costs no wake-up of this thread, at the price of one core busy for as long
     * (the thread polls with non-blocking recv calls). Worth it only where the engine's thread has a core to itself.
     */
    public static ColocatedChannel connect(Path socketPath, String token, Duration spin) throws IOException {
        if (spin.isNegative()) {
            throw new IllegalArgumentException("a negative spin: " + spin);
        }
        SeqPacketSocket socket = SeqPacketSocket.connect(socketPath);
        try (Arena hello = Arena.ofConfined()) {
            byte[] tokenBytes = token.getBytes(StandardCharsets.UTF_8);
            MemorySegment frame = hello.allocate(ColocatedFrame.HEADER_BYTES + tokenBytes.length + 1L, 8);
            ColocatedFrame.writeHeader(frame, ColocatedFrame.OP_HELLO, 0, 0);
            MemorySegment.copy(tokenBytes, 0, frame, ValueLayout.JAVA_BYTE, ColocatedFrame.HEADER_BYTES, tokenBytes.length);
            socket.send(frame, ColocatedFrame.HEADER_BYTES + tokenBytes.length, false);
            MemorySegment reply = hello.allocate(4096, 8);
            long n = socket.receive(reply);
            if (n == 0) {
                throw new IOException("the Manager closed the co-located channel during Hello");
            }
            if (n < ColocatedFrame.HEADER_BYTES || ColocatedFrame.version(reply) != ColocatedFrame.VERSION) {
                throw new IOException("the co-located Hello reply is not a version " + ColocatedFrame.VERSION + " frame");
            }
            int status = ColocatedFrame.status(reply);
            if (status != ColocatedFrame.STATUS_OK) {
                throw refusal(status, reply, Math.min(n, reply.byteSize()));
            }
            if (n < ColocatedFrame.HEADER_BYTES + ColocatedFrame.HELLO_REPLY_BODY_BYTES) {
                throw new IOException("the co-located Hello reply is truncated");
            }
            int maxFrame = ColocatedFrame.u32(reply, ColocatedFrame.HEADER_BYTES);
            if (socket.sendBufferBytes() < 2 * maxFrame) {
                socket.sendBufferBytes(2 * maxFrame); // so that a frame up to the bound can be sent
            }
            return new ColocatedChannel(socket, maxFrame, ColocatedFrame.u32(reply, ColocatedFrame.HEADER_BYTES + 4L),
                    spin.toNanos());
        } catch (IOException | RuntimeException e) {
            try {
                socket.close();
            } catch (NativeIoException ignored) {
                // Released either way.
            }
            throw e;
        }
    }

    /** The Manager's frame bound: a larger request is refused here (OVERSIZED_REQUEST) without being sent. */
    public int maxFrameBytes() {
        return maxFrameBytes;
    }

    /** Requests one connection may have in the Manager at once (this channel has one). */
    public int maxInFlight() {
        return maxInFlight;
    }

    /**
     * One call of engine.proto by its method name ({@code "SubmitQuery"}): the request's bytes go out in one frame, the
     * reply is parsed with {@code parser}; a refusal becomes an {@link OrbitKvException}, a broken socket an
     * {@link UncheckedIOException}.
     */
    public synchronized <R extends Message> R call(String method, Message request, Parser<R> parser) {
        if (closing.get()) {
            throw new IllegalStateException("the co-located channel is closed");
        }
        int opcode = ColocatedFrame.opcode(method);
        if (opcode < 0) {
            throw new IllegalArgumentException("the co-located channel does not carry " + method);
        }
        int size = request.getSerializedSize();
        if (ColocatedFrame.HEADER_BYTES + (long) size > maxFrameBytes) {
            throw new OrbitKvException(ErrorReason.OVERSIZED_REQUEST, ErrorReason.OVERSIZED_REQUEST.name(), "OVERSIZED_REQUEST: a "
                    + method + " request of " + size + " bytes does not fit the co-located frame bound (" + maxFrameBytes
                    + " bytes): use gRPC for it");
        }
        int requestId = nextRequestId++;
        ColocatedClientCallEvent event = new ColocatedClientCallEvent();
        long start = event.isEnabled() ? System.nanoTime() : 0;
        try {
            ColocatedFrame.writeHeader(sent, opcode, 0, requestId);
            CodedOutputStream out = CodedOutputStream.newInstance(
                    sent.asSlice(ColocatedFrame.HEADER_BYTES, size).asByteBuffer());
            request.writeTo(out);
            out.flush();
            socket.send(sent, ColocatedFrame.HEADER_BYTES + size, false);
            long sentAt = start == 0 ? 0 : System.nanoTime();
            long n = spinNanos == 0 ? socket.receive(received) : receiveSpinning();
            long receivedAt = start == 0 ? 0 : System.nanoTime();
            if (n == 0) {
                throw new IOException("the Manager closed the co-located channel");
            }
            if (n < ColocatedFrame.HEADER_BYTES || n > maxFrameBytes || ColocatedFrame.requestId(received) != requestId) {
                throw new IOException("a co-located reply of " + n + " bytes does not answer request " + requestId);
            }
            int status = ColocatedFrame.status(received);
            if (status != ColocatedFrame.STATUS_OK) {
                throw refusal(status, received, n);
            }
            ByteBuffer body = received.asSlice(ColocatedFrame.HEADER_BYTES, n - ColocatedFrame.HEADER_BYTES).asByteBuffer();
            R parsed = parser.parseFrom(body);
            if (start != 0) {
                event.opcode = opcode;
                event.sendNanos = sentAt - start;
                event.waitNanos = receivedAt - sentAt;
                event.parseNanos = System.nanoTime() - receivedAt;
                event.commit();
            }
            return parsed;
        } catch (InvalidProtocolBufferException e) {
            throw new UncheckedIOException("the co-located " + method + " reply does not parse", e);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Polls for the reply for up to the spin, then sleeps in recv. */
    private long receiveSpinning() throws NativeIoException {
        long deadline = System.nanoTime() + spinNanos;
        do {
            long n = socket.receiveNow(received);
            if (n >= 0) {
                return n;
            }
            Thread.onSpinWait();
        } while (System.nanoTime() - deadline < 0);
        return socket.receive(received);
    }

    private static OrbitKvException refusal(int status, MemorySegment frame, long length) {
        String text = new String(frame.asSlice(ColocatedFrame.HEADER_BYTES, length - ColocatedFrame.HEADER_BYTES)
                .toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
        if (status == ColocatedFrame.STATUS_INTERNAL) {
            return new OrbitKvException(ErrorReason.ERROR_REASON_UNSPECIFIED, "INTERNAL", text);
        }
        ErrorReason reason = ErrorReason.forNumber(status);
        reason = reason == null ? ErrorReason.ERROR_REASON_UNSPECIFIED : reason;
        return new OrbitKvException(reason, reason.name(), text);
    }

    public PingReply ping() {
        return call("Ping", PingRequest.getDefaultInstance(), PingReply.parser());
    }

    public RegisterReply register(RegisterRequest request) {
        return call("Register", request, RegisterReply.parser());
    }

    public UnregisterReply unregister(SessionRef session) {
        return call("Unregister", UnregisterRequest.newBuilder().setSession(session).build(), UnregisterReply.parser());
    }

    public QueryReply submitQuery(SubmitQueryRequest request) {
        return call("SubmitQuery", request, QueryReply.parser());
    }

    /** The prefix query of an {@link EngineSession} (registered over gRPC or here), like {@link EngineSession#submit}. */
    public QueryReply submitQuery(EngineSession session, List<GroupChain> groups, long revision) {
        return submitQuery(SubmitQueryRequest.newBuilder().setSession(session.session())
                .setNamespaceId(session.namespace()).addAllGroups(groups).setRevision(revision).build());
    }

    public QueryReply submitDemand(SubmitDemandRequest request) {
        return call("SubmitDemand", request, QueryReply.parser());
    }

    public QueryReply poll(SessionRef session, long ticket) {
        return call("PollQuery", PollQueryRequest.newBuilder().setSession(session).setTicket(ticket).build(),
                QueryReply.parser());
    }

    public CancelQueryReply cancel(SessionRef session, long ticket) {
        return call("CancelQuery", CancelQueryRequest.newBuilder().setSession(session).setTicket(ticket).build(),
                CancelQueryReply.parser());
    }

    /** The engine contract: copy, then release; only {@code lease_valid} keeps the copy. */
    public ReleaseLeaseReply release(SessionRef session, long leaseId) {
        return call("ReleaseLease", ReleaseLeaseRequest.newBuilder().setSession(session).setLeaseId(leaseId).build(),
                ReleaseLeaseReply.parser());
    }

    public StatsReply stats(SessionRef session) {
        return call("Stats", StatsRequest.newBuilder().setSession(session).build(), StatsReply.parser());
    }

    /**
     * Closes the socket (the Manager then ends what this channel held) and frees the buffers; idempotent. A call blocked
     * in another thread is woken first (it fails), so that the close does not wait for the Manager's answer.
     */
    @Override
    public void close() {
        if (!closing.compareAndSet(false, true)) {
            return;
        }
        socket.shutdown(); // only the first closer gets here, before the descriptor is released below
        synchronized (this) {
            try {
                socket.close();
            } catch (NativeIoException ignored) {
                // Released either way.
            } finally {
                arena.close();
            }
        }
    }
}
