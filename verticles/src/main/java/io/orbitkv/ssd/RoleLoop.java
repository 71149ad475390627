package io.orbitkv.ssd;

import io.vertx.core.Context;
import io.vertx.core.Vertx;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * The single thread that owns an {@link SsdStore}'s state: the SSD verticle's event loop in the Manager, a dedicated
 * thread in tests, benches and the crash writer. io_uring completions arrive on the io_uring loop thread and hop here
 * through {@link #execute} before they touch any state; execution must be FIFO so a close queued after completions
 * runs after them.
 */
public interface RoleLoop {

    /** Runs {@code task} on the role thread, after tasks submitted before it. */
    void execute(Runnable task);

    /** Whether the caller is on the role thread. */
    boolean inLoop();

    /** The Vert.x context the caller runs on (an event-loop context: one thread, FIFO). */
    static RoleLoop ofCurrentContext() {
        Context context = Objects.requireNonNull(Vertx.currentContext(), "must be called on a Vert.x context");
        Thread thread = Thread.currentThread();
        return new RoleLoop() {
            @Override
            public void execute(Runnable task) {
                context.runOnContext(ignored -> task.run());
            }

            @Override
            public boolean inLoop() {
                return Thread.currentThread() == thread;
            }
        };
    }

    /** A dedicated daemon thread; {@link Dedicated#close()} stops it after the queued tasks. */
    static Dedicated dedicated(String name) {
        return new Dedicated(name);
    }

    /** A role loop on its own thread, for tests, benches and standalone tools. */
    final class Dedicated implements RoleLoop, AutoCloseable {
        private final ExecutorService executor;
        private volatile Thread thread;

        private Dedicated(String name) {
            executor = Executors.newSingleThreadExecutor(runnable -> {
                Thread t = new Thread(runnable, name);
                t.setDaemon(true);
                thread = t;
                return t;
            });
        }

        @Override
        public void execute(Runnable task) {
            executor.execute(task);
        }

        @Override
        public boolean inLoop() {
            return Thread.currentThread() == thread;
        }

        @Override
        public void close() {
            executor.shutdown();
            try {
                executor.awaitTermination(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
