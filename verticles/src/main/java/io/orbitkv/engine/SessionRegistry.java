package io.orbitkv.engine;

import io.orbitkv.common.OrbitException;
import io.orbitkv.common.Ticker;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.GroupSpec;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.SessionRef;
import io.orbitkv.recovery.RecoveryRules;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Registered engine instances and their sessions.
 *
 * <p>Design note: an instance id is issued once per registration and never reused by this Manager; the session
 * epoch is random, so a caller cannot guess a live session of another instance, and an epoch from before a
 * re-registration ({@code resume}) is detectably stale. A session is alive while calls or heartbeats arrive within
 * its ttl; {@link #expire} returns the instances whose sessions lapsed so the engine role releases what they held.
 * At most {@code maxSessions} sessions are registered at once (an instance being resumed keeps its place); one more
 * is refused with TOO_MANY_SESSIONS. Confined to the engine role's event loop.
 */
final class SessionRegistry {
    record Instance(long id, long epoch, InstanceIdentity identity, InstanceRole role, byte[] namespace,
                    Map<Integer, GroupSpec> groups, long lastSeenNanos, String tenant, RecoveryRules rules,
                    double prefillTokensPerSecond) {
        Instance touched(long now) {
            return new Instance(id, epoch, identity, role, namespace, groups, now, tenant, rules, prefillTokensPerSecond);
        }

        boolean inNamespace(byte[] other) {
            return Arrays.equals(namespace, other);
        }
    }

    private final Map<Long, Instance> instances = new HashMap<>();
    private final SecureRandom random = new SecureRandom();
    private final Ticker ticker;
    private final long ttlNanos;
    private final int maxSessions;
    /** Instances between {@link #beginResume} and {@link #resume}: their places stay taken. */
    private int resuming;
    private long nextId;

    SessionRegistry(Ticker ticker, long ttlNanos, int maxSessions, long firstId) {
        this.ticker = ticker;
        this.ttlNanos = ttlNanos;
        this.maxSessions = maxSessions;
        this.nextId = firstId;
    }

    Instance register(InstanceIdentity identity, InstanceRole role, String tenant, RecoveryRules rules) {
        return register(identity, role, tenant, rules, 0);
    }

    /** @param prefillTokensPerSecond the engine's declared prefill rate; 0: none */
    Instance register(InstanceIdentity identity, InstanceRole role, String tenant, RecoveryRules rules,
                      double prefillTokensPerSecond) {
        if (instances.size() + resuming >= maxSessions) {
            throw new OrbitException(ErrorReason.TOO_MANY_SESSIONS, "the Manager holds " + maxSessions
                    + " registered sessions already (session.max-registered); unregister one or raise the limit");
        }
        Map<Integer, GroupSpec> groups = new HashMap<>();
        for (GroupSpec g : identity.getGroupsList()) {
            groups.put(g.getGroupId(), g);
        }
        long epoch = random.nextLong() & Long.MAX_VALUE | 1L;
        Instance instance = new Instance(nextId++, epoch, identity, role, Namespaces.derive(identity),
                Map.copyOf(groups), ticker.nanos(), tenant, rules, prefillTokensPerSecond);
        instances.put(instance.id(), instance);
        return instance;
    }

    /** Checks the caller's session and refreshes its liveness. */
    Instance authenticate(SessionRef session) {
        Instance instance = instances.get(session.getInstanceId());
        if (instance == null) {
            throw new OrbitException(ErrorReason.UNKNOWN_INSTANCE, "instance " + session.getInstanceId()
                    + " is not registered (never registered, unregistered, or its session expired)");
        }
        if (instance.epoch() != session.getSessionEpoch()) {
            throw new OrbitException(ErrorReason.STALE_SESSION_EPOCH, "session epoch does not match the live session of instance "
                    + session.getInstanceId());
        }
        Instance touched = instance.touched(ticker.nanos());
        instances.put(touched.id(), touched);
        return touched;
    }

    /**
     * Ends the live session of an instance that is re-registering; its place stays taken until {@link #resume} or
     * {@link #abandonResume}. Returns the old session, or null when the instance is not registered.
     */
    Instance beginResume(long id) {
        Instance old = instances.remove(id);
        if (old != null) {
            resuming++;
        }
        return old;
    }

    /** The resume did not happen (the new identity was refused): the old session is back as it was. */
    void abandonResume(Instance old) {
        resuming--;
        instances.put(old.id(), old);
    }

    /** Re-registers an instance after {@link #beginResume} with a fresh epoch; the old epoch is stale from now on. */
    Instance resume(long id, InstanceIdentity identity, InstanceRole role, String tenant, RecoveryRules rules) {
        return resume(id, identity, role, tenant, rules, 0);
    }

    Instance resume(long id, InstanceIdentity identity, InstanceRole role, String tenant, RecoveryRules rules,
                    double prefillTokensPerSecond) {
        resuming--;
        Map<Integer, GroupSpec> groups = new HashMap<>();
        for (GroupSpec g : identity.getGroupsList()) {
            groups.put(g.getGroupId(), g);
        }
        long epoch = random.nextLong() & Long.MAX_VALUE | 1L;
        Instance instance = new Instance(id, epoch, identity, role, Namespaces.derive(identity), Map.copyOf(groups),
                ticker.nanos(), tenant, rules, prefillTokensPerSecond);
        instances.put(id, instance);
        return instance;
    }

    Instance remove(long id) {
        return instances.remove(id);
    }

    /**
     * Whether that session is the instance's live one now, without refreshing it: a session silent past its ttl is
     * not, even before the sweep ends it.
     */
    boolean live(long id, long epoch) {
        Instance instance = instances.get(id);
        return instance != null && instance.epoch() == epoch && ticker.nanos() - instance.lastSeenNanos() <= ttlNanos;
    }

    /** Removes and returns the instances whose sessions lapsed. */
    List<Instance> expire() {
        long now = ticker.nanos();
        List<Instance> lapsed = new ArrayList<>();
        for (Instance instance : instances.values()) {
            if (now - instance.lastSeenNanos() > ttlNanos) {
                lapsed.add(instance);
            }
        }
        lapsed.forEach(instance -> instances.remove(instance.id()));
        return lapsed;
    }

    int size() {
        return instances.size();
    }

    long ttlNanos() {
        return ttlNanos;
    }
}
