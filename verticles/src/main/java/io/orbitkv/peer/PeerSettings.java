package io.orbitkv.peer;

import io.orbitkv.common.ConfigException;
import io.orbitkv.common.ConfigValues;
import java.util.Map;

/**
 * The peer-transfer settings of one Manager (the {@code peer.*} keys; they act only with {@code cluster.enabled}).
 *
 * @param port              the Manager↔Manager gRPC port (reserve/release, mutual TLS); -1 = off
 * @param transferPort      the transfer (payload) port; -1 = off
 * @param plaintext         {@code peer.transport=plaintext}: the transfer port is plaintext and the source sends
 *                          straight from the shared-memory file (sendfile); only for trusted networks. Default TLS.
 * @param maxLeaseMillis    a source lease lasts at most this long (pins are dropped at expiry)
 * @param creditBytes       source admission per requester: bytes it may hold pinned here at once
 * @param maxKeys           keys per reserve at most
 * @param testFlipPage      test hook: the source flips one byte of the N-th page it sends (0 = never)
 * @param testStallLeasePages test hook: a lease of at least N pages sends half of them, then stalls (0 = never)
 * @param stagingBytes      peer SSD staging: pool bytes (allocator-rounded) this source may hold at once for pages it
 *                          read back from its SSD for peer leases, all requesters together; 0 = no peer SSD staging
 * @param prefaultBytes     requester: at start, a worker write-faults this many bytes of the peer role's pool mapping
 *                          (every 4 KiB page once, values unchanged), so receives land in mapped pages; 0 = never
 * @param transferLoops     event loops of the transfer port's own (both sides): the payload's socket reads, writes and
 *                          received checksums run there, spread over them by connection, off the roles' loops;
 *                          0 = on the peer role's own context (one thread for every transfer)
 * @param verifyThreads     requester: threads that compute each received page's CRC32C once the page has landed, off
 *                          the transfer connection's event loop ({@link TcpPeerTransport}); 0 = inline on the loop as
 *                          each read lands
 * @param warmConnections   requester: transfer connections opened and verified ahead of need to each member that
 *                          serves a peer port, at start, when it joins and at each {@code warmIntervalMillis}, spread
 *                          over the transfer loops (with the control channel: one probe on the gRPC connection);
 *                          0 = no warming; at most {@link IdleConnections#MAX_PER_ENDPOINT}
 * @param warmTimeoutMillis requester: a member's warming round ends within this (what did not open by then is counted
 *                          as failed and left to the next round or the first fetch)
 * @param warmIntervalMillis requester: every this long the warmer tops each member's idle connections up again (the
 *                          idle ones close after {@value IdleConnections#IDLE_SECONDS} s without use); 0 = only at start
 *                          and when a member joins
 * @param mooncakeTe        {@code peer.transport=mooncake-te}: the {@code peer.mooncake-te.*} settings (the trusted
 *                          network, the TE protocol); payload then moves over Mooncake's Transfer Engine
 *                          ({@link MooncakePeerTransport}) and the transfer port stays closed. Null: the built-in
 *                          transport (TLS or plaintext).
 */
public record PeerSettings(int port, int transferPort, boolean plaintext, long maxLeaseMillis, long creditBytes,
                           int maxKeys, long testFlipPage, int testStallLeasePages, long stagingBytes, long prefaultBytes,
                           int transferLoops, int verifyThreads, int warmConnections, long warmTimeoutMillis,
                           long warmIntervalMillis, MooncakeTeSettings mooncakeTe) {
    public static final long PREFAULT_DEFAULT = 4L << 30;
    /** The {@code peer.transport} value that moves payload over Mooncake's Transfer Engine. */
    public static final String MOONCAKE_TE = "mooncake-te";
    /**
     * {@code peer.verify-threads} when not set: 0, the CRC32C inline on the transfer loop. Verifier threads are opt-in
     * until they are shown to help: on the 2-core VM `bench peer` measured 0.64 inline against 0.56 with one verifier
     * (two runs each, perf/README.md), and on many cores the transfer loops already spread the checks (each loop
     * checks its own stream's pages), which is what the 16-core figures were measured with. {@code auto} asks for
     * {@link #autoVerifyThreads}.
     */
    public static final int VERIFY_THREADS_DEFAULT = 0;
    public static final long WARM_TIMEOUT_DEFAULT_MS = 5_000;
    /** Below the requester's idle timeout, so a member's warmed connections are replaced before a fetch finds none. */
    public static final long WARM_INTERVAL_DEFAULT_MS = 20_000;

    /**
     * The keys and defaults of the {@code peer.*} section (with {@link PeerAttemptPolicy}'s keys and the peer
     * fault-injection knobs) of the Manager's configuration.
     */
    public static final Map<String, String> DEFAULTS = Map.ofEntries(
            // Peer transfer (only with the cluster): -1 = off. See docs/cluster.md.
            Map.entry("peer.port", "-1"),
            Map.entry("peer.transfer-port", "-1"),
            Map.entry("peer.transport", "tls"),
            // Empty: required (a CIDR) before peer.transport mooncake-te is accepted. See docs/mooncake-te.md.
            Map.entry("peer.mooncake-te.trusted-network", ""),
            // tcp: TE's TCP transport; auto: TE picks RDMA where a verbs device exists (perf/rdma/te-rdma.sh), else TCP.
            Map.entry("peer.mooncake-te.protocol", "tcp"),
            Map.entry("peer.max-lease-ms", "10000"),
            Map.entry("peer.credit-bytes", "256MiB"),
            Map.entry("peer.max-keys", "4096"),
            Map.entry("peer.staging-bytes", "64MiB"),
            Map.entry("peer.prefault-bytes", "4GiB"),
            Map.entry("peer.transfer-loops", "auto"),
            // 0: the CRC32C inline on the loop (VERIFY_THREADS_DEFAULT); auto: min(4, cores / 4) verifiers.
            Map.entry("peer.verify-threads", "0"),
            // auto: one warmed transfer connection per transfer loop to each member (autoWarmConnections), at most
            // IdleConnections.MAX_PER_ENDPOINT; 0: no warming.
            Map.entry("peer.warm-connections", "auto"),
            Map.entry("peer.warm-timeout-ms", String.valueOf(WARM_TIMEOUT_DEFAULT_MS)),
            Map.entry("peer.warm-interval-ms", String.valueOf(WARM_INTERVAL_DEFAULT_MS)),
            Map.entry("peer.attempt-timeout-ms", String.valueOf(PeerAttemptPolicy.CEILING_DEFAULT_MS)),
            Map.entry("peer.fallback-reserve-ms", String.valueOf(PeerAttemptPolicy.FALLBACK_RESERVE_DEFAULT_MS)),
            // Test hooks, never for operators (0 = off): each breaks something on purpose.
            Map.entry("fault-injection.peer.flip-page", "0"),
            Map.entry("fault-injection.peer.stall-lease-pages", "0"));
    public static final PeerSettings OFF = new PeerSettings(-1, -1, false, 10_000, 256L << 20, 4096, 0, 0, 64L << 20);

    /**
     * The default transfer loops: a quarter of the cores, at least 1 and at most 4. One loop moves a TCP stream at
     * about the kernel's single-stream copy rate, and each stream needs a core on both sides (the source's sendfile or
     * encryption, the requester's recv), so a quarter leaves the engines and the roles their cores.
     */
    public static int defaultTransferLoops() {
        return Math.clamp(Runtime.getRuntime().availableProcessors() / 4, 1, 4);
    }

    /**
     * {@code peer.warm-connections: auto}: one per transfer loop (each loop takes only its own idle connections), at
     * least 1, at most {@link IdleConnections#MAX_PER_ENDPOINT}.
     */
    public static int autoWarmConnections(int transferLoops) {
        return Math.clamp(transferLoops, 1, IdleConnections.MAX_PER_ENDPOINT);
    }

    /**
     * {@code peer.verify-threads: auto}: min(4, cores / 4). A receiving loop lands a page at the rate of one recv copy
     * and one thread's CRC32C (the intrinsic) runs at about twice that rate, so one verifier keeps up with one busy
     * loop; a quarter of the cores, at most 4, leaves the rest to the loops, the engines and the roles; below 4 cores
     * none (a verifier there only competes with the loops for the same cores).
     */
    public static int autoVerifyThreads(int cores) {
        return Math.min(4, cores / 4);
    }

    /** Without transfer-loops and verifier settings: the defaults. */
    public PeerSettings(int port, int transferPort, boolean plaintext, long maxLeaseMillis, long creditBytes, int maxKeys,
                        long testFlipPage, int testStallLeasePages, long stagingBytes, long prefaultBytes) {
        this(port, transferPort, plaintext, maxLeaseMillis, creditBytes, maxKeys, testFlipPage, testStallLeasePages,
                stagingBytes, prefaultBytes, defaultTransferLoops(), VERIFY_THREADS_DEFAULT);
    }

    /** The built-in transport (no Transfer Engine), without warming settings: the defaults. */
    public PeerSettings(int port, int transferPort, boolean plaintext, long maxLeaseMillis, long creditBytes, int maxKeys,
                        long testFlipPage, int testStallLeasePages, long stagingBytes, long prefaultBytes,
                        int transferLoops, int verifyThreads) {
        this(port, transferPort, plaintext, maxLeaseMillis, creditBytes, maxKeys, testFlipPage, testStallLeasePages,
                stagingBytes, prefaultBytes, transferLoops, verifyThreads, autoWarmConnections(transferLoops),
                WARM_TIMEOUT_DEFAULT_MS, WARM_INTERVAL_DEFAULT_MS, null);
    }

    /** Without a prefault setting: the default ({@value #PREFAULT_DEFAULT} bytes). */
    public PeerSettings(int port, int transferPort, boolean plaintext, long maxLeaseMillis, long creditBytes, int maxKeys,
                        long testFlipPage, int testStallLeasePages, long stagingBytes) {
        this(port, transferPort, plaintext, maxLeaseMillis, creditBytes, maxKeys, testFlipPage, testStallLeasePages,
                stagingBytes, PREFAULT_DEFAULT, defaultTransferLoops(), VERIFY_THREADS_DEFAULT);
    }

    /** The same settings with {@code verifyThreads} verifier threads. */
    public PeerSettings withVerifyThreads(int verifyThreads) {
        return new PeerSettings(port, transferPort, plaintext, maxLeaseMillis, creditBytes, maxKeys, testFlipPage,
                testStallLeasePages, stagingBytes, prefaultBytes, transferLoops, verifyThreads, warmConnections,
                warmTimeoutMillis, warmIntervalMillis, mooncakeTe);
    }

    /** The same settings with {@code transferLoops} transfer loops. */
    public PeerSettings withTransferLoops(int transferLoops) {
        return new PeerSettings(port, transferPort, plaintext, maxLeaseMillis, creditBytes, maxKeys, testFlipPage,
                testStallLeasePages, stagingBytes, prefaultBytes, transferLoops, verifyThreads, warmConnections,
                warmTimeoutMillis, warmIntervalMillis, mooncakeTe);
    }

    /** The same settings with {@code connections} warmed per member (0: no warming). */
    public PeerSettings withWarmConnections(int connections) {
        return new PeerSettings(port, transferPort, plaintext, maxLeaseMillis, creditBytes, maxKeys, testFlipPage,
                testStallLeasePages, stagingBytes, prefaultBytes, transferLoops, verifyThreads, connections,
                warmTimeoutMillis, warmIntervalMillis, mooncakeTe);
    }

    /** The same settings over Mooncake's Transfer Engine (null: the built-in transport). */
    public PeerSettings withMooncakeTe(MooncakeTeSettings network) {
        return new PeerSettings(port, transferPort, false, maxLeaseMillis, creditBytes, maxKeys, testFlipPage,
                testStallLeasePages, stagingBytes, prefaultBytes, transferLoops, verifyThreads, warmConnections,
                warmTimeoutMillis, warmIntervalMillis, network);
    }

    public PeerSettings {
        if (verifyThreads < 0 || transferLoops < 0) {
            throw new IllegalArgumentException("verifyThreads and transferLoops must be >= 0, got " + verifyThreads
                    + " and " + transferLoops);
        }
        if (warmConnections < 0 || warmConnections > IdleConnections.MAX_PER_ENDPOINT || warmTimeoutMillis < 1
                || warmIntervalMillis < 0) {
            throw new IllegalArgumentException("warmConnections must be in 0.." + IdleConnections.MAX_PER_ENDPOINT
                    + ", warmTimeoutMillis >= 1 and warmIntervalMillis >= 0, got " + warmConnections + ", "
                    + warmTimeoutMillis + " and " + warmIntervalMillis);
        }
    }

    public boolean enabled() {
        return port > 0 && transferPort > 0;
    }

    /** The {@code peer.*} section (and the peer fault-injection knobs) of the Manager's configuration. */
    public static PeerSettings fromConfig(ConfigValues v) {
        int port = (int) v.integer("peer.port", -1, 65535);
        int transferPort = (int) v.integer("peer.transfer-port", -1, 65535);
        if ((port > 0) != (transferPort > 0)) {
            throw new ConfigException("peer.transfer-port", "peer.port and peer.transfer-port are set together (or neither)");
        }
        if (port > 0 && !v.bool("cluster.enabled")) {
            throw new ConfigException("peer.port", "needs cluster.enabled (peers are cluster members)");
        }
        String transport = v.string("peer.transport").strip();
        if (!transport.equals("tls") && !transport.equals("plaintext") && !transport.equals(MOONCAKE_TE)) {
            throw new ConfigException("peer.transport", "must be tls, plaintext or " + MOONCAKE_TE + ", got '"
                    + transport + "'");
        }
        MooncakeTeSettings te = null;
        if (transport.equals(MOONCAKE_TE)) {
            TrustedNetwork trusted;
            // TE authenticates nobody and listens on every interface: the operator names the network it trusts
            String cidr = v.string("peer.mooncake-te.trusted-network").strip();
            if (cidr.isEmpty()) {
                throw new ConfigException("peer.mooncake-te.trusted-network", "peer.transport " + MOONCAKE_TE
                        + " needs the network it trusts (CIDR, e.g. 10.0.0.0/24): any process that can reach the TE"
                        + " ports can read and overwrite every page of the pool (docs/mooncake-te.md)");
            }
            try {
                trusted = TrustedNetwork.parse(cidr);
            } catch (IllegalArgumentException e) {
                throw new ConfigException("peer.mooncake-te.trusted-network", e.getMessage());
            }
            String host = v.string("cluster.host").strip();
            if (!trusted.contains(host)) {
                throw new ConfigException("peer.mooncake-te.trusted-network", "cluster.host " + host
                        + " (the address TE advertises) is not an IP literal inside " + cidr);
            }
            String protocol = v.string("peer.mooncake-te.protocol").strip();
            if (!protocol.equals(MooncakeTeSettings.PROTOCOL_TCP) && !protocol.equals(MooncakeTeSettings.PROTOCOL_AUTO)) {
                throw new ConfigException("peer.mooncake-te.protocol", "must be tcp or auto, got '" + protocol + "'");
            }
            te = new MooncakeTeSettings(trusted, protocol.equals(MooncakeTeSettings.PROTOCOL_AUTO));
        }
        int transferLoops = v.countOrAuto("peer.transfer-loops", defaultTransferLoops(), 64);
        return new PeerSettings(port, transferPort, transport.equals("plaintext"),
                v.integer("peer.max-lease-ms", 10, 600_000), v.size("peer.credit-bytes", 4096, 1L << 40),
                (int) v.integer("peer.max-keys", 1, 1 << 16), v.integer("fault-injection.peer.flip-page", 0, Long.MAX_VALUE),
                (int) v.integer("fault-injection.peer.stall-lease-pages", 0, 1 << 16), v.size("peer.staging-bytes", 0, 1L << 40),
                v.size("peer.prefault-bytes", 0, 1L << 50),
                transferLoops,
                v.countOrAuto("peer.verify-threads",
                        autoVerifyThreads(Runtime.getRuntime().availableProcessors()), 64),
                v.countOrAuto("peer.warm-connections", autoWarmConnections(transferLoops), IdleConnections.MAX_PER_ENDPOINT),
                v.integer("peer.warm-timeout-ms", 1, 600_000), v.integer("peer.warm-interval-ms", 0, 3_600_000), te);
    }
}
