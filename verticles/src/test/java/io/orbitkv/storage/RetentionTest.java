package io.orbitkv.storage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.common.OrbitException;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.StateKey;
import io.orbitkv.protocol.engine.ErrorReason;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Retention hints in the storage role's state, driven directly with a stepped clock: eviction order (transient,
 * unretained, retained by priority), expiry, budgets, refusals that change nothing, and which seals reach the SSD
 * writer.
 */
class RetentionTest {
    static final long PAGE = 1 << 20;
    static final long TTL = 1_000_000_000L;
    final Arena arena = Arena.ofConfined();
    final MemorySegment pool = arena.allocate(8 * PAGE, 4096);
    final List<StateKey> evicted = new ArrayList<>();
    final List<StateKey> offeredToSsd = new ArrayList<>();
    final List<StateKey> reused = new ArrayList<>();
    long now = 1_000;
    final RetentionTable retention = new RetentionTable(() -> now, 4 * PAGE, 10 * TTL, null);
    final ImageStore store = new ImageStore(new PoolAllocator(8 * PAGE, 2 * PAGE), pool, 8 * PAGE,
            new ResidencyStream(7, 1024), new ImageStore.Listener() {
                @Override
                public void onSealed(ImageRef image) {
                    offeredToSsd.add(image.key());
                }

                @Override
                public void onEvicted(ImageRef image) {
                    evicted.add(image.key());
                }

                @Override
                public void onReused(List<ImageRef> images) {
                    images.forEach(i -> reused.add(i.key()));
                }
            }, retention);

    @AfterEach
    void close() {
        arena.close();
    }

    static List<StateKey> keys(int from, int to) {
        List<StateKey> keys = new ArrayList<>();
        for (int i = from; i < to; i++) {
            keys.add(ImageStoreTest.key(i));
        }
        return keys;
    }

    void publish(int from, int to, boolean transientPages) {
        List<StateKey> keys = keys(from, to);
        AllocateResult r = store.allocate(1, keys, Collections.nCopies(keys.size(), PAGE), transientPages);
        if (r.slots().stream().anyMatch(io.orbitkv.model.SlotGrant::allocated)) {
            store.seal(1, r.publishId(), List.of(), List.of());
        }
    }

    StorageCommands.Retained retain(String tenant, int from, int to, long ttl, int priority) {
        List<StateKey> keys = keys(from, to);
        return store.retain(tenant, keys, Collections.nCopies(keys.size(), PAGE), ttl, priority);
    }

    static List<StateKey> concat(List<StateKey>... parts) {
        List<StateKey> all = new ArrayList<>();
        for (List<StateKey> part : parts) {
            all.addAll(part);
        }
        return all;
    }

    @Test
    void evictionTakesTransientThenUnretainedThenRetainedFromTheLowestPriority() {
        publish(0, 2, false);  // retained at priority 5 (eldest)
        publish(2, 4, false);  // retained at priority 1
        publish(4, 6, false);  // unretained
        publish(6, 8, true);   // transient (newest)
        retain("", 0, 2, TTL, 5);
        retain("", 2, 4, TTL, 1);
        publish(8, 14, false);
        assertThat(evicted).containsExactlyElementsOf(concat(keys(6, 8), keys(4, 6), keys(2, 4)));
        assertThat(store.stateOf(ImageStoreTest.key(0))).isNotNull();
        assertThat(store.stateOf(ImageStoreTest.key(1))).isNotNull();
    }

    @Test
    void transientPagesAreNeverOfferedToSsdAndRetainedResidentOnesAreReportedReused() {
        publish(0, 2, true);
        publish(2, 4, false);
        assertThat(offeredToSsd).containsExactlyElementsOf(keys(2, 4));
        store.unpin(store.pinExact(List.of(keys(0, 4))).pinned());
        publish(0, 4, false); // named again: a second sighting of the stored ones only
        assertThat(reused).as("transient pages are never second sightings").containsExactlyElementsOf(
                concat(keys(2, 4), keys(2, 4)));
        reused.clear();
        retain("", 0, 4, TTL, 1);
        assertThat(reused).as("retained, resident, not transient: the SSD writer's second sighting")
                .containsExactlyElementsOf(keys(2, 4));
        assertThat(offeredToSsd).containsExactlyElementsOf(keys(2, 4));
    }

    @Test
    void anExpiredRetentionMakesItsImagesTheFirstUnretainedOnesToGo() {
        publish(0, 2, false);
        retain("", 0, 2, TTL, 3);
        publish(2, 8, false);
        now += TTL - 1;
        assertThat(store.expireRetentions()).isZero();
        assertThat(store.retainedBytes()).isEqualTo(2 * PAGE);
        now += 1;
        publish(8, 9, false); // the pool is full: eviction first ends what expired
        assertThat(store.retainedBytes()).isZero();
        assertThat(store.retentions()).isZero();
        // Both ended images are now the eldest, the chain's tail first: what is left stays a usable prefix.
        assertThat(evicted).containsExactly(ImageStoreTest.key(1));
    }

    @Test
    void unretainEndsTheRetentionOnlyForItsTenant() {
        publish(0, 2, false);
        StorageCommands.Retained r = retain("a", 0, 2, TTL, 3);
        assertThatThrownBy(() -> store.unretain("b", r.retentionId()))
                .isInstanceOfSatisfying(OrbitException.class, e -> assertThat(e.reason()).isEqualTo(ErrorReason.UNKNOWN_RETENTION));
        assertThat(store.retainedBytes()).isEqualTo(2 * PAGE);
        assertThat(store.unretain("a", r.retentionId())).isEqualTo(2 * PAGE);
        assertThatThrownBy(() -> store.unretain("a", r.retentionId()))
                .isInstanceOfSatisfying(OrbitException.class, e -> assertThat(e.reason()).isEqualTo(ErrorReason.UNKNOWN_RETENTION));
        publish(2, 9, false);
        assertThat(evicted).as("no longer retained: the eldest unretained, tail first").containsExactly(ImageStoreTest.key(1));
    }

    @Test
    void overlappingRetentionsKeepTheHighestPriorityUntilTheLastEnds() {
        publish(0, 1, false);
        publish(1, 2, false);
        StorageCommands.Retained high = retain("", 0, 1, TTL, 9);
        retain("", 0, 1, 3 * TTL, 2);
        retain("", 1, 2, 3 * TTL, 5);
        assertThat(retention.priorityOf(ImageStoreTest.key(0))).isEqualTo(9);
        store.unretain("", high.retentionId());
        assertThat(retention.priorityOf(ImageStoreTest.key(0))).isEqualTo(2);
        publish(2, 9, false); // one victim among retained images: the lower priority, key 0
        assertThat(evicted).containsExactly(ImageStoreTest.key(0));
        now += 3 * TTL;
        store.expireRetentions();
        assertThat(retention.priorityOf(ImageStoreTest.key(1))).isEqualTo(RetentionTable.NOT_RETAINED);
        assertThat(store.retainedBytes()).isZero();
    }

    @Test
    void budgetsHoldPerTenantAndInTotalAndRefusalsChangeNothing() {
        assertThat(retain("a", 0, 4, TTL, 1).tenantBudgetBytes()).isEqualTo(4 * PAGE);
        assertRefused(() -> retain("b", 4, 5, TTL, 1), ErrorReason.RETENTION_OVER_BUDGET);
        assertRefused(() -> retain("a", 4, 5, 0, 1), ErrorReason.INVALID_RETENTION_TTL);
        assertRefused(() -> retain("a", 4, 5, 10 * TTL + 1, 1), ErrorReason.INVALID_RETENTION_TTL);
        assertThat(store.retainedBytes()).isEqualTo(4 * PAGE);
        assertThat(store.retentions()).isEqualTo(1);
        assertThat(retention.priorityOf(ImageStoreTest.key(4))).isEqualTo(RetentionTable.NOT_RETAINED);
        now += TTL;
        // Two tenants with equal shares: half each; repeated keys count once.
        List<StateKey> twice = concat(keys(0, 2), keys(0, 2));
        store.retain("a", twice, Collections.nCopies(4, PAGE), TTL, 1);
        assertThat(retention.tenantRetainedBytes("a")).isEqualTo(2 * PAGE);
        assertThat(retain("b", 2, 4, TTL, 1).tenantBudgetBytes()).isEqualTo(2 * PAGE);
        assertRefused(() -> retain("b", 4, 5, TTL, 1), ErrorReason.RETENTION_OVER_BUDGET);
    }

    @Test
    void configuredSharesBoundEachTenant() {
        RetentionTable shared = new RetentionTable(() -> now, 10 * PAGE, TTL, Map.of("a", 0.3, "b", 0.7)::get);
        assertThat(shared.budgetOf("a")).isEqualTo(3 * PAGE);
        shared.retain("a", keys(0, 3), Collections.nCopies(3, PAGE), TTL, 0);
        assertThatThrownBy(() -> shared.retain("a", keys(3, 4), List.of(PAGE), TTL, 0)).isInstanceOf(OrbitException.class);
        shared.retain("b", keys(3, 10), Collections.nCopies(7, PAGE), TTL, 0);
        assertThat(shared.retainedBytes()).isEqualTo(10 * PAGE);
    }

    static void assertRefused(org.assertj.core.api.ThrowableAssert.ThrowingCallable call, ErrorReason reason) {
        assertThatThrownBy(call).isInstanceOfSatisfying(OrbitException.class, e -> assertThat(e.reason()).isEqualTo(reason));
    }
}
