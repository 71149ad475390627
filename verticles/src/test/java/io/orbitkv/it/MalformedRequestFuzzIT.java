package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import com.google.protobuf.Message;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.protocol.engine.AbortPublishRequest;
import io.orbitkv.protocol.engine.AllocatePublishRequest;
import io.orbitkv.protocol.engine.BlockSpan;
import io.orbitkv.protocol.engine.CancelQueryRequest;
import io.orbitkv.protocol.engine.Demand;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.GroupChain;
import io.orbitkv.protocol.engine.GroupDemand;
import io.orbitkv.protocol.engine.HeartbeatRequest;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.PingRequest;
import io.orbitkv.protocol.engine.PollQueryRequest;
import io.orbitkv.protocol.engine.PoolDescriptor;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.protocol.engine.RegisterRequest;
import io.orbitkv.protocol.engine.ReleaseLeaseRequest;
import io.orbitkv.protocol.engine.SealPublishRequest;
import io.orbitkv.protocol.engine.SessionRef;
import io.orbitkv.protocol.engine.StatsRequest;
import io.orbitkv.protocol.engine.SubmitDemandRequest;
import io.orbitkv.protocol.engine.SubmitQueryRequest;
import io.orbitkv.protocol.engine.UnregisterRequest;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.http.PoolOptions;
import io.vertx.core.http.RequestOptions;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.zip.GZIPOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 9 item 7: random, truncated, mis-framed, doubled and mutated request bodies across every method, sent as raw
 * HTTP/2 gRPC requests with a valid token (so they reach decoding and validation). Every answer must be a typed gRPC
 * status (OK, or a known {@code orbitkv-error-reason}), the bodies that cannot be one valid message must be
 * MALFORMED_REQUEST, and afterwards the Manager is healthy, a real query works, and nothing is held.
 * The seed is printed on failure; rerun one with {@code -Dorbitkv.fuzz.seed=N}.
 */
@Timeout(180)
class MalformedRequestFuzzIT {
    static final int REQUESTS = 10_000;
    static final int IN_FLIGHT = 64;
    static final int PAGE = 4096;
    static final String SERVICE = "/orbitkv.engine.v1.EngineService/";

    @RegisterExtension
    final RunningManager running = new RunningManager().with("grpc.max-message", "64KiB")
            .with("session.quarantine-ms", "200").with("ssd.enabled", "false");

    /** What a body is made of; the first ones can only ever be MALFORMED_REQUEST. */
    enum Shape {
        TRUNCATED, FLAG_WITHOUT_ENCODING, TWO_MESSAGES, EMPTY, TRAILING_GARBAGE,
        RANDOM_BYTES, RANDOM_PAYLOAD, MUTATED, GZIP_GARBAGE, GZIP_VALID, GZIP_BOMB;

        boolean alwaysMalformed() {
            return ordinal() <= TRAILING_GARBAGE.ordinal() || this == GZIP_GARBAGE;
        }
    }

    record Answer(String method, Shape shape, int httpStatus, String grpcStatus, String reason) {}

    @Test
    void tenThousandBrokenBodiesAreEachAnsweredWithATypedStatusAndLeaveTheManagerHealthy() throws Exception {
        long seed = Long.getLong("orbitkv.fuzz.seed", System.nanoTime());
        try (OrbitKvClient client = running.unixClient()) {
            EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await();
            List<ByteString> hashes = PublishQueryRestoreIT.publish(session, "fuzz", 4);
            Map<String, Message> templates = templates(session, hashes);
            double malformedBefore = running.metric("orbitkv_rejections_total{reason=\"malformed_request\"}");
            Vertx vertx = Vertx.vertx();
            HttpClient http = vertx.createHttpClient(new HttpClientOptions().setProtocolVersion(HttpVersion.HTTP_2)
                    .setHttp2ClearTextUpgrade(false).setDefaultHost("127.0.0.1")
                    .setDefaultPort(running.manager().grpcTcpPort()), new PoolOptions().setHttp2MaxSize(2));
            List<Answer> answers = new ArrayList<>();
            long started = System.nanoTime();
            try {
                Random random = new Random(seed);
                List<String> methods = List.copyOf(templates.keySet());
                // -Dorbitkv.fuzz.shapes=GZIP_BOMB,EMPTY narrows a rerun to some shapes.
                List<Shape> shapes = System.getProperty("orbitkv.fuzz.shapes") == null ? List.of(Shape.values())
                        : Arrays.stream(System.getProperty("orbitkv.fuzz.shapes").split(",")).map(Shape::valueOf).toList();
                for (int sent = 0; sent < REQUESTS; sent += IN_FLIGHT) {
                    List<Future<Answer>> batch = new ArrayList<>();
                    List<String> sentNow = new ArrayList<>();
                    for (int i = 0; i < IN_FLIGHT && sent + i < REQUESTS; i++) {
                        String method = methods.get(random.nextInt(methods.size()));
                        Shape shape = shapes.get(random.nextInt(shapes.size()));
                        byte[] body = body(shape, templates.get(method).toByteArray(), random);
                        batch.add(send(http, method, shape, body));
                        sentNow.add(method + " " + shape + " " + HexFormat.of().formatHex(body, 0, Math.min(body.length, 48)));
                    }
                    try {
                        Future.join(batch).await(20, TimeUnit.SECONDS);
                    } catch (java.util.concurrent.TimeoutException e) {
                        // Fall through: the unanswered ones are named below.
                    }
                    for (int i = 0; i < batch.size(); i++) {
                        Future<Answer> answer = batch.get(i);
                        if (!answer.isComplete() || answer.failed()) {
                            throw new AssertionError("request " + (sent + i) + " (" + sentNow.get(i) + ") "
                                    + (answer.isComplete() ? "failed: " + answer.cause() : "was never answered"));
                        }
                        answers.add(answer.result());
                    }
                }
            } catch (Exception | AssertionError e) {
                throw new AssertionError("fuzz seed " + seed + ": " + e.getMessage(), e);
            } finally {
                http.close().await(10, TimeUnit.SECONDS);
                vertx.close().await(10, TimeUnit.SECONDS);
            }
            long elapsedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);

            Map<Shape, Integer> malformedByShape = new EnumMap<>(Shape.class);
            int expectedMalformed = 0;
            for (Answer answer : answers) {
                String context = "fuzz seed " + seed + ": " + answer;
                assertThat(answer.httpStatus()).as(context).isEqualTo(200);
                assertThat(answer.grpcStatus()).as(context).isNotNull();
                if (!answer.grpcStatus().equals("0")) {
                    assertThat(answer.reason()).as(context).isNotNull();
                    assertThat(ErrorReason.valueOf(answer.reason())).as(context).isNotEqualTo(ErrorReason.ERROR_REASON_UNSPECIFIED);
                }
                if (answer.shape().alwaysMalformed()) {
                    expectedMalformed++;
                    assertThat(answer.reason()).as(context).isEqualTo("MALFORMED_REQUEST");
                    assertThat(answer.grpcStatus()).as(context).isEqualTo("3"); // INVALID_ARGUMENT
                }
                if (answer.shape() == Shape.GZIP_BOMB) {
                    assertThat(answer.reason()).as(context).isEqualTo("OVERSIZED_REQUEST");
                }
                if ("MALFORMED_REQUEST".equals(answer.reason())) {
                    malformedByShape.merge(answer.shape(), 1, Integer::sum);
                }
            }
            assertThat(answers).hasSize(REQUESTS);
            assertThat(running.metric("orbitkv_rejections_total{reason=\"malformed_request\"}") - malformedBefore)
                    .as("every malformed body is counted").isGreaterThanOrEqualTo(expectedMalformed);
            System.out.printf("fuzz seed %d: %d requests in %d ms; MALFORMED_REQUEST by shape %s%n", seed, REQUESTS,
                    elapsedMillis, malformedByShape);

            // Still healthy: /health is UP, and a fresh engine publishes, queries and releases as usual.
            assertThat(running.health()).contains("\"UP\"");
            try {
                session.unregister().await();
            } catch (Exception alreadyGone) {
                // A mutated Unregister may have matched the session: then it is gone already, with everything it held.
            }
            session.close();
            try (EngineSession fresh = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
                QueryReply ready = fresh.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build())).await();
                assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
                assertThat(ready.getReadyBlocks()).isEqualTo(4);
                assertThat(fresh.release(ready.getLease().getLeaseId()).await().getLeaseValid()).isTrue();
            }
            await().atMost(Duration.ofSeconds(20)).until(() ->
                    running.metric("orbitkv_leases_active") == 0.0 && running.metric("orbitkv_images_pinned") == 0.0
                            && running.metric("orbitkv_queries_outstanding") == 0.0
                            && running.metric("orbitkv_quarantine_bytes") == 0.0);
        }
    }

    /** One realistic request per method, for the current session, to truncate and mutate. */
    static Map<String, Message> templates(EngineSession session, List<ByteString> hashes) {
        SessionRef ref = session.session();
        PageKey page = PageKey.newBuilder().setGroupId(0).setBlockHash(hashes.getFirst()).build();
        Map<String, Message> t = new LinkedHashMap<>();
        t.put("Register", RegisterRequest.newBuilder().setIdentity(session.identity()).setRole(InstanceRole.DECODE).build());
        t.put("Unregister", UnregisterRequest.newBuilder().setSession(ref).build());
        t.put("Heartbeat", HeartbeatRequest.newBuilder().setSession(ref).build());
        t.put("AllocatePublish", AllocatePublishRequest.newBuilder().setSession(ref).setNamespaceId(session.namespace())
                .addPages(page).build());
        t.put("SealPublish", SealPublishRequest.newBuilder().setSession(ref).setPublishId(1).addCrc32C(7)
                .addWritten(PoolDescriptor.newBuilder().setRegionId(1).setOffset(4096).setLength(PAGE).setGeneration(1)).build());
        t.put("AbortPublish", AbortPublishRequest.newBuilder().setSession(ref).setPublishId(1).build());
        t.put("SubmitQuery", SubmitQueryRequest.newBuilder().setSession(ref).setNamespaceId(session.namespace())
                .addGroups(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes)).build());
        t.put("SubmitDemand", SubmitDemandRequest.newBuilder().setSession(ref).setDemand(Demand.newBuilder()
                .setRequestId("r").setRevision(1).setOperationId(9).setNamespaceId(session.namespace())
                .setPageSizeTokens(16).setSelectedEndTokens(64)
                .addGroups(GroupDemand.newBuilder().setGroupId(0).addAllBlockHashes(hashes)
                        .addRanges(BlockSpan.newBuilder().setStart(0).setEnd(4)))
                .setMaxWaitMicros(1000)).build());
        t.put("PollQuery", PollQueryRequest.newBuilder().setSession(ref).setTicket(1).build());
        t.put("CancelQuery", CancelQueryRequest.newBuilder().setSession(ref).setTicket(1).build());
        t.put("ReleaseLease", ReleaseLeaseRequest.newBuilder().setSession(ref).setLeaseId(1).build());
        t.put("Stats", StatsRequest.newBuilder().setSession(ref).build());
        t.put("Ping", PingRequest.getDefaultInstance());
        return t;
    }

    static byte[] frame(int flag, byte[] payload, int declaredLength) {
        return ByteBuffer.allocate(5 + payload.length).put((byte) flag).putInt(declaredLength).put(payload).array();
    }

    static byte[] frame(byte[] payload) {
        return frame(0, payload, payload.length);
    }

    static byte[] body(Shape shape, byte[] template, Random random) throws Exception {
        return switch (shape) {
            case TRUNCATED -> {
                byte[] whole = frame(template);
                yield Arrays.copyOf(whole, random.nextInt(whole.length));
            }
            case FLAG_WITHOUT_ENCODING -> frame(random.nextBoolean() ? 1 : 2 + random.nextInt(254), template, template.length);
            case TWO_MESSAGES -> concat(frame(template), frame(template));
            case EMPTY -> new byte[0];
            case TRAILING_GARBAGE -> concat(frame(template), Arrays.copyOf(frame(template), 1 + random.nextInt(4)));
            case RANDOM_BYTES -> bytes(random, random.nextInt(48));
            case RANDOM_PAYLOAD -> frame(bytes(random, random.nextInt(160)));
            case MUTATED -> {
                byte[] mutated = template.clone();
                for (int i = 0, flips = 1 + random.nextInt(4); i < flips && mutated.length > 0; i++) {
                    mutated[random.nextInt(mutated.length)] ^= (byte) (1 + random.nextInt(255));
                }
                yield frame(mutated);
            }
            case GZIP_GARBAGE -> {
                byte[] garbage = bytes(random, 1 + random.nextInt(64));
                garbage[0] = 0; // never the gzip magic
                yield frame(1, garbage, garbage.length);
            }
            case GZIP_VALID -> {
                byte[] compressed = gzip(template);
                yield frame(1, compressed, compressed.length);
            }
            case GZIP_BOMB -> {
                byte[] compressed = gzip(new byte[256 * 1024]); // inflates to 4 x grpc.max-message
                yield frame(1, compressed, compressed.length);
            }
        };
    }

    static byte[] gzip(byte[] data) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (GZIPOutputStream gz = new GZIPOutputStream(out)) {
            gz.write(data);
        }
        return out.toByteArray();
    }

    static byte[] bytes(Random random, int n) {
        byte[] b = new byte[n];
        random.nextBytes(b);
        return b;
    }

    static byte[] concat(byte[] a, byte[] b) {
        byte[] c = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, c, a.length, b.length);
        return c;
    }

    Future<Answer> send(HttpClient http, String method, Shape shape, byte[] body) {
        RequestOptions options = new RequestOptions().setMethod(HttpMethod.POST).setURI(SERVICE + method)
                .setIdleTimeout(20_000)
                .putHeader("content-type", "application/grpc").putHeader("te", "trailers")
                .putHeader("x-orbitkv-token", running.manager().token());
        if (shape.name().startsWith("GZIP")) {
            options.putHeader("grpc-encoding", "gzip");
        }
        // The body is read in the same callback that gets the response (not one compose later): a trailers-only
        // answer may have ended by then, and its body would never be delivered.
        return http.request(options).compose(request -> request.send(Buffer.buffer(body))
                .compose(response -> response.body().map(ignored -> answer(method, shape, response))));
    }

    static Answer answer(String method, Shape shape, HttpClientResponse response) {
        String status = response.trailers().get("grpc-status");
        String reason = response.trailers().get("orbitkv-error-reason");
        if (status == null) { // a trailers-only answer carries everything in its headers
            status = response.headers().get("grpc-status");
            reason = response.headers().get("orbitkv-error-reason");
        }
        return new Answer(method, shape, response.statusCode(), status, reason);
    }
}
