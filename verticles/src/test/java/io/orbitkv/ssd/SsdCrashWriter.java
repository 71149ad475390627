package io.orbitkv.ssd;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import io.orbitkv.model.SsdResidencyChange;

/**
 * Child process for the kill -9 tests: writes into a small tier and prints {@code COMMITTED index generation length}
 * after each commit and {@code REMOVED index} after each eviction (flushed), until it is killed. Payload of key(i) is
 * the test pattern of i. Without a second argument it writes continuously, lengths that are not multiples of 4096;
 * with {@code fill} it writes pages of 64 KiB, 256 KiB, 1 MiB and 2 MiB into a tier of {@link #FILL_EXTENTS} largest
 * pages until their spans (page + 4 KiB header) reach {@link #FILL_TARGET} of the capacity, then prints {@code FULL}.
 */
public final class SsdCrashWriter {

    static final int EXTENTS = 24;
    static final int STAGING = 4;

    static SsdSettings settings(Path dir) {
        return SsdTesting.small(dir, EXTENTS).writeStagingBuffers(STAGING).writeQueueCapacity(STAGING * 2);
    }

    static final int FILL_EXTENTS = 16;
    static final double FILL_TARGET = 0.94;
    static final long[] FILL_SIZES = {2 << 20, 1 << 20, 256 << 10, 64 << 10, 64 << 10, 256 << 10, 64 << 10};

    static long lengthOf(long index) {
        return 1000 + (index * 7919) % 64_000;
    }

    static SsdSettings fillSettings(Path dir) {
        return new SsdSettings().directory(dir).capacityBytes(FILL_EXTENTS * SsdSettings.EXTENT_BYTES_DEFAULT)
                .writeStagingBuffers(STAGING).writeQueueCapacity(STAGING * 2).queueDepth(8);
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        boolean fill = args.length > 1 && args[1].equals("fill");
        PrintStream out = new PrintStream(System.out, false);
        RoleLoop.Dedicated loop = RoleLoop.dedicated("crash-writer-role");
        SsdListener listener = change -> {
            if (change.kind() == SsdResidencyChange.Kind.SSD_REMOVED) {
                out.println("REMOVED " + SsdTesting.indexOf(change.key()));
                out.flush();
            }
        };
        SsdStore store = SsdStore.open(fill ? fillSettings(dir) : settings(dir), loop, listener,
                new SimpleMeterRegistry()).get();
        if (fill) {
            fill(store, loop, out, fillSettings(dir));
            return;
        }
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

    /** One page at a time (the sizes in turn, skipping those past the target), then FULL; waits to be killed. */
    private static void fill(SsdStore store, RoleLoop loop, PrintStream out, SsdSettings settings) {
        long budget = (long) (FILL_TARGET * settings.shardBytes());
        long[] planned = {0};
        long[] next = {0};
        Runnable[] offer = new Runnable[1];
        offer[0] = () -> {
            long index = next[0]++;
            long length = -1;
            for (int i = 0; i < FILL_SIZES.length && length < 0; i++) {
                long candidate = FILL_SIZES[(int) ((index + i) % FILL_SIZES.length)];
                if (planned[0] + 4096 + candidate <= budget) {
                    length = candidate;
                }
            }
            if (length < 0) {
                out.println("FULL " + planned[0]);
                out.flush();
                return;
            }
            planned[0] += 4096 + length;
            long pageLength = length;
            MemorySegment source = Arena.ofAuto().allocate(length, 4096);
            SsdTesting.fill(source, length, index);
            store.offerWrite(SsdTesting.key(index), () -> source, length).thenAccept(outcome -> {
                out.println((outcome.committed() ? "COMMITTED " + index + " " + outcome.generation() + " "
                        + pageLength : "DROPPED " + index + " " + outcome.dropReason()));
                out.flush();
                offer[0].run();
            });
        };
        loop.execute(() -> {
            out.println("READY");
            out.flush();
            offer[0].run();
        });
        new CompletableFuture<Void>().join(); // until killed
    }
}
