package io.orbitkv.ssd;

import static io.orbitkv.ssd.SsdTesting.key;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.codecs.extent.ExtentDecodeResult;
import io.orbitkv.codecs.extent.SsdExtentHeader;
import io.orbitkv.nativeio.uring.IoUringFileIo;
import io.orbitkv.model.StateKey;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import io.orbitkv.model.SsdEntry;
import io.orbitkv.model.SsdLease;
import io.orbitkv.model.SsdReadResult;
import io.orbitkv.model.SsdResidencyChange;
import io.orbitkv.model.WeakImageSource;
import io.orbitkv.model.SsdWritePolicy;

/** SsdStore on real files under /tmp (O_DIRECT capable), driven on its role thread. No sleeps. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SsdStoreTest {

    static final long EXTENT = (64 << 10) + 4096;

    @TempDir
    Path dir;

    @BeforeAll
    static void available() {
        assumeTrue(IoUringFileIo.isAvailable(), () -> "io_uring unavailable: " + IoUringFileIo.unavailabilityCause());
    }

    @Test
    void writesCommitAndReadBackThroughEveryReadPath() throws Exception {
        try (SsdTesting t = SsdTesting.open(SsdTesting.small(dir, 8))) {
            long length = 10_000; // not a multiple of 4096
            SsdWriteOutcome outcome = t.write(1, length);
            assertThat(outcome.committed()).isTrue();
            SsdEntry entry = t.call(() -> t.store.lookup(key(1)));
            assertThat(entry).isEqualTo(new SsdEntry(key(1), true, outcome.generation(), length));
            assertThat(t.changes).singleElement().satisfies(c -> {
                assertThat(c.kind()).isEqualTo(SsdResidencyChange.Kind.SSD_ADDED);
                assertThat(c.cause()).isEqualTo(SsdResidencyChange.Cause.COMMITTED);
                assertThat(c.generation()).isEqualTo(outcome.generation());
            });
            assertThat(t.stats().directIo()).isTrue();
            assertThat(Files.getPosixFilePermissions(dir.resolve("shard-000.okv")))
                    .containsExactlyInAnyOrder(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE);

            SsdLease lease = t.call(() -> t.store.acquireLease(key(1), outcome.generation()));
            MemorySegment roomy = t.arena.allocate(12_288, 4096);
            MemorySegment exact = t.arena.allocate(length, 4096);
            MemorySegment unaligned = t.arena.allocate(length + 64, 4096).asSlice(64, length);
            assertThat(t.await(() -> t.store.readInto(lease, roomy)).path()).isEqualTo(SsdReadResult.ReadPath.DIRECT);
            assertThat(SsdTesting.matches(roomy, length, 1)).isTrue();
            assertThat(t.await(() -> t.store.readInto(lease, exact)).path())
                    .isEqualTo(SsdReadResult.ReadPath.DIRECT_WITH_TAIL);
            assertThat(SsdTesting.matches(exact, length, 1)).isTrue();
            assertThat(t.await(() -> t.store.readInto(lease, unaligned)).path())
                    .isEqualTo(SsdReadResult.ReadPath.BOUNCE);
            assertThat(SsdTesting.matches(unaligned, length, 1)).isTrue();
            MemorySegment tooSmall = t.arena.allocate(4096, 4096);
            assertThatThrownBy(() -> t.await(() -> t.store.readInto(lease, tooSmall)))
                    .isInstanceOfSatisfying(SsdException.class,
                            e -> assertThat(e.failure()).isEqualTo(SsdFailure.DESTINATION_TOO_SMALL));
            t.run(() -> t.store.release(lease));
            assertThatThrownBy(() -> t.run(() -> t.store.release(lease)))
                    .isInstanceOfSatisfying(SsdException.class,
                            e -> assertThat(e.failure()).isEqualTo(SsdFailure.UNKNOWN_LEASE));
            SsdStats stats = t.stats();
            assertThat(stats.readHits()).isEqualTo(3);
            assertThat(stats.bytesRead()).isEqualTo(3 * length);
            assertThat(stats.bytesWritten()).isEqualTo(length);
            assertThat(stats.pinnedExtents()).isZero();
            assertThat(t.registry.find("orbitkv.ssd.read.latency").timer().count()).isEqualTo(3);
        }
    }

    /** Counts acquire/release and records the executor the store reports for each commit. */
    static final class CountingSource implements WeakImageSource {
        final MemorySegment segment;
        final AtomicInteger acquired = new AtomicInteger();
        final AtomicInteger released = new AtomicInteger();

        CountingSource(MemorySegment segment) {
            this.segment = segment;
        }

        @Override
        public MemorySegment acquire() {
            acquired.incrementAndGet();
            return segment;
        }

        @Override
        public void release() {
            released.incrementAndGet();
        }
    }

    @Test
    void writesFromThePoolSlotSkipTheStagingCopyAndReleaseTheSourceOnceTheirPayloadIsOnDisk() throws Exception {
        List<Boolean> executedFromSource = new CopyOnWriteArrayList<>();
        AtomicInteger stagingCopies = new AtomicInteger();
        SsdSettings settings = SsdTesting.small(dir, 8).writeFromSource(true).observer(new SsdOperationObserver() {
            @Override
            public void onWriteCommitted(long payloadBytes, long serviceNanos, boolean fromSource, long totalNanos,
                                         boolean otherPathPossible) {
                executedFromSource.add(fromSource);
                assertThat(totalNanos).isGreaterThanOrEqualTo(serviceNanos);
            }

            @Override
            public void onStagingCopy(long payloadBytes, long nanos) {
                stagingCopies.incrementAndGet();
            }
        });
        try (SsdTesting t = SsdTesting.open(settings)) {
            long length = 10_000;
            // An aligned slot with room for the rounded length (as pool slots are): written straight from it.
            MemorySegment slot = t.arena.allocate(12_288, 4096);
            SsdTesting.fill(slot, length, 5);
            CountingSource direct = new CountingSource(slot);
            SsdWriteOutcome first = t.await(() -> t.store.offerWrite(key(5), direct, length));
            assertThat(first.committed()).isTrue();
            assertThat(direct.acquired.get()).isEqualTo(1);
            assertThat(direct.released.get()).as("released exactly once, after the payload write").isEqualTo(1);
            // An unaligned source cannot be written with O_DIRECT: staged as usual.
            MemorySegment unaligned = t.arena.allocate(length + 64, 4096).asSlice(64, length);
            SsdTesting.fill(unaligned, length, 6);
            CountingSource staged = new CountingSource(unaligned);
            assertThat(t.await(() -> t.store.offerWrite(key(6), staged, length)).committed()).isTrue();
            assertThat(staged.released.get()).isEqualTo(1);
            assertThat(executedFromSource).containsExactly(true, false);
            assertThat(stagingCopies.get()).isEqualTo(1);
            for (long index : new long[] {5, 6}) {
                SsdLease lease = t.call(() -> t.store.acquireLease(key(index), t.store.lookup(key(index)).generation()));
                MemorySegment back = t.arena.allocate(12_288, 4096);
                t.await(() -> t.store.readInto(lease, back));
                assertThat(SsdTesting.matches(back, length, index)).as("key %d", index).isTrue();
                t.run(() -> t.store.release(lease));
            }
        }
    }

    @Test
    void fullTierReclaimsTheOldestRegionFirstAndReportsItsPagesRemovedBeforeReuse() throws Exception {
        // four regions of one extent each; a 60,000-byte page takes 64 KiB of one
        try (SsdTesting t = SsdTesting.open(SsdTesting.small(dir, 4))) {
            long[] generations = new long[6];
            for (int i = 0; i < 4; i++) {
                int k = i;
                generations[i] = t.write(i, 60_000 + i).generation();
                assertThat(t.call(() -> t.store.regionOf(key(k)))).isEqualTo(i);
            }
            t.changes.clear();
            generations[4] = t.write(4, 60_000).generation();
            assertThat(t.call(() -> t.store.regionOf(key(4)))).isZero();
            assertThat(t.call(() -> t.store.lookup(key(0)).present())).isFalse();
            // removal of the old occupant is reported before the new one is added
            assertThat(t.changes).extracting(SsdResidencyChange::kind, c -> SsdTesting.indexOf(c.key()))
                    .containsExactly(org.assertj.core.groups.Tuple.tuple(SsdResidencyChange.Kind.SSD_REMOVED, 0L),
                            org.assertj.core.groups.Tuple.tuple(SsdResidencyChange.Kind.SSD_ADDED, 4L));
            assertThat(t.changes.getFirst().cause()).isEqualTo(SsdResidencyChange.Cause.OVERWRITTEN);
            generations[5] = t.write(5, 60_000).generation();
            assertThat(t.call(() -> t.store.regionOf(key(5)))).isEqualTo(1);
            assertThat(t.call(() -> t.store.lookup(key(1)).present())).isFalse();
            for (int i = 1; i < 6; i++) {
                assertThat(generations[i]).isGreaterThan(generations[i - 1]);
            }
            // a committed key is not written twice
            assertThat(t.write(5, 60_000).dropReason()).isEqualTo(SsdDropReason.ALREADY_PRESENT);
        }
    }

    @Test
    void pagesOfMixedSizesPackIntoRegionsAndSmallPagesFillTheTailALargeOneLeft() throws Exception {
        // one shard of 16 extents of 64 KiB + 4 KiB: 8 regions of 2 extents (139,264 bytes each)
        try (SsdTesting t = SsdTesting.open(SsdTesting.small(dir, 16))) {
            long region = 2 * EXTENT;
            assertThat(t.stats().extentCount()).isEqualTo(8);
            // 16 KiB pages take 20 KiB: 6 fill region 0 up to 120 KiB, the 7th opens region 1
            for (int i = 0; i < 7; i++) {
                assertThat(t.write(i, 16 << 10).committed()).isTrue();
            }
            assertThat(t.call(() -> t.store.regionOf(key(5)))).isZero();
            assertThat(t.call(() -> t.store.regionOf(key(6)))).isEqualTo(1);
            // a 64 KiB page goes to region 1, but a 4 KiB page still fits the 16 KiB tail of region 0
            t.write(100, 64 << 10);
            t.write(101, 4096);
            assertThat(t.call(() -> t.store.regionOf(key(100)))).isEqualTo(1);
            assertThat(t.call(() -> t.store.regionOf(key(101)))).isZero();
            SsdStore.PageAt tail = t.call(() -> t.store.pageAt(key(101)));
            assertThat(tail.fileOffset()).isEqualTo(6L * (20 << 10));
            assertThat(tail.fileOffset() + tail.spanBytes()).isLessThanOrEqualTo(region);
            // nothing was evicted
            assertThat(t.call(t.store::committedEntries)).hasSize(9);
            assertThat(t.changes).noneMatch(c -> c.kind() == SsdResidencyChange.Kind.SSD_REMOVED);
        }
    }

    @Test
    void leasePinsTheExactGenerationAndItsRegionIsSkipped() throws Exception {
        try (SsdTesting t = SsdTesting.open(SsdTesting.small(dir, 4))) {
            long g0 = 0;
            for (int i = 0; i < 4; i++) {
                long g = t.write(i, 60_000).generation();
                if (i == 0) {
                    g0 = g;
                }
            }
            long generation0 = g0;
            assertThatThrownBy(() -> t.call(() -> t.store.acquireLease(key(0), generation0 + 1000)))
                    .isInstanceOfSatisfying(SsdException.class,
                            e -> assertThat(e.failure()).isEqualTo(SsdFailure.STALE_GENERATION));
            assertThatThrownBy(() -> t.call(() -> t.store.acquireLease(key(99), 1)))
                    .isInstanceOfSatisfying(SsdException.class,
                            e -> assertThat(e.failure()).isEqualTo(SsdFailure.NOT_FOUND));
            SsdLease lease = t.call(() -> t.store.acquireLease(key(0), generation0));

            t.write(4, 60_000); // would reclaim region 0: skipped, takes region 1
            assertThat(t.call(() -> t.store.regionOf(key(4)))).isEqualTo(1);
            assertThat(t.call(() -> t.store.lookup(key(0)).generation())).isEqualTo(generation0);
            assertThat(t.stats().overwriteRefused()).isEqualTo(1);
            t.write(5, 60_000);
            t.write(6, 60_000);
            t.write(7, 60_000); // region 0 is still pinned and skipped each time
            assertThat(t.stats().overwriteRefused()).isGreaterThanOrEqualTo(2);
            assertThat(t.call(() -> t.store.lookup(key(0)).generation())).isEqualTo(generation0);
            MemorySegment dst = t.arena.allocate(61_440, 4096);
            t.await(() -> t.store.readInto(lease, dst));
            assertThat(SsdTesting.matches(dst, 60_000, 0)).isTrue();

            // every region pinned: the write is dropped, never blocks
            List<SsdLease> all = new ArrayList<>();
            for (long k : new long[] {5, 6, 7}) {
                long g = t.call(() -> t.store.lookup(key(k)).generation());
                all.add(t.call(() -> t.store.acquireLease(key(k), g)));
            }
            assertThat(t.write(8, 60_000).dropReason()).isEqualTo(SsdDropReason.NO_EXTENT);
            t.run(() -> t.store.release(lease));
            all.forEach(l -> {
                try {
                    t.run(() -> t.store.release(l));
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            });
            // unpinned, region 0 holds the oldest fill: it is the one reclaimed
            assertThat(t.write(8, 60_000).committed()).isTrue();
            assertThat(t.call(() -> t.store.regionOf(key(8)))).isZero();
            assertThat(t.call(() -> t.store.lookup(key(0)).present())).isFalse();
            assertThat(t.call(t.store::committedEntries)).hasSize(4);
        }
    }

    @Test
    void reuseAwarePolicyWritesOnTheSecondSightingWithBoundedMemory() throws Exception {
        try (SsdTesting t = SsdTesting.open(SsdTesting.small(dir, 8).writePolicy(SsdWritePolicy.REUSE_AWARE)
                .reuseAwareCapacity(2))) {
            assertThat(t.write(1, 4096).dropReason()).isEqualTo(SsdDropReason.NOT_YET_REUSED);
            assertThat(t.write(1, 4096).committed()).isTrue();
            // A reported reuse of the resident image (a DRAM hit) is the second sighting: it writes from that source.
            assertThat(t.write(2, 4096).dropReason()).isEqualTo(SsdDropReason.NOT_YET_REUSED);
            MemorySegment resident = t.source(4096, 2);
            t.run(() -> t.store.noteReuse(key(2), () -> resident, 4096));
            await().atMost(Duration.ofSeconds(SsdTesting.WAIT_S)).until(() -> t.changes.stream().anyMatch(c ->
                    c.key().equals(key(2)) && c.kind() == SsdResidencyChange.Kind.SSD_ADDED));
            SsdEntry written = t.call(() -> t.store.lookup(key(2)));
            SsdLease lease = t.call(() -> t.store.acquireLease(key(2), written.generation()));
            MemorySegment back = t.arena.allocate(4096, 4096);
            t.await(() -> t.store.readInto(lease, back));
            t.run(() -> t.store.release(lease));
            assertThat(SsdTesting.matches(back, 4096, 2)).isTrue();
            // Reuse of a key already on SSD changes nothing and counts nothing.
            t.run(() -> t.store.noteReuse(key(2), () -> resident, 4096));
            assertThat(t.counter("orbitkv.ssd.writes.dropped", "reason", "ALREADY_PRESENT")).isZero();
            // capacity 2: sighting 3, 4, 5 forgets 3
            for (long k : new long[] {3, 4, 5}) {
                assertThat(t.write(k, 4096).dropReason()).isEqualTo(SsdDropReason.NOT_YET_REUSED);
            }
            assertThat(t.write(3, 4096).dropReason()).isEqualTo(SsdDropReason.NOT_YET_REUSED);
            assertThat(t.write(5, 4096).committed()).isTrue();
            assertThat(t.counter("orbitkv.ssd.writes.dropped", "reason", "NOT_YET_REUSED")).isEqualTo(6);
            assertThat(t.stats().writesCommitted()).isEqualTo(3);
        }
    }

    @Test
    void evictedWeakSourceAndFullQueueDropWithoutBlocking() throws Exception {
        try (SsdTesting t = SsdTesting.open(SsdTesting.small(dir, 8).writeStagingBuffers(1).writeQueueCapacity(2))) {
            assertThat(t.await(() -> t.store.offerWrite(key(1), () -> null, 4096)).dropReason())
                    .isEqualTo(SsdDropReason.SOURCE_EVICTED);
            assertThat(t.write(2, 70_000).dropReason()).isEqualTo(SsdDropReason.INVALID_SIZE);
            MemorySegment source = t.source(4096, 7);
            List<CompletableFuture<SsdWriteOutcome>> outcomes = t.call(() -> {
                List<CompletableFuture<SsdWriteOutcome>> list = new ArrayList<>();
                for (int i = 10; i < 20; i++) {
                    list.add(t.store.offerWrite(key(i), () -> source, 4096));
                }
                return list;
            });
            // one write took the staging buffer, two wait in the queue, seven were dropped at once
            for (CompletableFuture<SsdWriteOutcome> outcome : outcomes) {
                SsdTesting.get(outcome);
            }
            assertThat(outcomes.stream().filter(f -> f.join().committed()).count()).isEqualTo(3);
            assertThat(outcomes.stream().filter(f -> f.join().dropReason() == SsdDropReason.QUEUE_FULL).count())
                    .isEqualTo(7);
            assertThat(t.counter("orbitkv.ssd.writes.dropped", "reason", "SOURCE_EVICTED")).isEqualTo(1);
            assertThat(t.counter("orbitkv.ssd.writes.dropped", "reason", "QUEUE_FULL")).isEqualTo(7);
        }
    }

    @Test
    void restartRebuildsTheIndexTheGenerationCounterAndTheRegionAges() throws Exception {
        SsdSettings settings = SsdTesting.small(dir, 4).shardCount(2).capacityBytes(4 * EXTENT);
        try (SsdTesting t = SsdTesting.open(settings)) {
            long last = 0;
            for (int i = 0; i < 6; i++) {
                last = t.write(i, 3000 + 1000 * i).generation(); // 64 KiB in all: region 0 holds them
            }
            List<SsdEntry> before = t.call(t.store::committedEntries);
            assertThat(before).hasSize(6);
            t.reopen(settings);
            List<SsdEntry> after = t.call(t.store::committedEntries);
            assertThat(after).containsExactlyInAnyOrderElementsOf(before);
            assertThat(t.changes).hasSize(6).allMatch(c -> c.cause() == SsdResidencyChange.Cause.RECOVERED);
            SsdStats stats = t.stats();
            assertThat(stats.recoveredExtents()).isEqualTo(6);
            assertThat(stats.recoverySeconds()).isPositive();
            System.err.printf("recovery of %d regions: %.6f s%n", stats.extentCount(), stats.recoverySeconds());
            for (SsdEntry entry : after) {
                long index = SsdTesting.indexOf(entry.key());
                SsdLease lease = t.call(() -> t.store.acquireLease(entry.key(), entry.generation()));
                MemorySegment dst = t.arena.allocate(SsdLayout.alignUp(entry.lengthBytes()), 4096);
                t.await(() -> t.store.readInto(lease, dst));
                assertThat(SsdTesting.matches(dst, entry.lengthBytes(), index)).isTrue();
                t.run(() -> t.store.release(lease));
            }
            // the next writes get fresh generations and go to the empty regions first: nothing recovered is evicted
            t.changes.clear();
            SsdWriteOutcome next = t.write(6, 60_000);
            assertThat(next.generation()).isGreaterThan(last);
            t.write(7, 60_000);
            t.write(8, 60_000);
            assertThat(t.changes).noneMatch(c -> c.kind() == SsdResidencyChange.Kind.SSD_REMOVED);
            assertThat(t.call(t.store::committedEntries)).hasSize(9);
            // the tier is full now: the recovered region is the oldest, so its pages go first, each reported
            t.write(9, 60_000);
            assertThat(t.changes.stream().filter(c -> c.kind() == SsdResidencyChange.Kind.SSD_REMOVED))
                    .hasSize(6).allMatch(c -> c.cause() == SsdResidencyChange.Cause.OVERWRITTEN)
                    .allMatch(c -> SsdTesting.indexOf(c.key()) < 6);
            assertThat(t.call(() -> t.store.regionOf(key(9)))).isZero();
        }
    }

    @Test
    void restartedSmallPageTierKeepsItsRecoveredPagesWhenAsManyNewOnesArrive() throws Exception {
        // 2 MiB + 4 KiB extents, a tier of 8 of them, 64 KiB pages: one page per extent would hold 8 pages, so
        // 8 pages published after a restart would overwrite the 8 recovered ones.
        SsdSettings settings = new SsdSettings().directory(dir).capacityBytes(8 * SsdSettings.EXTENT_BYTES_DEFAULT)
                .writeStagingBuffers(2).queueDepth(8);
        try (SsdTesting t = SsdTesting.open(settings)) {
            for (int i = 0; i < 8; i++) {
                assertThat(t.write(i, 64 << 10).committed()).isTrue();
            }
            t.reopen(settings);
            for (int i = 8; i < 16; i++) {
                assertThat(t.write(i, 64 << 10).committed()).isTrue();
            }
            assertThat(t.changes).noneMatch(c -> c.kind() == SsdResidencyChange.Kind.SSD_REMOVED);
            MemorySegment dst = t.arena.allocate(64 << 10, 4096);
            for (int i = 0; i < 16; i++) {
                int k = i;
                SsdEntry entry = t.call(() -> t.store.lookup(key(k)));
                assertThat(entry.present()).as("page %d", k).isTrue();
                SsdLease lease = t.call(() -> t.store.acquireLease(key(k), entry.generation()));
                t.await(() -> t.store.readInto(lease, dst));
                assertThat(SsdTesting.matches(dst, 64 << 10, k)).isTrue();
                t.run(() -> t.store.release(lease));
            }
            assertThat(settings.pagesOf(64 << 10)).isEqualTo(8 * 30); // 30 pages of 68 KiB per 2 MiB + 4 KiB
        }
    }

    @Test
    void duplicatedKeyOnDiskKeepsOnlyTheHighestGeneration() throws Exception {
        SsdSettings settings = SsdTesting.small(dir, 4);
        long generation;
        try (SsdTesting t = SsdTesting.open(settings)) {
            generation = t.write(1, 9000).generation();
            t.closeStore();
        }
        // copy the page at the start of region 0 to the start of region 2 with a higher generation, and of region 3
        // with a lower one
        Path shard = dir.resolve("shard-000.okv");
        try (FileChannel channel = FileChannel.open(shard, StandardOpenOption.READ, StandardOpenOption.WRITE);
             Arena arena = Arena.ofConfined()) {
            ByteBuffer extent = ByteBuffer.allocateDirect((int) EXTENT);
            channel.read(extent, 0);
            MemorySegment segment = MemorySegment.ofBuffer(extent.flip());
            SsdExtentHeader header = ((ExtentDecodeResult.Valid) SsdExtentHeader.decodeHeader(segment)).header();
            for (long[] copy : new long[][] {{2, generation + 5}, {3, generation - 1}}) {
                MemorySegment block = arena.allocate(4096);
                new SsdExtentHeader(header.namespace(), header.groupId(), header.blockHash(),
                        header.representationCode(), header.payloadLength(), copy[1], true, 1, header.payloadCrc32c())
                        .encode(block);
                channel.write(extent.duplicate().position(0), copy[0] * EXTENT);
                channel.write(block.asByteBuffer(), copy[0] * EXTENT);
            }
        }
        try (SsdTesting t = SsdTesting.open(settings)) {
            assertThat(t.call(() -> t.store.lookup(key(1)).generation())).isEqualTo(generation + 5);
            assertThat(t.call(() -> t.store.regionOf(key(1)))).isEqualTo(2);
            assertThat(t.stats().recoveryDuplicateExtents()).isEqualTo(2);
            assertThat(t.write(2, 100).generation()).isEqualTo(generation + 6);
        }
    }

    @Test
    void cancelledReadsKeepTheirBuffersUntilTheCompletionArrives() throws Exception {
        try (SsdTesting t = SsdTesting.open(SsdTesting.small(dir, 8).queueDepth(1))) {
            long length = 60_000;
            t.write(1, length);
            long generation = t.call(() -> t.store.lookup(key(1)).generation());
            SsdLease lease = t.call(() -> t.store.acquireLease(key(1), generation));
            List<MemorySegment> destinations = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                destinations.add(t.arena.allocate(length, 4096)); // exact size: head + tail block per read
            }
            List<SsdReadFuture> reads = t.call(() -> {
                List<SsdReadFuture> list = new ArrayList<>();
                for (MemorySegment dst : destinations) {
                    list.add(t.store.readInto(lease, dst));
                }
                for (SsdReadFuture read : list) {
                    assertThat(read.cancel(true)).isFalse(); // never completes on the caller's word alone
                    assertThat(read.isDone()).isFalse();
                }
                return list;
            });
            int cancelled = 0;
            for (SsdReadFuture read : reads) {
                try {
                    SsdTesting.get(read);
                } catch (CancellationException e) {
                    cancelled++;
                }
                // completes only after every I/O it lent a buffer to completed
            }
            assertThat(cancelled).isEqualTo(reads.size());
            SsdStats stats = t.stats();
            assertThat(stats.readsInFlight()).isZero();
            assertThat(stats.pinnedExtents()).isEqualTo(1); // the lease only
            // every tail block went back: as many tail reads as blocks still work
            for (int i = 0; i < t.store.settings().smallBlocks(); i++) {
                t.await(() -> t.store.readInto(lease, destinations.getFirst()));
            }
            assertThat(SsdTesting.matches(destinations.getFirst(), length, 1)).isTrue();
            t.run(() -> t.store.release(lease));
            assertThat(t.stats().pinnedExtents()).isZero();
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {0, 1, 2})
    void readsAreVerifiedOffTheRoleThreadUnlessConfiguredNot(int verifierThreads) throws Exception {
        List<String> verifiedOn = new CopyOnWriteArrayList<>();
        SsdSettings settings = SsdTesting.small(dir, 8).verifierThreads(verifierThreads)
                .observer(new SsdOperationObserver() {
                    @Override
                    public void onReadVerified(long payloadBytes, long nanos) {
                        verifiedOn.add(Thread.currentThread().getName());
                    }
                });
        try (SsdTesting t = SsdTesting.open(settings)) {
            for (long k = 0; k < 4; k++) {
                assertThat(t.write(k, 60_000).committed()).isTrue();
            }
            for (long k = 0; k < 4; k++) {
                long key = k;
                SsdLease lease = t.call(() -> t.store.acquireLease(key(key), t.store.lookup(key(key)).generation()));
                MemorySegment back = t.arena.allocate(64 << 10, 4096);
                t.await(() -> t.store.readInto(lease, back));
                t.run(() -> t.store.release(lease));
                assertThat(SsdTesting.matches(back, 60_000, k)).isTrue();
            }
            assertThat(verifiedOn).hasSize(4).allSatisfy(name -> {
                if (verifierThreads == 0) {
                    assertThat(name).isEqualTo("ssd-test-role");
                } else {
                    assertThat(name).startsWith("orbitkv-ssd-verify-");
                }
            });
            assertThat(t.stats().readsInFlight()).isZero();
        }
    }

    @Test
    void closeLeaksNoDescriptorsAndNoNativeMemory() throws Exception {
        // warm-up: netty's native library and class initialization open descriptors once
        try (SsdTesting warm = SsdTesting.open(SsdTesting.small(dir.resolve("."), 2))) {
            warm.write(1, 100);
        }
        // Other test classes of this JVM may still be closing their own descriptors (a Vertx shutting down), so count
        // only ours: descriptors of files in this directory, and io_uring instances (which may only go down).
        long uringsBefore = openDescriptors("anon_inode:[io_uring]");
        long nativeBefore = SsdStore.liveNativeBytes();
        try (SsdTesting t = SsdTesting.open(SsdTesting.small(dir, 8).shardCount(2))) {
            assertThat(SsdStore.liveNativeBytes()).isGreaterThan(nativeBefore);
            assertThat(openDescriptors(dir.toRealPath().toString())).as("the count sees our shards").isEqualTo(2);
            assertThat(openDescriptors("anon_inode:[io_uring]")).isGreaterThan(uringsBefore);
            t.write(2, 50_000);
            long generation = t.call(() -> t.store.lookup(key(2)).generation());
            SsdLease lease = t.call(() -> t.store.acquireLease(key(2), generation));
            t.await(() -> t.store.readInto(lease, t.arena.allocate(50_000, 4096)));
            // close with the lease still held: the store ends it
        }
        assertThat(SsdStore.liveNativeBytes()).isEqualTo(nativeBefore);
        assertThat(openDescriptors(dir.toRealPath().toString())).as("shard descriptors left open").isZero();
        assertThat(openDescriptors("anon_inode:[io_uring]")).as("io_uring instances").isLessThanOrEqualTo(uringsBefore);
    }

    /** Open descriptors of this process whose target starts with {@code prefix}. */
    static long openDescriptors(String prefix) throws Exception {
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.filter(fd -> {
                try {
                    return Files.readSymbolicLink(fd).toString().startsWith(prefix);
                } catch (IOException e) {
                    return false; // closed meanwhile
                }
            }).count();
        }
    }

    @SuppressWarnings("unused")
    private static Set<StateKey> keys(long... indexes) {
        Set<StateKey> keys = new HashSet<>();
        for (long i : indexes) {
            keys.add(key(i));
        }
        return keys;
    }
}
