package io.orbitkv.model;

import io.vertx.core.json.DecodeException;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * A member key's value in etcd: who the Manager is (id, a random incarnation per start, the epoch of its current
 * registration), where its peers reach it (endpoints by name: {@code hazelcast}, {@code eventbus}, {@code peer}) and
 * what it can do (capabilities). Stored as JSON so an operator can read it with {@code etcdctl get --prefix}.
 *
 * <p>Incarnations are time-ordered (start time in the high bits, random low bits: see {@link #newIncarnation}), so
 * "older incarnation" is a comparison, and two starts in the same millisecond still differ.
 */
public record MemberRecord(String id, long incarnation, long epoch, Map<String, String> endpoints,
                           List<String> capabilities) {
    private static final java.util.regex.Pattern MEMBER_ID = java.util.regex.Pattern.compile("[a-z0-9][a-z0-9-]{0,62}");

    /** A member id: 1..63 of [a-z0-9-], starting with a letter or digit (the only peer label metrics carry). */
    public static boolean validMemberId(String id) {
        return id != null && MEMBER_ID.matcher(id).matches();
    }

    /** A value longer than this is refused: members are small, and etcd values are read on every watch event. */
    public static final int MAX_VALUE_BYTES = 8192;

    public MemberRecord {
        if (!validMemberId(id)) {
            throw new IllegalArgumentException("invalid member id");
        }
        if (incarnation <= 0 || epoch <= 0) {
            throw new IllegalArgumentException("incarnation and epoch must be positive");
        }
        endpoints = Map.copyOf(new TreeMap<>(endpoints));
        capabilities = List.copyOf(capabilities);
    }

    /** A fresh incarnation: milliseconds since the epoch in the high 41 bits, 22 random bits (always positive). */
    public static long newIncarnation(long nowMillis, long random) {
        return ((nowMillis & ((1L << 41) - 1)) << 22) | (random & ((1L << 22) - 1)) | 1L;
    }

    public byte[] toBytes() {
        JsonObject ep = new JsonObject();
        endpoints.forEach(ep::put);
        return new JsonObject().put("id", id).put("incarnation", incarnation).put("epoch", epoch).put("endpoints", ep)
                .put("capabilities", new JsonArray(new ArrayList<>(capabilities))).encode()
                .getBytes(StandardCharsets.UTF_8);
    }

    /** Parses a member value; a malformed one is an IllegalArgumentException (the watcher counts and skips it). */
    public static MemberRecord parse(byte[] value) {
        if (value.length > MAX_VALUE_BYTES) {
            throw new IllegalArgumentException("member value of " + value.length + " bytes is too long");
        }
        try {
            JsonObject json = new JsonObject(new String(value, StandardCharsets.UTF_8));
            Map<String, String> endpoints = new TreeMap<>();
            JsonObject ep = Objects.requireNonNullElse(json.getJsonObject("endpoints"), new JsonObject());
            for (String name : ep.fieldNames()) {
                endpoints.put(name, ep.getString(name));
            }
            List<String> caps = new ArrayList<>();
            for (Object c : Objects.requireNonNullElse(json.getJsonArray("capabilities"), new JsonArray())) {
                caps.add(String.valueOf(c));
            }
            return new MemberRecord(json.getString("id"), json.getLong("incarnation", 0L), json.getLong("epoch", 0L),
                    endpoints, caps);
        } catch (DecodeException | ClassCastException | NullPointerException e) {
            throw new IllegalArgumentException("malformed member value: " + e.getMessage());
        }
    }

    public MemberRecord withEpoch(long newEpoch) {
        return new MemberRecord(id, incarnation, newEpoch, endpoints, capabilities);
    }
}
