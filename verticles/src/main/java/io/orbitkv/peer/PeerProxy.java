package io.orbitkv.peer;

import io.orbitkv.common.RoleProxies;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.StateKey;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.EventBus;
import io.vertx.core.eventbus.ReplyException;
import io.vertx.core.eventbus.ReplyFailure;
import java.time.Duration;
import java.util.List;

/**
 * Typed proxy of the peer role's requester (its source side answers other Managers over gRPC, not local callers).
 * Failures are {@link PeerException}s: {@link PeerException#beforePayload()} = nothing moved, the caller may replan
 * (another peer, local SSD) or answer MISS.
 */
public final class PeerProxy {
    static final String ACQUIRE = "orbitkv.peer.acquire";
    static final String SUBMIT = "orbitkv.peer.submit";
    static final String ABANDON = "orbitkv.peer.abandon";
    static final String FETCH = "orbitkv.peer.fetch";
    /** What a call may take beyond its own budget before the bus gives up on the reply. */
    private static final long REPLY_MARGIN_MILLIS = 10_000;

    private final EventBus bus;

    public PeerProxy(Vertx vertx) {
        this.bus = vertx.eventBus();
    }

    private static DeliveryOptions within(Duration budget) {
        return new DeliveryOptions().setLocalOnly(true).setSendTimeout(budget.toMillis() + REPLY_MARGIN_MILLIS);
    }

    private <R> Future<R> request(String address, Object command, DeliveryOptions options) {
        return RoleProxies.<R>request(bus, address, command, options).recover(failure -> {
            if (failure instanceof ReplyException reply && reply.failureType() == ReplyFailure.RECIPIENT_FAILURE) {
                PeerException peer = PeerException.fromFailure(reply.failureCode(), reply.getMessage());
                if (peer != null) {
                    return Future.failedFuture(peer);
                }
            }
            return Future.failedFuture(failure);
        });
    }

    /** CANDIDATE → RESERVED: the source lease at exactly these generations, then the local slots. All or nothing. */
    public Future<PeerCommands.Acquired> acquire(PeerCommands.Pages pages) {
        return request(ACQUIRE, new PeerCommands.Acquire(pages), within(pages.budget()));
    }

    /** Acquire of DRAM pages only. */
    public Future<PeerCommands.Acquired> acquire(PeerOwner owner, byte[] namespace, List<StateKey> keys,
                                                 List<Long> generations, Duration budget) {
        return acquire(new PeerCommands.Pages(owner, namespace, keys, generations, List.of(), budget));
    }

    /**
     * RESERVED → RESIDENT → READY: transfer, then the seal that verifies the source's CRC32C (with {@code pin}: and
     * pins the pages in the same step). A failure after submission fences the transfer before the slots are aborted;
     * either way the source lease goes.
     */
    public Future<PeerCommands.Fetched> submit(PeerCommands.Acquired acquired, boolean pin) {
        return request(SUBMIT, new PeerCommands.Submit(acquired, pin),
                within(Duration.ofNanos(acquired.budgetNanos)));
    }

    /** Submit without keeping pins. */
    public Future<PeerCommands.Fetched> submit(PeerCommands.Acquired acquired) {
        return submit(acquired, false);
    }

    /** Ends an acquired fetch that will not be submitted. */
    public Future<Void> abandon(PeerCommands.Acquired acquired) {
        return request(ABANDON, new PeerCommands.Abandon(acquired), within(Duration.ZERO));
    }

    /** Acquire then submit, within one budget; the pages end sealed and unpinned here. */
    public Future<PeerCommands.Fetched> fetch(PeerCommands.Pages pages) {
        return request(FETCH, new PeerCommands.Fetch(pages), within(pages.budget()));
    }

    /** Fetch of DRAM pages only. */
    public Future<PeerCommands.Fetched> fetch(PeerOwner owner, byte[] namespace, List<StateKey> keys,
                                              List<Long> generations, Duration budget) {
        return fetch(new PeerCommands.Pages(owner, namespace, keys, generations, List.of(), budget));
    }
}
