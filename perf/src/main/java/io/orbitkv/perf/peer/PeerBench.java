package io.orbitkv.perf.peer;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.clusterkit.ClusterCertificates;
import io.orbitkv.clusterkit.LocalCluster;
import io.orbitkv.clusterkit.LocalEtcd;
import io.orbitkv.engine.Namespaces;
import io.orbitkv.manager.Manager;
import io.orbitkv.manager.ManagerConfig;
import io.orbitkv.peer.PeerSettings;
import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.MachineInfo;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.perf.report.KeyedContent;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.GroupChain;
import io.orbitkv.protocol.engine.LeasedPage;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.protocol.engine.GroupKind;
import io.orbitkv.protocol.engine.GroupSpec;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.PublishSlot;
import io.orbitkv.protocol.engine.Representation;
import io.orbitkv.protocol.engine.SlotStatus;
import io.orbitkv.peer.PeerProxy;
import io.orbitkv.peer.PeerVerticle;
import io.orbitkv.model.StateKey;
import io.vertx.core.Future;
import io.vertx.core.json.JsonObject;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * {@code orbitkv bench peer}: restore throughput between two Managers on 127.0.0.1 through the peer transport, against
 * {@code iperf3} on loopback in the same run. The source Manager is a process (started by pid, with etcd), the
 * requester a Manager in this JVM whose peer role fetches. Each fetch is one lease of {@code --pages} 2 MiB pages into
 * fresh local slots; the measured rounds keep {@code --in-flight} fetches going at once. The runs (modes): plaintext
 * (sendfile from the pool file) on the default pool directory ({@code /dev/shm}, 4 KiB pages), plaintext on a
 * huge-page tmpfs the bench mounts (root only), and mutual TLS on the default pool; {@code --pool-dir} runs every
 * transport on that one directory instead.
 *
 * <p>Headline: {@code parallel_transfer_ratio}, plaintext on the default pool against as many iperf3 pairs as fetches
 * in flight. The ratios against one iperf3 stream ({@code transfer_ratio}) and the huge-page rows are reported beside it.
 *
 * <p>Verification: every received page is CRC32C-checked against the source's checksum by the requester's seal (the
 * Manager's own check). Independently, a sample of the measured fetches ({@code --read-back-share}) is read back
 * through an engine session on the requester and compared byte for byte with the bytes derived from each key
 * ({@link KeyedContent}), which is how the source published them; a sampled page that is not READY at once from the
 * requester's DRAM, or that needed another peer fetch, fails the run. Each fetch's byte and page counts are checked.
 *
 * <p>Design note (ownership): the bench owns etcd and the source process through {@link LocalCluster} (closed, by pid,
 * in every outcome), each requester Manager and its read-back client (closed in a finally), the iperf3 servers it
 * starts (destroyed after their one test), the huge-page mount ({@link BenchPoolDir}) and its temporary directory
 * (deleted). Throughput counts only the measured rounds (warm-up fetches of the same size run first).
 */
public final class PeerBench {
    static final int PAGE = 2 << 20;
    /** The seed of the read-back sample (seeded: a report's sample can be recomputed). */
    private static final long SAMPLE_SEED = 17;
    /** At most this many failure descriptions per mode (the counts are complete). */
    private static final int MAX_DETAILS = 8;

    private PeerBench() {}

    private static void progress(String format, Object... args) {
        System.err.println("bench peer: " + String.format(format, args));
    }

    /**
     * A bench-side seam for the tests that break the path and for running the source from a test class path;
     * {@link #NONE} in the command.
     */
    interface Hooks {
        Hooks NONE = new Hooks() {};

        /** The command that runs the source Manager; {@code --set key=value} arguments follow it. */
        default List<String> sourceCommand() {
            return List.of(ProcessHandle.current().info().command().orElse("java"), "--enable-native-access=ALL-UNNAMED",
                    "--sun-misc-unsafe-memory-access=allow", "-Xmx512m", "-cp", System.getProperty("java.class.path"),
                    "io.orbitkv.app.OrbitKv", "manager");
        }

        /** A source page of {@code batch} at {@code position}, holding its key's bytes, before the seal. */
        default void published(String batch, int position, MemorySegment slot) {}

        /** One measured fetch of {@code mode}'s {@code round}; {@code real} runs it. */
        default Future<io.orbitkv.peer.PeerCommands.Fetched> fetch(String mode, int round, Supplier<Future<io.orbitkv.peer.PeerCommands.Fetched>> real) {
            return real.get();
        }
    }

    public static JsonObject run(BenchArgs args) {
        return run(args, Hooks.NONE);
    }

    static JsonObject run(BenchArgs args, Hooks hooks) {
        int pages = args.integer("pages", 32);
        int rounds = args.integer("rounds", 16);
        int singles = args.integer("single-fetches", 24);
        int iperfSeconds = args.integer("iperf-seconds", 3);
        int inFlight = args.integer("in-flight", 4);
        int warmUps = args.integer("warm-up-fetches", 8);
        int connectionFetches = args.integer("connection-fetches", 3);
        String poolDir = args.string("pool-dir", "");
        Map<String, String> settings = managerSettings(args.string("setting", ""));
        String verifyThreadsArg = args.string("verify-threads", "");
        double readBackShare = args.decimal("read-back-share", 0.25);
        String transportsArg = args.string("transports", "");
        String transportArg = args.string("transport", "");
        String profile = args.string("profile", "");
        args.requireAllUsed();
        if (!transportsArg.isEmpty() && !transportArg.isEmpty()) {
            throw new IllegalArgumentException("--transport and --transports are exclusive");
        }
        // --transport=T: T beside plaintext (the headline's transport), e.g. --transport=mooncake-te
        List<String> transports = transports(!transportArg.isEmpty()
                ? (transportArg.strip().equals("plaintext") ? "plaintext" : "plaintext," + transportArg)
                : transportsArg.isEmpty() ? "plaintext,tls" : transportsArg);
        int verifyThreads;
        try {
            verifyThreads = verifyThreadsArg.isEmpty() ? -1 : Integer.parseInt(verifyThreadsArg.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--verify-threads must be an integer in 0..64, got '" + verifyThreadsArg + "'");
        }
        if (!verifyThreadsArg.isEmpty() && (verifyThreads < 0 || verifyThreads > 64)) {
            throw new IllegalArgumentException("--verify-threads must be an integer in 0..64, got " + verifyThreads);
        }
        if (pages < 1 || rounds < 1 || singles < 1 || iperfSeconds < 1 || inFlight < 1 || warmUps < 1
                || connectionFetches < 1) {
            throw new IllegalArgumentException("--pages, --rounds, --single-fetches, --iperf-seconds, --in-flight, "
                    + "--warm-up-fetches and --connection-fetches must be >= 1");
        }
        if (!(readBackShare > 0 && readBackShare <= 1)) {
            throw new IllegalArgumentException("--read-back-share must be in (0, 1], got " + readBackShare);
        }
        try {
            return measure(new Shape(pages, rounds, singles, iperfSeconds, inFlight, warmUps, verifyThreads,
                    readBackShare, profile, connectionFetches), poolDir, settings, transports, hooks);
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException("peer bench failed: " + e.getMessage(), e);
        }
    }

    /** {@code --transports=plaintext,tls}: which transports run, plaintext first (the headline needs it). */
    static List<String> transports(String arg) {
        List<String> transports = new ArrayList<>();
        for (String t : arg.split(",")) {
            String name = t.strip();
            if (!name.equals("plaintext") && !name.equals("tls") && !name.equals(PeerSettings.MOONCAKE_TE)
                    || transports.contains(name)) {
                throw new IllegalArgumentException("--transports takes plaintext, tls and/or " + PeerSettings.MOONCAKE_TE
                        + ", got '" + arg + "'");
            }
            transports.add(name);
        }
        if (!transports.contains("plaintext")) {
            throw new IllegalArgumentException("--transports must include plaintext (the headline ratio), got '" + arg + "'");
        }
        transports.sort(java.util.Comparator.comparing(t -> t.equals("tls") ? 1 : t.equals(PeerSettings.MOONCAKE_TE) ? 2 : 0));
        return transports;
    }

    /**
     * {@code --setting=KEY=VALUE[,KEY=VALUE...]}: Manager settings for both Managers, over the bench's own (for
     * instance {@code peer.transfer-loops=4,manager.event-loop-threads=4}); each must be a key the Manager knows.
     */
    static Map<String, String> managerSettings(String arg) {
        Map<String, String> settings = new TreeMap<>();
        if (arg.isBlank()) {
            return settings;
        }
        for (String pair : arg.split(",")) {
            int eq = pair.indexOf('=');
            String key = eq > 0 ? pair.substring(0, eq).strip() : "";
            if (key.isEmpty() || !ManagerConfig.DEFAULTS.containsKey(key)) {
                throw new IllegalArgumentException("--setting takes KEY=VALUE pairs of Manager settings, got '" + pair + "'");
            }
            settings.put(key, pair.substring(eq + 1).strip());
        }
        return settings;
    }

    /**
     * What one run measures: fetch size, measured and warm-up fetches, fetches in flight, single-page fetches, the
     * requester's {@code peer.verify-threads} (-1: the Manager's default), the share of measured fetches read back, and
     * the fetches of {@code pages} pages run alone, one after another (one connection: the per-connection figure).
     */
    record Shape(int pages, int rounds, int singles, int iperfSeconds, int inFlight, int warmUps, int verifyThreads,
                 double readBackShare, String profileDir, int connectionFetches) {
        Shape(int pages, int rounds, int singles, int iperfSeconds, int inFlight, int warmUps, int verifyThreads,
              double readBackShare, String profileDir) {
            this(pages, rounds, singles, iperfSeconds, inFlight, warmUps, verifyThreads, readBackShare, profileDir, 3);
        }

        /** The requester's verifier threads as the Manager will run them. */
        int effectiveVerifyThreads() {
            return verifyThreads < 0 ? PeerSettings.VERIFY_THREADS_DEFAULT : verifyThreads;
        }

        /** Both pools hold every fetched page (each fetch lands in fresh slots), rounded up to 64 MiB, plus 128 MiB. */
        long poolBytes() {
            return ((long) ((rounds + warmUps + connectionFetches) * pages + singles + 1) * PAGE / (64L << 20) + 2)
                    * (64L << 20);
        }

        /** The measured rounds read back: {@code ceil(share × rounds)} of them, seeded, in order. */
        List<Integer> readBackRounds() {
            int n = (int) Math.max(1, Math.ceil(readBackShare * rounds - 1e-9));
            List<Integer> all = new ArrayList<>();
            for (int r = 0; r < rounds; r++) {
                all.add(r);
            }
            java.util.Collections.shuffle(all, new java.util.Random(SAMPLE_SEED));
            List<Integer> sample = new ArrayList<>(all.subList(0, n));
            sample.sort(null);
            return sample;
        }
    }

    /**
     * One run: its name in the report, the transport and where both pools live; {@code index} names the requester's
     * data directory (short: its engine socket lives there, and a Unix socket path has at most 107 bytes).
     */
    record Run(int index, String name, String transport, BenchPoolDir pool) {}

    record Mode(String name, String pool, double bytesPerSecond, double[] latenciesMs, long fetchedBytes,
                double mismatches, double prefaultMs, double sourceReserveChecksums, double acquireMs, double submitMs,
                long hugeMappedBytes, double verifiedOffLoopBytes, double verifiedOnLoopBytes, long readBackPages,
                long measuredPages, FirstFetch first, double connectionBytesPerSecond, List<String> failures) {}

    /**
     * The requester's first fetch from the source (one page, before any other): how long it took, the transfer
     * connections warming had opened before it and those it had to open itself.
     */
    record FirstFetch(double millis, double acquireMillis, double submitMillis, long warmedBefore, long openedByIt) {}

    private static double median(List<Double> values) {
        if (values.isEmpty()) {
            return -1;
        }
        List<Double> sorted = new ArrayList<>(values);
        sorted.sort(null);
        return Math.round(sorted.get(sorted.size() / 2) * 1000) / 1000.0;
    }

    private static JsonObject measure(Shape shape, String poolDirArg, Map<String, String> settings,
                                      List<String> transports, Hooks hooks) throws Exception {
        BenchReport.Builder report = BenchReport.builder("peer").config("page_bytes", PAGE)
                .config("pages_per_fetch", shape.pages()).config("fetches_in_flight", shape.inFlight())
                .config("rounds", shape.rounds()).config("warm_up_fetches", shape.warmUps())
                .config("single_fetches", shape.singles()).config("iperf_seconds", shape.iperfSeconds())
                .config("connection_fetches", shape.connectionFetches())
                .config("manager_settings", settings.toString())
                .config("transfer_loops", ManagerConfig.from(settings).peer().transferLoops())
                .config("requester_verify_threads", shape.effectiveVerifyThreads())
                .config("requester_verify_threads_source", shape.verifyThreads() < 0 ? "default" : "--verify-threads")
                .config("available_processors", Runtime.getRuntime().availableProcessors())
                .config("read_back_rounds", new io.vertx.core.json.JsonArray(shape.readBackRounds()))
                .config("verification", "every received page CRC32C-checked against the source's checksum by the "
                        + "requester's seal; a sample of the measured fetches (read_back_rounds, *_read_back_share) "
                        + "read back through an engine session on the requester and compared byte for byte with bytes "
                        + "derived from each key; byte and page counts of every fetch");
        if (!LocalEtcd.installed()) {
            throw new IllegalStateException("etcd is not installed (/usr/bin/etcd): apt-get install etcd-server");
        }
        String iperf = iperf3();
        double iperfBefore = iperfLoopback(iperf, shape.iperfSeconds());
        progress("iperf3 loopback: %.2f GB/s", iperfBefore / 1e9);
        // The transport moves the fetches in flight on as many connections, on up to peer.transfer-loops loops a side:
        // the same number of iperf3 streams, each a process pair, is the like-for-like baseline.
        int streams = shape.inFlight();
        double parallelBefore = iperfLoopback(iperf, shape.iperfSeconds(), streams);
        progress("iperf3 loopback, %d pairs at once: %.2f GB/s", streams, parallelBefore / 1e9);
        Path dir = Files.createTempDirectory("orbitkv-peer-bench");
        long poolBytes = shape.poolBytes();
        ClusterCertificates.create(dir.resolve("certs"), 2, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
        int peerPort = LocalEtcd.freePort();
        int transferPort = LocalEtcd.freePort();
        List<Mode> modes = new ArrayList<>();
        BenchPoolDir given = poolDirArg.isEmpty() ? null : BenchPoolDir.given(Path.of(poolDirArg));
        BenchPoolDir shm = given != null ? null : BenchPoolDir.managerDefault(Path.of(ManagerConfig.DEFAULTS.get("pool.shm-dir")));
        // Both pools, with room for a restarted source's new pool file while the old one is being removed.
        try (BenchPoolDir huge = given != null ? null : BenchPoolDir.hugeOrShm(dir, 3 * poolBytes + (256L << 20))) {
            List<Run> runs = new ArrayList<>();
            for (String transport : transports) {
                runs.add(new Run(runs.size() + 1, transport.replace('-', '_'), transport, given != null ? given : shm));
                if (transport.equals("plaintext") && huge != null) {
                    if (huge.hugeMount()) {
                        runs.add(new Run(runs.size() + 1, "plaintext_huge_pages", transport, huge));
                    } else {
                        report.config("huge_pages_pool", huge.description());
                    }
                }
            }
            report.config("pool_dir", (given != null ? given : shm).description());
            if (huge != null && huge.hugeMount()) {
                report.config("huge_pages_pool_dir", huge.description());
            }
            Run first = runs.getFirst();
            Map<String, String> sourceSettings = new HashMap<>(Map.of("cluster.lease-ttl-s", "3",
                    "cluster.prefix", "/orbitkv-peer-bench", "ssd.enabled", "false", "pool.size", String.valueOf(poolBytes),
                    "pool.shm-dir", first.pool().dir().toString(), "publish.budget-fraction", "0.9",
                    "session.ttl-ms", "120000", "peer.port", String.valueOf(peerPort),
                    "peer.transfer-port", String.valueOf(transferPort), "peer.transport", first.transport()));
            // Source admission sized for the fetches in flight, twice over: a fetch's release reaches the source
            // after the next fetch's reserve, so the bench measures the transport, not NO_CREDIT refusals.
            sourceSettings.put("peer.credit-bytes", String.valueOf(2L * shape.inFlight() * shape.pages() * PAGE));
            sourceSettings.put("peer.mooncake-te.trusted-network", "127.0.0.1/32"); // read only by mooncake-te runs
            sourceSettings.putAll(settings);
            try (LocalCluster cluster = LocalCluster.start(new LocalCluster.Options(1, dir, hooks.sourceCommand(),
                    sourceSettings))) {
                LocalCluster.Node source = cluster.node(1);
                for (Run run : runs) {
                    if (run != first) {
                        cluster.stop(source);
                        cluster.launch(source, Map.of("peer.transport", run.transport(),
                                "pool.shm-dir", run.pool().dir().toString()));
                    }
                    progress("%s: pools in %s", run.name(), run.pool().description());
                    modes.add(runMode(cluster, source, dir, run, shape, settings, hooks));
                    if (run.transport().equals(PeerSettings.MOONCAKE_TE)) {
                        // registering each leased page with TE and unregistering it at the lease's end, source side
                        double calls = cluster.metric(source, "orbitkv_peer_te_registration_seconds_count", null).orElse(0);
                        double seconds = cluster.metric(source, "orbitkv_peer_te_registration_seconds_sum", null).orElse(0);
                        report.figure("mooncake_te_source_registration_calls", calls)
                                .figure("mooncake_te_source_registration_us_per_call",
                                        calls == 0 ? -1 : Math.round(seconds / calls * 1e7) / 10.0);
                        progress("%s: source registration of leased pages with TE: %.0f calls, %.1f us each", run.name(),
                                calls, calls == 0 ? -1 : seconds / calls * 1e6);
                    }
                }
            }
        } finally {
            deleteTree(dir);
        }
        double iperfAfter = iperfLoopback(iperf, shape.iperfSeconds());
        progress("iperf3 loopback after: %.2f GB/s", iperfAfter / 1e9);
        double parallelAfter = iperfLoopback(iperf, shape.iperfSeconds(), streams);
        progress("iperf3 loopback after, %d pairs at once: %.2f GB/s", streams, parallelAfter / 1e9);
        double parallelRate = Math.max(parallelBefore, parallelAfter);
        // The ratios divide by the faster of the two baseline runs: noise on this shared machine never flatters them.
        double iperfRate = Math.max(iperfBefore, iperfAfter);
        Map<String, Mode> byName = new java.util.LinkedHashMap<>();
        modes.forEach(m -> byName.put(m.name(), m));
        Mode plain = byName.get("plaintext");
        Mode hugePlain = byName.get("plaintext_huge_pages");
        Mode tls = byName.get("tls");
        Mode te = byName.get("mooncake_te");
        report.topLevelRatio("parallel_transfer_ratio", plain.bytesPerSecond(), parallelRate);
        if (hugePlain != null) {
            report.topLevelRatio("parallel_transfer_ratio_huge_pages", hugePlain.bytesPerSecond(), parallelRate);
        }
        if (tls != null) {
            report.topLevelRatio("parallel_tls_transfer_ratio", tls.bytesPerSecond(), parallelRate);
        }
        if (te != null) {
            report.topLevelRatio("parallel_mooncake_te_transfer_ratio", te.bytesPerSecond(), parallelRate);
        }
        report.topLevelRatio("transfer_ratio", plain.bytesPerSecond(), iperfRate);
        if (hugePlain != null) {
            report.ratio("transfer_ratio_huge_pages", hugePlain.bytesPerSecond(), iperfRate);
        }
        if (tls != null) {
            report.topLevelRatio("tls_transfer_ratio", tls.bytesPerSecond(), iperfRate);
        }
        if (te != null) {
            report.topLevelRatio("mooncake_te_transfer_ratio", te.bytesPerSecond(), iperfRate);
        }
        // One fetch alone on one connection against one iperf3 stream: like for like, no parallelism on either side.
        report.topLevelRatio("connection_transfer_ratio", plain.connectionBytesPerSecond(), iperfRate);
        if (hugePlain != null) {
            report.topLevelRatio("connection_transfer_ratio_huge_pages", hugePlain.connectionBytesPerSecond(), iperfRate);
        }
        if (tls != null) {
            report.topLevelRatio("tls_connection_transfer_ratio", tls.connectionBytesPerSecond(), iperfRate);
        }
        if (te != null) {
            report.ratio("mooncake_te_connection_transfer_ratio", te.connectionBytesPerSecond(), iperfRate);
        }
        double mismatches = 0;
        for (Mode m : modes) {
            mismatches += m.mismatches();
            report.figure(m.name() + "_bytes_per_s", Math.round(m.bytesPerSecond()))
                    .figure(m.name() + "_connection_bytes_per_s", Math.round(m.connectionBytesPerSecond()))
                    .figure(m.name() + "_fetched_bytes", m.fetchedBytes())
                    .figure(m.name() + "_pool", m.pool())
                    .figure(m.name() + "_read_back_pages", m.readBackPages())
                    .figure(m.name() + "_read_back_share", (double) m.readBackPages() / m.measuredPages())
                    .figure(m.name() + "_requester_prefault_ms", m.prefaultMs())
                    .figure(m.name() + "_source_reserve_checksum_pages", m.sourceReserveChecksums())
                    .figure(m.name() + "_fetch_acquire_ms_p50", m.acquireMs())
                    .figure(m.name() + "_fetch_submit_ms_p50", m.submitMs())
                    .figure(m.name() + "_requester_pool_huge_mapped_bytes", m.hugeMappedBytes())
                    .figure(m.name() + "_requester_verified_bytes_verifier", Math.round(m.verifiedOffLoopBytes()))
                    .figure(m.name() + "_requester_verified_bytes_event_loop", Math.round(m.verifiedOnLoopBytes()));
            double[] l = m.latenciesMs();
            Arrays.sort(l);
            double warmFetch = percentile(l, 0.50);
            report.figure(m.name() + "_first_fetch_ms", Math.round(m.first().millis() * 100) / 100.0)
                    .figure(m.name() + "_first_fetch_acquire_ms", Math.round(m.first().acquireMillis() * 100) / 100.0)
                    .figure(m.name() + "_first_fetch_submit_ms", Math.round(m.first().submitMillis() * 100) / 100.0)
                    .figure(m.name() + "_warm_fetch_ms", warmFetch)
                    .figure(m.name() + "_first_to_warm_fetch", Math.round(m.first().millis() / warmFetch * 100) / 100.0)
                    .figure(m.name() + "_first_fetch_warmed_connections", m.first().warmedBefore())
                    .figure(m.name() + "_first_fetch_opened_connections", m.first().openedByIt());
            report.figure(m.name() + "_single_page_latency_ms_p50", percentile(l, 0.50))
                    .figure(m.name() + "_single_page_latency_ms_p90", percentile(l, 0.90))
                    .figure(m.name() + "_single_page_latency_ms_p99", percentile(l, 0.99));
            m.failures().forEach(f -> report.failure(m.name() + ": " + f));
        }
        report.figure("checksum_mismatches", mismatches)
                .baseline("iperf3_parallel_bytes_per_s", Math.round(parallelRate))
                .baseline("iperf3_parallel_streams", streams)
                .baseline("iperf3_parallel_before_bytes_per_s", Math.round(parallelBefore))
                .baseline("iperf3_parallel_after_bytes_per_s", Math.round(parallelAfter))
                .baseline("iperf3_bytes_per_s", Math.round(iperfRate))
                .baseline("iperf3_before_bytes_per_s", Math.round(iperfBefore))
                .baseline("iperf3_after_bytes_per_s", Math.round(iperfAfter))
                .baseline("iperf3_command", iperf + " -c 127.0.0.1 -t " + shape.iperfSeconds() + " -J (server: iperf3 -s -1)"
                        + ", one pair and " + streams + " pairs at once, before and after the Managers; ratios use the faster")
                .check(mismatches == 0, "checksum mismatches without a fault")
                .machine(MachineInfo.probe());
        BenchReport built = report.build();
        progress("%s", built.toOneLine());
        return built.toJson();
    }

    private static Mode runMode(LocalCluster cluster, LocalCluster.Node source, Path dir, Run run, Shape shape,
                                Map<String, String> settings, Hooks hooks) throws Exception {
        String mode = run.name();
        Path poolDir = run.pool().dir();
        int pages = shape.pages();
        int rounds = shape.rounds();
        int singles = shape.singles();
        int inFlight = shape.inFlight();
        int warmUps = shape.warmUps();
        List<String> failures = new ArrayList<>();
        Map<String, String> s = new HashMap<>(cluster.inProcessMember(2).peer(run.transport())
                .set("pool.size", String.valueOf(shape.poolBytes())).set("pool.shm-dir", poolDir.toString())
                .set("publish.budget-fraction", "0.9").set("data-dir", dir.resolve("requester-" + run.index()).toString())
                .set("peer.verify-threads", String.valueOf(shape.effectiveVerifyThreads()))
                .set("peer.mooncake-te.trusted-network", "127.0.0.1/32")
                // The source's event-bus address as a seed too: a cold JVM's first etcd read can time out on a loaded
                // host, and a requester that seeds from etcd alone then forms a cluster of its own and sees no peer.
                .set("cluster.hazelcast-seeds", "127.0.0.1:"
                        + cluster.settingsOf(source, Map.of()).get("cluster.hazelcast-port"))
                .settings());
        s.putAll(settings);
        Manager requester = Manager.start(ManagerConfig.from(s)).await(120, TimeUnit.SECONDS);
        try {
            waitUntil(() -> requester.membershipRole().orElseThrow().members().containsKey(source.memberId()), 30);
            InstanceIdentity identity = identity();
            byte[] namespace = Namespaces.derive(identity);
            List<List<ByteString>> batches = new ArrayList<>();
            try (OrbitKvClient client = OrbitKvClient.connectTcp("127.0.0.1", source.grpcPort(),
                    OrbitKvClient.readToken(source.tokenFile()))) {
                // A harness wait, not a measured one: a source that just started on a loaded host can take seconds.
                EngineSession session = client.register(identity, InstanceRole.PREFILL_AND_DECODE).await(60, TimeUnit.SECONDS);
                for (int r = 0; r < rounds; r++) {
                    batches.add(publish(session, mode + "-round-" + r, pages, hooks));
                }
                for (int i = 0; i < singles; i++) {
                    batches.add(publish(session, mode + "-single-" + i, 1, hooks));
                }
                for (int w = 0; w < warmUps; w++) {
                    batches.add(publish(session, mode + "-warm-up-" + w, pages, hooks));
                }
                for (int c = 0; c < shape.connectionFetches(); c++) {
                    batches.add(publish(session, mode + "-connection-" + c, pages, hooks));
                }
                batches.add(publish(session, mode + "-first", 1, hooks));
                session.close();
            }
            List<List<StateKey>> keys = batches.stream().map(b -> keys(namespace, b)).toList();
            PeerOwner owner = new PeerOwner(source.memberId(), source.incarnation());
            PeerVerticle role = requester.peerRole().orElseThrow();
            PeerProxy peer = requester.peer().orElseThrow();
            // The requester's start-up prefault of its pool mapping (peer.prefault-bytes) ends before measuring: a
            // Manager that has been up a while receives into mapped pages (reported: requester_prefault_ms).
            role.prefaulted().await(300, TimeUnit.SECONDS);
            double prefaultMs = role.prefaultNanos() / 1e6;
            // The first fetch from the source, before the warm-ups: with warming on (peer.warm-connections > 0) its
            // paths were opened in the background since the source joined (awaited here, bounded: a Manager that has
            // been up a while has them); with it off the fetch opens them itself.
            FirstFetch first = firstFetch(requester, role, peer, owner, namespace, keys.getLast());
            progress("%s: first fetch %.1f ms (acquire %.1f, submit %.1f; %d connections warmed before it, %d opened "
                    + "by it)", mode, first.millis(), first.acquireMillis(), first.submitMillis(), first.warmedBefore(),
                    first.openedByIt());
            // Warm-up (not measured): connections, TLS sessions, JIT.
            for (int w = 0; w < warmUps; w++) {
                List<StateKey> warm = keys.get(rounds + singles + w);
                peer.fetch(owner, namespace, warm, generations(requester, warm), Duration.ofSeconds(60))
                        .await(90, TimeUnit.SECONDS);
            }
            // Measured rounds: --in-flight fetches at a time (each its own lease), timed from the first start to the
            // last completion, so one fetch's reserve and verifying seal overlap another's stream.
            List<List<Long>> roundGenerations = new ArrayList<>();
            for (int r = 0; r < rounds; r++) {
                roundGenerations.add(generations(requester, keys.get(r)));
            }
            List<Double> acquireMs = new ArrayList<>();
            List<Double> submitMs = new ArrayList<>();
            double sourceChecksumsBefore = cluster.metric(source, "orbitkv_peer_source_checksums_total", null).orElse(0);
            Semaphore window = new Semaphore(inFlight);
            AtomicLong fetchedBytes = new AtomicLong();
            List<String> fetchFailures = java.util.Collections.synchronizedList(new ArrayList<>());
            long expectedBytes = (long) pages * PAGE;
            progress("%s: measuring %d rounds", mode, rounds);
            BenchProfile profile = BenchProfile.start(shape.profileDir(), mode, source.pid());
            long started = System.nanoTime();
            for (int r = 0; r < rounds; r++) {
                window.acquire();
                int round = r;
                long fetchStarted = System.nanoTime();
                hooks.fetch(mode, r, () -> peer.acquire(owner, namespace, keys.get(round), roundGenerations.get(round),
                        Duration.ofSeconds(60)).compose(a -> {
                    long acquired = System.nanoTime();
                    synchronized (acquireMs) {
                        acquireMs.add((acquired - fetchStarted) / 1e6);
                    }
                    return peer.submit(a).andThen(x -> {
                        synchronized (submitMs) {
                            submitMs.add((System.nanoTime() - acquired) / 1e6);
                        }
                    });
                })).onComplete(ar -> {
                    if (ar.failed()) {
                        fetchFailures.add("round " + (round + 1) + ": the fetch failed: " + ar.cause().getMessage());
                    } else {
                        fetchedBytes.addAndGet(ar.result().bytes());
                        if (ar.result().bytes() != expectedBytes || ar.result().local().size() != pages) {
                            fetchFailures.add("round " + (round + 1) + ": the fetch answered " + ar.result().bytes()
                                    + " bytes in " + ar.result().local().size() + " local pages, expected "
                                    + expectedBytes + " in " + pages);
                        }
                    }
                    window.release();
                });
            }
            if (!window.tryAcquire(inFlight, 120, TimeUnit.SECONDS)) {
                throw new IllegalStateException("the measured fetches did not end within 120 s");
            }
            long nanos = System.nanoTime() - started;
            if (profile != null) {
                profile.close();
            }
            failures.addAll(fetchFailures);
            long bytes = fetchedBytes.get();
            double sourceChecksums = cluster.metric(source, "orbitkv_peer_source_checksums_total", null).orElse(0)
                    - sourceChecksumsBefore;
            double[] latencies = new double[singles];
            for (int i = 0; i < singles; i++) {
                List<StateKey> single = keys.get(rounds + i);
                List<Long> generations = generations(requester, single);
                long t0 = System.nanoTime();
                io.orbitkv.peer.PeerCommands.Fetched fetched = peer.fetch(owner, namespace, single, generations, Duration.ofSeconds(30))
                        .await(60, TimeUnit.SECONDS);
                latencies[i] = (System.nanoTime() - t0) / 1e6;
                if (fetched.bytes() != PAGE || fetched.local().size() != 1) {
                    failures.add("single fetch " + (i + 1) + " answered " + fetched.bytes() + " bytes in "
                            + fetched.local().size() + " local pages, expected " + PAGE + " in 1");
                }
            }
            // Per connection: fetches of `pages` pages alone, one after another (each on one transfer connection),
            // timed whole (reserve, stream, verifying seal, release); the median's rate.
            List<Double> connectionSeconds = new ArrayList<>();
            for (int c = 0; c < shape.connectionFetches(); c++) {
                List<StateKey> alone = keys.get(rounds + singles + warmUps + c);
                List<Long> generations = generations(requester, alone);
                long t0 = System.nanoTime();
                io.orbitkv.peer.PeerCommands.Fetched fetched = peer.fetch(owner, namespace, alone, generations,
                        Duration.ofSeconds(60)).await(90, TimeUnit.SECONDS);
                connectionSeconds.add((System.nanoTime() - t0) / 1e9);
                if (fetched.bytes() != expectedBytes || fetched.local().size() != pages) {
                    failures.add("connection fetch " + (c + 1) + " answered " + fetched.bytes() + " bytes in "
                            + fetched.local().size() + " local pages, expected " + expectedBytes + " in " + pages);
                }
            }
            connectionSeconds.sort(null);
            double connectionRate = expectedBytes / connectionSeconds.get(connectionSeconds.size() / 2);
            progress("%s: one %d-page fetch alone on one connection (median of %d): %.2f GB/s", mode, pages,
                    connectionSeconds.size(), connectionRate / 1e9);
            long readBack = readBack(requester, batches, shape.readBackRounds(), pages, failures);
            double rate = bytes / (nanos / 1e9);
            double mismatches = requester.registry().get("orbitkv_peer_checksum_mismatches_total").counter().count();
            double verifiedOffLoop = verifiedBytes(requester, "verifier");
            double verifiedOnLoop = verifiedBytes(requester, "event_loop");
            progress("%s: received bytes checksummed (whole run) on verifier threads %.0f MiB, on the event loop %.0f MiB",
                    mode, verifiedOffLoop / (1 << 20), verifiedOnLoop / (1 << 20));
            progress("%s: %d bytes in %.3f s = %.2f GB/s; %d of %d measured pages read back and compared", mode, bytes,
                    nanos / 1e9, rate / 1e9, readBack, (long) rounds * pages);
            progress("%s: requester prefault %.0f ms; the source computed %.0f CRC32C at reserve in the measured rounds",
                    mode, prefaultMs, sourceChecksums);
            double acquire = median(acquireMs);
            double submit = median(submitMs);
            progress("%s: per %d-page fetch (medians, %d in flight): acquire (reserve + pins + local slots) %.1f ms, "
                    + "submit (stream + verifying seal + release) %.1f ms", mode, pages, inFlight, acquire, submit);
            long huge = io.orbitkv.nativeio.shm.Smaps.hugeMappedBytesUnder(poolDir);
            progress("%s: requester pool mapped with 2 MiB pages: %d MiB", mode, huge >> 20);
            failures.forEach(f -> progress("%s: FAILED: %s", mode, f));
            return new Mode(mode, run.pool().description(), rate, latencies, bytes, mismatches, prefaultMs,
                    sourceChecksums, acquire, submit, huge, verifiedOffLoop, verifiedOnLoop, readBack,
                    (long) rounds * pages, first, connectionRate, failures);
        } finally {
            requester.close();
        }
    }

    /** Times the requester's first fetch from the source ({@code single}, one page); see {@link FirstFetch}. */
    private static FirstFetch firstFetch(Manager requester, PeerVerticle role, PeerProxy peer, PeerOwner owner,
                                         byte[] namespace, List<StateKey> single) throws Exception {
        io.orbitkv.peer.TcpPeerTransport transport = role.transport(); // null over the Transfer Engine: nothing warms
        if (transport != null && role.settings().warmConnections() > 0) {
            // until the source counts warm: its connections opened and its probe lease done (the probe's storage
            // commands and transfer ran), as on a Manager that has been up a while; a fetch racing the probe would
            // time a path still half cold
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while ((transport.connectionsWarmed() < role.settings().warmConnections()
                    || requester.registry().find("orbitkv_peer_warm_members").gauge() == null
                    || requester.registry().find("orbitkv_peer_warm_members").gauge().value() < 1)
                    && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
        }
        long warmed = transport == null ? 0 : transport.connectionsWarmed();
        long opened = transport == null ? 0 : transport.connectionsOpened();
        List<Long> generations = generations(requester, single);
        long t0 = System.nanoTime();
        io.orbitkv.peer.PeerCommands.Acquired acquired = peer.acquire(owner, namespace, single, generations,
                Duration.ofSeconds(30)).await(60, TimeUnit.SECONDS);
        long t1 = System.nanoTime();
        peer.submit(acquired).await(60, TimeUnit.SECONDS);
        long t2 = System.nanoTime();
        return new FirstFetch((t2 - t0) / 1e6, (t1 - t0) / 1e6, (t2 - t1) / 1e6, warmed,
                transport == null ? 0 : transport.connectionsOpened() - opened);
    }

    /** Received bytes the built-in transport checksummed on {@code thread}s (0 over TE: the seal checks there). */
    private static double verifiedBytes(Manager requester, String thread) {
        var counter = requester.registry().find("orbitkv_peer_verified_bytes_total").tag("thread", thread).counter();
        return counter == null ? 0 : counter.count();
    }

    /**
     * Reads the sampled measured fetches back through an engine session on the requester and compares every byte of
     * their pages with the bytes derived from the keys. Each must be READY at once for the whole batch from the
     * requester's own DRAM, without another peer fetch: a page the measured fetch did not leave there fails. Returns
     * the pages compared; adds what failed (at most {@link #MAX_DETAILS} page descriptions) to {@code failures}.
     */
    private static long readBack(Manager requester, List<List<ByteString>> batches, List<Integer> sample, int pages,
                                 List<String> failures) throws Exception {
        double fetchedBefore = requester.registry().get("orbitkv_peer_fetched_pages_total").counter().count();
        long compared = 0;
        int wrongPages = 0;
        try (OrbitKvClient client = OrbitKvClient.connectUnix(requester.unixSocket(), requester.token());
             EngineSession session = client.register(identity(), InstanceRole.PREFILL_AND_DECODE).await(60, TimeUnit.SECONDS)) {
            for (int round : sample) {
                List<ByteString> hashes = batches.get(round);
                QueryReply reply = session.submit(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes)
                        .build()), 0).await(30, TimeUnit.SECONDS);
                if (reply.getStatus() != QueryStatus.READY || reply.getReadyBlocks() != pages) {
                    if (reply.getStatus() == QueryStatus.PENDING) {
                        session.cancel(reply.getTicket()).await(30, TimeUnit.SECONDS);
                    } else if (reply.hasLease() && reply.getLease().getLeaseId() != 0) {
                        session.release(reply.getLease().getLeaseId()).await(30, TimeUnit.SECONDS);
                    }
                    failures.add("read-back of round " + (round + 1) + ": the requester answered " + reply.getStatus()
                            + " with " + reply.getReadyBlocks() + " of " + pages + " pages ready: the fetched pages are "
                            + "not in its DRAM");
                    continue;
                }
                for (LeasedPage page : reply.getLease().getPagesList()) {
                    long wrong = KeyedContent.firstMismatch(session.slot(page.getSlot()), hashes.get(page.getPosition()));
                    compared++;
                    if (wrong >= 0 && wrongPages++ < MAX_DETAILS) {
                        failures.add("read-back of round " + (round + 1) + ": page " + page.getPosition()
                                + " differs from the bytes published under its key at byte " + wrong);
                    }
                }
                session.release(reply.getLease().getLeaseId()).await(30, TimeUnit.SECONDS);
            }
        }
        if (wrongPages > MAX_DETAILS) {
            failures.add((wrongPages - MAX_DETAILS) + " more read-back pages differ");
        }
        double refetched = requester.registry().get("orbitkv_peer_fetched_pages_total").counter().count() - fetchedBefore;
        if (refetched != 0) {
            failures.add("the read-back fetched " + (long) refetched + " pages from the peer again: they were not local");
        }
        return compared;
    }

    static InstanceIdentity identity() {
        return InstanceIdentity.newBuilder().setModelFingerprint("peer-bench")
                .setRepresentation(Representation.RAW).setLayout("bench:NHD").setGeometry("layers=1")
                .setPageSizeTokens(16).setTpRank(0).setTpSize(1).setPpRank(0).setPpSize(1)
                .addGroups(GroupSpec.newBuilder().setGroupId(0).setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(PAGE))
                .build();
    }

    /** Publishes {@code n} pages on the source under keys named after {@code batch}, each holding its key's bytes. */
    private static List<ByteString> publish(EngineSession session, String batch, int n, Hooks hooks) throws Exception {
        List<ByteString> hashes = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            hashes.add(ByteString.copyFrom((batch + ":" + i).getBytes(java.nio.charset.StandardCharsets.UTF_8)));
        }
        AllocatePublishReply allocated = session.allocate(hashes.stream()
                .map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList()).await(30, TimeUnit.SECONDS);
        for (int i = 0; i < allocated.getSlotsCount(); i++) {
            PublishSlot slot = allocated.getSlots(i);
            if (slot.getStatus() != SlotStatus.ALLOCATED) {
                session.abort(allocated.getPublishId()).await(30, TimeUnit.SECONDS);
                throw new IllegalStateException("the source did not allocate a slot for a fresh key: " + slot.getStatus());
            }
            MemorySegment target = session.slot(slot.getSlot());
            KeyedContent.fill(target, hashes.get(i));
            hooks.published(batch, i, target);
        }
        session.seal(allocated.getPublishId(), List.of()).await(30, TimeUnit.SECONDS);
        return hashes;
    }

    private static List<StateKey> keys(byte[] namespace, List<ByteString> hashes) {
        return hashes.stream().map(h -> StateKey.of(namespace, 0, h.toByteArray())).toList();
    }

    private static List<Long> generations(Manager requester, List<StateKey> keys) throws Exception {
        List<Long> found = new ArrayList<>();
        waitUntil(() -> {
            found.clear();
            for (StateKey key : keys) {
                List<ReplicaEvidence> peers = requester.inventoryRole().orElseThrow().replicas(key)
                        .await(5, TimeUnit.SECONDS).peers();
                if (peers.isEmpty() || !(peers.getFirst() instanceof ReplicaEvidence.PeerDram dram)) {
                    return false;
                }
                found.add(dram.ownerGeneration());
            }
            return true;
        }, 30);
        return List.copyOf(found);
    }

    interface Condition {
        boolean holds() throws Exception;
    }

    private static void waitUntil(Condition condition, int seconds) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (!condition.holds()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("condition not reached within " + seconds + " s");
            }
            Thread.sleep(20);
        }
    }

    private static double percentile(double[] sorted, double p) {
        int i = (int) Math.ceil(p * sorted.length) - 1;
        return Math.round(sorted[Math.max(0, Math.min(sorted.length - 1, i))] * 1000) / 1000.0;
    }

    /** iperf3 on PATH, installed from Debian when missing and root. */
    static String iperf3() throws Exception {
        for (String p : List.of("/usr/bin/iperf3", "/usr/local/bin/iperf3")) {
            if (Files.isExecutable(Path.of(p))) {
                return p;
            }
        }
        if ("root".equals(System.getProperty("user.name"))) {
            progress("installing iperf3 (Debian package)");
            Process p = new ProcessBuilder("apt-get", "install", "-y", "-q", "iperf3").inheritIO()
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            if (p.waitFor(300, TimeUnit.SECONDS) && p.exitValue() == 0 && Files.isExecutable(Path.of("/usr/bin/iperf3"))) {
                return "/usr/bin/iperf3";
            }
        }
        throw new IllegalStateException("iperf3 is not installed (apt-get install iperf3): the bench needs its baseline");
    }

    /** One iperf3 run on loopback (server for one test, then the client); received bytes per second. */
    static double iperfLoopback(String iperf, int seconds) throws Exception {
        return iperfLoopback(iperf, seconds, 1);
    }

    /**
     * {@code streams} iperf3 pairs at once (a server and a client each, on ports of their own: iperf3 3.12 runs all of
     * one client's streams on one thread, so {@code -P} would not use more cores); the sum of their received rates.
     * Clients that start a little apart overlap for less than the whole run, which can only raise this baseline.
     */
    static double iperfLoopback(String iperf, int seconds, int streams) throws Exception {
        if (streams == 1) {
            return iperfPair(iperf, seconds);
        }
        List<java.util.concurrent.CompletableFuture<Double>> pairs = new ArrayList<>();
        for (int i = 0; i < streams; i++) {
            pairs.add(java.util.concurrent.CompletableFuture.supplyAsync(() -> {
                try {
                    return iperfPair(iperf, seconds);
                } catch (Exception e) {
                    throw new IllegalStateException(e.getMessage(), e);
                }
            }, r -> Thread.ofPlatform().daemon().start(r)));
        }
        double sum = 0;
        for (var pair : pairs) {
            sum += pair.get(seconds + 60L, TimeUnit.SECONDS);
        }
        return sum;
    }

    private static double iperfPair(String iperf, int seconds) throws Exception {
        int port = LocalEtcd.freePort();
        Process server = new ProcessBuilder(iperf, "-s", "-1", "-p", String.valueOf(port), "-B", "127.0.0.1")
                .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        try {
            String out = "";
            // Until the server listens: on a loaded host a fresh iperf3 process can take seconds to bind.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (System.nanoTime() < deadline) {
                Process client = new ProcessBuilder(iperf, "-c", "127.0.0.1", "-p", String.valueOf(port), "-t",
                        String.valueOf(seconds), "-J").redirectErrorStream(true).start();
                out = new String(client.getInputStream().readAllBytes());
                client.waitFor(seconds + 30L, TimeUnit.SECONDS);
                Double received = receivedBytesPerSecond(out);
                if (client.exitValue() == 0 && received != null) {
                    return received;
                }
                Thread.sleep(100); // the server was not listening yet
            }
            throw new IllegalStateException("iperf3 on loopback gave no result: " + out.strip());
        } finally {
            server.destroy();
            server.waitFor(10, TimeUnit.SECONDS);
        }
    }

    /** iperf3's received bytes per second from its JSON, or null when it reports none (an error, a refused run). */
    static Double receivedBytesPerSecond(String json) {
        try {
            JsonObject end = new JsonObject(json).getJsonObject("end");
            JsonObject received = end == null ? null : end.getJsonObject("sum_received");
            Double bits = received == null ? null : received.getDouble("bits_per_second");
            return bits == null ? null : bits / 8;
        } catch (RuntimeException e) {
            return null;
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        try (var walk = Files.walk(dir)) {
            for (Path p : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
