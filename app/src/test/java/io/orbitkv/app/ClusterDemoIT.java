package io.orbitkv.app;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.clusterkit.LocalEtcd;
import io.vertx.core.json.JsonObject;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code orbitkv cluster demo} end to end: real etcd and Manager processes; its last line is the JSON report. */
class ClusterDemoIT {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void theDemoPassesAndPrintsItsReportLast() throws Exception {
        assumeTrue(LocalEtcd.installed(), "etcd is not installed (/usr/bin/etcd): install Debian's etcd-server "
                + "(./scripts/test does when run as root) to run the cluster demo");
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream stdout = System.out;
        int code;
        System.setOut(new PrintStream(out, true));
        try {
            code = new picocli.CommandLine(new ClusterCommand()).execute("demo", "--managers", "3", "--pages", "32",
                    "--dir", dir.toString());
        } finally {
            System.setOut(stdout);
        }
        String[] lines = out.toString().strip().split("\n");
        JsonObject report = new JsonObject(lines[lines.length - 1]);
        System.out.println(report.encodePrettily());
        assertThat(report.getBoolean("passed")).as(report.encode()).isTrue();
        assertThat(code).isZero();
        assertThat(report.getInteger("members")).isEqualTo(3);
        assertThat(report.getDouble("inventory_lag_ms_p50")).isPositive();
        assertThat(report.getDouble("inventory_lag_ms_p99")).isGreaterThanOrEqualTo(report.getDouble("inventory_lag_ms_p50"));
        assertThat(report.getLong("resyncs")).isPositive();
        assertThat(report.getLong("fenced_evidence")).as("manager-2's departure fenced its evidence").isPositive();
        assertThat(report.getLong("processes_left")).isZero();
        // Engines on manager-2 and manager-3 demanded manager-1's 32 pages: fetched across Managers, every byte checked.
        assertThat(report.getLong("peer_hits")).isEqualTo(2L * 32);
        assertThat(report.getLong("peer_bytes_verified")).isEqualTo(2L * 32 * (64 << 10));
        assertThat(report.getLong("mismatches")).isZero();
        // Warming is on by default: every Manager counted the others warm before the first fetch was timed.
        assertThat(report.getBoolean("peer_warmed_before_first_fetch")).isTrue();
        // The same again once the paths are in use (the first-against-warm figures; their size is a bench's business).
        assertThat(report.getLong("peer_warm_hits")).isEqualTo(2L * 32);
        assertThat(report.getLong("peer_first_fetch_ms_max")).isPositive();
        assertThat(report.getLong("peer_warm_fetch_ms_max")).isPositive();
    }
}
