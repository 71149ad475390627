package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.ColocatedChannel;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.nativeio.unix.SeqPacketSocket;
import io.orbitkv.protocol.colocated.ColocatedFrame;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.AllocatePublishRequest;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.GroupChain;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.LeasedPage;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.PublishSlot;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.protocol.engine.RegisterReply;
import io.orbitkv.protocol.engine.RegisterRequest;
import io.orbitkv.protocol.engine.ReleaseLeaseReply;
import io.orbitkv.protocol.engine.SealPublishReply;
import io.orbitkv.protocol.engine.SealPublishRequest;
import io.orbitkv.protocol.engine.SessionRef;
import io.orbitkv.protocol.engine.SlotStatus;
import io.orbitkv.protocol.engine.SubmitQueryRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The co-located channel end to end: a real Manager, its real SEQPACKET socket, the Java client and raw frames. The
 * Manager's after-test check ({@link RunningManager}) asserts no lease, leased byte, pinned image or outstanding query
 * is left behind.
 */
@Timeout(120)
class ColocatedChannelIT {
    static final int PAGE = 64 << 10;
    static final int SMALL_PAGE = 4096;

    @RegisterExtension
    final RunningManager running = new RunningManager().with("ssd.enabled", "false")
            .with("engine.colocated-max-frame", "8KiB").with("engine.colocated-max-in-flight", "2");

    static ByteString hash(String text) throws Exception {
        return ByteString.copyFrom(MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8)));
    }

    static List<ByteString> chain(String prefix, int pages) throws Exception {
        List<ByteString> hashes = new ArrayList<>();
        for (int i = 0; i < pages; i++) {
            hashes.add(hash(prefix + "/" + i));
        }
        return hashes;
    }

    static byte pageByte(int position, int i) {
        return (byte) (position * 31 + i * 7 + (i >> 9));
    }

    /** Publishes {@code hashes} through the gRPC session, page bytes derived from the position. */
    static void publish(EngineSession session, List<ByteString> hashes) {
        publish(session, hashes, PAGE);
    }

    static void publish(EngineSession session, List<ByteString> hashes, int pageBytes) {
        List<PageKey> keys = hashes.stream().map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList();
        AllocatePublishReply allocated = session.allocate(keys).await();
        for (int p = 0; p < allocated.getSlotsCount(); p++) {
            PublishSlot slot = allocated.getSlots(p);
            assertThat(slot.getStatus()).isEqualTo(SlotStatus.ALLOCATED);
            byte[] bytes = new byte[pageBytes];
            for (int i = 0; i < pageBytes; i++) {
                bytes[i] = pageByte(p, i);
            }
            // One bulk copy: a per-byte loop runs interpreted in a cold JVM and starves the Manager's loop of CPU.
            MemorySegment.copy(bytes, 0, session.slot(slot.getSlot()), ValueLayout.JAVA_BYTE, 0, pageBytes);
        }
        session.seal(allocated.getPublishId(), List.of()).await();
    }

    static GroupChain group(List<ByteString> hashes) {
        return GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build();
    }

    ColocatedChannel channel() throws Exception {
        return ColocatedChannel.connect(running.manager().colocatedSocket(), running.manager().token());
    }

    @Test
    void theSocketIsOwnerOnlyAndGoneAfterStop() throws Exception {
        Path socket = running.manager().colocatedSocket();
        assertThat(socket).isEqualTo(running.dataDir().resolve("colocated.sock"));
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(socket))).isEqualTo("rw-------");
        assertThat(Files.list(socket.getParent()).map(p -> p.getFileName().toString()))
                .as("no bind directory left").noneMatch(name -> name.startsWith(".bind-"));
        try (ColocatedChannel channel = channel()) {
            channel.ping();
            assertThat(channel.maxFrameBytes()).isEqualTo(8 << 10);
            assertThat(channel.maxInFlight()).isEqualTo(2);
        }
    }

    @Test
    void queryPollAndReleaseAnswerAsOverGrpcWithPayloadOnlyInThePool() throws Exception {
        int pages = 8;
        List<ByteString> hashes = chain("hit", pages);
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(),
                     InstanceRole.PREFILL_AND_DECODE).await();
             ColocatedChannel channel = channel()) {
            publish(session, hashes);
            QueryReply viaGrpc = session.submit(List.of(group(hashes)), 0).await();
            session.release(viaGrpc.getLease().getLeaseId()).await();

            QueryReply reply = channel.submitQuery(session, List.of(group(hashes)), 0);
            if (reply.getStatus() == QueryStatus.PENDING) {
                QueryReply[] polled = {reply};
                await().atMost(Duration.ofSeconds(30)).until(() ->
                        (polled[0] = channel.poll(session.session(), polled[0].getTicket())).getStatus() != QueryStatus.PENDING);
                reply = polled[0];
            } else {
                // A poll of an answered ticket repeats its answer, over this channel as over gRPC.
                QueryReply polled = channel.poll(session.session(), reply.getTicket());
                assertThat(polled.getStatus()).isEqualTo(reply.getStatus());
                assertThat(polled.getLease().getLeaseId()).isEqualTo(reply.getLease().getLeaseId());
            }
            assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY).isEqualTo(viaGrpc.getStatus());
            assertThat(reply.getReadyBlocks()).isEqualTo(pages).isEqualTo(viaGrpc.getReadyBlocks());
            for (LeasedPage leased : reply.getLease().getPagesList()) {
                MemorySegment slot = session.slot(leased.getSlot());
                for (int i = 0; i < PAGE; i += 997) {
                    assertThat(slot.get(ValueLayout.JAVA_BYTE, i)).isEqualTo(pageByte(leased.getPosition(), i));
                }
            }
            ReleaseLeaseReply released = channel.release(session.session(), reply.getLease().getLeaseId());
            assertThat(released.getLeaseValid()).isTrue();
            assertThat(released.getReleasedPages()).isEqualTo(pages);
            assertThat(channel.stats(session.session()).getActiveLeases()).isZero();
        }
    }

    @Test
    void aChannelThatSpinsForItsRepliesAnswersTheSame() throws Exception {
        List<ByteString> hashes = chain("spin", 3);
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(),
                     InstanceRole.PREFILL_AND_DECODE).await();
             ColocatedChannel channel = ColocatedChannel.connect(running.manager().colocatedSocket(),
                     running.manager().token(), Duration.ofMillis(1))) {
            publish(session, hashes);
            QueryReply reply = channel.submitQuery(session, List.of(group(hashes)), 0);
            assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(reply.getReadyBlocks()).isEqualTo(3);
            assertThat(channel.poll(session.session(), reply.getTicket()).getLease().getLeaseId())
                    .isEqualTo(reply.getLease().getLeaseId());
            assertThatThrownBy(() -> channel.poll(session.session(), reply.getTicket() + 987_654))
                    .isInstanceOfSatisfying(OrbitKvException.class,
                            e -> assertThat(e.reason()).isEqualTo(ErrorReason.UNKNOWN_TICKET));
            assertThat(channel.release(session.session(), reply.getLease().getLeaseId()).getLeaseValid()).isTrue();
        }
        assertThatThrownBy(() -> ColocatedChannel.connect(running.manager().colocatedSocket(), running.manager().token(),
                Duration.ofNanos(-1))).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void aWrongTokenOrUserIsRefusedTypedAndTheConnectionClosed() throws Exception {
        Path socket = running.manager().colocatedSocket();
        assertThatThrownBy(() -> ColocatedChannel.connect(socket, "not-the-token-0123456789"))
                .isInstanceOfSatisfying(OrbitKvException.class,
                        e -> assertThat(e.reason()).isEqualTo(ErrorReason.UNAUTHENTICATED_CALLER));
        // A call before Hello is refused the same way, and the Manager closes the connection.
        try (RawChannel raw = new RawChannel(socket)) {
            raw.send(ColocatedFrame.opcode("Ping"), 7, new byte[0]);
            RawReply reply = raw.receive();
            assertThat(reply.status()).isEqualTo(ErrorReason.UNAUTHENTICATED_CALLER.getNumber());
            assertThat(reply.requestId()).isEqualTo(7);
            assertThat(raw.receiveLength()).as("end-of-stream").isZero();
        }
    }

    @Test
    void refusalsCarryTheSameReasonsAsGrpcAndTheConnectionGoesOn() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(),
                     InstanceRole.PREFILL_AND_DECODE).await();
             ColocatedChannel channel = channel()) {
            assertThatThrownBy(() -> channel.poll(session.session(), 424242))
                    .isInstanceOfSatisfying(OrbitKvException.class, e -> assertThat(e.reason()).isEqualTo(ErrorReason.UNKNOWN_TICKET));
            assertThatThrownBy(() -> session.poll(424242).await())
                    .isInstanceOfSatisfying(OrbitKvException.class, e -> assertThat(e.reason()).isEqualTo(ErrorReason.UNKNOWN_TICKET));
            SessionRef stale = session.session().toBuilder().setSessionEpoch(session.session().getSessionEpoch() + 1).build();
            assertThatThrownBy(() -> channel.release(stale, 1))
                    .isInstanceOfSatisfying(OrbitKvException.class,
                            e -> assertThat(e.reason()).isEqualTo(ErrorReason.STALE_SESSION_EPOCH));
            assertThatThrownBy(() -> channel.submitQuery(SubmitQueryRequest.newBuilder().setSession(session.session())
                    .setNamespaceId(ByteString.copyFrom(new byte[16])).addGroups(group(chain("x", 1))).build()))
                    .isInstanceOfSatisfying(OrbitKvException.class,
                            e -> assertThat(e.reason()).isEqualTo(ErrorReason.NAMESPACE_MISMATCH));
            channel.ping();
        }
        try (RawChannel raw = RawChannel.authenticated(running)) {
            raw.send(ColocatedFrame.opcode("SubmitQuery"), 11, new byte[] {(byte) 0xff, (byte) 0xff, (byte) 0xff});
            assertThat(raw.receive()).isEqualTo(new RawReply(11, ErrorReason.MALFORMED_REQUEST.getNumber()));
            raw.send(200, 12, new byte[0]);
            assertThat(raw.receive()).isEqualTo(new RawReply(12, ErrorReason.MALFORMED_REQUEST.getNumber()));
            raw.send(ColocatedFrame.OP_HELLO, 13, running.manager().token().getBytes(StandardCharsets.UTF_8));
            assertThat(raw.receive()).isEqualTo(new RawReply(13, ErrorReason.MALFORMED_REQUEST.getNumber()));
            raw.send(ColocatedFrame.opcode("Ping"), 14, new byte[0]);
            assertThat(raw.receive()).isEqualTo(new RawReply(14, ColocatedFrame.STATUS_OK));
        }
    }

    @Test
    void framesBeyondTheBoundAreRefusedEitherWayAndNothingStaysLeased() throws Exception {
        try (RawChannel raw = RawChannel.authenticated(running)) {
            raw.send(ColocatedFrame.opcode("Ping"), 21, new byte[(8 << 10) + 1]);
            assertThat(raw.receive()).isEqualTo(new RawReply(21, ErrorReason.OVERSIZED_REQUEST.getNumber()));
            raw.send(ColocatedFrame.opcode("Ping"), 22, new byte[0]);
            assertThat(raw.receive()).isEqualTo(new RawReply(22, ColocatedFrame.STATUS_OK));
        }
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(),
                     InstanceRole.PREFILL_AND_DECODE).await();
             ColocatedChannel channel = channel()) {
            // Too large to send: refused by the client, nothing sent.
            assertThatThrownBy(() -> channel.submitQuery(session, List.of(group(chain("big", 400))), 0))
                    .isInstanceOfSatisfying(OrbitKvException.class,
                            e -> assertThat(e.reason()).isEqualTo(ErrorReason.OVERSIZED_REQUEST));
            // A reply beyond the bound (a poll of a large query submitted over gRPC): refused, the lease stays.
            List<ByteString> hashes = chain("wide", 600);
            try (EngineSession small = client.register(RunningManager.identity("model-small", SMALL_PAGE).build(),
                    InstanceRole.PREFILL_AND_DECODE).await()) {
                publish(small, hashes, SMALL_PAGE);
                QueryReply viaGrpc = small.submit(List.of(group(hashes)), 0).await();
                assertThat(viaGrpc.getStatus()).isEqualTo(QueryStatus.READY);
                assertThat(ColocatedFrame.HEADER_BYTES + viaGrpc.getSerializedSize()).isGreaterThan(8 << 10);
                assertThatThrownBy(() -> channel.poll(small.session(), viaGrpc.getTicket()))
                        .isInstanceOfSatisfying(OrbitKvException.class,
                                e -> assertThat(e.reason()).isEqualTo(ErrorReason.OVERSIZED_REQUEST));
                assertThat(small.release(viaGrpc.getLease().getLeaseId()).await().getLeaseValid()).isTrue();
            }
            channel.ping();
        }
    }

    @Test
    void backToBackRequestsAreEachAnsweredOnceInOrder() throws Exception {
        // The loop reads the socket itself and a Ping completes in place: 64 frames sent before any reply is read are
        // answered in order, none refused (a call that completes later counts against the bound:
        // ColocatedChannelLoopsIT).
        int requests = 64;
        try (RawChannel raw = RawChannel.authenticated(running)) {
            for (int id = 1; id <= requests; id++) {
                raw.send(ColocatedFrame.opcode("Ping"), id, new byte[0]);
            }
            for (int id = 1; id <= requests; id++) {
                assertThat(raw.receive()).isEqualTo(new RawReply(id, ColocatedFrame.STATUS_OK));
            }
        }
    }

    @Test
    void aDisconnectEndsTheSessionsRegisteredOverItAndReleasesWhatItWasHanded() throws Exception {
        List<ByteString> hashes = chain("held", 4);
        try (OrbitKvClient client = running.unixClient();
             EngineSession keeper = client.register(RunningManager.identity("model-a", PAGE).build(),
                     InstanceRole.PREFILL_AND_DECODE).await()) {
            publish(keeper, hashes);
            // An engine registered over the channel, holding a lease, dies (its socket closes).
            ColocatedChannel dying = channel();
            RegisterReply registered = dying.register(RegisterRequest.newBuilder()
                    .setIdentity(RunningManager.identity("model-a", PAGE)).setRole(InstanceRole.DECODE).build());
            SessionRef session = SessionRef.newBuilder().setInstanceId(registered.getInstanceId())
                    .setSessionEpoch(registered.getSessionEpoch()).build();
            QueryReply held = dying.submitQuery(SubmitQueryRequest.newBuilder().setSession(session)
                    .setNamespaceId(registered.getNamespaceId()).addGroups(group(hashes)).build());
            assertThat(held.getStatus()).isEqualTo(QueryStatus.READY);
            // A second channel holds a lease of the gRPC-registered session.
            ColocatedChannel borrowing = channel();
            QueryReply borrowed = borrowing.submitQuery(keeper, List.of(group(hashes)), 0);
            assertThat(borrowed.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(running.metric("orbitkv_leases_active")).isEqualTo(2);
            assertThat(running.metric("orbitkv_instances")).isEqualTo(2);

            dying.close();
            borrowing.close();
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_leases_active") == 0
                    && running.metric("orbitkv_instances") == 1);
            // The session registered over gRPC lives on; the one registered over the dead channel is gone.
            assertThat(keeper.heartbeat().await()).isNotNull();
            try (ColocatedChannel fresh = channel()) {
                assertThatThrownBy(() -> fresh.poll(session, held.getTicket()))
                        .isInstanceOfSatisfying(OrbitKvException.class,
                                e -> assertThat(e.reason()).isIn(ErrorReason.UNKNOWN_INSTANCE, ErrorReason.STALE_SESSION_EPOCH));
            }
            RunningManager.assertNoLeases(keeper);
        }
    }

    @Test
    void registerPublishAndQueryEntirelyOverTheChannel() throws Exception {
        int pages = 3;
        List<ByteString> hashes = chain("own", pages);
        try (ColocatedChannel channel = channel()) {
            RegisterReply registered = channel.register(RegisterRequest.newBuilder()
                    .setIdentity(RunningManager.identity("model-b", PAGE)).setRole(InstanceRole.PREFILL_AND_DECODE).build());
            SessionRef session = SessionRef.newBuilder().setInstanceId(registered.getInstanceId())
                    .setSessionEpoch(registered.getSessionEpoch()).build();
            AllocatePublishRequest.Builder allocate = AllocatePublishRequest.newBuilder().setSession(session)
                    .setNamespaceId(registered.getNamespaceId());
            hashes.forEach(h -> allocate.addPages(PageKey.newBuilder().setGroupId(0).setBlockHash(h)));
            AllocatePublishReply allocated = channel.call("AllocatePublish", allocate.build(), AllocatePublishReply.parser());
            try (io.orbitkv.nativeio.shm.SharedMemoryFile pool = io.orbitkv.nativeio.shm.SharedMemoryFile.map(
                    Path.of(registered.getPool().getPath()), registered.getPool().getSizeBytes())) {
                for (int p = 0; p < pages; p++) {
                    var slot = allocated.getSlots(p).getSlot();
                    pool.segment().asSlice(slot.getOffset(), slot.getLength()).fill((byte) (p + 1));
                }
                SealPublishReply sealed = channel.call("SealPublish", SealPublishRequest.newBuilder().setSession(session)
                        .setPublishId(allocated.getPublishId()).build(), SealPublishReply.parser());
                assertThat(sealed.getSealedPages()).isEqualTo(pages);
                QueryReply reply = channel.submitQuery(SubmitQueryRequest.newBuilder().setSession(session)
                        .setNamespaceId(registered.getNamespaceId()).addGroups(group(hashes)).build());
                assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY);
                for (LeasedPage leased : reply.getLease().getPagesList()) {
                    var slot = leased.getSlot();
                    assertThat(pool.segment().get(ValueLayout.JAVA_BYTE, slot.getOffset() + slot.getLength() - 1))
                            .isEqualTo((byte) (leased.getPosition() + 1));
                }
                assertThat(channel.release(session, reply.getLease().getLeaseId()).getLeaseValid()).isTrue();
                assertThat(channel.unregister(session).getReleasedLeases()).isZero();
            }
        }
    }

    @Test
    void allowedUidsAreCheckedByPeerCredentialsBeforeTheToken() throws Exception {
        Path socket = running.manager().colocatedSocket();
        running.restart(java.util.Map.of("grpc.allowed-uids", "4000000"));
        assertThatThrownBy(() -> ColocatedChannel.connect(socket, running.manager().token()))
                .isInstanceOfSatisfying(OrbitKvException.class,
                        e -> assertThat(e.reason()).isEqualTo(ErrorReason.PEER_NOT_ALLOWED));
    }

    record RawReply(int requestId, int status) {}

    /** Frames exactly as given, to send what the client never would. */
    static final class RawChannel implements AutoCloseable {
        private final SeqPacketSocket socket;
        private final Arena arena = Arena.ofConfined();
        private final MemorySegment buffer = arena.allocate(64 << 10, 8);

        RawChannel(Path path) throws Exception {
            socket = SeqPacketSocket.connect(path);
        }

        static RawChannel authenticated(RunningManager running) throws Exception {
            RawChannel raw = new RawChannel(running.manager().colocatedSocket());
            raw.send(ColocatedFrame.OP_HELLO, 0, running.manager().token().getBytes(StandardCharsets.UTF_8));
            assertThat(raw.receive()).isEqualTo(new RawReply(0, ColocatedFrame.STATUS_OK));
            return raw;
        }

        void send(int opcode, int requestId, byte[] body) throws Exception {
            MemorySegment frame = arena.allocate(ColocatedFrame.HEADER_BYTES + body.length + 1L, 8);
            ColocatedFrame.writeHeader(frame, opcode, 0, requestId);
            MemorySegment.copy(body, 0, frame, ValueLayout.JAVA_BYTE, ColocatedFrame.HEADER_BYTES, body.length);
            socket.send(frame, ColocatedFrame.HEADER_BYTES + body.length, false);
        }

        long receiveLength() throws Exception {
            return socket.receive(buffer);
        }

        RawReply receive() throws Exception {
            long n = socket.receive(buffer);
            assertThat(n).as("a reply frame").isGreaterThanOrEqualTo(ColocatedFrame.HEADER_BYTES);
            return new RawReply(ColocatedFrame.requestId(buffer), ColocatedFrame.status(buffer));
        }

        @Override
        public void close() throws Exception {
            socket.close();
            arena.close();
        }
    }
}
