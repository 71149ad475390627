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
import io.orbitkv.planning.PeerOwner;
import io.orbitkv.planning.ReplicaEvidence;
import io.orbitkv.protocol.engine.AllocatePublishReply;
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
import io.orbitkv.storage.StateKey;
import io.vertx.core.json.JsonObject;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.SplittableRandom;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * {@code orbitkv bench peer}: restore throughput between two Managers on 127.0.0.1 through the peer transport, against
 * {@code iperf3} on loopback in the same run. The source Manager is a process (started by pid, with etcd), the
 * requester a Manager in this JVM whose peer role fetches; both run twice: plaintext (sendfile from the pool file)
 * then mutual TLS. Each fetch is one lease of {@code --pages} 2 MiB pages into fresh local slots, verified against
 * the source's CRC32C before READY; the measured rounds keep {@code --in-flight} fetches going at once. Reports
 * transfer_ratio (plaintext vs iperf3), tls_transfer_ratio and per-fetch latency percentiles (single-page fetches,
 * one at a time). {@code --verify-threads=N} sets the requester's {@code peer.verify-threads} (0: the CRC32C inline on
 * the transfer connection's event loop; default: the Manager's default for this host), recorded in the report's
 * config with the verified bytes per thread kind, for A/B runs.
 *
 * <p>Design note (ownership): the bench owns etcd and the source process through {@link LocalCluster} (closed, by pid,
 * in every outcome), each requester Manager (closed in a finally), the iperf3 server it starts (destroyed after its one
 * test) and its temporary directory (deleted). Throughput counts only the measured rounds (a warm-up fetch of the same
 * size runs first); every fetched page is CRC32C-checked against the source by the requester's seal.
 */
public final class PeerBench {
    static final int PAGE = 2 << 20;

    private PeerBench() {}

    private static void progress(String format, Object... args) {
        System.err.println("bench peer: " + String.format(format, args));
    }

    public static JsonObject run(BenchArgs args) {
        int pages = args.integer("pages", 32);
        int rounds = args.integer("rounds", 16);
        int singles = args.integer("single-fetches", 24);
        int iperfSeconds = args.integer("iperf-seconds", 3);
        int inFlight = args.integer("in-flight", 4);
        int warmUps = args.integer("warm-up-fetches", 8);
        String poolDir = args.string("pool-dir", "");
        Map<String, String> settings = managerSettings(args.string("setting", ""));
        String verifyThreadsArg = args.string("verify-threads", "");
        args.requireAllUsed();
        int verifyThreads;
        try {
            verifyThreads = verifyThreadsArg.isEmpty() ? -1 : Integer.parseInt(verifyThreadsArg.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--verify-threads must be an integer in 0..64, got '" + verifyThreadsArg + "'");
        }
        if (!verifyThreadsArg.isEmpty() && (verifyThreads < 0 || verifyThreads > 64)) {
            throw new IllegalArgumentException("--verify-threads must be an integer in 0..64, got " + verifyThreads);
        }
        if (pages < 1 || rounds < 1 || singles < 1 || iperfSeconds < 1 || inFlight < 1 || warmUps < 1) {
            throw new IllegalArgumentException("--pages, --rounds, --single-fetches, --iperf-seconds, --in-flight and "
                    + "--warm-up-fetches must be >= 1");
        }
        try {
            return measure(new Shape(pages, rounds, singles, iperfSeconds, inFlight, warmUps, verifyThreads), poolDir,
                    settings);
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException("peer bench failed: " + e.getMessage(), e);
        }
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
     * What one run measures: fetch size, measured and warm-up fetches, fetches in flight, single-page fetches, and the
     * requester's {@code peer.verify-threads} (-1: the Manager's default).
     */
    record Shape(int pages, int rounds, int singles, int iperfSeconds, int inFlight, int warmUps, int verifyThreads) {
        /** The requester's verifier threads as the Manager will run them. */
        int effectiveVerifyThreads() {
            return verifyThreads < 0 ? PeerSettings.VERIFY_THREADS_DEFAULT : verifyThreads;
        }

        /** Both pools hold every fetched page (each fetch lands in fresh slots), rounded up to 64 MiB, plus 128 MiB. */
        long poolBytes() {
            return ((long) ((rounds + warmUps) * pages + singles) * PAGE / (64L << 20) + 2) * (64L << 20);
        }
    }

    record Mode(String name, double bytesPerSecond, double[] latenciesMs, long fetchedBytes, double mismatches,
                double prefaultMs, double sourceReserveChecksums, double acquireMs, double submitMs,
                long hugeMappedBytes, double verifiedOffLoopBytes, double verifiedOnLoopBytes) {}

    private static double median(List<Double> values) {
        if (values.isEmpty()) {
            return -1;
        }
        List<Double> sorted = new ArrayList<>(values);
        sorted.sort(null);
        return Math.round(sorted.get(sorted.size() / 2) * 1000) / 1000.0;
    }

    private static JsonObject measure(Shape shape, String poolDirArg, Map<String, String> settings) throws Exception {
        BenchReport.Builder report = BenchReport.builder("peer").config("page_bytes", PAGE)
                .config("pages_per_fetch", shape.pages()).config("fetches_in_flight", shape.inFlight())
                .config("rounds", shape.rounds()).config("warm_up_fetches", shape.warmUps())
                .config("single_fetches", shape.singles()).config("iperf_seconds", shape.iperfSeconds())
                .config("manager_settings", settings.toString())
                .config("transfer_loops", ManagerConfig.from(settings).peer().transferLoops())
                .config("requester_verify_threads", shape.effectiveVerifyThreads())
                .config("requester_verify_threads_source", shape.verifyThreads() < 0 ? "default" : "--verify-threads")
                .config("available_processors", Runtime.getRuntime().availableProcessors());
        if (!LocalEtcd.installed()) {
            throw new IllegalStateException("etcd is not installed (/usr/bin/etcd): apt-get install etcd-server");
        }
        String iperf = iperf3();
        double iperfBefore = iperfLoopback(iperf, shape.iperfSeconds());
        progress("iperf3 loopback: %.2f GB/s", iperfBefore / 1e9);
        // The transport moves the fetches in flight on as many connections, on up to peer.transfer-loops loops a side:
        // the same number of iperf3 streams, each a process pair, is the parallel baseline.
        int streams = shape.inFlight();
        double parallelBefore = iperfLoopback(iperf, shape.iperfSeconds(), streams);
        progress("iperf3 loopback, %d pairs at once: %.2f GB/s", streams, parallelBefore / 1e9);
        Path dir = Files.createTempDirectory("orbitkv-peer-bench");
        long poolBytes = shape.poolBytes();
        ClusterCertificates.create(dir.resolve("certs"), 2, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
        int peerPort = LocalEtcd.freePort();
        int transferPort = LocalEtcd.freePort();
        String java = ProcessHandle.current().info().command().orElse("java");
        List<String> command = List.of(java, "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
                "-Xmx512m", "-cp", System.getProperty("java.class.path"), "io.orbitkv.app.OrbitKv", "manager");
        List<Mode> modes = new ArrayList<>();
        // Both pools, with room for a restarted source's new pool file while the old one is being removed.
        try (BenchPoolDir pool = poolDirArg.isEmpty() ? BenchPoolDir.hugeOrShm(dir, 3 * poolBytes + (256L << 20))
                : BenchPoolDir.given(Path.of(poolDirArg))) {
            progress("pools in %s", pool.description());
            report.config("pool_dir", pool.description());
            Map<String, String> sourceSettings = new HashMap<>(Map.of("cluster.lease-ttl-s", "3",
                    "cluster.prefix", "/orbitkv-peer-bench", "ssd.enabled", "false", "pool.size", String.valueOf(poolBytes),
                    "pool.shm-dir", pool.dir().toString(), "publish.budget-fraction", "0.9", "session.ttl-ms", "120000",
                    "peer.port", String.valueOf(peerPort), "peer.transfer-port", String.valueOf(transferPort),
                    "peer.transport", "plaintext"));
            // Source admission sized for the fetches in flight, twice over: a fetch's release reaches the source
            // after the next fetch's reserve, so the bench measures the transport, not NO_CREDIT refusals.
            sourceSettings.put("peer.credit-bytes", String.valueOf(2L * shape.inFlight() * shape.pages() * PAGE));
            sourceSettings.putAll(settings);
            try (LocalCluster cluster = LocalCluster.start(new LocalCluster.Options(1, dir, command, sourceSettings))) {
                for (String transport : List.of("plaintext", "tls")) {
                    LocalCluster.Node source = cluster.node(1);
                    if (transport.equals("tls")) {
                        cluster.stop(source);
                        cluster.launch(source, Map.of("peer.transport", "tls"));
                    }
                    modes.add(runMode(cluster, source, dir, transport, pool.dir(), shape, settings));
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
        Mode plain = modes.get(0);
        Mode tls = modes.get(1);
        report.figure("plaintext_bytes_per_s", Math.round(plain.bytesPerSecond()))
                .figure("tls_bytes_per_s", Math.round(tls.bytesPerSecond()))
                .figure("plaintext_fetched_bytes", plain.fetchedBytes()).figure("tls_fetched_bytes", tls.fetchedBytes())
                .figure("checksum_mismatches", plain.mismatches() + tls.mismatches());
        for (Mode m : modes) {
            report.figure(m.name() + "_requester_prefault_ms", m.prefaultMs())
                    .figure(m.name() + "_source_reserve_checksum_pages", m.sourceReserveChecksums())
                    .figure(m.name() + "_fetch_acquire_ms_p50", m.acquireMs())
                    .figure(m.name() + "_fetch_submit_ms_p50", m.submitMs())
                    .figure(m.name() + "_requester_pool_huge_mapped_bytes", m.hugeMappedBytes())
                    .figure(m.name() + "_requester_verified_bytes_verifier", Math.round(m.verifiedOffLoopBytes()))
                    .figure(m.name() + "_requester_verified_bytes_event_loop", Math.round(m.verifiedOnLoopBytes()));
            double[] l = m.latenciesMs();
            Arrays.sort(l);
            report.figure(m.name() + "_single_page_latency_ms_p50", percentile(l, 0.50))
                    .figure(m.name() + "_single_page_latency_ms_p90", percentile(l, 0.90))
                    .figure(m.name() + "_single_page_latency_ms_p99", percentile(l, 0.99));
        }
        report.baseline("iperf3_bytes_per_s", Math.round(iperfRate))
                .baseline("iperf3_before_bytes_per_s", Math.round(iperfBefore))
                .baseline("iperf3_after_bytes_per_s", Math.round(iperfAfter))
                .baseline("iperf3_command", iperf + " -c 127.0.0.1 -t " + shape.iperfSeconds() + " -J (server: iperf3 -s -1), before and after the Managers; ratios use the faster")
                .topLevelRatio("transfer_ratio", plain.bytesPerSecond(), iperfRate)
                .topLevelRatio("tls_transfer_ratio", tls.bytesPerSecond(), iperfRate)
                .baseline("iperf3_parallel_bytes_per_s", Math.round(parallelRate))
                .baseline("iperf3_parallel_streams", streams)
                .topLevelRatio("parallel_transfer_ratio", plain.bytesPerSecond(), parallelRate)
                .topLevelRatio("parallel_tls_transfer_ratio", tls.bytesPerSecond(), parallelRate)
                .check(plain.mismatches() + tls.mismatches() == 0, "checksum mismatches without a fault")
                .machine(MachineInfo.probe());
        BenchReport built = report.build();
        progress("%s", built.toOneLine());
        return built.toJson();
    }

    private static Mode runMode(LocalCluster cluster, LocalCluster.Node source, Path dir, String transport, Path poolDir,
                                Shape shape, Map<String, String> settings) throws Exception {
        int pages = shape.pages();
        int rounds = shape.rounds();
        int singles = shape.singles();
        int inFlight = shape.inFlight();
        int warmUps = shape.warmUps();
        Map<String, String> s = new HashMap<>(cluster.inProcessMember(2).peer(transport)
                .set("pool.size", String.valueOf(shape.poolBytes())).set("pool.shm-dir", poolDir.toString())
                .set("publish.budget-fraction", "0.9").set("data-dir", dir.resolve("requester-" + transport).toString())
                .set("peer.verify-threads", String.valueOf(shape.effectiveVerifyThreads()))
                .settings());
        s.putAll(settings);
        Manager requester = Manager.start(ManagerConfig.from(s)).await(120, TimeUnit.SECONDS);
        try {
            waitUntil(() -> requester.membershipRole().orElseThrow().members().containsKey(source.memberId()), 30);
            InstanceIdentity identity = identity();
            byte[] namespace = Namespaces.derive(identity);
            List<List<StateKey>> batches = new ArrayList<>();
            try (OrbitKvClient client = OrbitKvClient.connectTcp("127.0.0.1", source.grpcPort(),
                    OrbitKvClient.readToken(source.tokenFile()))) {
                EngineSession session = client.register(identity, InstanceRole.PREFILL_AND_DECODE).await(10, TimeUnit.SECONDS);
                for (int r = 0; r < rounds; r++) {
                    batches.add(publish(session, namespace, transport + "-round-" + r, pages));
                }
                for (int i = 0; i < singles; i++) {
                    batches.add(publish(session, namespace, transport + "-single-" + i, 1));
                }
                for (int w = 0; w < warmUps; w++) {
                    batches.add(publish(session, namespace, transport + "-warm-up-" + w, pages));
                }
                session.close();
            }
            PeerOwner owner = new PeerOwner(source.memberId(), source.incarnation());
            PeerVerticle role = requester.peerRole().orElseThrow();
            PeerProxy peer = requester.peer().orElseThrow();
            // The requester's start-up prefault of its pool mapping (peer.prefault-bytes) ends before measuring: a
            // Manager that has been up a while receives into mapped pages (reported: requester_prefault_ms).
            role.prefaulted().await(300, TimeUnit.SECONDS);
            double prefaultMs = role.prefaultNanos() / 1e6;
            // Warm-up (not measured): connections, TLS sessions, JIT.
            for (int w = 0; w < warmUps; w++) {
                List<StateKey> warm = batches.get(rounds + singles + w);
                peer.fetch(owner, namespace, warm, generations(requester, warm), Duration.ofSeconds(60))
                        .await(90, TimeUnit.SECONDS);
            }
            // Measured rounds: --in-flight fetches at a time (each its own lease), timed from the first start to the
            // last completion, so one fetch's reserve and verifying seal overlap another's stream.
            List<List<Long>> roundGenerations = new ArrayList<>();
            for (int r = 0; r < rounds; r++) {
                roundGenerations.add(generations(requester, batches.get(r)));
            }
            List<Double> acquireMs = new ArrayList<>();
            List<Double> submitMs = new ArrayList<>();
            double sourceChecksumsBefore = cluster.metric(source, "orbitkv_peer_source_checksums_total", null).orElse(0);
            Semaphore window = new Semaphore(inFlight);
            AtomicLong fetchedBytes = new AtomicLong();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            progress("%s: measuring %d rounds", transport, rounds);
            long started = System.nanoTime();
            for (int r = 0; r < rounds && failure.get() == null; r++) {
                window.acquire();
                long fetchStarted = System.nanoTime();
                peer.acquire(owner, namespace, batches.get(r), roundGenerations.get(r), Duration.ofSeconds(60)).compose(a -> {
                    long acquired = System.nanoTime();
                    synchronized (acquireMs) {
                        acquireMs.add((acquired - fetchStarted) / 1e6);
                    }
                    return peer.submit(a).andThen(x -> {
                        synchronized (submitMs) {
                            submitMs.add((System.nanoTime() - acquired) / 1e6);
                        }
                    });
                }).onComplete(ar -> {
                    if (ar.succeeded()) {
                        fetchedBytes.addAndGet(ar.result().bytes());
                    } else {
                        failure.compareAndSet(null, ar.cause());
                    }
                    window.release();
                });
            }
            if (!window.tryAcquire(inFlight, 120, TimeUnit.SECONDS)) {
                throw new IllegalStateException("the measured fetches did not end within 120 s");
            }
            long nanos = System.nanoTime() - started;
            if (failure.get() != null) {
                throw new IllegalStateException("a measured fetch failed: " + failure.get().getMessage(), failure.get());
            }
            long bytes = fetchedBytes.get();
            double sourceChecksums = cluster.metric(source, "orbitkv_peer_source_checksums_total", null).orElse(0)
                    - sourceChecksumsBefore;
            double[] latencies = new double[singles];
            for (int i = 0; i < singles; i++) {
                List<StateKey> keys = batches.get(rounds + i);
                List<Long> generations = generations(requester, keys);
                long t0 = System.nanoTime();
                peer.fetch(owner, namespace, keys, generations, Duration.ofSeconds(30)).await(60, TimeUnit.SECONDS);
                latencies[i] = (System.nanoTime() - t0) / 1e6;
            }
            double rate = bytes / (nanos / 1e9);
            double mismatches = requester.registry().get("orbitkv_peer_checksum_mismatches_total").counter().count();
            double verifiedOffLoop = requester.registry().get("orbitkv_peer_verified_bytes_total").tag("thread", "verifier")
                    .counter().count();
            double verifiedOnLoop = requester.registry().get("orbitkv_peer_verified_bytes_total").tag("thread", "event_loop")
                    .counter().count();
            progress("%s: received bytes checksummed (whole run) on verifier threads %.0f MiB, on the event loop %.0f MiB",
                    transport, verifiedOffLoop / (1 << 20), verifiedOnLoop / (1 << 20));
            progress("%s: %d bytes in %.3f s = %.2f GB/s", transport, bytes, nanos / 1e9, rate / 1e9);
            progress("%s: requester prefault %.0f ms; the source computed %.0f CRC32C at reserve in the measured rounds",
                    transport, prefaultMs, sourceChecksums);
            double acquire = median(acquireMs);
            double submit = median(submitMs);
            progress("%s: per %d-page fetch (medians, %d in flight): acquire (reserve + pins + local slots) %.1f ms, "
                    + "submit (stream + verifying seal + release) %.1f ms", transport, pages, inFlight, acquire, submit);
            long huge = io.orbitkv.nativeio.shm.Smaps.hugeMappedBytesUnder(poolDir);
            progress("%s: requester pool mapped with 2 MiB pages: %d MiB", transport, huge >> 20);
            return new Mode(transport, rate, latencies, bytes, mismatches, prefaultMs, sourceChecksums, acquire, submit,
                    huge, verifiedOffLoop, verifiedOnLoop);
        } finally {
            requester.close();
        }
    }

    static InstanceIdentity identity() {
        return InstanceIdentity.newBuilder().setModelFingerprint("peer-bench")
                .setRepresentation(Representation.RAW).setLayout("bench:NHD").setGeometry("layers=1")
                .setPageSizeTokens(16).setTpRank(0).setTpSize(1).setPpRank(0).setPpSize(1)
                .addGroups(GroupSpec.newBuilder().setGroupId(0).setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(PAGE))
                .build();
    }

    private static List<StateKey> publish(EngineSession session, byte[] namespace, String seed, int n) throws Exception {
        List<ByteString> hashes = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            hashes.add(ByteString.copyFrom((seed + ":" + i).getBytes()));
        }
        AllocatePublishReply allocated = session.allocate(hashes.stream()
                .map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList()).await(30, TimeUnit.SECONDS);
        SplittableRandom random = new SplittableRandom(seed.hashCode());
        for (PublishSlot slot : allocated.getSlotsList()) {
            if (slot.getStatus() != SlotStatus.ALLOCATED) {
                throw new IllegalStateException("the source did not allocate a slot: " + slot.getStatus());
            }
            MemorySegment target = session.slot(slot.getSlot());
            for (long o = 0; o < target.byteSize(); o += 8) {
                target.set(ValueLayout.JAVA_LONG_UNALIGNED, o, random.nextLong());
            }
        }
        session.seal(allocated.getPublishId(), List.of()).await(30, TimeUnit.SECONDS);
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
            for (int attempt = 0; attempt < 50; attempt++) {
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
