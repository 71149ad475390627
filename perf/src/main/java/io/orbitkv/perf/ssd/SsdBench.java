package io.orbitkv.perf.ssd;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.LatencyRecorder;
import io.orbitkv.perf.report.MachineInfo;
import io.orbitkv.ssd.RoleLoop;
import io.orbitkv.model.SsdEntry;
import io.orbitkv.model.SsdLease;
import io.orbitkv.ssd.SsdListener;
import io.orbitkv.ssd.SsdSettings;
import io.orbitkv.ssd.SsdStats;
import io.orbitkv.ssd.SsdStore;
import io.orbitkv.model.StateKey;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.stream.Stream;

/**
 * {@code orbitkv bench ssd}: write and restore-read throughput through {@link SsdStore} (2 MiB pages by default, each
 * taking its 4 KiB header + payload in the shard, O_DIRECT, io_uring), against fio with io_uring + O_DIRECT, bs = the
 * page size, iodepth=16 on the same shard file and directory, in the same run.
 *
 * <p>Method: the store is opened on an empty directory with a data set of {@code --size-gib} (default 2 GiB; O_DIRECT
 * bypasses the page cache, so the page cache size does not matter). Then {@code --rounds} rounds (default 7), each:
 * write one ring lap of new keys through {@code offerWrite} (offers kept 64 ahead; throughput = payload bytes / time
 * to the last commit, including the header writes, the staging copy and CRC32C; round 1 fills fresh regions, later
 * rounds reclaim the previous round's regions, the steady-state reuse path) and fio writing
 * the same amount over one file laid out once (fallocate) before round 1, as the store's shards are preallocated: round
 * 1 writes fresh blocks on both sides and is reported apart ({@code *_first_round_*}), the write ratio is the steady
 * state of rounds 2.. ; then the reads, in {@code --read-segments} segments (default 8) of the round's extents: in
 * each segment the store reads its extents into 4096-aligned 2 MiB destinations, each under its own exact-generation
 * lease and CRC32C-verified, fio reads as many bytes of the same region of the shard file contiguously and 2 MiB
 * aligned, and fio reads exactly the store's byte ranges (2 MiB at 4 KiB past each extent start, i.e. 4 KiB off 2 MiB
 * alignment), back to back, so that all three see the device in the same state; a side's round rate is its bytes over
 * the sum of its own I/O times (fio's excludes its process start-up). The first round's reads start with an untimed
 * warm-up on both sides. Every page's bytes depend on its key ({@link KeyedPayload}), so a read served from the wrong
 * extent fails its CRC32C and the bench's own stamp check. Ours and fio alternate who goes first, per round for the
 * writes ({@link #writeOrder}) and per segment for the reads ({@link #readOrder}). Reported figures are medians over rounds; the
 * top-level ratios are median(ours) / median(fio); paired (same-round) ratios are reported too. The run fails unless
 * the store runs with O_DIRECT, and records the file system and device it measured ({@link StorageInfo}). The store's kernel queue depth
 * is exactly fio's iodepth (16): the store never has more I/O in the kernel than fio (its 4 KiB header writes share
 * those 16 slots with the payload writes; 16 staging buffers). The reader keeps 32 reads outstanding so that 16 wait
 * in the RESTORE lane and the io_uring loop refills the kernel queue from a completion without a thread hop ("keep
 * the queue depth full"). After the rounds the store is reopened to time the recovery scan of the full directory.
 *
 * <p>The device on a shared VM is noisy (fio alone varies by 2x between runs); rounds, interleaving and medians are
 * the answer to that, not a single figure.
 *
 * <p>Usage: {@code java --enable-native-access=ALL-UNNAMED -cp ... io.orbitkv.perf.ssd.SsdBench [--dir DIR]
 * [--size-gib N] [--queue-depth N] [--rounds N] [--staging N] [--store-queue-depth N] [--reads-outstanding N]
 * [--read-segments N] [--page-kib N] [--keep]}. {@code --page-kib} (default 2048) runs the same comparison with
 * another page size (fio's block size follows it). Progress goes to
 * stderr, the report (one JSON line) is the last line of stdout.
 */
public final class SsdBench {

    private static final long MIB = 1L << 20;
    /**
     * The page size of this run ({@code --page-kib}, default 2048): set once at the start of {@link #run(BenchArgs)}
     * on the one thread that runs the bench, before anything reads it. The store's extent is the page + 4 KiB, so
     * pages lie at a fixed stride and fio can read exactly their byte ranges; how pages of several sizes pack into
     * the default extent is the store's tests' business, not this bench's.
     */
    private static long pageBytes = 2 * MIB;
    private static final byte[] NAMESPACE = "orbitkv-ssdbench".getBytes(StandardCharsets.US_ASCII);
    private static final int WRITE_WINDOW = 64;

    private SsdBench() {
    }

    public static void main(String[] args) throws Exception {
        JsonObject report = run(args);
        System.out.println(report.encode());
    }

    public static JsonObject run(String[] args) throws Exception {
        return run(BenchArgs.parse(args));
    }

    public static JsonObject run(BenchArgs a) throws Exception {
        Path dir = a.path("dir");
        double sizeGib = a.decimal("size-gib", 2);
        int queueDepth = a.integer("queue-depth", 16);
        int rounds = a.integer("rounds", 7);
        int staging = a.integer("staging", -1);
        int storeQueueDepth = a.integer("store-queue-depth", -1);
        int readsOutstanding = a.integer("reads-outstanding", -1);
        int readSegments = a.integer("read-segments", 8);
        long pageKib = a.integer("page-kib", 2048);
        boolean keep = a.flag("keep", false);
        a.requireAllUsed();
        if (rounds < 2) {
            throw new IllegalArgumentException("--rounds must be at least 2 (the first, fresh round is reported apart "
                    + "from the steady-state rounds), got " + rounds);
        }
        if (!(sizeGib > 0) || queueDepth < 1 || readSegments < 1) {
            throw new IllegalArgumentException("--size-gib must be positive, --queue-depth and --read-segments at "
                    + "least 1");
        }
        if (pageKib < 4 || pageKib % 4 != 0) {
            throw new IllegalArgumentException("--page-kib must be a positive multiple of 4, got " + pageKib);
        }
        pageBytes = pageKib << 10;
        requireFio();
        boolean ownDir = dir == null;
        if (ownDir) {
            dir = Files.createTempDirectory(Path.of("/var/tmp"), "orbitkv-ssdbench-");
        }
        long extentBytes = pageBytes + 4096;
        int extents = (int) (sizeGib * (1L << 30) / extentBytes);
        if (staging < 0) {
            staging = queueDepth; // at most queueDepth 2 MiB payload writes in flight, like fio's iodepth
        }
        if (storeQueueDepth < 0) {
            storeQueueDepth = queueDepth; // the kernel never holds more than fio's iodepth
        }
        if (readsOutstanding < 0) {
            readsOutstanding = 2 * queueDepth; // the rest wait in the RESTORE lane: the kernel queue stays full
        }
        SsdSettings settings = new SsdSettings().directory(dir).extentBytes(extentBytes)
                .capacityBytes(extents * extentBytes).queueDepth(storeQueueDepth).writeStagingBuffers(staging)
                .writeQueueCapacity(WRITE_WINDOW + 16).bounceBuffers(0);
        BenchReport.Builder report = BenchReport.builder("ssd")
                .config("dir", dir.toString()).config("extents", extents).config("extent_bytes", extentBytes)
                .config("page_bytes", pageBytes).config("queue_depth", queueDepth)
                .config("store_queue_depth", storeQueueDepth).config("write_staging_buffers", staging)
                .config("reads_outstanding", readsOutstanding).config("read_segments", readSegments)
                .config("data_set_bytes", extents * pageBytes).config("rounds", rounds);
        progress("ssd bench in %s: %d extents of %d bytes (%.2f GiB), queue depth %d, store (kernel) queue depth %d, "
                        + "%d write staging buffers, %d reads outstanding, %d rounds", dir, extents, extentBytes,
                extents * (double) extentBytes / (1L << 30), queueDepth, storeQueueDepth, staging, readsOutstanding,
                rounds);
        report.config("storage", StorageInfo.of(dir));
        try (RoleLoop.Dedicated loop = RoleLoop.dedicated("ssdbench-role"); Arena arena = Arena.ofShared()) {
            KeyedPayload payload = new KeyedPayload(arena.allocate(pageBytes, 4096), 42);
            List<MemorySegment> destinations = new ArrayList<>();
            // One region sliced into the destinations, as fio slices its one buffer into its iodepth buffers (and the
            // Manager's destinations are slots of one pool).
            MemorySegment destinationArea = arena.allocate(readsOutstanding * pageBytes, 4096);
            for (int i = 0; i < readsOutstanding; i++) {
                destinations.add(destinationArea.asSlice(i * pageBytes, pageBytes));
            }
            SimpleMeterRegistry registry = new SimpleMeterRegistry();
            QueueDepthSampler kernelDepth = new QueueDepthSampler(registry, storeQueueDepth);
            SsdStore store = SsdStore.open(settings, loop, SsdListener.NONE, registry)
                    .get(60, TimeUnit.SECONDS);
            report.config("direct_io", store.directIo());
            if (!store.directIo()) {
                store.close().get(60, TimeUnit.SECONDS);
                throw new IllegalStateException("O_DIRECT is not in effect in " + dir + " (" + StorageInfo.of(dir)
                        + "): the store fell back to buffered I/O, and page-cache figures are not SSD figures");
            }
            Path shard = dir.resolve("shard-000.okv");
            Path fioFile = dir.resolve("fio-write.dat");
            long fileBytes = extents * extentBytes;
            // fio's write baseline overwrites one file laid out once beforehand, as the store overwrites the extents
            // it preallocated at open: round 1 writes fresh (allocated, unwritten) blocks on both sides, later rounds
            // overwrite written ones.
            layOut(fioFile, extents * pageBytes);
            List<Double> ourWrites = new ArrayList<>();
            List<Double> ourReads = new ArrayList<>();
            List<Double> fioWrites = new ArrayList<>();
            List<Double> fioReads = new ArrayList<>();
            List<Double> fioLayoutReads = new ArrayList<>();
            JsonObject latency = null;
            int warm = 0;
            // Rounds interleave ours and fio so that both see the same (noisy, shared) device, each going first in
            // every other round (order()). Round 1 writes fresh slots; later rounds write new keys over the previous
            // round's extents: the steady-state ring reuse path.
            for (int round = 0; round < rounds; round++) {
                long firstKey = (long) round * extents;
                for (Step step : writeOrder(round)) {
                    if (step == Step.STORE_WRITE) {
                        long writeNanos = writeAll(loop, store, payload, firstKey, extents);
                        ourWrites.add(extents * pageBytes / (writeNanos / 1e9));
                        SsdStats afterWrites = call(loop, store::stats);
                        if (afterWrites.writesCommitted() != (long) extents * (round + 1)) {
                            throw new IllegalStateException("only " + afterWrites.writesCommitted()
                                    + " writes committed: " + afterWrites.writesDropped());
                        }
                    } else {
                        fioWrites.add(fioWrite(dir, fioFile, extents, queueDepth));
                    }
                }
                if (round == 0) {
                    // Warm-up, untimed: the read path's JIT and the destinations' first touch on our side, fio's
                    // start-up and the file's first read on the other.
                    warm = Math.min(extents, 2 * readsOutstanding);
                    readAll(loop, store, destinations, firstKey, warm, LatencyRecorder.singleWriter());
                    fioRead(dir, shard, 0, (long) warm * pageBytes, queueDepth);
                }
                // Reads in segments of the round's extents; in each segment both sides read the same extents back to
                // back, alternating who goes first, so that both see the device in the same state (it drifts by 2x
                // within seconds here). A side's round rate is its bytes over the sum of its segment times.
                LatencyRecorder recorder = LatencyRecorder.singleWriter();
                long[] ourRead = new long[2]; // bytes, nanos
                long[] fioRead = new long[2];
                long[] fioLayoutRead = new long[2];
                for (int segment = 0; segment < readSegments; segment++) {
                    int from = (int) ((long) extents * segment / readSegments);
                    int to = (int) ((long) extents * (segment + 1) / readSegments);
                    if (to == from) {
                        continue;
                    }
                    long start = (long) from * extentBytes;
                    long bytes = (long) (to - from) * pageBytes;
                    for (Step step : readOrder(round, segment)) {
                        switch (step) {
                            case STORE_READ -> {
                                kernelDepth.start();
                                try {
                                    add(ourRead, bytes, readAll(loop, store, destinations, firstKey + from,
                                            to - from, recorder));
                                } finally {
                                    kernelDepth.stop();
                                }
                            }
                            // The same number of payload bytes, contiguous and 2 MiB-aligned, from the same region.
                            case FIO_READ -> add(fioRead, bytes,
                                    fioRead(dir, shard, start / pageBytes * pageBytes, bytes, queueDepth));
                            // Exactly the store's byte ranges: 2 MiB payloads 4 KiB past each extent start.
                            case FIO_LAYOUT_READ -> add(fioLayoutRead, bytes, fioLayoutRead(dir, shard, start,
                                    (long) (to - from) * extentBytes, queueDepth));
                            default -> throw new IllegalStateException(step + " is not a read step");
                        }
                    }
                }
                ourReads.add(rate(ourRead));
                fioReads.add(rate(fioRead));
                fioLayoutReads.add(rate(fioLayoutRead));
                latency = recorder.summary().toJson();
                progress("round %d: SsdStore write %.1f MiB/s, fio write %.1f MiB/s, SsdStore read %.1f MiB/s, "
                                + "fio read %.1f MiB/s, fio read in extent layout %.1f MiB/s", round + 1,
                        ourWrites.getLast() / MIB, fioWrites.getLast() / MIB, ourReads.getLast() / MIB,
                        fioReads.getLast() / MIB, fioLayoutReads.getLast() / MIB);
            }
            Files.deleteIfExists(fioFile);
            SsdStats afterReads = call(loop, store::stats);
            if (afterReads.readHits() != (long) extents * rounds + warm) {
                throw new IllegalStateException("reads verified " + afterReads.readHits() + " of "
                        + ((long) extents * rounds + warm));
            }
            store.close().get(60, TimeUnit.SECONDS);

            // ---- recovery of the full directory
            store = SsdStore.open(settings, loop, SsdListener.NONE, new SimpleMeterRegistry()).get(60, TimeUnit.SECONDS);
            SsdStats recovered = call(loop, store::stats);
            store.close().get(60, TimeUnit.SECONDS);
            progress("recovery: %d extents in %.4f s", recovered.recoveredExtents(), recovered.recoverySeconds());

            // The first round writes fresh blocks on both sides: reported apart, the write ratio is the steady state.
            List<Double> ourSteadyWrites = ourWrites.subList(1, ourWrites.size());
            List<Double> fioSteadyWrites = fioWrites.subList(1, fioWrites.size());
            double writeRate = median(ourSteadyWrites);
            double readRate = median(ourReads);
            double fioWriteRate = median(fioSteadyWrites);
            double fioReadRate = median(fioReads);
            double fioLayoutReadRate = median(fioLayoutReads);
            report.figure("ssd_write_bytes_per_s", Math.round(writeRate))
                    .figure("ssd_read_bytes_per_s", Math.round(readRate))
                    .figure("ssd_write_rounds_bytes_per_s", rates(ourWrites))
                    .figure("ssd_write_first_round_bytes_per_s", Math.round(ourWrites.getFirst()))
                    .figure("ssd_read_rounds_bytes_per_s", rates(ourReads))
                    .figure("ssd_read_latency_last_round", latency)
                    .figure("ssd_read_kernel_queue_depth", kernelDepth.toJson())
                    .figure("recovery_seconds", recovered.recoverySeconds())
                    .figure("recovered_extents", recovered.recoveredExtents())
                    .figure("overwrite_refused", afterReads.overwriteRefused())
                    .figure("corrupt_extents", afterReads.corruptExtents())
                    .baseline("fio_read_bytes_per_s", Math.round(fioReadRate))
                    .baseline("fio_write_bytes_per_s", Math.round(fioWriteRate))
                    .baseline("fio_read_rounds_bytes_per_s", rates(fioReads))
                    .baseline("fio_write_rounds_bytes_per_s", rates(fioWrites))
                    .baseline("fio_write_first_round_bytes_per_s", Math.round(fioWrites.getFirst()))
                    .baseline("fio_read_extent_layout_bytes_per_s", Math.round(fioLayoutReadRate))
                    .baseline("fio_read_extent_layout_rounds_bytes_per_s", rates(fioLayoutReads))
                    .baseline("fio_read_extent_layout_command", String.join(" ", fioLayoutCommand(shard, 0,
                            fileBytes / readSegments / extentBytes * extentBytes, queueDepth)) + " (per segment)")
                    .baseline("fio_read_command", String.join(" ", fioReadCommand(shard, 0,
                            extents / readSegments * pageBytes, queueDepth)) + " (per segment)")
                    .baseline("fio_write_command", String.join(" ", fioCommand("w", fioFile, "write",
                            extents * pageBytes, queueDepth)))
                    .topLevelRatio("read_ratio", readRate, fioReadRate)
                    .topLevelRatio("write_ratio", writeRate, fioWriteRate)
                    .ratio("read_ratio_same_layout", readRate, fioLayoutReadRate)
                    .ratio("read_ratio_paired_median", median(paired(ourReads, fioReads)))
                    .ratio("write_ratio_paired_median", median(paired(ourSteadyWrites, fioSteadyWrites)))
                    .ratio("write_ratio_first_round", ourWrites.getFirst(), fioWrites.getFirst())
                    .machine(MachineInfo.probe());
        } finally {
            if (ownDir && !keep) {
                deleteTree(dir);
            }
        }
        BenchReport built = report.build();
        progress("%s", built.toOneLine());
        return built.toJson();
    }

    /** The measured steps of one round. */
    enum Step { STORE_WRITE, FIO_WRITE, STORE_READ, FIO_READ, FIO_LAYOUT_READ }

    /** The writes of round {@code round} (0-based): the store first in even rounds, fio in odd ones. */
    static List<Step> writeOrder(int round) {
        return round % 2 == 0 ? List.of(Step.STORE_WRITE, Step.FIO_WRITE) : List.of(Step.FIO_WRITE, Step.STORE_WRITE);
    }

    /**
     * The reads of one segment of a round: the store first when {@code round + segment} is even, fio (both fio reads,
     * the layout-matched one included) otherwise, so that neither side is always the one reading bytes the other just
     * read, within a round and across rounds.
     */
    static List<Step> readOrder(int round, int segment) {
        return (round + segment) % 2 == 0 ? List.of(Step.STORE_READ, Step.FIO_READ, Step.FIO_LAYOUT_READ)
                : List.of(Step.FIO_READ, Step.FIO_LAYOUT_READ, Step.STORE_READ);
    }

    private static void add(long[] total, long bytes, long nanos) {
        total[0] += bytes;
        total[1] += nanos;
    }

    private static double rate(long[] total) {
        return total[0] / (total[1] / 1e9);
    }

    /** Fails before anything is measured when fio is missing ({@code scripts/orbitkv bench ssd} installs it as root). */
    private static void requireFio() {
        try {
            Process process = new ProcessBuilder("fio", "--version").redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            if (process.waitFor(30, TimeUnit.SECONDS) && process.exitValue() == 0) {
                return;
            }
            process.destroyForcibly();
        } catch (IOException e) {
            // not on the PATH
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        throw new IllegalStateException("fio is not installed: scripts/orbitkv bench ssd installs it when run as root, "
                + "otherwise apt-get install fio");
    }

    /** Lays {@code file} out once (allocated, unwritten blocks), as the store's preallocated shards are. */
    private static void layOut(Path file, long bytes) throws IOException, InterruptedException {
        Process process = new ProcessBuilder("fallocate", "-l", Long.toString(bytes), file.toString())
                .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.INHERIT).start();
        if (!process.waitFor(5, TimeUnit.MINUTES) || process.exitValue() != 0) {
            process.destroyForcibly();
            throw new IllegalStateException("fallocate of the fio write file " + file + " failed");
        }
    }

    private static StateKey key(long index) {
        return StateKey.of(NAMESPACE, 0, ByteBuffer.allocate(8).putLong(index).array());
    }

    /** Offers every extent, WRITE_WINDOW ahead, and returns the nanoseconds to the last outcome. */
    private static long writeAll(RoleLoop loop, SsdStore store, KeyedPayload payload, long firstKey, int count)
            throws Exception {
        CompletableFuture<Long> finished = new CompletableFuture<>();
        int[] state = new int[2]; // next, done
        long start = System.nanoTime();
        Runnable[] offer = new Runnable[1];
        offer[0] = () -> {
            if (state[0] >= count) {
                return;
            }
            long keyIndex = firstKey + state[0]++;
            // Stamped when the store takes the source (it copies it at once, on this thread): bytes depend on the key.
            store.offerWrite(key(keyIndex), () -> payload.stamp(keyIndex), pageBytes).whenComplete((outcome, failure) -> {
                if (++state[1] == count) {
                    finished.complete(System.nanoTime() - start);
                } else {
                    offer[0].run();
                }
            });
        };
        loop.execute(() -> {
            for (int i = 0; i < WRITE_WINDOW; i++) {
                offer[0].run();
            }
        });
        return finished.get(10, TimeUnit.MINUTES);
    }

    /** Reads every extent under its own lease, one read outstanding per destination; nanoseconds to the last. */
    private static long readAll(RoleLoop loop, SsdStore store, List<MemorySegment> destinations, long firstKey,
                                int count, LatencyRecorder recorder) throws Exception {
        CompletableFuture<Long> finished = new CompletableFuture<>();
        int[] state = new int[3]; // next, done, failures
        long start = System.nanoTime();
        class Reader {
            void next(MemorySegment destination) {
                if (state[0] >= count) {
                    return;
                }
                long keyIndex = firstKey + state[0]++;
                StateKey key = key(keyIndex);
                SsdEntry entry = store.lookup(key);
                SsdLease lease = store.acquireLease(key, entry.generation());
                long t0 = System.nanoTime();
                store.readInto(lease, destination).whenComplete((result, failure) -> {
                    recorder.recordNanos(System.nanoTime() - t0);
                    store.release(lease);
                    // The store verified the key's CRC32C; spot-check the key's stamps too (first and last block).
                    Throwable wrong = failure != null ? failure
                            : KeyedPayload.spotCheck(destination, pageBytes, keyIndex) ? null
                            : new IllegalStateException("read of key " + keyIndex + " returned another key's bytes");
                    if (wrong != null && state[2]++ == 0) {
                        progress("read failed: %s", wrong);
                    }
                    if (++state[1] == count) {
                        finished.complete(System.nanoTime() - start);
                    } else {
                        next(destination);
                    }
                });
            }
        }
        Reader reader = new Reader();
        loop.execute(() -> destinations.forEach(reader::next));
        long nanos = finished.get(10, TimeUnit.MINUTES);
        if (state[2] > 0) {
            throw new IllegalStateException(state[2] + " reads failed");
        }
        return nanos;
    }

    private static double fioWrite(Path dir, Path file, int extents, int depth) throws Exception {
        JsonObject result = fio(dir, "w", fioCommand("w", file, "write", extents * pageBytes, depth));
        return result.getJsonArray("jobs").getJsonObject(0).getJsonObject("write").getDouble("bw_bytes");
    }

    /** fio reading {@code bytes} of the shard from {@code offset} in 2 MiB reads; returns its I/O nanoseconds. */
    private static long fioRead(Path dir, Path shard, long offset, long bytes, int depth) throws Exception {
        return fioNanos(fio(dir, "r", fioReadCommand(shard, offset, bytes, depth)));
    }

    private static List<String> fioReadCommand(Path shard, long offset, long bytes, int depth) {
        return List.of("fio", "--name=r", "--filename=" + shard, "--rw=read", "--bs=" + pageBytes,
                "--iodepth=" + depth,
                "--ioengine=io_uring", "--direct=1", "--offset=" + offset, "--size=" + bytes, "--output-format=json");
    }

    /**
     * fio reading exactly the bytes the store reads from the extents in {@code [start, start + extentBytes)}: 2 MiB
     * payloads at 4 KiB past each 2 MiB + 4 KiB extent start (so every read is 4 KiB off a 2 MiB boundary), skipping
     * the header blocks. Returns its I/O nanoseconds.
     */
    private static long fioLayoutRead(Path dir, Path shard, long start, long extentBytes, int depth) throws Exception {
        return fioNanos(fio(dir, "layout", fioLayoutCommand(shard, start, extentBytes, depth)));
    }

    private static List<String> fioLayoutCommand(Path shard, long start, long extentBytes, int depth) {
        return List.of("fio", "--name=layout", "--filename=" + shard, "--rw=read:4k", "--bs=" + pageBytes,
                "--iodepth=" + depth, "--ioengine=io_uring", "--direct=1", "--offset=" + (start + 4096),
                "--size=" + (extentBytes - 4096), "--output-format=json");
    }

    /** fio's own I/O time for its reads: bytes / bandwidth (it excludes its start-up). */
    private static long fioNanos(JsonObject result) {
        JsonObject read = result.getJsonArray("jobs").getJsonObject(0).getJsonObject("read");
        return Math.round(read.getLong("io_bytes") / read.getDouble("bw_bytes") * 1e9);
    }

    private static List<Double> paired(List<Double> ours, List<Double> theirs) {
        List<Double> ratios = new ArrayList<>();
        for (int i = 0; i < ours.size(); i++) {
            ratios.add(ours.get(i) / theirs.get(i));
        }
        return ratios;
    }

    private static double median(List<Double> values) {
        List<Double> sorted = values.stream().sorted().toList();
        int n = sorted.size();
        return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
    }

    private static JsonArray rates(List<Double> values) {
        return new JsonArray(values.stream().map(Math::round).toList());
    }

    private static List<String> fioCommand(String name, Path file, String rw, long size, int depth) {
        return List.of("fio", "--name=" + name, "--filename=" + file, "--rw=" + rw, "--bs=" + pageBytes,
                "--iodepth=" + depth, "--ioengine=io_uring", "--direct=1", "--size=" + size,
                "--output-format=json");
    }

    private static JsonObject fio(Path dir, String name, List<String> command) throws IOException, InterruptedException {
        Path out = dir.resolve("fio-" + name + ".json");
        Process process = new ProcessBuilder(command).redirectOutput(out.toFile())
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        if (!process.waitFor(5, TimeUnit.MINUTES) || process.exitValue() != 0) {
            process.destroyForcibly();
            throw new IllegalStateException("fio failed: exit " + (process.isAlive() ? "timeout" : process.exitValue())
                    + ": " + String.join(" ", command));
        }
        String text = Files.readString(out);
        Files.deleteIfExists(out);
        return new JsonObject(text.substring(text.indexOf('{'))); // fio may print notes before the JSON
    }

    private static <T> T call(RoleLoop loop, Supplier<T> action) throws Exception {
        CompletableFuture<T> result = new CompletableFuture<>();
        loop.execute(() -> {
            try {
                result.complete(action.get());
            } catch (Throwable t) {
                result.completeExceptionally(t);
            }
        });
        return result.get(60, TimeUnit.SECONDS);
    }

    private static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> paths = Files.walk(dir)) {
            for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }

    static void progress(String format, Object... args) {
        System.err.printf(format + "%n", args);
    }
}
