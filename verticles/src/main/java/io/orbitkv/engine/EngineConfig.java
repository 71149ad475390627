package io.orbitkv.engine;

import io.orbitkv.common.ConfigException;
import io.orbitkv.common.ConfigValues;
import java.nio.file.Path;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

/**
 * The engine role's section of the Manager's configuration: its doors ({@code grpc.*}, {@code bridge.*},
 * {@code engine.colocated-*}), engine sessions ({@code session.*}) and the engine token ({@code auth.token-file}).
 * {@link #settings} turns it into the role's {@link EngineSettings} once the Manager has the token and the pool.
 *
 * @param unixSocket         the gRPC Unix socket ({@code <data-dir>/engine.sock} unless set)
 * @param maxMessageBytes    larger gRPC messages are refused by the transport
 * @param maxPagesPerRequest larger publishes and queries are refused
 * @param sessionTtlMillis   a session silent this long lapses
 * @param tokenFile          the engine token ({@code <data-dir>/engine.token} unless set; created when missing)
 */
public record EngineConfig(Path unixSocket, String tcpHost, int tcpPort, long maxMessageBytes,
                           int maxPagesPerRequest, long sessionTtlMillis, SessionPolicy sessions, BridgeDoor bridge,
                           ColocatedDoor colocated, Path tokenFile) {

    /** The keys and defaults this section adds to the Manager's configuration. */
    public static final Map<String, String> DEFAULTS = Map.ofEntries(
            Map.entry("grpc.unix-socket", ""),
            Map.entry("grpc.tcp-host", "127.0.0.1"),
            Map.entry("grpc.tcp-port", "50055"),
            Map.entry("grpc.max-message", "16MiB"),
            Map.entry("grpc.max-pages-per-request", "65536"),
            // Comma-separated uids allowed on the Unix socket; empty = only the Manager's own.
            Map.entry("grpc.allowed-uids", ""),
            Map.entry("session.ttl-ms", "30000"),
            // Empty: twice session.ttl-ms.
            Map.entry("session.quarantine-ms", ""),
            Map.entry("session.max-registered", "4096"),
            Map.entry("auth.token-file", ""),
            Map.entry("bridge.host", "127.0.0.1"),
            // Empty: the event-bus bridge is off.
            Map.entry("bridge.port", ""),
            Map.entry("bridge.max-frame", "24MiB"),
            Map.entry("bridge.max-outstanding-per-connection", "64"),
            Map.entry("bridge.max-connections", "64"),
            // Empty: <data-dir>/colocated.sock; "off": no co-located channel.
            Map.entry("engine.colocated-socket", ""),
            Map.entry("engine.colocated-max-frame", "256KiB"),
            Map.entry("engine.colocated-max-in-flight", "32"),
            Map.entry("engine.colocated-max-connections", "64"));

    /**
     * The co-located channel (see {@link ColocatedEngineDoor}): a SEQPACKET Unix socket beside gRPC.
     *
     * @param socket         its path, or null when {@code engine.colocated-socket} is {@code off}
     * @param maxFrameBytes  a longer frame, either way, is refused (OVERSIZED_REQUEST)
     * @param maxInFlight    requests of one connection in the Manager at once; more: TOO_MANY_OUTSTANDING
     * @param maxConnections connections at once; one more is refused and closed
     */
    public record ColocatedDoor(Path socket, int maxFrameBytes, int maxInFlight, int maxConnections) {
        public boolean enabled() {
            return socket != null;
        }
    }

    /**
     * The event-bus bridge door (off unless {@code bridge.port} is set).
     *
     * @param port                         {@code -1} = off; 0 = an ephemeral port
     * @param maxFrameBytes                a longer frame is refused (OVERSIZED_REQUEST)
     * @param maxOutstandingPerConnection  requests of one connection in the Manager at once
     * @param maxConnections               connections open at once
     */
    public record BridgeDoor(String host, int port, long maxFrameBytes, int maxOutstandingPerConnection,
                             int maxConnections) {
        public boolean enabled() {
            return port >= 0;
        }
    }

    /**
     * Engine sessions and who may open them.
     *
     * @param quarantineMillis how long the pool slots a session held when it ended (lapse, unregister, resume) are
     *                         kept out of reuse: its engine may still be copying out of, or writing into, them
     * @param maxRegistered    sessions registered at once; one more is refused with TOO_MANY_SESSIONS
     * @param allowedPeerUids  users allowed on the Unix socket (SO_PEERCRED); empty = the Manager's own uid
     */
    public record SessionPolicy(long quarantineMillis, int maxRegistered, Set<Integer> allowedPeerUids) {}

    /** Paths left empty default to files inside {@code dataDir}. */
    public static EngineConfig fromConfig(ConfigValues v, Path dataDir) {
        String socket = v.string("grpc.unix-socket");
        String token = v.string("auth.token-file");
        return new EngineConfig(
                socket.isBlank() ? dataDir.resolve("engine.sock") : Path.of(socket),
                v.host("grpc.tcp-host"),
                v.port("grpc.tcp-port"),
                v.size("grpc.max-message", 64L << 10, 1L << 30),
                (int) v.integer("grpc.max-pages-per-request", 1, 1 << 20),
                v.integer("session.ttl-ms", 100, 24L * 3600 * 1000),
                sessionPolicy(v),
                bridgeDoor(v),
                colocatedDoor(v, dataDir),
                token.isBlank() ? dataDir.resolve("engine.token") : Path.of(token));
    }

    private static ColocatedDoor colocatedDoor(ConfigValues v, Path dataDir) {
        String socket = v.string("engine.colocated-socket").strip();
        Path path = socket.equals("off") ? null : socket.isEmpty() ? dataDir.resolve("colocated.sock") : Path.of(socket);
        return new ColocatedDoor(path, (int) v.size("engine.colocated-max-frame", 4096, 64L << 20),
                (int) v.integer("engine.colocated-max-in-flight", 1, 1 << 16),
                (int) v.integer("engine.colocated-max-connections", 1, 1 << 16));
    }

    private static BridgeDoor bridgeDoor(ConfigValues v) {
        int port = v.string("bridge.port").isBlank() ? -1 : v.port("bridge.port");
        return new BridgeDoor(v.host("bridge.host"), port, v.size("bridge.max-frame", 1024, (1L << 30)),
                (int) v.integer("bridge.max-outstanding-per-connection", 1, 1 << 16),
                (int) v.integer("bridge.max-connections", 1, 1 << 16));
    }

    private static SessionPolicy sessionPolicy(ConfigValues v) {
        long ttl = v.integer("session.ttl-ms", 100, 24L * 3600 * 1000);
        long quarantine = v.string("session.quarantine-ms").isBlank() ? 2 * ttl
                : v.integer("session.quarantine-ms", 0, 7L * 24 * 3600 * 1000);
        int maxRegistered = (int) v.integer("session.max-registered", 1, 1 << 20);
        Set<Integer> uids = new TreeSet<>();
        for (String uid : v.string("grpc.allowed-uids").split(",")) {
            if (!uid.isBlank()) {
                try {
                    uids.add(Integer.parseUnsignedInt(uid.strip()));
                } catch (NumberFormatException e) {
                    throw new ConfigException("grpc.allowed-uids", "must be comma-separated numeric uids, got '"
                            + v.string("grpc.allowed-uids") + "'");
                }
            }
        }
        return new SessionPolicy(quarantine, maxRegistered, Set.copyOf(uids));
    }

    /** The engine role's settings: this section, the engine token, and the pool engines map. */
    public EngineSettings settings(String token, Path poolPath, long poolBytes) {
        return new EngineSettings()
                .unixSocket(unixSocket)
                .tcp(tcpHost, tcpPort)
                .maxMessageBytes(maxMessageBytes)
                .maxPagesPerRequest(maxPagesPerRequest)
                .sessionTtlNanos(TimeUnit.MILLISECONDS.toNanos(sessionTtlMillis))
                .quarantineNanos(TimeUnit.MILLISECONDS.toNanos(sessions.quarantineMillis()))
                .maxSessions(sessions.maxRegistered())
                .allowedPeerUids(sessions.allowedPeerUids())
                .token(token)
                .pool(poolPath, poolBytes)
                .bridge(bridge.host(), bridge.enabled() ? bridge.port() : EngineSettings.BRIDGE_OFF)
                .bridgeMaxFrameBytes(bridge.maxFrameBytes())
                .bridgeMaxOutstandingPerConnection(bridge.maxOutstandingPerConnection())
                .bridgeMaxConnections(bridge.maxConnections())
                .colocatedSocket(colocated.socket())
                .colocatedBounds(colocated.maxFrameBytes(), colocated.maxInFlight(), colocated.maxConnections());
    }
}
