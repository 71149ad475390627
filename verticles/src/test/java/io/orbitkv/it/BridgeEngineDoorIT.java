package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import com.google.protobuf.Message;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.manager.Manager;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.AllocatePublishRequest;
import io.orbitkv.protocol.engine.Demand;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.GroupChain;
import io.orbitkv.protocol.engine.GroupDemand;
import io.orbitkv.protocol.engine.HeartbeatRequest;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.LeasedPage;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.PingReply;
import io.orbitkv.protocol.engine.PingRequest;
import io.orbitkv.protocol.engine.PollQueryRequest;
import io.orbitkv.protocol.engine.PoolDescriptor;
import io.orbitkv.protocol.engine.PublishSlot;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.protocol.engine.RegisterReply;
import io.orbitkv.protocol.engine.RegisterRequest;
import io.orbitkv.protocol.engine.ReleaseLeaseReply;
import io.orbitkv.protocol.engine.ReleaseLeaseRequest;
import io.orbitkv.protocol.engine.SealPublishReply;
import io.orbitkv.protocol.engine.SealPublishRequest;
import io.orbitkv.protocol.engine.SessionRef;
import io.orbitkv.protocol.engine.SlotStatus;
import io.orbitkv.protocol.engine.StatsReply;
import io.orbitkv.protocol.engine.StatsRequest;
import io.orbitkv.protocol.engine.SubmitDemandRequest;
import io.orbitkv.protocol.engine.SubmitQueryRequest;
import io.orbitkv.protocol.engine.UnregisterReply;
import io.orbitkv.protocol.engine.UnregisterRequest;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.json.JsonObject;
import io.vertx.grpc.common.GrpcMessageDecoder;
import io.vertx.grpc.common.GrpcMessageEncoder;
import io.vertx.grpc.common.ServiceMethod;
import io.vertx.grpc.common.ServiceName;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The event-bus bridge door, tested over a raw TCP socket speaking the bridge's framing (4-byte
 * length + JSON) against a real Manager. The whole engine cycle works through it with payload only in the shared
 * pool; refusals carry the same ErrorReason name, code and text as on gRPC; the token is required on every frame;
 * only the engine calls are reachable; malformed and oversized frames, too many connections and clients that do not
 * read their replies are all answered or bounded.
 */
@Timeout(180)
class BridgeEngineDoorIT {
    static final int PAGE = 64 * 1024;
    static final String MAX_FRAME = "64KiB";

    @RegisterExtension
    final RunningManager running = new RunningManager().with("bridge.port", "0").with("bridge.max-frame", MAX_FRAME)
            .with("bridge.max-connections", "4").with("grpc.max-pages-per-request", "64");

    RawBridge connect() throws Exception {
        return new RawBridge(running.manager().bridgePort(), running.manager().token());
    }

    static RegisterRequest registration(String model) {
        return RegisterRequest.newBuilder().setIdentity(RunningManager.identity(model, PAGE)).setRole(InstanceRole.DECODE)
                .setInstanceLabel("bridge-it").build();
    }

    static ByteString hash(String text) throws Exception {
        return ByteString.copyFrom(MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8)));
    }

    static byte[] page(int position) {
        byte[] bytes = new byte[PAGE];
        for (int i = 0; i < PAGE; i++) {
            bytes[i] = (byte) (position * 31 + i * 7 + (i >> 9));
        }
        return bytes;
    }

    @Test
    void registerPublishQueryAndReleaseOverTheBridgeWithPayloadOnlyInThePool() throws Exception {
        int pages = 4;
        try (RawBridge bridge = connect()) {
            RegisterReply registered = bridge.call("Register", registration("bridge-model"), RegisterReply.parser());
            SessionRef session = SessionRef.newBuilder().setInstanceId(registered.getInstanceId())
                    .setSessionEpoch(registered.getSessionEpoch()).build();
            assertThat(registered.getPool().getSizeBytes()).isEqualTo(64L << 20);

            List<ByteString> hashes = new ArrayList<>();
            AllocatePublishRequest.Builder allocate = AllocatePublishRequest.newBuilder().setSession(session)
                    .setNamespaceId(registered.getNamespaceId());
            for (int i = 0; i < pages; i++) {
                hashes.add(hash("bridge/" + i));
                allocate.addPages(PageKey.newBuilder().setGroupId(0).setBlockHash(hashes.get(i)));
            }
            AllocatePublishReply allocated = bridge.call("AllocatePublish", allocate.build(), AllocatePublishReply.parser());
            SealPublishRequest.Builder seal = SealPublishRequest.newBuilder().setSession(session)
                    .setPublishId(allocated.getPublishId());
            try (FileChannel pool = FileChannel.open(Path.of(registered.getPool().getPath()), StandardOpenOption.READ,
                    StandardOpenOption.WRITE)) {
                for (int i = 0; i < pages; i++) {
                    PublishSlot slot = allocated.getSlots(i);
                    assertThat(slot.getStatus()).isEqualTo(SlotStatus.ALLOCATED);
                    pool.write(ByteBuffer.wrap(page(i)), slot.getSlot().getOffset());
                    CRC32C crc = new CRC32C();
                    crc.update(page(i));
                    seal.addCrc32C((int) crc.getValue()).addWritten(slot.getSlot());
                }
                SealPublishReply sealed = bridge.call("SealPublish", seal.build(), SealPublishReply.parser());
                assertThat(sealed.getSealedPages()).isEqualTo(pages);
                assertThat(sealed.getSealedBytes()).isEqualTo((long) pages * PAGE);

                QueryReply reply = bridge.call("SubmitQuery", SubmitQueryRequest.newBuilder().setSession(session)
                        .setNamespaceId(registered.getNamespaceId())
                        .addGroups(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes)).build(), QueryReply.parser());
                QueryReply[] polled = {reply};
                await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(5))
                        .until(() -> polled[0].getStatus() != QueryStatus.PENDING || (polled[0] = bridge.call("PollQuery",
                                PollQueryRequest.newBuilder().setSession(session).setTicket(polled[0].getTicket())
                                        .build(), QueryReply.parser())).getStatus() != QueryStatus.PENDING);
                reply = polled[0];
                assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY);
                assertThat(reply.getReadyBlocks()).isEqualTo(pages);
                for (LeasedPage leased : reply.getLease().getPagesList()) {
                    ByteBuffer copy = ByteBuffer.allocate((int) leased.getSlot().getLength());
                    pool.read(copy, leased.getSlot().getOffset());
                    assertThat(copy.array()).as("page %d", leased.getPosition()).isEqualTo(page(leased.getPosition()));
                }
                ReleaseLeaseReply released = bridge.call("ReleaseLease", ReleaseLeaseRequest.newBuilder().setSession(session)
                        .setLeaseId(reply.getLease().getLeaseId()).build(), ReleaseLeaseReply.parser());
                assertThat(released.getLeaseValid()).isTrue();
                assertThat(released.getReleasedPages()).isEqualTo(pages);
            }
            StatsReply stats = bridge.call("Stats", StatsRequest.newBuilder().setSession(session).build(), StatsReply.parser());
            assertThat(stats.getActiveLeases()).isZero();
            UnregisterReply unregistered = bridge.call("Unregister", UnregisterRequest.newBuilder().setSession(session).build(),
                    UnregisterReply.parser());
            assertThat(unregistered.getReleasedLeases()).isZero();
            // Descriptors only: everything that crossed the socket, both ways, is less than one page of payload.
            assertThat(bridge.bytesSent() + bridge.bytesReceived()).isLessThan(PAGE);
        }
        assertThat(running.metric("orbitkv_bridge_outstanding")).isZero();
    }

    /** A gRPC method that sends the given bytes as its request body, whatever they are. */
    static ServiceMethod<Message, Buffer> rawGrpc(String method) {
        return ServiceMethod.client(ServiceName.create("orbitkv.engine.v1.EngineService"), method,
                GrpcMessageEncoder.IDENTITY, GrpcMessageDecoder.decoder(PingReply.getDefaultInstance()));
    }

    record Refusal(ErrorReason reason, int code, String message) {}

    @Test
    void refusalsCarryTheSameReasonCodeAndTextAsOnGrpc() throws Exception {
        try (OrbitKvClient grpc = running.tcpClient(); RawBridge bridge = connect();
             EngineSession session = grpc.register(RunningManager.identity("parity-model", PAGE).build(), InstanceRole.DECODE).await()) {
            PublishQueryRestoreIT.publish(session, "parity", 2);
            SessionRef ref = session.session();
            SessionRef stale = ref.toBuilder().setSessionEpoch(ref.getSessionEpoch() + 7).build();
            SessionRef unknown = ref.toBuilder().setInstanceId(ref.getInstanceId() + 1000).build();
            byte[] garbage = HexFormat.of().parseHex("ffffffffffffffffffff01");
            List<Object[]> cases = List.of(
                    new Object[] {"Register", garbage, ErrorReason.MALFORMED_REQUEST},
                    new Object[] {"Register", RegisterRequest.newBuilder().setIdentity(RunningManager.identity("m", PAGE)
                            .setPageSizeTokens(0)).build().toByteArray(), ErrorReason.INVALID_IDENTITY},
                    new Object[] {"Heartbeat", HeartbeatRequest.newBuilder().setSession(stale).build().toByteArray(),
                            ErrorReason.STALE_SESSION_EPOCH},
                    new Object[] {"Heartbeat", HeartbeatRequest.newBuilder().setSession(unknown).build().toByteArray(),
                            ErrorReason.UNKNOWN_INSTANCE},
                    new Object[] {"AllocatePublish", AllocatePublishRequest.newBuilder().setSession(ref)
                            .setNamespaceId(ByteString.copyFrom(new byte[16])).addPages(PageKey.newBuilder()
                                    .setBlockHash(hash("x"))).build().toByteArray(), ErrorReason.NAMESPACE_MISMATCH},
                    new Object[] {"AllocatePublish", AllocatePublishRequest.newBuilder().setSession(ref)
                            .setNamespaceId(session.namespace()).addAllPages(Collections.nCopies(65, PageKey.newBuilder()
                                    .setBlockHash(hash("y")).build())).build().toByteArray(), ErrorReason.OVERSIZED_REQUEST},
                    new Object[] {"SealPublish", SealPublishRequest.newBuilder().setSession(ref).setPublishId(987_654)
                            .build().toByteArray(), ErrorReason.UNKNOWN_PUBLISH},
                    new Object[] {"SealPublish", SealPublishRequest.newBuilder().setSession(ref).setPublishId(1)
                            .addCrc32C(1).addWritten(PoolDescriptor.newBuilder().setRegionId(1).setOffset(1L << 40)
                                    .setLength(PAGE).setGeneration(1)).build().toByteArray(), ErrorReason.DESCRIPTOR_OUTSIDE_POOL},
                    new Object[] {"PollQuery", PollQueryRequest.newBuilder().setSession(ref).setTicket(424_242).build()
                            .toByteArray(), ErrorReason.UNKNOWN_TICKET},
                    new Object[] {"ReleaseLease", ReleaseLeaseRequest.newBuilder().setSession(ref).setLeaseId(313_131).build()
                            .toByteArray(), ErrorReason.UNKNOWN_LEASE},
                    new Object[] {"SubmitDemand", SubmitDemandRequest.newBuilder().setSession(ref).setDemand(Demand.newBuilder()
                            .setRequestId("r").setRevision(1).setOperationId(1).setNamespaceId(session.namespace())
                            .setPageSizeTokens(16).setSelectedEndTokens(-1L) // 2^64 - 1: unsigned, far out of range
                            .addGroups(GroupDemand.newBuilder().setGroupId(0).addBlockHashes(hash("z")))).build().toByteArray(),
                            ErrorReason.INVALID_DEMAND});
            for (Object[] c : cases) {
                String method = (String) c[0];
                byte[] body = (byte[]) c[1];
                ErrorReason expected = (ErrorReason) c[2];
                String counter = "orbitkv_bridge_rejections_total{reason=\"" + expected.name().toLowerCase() + "\"}";
                double before = running.metric(counter);
                Refusal onGrpc;
                try {
                    grpc.call(rawGrpc(method), Buffer.buffer(body)).await();
                    throw new AssertionError(method + " was not refused on gRPC");
                } catch (OrbitKvException e) {
                    onGrpc = new Refusal(e.reason(), e.reason().getNumber(), e.getMessage());
                }
                JsonObject answer = bridge.call(bridge.request(method, Base64.getEncoder().encodeToString(body)));
                assertThat(answer.getString("type")).as(method + ": " + answer).isEqualTo("err");
                assertThat(answer.getString("failureType")).isEqualTo("RECIPIENT_FAILURE");
                assertThat(answer.getString("sourceAddress")).isEqualTo(RawBridge.SERVICE + method);
                Refusal onBridge = new Refusal(ErrorReason.forNumber(answer.getInteger("failureCode")),
                        answer.getInteger("failureCode"), answer.getString("message"));
                assertThat(onBridge).as(method).isEqualTo(onGrpc);
                assertThat(onBridge.reason()).as(method).isEqualTo(expected);
                assertThat(onBridge.message()).startsWith(expected.name() + ": ");
                assertThat(running.metric(counter) - before).as("bridge counter for " + method).isEqualTo(1.0);
            }
        }
    }

    @Test
    void everyFrameMustCarryTheEngineToken() throws Exception {
        double instances = running.metric("orbitkv_instances");
        double unauthenticated = running.metric("orbitkv_bridge_rejections_total{reason=\"unauthenticated_caller\"}");
        try (RawBridge bridge = connect()) {
            String body = Base64.getEncoder().encodeToString(registration("no-token").toByteArray());
            JsonObject withoutToken = bridge.request("Register", body).put("headers", new JsonObject());
            JsonObject wrongToken = bridge.request("Register", body).put("headers",
                    new JsonObject().put("x-orbitkv-token", running.manager().token().replace('a', 'b') + "x"));
            JsonObject tokenOfWrongType = bridge.request("Register", body).put("headers",
                    new JsonObject().put("x-orbitkv-token", 12345));
            JsonObject tokenInTheBody = bridge.request("Register", body);
            tokenInTheBody.remove("headers");
            tokenInTheBody.put("token", running.manager().token());
            // A wrong token on a frame for an internal address is refused for the token, telling nothing more.
            JsonObject internalWithoutToken = bridge.request("Ping", "").put("address", "orbitkv.storage.stats")
                    .put("headers", new JsonObject());
            for (JsonObject frame : List.of(withoutToken, wrongToken, tokenOfWrongType, tokenInTheBody, internalWithoutToken)) {
                JsonObject answer = bridge.call(frame);
                assertThat(answer.getString("type")).as(frame.encode()).isEqualTo("err");
                assertThat(answer.getInteger("failureCode")).isEqualTo(ErrorReason.UNAUTHENTICATED_CALLER_VALUE);
                assertThat(answer.getString("message")).startsWith("UNAUTHENTICATED_CALLER: ");
            }
            // Every frame, the ping too; with the token it is answered pong.
            bridge.send(new JsonObject().put("type", "ping"));
            JsonObject refusedPing = bridge.receive();
            assertThat(refusedPing.getString("type")).isEqualTo("err");
            assertThat(refusedPing.getInteger("failureCode")).isEqualTo(ErrorReason.UNAUTHENTICATED_CALLER_VALUE);
            bridge.send(new JsonObject().put("type", "ping").put("headers",
                    new JsonObject().put("x-orbitkv-token", running.manager().token())));
            assertThat(bridge.receive().getString("type")).isEqualTo("pong");
            // Refused frames changed nothing: no instance was registered.
            assertThat(running.metric("orbitkv_instances")).isEqualTo(instances);
            assertThat(running.metric("orbitkv_bridge_rejections_total{reason=\"unauthenticated_caller\"}") - unauthenticated)
                    .isEqualTo(6.0);
            // The token is checked per frame, not per connection: the same connection then works.
            assertThat(bridge.call("Ping", PingRequest.getDefaultInstance(), PingReply.parser())).isNotNull();
        }
    }

    @Test
    void onlyTheEngineCallsAreReachable() throws Exception {
        try (RawBridge bridge = connect()) {
            // Internal role addresses (storage, admission, cost), other names, and a gRPC name of another service.
            for (String address : List.of("orbitkv.storage.stats", "orbitkv.storage.release-instance",
                    "orbitkv.cost", "orbitkv.admission.submit", "orbitkv.local-roles", "Register",
                    "orbitkv.engine.v1.EngineService/Nothing", "orbitkv.peer.v1.PeerService/Fetch")) {
                JsonObject answer = bridge.call(bridge.request("Ping", "").put("address", address));
                assertThat(answer.getString("type")).as(address).isEqualTo("err");
                assertThat(answer.getInteger("failureCode")).as(address).isEqualTo(ErrorReason.MALFORMED_REQUEST_VALUE);
                assertThat(answer.getString("message")).contains("no engine call at address '" + address + "'");
            }
            // Nothing flows outbound (register = subscribe), and publish or an unknown type is not served.
            for (String type : List.of("register", "unregister", "publish", "message", "pong")) {
                JsonObject answer = bridge.call(bridge.request("Ping", "").put("type", type));
                assertThat(answer.getString("type")).as(type).isEqualTo("err");
                assertThat(answer.getString("message")).as(type).startsWith("MALFORMED_REQUEST: frame type '" + type + "'");
            }
            assertThat(bridge.call("Ping", PingRequest.getDefaultInstance(), PingReply.parser())).isNotNull();
        }
    }

    @Test
    void malformedFramesAndBodiesAreAnsweredAndTheConnectionGoesOn() throws Exception {
        try (RawBridge bridge = connect()) {
            // Not JSON, or JSON but not an object: no reply address can be read, so the answer has none.
            for (String json : List.of("{not json", "[1,2,3]", "\"text\"", "", "{\"type\":\"send\",")) {
                bridge.sendRaw(json.getBytes(StandardCharsets.UTF_8));
                JsonObject answer = bridge.receive();
                assertThat(answer.getString("type")).as(json).isEqualTo("err");
                assertThat(answer.containsKey("address")).as(json).isFalse();
                assertThat(answer.getInteger("failureCode")).as(json).isEqualTo(ErrorReason.MALFORMED_REQUEST_VALUE);
            }
            // A send without a reply address cannot be answered by address.
            bridge.send(bridge.request("Ping", "").put("replyAddress", (String) null));
            JsonObject noReply = bridge.receive();
            assertThat(noReply.getString("message")).startsWith("MALFORMED_REQUEST: a send frame needs a replyAddress");
            // Bodies the engine call cannot decode: all MALFORMED_REQUEST, answered to their reply address.
            for (Object body : List.of("not base64!", new JsonObject().put("instance_id", 1), 42, "////")) {
                JsonObject answer = bridge.call(bridge.request("Stats", body));
                assertThat(answer.getString("type")).as(String.valueOf(body)).isEqualTo("err");
                assertThat(answer.getInteger("failureCode")).as(String.valueOf(body))
                        .isEqualTo(ErrorReason.MALFORMED_REQUEST_VALUE);
            }
            JsonObject noBody = bridge.request("Stats", "");
            noBody.remove("body");
            assertThat(bridge.call(noBody).getString("message")).startsWith("MALFORMED_REQUEST: the request carries no message");
            // Larger than bridge.max-frame: refused before it is buffered; the frame is skipped and reading goes on.
            byte[] huge = bridge.request("Stats", Base64.getEncoder().encodeToString(new byte[96 * 1024])).encode()
                    .getBytes(StandardCharsets.UTF_8);
            bridge.sendRaw(huge);
            JsonObject oversized = bridge.receive();
            assertThat(oversized.getInteger("failureCode")).isEqualTo(ErrorReason.OVERSIZED_REQUEST_VALUE);
            assertThat(oversized.getString("message")).contains("bridge.max-frame (65536 bytes");
            assertThat(bridge.call("Ping", PingRequest.getDefaultInstance(), PingReply.parser())).isNotNull();
            // A frame announcing 2 GiB is refused on its length alone.
            bridge.sendBytes(ByteBuffer.allocate(4).putInt(Integer.MAX_VALUE).array());
            assertThat(bridge.receive().getInteger("failureCode")).isEqualTo(ErrorReason.OVERSIZED_REQUEST_VALUE);
        }
        assertThat(running.metric("orbitkv_bridge_outstanding")).isZero();
        assertThat(running.health()).contains("\"UP\"");
    }

    @Test
    void connectionsBeyondTheLimitAreRefusedAndClosed() throws Exception {
        List<RawBridge> open = new ArrayList<>();
        try {
            for (int i = 0; i < 4; i++) {
                RawBridge bridge = connect();
                open.add(bridge);
                assertThat(bridge.call("Ping", PingRequest.getDefaultInstance(), PingReply.parser())).isNotNull();
            }
            assertThat(running.metric("orbitkv_bridge_connections")).isEqualTo(4.0);
            try (RawBridge fifth = connect()) {
                JsonObject refused = fifth.receive();
                assertThat(refused.getInteger("failureCode")).isEqualTo(ErrorReason.TOO_MANY_OUTSTANDING_VALUE);
                assertThat(refused.getString("message")).contains("bridge.max-connections");
                assertThat(fifth.closedByPeer()).isTrue();
            }
            open.removeFirst().close();
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_bridge_connections") == 3.0);
            try (RawBridge again = connect()) {
                assertThat(again.call("Ping", PingRequest.getDefaultInstance(), PingReply.parser())).isNotNull();
            }
        } finally {
            for (RawBridge bridge : open) {
                bridge.close();
            }
        }
        await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_bridge_connections") == 0.0);
    }

    @Test
    void aClientThatDoesNotReadItsRepliesIsNoLongerRead() throws Exception {
        int requests = 20_000;
        double pausedBefore = running.metric("orbitkv_bridge_reads_paused_total");
        try (RawBridge bridge = new RawBridge(running.manager().bridgePort(), running.manager().token(), 4096)) {
            CompletableFuture<Void> writer = CompletableFuture.runAsync(() -> {
                try {
                    for (int i = 0; i < requests; i++) {
                        bridge.send(bridge.request("Ping", ""));
                    }
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            await().atMost(Duration.ofSeconds(60)).until(() -> running.metric("orbitkv_bridge_reads_paused_total") > pausedBefore);
            // Every request is answered: served, or (pipelined past bridge.max-outstanding-per-connection) refused.
            int served = 0;
            int refused = 0;
            for (int i = 0; i < requests; i++) {
                JsonObject answer = bridge.receive();
                if ("message".equals(answer.getString("type"))) {
                    served++;
                } else {
                    assertThat(answer.getInteger("failureCode")).as(answer.encode())
                            .isEqualTo(ErrorReason.TOO_MANY_OUTSTANDING_VALUE);
                    assertThat(answer.getString("address")).startsWith("reply-");
                    refused++;
                }
            }
            writer.get();
            assertThat(served + refused).isEqualTo(requests);
            assertThat(served).isPositive();
            System.out.printf("bridge back-pressure: %d pipelined pings, %d served, %d refused TOO_MANY_OUTSTANDING%n",
                    requests, served, refused);
        }
        assertThat(running.metric("orbitkv_bridge_outstanding")).isZero();
    }

    @Test
    void theBridgeIsOffByDefault() throws Exception {
        Path data = Files.createTempDirectory("orbitkv-bridge-off");
        try (var manager = Manager.start(RunningManager.config(Map.of(
                "data-dir", data.toString(), "pool.size", "8MiB", "grpc.tcp-port", "0", "metrics.port", "0",
                "ssd.enabled", "false"))).await(60, TimeUnit.SECONDS)) {
            assertThat(manager.bridgePort()).isEqualTo(-1);
            assertThat(manager.registry().find("orbitkv.bridge.connections").gauge()).isNull();
        } finally {
            RunningManager.deleteTree(data);
        }
    }
}
