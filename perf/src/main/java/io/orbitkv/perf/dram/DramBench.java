package io.orbitkv.perf.dram;

import io.orbitkv.client.ColocatedChannel;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.sim.SyntheticKv;
import io.orbitkv.manager.Manager;
import io.orbitkv.manager.ManagerConfig;
import io.orbitkv.protocol.engine.*;
import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.LatencyRecorder;
import io.orbitkv.perf.report.LatencySummary;
import io.orbitkv.perf.report.Bootstrap;
import io.orbitkv.perf.report.KeyedContent;
import com.google.protobuf.ByteString;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
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
 * engine copies anyway (its pages into scratch memory and back out), same buffers, same JVM. Each round publishes a
 * fresh chain whose page bytes derive from the page keys ({@link KeyedContent}), so an older round's slot or a page
 * that was not written mismatches. In each round both sides run once, the cycle first in even rounds and memcpy first
 * in odd ones; the headline is the median of the per-round paired ratios with a bootstrap interval. Each side starts
 * from a poisoned destination and its restored bytes are compared with the key-derived bytes right after it, before
 * the other side writes the destination. A slot the Manager did not answer {@code ALLOCATED}, a query that is not
 * READY for the whole batch, or one wrong byte fails the round: the report lists it and the run does not pass. The
 * cycle's calls go over the co-located channel where the Manager offers it ({@link EngineSession#useColocated}, as a
 * co-located engine would), or over gRPC ({@code --cycle-channel=grpc}).
 *
 * <p>(b) The query round trip of a 64-page hit over the Unix-socket gRPC channel (submit → READY with 64 leased
 * descriptors), against a no-op gRPC call (Ping) on the same channel, interleaved one for one, Ping first in even
 * iterations and the query first in odd ones; p50 and p99 of each.
 *
 * <p>(c) The same 64-page hit query over the co-located channel (the SEQPACKET socket, {@link ColocatedChannel})
 * against that channel's own no-op round trip (Ping), interleaved the same way; the lease is released over the
 * channel, untimed.
 */
public final class DramBench {
    /** What a destination holds before a side runs: never a valid page. */
    private static final byte POISON = (byte) 0xA5;
    /** Resamples and seed of the paired ratio's bootstrap interval (seeded: the interval can be recomputed). */
    private static final int BOOTSTRAP_RESAMPLES = 10_000;
    private static final long BOOTSTRAP_SEED = 42;

    private DramBench() {}

    /** The knobs; see the README for their meaning. */
    record Settings(long pageBytes, int batchPages, int rounds, int queryIterations, int queryWarmup, int rpcWarmup,
                    String poolSize, int eventLoopThreads, String profile, String profileCycleDir,
                    boolean colocatedSteps, String colocatedJfr, int colocatedSpinMicros, String cycleChannel,
                    int callsAloneRounds, String profileCalls, int rpcWarmupPages, long callsAloneCopyBytes) {}

    /**
     * A bench-side seam for the tests that break the path: each method sees one step of a timed round (0-based) and
     * may change what the bench gets or what the pool holds. {@link #NONE} in the command; warm-up cycles never call it.
     */
    interface Fault {
        Fault NONE = new Fault() {};

        /** The Manager's answer to the allocation, as the bench will act on it. */
        default AllocatePublishReply allocated(int round, AllocatePublishReply reply) {
            return reply;
        }

        /** After the seal: the published pages are in the pool. */
        default void sealed(int round, EngineSession session, AllocatePublishReply allocated) {}

        /** The Manager's READY answer, as the bench will copy from it. */
        default QueryReply ready(int round, QueryReply reply) {
            return reply;
        }
    }

    /** A round whose path failed (a check the bench makes): the report lists its message and the run fails. */
    static final class RoundFailure extends RuntimeException {
        RoundFailure(String message) {
            super(message);
        }
    }

    public static JsonObject run(BenchArgs a) {
        return run(a, Fault.NONE);
    }

    static JsonObject run(BenchArgs a, Fault fault) {
        Settings s = new Settings(
                a.bytes("page-bytes", "2MiB"),
                a.integer("batch-pages", 64),
                a.integer("rounds", 15),
                a.integer("query-iterations", 5000),
                a.integer("query-warmup", 10_000),
                a.integer("rpc-warmup", 1500),
                a.string("pool-size", "1GiB"),
                a.integer("event-loop-threads", 1),
                a.string("profile", ""),
                a.string("profile-cycle", ""),
                a.flag("colocated-steps", false),
                a.string("colocated-jfr", ""),
                a.integer("colocated-spin-micros", 0),
                a.string("cycle-channel", ColocatedChannel.isAvailable() ? "colocated" : "grpc"),
                a.integer("calls-alone-rounds", -1),
                a.string("profile-calls", ""),
                a.integer("rpc-warmup-pages", -1),
                a.bytes("calls-alone-copy-bytes", "0"));
        a.requireAllUsed();
        if (s.pageBytes() <= 0 || s.pageBytes() % 4096 != 0 || s.batchPages() < 1 || s.rounds() < 1
                || s.queryIterations() < 1 || s.queryWarmup() < 0 || s.rpcWarmup() < 0 || s.colocatedSpinMicros() < 0
                || !List.of("grpc", "colocated").contains(s.cycleChannel()) || s.callsAloneCopyBytes() < 0) {
            throw new IllegalArgumentException("--page-bytes is a positive multiple of 4096; --batch-pages, --rounds and "
                    + "--query-iterations are positive; the warm-ups are >= 0; --cycle-channel is grpc or colocated");
        }
        try {
            return measure(s, fault);
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException("dram bench failed: " + e.getMessage(), e);
        }
    }

    private static JsonObject measure(Settings s, Fault fault) throws Exception {
        long pageBytes = s.pageBytes();
        int batchPages = s.batchPages();
        int rounds = s.rounds();
        int queryIterations = s.queryIterations();
        String poolSize = s.poolSize();
        Path dataDir = Files.createTempDirectory("orbitkv-bench-dram-");
        Map<String, String> settings = new HashMap<>();
        settings.put("data-dir", dataDir.toString());
        settings.put("pool.size", poolSize);
        settings.put("grpc.tcp-port", "0");
        settings.put("metrics.port", "0");
        settings.put("ssd.enabled", "false");
        settings.put("manager.event-loop-threads", Integer.toString(s.eventLoopThreads()));
        ManagerConfig config = ManagerConfig.from(settings);
        BenchReport.Builder report = BenchReport.builder("dram");
        try (Manager manager = Manager.start(config).await(120, TimeUnit.SECONDS);
             OrbitKvClient client = OrbitKvClient.connectUnix(manager.unixSocket(), manager.token());
             Arena arena = Arena.ofShared()) {
            InstanceIdentity identity = InstanceIdentity.newBuilder().setModelFingerprint("bench/dram")
                    .setRepresentation(Representation.RAW).setLayout("bench").setGeometry("bench").setPageSizeTokens(16)
                    .setTpSize(1).setPpSize(1)
                    .addGroups(GroupSpec.newBuilder().setGroupId(0).setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(pageBytes))
                    .build();
            try (EngineSession session = client.register(identity, InstanceRole.PREFILL_AND_DECODE).await();
                 ColocatedChannel cycleChannel = s.cycleChannel().equals("colocated")
                         ? ColocatedChannel.connect(manager.colocatedSocket(), manager.token(),
                                 Duration.ofNanos(s.colocatedSpinMicros() * 1_000L)) : null) {
                // Part (a)'s calls go over the channel the engine would use: gRPC, or the co-located channel.
                session.useColocated(cycleChannel);
                // The engine's own memory: pages it computed (source) and where it restores them (destination).
                MemorySegment[] source = new MemorySegment[batchPages];
                MemorySegment[] destination = new MemorySegment[batchPages];
                MemorySegment[] scratch = new MemorySegment[batchPages];
                for (int i = 0; i < batchPages; i++) {
                    source[i] = arena.allocate(pageBytes, 4096);
                    destination[i] = arena.allocate(pageBytes, 4096);
                    scratch[i] = arena.allocate(pageBytes, 4096);
                    source[i].fill((byte) 1);
                    destination[i].fill((byte) 1);
                    scratch[i].fill((byte) 1);
                }
                // Warm up the RPC path (JIT) with batches of the timed rounds' size (their per-page loops are what C2
                // must have compiled; only 4 KiB of each page is copied), then run full rounds untimed (keyed fills,
                // both sides, both verifications) that also touch the whole pool once through the real path, so that
                // neither interpreted code, nor compilations competing for the CPUs, nor first-touch page faults are
                // measured ("jvm_during_timed_rounds" shows what is left).
                int warmupPages = s.rpcWarmupPages() < 0 ? batchPages : s.rpcWarmupPages();
                for (int w = 0; w < s.rpcWarmup(); w++) {
                    List<ByteString> small = SyntheticKv.chain(-1 - w, warmupPages);
                    AllocatePublishReply allocated = allocate(session, small, -1, Fault.NONE);
                    copyIn(session, allocated, source, 4096);
                    session.seal(allocated.getPublishId(), List.of()).await();
                    QueryReply reply = session.submit(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(small).build()), 0).await();
                    session.release(reply.getLease().getLeaseId()).await();
                    client.ping().await();
                }
                long poolBytes = config.poolSizeBytes();
                int poolRounds = (int) Math.max(2, poolBytes / (pageBytes * batchPages) + 1);
                long keySeed = 1000;
                // At least the rounds that touch the whole pool; then on until the JIT is quiet (two rounds in a row
                // with at most JIT_QUIET_MILLIS of compilation: on two loaded cores C2's queue drains slowly), at most
                // MAX_EXTRA_WARM_ROUNDS more.
                int warmRounds = 0;
                for (int w = 0, quiet = 0; w < poolRounds || (quiet < 2 && w < poolRounds + MAX_EXTRA_WARM_ROUNDS); w++) {
                    long compiledBefore = jvmWork()[0];
                    List<ByteString> chain = SyntheticKv.chain(keySeed++, batchPages);
                    for (int i = 0; i < batchPages; i++) {
                        KeyedContent.fill(source[i], chain.get(i));
                    }
                    // The timed rounds' own code path (round >= 0: phases and per-round calls recorded, reset below),
                    // so that C2 has not pruned it as never taken and the first timed round does not deoptimize.
                    int round = w;
                    measuredRound(w, () -> cycle(session, chain, source, destination, round, Fault.NONE),
                            () -> memcpyBaseline(source, scratch, destination), destination, chain);
                    quiet = jvmWork()[0] - compiledBefore <= JIT_QUIET_MILLIS ? quiet + 1 : 0;
                    warmRounds++;
                }
                Arrays.fill(MEMCPY_PHASES, 0);
                Arrays.fill(PHASES, 0);
                ROUND_CALLS.clear();
                ROUND_CALLS_LOOP_CPU.clear();
                LoopCpu.reset();
                CycleProfile cycleProfile = CycleProfile.start(s.profileCycleDir());
                long timedFromMillis = ManagementFactory.getRuntimeMXBean().getUptime();
                long[] jvmBefore = jvmWork();
                double[] cycleBps = new double[rounds];
                double[] memcpyBps = new double[rounds];
                long roundBytes = pageBytes * batchPages;
                int cycleFirstRounds = 0;
                int completed = 0;
                for (int r = 0; r < rounds; r++) {
                    int round = r;
                    List<ByteString> chain = SyntheticKv.chain(keySeed++, batchPages);
                    for (int i = 0; i < batchPages; i++) {
                        KeyedContent.fill(source[i], chain.get(i)); // this round's pages, untimed
                    }
                    long[] nanos;
                    try {
                        nanos = measuredRound(r, () -> cycle(session, chain, source, destination, round, fault),
                                () -> memcpyBaseline(source, scratch, destination), destination, chain);
                    } catch (RoundFailure failure) {
                        report.failure(failure.getMessage());
                        System.err.println("dram round " + (r + 1) + " FAILED: " + failure.getMessage());
                        break;
                    }
                    cycleFirstRounds += cycleFirst(r) ? 1 : 0;
                    cycleBps[r] = roundBytes * 1e9 / nanos[0];
                    memcpyBps[r] = roundBytes * 1e9 / nanos[1];
                    completed++;
                    long[] calls = ROUND_CALLS.getLast();
                    long[] callsCpu = ROUND_CALLS_LOOP_CPU.getLast();
                    System.err.printf("dram round %d/%d (%s first): cycle %.2f GB/s, memcpy %.2f GB/s, ratio %.3f;"
                                    + " calls allocate/seal/query/release %d/%d/%d/%d µs (Manager loop CPU"
                                    + " %d/%d/%d/%d µs)%n",
                            r + 1, rounds, cycleFirst(r) ? "cycle" : "memcpy", cycleBps[r] / 1e9, memcpyBps[r] / 1e9,
                            cycleBps[r] / memcpyBps[r], calls[0] / 1000, calls[1] / 1000, calls[2] / 1000, calls[3] / 1000,
                            callsCpu[0] / 1000, callsCpu[1] / 1000, callsCpu[2] / 1000, callsCpu[3] / 1000);
                }
                long timedToMillis = ManagementFactory.getRuntimeMXBean().getUptime();
                long[] jvmAfter = jvmWork();
                JsonObject jvm = new JsonObject().put("jit_compile_millis", jvmAfter[0] - jvmBefore[0])
                        .put("gc_count", jvmAfter[1] - jvmBefore[1]).put("gc_millis", jvmAfter[2] - jvmBefore[2]);
                report.figure("jvm_during_timed_rounds", jvm);
                System.err.println("JVM work during the timed rounds: " + jvm.encode());
                // The JVM's uptime over the timed rounds: -Xlog (gc, safepoint, jit+compilation with uptime
                // decorations) tells what of the JVM's own work fell inside them.
                report.config("timed_rounds_jvm_uptime_millis", new JsonArray(List.of(timedFromMillis, timedToMillis)));
                System.err.println("timed rounds: JVM uptime " + timedFromMillis + ".." + timedToMillis + " ms");
                List<String> profileFiles = cycleProfile == null ? List.of() : cycleProfile.stop();
                int aloneRounds = s.callsAloneRounds() < 0 ? completed : s.callsAloneRounds();
                QueryProfile callsProfile = QueryProfile.start(s.profileCalls(), "calls-alone.jfr");
                LatencyRecorder[] aloneLatency = new LatencyRecorder[ALONE_CALL_NAMES.length];
                Arrays.setAll(aloneLatency, i -> LatencyRecorder.singleWriter());
                CpuWindow aloneCpu = new CpuWindow();
                long[] aloneJvmBefore = jvmWork();
                aloneCpu.start();
                CacheFlush flush = CacheFlush.of(arena, s.callsAloneCopyBytes());
                long[] controlAlone = controlCallsAlone(session, keySeed, aloneRounds, batchPages, aloneLatency, flush);
                JsonObject aloneCpuPerRound = aloneCpu.perIteration(Math.max(1, aloneRounds));
                long[] aloneJvmAfter = jvmWork();
                JsonObject aloneJvm = new JsonObject().put("jit_compile_millis", aloneJvmAfter[0] - aloneJvmBefore[0])
                        .put("gc_count", aloneJvmAfter[1] - aloneJvmBefore[1])
                        .put("gc_millis", aloneJvmAfter[2] - aloneJvmBefore[2]);
                if (callsProfile != null) {
                    report.config("profile_calls", callsProfile.stop());
                }
                // Per call, the p50 and p99 of the calls alone (the sums above hide whether a call is slow each time
                // or now and then), and the CPU of a round's six calls: load moves latencies, barely CPU time.
                JsonObject alonePercentiles = new JsonObject();
                for (int i = 0; i < ALONE_CALL_NAMES.length; i++) {
                    LatencySummary summary = aloneLatency[i].summary();
                    alonePercentiles.put(ALONE_CALL_NAMES[i], new JsonObject().put("p50", summary.p50Nanos() / 1e3)
                            .put("p99", summary.p99Nanos() / 1e3));
                }
                report.figure("control_calls_alone_percentiles_micros", alonePercentiles)
                        .figure("control_calls_alone_cpu_micros_per_round", aloneCpuPerRound)
                        .figure("jvm_during_calls_alone", aloneJvm);
                System.err.println("the calls alone, p50/p99 (µs): " + alonePercentiles.encode() + "; CPU per round (µs): "
                        + aloneCpuPerRound.encode() + "; JVM work meanwhile: " + aloneJvm.encode());
                keySeed += aloneRounds;
                JsonObject wake = wakeProbe(client, manager, source, scratch, Math.max(completed, 5));
                System.err.println("wake-up probe (µs): " + wake.encode());
                report.figure("wake_probe_micros", wake).figure("cycle_calls_per_round_micros", perRoundJson(ROUND_CALLS))
                        .figure("cycle_calls_loop_cpu_per_round_micros", perRoundJson(ROUND_CALLS_LOOP_CPU));
                session.useColocated(null); // parts (b) and (c) measure their own channels
                System.err.println("cycle phases (µs, timed rounds) allocate/copy-in/seal/query/copy-out/release: "
                        + Arrays.toString(Arrays.stream(PHASES).map(x -> x / 1_000).toArray())
                        + "; memcpy in/out: " + Arrays.toString(Arrays.stream(MEMCPY_PHASES).map(x -> x / 1_000).toArray())
                        + "; the four calls alone (no copies between them) allocate/seal/query/release, then the same"
                        + " query and release again: "
                        + Arrays.toString(Arrays.stream(controlAlone).limit(ALONE_CALL_NAMES.length).map(x -> x / 1_000)
                                .toArray()) + ", the Manager loops' CPU during each: "
                        + Arrays.toString(Arrays.stream(controlAlone).skip(ALONE_CALL_NAMES.length).map(x -> x / 1_000)
                                .toArray()));
                report.figure("cycle_phases_micros", phasesJson(PHASES, CYCLE_PHASE_NAMES))
                        .baseline("memcpy_phases_micros", phasesJson(MEMCPY_PHASES, new String[] {"copy_in", "copy_out"}))
                        .figure("control_calls_alone_micros", phasesJson(controlAlone, ALONE_CALL_NAMES))
                        .figure("control_calls_alone_loop_cpu_micros", phasesJson(
                                Arrays.copyOfRange(controlAlone, ALONE_CALL_NAMES.length, controlAlone.length),
                                ALONE_CALL_NAMES));
                if (cycleProfile != null) {
                    report.config("profile_files", new JsonArray(profileFiles));
                }
                report.config("page_bytes", pageBytes).config("batch_pages", batchPages).config("rounds", rounds)
                        .config("completed_rounds", completed)
                        .config("calls_alone_rounds", aloneRounds)
                        .config("calls_alone_copy_bytes", s.callsAloneCopyBytes())
                        .config("query_iterations", queryIterations).config("query_warmup_iterations", s.queryWarmup())
                        .config("rpc_warmup_cycles", s.rpcWarmup()).config("rpc_warmup_pages", warmupPages)
                        .config("warm_rounds", warmRounds).config("pool_size", poolSize)
                        .config("cycle_first_rounds", cycleFirstRounds).config("memcpy_first_rounds", completed - cycleFirstRounds)
                        .config("verification", "every byte of every restored page, compared with bytes derived from "
                                + "the round's keys, after each side of each round on a destination poisoned before it")
                        .config("channel", "grpc over unix socket")
                        .config("cycle_channel", cycleChannel == null ? "grpc over unix socket"
                                : "the co-located channel (SOCK_SEQPACKET) for the cycle's calls")
                        .config("manager_event_loop_threads", config.eventLoopThreads());
                if (completed < rounds) { // a round failed: no figure of a broken path
                    StatsReply stats = session.stats().await();
                    return report.check(stats.getActiveLeases() == 0, "leases leaked: " + stats.getActiveLeases())
                            .build().toJson();
                }
                double[] paired = new double[rounds];
                for (int r = 0; r < rounds; r++) {
                    paired[r] = cycleBps[r] / memcpyBps[r];
                }
                Bootstrap.Interval pairedRatio = Bootstrap.medianInterval(paired, 0.95, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED);
                double cycleMedian = median(cycleBps);
                double memcpyMedian = median(memcpyBps);

                // (b) query round trip of a 64-page hit vs a no-op call on the same channel.
                int hitPages = 64;
                List<ByteString> hitChain = SyntheticKv.chain(424242, hitPages);
                AllocatePublishReply hit = allocate(session, hitChain, -1, Fault.NONE);
                copyIn(session, hit, source, Long.MAX_VALUE);
                session.seal(hit.getPublishId(), List.of()).await();
                GroupChain hitQuery = GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hitChain).build();
                LatencyRecorder queryLatency = LatencyRecorder.singleWriter();
                LatencyRecorder pingLatency = LatencyRecorder.singleWriter();
                // The first iterations only warm the path up (C2 needs thousands of calls to settle): steady state is
                // what the ratio describes.
                int warmupIterations = s.queryWarmup();
                int pingFirstIterations = 0;
                QueryProfile profile = null;
                CpuWindow grpcCpu = new CpuWindow();
                for (int i = 0; i < queryIterations + warmupIterations; i++) {
                    if (i == warmupIterations) {
                        profile = QueryProfile.start(s.profile());
                        grpcCpu.start();
                    }
                    boolean pingFirst = pingFirst(i);
                    long pingNanos = 0;
                    if (pingFirst) {
                        pingNanos = timedPing(client);
                    }
                    long q0 = System.nanoTime();
                    QueryReply reply = session.submit(List.of(hitQuery), 0).await();
                    long queryNanos = System.nanoTime() - q0;
                    if (reply.getStatus() != QueryStatus.READY || reply.getReadyBlocks() != hitPages) {
                        throw new IllegalStateException("expected a 64-page hit, got " + reply.getStatus() + " " + reply.getReadyBlocks());
                    }
                    session.release(reply.getLease().getLeaseId()).await();
                    if (!pingFirst) {
                        pingNanos = timedPing(client);
                    }
                    if (i >= warmupIterations) {
                        pingLatency.recordNanos(pingNanos);
                        queryLatency.recordNanos(queryNanos);
                        pingFirstIterations += pingFirst ? 1 : 0;
                    }
                }
                // The event loops here are the Manager's and the gRPC client's.
                JsonObject grpcCpuPerIteration = grpcCpu.perIteration(queryIterations);
                if (profile != null) {
                    report.config("profile", profile.stop());
                }
                LatencySummary query = queryLatency.summary();
                LatencySummary ping = pingLatency.summary();
                ColocatedLatency colocated = colocatedQuery(manager, session, hitQuery, hitPages, queryIterations,
                        warmupIterations, s);
                StatsReply stats = session.stats().await();
                report
                        .topLevelRatio("throughput_ratio", pairedRatio.estimate())
                        .ratio("throughput_ratio_lower_95", pairedRatio.lower())
                        .ratio("throughput_ratio_upper_95", pairedRatio.upper())
                        .figure("throughput_ratio_paired", pairedRatio.toJson()
                                .put("rounds", new JsonArray(Arrays.stream(paired).boxed().toList())))
                        .figure("publish_restore_bytes_per_second_median", cycleMedian)
                        .figure("publish_restore_rounds_bytes_per_second", new JsonArray(Arrays.stream(cycleBps).boxed().toList()))
                        .figure("query_64_page_hit", query.toJson())
                        .figure("query_cpu_micros_per_iteration", grpcCpuPerIteration)
                        .figure("verified_pages", 2L * rounds * batchPages)
                        .baseline("memcpy_bytes_per_second_median", memcpyMedian)
                        .baseline("memcpy_rounds_bytes_per_second", new JsonArray(Arrays.stream(memcpyBps).boxed().toList()))
                        .baseline("noop_grpc_ping", ping.toJson())
                        .topLevelRatio("query_p50_ratio", query.p50Nanos(), ping.p50Nanos())
                        .ratio("query_p99_ratio", query.p99Nanos(), ping.p99Nanos())
                        .ratio("throughput_ratio_of_medians", cycleMedian, memcpyMedian)
                        .config("ping_first_iterations", pingFirstIterations)
                        .config("query_first_iterations", queryIterations - pingFirstIterations)
                        .check(stats.getActiveLeases() == 0, "leases leaked: " + stats.getActiveLeases());
                colocated.report(report); // after the headline ratios: the first ratio stays the throughput one
                return report.build().toJson();
            }
        } finally {
            deleteTree(dataDir);
        }
    }

    /** The co-located channel's hit query and its no-op round trip, p50/p99 of each. */
    record ColocatedLatency(LatencySummary query, LatencySummary ping, JsonObject steps, int spinMicros, JsonObject cpu) {
        void report(BenchReport.Builder report) {
            if (steps != null) {
                report.figure("colocated_steps", steps);
            }
            report.figure("colocated_cpu_micros_per_iteration", cpu);
            report.figure("colocated_query_64_page_hit", query.toJson())
                    .baseline("colocated_noop_ping", ping.toJson())
                    .topLevelRatio("colocated_query_p50_ratio", query.p50Nanos(), ping.p50Nanos())
                    .ratio("colocated_query_p99_ratio", query.p99Nanos(), ping.p99Nanos())
                    .figure("colocated_query_p50_micros", query.p50Nanos() / 1e3)
                    .figure("colocated_query_p99_micros", query.p99Nanos() / 1e3)
                    .config("colocated_channel", "SOCK_SEQPACKET unix socket, engine.proto messages in 8-byte-header frames")
                    .config("colocated_client_spin_micros", spinMicros);
        }
    }

    /**
     * (c): the 64-page hit over the co-located channel against a Ping on the same channel, Ping first in even
     * iterations; each lease is released over the channel, untimed.
     */
    private static ColocatedLatency colocatedQuery(Manager manager, EngineSession session, GroupChain hitQuery,
                                                   int hitPages, int iterations, int warmup, Settings s) throws Exception {
        LatencyRecorder queryLatency = LatencyRecorder.singleWriter();
        LatencyRecorder pingLatency = LatencyRecorder.singleWriter();
        boolean steps = s.colocatedSteps() || !s.colocatedJfr().isEmpty();
        ColocatedSteps recording = null;
        CpuWindow cpu = new CpuWindow();
        try (ColocatedChannel channel = ColocatedChannel.connect(manager.colocatedSocket(), manager.token(),
                Duration.ofNanos(s.colocatedSpinMicros() * 1_000L))) {
            for (int i = 0; i < iterations + warmup; i++) {
                if (i == warmup && steps) {
                    recording = ColocatedSteps.start(s.colocatedJfr().isEmpty() ? null : Path.of(s.colocatedJfr()));
                }
                if (i == warmup) {
                    cpu.start();
                }
                boolean pingFirst = pingFirst(i);
                long pingNanos = pingFirst ? timedPing(channel) : 0;
                long q0 = System.nanoTime();
                QueryReply reply = channel.submitQuery(session, List.of(hitQuery), 0);
                long queryNanos = System.nanoTime() - q0;
                if (reply.getStatus() != QueryStatus.READY || reply.getReadyBlocks() != hitPages) {
                    throw new IllegalStateException("expected a 64-page hit over the co-located channel, got "
                            + reply.getStatus() + " " + reply.getReadyBlocks());
                }
                channel.release(session.session(), reply.getLease().getLeaseId());
                if (!pingFirst) {
                    pingNanos = timedPing(channel);
                }
                if (i >= warmup) {
                    pingLatency.recordNanos(pingNanos);
                    queryLatency.recordNanos(queryNanos);
                }
            }
        }
        JsonObject cpuPerIteration = cpu.perIteration(iterations);
        JsonObject summary = recording == null ? null : recording.summary();
        if (summary != null) {
            System.err.println("co-located steps (p50, µs): " + summary.encodePrettily());
        }
        return new ColocatedLatency(queryLatency.summary(), pingLatency.summary(), summary, s.colocatedSpinMicros(),
                cpuPerIteration);
    }

    /**
     * CPU time over a measured window, per iteration (query + release + Ping): the Manager's event loops (every role
     * runs on them; in part (b) with the gRPC client's, which idles in part (c)), the calling thread (the engine's side) and the whole
     * process. CPU time, unlike the latencies, barely moves with other processes' load on a shared machine.
     */
    static final class CpuWindow {
        private final java.lang.management.ThreadMXBean threads = java.lang.management.ManagementFactory.getThreadMXBean();
        private long loops;
        private long caller;
        private long process;

        void start() {
            loops = loopCpuNanos();
            caller = threads.getCurrentThreadCpuTime();
            process = processCpuNanos();
        }

        JsonObject perIteration(int iterations) {
            return new JsonObject()
                    .put("manager_event_loops", (loopCpuNanos() - loops) / 1e3 / iterations)
                    .put("engine_thread", (threads.getCurrentThreadCpuTime() - caller) / 1e3 / iterations)
                    .put("process", (processCpuNanos() - process) / 1e3 / iterations);
        }

        private long loopCpuNanos() {
            long sum = 0;
            for (java.lang.management.ThreadInfo info : threads.getThreadInfo(threads.getAllThreadIds())) {
                if (info != null && info.getThreadName().startsWith("vert.x-eventloop-thread")) {
                    sum += Math.max(0, threads.getThreadCpuTime(info.getThreadId()));
                }
            }
            return sum;
        }

        private static long processCpuNanos() {
            return ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory
                    .getOperatingSystemMXBean()).getProcessCpuTime();
        }
    }

    /**
     * CPU time of the Manager's event loops, read around single calls: a call whose wall time is many times the loops'
     * CPU for it waited (for a CPU, a wake-up), one whose loop CPU grew itself ran slower (cold caches after a copy).
     * The loop threads are looked up once per run ({@link #reset}, and again when one of them ended); reading one
     * thread's CPU clock costs about a microsecond.
     */
    static final class LoopCpu {
        private static final java.lang.management.ThreadMXBean THREADS =
                java.lang.management.ManagementFactory.getThreadMXBean();
        private static long[] loopIds = new long[0];

        static void reset() {
            loopIds = new long[0];
        }

        static long nanos() {
            long sum = readLoops();
            if (sum < 0) { // a loop of an earlier run: look the threads up again
                reset();
                sum = readLoops();
            }
            return Math.max(0, sum);
        }

        private static long readLoops() {
            if (loopIds.length == 0) {
                loopIds = Arrays.stream(THREADS.getThreadInfo(THREADS.getAllThreadIds()))
                        .filter(info -> info != null && info.getThreadName().startsWith("vert.x-eventloop-thread"))
                        .mapToLong(java.lang.management.ThreadInfo::getThreadId).toArray();
            }
            long sum = 0;
            for (long id : loopIds) {
                long nanos = THREADS.getThreadCpuTime(id);
                if (nanos < 0) {
                    return -1;
                }
                sum += nanos;
            }
            return sum;
        }
    }

    private static final String[] CYCLE_PHASE_NAMES = {"allocate", "copy_in", "seal", "query", "copy_out", "release"};
    private static final String[] CONTROL_CALL_NAMES = {"allocate", "seal", "query", "release"};

    /** The calls alone: the four calls, then the same query and its release once more. */
    private static final String[] ALONE_CALL_NAMES = {"allocate", "seal", "query", "release", "query_again",
        "release_again"};

    private static JsonObject phasesJson(long[] nanos, String[] names) {
        JsonObject json = new JsonObject();
        for (int i = 0; i < names.length; i++) {
            json.put(names[i], nanos[i] / 1_000);
        }
        return json;
    }

    /**
     * The cycle's four calls without the copies between them, {@code rounds} times on fresh chains of
     * {@code batchPages} pages: what the calls cost when the engine thread did not just copy for milliseconds.
     * Against the cycle's phases this tells the calls' own cost from what a call pays after a copy (threads woken
     * on a CPU that idled, or waited for, through the copy). The slots are sealed unwritten: these keys are never
     * restored or compared. Nanoseconds summed per call: allocate, seal, query, release, the
     * same query again and its release; then, in the same order, the Manager loops' CPU during each.
     */
    private static long[] controlCallsAlone(EngineSession session, long firstSeed, int rounds, int batchPages,
                                            LatencyRecorder[] latency, CacheFlush flush) {
        long[] spent = new long[ALONE_CALL_NAMES.length * 2];
        long[] wall = new long[ALONE_CALL_NAMES.length];
        long[] cpu = new long[ALONE_CALL_NAMES.length];
        GroupChain[] query = new GroupChain[1];
        for (int r = 0; r < rounds; r++) {
            List<ByteString> chain = SyntheticKv.chain(firstSeed + r, batchPages);
            query[0] = GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(chain).build();
            AllocatePublishReply[] allocated = new AllocatePublishReply[1];
            QueryReply[] replies = new QueryReply[2];
            timedCall(0, wall, cpu, flush, () -> allocated[0] = allocate(session, chain, -1, Fault.NONE));
            timedCall(1, wall, cpu, flush, () -> session.seal(allocated[0].getPublishId(), List.of()).await());
            timedCall(2, wall, cpu, flush, () -> replies[0] = session.submit(List.of(query[0]), 0).await());
            timedCall(3, wall, cpu, flush, () -> releaseIfLeased(session, replies[0]));
            if (replies[0].getStatus() != QueryStatus.READY) {
                throw new IllegalStateException("the calls alone: expected READY, got " + replies[0].getStatus());
            }
            // The same query again: the first query of just-sealed pages against a repeated hit of the same pages.
            timedCall(4, wall, cpu, flush, () -> replies[1] = session.submit(List.of(query[0]), 0).await());
            timedCall(5, wall, cpu, flush, () -> releaseIfLeased(session, replies[1]));
            if (replies[1].getStatus() != QueryStatus.READY) {
                throw new IllegalStateException("the calls alone, repeated query: expected READY, got "
                        + replies[1].getStatus());
            }
            for (int i = 0; i < wall.length; i++) {
                spent[i] += wall[i];
                spent[ALONE_CALL_NAMES.length + i] += cpu[i];
                latency[i].recordNanos(wall[i]);
            }
        }
        return spent;
    }

    /** Runs one call: its wall time into {@code wall[i]}, the Manager loops' CPU meanwhile into {@code cpu[i]}. */
    private static void timedCall(int i, long[] wall, long[] cpu, CacheFlush flush, Runnable call) {
        flush.run();
        long cpu0 = LoopCpu.nanos();
        long t0 = System.nanoTime();
        call.run();
        wall[i] = System.nanoTime() - t0;
        cpu[i] = LoopCpu.nanos() - cpu0;
    }

    /**
     * What the engine thread does before each call alone ({@code --calls-alone-copy-bytes}): nothing, or a copy of that
     * many bytes between two buffers of its own, untimed, as the cycle copies its pages between calls. Against the
     * calls alone without it this tells what a call pays because a copy ran just before it (caches and TLBs
     * refilled with page bytes, a CPU that went idle meanwhile) from what it costs itself.
     */
    record CacheFlush(MemorySegment from, MemorySegment to) {
        static CacheFlush of(Arena arena, long bytes) {
            return bytes == 0 ? new CacheFlush(null, null)
                    : new CacheFlush(arena.allocate(bytes, 4096), arena.allocate(bytes, 4096));
        }

        void run() {
            if (from != null) {
                to.copyFrom(from);
            }
        }
    }

    private static void releaseIfLeased(EngineSession session, QueryReply reply) {
        if (reply.hasLease()) {
            session.release(reply.getLease().getLeaseId()).await();
        }
    }

    private static long timedPing(ColocatedChannel channel) {
        long t0 = System.nanoTime();
        channel.ping();
        return System.nanoTime() - t0;
    }


    /**
     * Time spent per phase of the cycle, summed over the timed rounds (allocate, copy-in, seal, query, copy-out,
     * release): where the gap to memcpy goes.
     */
    private static final long[] PHASES = new long[6];

    /**
     * This JVM's own work so far: {milliseconds its JIT compilers spent, collections, milliseconds of collection}.
     * The Manager and the engine share the JVM, so compilations or pauses inside the timed rounds cost the cycle.
     */
    private static long[] jvmWork() {
        var jit = ManagementFactory.getCompilationMXBean();
        long compile = jit != null && jit.isCompilationTimeMonitoringSupported() ? jit.getTotalCompilationTime() : -1;
        long count = 0;
        long millis = 0;
        for (var gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            count += Math.max(0, gc.getCollectionCount());
            millis += Math.max(0, gc.getCollectionTime());
        }
        return new long[] {compile, count, millis};
    }

    /** A warm-up round with at most this much JIT compilation counts as quiet. */
    private static final long JIT_QUIET_MILLIS = 5;
    /** Warm-up rounds beyond the pool's, waiting for a quiet JIT, at most. */
    private static final int MAX_EXTRA_WARM_ROUNDS = 40;

    /** Per timed round, the four calls' nanoseconds: allocate, seal, query, release. */
    private static final List<long[]> ROUND_CALLS = new java.util.ArrayList<>();

    /** The Manager's loop CPU during each of those calls (same order), nanoseconds. */
    private static final List<long[]> ROUND_CALLS_LOOP_CPU = new java.util.ArrayList<>();

    private static JsonObject perRoundJson(List<long[]> rounds) {
        JsonObject json = new JsonObject();
        for (int i = 0; i < CONTROL_CALL_NAMES.length; i++) {
            int call = i;
            json.put(CONTROL_CALL_NAMES[i], new JsonArray(rounds.stream().map(r -> r[call] / 1_000).toList()));
        }
        return json;
    }

    /**
     * A no-op Ping right after the engine thread copied a round's bytes one way (source to scratch) against a Ping
     * right after a Ping, {@code times} of each, over gRPC and over the co-located channel: what a call pays for
     * waking the threads (and CPUs) that idled through a copy of milliseconds. Medians and every sample, µs.
     */
    private static JsonObject wakeProbe(OrbitKvClient client, Manager manager, MemorySegment[] source,
                                        MemorySegment[] scratch, int times) throws IOException {
        JsonObject json = new JsonObject();
        json.put("grpc", wakeProbe(() -> client.ping().await(), source, scratch, times));
        if (ColocatedChannel.isAvailable()) {
            try (ColocatedChannel channel = ColocatedChannel.connect(manager.colocatedSocket(), manager.token())) {
                json.put("colocated", wakeProbe(channel::ping, source, scratch, times));
            }
        }
        return json;
    }

    private static JsonObject wakeProbe(Runnable ping, MemorySegment[] source, MemorySegment[] scratch, int times) {
        double[] afterCopy = new double[times];
        double[] afterPing = new double[times];
        for (int i = 0; i < times; i++) {
            for (int p = 0; p < source.length; p++) {
                scratch[p].copyFrom(source[p]);
            }
            long t0 = System.nanoTime();
            ping.run();
            long t1 = System.nanoTime();
            ping.run();
            afterCopy[i] = (t1 - t0) / 1e3;
            afterPing[i] = (System.nanoTime() - t1) / 1e3;
        }
        return new JsonObject().put("ping_after_copy_p50", median(afterCopy)).put("ping_after_ping_p50", median(afterPing))
                .put("ping_after_copy", new JsonArray(Arrays.stream(afterCopy).mapToObj(x -> (long) x).toList()))
                .put("ping_after_ping", new JsonArray(Arrays.stream(afterPing).mapToObj(x -> (long) x).toList()));
    }

    /**
     * One publish-then-restore of a batch under {@code chain}: the full engine path. Throws {@link RoundFailure} when
     * a slot is not {@code ALLOCATED} (the publish is aborted) or the query is not READY for the whole batch.
     */
    private static void cycle(EngineSession session, List<ByteString> chain, MemorySegment[] source,
                              MemorySegment[] destination, int round, Fault fault) {
        boolean timed = round >= 0;
        long[] loopCpu = new long[7];
        loopCpu[0] = timed ? LoopCpu.nanos() : 0;
        long a = System.nanoTime();
        AllocatePublishReply allocated = allocate(session, chain, round, fault);
        long a1 = System.nanoTime();
        loopCpu[1] = timed ? LoopCpu.nanos() : 0;
        copyIn(session, allocated, source, Long.MAX_VALUE);
        loopCpu[2] = timed ? LoopCpu.nanos() : 0;
        long a2 = System.nanoTime();
        session.seal(allocated.getPublishId(), List.of()).await();
        if (round >= 0) {
            fault.sealed(round, session, allocated);
        }
        long b = System.nanoTime();
        loopCpu[3] = timed ? LoopCpu.nanos() : 0;
        QueryReply reply = session.submit(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(chain).build()), 0).await();
        if (reply.getStatus() == QueryStatus.READY && round >= 0) {
            reply = fault.ready(round, reply);
        }
        if (reply.getStatus() != QueryStatus.READY || reply.getReadyBlocks() != source.length) {
            if (reply.hasLease()) {
                session.release(reply.getLease().getLeaseId()).await();
            }
            throw new RoundFailure(roundName(round) + ": expected READY for " + source.length + " pages, got "
                    + reply.getStatus() + " for " + reply.getReadyBlocks());
        }
        long c = System.nanoTime();
        loopCpu[4] = timed ? LoopCpu.nanos() : 0;
        for (LeasedPage page : reply.getLease().getPagesList()) {
            destination[page.getPosition()].copyFrom(session.slot(page.getSlot()));
        }
        loopCpu[5] = timed ? LoopCpu.nanos() : 0;
        long d = System.nanoTime();
        session.release(reply.getLease().getLeaseId()).await();
        long e = System.nanoTime();
        loopCpu[6] = timed ? LoopCpu.nanos() : 0;
        if (timed) {
            ROUND_CALLS.add(new long[] {a1 - a, b - a2, c - b, e - d});
            ROUND_CALLS_LOOP_CPU.add(new long[] {loopCpu[1] - loopCpu[0], loopCpu[3] - loopCpu[2],
                loopCpu[4] - loopCpu[3], loopCpu[6] - loopCpu[5]});
            long[] spent = {a1 - a, a2 - a1, b - a2, c - b, d - c, e - d};
            for (int i = 0; i < spent.length; i++) {
                PHASES[i] += spent[i];
            }
        }
    }

    /**
     * Allocates slots for a fresh chain; every slot must be {@code ALLOCATED} (the keys are new, so anything else is a
     * Manager claiming bytes it does not hold): otherwise the publish is aborted and the round fails.
     */
    private static AllocatePublishReply allocate(EngineSession session, List<ByteString> chain, int round, Fault fault) {
        List<PageKey> keys = chain.stream().map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList();
        AllocatePublishReply allocated = session.allocate(keys).await();
        if (round >= 0) {
            allocated = fault.allocated(round, allocated);
        }
        for (int i = 0; i < allocated.getSlotsCount() || i < chain.size(); i++) {
            SlotStatus status = i < allocated.getSlotsCount() ? allocated.getSlots(i).getStatus() : null;
            if (status != SlotStatus.ALLOCATED) {
                session.abort(allocated.getPublishId()).await();
                throw new RoundFailure(roundName(round) + ": slot " + i + " of a fresh chain answered "
                        + (status == null ? "nothing" : status) + ", not ALLOCATED");
            }
        }
        return allocated;
    }

    /** Copies at most {@code copyBytes} of each source page into its slot (the warm-up copies little). */
    private static void copyIn(EngineSession session, AllocatePublishReply allocated, MemorySegment[] source, long copyBytes) {
        for (int i = 0; i < allocated.getSlotsCount(); i++) {
            MemorySegment target = session.slot(allocated.getSlots(i).getSlot());
            MemorySegment from = source[i % source.length];
            long n = Math.min(copyBytes, target.byteSize());
            target.asSlice(0, n).copyFrom(from.asSlice(0, n));
        }
    }

    private static String roundName(int round) {
        return round >= 0 ? "round " + (round + 1) : "warm-up";
    }

    /** The cycle goes first in even rounds, memcpy in odd ones. */
    static boolean cycleFirst(int round) {
        return round % 2 == 0;
    }

    /** Ping goes first in even iterations, the query in odd ones. */
    static boolean pingFirst(int iteration) {
        return iteration % 2 == 0;
    }

    private static long timedPing(OrbitKvClient client) {
        long t0 = System.nanoTime();
        client.ping().await();
        return System.nanoTime() - t0;
    }

    /**
     * One measured round: {@code [cycle nanos, memcpy nanos]}. Each side runs alone on a poisoned destination (the
     * poisoning is not timed) and the destination is compared with the bytes of {@code chain} right after it, before
     * the other side writes it, so a side that restored wrong bytes, an older round's, or none fails here whatever
     * runs next.
     */
    static long[] measuredRound(int round, Runnable cycle, Runnable memcpy, MemorySegment[] destination,
                                List<ByteString> chain) {
        long[] nanos = new long[2];
        for (int step = 0; step < 2; step++) {
            boolean isCycle = (step == 0) == cycleFirst(round);
            for (MemorySegment page : destination) {
                page.fill(POISON);
            }
            long t0 = System.nanoTime();
            (isCycle ? cycle : memcpy).run();
            nanos[isCycle ? 0 : 1] = System.nanoTime() - t0;
            verifyRestored(destination, chain, isCycle ? "the publish→restore cycle" : "the memcpy baseline", round);
        }
        return nanos;
    }

    /** Page i must hold the bytes of {@code chain.get(i)} ({@link KeyedContent}). */
    static void verifyRestored(MemorySegment[] destination, List<ByteString> chain, String side, int round) {
        for (int i = 0; i < destination.length; i++) {
            long wrong = KeyedContent.firstMismatch(destination[i], chain.get(i));
            if (wrong >= 0) {
                throw new RoundFailure("round " + (round + 1) + ": after " + side + ", restored page " + i
                        + " differs from the bytes published under its key at byte " + wrong);
            }
        }
    }

    /** The copies the engine makes anyway, without the Manager: its pages into scratch memory and back out. */
    private static void memcpyBaseline(MemorySegment[] source, MemorySegment[] scratch, MemorySegment[] destination) {
        long a = System.nanoTime();
        for (int i = 0; i < source.length; i++) {
            scratch[i].copyFrom(source[i]);
        }
        long b = System.nanoTime();
        for (int i = 0; i < source.length; i++) {
            destination[i].copyFrom(scratch[i]);
        }
        MEMCPY_PHASES[0] += b - a;
        MEMCPY_PHASES[1] += System.nanoTime() - b;
    }

    /** The memcpy baseline's two copies (in, out), summed like {@link #PHASES}; reset before the timed rounds. */
    private static final long[] MEMCPY_PHASES = new long[2];

    static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }

    private static void deleteTree(Path dir) {
        try (var paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (Exception ignored) {
            // Best effort: a temp directory.
        }
    }
}
