package io.orbitkv.engine;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelPipeline;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import io.netty.handler.codec.TooLongFrameException;
import io.orbitkv.common.OrbitException;
import io.orbitkv.engine.EngineAuthenticator.Caller;
import io.orbitkv.protocol.engine.ErrorReason;
import io.vertx.core.json.JsonObject;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Set;

/**
 * The front of one event-bus bridge connection: every frame a client sends passes here before the Vert.x bridge
 * parses it. Frames are a 4-byte big-endian length and that many bytes of UTF-8 JSON, as the bridge defines them.
 *
 * <p>Design note (why a guard in front of the bridge): vertx-tcp-eventbus-bridge 5.0.7's parser buffers whatever
 * length a frame announces (no limit), logs and drops a frame that is not JSON (the client hears nothing), throws out
 * of the socket handler on a missing or unknown {@code type}, and copies every client header into the event-bus
 * delivery options ({@code timeout}, {@code codecName}, {@code localOnly} included). So each frame is checked here,
 * in this order, and refused with a typed failure frame (see {@link #failure}) that the client can match to its
 * request through the reply address whenever the frame had a readable one:
 * <ol>
 *   <li>length: more than {@code bridge.max-frame} is OVERSIZED_REQUEST; the decoder in front
 *       ({@link LengthFieldBasedFrameDecoder}, fail-fast) then discards the frame's bytes without buffering them and
 *       the connection goes on with the next frame;</li>
 *   <li>a JSON object, else MALFORMED_REQUEST;</li>
 *   <li>the engine token in {@code headers.x-orbitkv-token}, through {@link EngineAuthenticator} (constant-time),
 *       on every frame, before anything else about the frame is looked at: else UNAUTHENTICATED_CALLER;</li>
 *   <li>{@code type}: {@code ping} (answered {@code pong} by the bridge) or {@code send} with a reply address;
 *       publish, register and unregister are refused (the engine API is request/reply; nothing flows outbound);</li>
 *   <li>{@code address}: one of the engine calls (the same list as the bridge's inbound permitted list, which the
 *       bridge enforces again), else MALFORMED_REQUEST; internal role addresses are never reachable;</li>
 *   <li>at most {@code bridge.max-outstanding-per-connection} requests of this connection in the Manager, else
 *       TOO_MANY_OUTSTANDING.</li>
 * </ol>
 * An admitted frame is re-encoded with only the fields the bridge needs and one trusted header naming this connection
 * ({@value BridgeEngineDoor#CONNECTION_HEADER}); every client header is dropped, the token included. The bridge
 * therefore parses exactly the JSON this guard checked (no parser differential) and never sees client options.
 *
 * <p>Design note (replies a client does not read): while the channel is not writable (its outbound buffer is over
 * netty's high-water mark) the guard stops reading the connection (auto-read off) and resumes when it drains, so a
 * client that pipelines requests without reading replies cannot grow the Manager's memory.
 *
 * <p>Confined to the connection's event loop, which is the engine role's (the door's server is bound on its context):
 * {@link #requestFinished} is called from the operations' completions on that loop.
 */
final class BridgeFrameGuard extends ChannelInboundHandlerAdapter {
    static final String TOKEN_HEADER = GrpcEngineDoor.TOKEN_HEADER;
    static final String FRAMES_HANDLER = "orbitkv-bridge-frames";
    static final String GUARD_HANDLER = "orbitkv-bridge-guard";
    /** Longest reply address accepted (it is echoed in the answer). */
    static final int MAX_REPLY_ADDRESS_CHARS = 256;
    /** The failure type every typed refusal carries, before or after dispatch: the Manager refused the request. */
    static final String FAILURE_TYPE = "RECIPIENT_FAILURE";

    private final long connectionId;
    private final EngineAuthenticator authenticator;
    private final Set<String> addresses;
    private final long maxFrameBytes;
    private final int maxOutstanding;
    private final BridgeMetrics metrics;
    private final Runnable onClose;
    private int outstanding;
    private boolean closed;

    BridgeFrameGuard(long connectionId, EngineAuthenticator authenticator, Set<String> addresses, long maxFrameBytes,
                     int maxOutstanding, BridgeMetrics metrics, Runnable onClose) {
        this.connectionId = connectionId;
        this.authenticator = authenticator;
        this.addresses = Set.copyOf(addresses);
        this.maxFrameBytes = maxFrameBytes;
        this.maxOutstanding = maxOutstanding;
        this.metrics = metrics;
        this.onClose = onClose;
    }

    /** Puts the length-prefix decoder and this guard, in that order, in front of the handler named {@code before}. */
    void install(ChannelPipeline pipeline, String before) {
        pipeline.addBefore(before, FRAMES_HANDLER, frameDecoder(maxFrameBytes));
        pipeline.addBefore(before, GUARD_HANDLER, this);
    }

    /** Splits the stream into frames of at most {@code maxFrameBytes} of JSON (the length prefix stripped). */
    static LengthFieldBasedFrameDecoder frameDecoder(long maxFrameBytes) {
        return new LengthFieldBasedFrameDecoder(ByteOrder.BIG_ENDIAN, Math.toIntExact(maxFrameBytes + 4), 0, 4, 0, 4, true);
    }

    long connectionId() {
        return connectionId;
    }

    int outstanding() {
        return outstanding;
    }

    boolean isOpen() {
        return !closed;
    }

    /** An admitted request's operation has completed (its answer is on its way). */
    void requestFinished() {
        if (!closed && outstanding > 0) {
            outstanding--;
            metrics.outstanding.decrementAndGet();
        }
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (!(msg instanceof ByteBuf frame)) {
            ctx.fireChannelRead(msg);
            return;
        }
        JsonObject json;
        try {
            json = new JsonObject(frame.toString(StandardCharsets.UTF_8));
        } catch (RuntimeException e) {
            refuse(ctx, null, null, new OrbitException(ErrorReason.MALFORMED_REQUEST, "a frame is not a JSON object: "
                    + shortened(String.valueOf(e.getMessage()))));
            return;
        } finally {
            frame.release();
        }
        onFrame(ctx, json);
    }

    private void onFrame(ChannelHandlerContext ctx, JsonObject json) {
        String replyAddress = shortString(json.getValue("replyAddress"));
        Object rawAddress = json.getValue("address");
        String address = shortString(rawAddress);
        Object headers = json.getValue("headers");
        Object token = headers instanceof JsonObject h ? h.getValue(TOKEN_HEADER) : null;
        try {
            authenticator.check(Caller.withoutPeer(token instanceof String s ? s : null));
        } catch (OrbitException refused) {
            refuse(ctx, replyAddress, address, refused);
            return;
        }
        Object type = json.getValue("type");
        if ("ping".equals(type)) {
            forward(ctx, new JsonObject().put("type", "ping"));
            return;
        }
        if (!"send".equals(type)) {
            refuse(ctx, replyAddress, address, new OrbitException(ErrorReason.MALFORMED_REQUEST, "frame type "
                    + (type instanceof String s ? "'" + shortened(s) + "'" : "missing") + " is not served: engine calls"
                    + " are 'send' frames with a replyAddress ('ping' is answered 'pong')"));
            return;
        }
        if (replyAddress == null) {
            refuse(ctx, null, address, new OrbitException(ErrorReason.MALFORMED_REQUEST, "a send frame needs a"
                    + " replyAddress (a string of 1 to " + MAX_REPLY_ADDRESS_CHARS + " characters): engine calls are"
                    + " request/reply"));
            return;
        }
        if (address == null || !addresses.contains(address)) {
            refuse(ctx, replyAddress, address, new OrbitException(ErrorReason.MALFORMED_REQUEST, "no engine call at "
                    + (rawAddress instanceof String a ? "address '" + shortened(a) + "'" : "a missing address")
                    + ": the bridge serves engine.proto's calls at their gRPC names, e.g. "
                    + "orbitkv.engine.v1.EngineService/Ping"));
            return;
        }
        if (!json.containsKey("body")) {
            refuse(ctx, replyAddress, address, new OrbitException(ErrorReason.MALFORMED_REQUEST,
                    "the request carries no message (body: the base64 of the protobuf request, \"\" when empty)"));
            return;
        }
        if (outstanding >= maxOutstanding) {
            refuse(ctx, replyAddress, address, new OrbitException(ErrorReason.TOO_MANY_OUTSTANDING, "this connection"
                    + " has " + outstanding + " requests in the Manager already (bridge.max-outstanding-per-connection)"));
            return;
        }
        outstanding++;
        metrics.outstanding.incrementAndGet();
        forward(ctx, new JsonObject().put("type", "send").put("address", address).put("replyAddress", replyAddress)
                .put("headers", new JsonObject().put(BridgeEngineDoor.CONNECTION_HEADER, Long.toString(connectionId)))
                .put("body", json.getValue("body")));
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        if (cause instanceof TooLongFrameException) {
            // Fail-fast: the decoder has only read the length; it now skips the frame's bytes and reads the next one.
            refuse(ctx, null, null, new OrbitException(ErrorReason.OVERSIZED_REQUEST, "a frame is longer than"
                    + " bridge.max-frame (" + maxFrameBytes + " bytes of JSON)"));
            return;
        }
        ctx.fireExceptionCaught(cause);
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        boolean writable = ctx.channel().isWritable();
        if (!writable) {
            metrics.readsPaused.increment();
        }
        ctx.channel().config().setAutoRead(writable);
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        close();
        ctx.fireChannelInactive();
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        close();
    }

    /** Forgets this connection's requests (their answers have nowhere to go) and tells the door, once. */
    private void close() {
        if (closed) {
            return;
        }
        closed = true;
        metrics.outstanding.addAndGet(-outstanding);
        outstanding = 0;
        onClose.run();
    }

    private void refuse(ChannelHandlerContext ctx, String replyAddress, String address, OrbitException refusal) {
        metrics.rejected(refusal.reason());
        ctx.writeAndFlush(encode(failure(replyAddress, address, refusal.reason().getNumber(), refusal.getMessage())));
    }

    private static void forward(ChannelHandlerContext ctx, JsonObject frame) {
        ctx.fireChannelRead(encode(frame));
    }

    /**
     * A failure frame as the bridge writes one for a failed request ({@code FrameHelper.sendErrFrame}): the reply
     * address as {@code address} (absent when the frame had none readable), the request's address as
     * {@code sourceAddress}, the ErrorReason number as {@code failureCode} and {@code "REASON: explanation"} as
     * {@code message}.
     */
    static JsonObject failure(String replyAddress, String address, int failureCode, String message) {
        JsonObject frame = new JsonObject().put("type", "err");
        if (replyAddress != null) {
            frame.put("address", replyAddress);
        }
        if (address != null) {
            frame.put("sourceAddress", address);
        }
        return frame.put("failureCode", failureCode).put("failureType", FAILURE_TYPE).put("message", message);
    }

    /** The bridge's framing: a 4-byte big-endian length, then the JSON in UTF-8. */
    static ByteBuf encode(JsonObject frame) {
        return Unpooled.wrappedBuffer(frameBytes(frame));
    }

    static byte[] frameBytes(JsonObject frame) {
        byte[] json = frame.encode().getBytes(StandardCharsets.UTF_8);
        byte[] bytes = new byte[4 + json.length];
        ByteBuffer.wrap(bytes).putInt(json.length).put(json);
        return bytes;
    }

    private static String shortString(Object value) {
        return value instanceof String s && !s.isEmpty() && s.length() <= MAX_REPLY_ADDRESS_CHARS ? s : null;
    }

    private static String shortened(String text) {
        return text.length() <= 120 ? text : text.substring(0, 120) + "...";
    }
}
