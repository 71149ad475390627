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
    /** The event-bus bridge's port when it is off (the default). */
    public static final int BRIDGE_OFF = -1;
    public static final String BRIDGE_HOST_DEFAULT = "127.0.0.1";
    /** One frame carries one base64 message: 4/3 of the 16 MiB message limit plus the JSON envelope. */
    public static final long BRIDGE_MAX_FRAME_BYTES_DEFAULT = 24L << 20;
    public static final int BRIDGE_MAX_OUTSTANDING_PER_CONNECTION_DEFAULT = 64;
    public static final int BRIDGE_MAX_CONNECTIONS_DEFAULT = 64;
    public static final int COLOCATED_MAX_FRAME_BYTES_DEFAULT = 256 << 10;
    public static final int COLOCATED_MAX_IN_FLIGHT_DEFAULT = 32;
    public static final int COLOCATED_MAX_CONNECTIONS_DEFAULT = 64;

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
    private String bridgeHost = BRIDGE_HOST_DEFAULT;
    private int bridgePort = BRIDGE_OFF;
    private long bridgeMaxFrameBytes = BRIDGE_MAX_FRAME_BYTES_DEFAULT;
    private int bridgeMaxOutstandingPerConnection = BRIDGE_MAX_OUTSTANDING_PER_CONNECTION_DEFAULT;
    private int bridgeMaxConnections = BRIDGE_MAX_CONNECTIONS_DEFAULT;
    private Path colocatedSocket;
    private int colocatedMaxFrameBytes = COLOCATED_MAX_FRAME_BYTES_DEFAULT;
    private int colocatedMaxInFlight = COLOCATED_MAX_IN_FLIGHT_DEFAULT;
    private int colocatedMaxConnections = COLOCATED_MAX_CONNECTIONS_DEFAULT;
    private String memberId;

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

    /**
     * The event-bus bridge door (see {@link BridgeEngineDoor}): on at this host and port (0 = an ephemeral port),
     * or off with {@link #BRIDGE_OFF}.
     */
    public EngineSettings bridge(String host, int port) {
        this.bridgeHost = host;
        this.bridgePort = port;
        return this;
    }

    /** A bridge frame (its JSON, after the 4-byte length) longer than this is refused (OVERSIZED_REQUEST). */
    public EngineSettings bridgeMaxFrameBytes(long bridgeMaxFrameBytes) {
        this.bridgeMaxFrameBytes = bridgeMaxFrameBytes;
        return this;
    }

    /** Requests one bridge connection may have in the Manager at once; one more is refused (TOO_MANY_OUTSTANDING). */
    public EngineSettings bridgeMaxOutstandingPerConnection(int bridgeMaxOutstandingPerConnection) {
        this.bridgeMaxOutstandingPerConnection = bridgeMaxOutstandingPerConnection;
        return this;
    }

    /** Bridge connections open at once; one more is answered TOO_MANY_OUTSTANDING and closed. */
    public EngineSettings bridgeMaxConnections(int bridgeMaxConnections) {
        this.bridgeMaxConnections = bridgeMaxConnections;
        return this;
    }

    /** The co-located channel (see {@link ColocatedEngineDoor}) at this path, or off with null. */
    public EngineSettings colocatedSocket(Path colocatedSocket) {
        this.colocatedSocket = colocatedSocket;
        return this;
    }

    /**
     * The co-located channel's bounds: a frame (either way) longer than {@code maxFrameBytes} is refused
     * (OVERSIZED_REQUEST); one more request than {@code maxInFlight} of one connection is refused
     * (TOO_MANY_OUTSTANDING); one more connection than {@code maxConnections} is refused and closed.
     */
    public EngineSettings colocatedBounds(int maxFrameBytes, int maxInFlight, int maxConnections) {
        this.colocatedMaxFrameBytes = maxFrameBytes;
        this.colocatedMaxInFlight = maxInFlight;
        this.colocatedMaxConnections = maxConnections;
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

    public boolean bridgeEnabled() {
        return bridgePort != BRIDGE_OFF;
    }

    public String bridgeHost() {
        return bridgeHost;
    }

    public int bridgePort() {
        return bridgePort;
    }

    public long bridgeMaxFrameBytes() {
        return bridgeMaxFrameBytes;
    }

    public int bridgeMaxOutstandingPerConnection() {
        return bridgeMaxOutstandingPerConnection;
    }

    public int bridgeMaxConnections() {
        return bridgeMaxConnections;
    }

    public boolean colocatedEnabled() {
        return colocatedSocket != null;
    }

    public Path colocatedSocket() {
        return colocatedSocket;
    }

    /**
     * This Manager's cluster member id (null: single host). With it, consumers' demands may name producers on other
     * Managers, and this Manager answers other Managers about its own producers (Demand.producer).
     */
    public EngineSettings memberId(String memberId) {
        this.memberId = memberId;
        return this;
    }

    public String memberId() {
        return memberId;
    }

    public int colocatedMaxFrameBytes() {
        return colocatedMaxFrameBytes;
    }

    public int colocatedMaxInFlight() {
        return colocatedMaxInFlight;
    }

    public int colocatedMaxConnections() {
        return colocatedMaxConnections;
    }

    /** Checks the required settings; throws IllegalArgumentException naming the first missing or invalid one. */
    EngineSettings validate() {
        require(unixSocket != null && unixSocket.getParent() != null, "unixSocket must be a path with a parent directory");
        require(token != null && token.length() >= 16, "token must be at least 16 characters");
        require(poolPath != null && poolBytes > 0, "pool path and size are required");
        require(maxMessageBytes > 0 && maxPagesPerRequest > 0, "message and page limits must be positive");
        require(sessionTtlNanos > 0 && quarantineNanos >= 0, "session ttl must be positive, quarantine non-negative");
        require(maxSessions > 0, "maxSessions must be positive");
        require(bridgePort == BRIDGE_OFF || (bridgePort >= 0 && bridgePort <= 65535 && bridgeHost != null),
                "bridge port must be 0..65535 (or BRIDGE_OFF) with a host");
        require(bridgeMaxFrameBytes >= 1024 && bridgeMaxFrameBytes <= Integer.MAX_VALUE - 4,
                "bridge frame limit must be between 1 KiB and 2 GiB");
        require(bridgeMaxOutstandingPerConnection > 0 && bridgeMaxConnections > 0,
                "bridge outstanding and connection limits must be positive");
        require(colocatedSocket == null || (colocatedSocket.getParent() != null && !colocatedSocket.equals(unixSocket)),
                "the co-located socket must be a path with a parent directory, other than the gRPC socket");
        require(colocatedMaxFrameBytes >= 4096 && colocatedMaxFrameBytes <= 64 << 20,
                "co-located frame limit must be between 4 KiB and 64 MiB");
        require(colocatedMaxInFlight > 0 && colocatedMaxConnections > 0,
                "co-located in-flight and connection limits must be positive");
        return this;
    }

    private static void require(boolean condition, String message) {
        if (!condition) {
            throw new IllegalArgumentException("engine settings: " + message);
        }
    }
}
