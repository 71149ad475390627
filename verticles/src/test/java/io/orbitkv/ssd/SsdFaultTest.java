package io.orbitkv.ssd;

import static io.orbitkv.ssd.SsdTesting.key;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.nativeio.uring.IoUringFileIo;
import io.vertx.core.Vertx;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import io.orbitkv.model.SsdEntry;
import io.orbitkv.model.SsdLease;
import io.orbitkv.model.SsdReadResult;
import io.orbitkv.model.SsdResidencyChange;

/** Crashes, damaged bytes, full disks and bad directories, each on real files. No sleeps. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SsdFaultTest {

    static final long EXTENT = (64 << 10) + 4096;

    @TempDir
    Path dir;

    @BeforeAll
    static void available() {
        assumeTrue(IoUringFileIo.isAvailable(), () -> "io_uring unavailable: " + IoUringFileIo.unavailabilityCause());
    }

    record Commit(long index, long generation, long length) {}

    @Test
    void killDashNineDuringHeavyWritesLosesNothingCommittedAndServesNothingTorn() throws Exception {
        Writer writer = runWriter(lines -> lines.commits().size() >= 8 * SsdCrashWriter.EXTENTS); // many reclaims
        try (SsdTesting t = SsdTesting.open(SsdCrashWriter.settings(dir))) {
            SsdStats stats = t.stats();
            System.err.printf("after kill -9: %d printed commits, recovered %d, torn %d, corrupt %d in %.6f s%n",
                    writer.commits().size(), stats.recoveredExtents(), stats.recoveryTornExtents(),
                    stats.recoveryCorruptExtents(), stats.recoverySeconds());
            // every printed commit that was not printed evicted is back, with its printed generation and length
            int expected = 0;
            for (Commit commit : writer.commits()) {
                SsdEntry entry = t.call(() -> t.store.lookup(key(commit.index())));
                if (!writer.removed().contains(commit.index())) {
                    expected++;
                    assertThat(entry).as("page %d", commit.index())
                            .isEqualTo(new SsdEntry(key(commit.index()), true, commit.generation(), commit.length()));
                } else if (entry.present()) {
                    assertThat(entry.generation()).isEqualTo(commit.generation());
                }
            }
            assertThat(stats.recoveredExtents()).isGreaterThanOrEqualTo(expected);
            assertThat(stats.recoveryCorruptExtents()).isZero();
            // every indexed page (printed or committed just before the kill) reads back its exact bytes
            MemorySegment dst = t.arena.allocate(64 << 10, 4096);
            for (SsdEntry entry : t.call(t.store::committedEntries)) {
                SsdLease lease = t.call(() -> t.store.acquireLease(entry.key(), entry.generation()));
                t.await(() -> t.store.readInto(lease, dst));
                assertThat(SsdTesting.matches(dst, entry.lengthBytes(), SsdTesting.indexOf(entry.key())))
                        .as("bytes of %s", entry).isTrue();
                assertThat(SsdCrashWriter.lengthOf(SsdTesting.indexOf(entry.key()))).isEqualTo(entry.lengthBytes());
                t.run(() -> t.store.release(lease));
            }
            assertThat(t.stats().corruptExtents()).isZero();
            // and the store keeps working after the crash
            assertThat(t.write(1_000_000, 5000).committed()).isTrue();
        }
    }

    @Test
    void mixedPageSizesFillTheTierAndComeBackAfterKillDashNine() throws Exception {
        Writer writer = runWriter(lines -> lines.full() >= 0, "fill");
        SsdSettings settings = SsdCrashWriter.fillSettings(dir);
        long capacity = settings.shardBytes() * settings.shardCount();
        assertThat(writer.removed()).as("nothing evicted while filling").isEmpty();
        long payload = writer.commits().stream().mapToLong(Commit::length).sum();
        assertThat(writer.commits().stream().map(Commit::length).distinct())
                .containsExactlyInAnyOrder(64L << 10, 256L << 10, 1L << 20, 2L << 20);
        System.err.printf("filled %d pages, %d payload bytes = %.1f %% of %d bytes, before kill -9%n",
                writer.commits().size(), payload, 100.0 * payload / capacity, capacity);
        assertThat((double) payload / capacity).isGreaterThanOrEqualTo(0.90);
        try (SsdTesting t = SsdTesting.open(settings)) {
            assertThat(t.stats().recoveredExtents()).isEqualTo(writer.commits().size());
            MemorySegment dst = t.arena.allocate(2 << 20, 4096);
            for (Commit commit : writer.commits()) {
                SsdEntry entry = t.call(() -> t.store.lookup(key(commit.index())));
                assertThat(entry).isEqualTo(new SsdEntry(key(commit.index()), true, commit.generation(),
                        commit.length()));
                SsdLease lease = t.call(() -> t.store.acquireLease(entry.key(), entry.generation()));
                t.await(() -> t.store.readInto(lease, dst));
                assertThat(SsdTesting.matches(dst, commit.length(), commit.index())).as("bytes of %s", commit)
                        .isTrue();
                t.run(() -> t.store.release(lease));
            }
            assertThat(t.stats().activeLeases()).isZero();
        }
    }

    record Writer(List<Commit> commits, Set<Long> removed, long full) {}

    /** Runs {@link SsdCrashWriter} until {@code enough} holds for what it printed, then kills it with SIGKILL. */
    private Writer runWriter(java.util.function.Predicate<Writer> enough, String... mode) throws Exception {
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        List<String> command = new ArrayList<>(List.of(java.toString(), "--enable-native-access=ALL-UNNAMED",
                "--sun-misc-unsafe-memory-access=allow", "-Xmx256m",
                "-cp", System.getProperty("java.class.path"), SsdCrashWriter.class.getName(), dir.toString()));
        command.addAll(List.of(mode));
        Process child = new ProcessBuilder(command).redirectError(dir.resolve("writer.stderr").toFile()).start();
        List<Commit> commits = new ArrayList<>();
        Set<Long> removed = new HashSet<>();
        long full = -1;
        try (BufferedReader lines = new BufferedReader(new InputStreamReader(child.getInputStream(),
                StandardCharsets.US_ASCII))) {
            String line;
            boolean killed = false;
            // after the kill, what the writer printed before it died is still read: those commits happened too
            while ((line = lines.readLine()) != null) {
                String[] f = line.split(" ");
                switch (f[0]) {
                    case "COMMITTED" -> commits.add(new Commit(Long.parseLong(f[1]), Long.parseLong(f[2]),
                            Long.parseLong(f[3])));
                    case "REMOVED" -> removed.add(Long.parseLong(f[1]));
                    case "FULL" -> full = Long.parseLong(f[1]);
                    default -> {
                    }
                }
                if (!killed && enough.test(new Writer(commits, removed, full))) {
                    child.toHandle().destroyForcibly(); // SIGKILL; unlike Process.destroy it leaves the pipe open
                    killed = true;
                }
            }
            assertThat(child.waitFor(20, TimeUnit.SECONDS)).isTrue();
        } finally {
            child.destroyForcibly();
        }
        Writer writer = new Writer(commits, removed, full);
        assertThat(enough.test(writer)).as("writer stderr: %s", Files.readString(dir.resolve("writer.stderr")))
                .isTrue();
        return writer;
    }

    @Test
    void flippedPayloadByteIsAMissAndACounterNeverWrongBytes() throws Exception {
        SsdSettings settings = SsdTesting.small(dir, 4);
        long generation;
        try (SsdTesting t = SsdTesting.open(settings)) {
            generation = t.write(1, 20_000).generation();
        }
        flipByte(dir.resolve("shard-000.okv"), 4096 + 12_345);
        try (SsdTesting t = SsdTesting.open(settings)) {
            assertThat(t.call(() -> t.store.lookup(key(1)).present())).isTrue(); // header intact: indexed
            SsdLease lease = t.call(() -> t.store.acquireLease(key(1), generation));
            MemorySegment dst = t.arena.allocate(20_480, 4096);
            assertThatThrownBy(() -> t.await(() -> t.store.readInto(lease, dst)))
                    .isInstanceOfSatisfying(SsdException.class,
                            e -> assertThat(e.failure()).isEqualTo(SsdFailure.CHECKSUM_MISMATCH));
            assertThat(t.call(() -> t.store.lookup(key(1)).present())).isFalse();
            assertThat(t.changes.getLast()).satisfies(c -> {
                assertThat(c.kind()).isEqualTo(SsdResidencyChange.Kind.SSD_REMOVED);
                assertThat(c.cause()).isEqualTo(SsdResidencyChange.Cause.CORRUPT);
            });
            assertThat(t.stats().corruptExtents()).isEqualTo(1);
            assertThat(t.counter("orbitkv.ssd.read.misses", "reason", "CHECKSUM_MISMATCH")).isEqualTo(1);
            // further reads under the same lease fail too; release invalidates the header on disk
            assertThatThrownBy(() -> t.await(() -> t.store.readInto(lease, dst))).isInstanceOf(SsdException.class);
            t.run(() -> t.store.release(lease));
            assertThat(t.stats().pinnedExtents()).isZero();
        }
        try (SsdTesting t = SsdTesting.open(settings)) {
            assertThat(t.call(() -> t.store.lookup(key(1)).present())).isFalse();
            assertThat(t.stats().recoveryTornExtents()).isEqualTo(1); // invalidated, generation kept
            assertThat(t.write(2, 100).generation()).isGreaterThan(generation);
        }
    }

    @Test
    void flippedHeaderByteIsNotIndexedOnOpen() throws Exception {
        SsdSettings settings = SsdTesting.small(dir, 4);
        try (SsdTesting t = SsdTesting.open(settings)) {
            t.write(1, 20_000);
            t.write(2, 20_000);
        }
        flipByte(dir.resolve("shard-000.okv"), 40); // inside extent 0's header
        try (SsdTesting t = SsdTesting.open(settings)) {
            assertThat(t.call(() -> t.store.lookup(key(1)).present())).isFalse();
            assertThat(t.call(() -> t.store.lookup(key(2)).present())).isTrue();
            assertThat(t.stats().recoveryCorruptExtents()).isEqualTo(1);
        }
    }

    @Test
    void fullDiskRejectsAndCountsWritesWhileCommittedExtentsStillRead() throws Exception {
        Path mount = Files.createDirectory(dir.resolve("tmpfs"));
        assumeTrue(mount("-t", "tmpfs", "-o", "size=8m", "tmpfs", mount.toString()),
                "cannot mount a tmpfs here (not root?)");
        try {
            // 16 extents of 1 MiB on an 8 MiB file system: sparse shards, so ENOSPC arrives at write time. This
            // kernel's tmpfs accepts O_DIRECT, so the run is made twice: with O_DIRECT as the file system offers it,
            // and with the EINVAL fallback simulated to cover the buffered path.
            long extent = (1 << 20) + 4096;
            for (boolean simulateNoDirectIo : new boolean[] {false, true}) {
                Path storeDir = Files.createDirectory(mount.resolve("store-" + simulateNoDirectIo));
                SsdSettings settings = new SsdSettings().directory(storeDir).extentBytes(extent)
                        .capacityBytes(16 * extent).preallocate(false).writeStagingBuffers(1)
                        .simulateDirectIoUnsupported(simulateNoDirectIo);
                try (SsdTesting t = SsdTesting.open(settings)) {
                    assertThat(t.stats().directIo()).isEqualTo(!simulateNoDirectIo);
                    assertThat(t.registry.find("orbitkv.ssd.direct.io").gauge().value())
                            .isEqualTo(simulateNoDirectIo ? 0 : 1);
                    List<Long> committed = new ArrayList<>();
                    SsdWriteOutcome outcome;
                    long index = 0;
                    do {
                        outcome = t.write(index, 1 << 20);
                        if (outcome.committed()) {
                            committed.add(index);
                        }
                        index++;
                    } while (outcome.committed() && index < 16);
                    assertThat(outcome.dropReason()).isEqualTo(SsdDropReason.NO_SPACE);
                    assertThat(committed).isNotEmpty();
                    assertThat(t.write(index, 1 << 20).dropReason()).isEqualTo(SsdDropReason.NO_SPACE);
                    assertThat(t.counter("orbitkv.ssd.writes.dropped", "reason", "NO_SPACE")).isEqualTo(2);
                    MemorySegment dst = t.arena.allocate(1 << 20, 4096);
                    for (long k : committed) {
                        long generation = t.call(() -> t.store.lookup(key(k)).generation());
                        SsdLease lease = t.call(() -> t.store.acquireLease(key(k), generation));
                        assertThat(t.await(() -> t.store.readInto(lease, dst)).path()).isEqualTo(simulateNoDirectIo
                                ? SsdReadResult.ReadPath.BUFFERED : SsdReadResult.ReadPath.DIRECT);
                        assertThat(SsdTesting.matches(dst, 1 << 20, k)).isTrue();
                        t.run(() -> t.store.release(lease));
                    }
                }
                Files.delete(storeDir.resolve("shard-000.okv"));
            }
            // fill the file system, then preallocation fails the open, naming the shard
            Files.write(mount.resolve("filler"), new byte[7 << 20]);
            // preallocation on the full file system fails the open, naming the shard
            Path other = Files.createDirectory(mount.resolve("other"));
            assertThatThrownBy(() -> SsdTesting.open(new SsdSettings().directory(other).extentBytes(extent)
                    .capacityBytes(16 * extent)))
                    .hasMessageContaining(other.resolve("shard-000.okv").toString());
        } finally {
            mount("-u", mount.toString());
        }
    }

    @Test
    void missingOrUnusableDirectoryFailsTheDeploymentNamingThePath() throws Exception {
        Vertx vertx = Vertx.vertx();
        try {
            Path missing = dir.resolve("does-not-exist");
            assertThatThrownBy(() -> deploy(vertx, missing)).hasMessageContaining("does not exist")
                    .hasMessageContaining(missing.toString());
            Path file = Files.writeString(dir.resolve("a-file"), "x");
            assertThatThrownBy(() -> deploy(vertx, file)).hasMessageContaining("not a directory")
                    .hasMessageContaining(file.toString());
            Path readOnly = Files.createDirectory(dir.resolve("read-only"));
            if (mount("-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", readOnly.toString())) {
                try {
                    assertThatThrownBy(() -> deploy(vertx, readOnly)).hasMessageContaining(readOnly.toString());
                } finally {
                    mount("-u", readOnly.toString());
                }
            }
            assertThat(vertx.deploymentIDs()).isEmpty();
        } finally {
            vertx.close().toCompletionStage().toCompletableFuture().get(SsdTesting.WAIT_S, TimeUnit.SECONDS);
        }
    }

    private static void deploy(Vertx vertx, Path directory) throws Exception {
        SsdSettings settings = SsdTesting.small(directory, 4);
        try {
            vertx.deployVerticle(new SsdVerticle(settings, new SimpleMeterRegistry())).toCompletionStage()
                    .toCompletableFuture().get(SsdTesting.WAIT_S, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw (Exception) e.getCause();
        }
    }

    /** mount ARGS, or umount PATH with "-u"; true on success. */
    private static boolean mount(String... args) throws Exception {
        List<String> command = new ArrayList<>();
        if (args[0].equals("-u")) {
            command.add("umount");
            command.add(args[1]);
        } else {
            command.add("mount");
            command.addAll(List.of(args));
        }
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        process.getInputStream().readAllBytes();
        return process.waitFor(20, TimeUnit.SECONDS) && process.exitValue() == 0;
    }

    private static void flipByte(Path file, long offset) throws Exception {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ByteBuffer one = ByteBuffer.allocate(1);
            channel.read(one, offset);
            one.put(0, (byte) (one.get(0) ^ 0x5A)).position(0);
            channel.write(one, offset);
            channel.force(true);
        }
    }
}
