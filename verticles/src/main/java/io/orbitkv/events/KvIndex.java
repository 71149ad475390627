package io.orbitkv.events;

import io.orbitkv.model.StateKey;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

/**
 * What the subscribers of this Manager's KV events have been told: per medium, the keys announced stored and not yet
 * removed, with per-namespace counts for the router summary. The events role turns each residency change into an
 * event only when it changes this index, so a change the stream repeats (a seed racing a change) is sent once, and a
 * removal of something never announced is not sent.
 *
 * <p>Design note (bounds and undo): at most {@code maxKeys} keys per medium; a key beyond that is not announced and
 * is counted ({@link #untracked}), so the summary and the stream under-report rather than grow without bound.
 * {@link #apply} returns an undo record, so a batch the publisher's queue refused leaves the index as the subscribers
 * know it. Confined to the events role's context.
 */
final class KvIndex {
    /** Blocks and bytes of one namespace on one medium. */
    static final class Tally {
        long blocks;
        long bytes;
    }

    /** One applied change, for undo. */
    record Applied(KvEvent.Medium medium, StateKey key, boolean added, long lengthBytes) {}

    private final int maxKeys;
    private final Map<StateKey, Long> dram = new HashMap<>();
    private final Map<StateKey, Long> ssd = new HashMap<>();
    private final Map<String, Tally[]> namespaces = new HashMap<>();
    private long untracked;

    KvIndex(int maxKeys) {
        this.maxKeys = maxKeys;
    }

    static String namespaceHex(StateKey key) {
        return HexFormat.of().formatHex(key.namespace());
    }

    private Map<StateKey, Long> on(KvEvent.Medium medium) {
        return medium == KvEvent.Medium.CPU ? dram : ssd;
    }

    /** Applies a store or removal; null when it changes nothing (already so, or over the bound). */
    Applied apply(KvEvent.Medium medium, StateKey key, boolean added, long lengthBytes, String namespace) {
        Map<StateKey, Long> keys = on(medium);
        if (added) {
            if (keys.containsKey(key)) {
                return null;
            }
            if (keys.size() >= maxKeys) {
                untracked++;
                return null;
            }
            long length = Math.max(0, lengthBytes);
            keys.put(key, length);
            tally(namespace, medium, 1, length);
            return new Applied(medium, key, true, length);
        }
        Long length = keys.remove(key);
        if (length == null) {
            return null;
        }
        tally(namespace, medium, -1, -length);
        return new Applied(medium, key, false, length);
    }

    /** Takes back what {@link #apply} did, newest first. */
    void undo(List<Applied> applied) {
        for (int i = applied.size() - 1; i >= 0; i--) {
            Applied a = applied.get(i);
            String namespace = namespaceHex(a.key());
            if (a.added()) {
                on(a.medium()).remove(a.key());
                tally(namespace, a.medium(), -1, -a.lengthBytes());
            } else {
                on(a.medium()).put(a.key(), a.lengthBytes());
                tally(namespace, a.medium(), 1, a.lengthBytes());
            }
        }
    }

    private void tally(String namespace, KvEvent.Medium medium, long blocks, long bytes) {
        Tally[] tallies = namespaces.computeIfAbsent(namespace, n -> new Tally[] {new Tally(), new Tally()});
        Tally t = tallies[medium.ordinal()];
        t.blocks += blocks;
        t.bytes += bytes;
        if (tallies[0].blocks == 0 && tallies[1].blocks == 0) {
            namespaces.remove(namespace);
        }
    }

    /** Keys announced on {@code medium} now (a copy). */
    List<StateKey> keys(KvEvent.Medium medium) {
        return new ArrayList<>(on(medium).keySet());
    }

    boolean contains(KvEvent.Medium medium, StateKey key) {
        return on(medium).containsKey(key);
    }

    /** Per namespace (hex): its {@link Tally} per medium, indexed by {@link KvEvent.Medium#ordinal}. */
    Map<String, Tally[]> namespaces() {
        return namespaces;
    }

    int size(KvEvent.Medium medium) {
        return on(medium).size();
    }

    long untracked() {
        return untracked;
    }

    void clear() {
        dram.clear();
        ssd.clear();
        namespaces.clear();
    }
}
