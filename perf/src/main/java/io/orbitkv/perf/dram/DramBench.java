package io.orbitkv.perf.dram;

import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.sim.SyntheticKv;
import io.orbitkv.manager.Manager;
import io.orbitkv.manager.ManagerConfig;
import io.orbitkv.protocol.engine.*;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.LatencyRecorder;
import io.orbitkv.perf.report.LatencySummary;
import com.google.protobuf.ByteString;
import io.vertx.core.json.JsonObject;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * {@code orbitkv bench dram}: the DRAM data path against its physical baselines, in one JVM and one run.
 *
 * <p>(a) Publish-then-restore of 2 MiB pages through a real Manager's shared-memory pool: allocate slots, copy the
 * engine's pages in, seal, query, copy the leased pages out, release. Baseline: plain memcpy of the same bytes the
 * engine copies anyway (its pages into scratch memory and back out), same buffers, same JVM. Rounds of the two
 * alternate so that noise hits both; the ratio is of medians.
 *
 * <p>(b) The query round trip of a 64-page hit over the Unix-socket gRPC channel (submit → READY with 64 leased
 * descriptors), against a no-op gRPC call (Ping) on the same channel, interleaved; p50 and p99 of each.
 */
public final class DramBench {
    private DramBench() {}

    public static JsonObject run(String[] args) {
        Map<String, String> opts = parse(args);
        long pageBytes = Long.parseLong(opts.getOrDefault("page-bytes", String.valueOf(2L << 20)));
        int batchPages = Integer.parseInt(opts.getOrDefault("batch-pages", "64"));
        int rounds = Integer.parseInt(opts.getOrDefault("rounds", "15"));
        int queryIterations = Integer.parseInt(opts.getOrDefault("query-iterations", "5000"));
        String poolSize = opts.getOrDefault("pool-size", "1GiB");
        try {
            return measure(pageBytes, batchPages, rounds, queryIterations, poolSize, opts);
        } catch (Exception e) {
            throw new IllegalStateException("dram bench failed: " + e.getMessage(), e);
        }
    }

    private static JsonObject measure(long pageBytes, int batchPages, int rounds, int queryIterations, String poolSize,
                                      Map<String, String> opts) throws Exception {
        Path dataDir = Files.createTempDirectory("orbitkv-bench-dram-");
        Map<String, String> settings = new HashMap<>();
        settings.put("data-dir", dataDir.toString());
        settings.put("pool.size", poolSize);
        settings.put("grpc.tcp-port", "0");
        settings.put("metrics.port", "0");
        settings.put("ssd.enabled", "false");
        settings.put("manager.event-loop-threads", opts.getOrDefault("event-loop-threads", "1"));
        ManagerConfig config = ManagerConfig.from(settings);
        try (Manager manager = Manager.start(config).await(120, TimeUnit.SECONDS);
             OrbitKvClient client = OrbitKvClient.connectUnix(manager.unixSocket(), manager.token());
             Arena arena = Arena.ofShared()) {
            InstanceIdentity identity = InstanceIdentity.newBuilder().setModelFingerprint("bench/dram")
                    .setRepresentation(Representation.RAW).setLayout("bench").setGeometry("bench").setPageSizeTokens(16)
                    .setTpSize(1).setPpSize(1)
                    .addGroups(GroupSpec.newBuilder().setGroupId(0).setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(pageBytes))
                    .build();
            try (EngineSession session = client.register(identity, InstanceRole.PREFILL_AND_DECODE).await()) {
                // The engine's own memory: pages it computed (source) and where it restores them (destination).
                MemorySegment[] source = new MemorySegment[batchPages];
                MemorySegment[] destination = new MemorySegment[batchPages];
                MemorySegment[] scratch = new MemorySegment[batchPages];
                for (int i = 0; i < batchPages; i++) {
                    source[i] = arena.allocate(pageBytes, 4096);
                    destination[i] = arena.allocate(pageBytes, 4096);
                    scratch[i] = arena.allocate(pageBytes, 4096);
                    SyntheticKv.fill(source[i], 7, 0, i);
                    destination[i].fill((byte) 1);
                    scratch[i].fill((byte) 1);
                }
                // Warm up the RPC path (JIT) with small batches, then touch the whole pool once through the real path
                // so that neither interpreted code nor first-touch page faults are measured.
                for (int w = 0; w < 1500; w++) {
                    List<ByteString> small = SyntheticKv.chain(-1 - w, 4);
                    publish(session, small, source, 0, 4096);
                    QueryReply reply = session.submit(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(small).build()), 0).await();
                    session.release(reply.getLease().getLeaseId()).await();
                    client.ping().await();
                }
                long poolBytes = config.poolSizeBytes();
                int warmRounds = (int) Math.max(2, poolBytes / (pageBytes * batchPages) + 1);
                long keySeed = 1000;
                for (int w = 0; w < warmRounds; w++) {
                    cycle(session, source, destination, keySeed++);
                    memcpyBaseline(source, scratch, destination);
                }
                double[] cycleBps = new double[rounds];
                double[] memcpyBps = new double[rounds];
                long roundBytes = pageBytes * batchPages;
                for (int r = 0; r < rounds; r++) {
                    long t0 = System.nanoTime();
                    cycle(session, source, destination, keySeed++);
                    long t1 = System.nanoTime();
                    memcpyBaseline(source, scratch, destination);
                    long t2 = System.nanoTime();
                    cycleBps[r] = roundBytes * 1e9 / (t1 - t0);
                    memcpyBps[r] = roundBytes * 1e9 / (t2 - t1);
                    System.err.printf("dram round %d/%d: cycle %.2f GB/s, memcpy %.2f GB/s%n", r + 1, rounds,
                            cycleBps[r] / 1e9, memcpyBps[r] / 1e9);
                }
                // Verify the last round restored exactly what was published.
                for (int i = 0; i < batchPages; i++) {
                    if (SyntheticKv.verify(destination[i], 7, 0, i) >= 0) {
                        throw new IllegalStateException("restored page " + i + " differs from the published page");
                    }
                }
                System.err.println("cycle phases (ms, all rounds) publish/query/copy-out/release: "
                        + Arrays.toString(Arrays.stream(PHASES).map(x -> x / 1_000_000).toArray()));
                double cycleMedian = median(cycleBps);
                double memcpyMedian = median(memcpyBps);

                // (b) query round trip of a 64-page hit vs a no-op call on the same channel.
                int hitPages = 64;
                List<ByteString> hitChain = SyntheticKv.chain(424242, hitPages);
                publish(session, hitChain, source, 0);
                GroupChain hitQuery = GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hitChain).build();
                LatencyRecorder queryLatency = LatencyRecorder.singleWriter();
                LatencyRecorder pingLatency = LatencyRecorder.singleWriter();
                // The first iterations only warm the path up (C2 needs thousands of calls to settle): steady state is
                // what the ratio describes.
                int warmupIterations = Integer.parseInt(opts.getOrDefault("query-warmup", "10000"));
                for (int i = 0; i < queryIterations + warmupIterations; i++) {
                    long p0 = System.nanoTime();
                    client.ping().await();
                    long p1 = System.nanoTime();
                    QueryReply reply = session.submit(List.of(hitQuery), 0).await();
                    long q1 = System.nanoTime();
                    if (reply.getStatus() != QueryStatus.READY || reply.getReadyBlocks() != hitPages) {
                        throw new IllegalStateException("expected a 64-page hit, got " + reply.getStatus() + " " + reply.getReadyBlocks());
                    }
                    session.release(reply.getLease().getLeaseId()).await();
                    if (i >= warmupIterations) {
                        pingLatency.recordNanos(p1 - p0);
                        queryLatency.recordNanos(q1 - p1);
                    }
                }
                LatencySummary query = queryLatency.summary();
                LatencySummary ping = pingLatency.summary();
                StatsReply stats = session.stats().await();
                if (stats.getActiveLeases() != 0) {
                    throw new IllegalStateException("leases leaked: " + stats.getActiveLeases());
                }
                return BenchReport.builder("dram")
                        .figure("publish_restore_bytes_per_second_median", cycleMedian)
                        .figure("publish_restore_rounds_bytes_per_second", new io.vertx.core.json.JsonArray(Arrays.stream(cycleBps).boxed().toList()))
                        .figure("query_64_page_hit", query.toJson())
                        .baseline("memcpy_bytes_per_second_median", memcpyMedian)
                        .baseline("memcpy_rounds_bytes_per_second", new io.vertx.core.json.JsonArray(Arrays.stream(memcpyBps).boxed().toList()))
                        .baseline("noop_grpc_ping", ping.toJson())
                        .topLevelRatio("throughput_ratio", cycleMedian, memcpyMedian)
                        .topLevelRatio("query_p50_ratio", query.p50Nanos(), ping.p50Nanos())
                        .ratio("query_p99_ratio", query.p99Nanos(), ping.p99Nanos())
                        .config("page_bytes", pageBytes).config("batch_pages", batchPages).config("rounds", rounds)
                        .config("query_iterations", queryIterations).config("query_warmup_iterations", opts.getOrDefault("query-warmup", "10000")).config("pool_size", poolSize)
                        .config("channel", "grpc over unix socket")
                        .config("manager_event_loop_threads", config.eventLoopThreads())
                        .build().toJson();
            }
        } finally {
            deleteTree(dataDir);
        }
    }

    /** One publish-then-restore of a batch under fresh keys: the full engine path. */
    /** Time spent per phase of the cycle, summed over rounds: where the gap to memcpy goes. */
    private static final long[] PHASES = new long[4];

    private static void cycle(EngineSession session, MemorySegment[] source, MemorySegment[] destination, long keySeed) {
        long a = System.nanoTime();
        List<ByteString> chain = SyntheticKv.chain(keySeed, source.length);
        publish(session, chain, source, 0);
        long b = System.nanoTime();
        PHASES[0] += b - a;
        QueryReply reply = session.submit(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(chain).build()), 0).await();
        if (reply.getStatus() != QueryStatus.READY || reply.getReadyBlocks() != source.length) {
            throw new IllegalStateException("expected READY for " + source.length + " pages, got " + reply.getStatus()
                    + " for " + reply.getReadyBlocks());
        }
        long c = System.nanoTime();
        PHASES[1] += c - b;
        for (LeasedPage page : reply.getLease().getPagesList()) {
            destination[page.getPosition()].copyFrom(session.slot(page.getSlot()));
        }
        long d = System.nanoTime();
        PHASES[2] += d - c;
        session.release(reply.getLease().getLeaseId()).await();
        PHASES[3] += System.nanoTime() - d;
    }

    private static void publish(EngineSession session, List<ByteString> chain, MemorySegment[] source, int firstSource) {
        publish(session, chain, source, firstSource, Long.MAX_VALUE);
    }

    /** Publishes a chain, copying at most {@code copyBytes} of each page (the warm-up copies little). */
    private static void publish(EngineSession session, List<ByteString> chain, MemorySegment[] source, int firstSource,
                                long copyBytes) {
        List<PageKey> keys = chain.stream().map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList();
        AllocatePublishReply allocated = session.allocate(keys).await();
        for (int i = 0; i < allocated.getSlotsCount(); i++) {
            PublishSlot slot = allocated.getSlots(i);
            if (slot.getStatus() == SlotStatus.ALLOCATED) {
                MemorySegment target = session.slot(slot.getSlot());
                MemorySegment from = source[(firstSource + i) % source.length];
                long n = Math.min(copyBytes, target.byteSize());
                target.asSlice(0, n).copyFrom(from.asSlice(0, n));
            }
        }
        session.seal(allocated.getPublishId(), List.of()).await();
    }

    /** The copies the engine makes anyway, without the Manager: its pages into scratch memory and back out. */
    private static void memcpyBaseline(MemorySegment[] source, MemorySegment[] scratch, MemorySegment[] destination) {
        for (int i = 0; i < source.length; i++) {
            scratch[i].copyFrom(source[i]);
        }
        for (int i = 0; i < source.length; i++) {
            destination[i].copyFrom(scratch[i]);
        }
    }

    static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }

    static Map<String, String> parse(String[] args) {
        Map<String, String> opts = new HashMap<>();
        for (String arg : args) {
            if (!arg.startsWith("--") || !arg.contains("=")) {
                throw new IllegalArgumentException("arguments look like --name=value, got '" + arg + "'");
            }
            opts.put(arg.substring(2, arg.indexOf('=')), arg.substring(arg.indexOf('=') + 1));
        }
        return opts;
    }

    private static void deleteTree(Path dir) {
        try (var paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (Exception ignored) {
            // Best effort: a temp directory.
        }
    }
}
