package io.orbitkv.engine;

import java.nio.file.Path;
import java.util.Objects;
import java.util.Set;

/**
 * Settings of the engine role; fluent. Sizes in bytes, times in nanoseconds. Required: {@link #unixSocket},
 * {@link #token}, {@link #poolPath} and {@link #poolBytes}; the rest have the defaults of conf/orbitkv.yaml.
 */
public final class EngineSettings {
    public static final String TCP_HOST_DEFAULT = "127.0.0.1";
    public static final long MAX_MESSAGE_BYTES_DEFAULT = 16L << 20;
    public static final int MAX_PAGES_PER_REQUEST_DEFAULT = 65_536;
    public static final long SESSION_TTL_NANOS_DEFAULT = 30_000_000_000L;
    public static final int MAX_SESSIONS_DEFAULT = 4096;

    private Path unixSocket;
    private String tcpHost = TCP_HOST_DEFAULT;
    private int tcpPort;
    private long maxMessageBytes = MAX_MESSAGE_BYTES_DEFAULT;
    private int maxPagesPerRequest = MAX_PAGES_PER_REQUEST_DEFAULT;
    private long sessionTtlNanos = SESSION_TTL_NANOS_DEFAULT;
    private long quarantineNanos = 2 * SESSION_TTL_NANOS_DEFAULT;
    private int maxSessions = MAX_SESSIONS_DEFAULT;
    private String token;
    private Path poolPath;
    private long poolBytes;
    private Set<Integer> allowedPeerUids = Set.of();
    private SessionCleanup.Faults cleanupFaults = SessionCleanup.Faults.NONE;

    /** The engine socket; bound owner-only (see {@link GrpcEngineDoor}). */
    public EngineSettings unixSocket(Path unixSocket) {
        this.unixSocket = unixSocket;
        return this;
    }

    /** The TCP door; port 0 = an ephemeral port. */
    public EngineSettings tcp(String host, int port) {
        this.tcpHost = host;
        this.tcpPort = port;
        return this;
    }

    /** Larger gRPC messages are refused by the transport (OVERSIZED_REQUEST). */
    public EngineSettings maxMessageBytes(long maxMessageBytes) {
        this.maxMessageBytes = maxMessageBytes;
        return this;
    }

    /** Larger publishes and queries are refused (OVERSIZED_REQUEST). */
    public EngineSettings maxPagesPerRequest(int maxPagesPerRequest) {
        this.maxPagesPerRequest = maxPagesPerRequest;
        return this;
    }

    /** A session silent this long lapses and everything it held is released. */
    public EngineSettings sessionTtlNanos(long sessionTtlNanos) {
        this.sessionTtlNanos = sessionTtlNanos;
        return this;
    }

    /** How long slots of an ended session are kept out of reuse; lease tombstones live at least this long. */
    public EngineSettings quarantineNanos(long quarantineNanos) {
        this.quarantineNanos = quarantineNanos;
        return this;
    }

    /** Registered sessions at most; one more is refused (TOO_MANY_SESSIONS). */
    public EngineSettings maxSessions(int maxSessions) {
        this.maxSessions = maxSessions;
        return this;
    }

    /** The engine token every call must present. */
    public EngineSettings token(String token) {
        this.token = token;
        return this;
    }

    /** The pool engines map: its path and size. */
    public EngineSettings pool(Path poolPath, long poolBytes) {
        this.poolPath = poolPath;
        this.poolBytes = poolBytes;
        return this;
    }

    /** Users allowed on the Unix socket (by SO_PEERCRED); empty = only the Manager's own effective uid. */
    public EngineSettings allowedPeerUids(Set<Integer> allowedPeerUids) {
        this.allowedPeerUids = Set.copyOf(allowedPeerUids);
        return this;
    }

    /** Test seam: failures injected into session cleanup steps (never set in production). */
    public EngineSettings cleanupFaults(SessionCleanup.Faults cleanupFaults) {
        this.cleanupFaults = Objects.requireNonNull(cleanupFaults);
        return this;
    }

    public Path unixSocket() {
        return unixSocket;
    }

    public String tcpHost() {
        return tcpHost;
    }

    public int tcpPort() {
        return tcpPort;
    }

    public long maxMessageBytes() {
        return maxMessageBytes;
    }

    public int maxPagesPerRequest() {
        return maxPagesPerRequest;
    }

    public long sessionTtlNanos() {
        return sessionTtlNanos;
    }

    public long quarantineNanos() {
        return quarantineNanos;
    }

    public int maxSessions() {
        return maxSessions;
    }

    public String token() {
        return token;
    }

    public Path poolPath() {
        return poolPath;
    }

    public long poolBytes() {
        return poolBytes;
    }

    public Set<Integer> allowedPeerUids() {
        return allowedPeerUids;
    }

    public SessionCleanup.Faults cleanupFaults() {
        return cleanupFaults;
    }

    /** Checks the required settings; throws IllegalArgumentException naming the first missing or invalid one. */
    EngineSettings validate() {
        require(unixSocket != null && unixSocket.getParent() != null, "unixSocket must be a path with a parent directory");
        require(token != null && token.length() >= 16, "token must be at least 16 characters");
        require(poolPath != null && poolBytes > 0, "pool path and size are required");
        require(maxMessageBytes > 0 && maxPagesPerRequest > 0, "message and page limits must be positive");
        require(sessionTtlNanos > 0 && quarantineNanos >= 0, "session ttl must be positive, quarantine non-negative");
        require(maxSessions > 0, "maxSessions must be positive");
        return this;
    }

    private static void require(boolean condition, String message) {
        if (!condition) {
            throw new IllegalArgumentException("engine settings: " + message);
        }
    }
}
