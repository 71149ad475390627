package io.orbitkv.storage;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.common.Ticker;
import io.orbitkv.ssd.SsdCommands;
import io.orbitkv.ssd.SsdException;
import io.orbitkv.ssd.SsdFailure;
import io.orbitkv.model.SsdLease;
import io.orbitkv.model.SsdPageOutcome;
import io.orbitkv.model.SsdReadResult;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageState;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.KeyGeneration;

/**
 * Reads back from SSD with injected failures, through a scripted SSD role: one command per phase however many pages,
 * every reserved slot settles exactly once (sealed, or freed when its lease, its read or a whole command failed), the
 * leases end, and the drain waits for the read command in flight.
 */
class MaterializerTest {
    static final long PAGE = 1 << 20;
    final Arena arena = Arena.ofConfined();
    final MemorySegment pool = arena.allocate(8 * PAGE, 4096);
    final PoolAllocator allocator = new PoolAllocator(8 * PAGE, 2 * PAGE);
    final ImageStore store = new ImageStore(allocator, pool, 6 * PAGE, new ResidencyStream(1, 1024),
            new ImageStore.Listener() {});
    final ScriptedSsd ssd = new ScriptedSsd();
    final List<List<SsdPageOutcome<SsdReadResult>>> settled = new ArrayList<>();
    final Materializer materializer = new Materializer(store, pool, ssd,
            (images, outcomes, nanos) -> settled.add(outcomes), Ticker.SYSTEM);

    /** The SSD role's three commands, answered by the test: stale keys get no lease, reads wait for {@link #reads}. */
    static final class ScriptedSsd implements Materializer.SsdReadBack {
        final Set<StateKey> stale = new HashSet<>();
        final List<List<SsdCommands.ReadInto>> readCommands = new ArrayList<>();
        final List<Promise<List<SsdPageOutcome<SsdReadResult>>>> reads = new ArrayList<>();
        final List<SsdLease> held = new ArrayList<>();
        int acquireCommands;
        int releaseCommands;
        boolean readThrows;
        long nextLease = 1;

        @Override
        public Future<List<SsdPageOutcome<SsdLease>>> acquireLeases(List<SsdCommands.AcquireLease> pages) {
            acquireCommands++;
            List<SsdPageOutcome<SsdLease>> outcomes = new ArrayList<>();
            for (SsdCommands.AcquireLease page : pages) {
                if (stale.contains(page.key())) {
                    outcomes.add(SsdPageOutcome.failed(new SsdException(SsdFailure.STALE_GENERATION, "injected")));
                } else {
                    SsdLease lease = new SsdLease(nextLease++, page.key(), page.generation(), PAGE);
                    held.add(lease);
                    outcomes.add(SsdPageOutcome.of(lease));
                }
            }
            return Future.succeededFuture(outcomes);
        }

        @Override
        public Future<List<SsdPageOutcome<SsdReadResult>>> readInto(List<SsdCommands.ReadInto> batch) {
            if (readThrows) {
                throw new IllegalStateException("injected: the SSD proxy threw while sending the reads");
            }
            readCommands.add(batch);
            Promise<List<SsdPageOutcome<SsdReadResult>>> answer = Promise.promise();
            reads.add(answer);
            return answer.future();
        }

        @Override
        public Future<Integer> release(List<SsdLease> leases) {
            releaseCommands++;
            int ended = 0;
            for (SsdLease lease : leases) {
                ended += held.remove(lease) ? 1 : 0;
            }
            return Future.succeededFuture(ended);
        }

        static SsdPageOutcome<SsdReadResult> ok(SsdCommands.ReadInto read, int crc) {
            return SsdPageOutcome.of(new SsdReadResult(read.lease(), PAGE, SsdReadResult.ReadPath.DIRECT, crc));
        }
    }

    @AfterEach
    void close() {
        arena.close();
    }

    List<StateKey> onSsd(int n) {
        List<StateKey> keys = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            StateKey key = ImageStoreTest.key(i);
            store.ssdAdded(key, 100 + i, PAGE);
            keys.add(key);
        }
        return keys;
    }

    @Test
    void aStaleLeaseOrAFailedReadReturnsItsSlotAndTheOthersSealWithOneCommandPerPhase() {
        List<StateKey> keys = onSsd(4);
        ssd.stale.add(keys.get(1));
        assertThat(materializer.start(keys)).isEqualTo(4);
        assertThat(ssd.acquireCommands).isEqualTo(1);
        assertThat(ssd.readCommands).hasSize(1);
        List<SsdCommands.ReadInto> batch = ssd.readCommands.getFirst();
        assertThat(batch).as("the stale page is not read").hasSize(3);
        assertThat(materializer.inFlight()).isEqualTo(4);
        Future<Void> drained = materializer.drained();
        assertThat(drained.isComplete()).isFalse();
        ssd.reads.getFirst().complete(List.of(ScriptedSsd.ok(batch.get(0), 7),
                SsdPageOutcome.failed(new SsdException(SsdFailure.CHECKSUM_MISMATCH, "injected")),
                ScriptedSsd.ok(batch.get(2), 9)));
        assertThat(drained.succeeded()).isTrue();
        assertThat(ssd.releaseCommands).isEqualTo(1);
        assertThat(ssd.held).as("every lease taken ended").isEmpty();
        assertThat(materializer.inFlight()).isZero();
        assertThat(store.materializingImages()).isZero();
        assertThat(settled).hasSize(1);
        assertThat(settled.getFirst()).extracting(SsdPageOutcome::succeeded).containsExactly(true, false, false, true);
        assertThat(store.stateOf(keys.get(0))).isEqualTo(ImageState.SEALED);
        assertThat(store.stateOf(keys.get(1))).isNull();
        assertThat(store.stateOf(keys.get(2))).isNull();
        assertThat(store.stateOf(keys.get(3))).isEqualTo(ImageState.SEALED);
        assertThat(allocator.requestedBytes()).as("only the sealed pages hold slots").isEqualTo(2 * PAGE);
        // The keys whose read-back failed can be read back again: nothing of them stayed reserved.
        ssd.stale.clear();
        assertThat(materializer.start(keys.subList(1, 3))).isEqualTo(2);
    }

    @Test
    void aReadCommandThatThrowsFreesEverySlotAndEndsTheLeases() {
        List<StateKey> keys = onSsd(3);
        ssd.readThrows = true;
        assertThat(materializer.start(keys)).isEqualTo(3);
        assertThat(materializer.inFlight()).isZero();
        assertThat(ssd.held).isEmpty();
        assertThat(ssd.releaseCommands).isEqualTo(1);
        assertThat(allocator.requestedBytes()).isZero();
        assertThat(settled.getFirst()).extracting(SsdPageOutcome::succeeded).containsOnly(false);
    }

    @Test
    void aClosedMaterializerStartsNothingAndDrainsWhatIsInFlight() {
        List<StateKey> keys = onSsd(2);
        assertThat(materializer.start(keys.subList(0, 1))).isEqualTo(1);
        materializer.close();
        assertThat(materializer.start(keys.subList(1, 2))).as("closed: no new reservation").isZero();
        assertThat(store.stateOf(keys.get(1))).isNull();
        Future<Void> drained = materializer.drained();
        assertThat(drained.isComplete()).isFalse();
        ssd.reads.getFirst().complete(List.of(SsdPageOutcome.failed(
                new SsdException(SsdFailure.CLOSED, "injected: store closed"))));
        assertThat(drained.succeeded()).isTrue();
        assertThat(allocator.requestedBytes()).isZero();
        assertThat(ssd.held).isEmpty();
    }

    @Test
    void aHoldIsAllOrNothingAndIsReadOrReleasedOnce() {
        List<StateKey> keys = onSsd(3);
        List<KeyGeneration> pages = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            pages.add(new KeyGeneration(keys.get(i), 100 + i));
        }
        ssd.stale.add(keys.get(2));
        StorageCommands.SsdHold refused = materializer.acquire(pages).result();
        assertThat(refused.hold()).isZero();
        assertThat(refused.staleKey()).isEqualTo(keys.get(2));
        assertThat(ssd.held).as("the leases taken were released").isEmpty();
        assertThat(allocator.requestedBytes()).isZero();

        ssd.stale.clear();
        long hold = materializer.acquire(pages).result().hold();
        assertThat(hold).isPositive();
        Future<List<ImageRef>> read = materializer.read(hold);
        assertThat(ssd.readCommands.getLast()).hasSize(3);
        assertThat(materializer.inFlight()).isEqualTo(3);
        List<SsdCommands.ReadInto> batch = ssd.readCommands.getLast();
        ssd.reads.getLast().complete(List.of(ScriptedSsd.ok(batch.get(0), 1), ScriptedSsd.ok(batch.get(1), 2),
                ScriptedSsd.ok(batch.get(2), 3)));
        assertThat(read.succeeded()).isTrue();
        assertThat(read.result()).extracting(ImageRef::crc32c).containsExactly(1L, 2L, 3L);
        assertThat(store.pinnedImages()).as("sealed and pinned in one step").isEqualTo(3);
        assertThat(ssd.held).isEmpty();
        assertThat(materializer.read(hold).failed()).as("never read twice").isTrue();
        store.unpin(List.of(read.result()));

        store.ssdAdded(ImageStoreTest.key(9), 200, PAGE);
        long unread = materializer.acquire(List.of(new KeyGeneration(ImageStoreTest.key(9), 200)))
                .result().hold();
        assertThat(materializer.release(unread).result()).isTrue();
        assertThat(materializer.release(unread).result()).isFalse();
        assertThat(store.stateOf(ImageStoreTest.key(9))).isNull();
        assertThat(ssd.held).isEmpty();
        assertThat(store.materializingImages()).isZero();
    }
}
