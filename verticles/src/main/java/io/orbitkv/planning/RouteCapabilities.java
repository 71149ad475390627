package io.orbitkv.planning;

import java.util.Collections;
import java.util.EnumMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import io.orbitkv.model.plan.RouteTemplate;

/**
 * Which route templates this Manager can execute, and for each one it cannot, why (probed once by the owner that would
 * execute it, the cause kept). Capability filters routes before any costing; a template without an executor is never
 * enumerated, and an explicit request for it fails closed with this cause.
 *
 * @param unavailable       template → cause; a template not named here is executable
 * @param engineRestoreCause empty when Manager-executed restores into engine memory are possible; otherwise why not
 */
public record RouteCapabilities(Map<RouteTemplate, String> unavailable, Optional<String> engineRestoreCause) {

    public RouteCapabilities {
        EnumMap<RouteTemplate, String> copy = new EnumMap<>(RouteTemplate.class);
        copy.putAll(unavailable);
        copy.values().forEach(cause -> Objects.requireNonNull(cause, "cause"));
        unavailable = Collections.unmodifiableMap(copy);
        Objects.requireNonNull(engineRestoreCause, "engineRestoreCause");
    }

    /**
     * What a single Manager executes today: DRAM leases, and host materialization from local SSD when the tier is on.
     * Peers need the peer role; Manager-executed restores (and so the direct SSD restore) need the restore role.
     */
    public static RouteCapabilities localOnly(boolean ssdEnabled) {
        EnumMap<RouteTemplate, String> unavailable = new EnumMap<>(RouteTemplate.class);
        String noRestore = "no Manager-executed restore: the restore role is not running";
        String noPeers = "no peer transport: the peer role is not running";
        unavailable.put(RouteTemplate.LOCAL_SSD_URING, noRestore);
        unavailable.put(RouteTemplate.HOST_FROM_PEER_DRAM, noPeers);
        unavailable.put(RouteTemplate.HOST_FROM_PEER_SSD, noPeers);
        if (!ssdEnabled) {
            unavailable.put(RouteTemplate.HOST_FROM_LOCAL_SSD, "the SSD tier is off (ssd.enabled: false)");
        }
        return new RouteCapabilities(unavailable, Optional.of(noRestore));
    }

    /** Every template executable, engine restores included. */
    public static RouteCapabilities all() {
        return new RouteCapabilities(Map.of(), Optional.empty());
    }

    public boolean executable(RouteTemplate template) {
        return !unavailable.containsKey(template);
    }

    public Optional<String> cause(RouteTemplate template) {
        return Optional.ofNullable(unavailable.get(template));
    }

    public RouteCapabilities with(RouteTemplate template) {
        EnumMap<RouteTemplate, String> next = new EnumMap<>(RouteTemplate.class);
        next.putAll(unavailable);
        next.remove(template);
        return new RouteCapabilities(next, engineRestoreCause);
    }

    public RouteCapabilities without(RouteTemplate template, String cause) {
        EnumMap<RouteTemplate, String> next = new EnumMap<>(RouteTemplate.class);
        next.putAll(unavailable);
        next.put(template, cause);
        return new RouteCapabilities(next, engineRestoreCause);
    }

    public RouteCapabilities withEngineRestore(Optional<String> cause) {
        return new RouteCapabilities(unavailable, cause);
    }
}
