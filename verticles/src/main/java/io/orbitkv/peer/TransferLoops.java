package io.orbitkv.peer;

import io.netty.channel.EventLoopGroup;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.ThreadingModel;
import io.vertx.core.Vertx;
import io.vertx.core.impl.VertxThread;
import io.vertx.core.internal.ContextInternal;
import io.vertx.core.internal.VertxInternal;
import io.vertx.core.spi.transport.Transport;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A transport's own event loops ({@code peer.transfer-loops} = N; none with 0) and one Vert.x context on each, handed
 * out in turn. Threads are named {@code orbitkv-transfer-<transport>-<n>}, so the loops of two transports in one JVM
 * (several Managers in a test) are told apart.
 *
 * <p>Design note (close): netty completes the group's termination future just before its threads leave their run
 * loop, so {@link #close} also joins every thread it created (on a worker): when it completes, none is alive.
 */
final class TransferLoops {
    private static final Logger LOG = LoggerFactory.getLogger(TransferLoops.class);
    static final String THREAD_PREFIX = "orbitkv-transfer-";

    private final Vertx vertx;
    private final EventLoopGroup group;
    private final List<ContextInternal> contexts = new ArrayList<>();
    private final List<Thread> threads = new CopyOnWriteArrayList<>();
    private final AtomicInteger next = new AtomicInteger();

    TransferLoops(Vertx vertx, int loops, String name) {
        this.vertx = vertx;
        if (loops <= 0) {
            this.group = null;
            return;
        }
        VertxInternal internal = (VertxInternal) vertx;
        AtomicInteger n = new AtomicInteger();
        this.group = internal.transport().eventLoopGroup(Transport.IO_EVENT_LOOP_GROUP, loops, r -> {
            Thread t = new VertxThread(r, THREAD_PREFIX + name + "-" + n.getAndIncrement(), false, 2, TimeUnit.SECONDS);
            threads.add(t);
            return t;
        }, 50);
        for (int i = 0; i < loops; i++) {
            contexts.add(internal.contextBuilder().withThreadingModel(ThreadingModel.EVENT_LOOP)
                    .withEventLoop(group.next()).build());
        }
    }

    int size() {
        return contexts.size();
    }

    List<ContextInternal> contexts() {
        return contexts;
    }

    /** The context of the next transfer: the loops in turn, or {@code owner} without loops of their own. */
    ContextInternal next(ContextInternal owner) {
        return contexts.isEmpty() ? owner : contexts.get(Math.floorMod(next.getAndIncrement(), contexts.size()));
    }

    /** Shuts the loops down (everything on them must be closed already) and joins their threads. */
    Future<Void> close(ContextInternal caller) {
        if (group == null) {
            return Future.succeededFuture();
        }
        Promise<Void> down = caller.promise();
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).addListener(f -> down.complete());
        return down.future().compose(v -> vertx.executeBlocking(() -> {
            for (Thread t : threads) {
                t.join(TimeUnit.SECONDS.toMillis(10));
                if (t.isAlive()) {
                    LOG.warn("transfer loop thread {} did not end within 10 s", t.getName());
                }
            }
            return null;
        }));
    }
}
