package io.orbitkv.perf.replay;

import io.vertx.core.json.JsonObject;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code orbitkv replay --trace FILE --out DIR}: see {@link TraceReplayer}. The last stdout line is the report. */
@Command(name = "replay", mixinStandardHelpOptions = true,
        description = "Replay a Mooncake trace against a Manager as an engine would; report hits vs the offline "
                + "infinite-cache and LRU bounds, time-to-ready and modelled TTFT; write replay.json and PNGs.")
public final class ReplayCommand implements Callable<Integer> {
    @Option(names = "--trace", required = true, description = "Mooncake trace (JSON Lines).")
    Path trace;
    @Option(names = "--out", defaultValue = "replay-out", description = "Output directory for replay.json and PNGs (default ${DEFAULT-VALUE}).")
    Path out;
    @Option(names = "--limit", defaultValue = "0", description = "Replay only the first N requests (0 = all).")
    long limit;
    @Option(names = "--speed", defaultValue = "0", description = "Replay N times faster than the trace timestamps; 0 = as fast as possible (default).")
    double speed;
    @Option(names = "--bytes-per-token", defaultValue = "131072",
            description = "KV bytes per token (default ${DEFAULT-VALUE}: 32 layers x 8 KV heads x 128 dim x 2 (K,V) x 2 bytes).")
    long bytesPerToken;
    @Option(names = "--block-tokens", defaultValue = "512", description = "Tokens per block = per page (default ${DEFAULT-VALUE}, the trace's).")
    int blockTokens;
    @Option(names = "--bytes-scale", defaultValue = "1024",
            description = "Divide stored/copied page bytes by N (default ${DEFAULT-VALUE}: 64 MiB logical pages become 64 KiB). Hits do not depend on it.")
    long bytesScale;
    @Option(names = "--pool-blocks", defaultValue = "10000",
            description = "In-process Manager pool, in pages (default ${DEFAULT-VALUE}: the trace's 43,924-block working set does not fit).")
    long poolBlocks;
    @Option(names = "--data-dir", description = "Use the running Manager of this data directory instead of starting one.")
    Path dataDir;
    @Option(names = "--prefill-tokens-per-second", defaultValue = "10000",
            description = "Prefill rate for the modelled TTFT (default ${DEFAULT-VALUE} tokens/s).")
    double prefillTokensPerSecond;
    @Option(names = "--engines", defaultValue = "1", description = "Simulated engines replaying concurrently (default 1: trace order).")
    int engines;
    @Option(names = "--full-verify-every", defaultValue = "16", description = "Verify every byte of one restored page in N (others: first 4 KiB).")
    int fullVerifyEvery;

    @Option(names = "--ssd-capacity", description = "Run the in-process Manager with its SSD tier of this size (e.g. 4GiB; "
            + "extent = the scaled page). Effective capacity is then DRAM + SSD, so hits can exceed the DRAM-only LRU bound. "
            + "Default: DRAM only.")
    String ssdCapacity;

    @Override
    public Integer call() throws Exception {
        try {
            TraceReplayer.Options options = new TraceReplayer.Options(trace, out, limit, speed, bytesPerToken, blockTokens,
                    bytesScale, poolBlocks, dataDir, prefillTokensPerSecond, engines, fullVerifyEvery,
                    ssdCapacity == null ? 0 : io.orbitkv.perf.BenchArgs.parseBytes("--ssd-capacity", ssdCapacity));
            JsonObject report = TraceReplayer.run(options, System.err::println);
            System.out.flush();
            System.out.println(report.encode());
            return report.getJsonObject("figures").getLong("mismatched_pages") == 0 ? 0 : 1;
        } catch (IllegalArgumentException e) {
            System.err.println("orbitkv replay: " + e.getMessage());
            return 2;
        }
    }
}
