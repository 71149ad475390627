package io.orbitkv.perf.peer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.clusterkit.LocalEtcd;
import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.report.BenchReport;
import io.vertx.core.Future;
import io.vertx.core.json.JsonObject;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code bench peer} end to end on a small shape (a real source process, a real requester Manager, real transfers): a
 * clean run reads its fetches back and passes with the parallel ratio first; a byte flipped in a published page (the
 * source's own checksum covers it, so only the key-derived comparison can see it) and a fetch that was skipped while
 * claiming its bytes both fail the report.
 */
class PeerBenchTest {
    private static final String[] SMALL = {"--pages=4", "--rounds=4", "--single-fetches=2", "--iperf-seconds=1",
            "--in-flight=2", "--warm-up-fetches=1", "--read-back-share=1", "--transports=plaintext",
            "--pool-dir=/dev/shm"};

    private static JsonObject run(PeerBench.Hooks faults) {
        return run(faults, SMALL);
    }

    private static JsonObject run(PeerBench.Hooks faults, String... args) {
        Assumptions.assumeTrue(LocalEtcd.installed(), "etcd-server is not installed");
        Assumptions.assumeTrue(Files.isExecutable(Path.of("/usr/bin/iperf3")) || "root".equals(System.getProperty("user.name")),
                "iperf3 is not installed and cannot be");
        return PeerBench.run(BenchArgs.parse(args), new PeerBench.Hooks() {
            @Override
            public List<String> sourceCommand() {
                return SourceManagerMain.command();
            }

            @Override
            public void published(String batch, int position, MemorySegment slot) {
                faults.published(batch, position, slot);
            }

            @Override
            public Future<io.orbitkv.peer.PeerCommands.Fetched> fetch(String mode, int round, Supplier<Future<io.orbitkv.peer.PeerCommands.Fetched>> real) {
                return faults.fetch(mode, round, real);
            }
        });
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void aCleanRunReadsEveryMeasuredPageBackAndLeadsWithTheParallelRatio() {
        JsonObject report = run(PeerBench.Hooks.NONE);
        assertThat(BenchReport.passed(report)).as(report.encode()).isTrue();
        assertThat(report.getJsonObject("ratios").fieldNames().iterator().next()).isEqualTo("parallel_transfer_ratio");
        assertThat(report.getDouble("parallel_transfer_ratio")).isPositive();
        JsonObject figures = report.getJsonObject("figures");
        assertThat(figures.getLong("plaintext_read_back_pages")).isEqualTo(16);
        assertThat(figures.getDouble("plaintext_read_back_share")).isEqualTo(1.0);
        assertThat(figures.getLong("plaintext_fetched_bytes")).isEqualTo(16L * PeerBench.PAGE);
        // one fetch alone on one connection, against one iperf3 stream
        assertThat(figures.getLong("plaintext_connection_bytes_per_s")).isPositive();
        assertThat(report.getDouble("connection_transfer_ratio")).isPositive();
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void aByteFlippedInAPublishedPageIsFoundByTheReadBack() {
        JsonObject report = run(new PeerBench.Hooks() {
            @Override
            public void published(String batch, int position, MemorySegment slot) {
                if (batch.equals("plaintext-round-1") && position == 2) {
                    slot.set(ValueLayout.JAVA_BYTE, 5000, (byte) ~slot.get(ValueLayout.JAVA_BYTE, 5000));
                }
            }
        });
        assertThat(BenchReport.passed(report)).isFalse();
        assertThat(report.getJsonArray(BenchReport.FAILURES).getList()).containsExactly(
                "plaintext: read-back of round 2: page 2 differs from the bytes published under its key at byte 5000");
        // the transport moved exactly what the source sealed: its checksum could not see the flip
        assertThat(report.getJsonObject("figures").getDouble("checksum_mismatches")).isZero();
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void aFetchSkippedWhileClaimingItsBytesFailsTheReport() {
        JsonObject report = run(new PeerBench.Hooks() {
            @Override
            public Future<io.orbitkv.peer.PeerCommands.Fetched> fetch(String mode, int round, Supplier<Future<io.orbitkv.peer.PeerCommands.Fetched>> real) {
                return round == 2 ? Future.succeededFuture(new io.orbitkv.peer.PeerCommands.Fetched(List.of(), 4L * PeerBench.PAGE, List.of(), List.of()))
                        : real.get();
            }
        });
        assertThat(BenchReport.passed(report)).isFalse();
        assertThat(report.getJsonArray(BenchReport.FAILURES).getList()).as(report.encode())
                .anySatisfy(f -> assertThat((String) f).startsWith("plaintext: read-back of round 3: the requester answered"))
                .anySatisfy(f -> assertThat((String) f).startsWith("plaintext: round 3: the fetch answered "
                        + 4L * PeerBench.PAGE + " bytes in 0 local pages"));
    }

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void overTheTransferEngineAByteFlippedInAPublishedPageIsFoundByTheReadBackToo() {
        Assumptions.assumeTrue(io.orbitkv.nativeio.mooncake.MooncakeTransferEngine.isAvailable(), () -> "the Mooncake "
                + "Transfer Engine did not load: " + io.orbitkv.nativeio.mooncake.MooncakeTransferEngine.unavailabilityCause());
        String[] args = java.util.Arrays.stream(SMALL).map(a -> a.equals("--transports=plaintext")
                ? "--transport=mooncake-te" : a).toArray(String[]::new);
        JsonObject report = run(new PeerBench.Hooks() {
            @Override
            public void published(String batch, int position, MemorySegment slot) {
                if (batch.equals("mooncake_te-round-1") && position == 2) {
                    slot.set(ValueLayout.JAVA_BYTE, 5000, (byte) ~slot.get(ValueLayout.JAVA_BYTE, 5000));
                }
            }
        }, args);
        assertThat(BenchReport.passed(report)).isFalse();
        assertThat(report.getJsonArray(BenchReport.FAILURES).getList()).as(report.encode()).containsExactly(
                "mooncake_te: read-back of round 2: page 2 differs from the bytes published under its key at byte 5000");
        assertThat(report.getDouble("parallel_mooncake_te_transfer_ratio")).isPositive();
        assertThat(report.getJsonObject("figures").getLong("mooncake_te_fetched_bytes")).isEqualTo(16L * PeerBench.PAGE);
    }

    @Test
    void theTransportsAndTheReadBackShareAreChecked() {
        assertThat(PeerBench.transports("tls,plaintext")).containsExactly("plaintext", "tls");
        assertThat(PeerBench.transports("mooncake-te,tls,plaintext")).containsExactly("plaintext", "tls", "mooncake-te");
        for (String bad : new String[] {"tls", "plaintext,plaintext", "quic", ""}) {
            assertThatThrownBy(() -> PeerBench.transports(bad)).as(bad).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("--transports");
        }
        for (String share : new String[] {"0", "1.5", "-0.1"}) {
            assertThatThrownBy(() -> PeerBench.run(BenchArgs.parse("--read-back-share=" + share)))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--read-back-share");
        }
        assertThat(new PeerBench.Shape(32, 16, 24, 3, 4, 8, -1, 0.25, "").readBackRounds()).hasSize(4)
                .isSorted().allSatisfy(r -> assertThat(r).isBetween(0, 15));
    }
}
