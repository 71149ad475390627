package io.orbitkv.ssd;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;

/**
 * Child process for the kill -9 test: writes continuously into a small ring and prints {@code COMMITTED index
 * generation length} after each commit (flushed), until it is killed. Payload of key(i) is the test pattern of i, with
 * a length that is not a multiple of 4096.
 */
public final class SsdCrashWriter {

    static final int EXTENTS = 24;
    static final int STAGING = 4;

    static SsdSettings settings(Path dir) {
        return SsdTesting.small(dir, EXTENTS).writeStagingBuffers(STAGING).writeQueueCapacity(STAGING * 2);
    }

    static long lengthOf(long index) {
        return 1000 + (index * 7919) % 64_000;
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        PrintStream out = new PrintStream(System.out, false);
        RoleLoop.Dedicated loop = RoleLoop.dedicated("crash-writer-role");
        SsdStore store = SsdStore.open(settings(dir), loop, SsdListener.NONE, new SimpleMeterRegistry()).get();
        long[] next = {0};
        Runnable[] offer = new Runnable[1];
        offer[0] = () -> {
            long index = next[0]++;
            long length = lengthOf(index);
            MemorySegment source = Arena.ofAuto().allocate(length, 4096); // freed by GC once written
            SsdTesting.fill(source, length, index);
            store.offerWrite(SsdTesting.key(index), () -> source, length).thenAccept(outcome -> {
                if (outcome.committed()) {
                    out.println("COMMITTED " + index + " " + outcome.generation() + " " + length);
                    out.flush();
                }
                offer[0].run();
            });
        };
        loop.execute(() -> {
            out.println("READY");
            out.flush();
            for (int i = 0; i < STAGING * 2; i++) {
                offer[0].run();
            }
        });
        new CompletableFuture<Void>().join(); // until killed
    }
}
