package io.orbitkv.perf.replay;

import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.Benchmarks;
import io.vertx.core.json.JsonObject;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Unmatched;

/**
 * {@code orbitkv replay --trace FILE --out DIR [...]} (also {@code orbitkv bench replay}): see {@link TraceReplayer}.
 * With {@code --hint-lead-ms L} (and {@code --ssd-capacity}), the prefetch replay instead: see {@link HintedReplay}.
 * With {@code --managers N} (2..8), the requests spread over N clustered Managers beside the single-Manager run: see
 * {@link ClusterReplay}.
 * Its options go through the one bench parser ({@link BenchArgs}), so a misspelt option is refused as in every bench;
 * {@code --help} lists them with their defaults. The last stdout line is the report; the exit code is non-zero when the
 * run restored wrong bytes or left a lease behind.
 */
@Command(name = "replay", description = "Replay a Mooncake trace against a Manager as an engine would; report hits vs the "
        + "offline infinite-cache and LRU bounds, time-to-ready and modelled TTFT; write replay.json and PNGs. "
        + "Options: --help.")
public final class ReplayCommand implements Callable<Integer> {
    @Unmatched
    List<String> args = new ArrayList<>();

    /** Reads the replay's options, checks them, then replays. */
    public static JsonObject run(BenchArgs a) {
        TraceReplayer.Options options = new TraceReplayer.Options(
                java.nio.file.Path.of(a.required("trace")),
                java.nio.file.Path.of(a.string("out", "replay-out")),
                a.longValue("limit", 0),
                a.decimal("speed", 0),
                a.longValue("bytes-per-token", 131_072),
                a.integer("block-tokens", 512),
                a.longValue("bytes-scale", 1024),
                a.longValue("pool-blocks", 10_000),
                a.path("data-dir"),
                a.decimal("prefill-tokens-per-second", 10_000),
                a.integer("engines", 1),
                a.integer("full-verify-every", 16),
                a.bytesOrZero("ssd-capacity"),
                a.decimal("h2d-bytes-per-second", TraceReplayer.Options.DEFAULT_H2D_BYTES_PER_SECOND),
                a.decimal("ssd-read-bytes-per-second", 0));
        long hintLeadMs = a.longValue("hint-lead-ms", -1);
        int managers = a.integer("managers", 1);
        a.requireAllUsed();
        if (managers != 1 && hintLeadMs >= 0) {
            throw new IllegalArgumentException("--managers and --hint-lead-ms are separate replays: pass one of them");
        }
        try {
            if (managers != 1) {
                return ClusterReplay.run(options, managers, System.err::println);
            }
            if (hintLeadMs >= 0) {
                return HintedReplay.run(options, hintLeadMs, System.err::println);
            }
            return TraceReplayer.run(options, System.err::println);
        } catch (IllegalArgumentException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException("replay failed: " + e.getMessage(), e);
        }
    }

    @Override
    public Integer call() {
        return Benchmarks.runCommand("replay", args.toArray(String[]::new), System.out, System.err);
    }
}
