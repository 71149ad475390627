package io.orbitkv.engine;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.LocalCodec;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.model.ProducerRef;
import io.orbitkv.model.ProducerState;
import io.orbitkv.model.StateKey;
import io.orbitkv.protocol.peer.ProducerPage;
import io.orbitkv.protocol.peer.ProducerStatusReply;
import io.orbitkv.protocol.peer.ProducerStatusRequest;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.Message;
import io.vertx.core.eventbus.MessageConsumer;
import java.util.ArrayList;
import java.util.List;

/**
 * Answers {@link ProducerProxy#status}: for a producer registered here from {@link ProducerSeals}; for one on another
 * Manager by asking that Manager over the clustered event bus ({@code peer.proto} ProducerStatusRequest to
 * {@code orbitkv.engine.producer-status.<member>}), which answers from its own table. With a member id this service
 * also answers other Managers about its own producers.
 *
 * <p>Design note: an ask holds nothing on either side (no lease, credit or pin: the pages move later, over the peer
 * route, once the consumer's demand is prepared). A Manager that does not answer within
 * {@link #REMOTE_TIMEOUT_MILLIS} (down, partitioned, not yet joined) is WAITING, not ENDED: unknown stays unknown, and
 * the consumer's waiting budget turns it into a MISS. Runs on the engine role's loop.
 */
final class ProducerStatusService {
    static final String REMOTE_PREFIX = ProducerProxy.STATUS + ".";
    static final long REMOTE_TIMEOUT_MILLIS = 1000;

    private final Vertx vertx;
    private final ProducerSeals seals;
    private final String memberId;
    private final int maxPages;
    private final Counter remoteFailures;
    private final Counter refused;
    private MessageConsumer<Buffer> remote;

    ProducerStatusService(Vertx vertx, ProducerSeals seals, String memberId, int maxPages, MeterRegistry registry) {
        this.vertx = vertx;
        this.seals = seals;
        this.memberId = memberId;
        this.maxPages = maxPages;
        this.remoteFailures = Counter.builder("orbitkv.producer.status.failures")
                .description("Asks to a producer's Manager that got no answer (counted WAITING)").register(registry);
        this.refused = Counter.builder("orbitkv.producer.status.refused")
                .description("Producer status asks from other Managers refused as malformed").register(registry);
    }

    /** Serves the local proxy and, with a member id, other Managers; on the engine role's context. */
    void serve() {
        LocalCodec.register(vertx, ProducerProxy.MESSAGE_TYPES.toArray(Class<?>[]::new));
        RoleProxies.<ProducerProxy.Status, ProducerState>serve(vertx.eventBus(), ProducerProxy.STATUS,
                c -> status(c.producer(), c.keys()));
        if (memberId != null) {
            remote = vertx.eventBus().consumer(REMOTE_PREFIX + memberId, this::onRemoteAsk);
        }
    }

    Future<Void> close() {
        return remote == null ? Future.succeededFuture() : remote.unregister();
    }

    Future<ProducerState> status(ProducerRef producer, List<StateKey> keys) {
        if (producer.local() || producer.member().equals(memberId)) {
            return Future.succeededFuture(seals.status(producer.instanceId(), producer.sessionEpoch(),
                    producer.requestId(), keys));
        }
        if (memberId == null) {
            return Future.succeededFuture(ProducerState.WAITING); // refused at submit; never asked without a cluster
        }
        ProducerStatusRequest.Builder ask = ProducerStatusRequest.newBuilder().setMemberId(memberId)
                .setInstanceId(producer.instanceId()).setSessionEpoch(producer.sessionEpoch())
                .setRequestId(producer.requestId());
        if (!keys.isEmpty()) {
            ask.setNamespace(ByteString.copyFrom(keys.getFirst().namespace()));
        }
        for (StateKey key : keys) {
            ask.addPages(ProducerPage.newBuilder().setGroupId(key.groupId())
                    .setBlockHash(ByteString.copyFrom(key.blockHash())));
        }
        return vertx.eventBus().<Buffer>request(REMOTE_PREFIX + producer.member(), Buffer.buffer(ask.build().toByteArray()),
                        new DeliveryOptions().setSendTimeout(REMOTE_TIMEOUT_MILLIS))
                .map(reply -> fromWire(reply.body()))
                .otherwise(failure -> {
                    remoteFailures.increment();
                    return ProducerState.WAITING;
                });
    }

    private static ProducerState fromWire(Buffer body) {
        try {
            return switch (ProducerStatusReply.parseFrom(body.getBytes()).getState()) {
                case SEALED -> ProducerState.SEALED;
                case ENDED -> ProducerState.ENDED;
                default -> ProducerState.WAITING;
            };
        } catch (InvalidProtocolBufferException e) {
            return ProducerState.WAITING;
        }
    }

    private void onRemoteAsk(Message<Buffer> message) {
        ProducerStatusRequest ask;
        try {
            ask = ProducerStatusRequest.parseFrom(message.body().getBytes());
        } catch (InvalidProtocolBufferException e) {
            refused.increment();
            message.fail(2, "MALFORMED_REQUEST: not a ProducerStatusRequest");
            return;
        }
        if (ask.getPagesCount() > maxPages || ask.getNamespace().size() != StateKey.NAMESPACE_BYTES) {
            refused.increment();
            message.fail(2, "MALFORMED_REQUEST: a namespace of " + StateKey.NAMESPACE_BYTES + " bytes and at most "
                    + maxPages + " pages");
            return;
        }
        byte[] namespace = ask.getNamespace().toByteArray();
        List<StateKey> keys = new ArrayList<>(ask.getPagesCount());
        for (ProducerPage page : ask.getPagesList()) {
            if (page.getBlockHash().isEmpty() || page.getBlockHash().size() > StateKey.MAX_BLOCK_HASH_BYTES) {
                refused.increment();
                message.fail(2, "MALFORMED_REQUEST: a block hash of 1.." + StateKey.MAX_BLOCK_HASH_BYTES + " bytes");
                return;
            }
            keys.add(StateKey.of(namespace, page.getGroupId(), page.getBlockHash().toByteArray()));
        }
        ProducerState state = seals.status(ask.getInstanceId(), ask.getSessionEpoch(), ask.getRequestId(), keys);
        message.reply(Buffer.buffer(ProducerStatusReply.newBuilder().setState(switch (state) {
            case SEALED -> ProducerStatusReply.State.SEALED;
            case ENDED -> ProducerStatusReply.State.ENDED;
            case WAITING -> ProducerStatusReply.State.WAITING;
        }).build().toByteArray()));
    }
}
