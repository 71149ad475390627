package io.orbitkv.perf.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.clusterkit.LocalEtcd;
import io.orbitkv.perf.trace.SharedTraces;
import io.vertx.core.json.JsonObject;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code replay --managers 2} on a slice of the shared trace: two clustered in-process Managers (real etcd, clustered
 * event bus, peer role over mutual TLS), requests alternating between them, beside the single-Manager run. A request
 * whose prefix the other Manager published is served through the peer route, and every restored byte is verified.
 */
class ClusterReplayTest {
    // 500 requests: enough prefix reuse beyond the inventory stream's lag (tens of ms) that peers serve some of it
    private static final int LIMIT = 500;
    private static final long POOL_BLOCKS = 1000;

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void requestsSpreadOverTwoManagersHitThroughPeersAndEveryByteIsVerified(@TempDir Path out) throws Exception {
        assumeTrue(LocalEtcd.installed(), "etcd is not installed (/usr/bin/etcd): install Debian's etcd-server");
        Path trace = SharedTraces.syntheticOrSkip();
        TraceReplayer.Options options = new TraceReplayer.Options(trace, out, LIMIT, 0, 131072, 512, 1024, POOL_BLOCKS,
                null, 10_000, 1, 16);

        JsonObject report = ClusterReplay.run(options, 2, line -> { });

        JsonObject figures = report.getJsonObject("figures");
        assertThat(report.getBoolean("passed")).as(report.encode()).isTrue();
        assertThat(figures.getInteger("managers")).isEqualTo(2);
        assertThat(figures.getInteger("requests")).isEqualTo(LIMIT);
        JsonObject byTier = figures.getJsonObject("hits_by_tier");
        long peer = byTier.getJsonObject("peer").getLong("hit_blocks");
        long dram = byTier.getJsonObject("dram").getLong("hit_blocks");
        assertThat(peer).as("prefixes published on the other Manager are fetched from it").isPositive();
        assertThat(peer + dram).isEqualTo(figures.getLong("hit_blocks"));
        assertThat(figures.getLong("mismatched_pages")).isZero();
        assertThat(figures.getLong("peer_checksum_mismatches")).isZero();
        assertThat(figures.getLong("verified_bytes")).isPositive();
        assertThat(figures.getLong("session_leases_at_end")).isZero();
        assertThat(figures.getJsonArray("per_manager")).hasSize(2);
        // The single-Manager run on the same trace, beside it.
        JsonObject single = report.getJsonObject("baselines").getJsonObject("single_manager");
        assertThat(single.getLong("block_references")).isEqualTo(figures.getLong("block_references"));
        assertThat(single.getJsonObject("hits_by_tier").getJsonObject("peer").getBoolean("available")).isFalse();
        assertThat(out.resolve(ClusterReplay.REPORT_FILE)).isRegularFile();
        assertThat(out.resolve("single-manager").resolve(TraceReplayer.REPORT_FILE)).isRegularFile();
    }
}
