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
 * With {@code --ablations}, the configurations from no cache to everything on beside the offline bounds (and with
 * {@code --managers N} the N-Manager rows too); {@code --hint-lead-ms L} alone runs the prefetch pair of those rows and
 * {@code --managers N} alone the N-Manager rows: see {@link AblationReplay}.
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
        boolean ablations = a.flag("ablations", false);
        long hintLeadMs = a.longValue("hint-lead-ms", -1);
        int managers = a.integer("managers", 1);
        boolean planned = ablations || hintLeadMs >= 0 || managers != 1;
        long poolBlocks = a.longValue("pool-blocks", 10_000);
        long bytesPerToken = a.longValue("bytes-per-token", 131_072);
        int blockTokens = a.integer("block-tokens", 512);
        long bytesScale = a.longValue("bytes-scale", 1024);
        // The ablations compare DRAM + SSD configurations: without --ssd-capacity the SSD holds as many pages as DRAM.
        long ssdCapacity = a.bytesOrZero("ssd-capacity");
        if (ssdCapacity == 0 && planned && bytesScale > 0) {
            ssdCapacity = poolBlocks * (bytesPerToken * blockTokens / bytesScale + 4096);
        }
        TraceReplayer.Options options = new TraceReplayer.Options(
                java.nio.file.Path.of(a.required("trace")),
                java.nio.file.Path.of(a.string("out", "replay-out")),
                a.longValue("limit", 0),
                a.decimal("speed", planned ? 1 : 0),
                bytesPerToken,
                blockTokens,
                bytesScale,
                poolBlocks,
                planned ? null : a.path("data-dir"),
                a.decimal("prefill-tokens-per-second", 10_000),
                a.integer("engines", planned ? 8 : 1),
                a.integer("full-verify-every", 16),
                ssdCapacity,
                a.decimal("h2d-bytes-per-second", TraceReplayer.Options.DEFAULT_H2D_BYTES_PER_SECOND),
                a.decimal("ssd-read-bytes-per-second", 0));
        AblationReplay.Settings settings = null;
        if (planned) {
            if (a.has("data-dir")) {
                throw new IllegalArgumentException("--ablations, --hint-lead-ms and --managers start their own Managers: "
                        + "they do not take --data-dir");
            }
            AblationReplay.Scope scope = ablations ? AblationReplay.Scope.ALL
                    : managers != 1 && hintLeadMs < 0 ? AblationReplay.Scope.MANAGERS
                    : managers == 1 ? AblationReplay.Scope.PREFETCH : null;
            if (scope == null) {
                throw new IllegalArgumentException("--managers and --hint-lead-ms together need --ablations");
            }
            settings = new AblationReplay.Settings(hintLeadMs < 0 ? 20 : hintLeadMs, managers, a.integer("runs", 3),
                    a.decimal("peer-read-bytes-per-second", AblationReplay.DEFAULT_PEER_READ_BYTES_PER_SECOND), scope,
                    a.flag("declare-scaled-rate", false));
        }
        a.requireAllUsed();
        try {
            if (settings != null) {
                return AblationReplay.run(options, settings, System.err::println);
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
