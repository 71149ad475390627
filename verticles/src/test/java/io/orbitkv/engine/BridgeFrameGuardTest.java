package io.orbitkv.engine;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.orbitkv.protocol.engine.EngineServiceGrpcService;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.admission.AdmissionProxy;
import io.orbitkv.common.Ticker;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Vertx;
import io.vertx.core.json.JsonObject;
import io.vertx.ext.bridge.BridgeOptions;
import io.vertx.ext.bridge.PermittedOptions;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The bridge's frame guard on its own (netty's EmbeddedChannel, no event bus): what it forwards to the bridge, what it
 * refuses and how, the per-connection outstanding limit, oversized frames skipped without buffering, and reading
 * paused while replies are not being read.
 */
class BridgeFrameGuardTest {
    static final String TOKEN = "0123456789abcdef0123456789abcdef";
    static final String PING = "orbitkv.engine.v1.EngineService/Ping";
    static final String STATS = "orbitkv.engine.v1.EngineService/Stats";

    SimpleMeterRegistry registry;
    BridgeMetrics metrics;
    AtomicInteger closes;
    BridgeFrameGuard guard;
    EmbeddedChannel channel;

    @BeforeEach
    void setUp() {
        registry = new SimpleMeterRegistry();
        metrics = new BridgeMetrics(registry, new EngineMetrics(registry));
        closes = new AtomicInteger();
        guard = new BridgeFrameGuard(7, new EngineAuthenticator(TOKEN, Set.of(0)), Set.of(PING, STATS), 1024, 3, metrics,
                closes::incrementAndGet);
        channel = new EmbeddedChannel();
        channel.pipeline().addLast("vertx", new ChannelInboundHandlerAdapter());
        guard.install(channel.pipeline(), "vertx");
    }

    static JsonObject send(String address, String replyAddress) {
        return new JsonObject().put("type", "send").put("address", address).put("replyAddress", replyAddress)
                .put("headers", new JsonObject().put("x-orbitkv-token", TOKEN)).put("body", "");
    }

    void write(JsonObject frame) {
        channel.writeInbound(BridgeFrameGuard.encode(frame));
    }

    /** What the guard passed on to the bridge (frames in the bridge's framing), decoded. */
    List<JsonObject> forwarded() {
        List<JsonObject> frames = new ArrayList<>();
        for (ByteBuf buf; (buf = channel.readInbound()) != null; ) {
            frames.add(decode(buf));
        }
        return frames;
    }

    /** What the guard answered the client itself. */
    List<JsonObject> answered() {
        List<JsonObject> frames = new ArrayList<>();
        for (ByteBuf buf; (buf = channel.readOutbound()) != null; ) {
            frames.add(decode(buf));
        }
        return frames;
    }

    static JsonObject decode(ByteBuf buf) {
        try {
            int length = buf.readInt();
            assertThat(buf.readableBytes()).isEqualTo(length);
            return new JsonObject(buf.toString(StandardCharsets.UTF_8));
        } finally {
            buf.release();
        }
    }

    double rejections(ErrorReason reason) {
        return registry.get("orbitkv.bridge.rejections").tag("reason", reason.name().toLowerCase()).counter().count();
    }

    @Test
    void anAdmittedFrameReachesTheBridgeWithOnlyTheTrustedConnectionHeader() {
        JsonObject frame = send(STATS, "r-1").put("body", "CgIIAQ==").put("extra", "ignored");
        frame.getJsonObject("headers").put("timeout", "not a number").put("codecName", "nope").put("localOnly", "x");
        write(frame);
        assertThat(answered()).isEmpty();
        assertThat(forwarded()).containsExactly(new JsonObject().put("type", "send").put("address", STATS)
                .put("replyAddress", "r-1").put("headers", new JsonObject().put(BridgeEngineDoor.CONNECTION_HEADER, "7"))
                .put("body", "CgIIAQ=="));
        assertThat(guard.outstanding()).isEqualTo(1);
        assertThat(metrics.outstanding.get()).isEqualTo(1);
    }

    @Test
    void theOutstandingLimitRefusesTypedAndReopensWhenAnOperationFinishes() {
        for (int i = 1; i <= 3; i++) {
            write(send(PING, "r-" + i));
        }
        assertThat(forwarded()).hasSize(3);
        write(send(PING, "r-4"));
        assertThat(forwarded()).isEmpty();
        assertThat(answered()).singleElement().satisfies(answer -> {
            assertThat(answer.getString("type")).isEqualTo("err");
            assertThat(answer.getString("address")).isEqualTo("r-4");
            assertThat(answer.getString("sourceAddress")).isEqualTo(PING);
            assertThat(answer.getInteger("failureCode")).isEqualTo(ErrorReason.TOO_MANY_OUTSTANDING_VALUE);
            assertThat(answer.getString("failureType")).isEqualTo("RECIPIENT_FAILURE");
            assertThat(answer.getString("message")).startsWith("TOO_MANY_OUTSTANDING: this connection has 3 requests");
        });
        assertThat(rejections(ErrorReason.TOO_MANY_OUTSTANDING)).isEqualTo(1.0);
        guard.requestFinished();
        write(send(PING, "r-5"));
        assertThat(forwarded()).hasSize(1);
        assertThat(guard.outstanding()).isEqualTo(3);
        // Closing forgets the connection's requests: the door-wide gauge returns to zero, late completions are no-ops.
        channel.close();
        assertThat(closes.get()).isEqualTo(1);
        assertThat(metrics.outstanding.get()).isZero();
        guard.requestFinished();
        assertThat(metrics.outstanding.get()).isZero();
    }

    @Test
    void theTokenIsCheckedFirstOnEveryFrame() {
        JsonObject noToken = send("orbitkv.storage.stats", "r-1").put("headers", new JsonObject());
        JsonObject wrong = send(PING, "r-2").put("headers", new JsonObject().put("x-orbitkv-token", TOKEN + "0"));
        JsonObject ping = new JsonObject().put("type", "ping");
        JsonObject publish = send(PING, "r-3").put("type", "publish").put("headers", new JsonObject());
        for (JsonObject frame : List.of(noToken, wrong, ping, publish)) {
            write(frame);
        }
        assertThat(forwarded()).isEmpty();
        assertThat(answered()).hasSize(4).allSatisfy(answer -> {
            assertThat(answer.getInteger("failureCode")).isEqualTo(ErrorReason.UNAUTHENTICATED_CALLER_VALUE);
            assertThat(answer.getString("message")).isEqualTo("UNAUTHENTICATED_CALLER: missing or wrong engine token");
        });
        assertThat(rejections(ErrorReason.UNAUTHENTICATED_CALLER)).isEqualTo(4.0);
        write(ping.put("headers", new JsonObject().put("x-orbitkv-token", TOKEN)));
        assertThat(forwarded()).containsExactly(new JsonObject().put("type", "ping"));
    }

    @Test
    void framesThatAreNotEngineCallsAreRefusedToTheirReplyAddress() {
        List<JsonObject> frames = Stream.of(
                send("orbitkv.storage.stats", "a-1"),
                send("orbitkv.engine.v1.EngineService/Ping2", "a-2"),
                send(PING, "a-3").put("type", "register"),
                send(PING, "a-4").put("type", "publish"),
                send(PING, "a-5").put("type", null),
                send(PING, "a-6").put("address", 12),
                send(PING, "a-7")).toList();
        frames.get(6).remove("body");
        for (JsonObject frame : frames) {
            write(frame);
        }
        assertThat(forwarded()).isEmpty();
        List<JsonObject> answers = answered();
        assertThat(answers).extracting(a -> a.getString("address"))
                .containsExactly("a-1", "a-2", "a-3", "a-4", "a-5", "a-6", "a-7");
        assertThat(answers).allSatisfy(a -> assertThat(a.getInteger("failureCode")).isEqualTo(ErrorReason.MALFORMED_REQUEST_VALUE));
        assertThat(answers.get(0).getString("message")).contains("no engine call at address 'orbitkv.storage.stats'");
        assertThat(answers.get(2).getString("message")).contains("frame type 'register' is not served");
        assertThat(answers.get(4).getString("message")).contains("frame type missing is not served");
        assertThat(answers.get(5).getString("message")).contains("no engine call at a missing address");
        assertThat(answers.get(6).getString("message")).contains("the request carries no message");
        assertThat(guard.outstanding()).isZero();
    }

    @Test
    void framesWithoutAReadableReplyAddressAreRefusedWithoutOne() {
        channel.writeInbound(Unpooled.buffer().writeInt(3).writeBytes("{{{".getBytes(StandardCharsets.UTF_8)));
        write(send(PING, "x".repeat(BridgeFrameGuard.MAX_REPLY_ADDRESS_CHARS + 1)));
        write(send(PING, ""));
        assertThat(forwarded()).isEmpty();
        assertThat(answered()).hasSize(3).allSatisfy(answer -> {
            assertThat(answer.containsKey("address")).isFalse();
            assertThat(answer.getInteger("failureCode")).isEqualTo(ErrorReason.MALFORMED_REQUEST_VALUE);
        });
    }

    @Test
    void anOversizedFrameIsRefusedOnItsLengthAndSkippedWithoutBuffering() {
        // 1024 bytes of JSON at most; this frame announces 4096 and arrives in pieces, then a good frame follows.
        ByteBuf oversized = Unpooled.buffer().writeInt(4096).writeBytes(new byte[100]);
        channel.writeInbound(oversized);
        assertThat(answered()).singleElement().satisfies(answer -> {
            assertThat(answer.getInteger("failureCode")).isEqualTo(ErrorReason.OVERSIZED_REQUEST_VALUE);
            assertThat(answer.getString("message")).isEqualTo(
                    "OVERSIZED_REQUEST: a frame is longer than bridge.max-frame (1024 bytes of JSON)");
        });
        channel.writeInbound(Unpooled.wrappedBuffer(new byte[3996]));
        write(send(PING, "after"));
        assertThat(forwarded()).extracting(f -> f.getString("replyAddress")).containsExactly("after");
        assertThat(channel.isActive()).isTrue();
        assertThat(rejections(ErrorReason.OVERSIZED_REQUEST)).isEqualTo(1.0);
    }

    @Test
    void readingPausesWhileTheClientDoesNotTakeItsReplies() {
        channel.config().setWriteBufferLowWaterMark(1024);
        channel.config().setWriteBufferHighWaterMark(8 * 1024);
        assertThat(channel.config().isAutoRead()).isTrue();
        channel.write(Unpooled.wrappedBuffer(new byte[16 * 1024])); // written, not yet flushed to the client
        assertThat(channel.isWritable()).isFalse();
        assertThat(channel.config().isAutoRead()).isFalse();
        assertThat(metrics.readsPaused.count()).isEqualTo(1.0);
        channel.flush();
        assertThat(channel.isWritable()).isTrue();
        assertThat(channel.config().isAutoRead()).isTrue();
        ((ByteBuf) channel.readOutbound()).release();
    }

    @Test
    void theBridgePermitsExactlyTheEngineCallsInboundAndNothingOutbound() {
        Vertx vertx = Vertx.vertx();
        try {
            EngineOperations operations = new EngineOperations(new EngineSettings().pool(Path.of("/unused"), 1 << 20),
                    Ticker.SYSTEM, new AdmissionProxy(vertx), new StorageProxy(vertx), new EngineMetrics(registry));
            BridgeOptions options = BridgeEngineDoor.options(EngineCall.all(operations));
            assertThat(options.getInboundPermitteds()).extracting(PermittedOptions::getAddressRegex).containsOnlyNulls();
            // Every rpc of engine.proto's service, at its gRPC full name, and nothing else.
            assertThat(options.getInboundPermitteds()).extracting(PermittedOptions::getAddress).containsExactlyElementsOf(
                    EngineServiceGrpcService.SERVICE_DESCRIPTOR.getMethods().stream()
                            .map(m -> "orbitkv.engine.v1.EngineService/" + m.getName()).toList());
            assertThat(options.getOutboundPermitteds()).isEmpty();
        } finally {
            vertx.close();
        }
    }
}
