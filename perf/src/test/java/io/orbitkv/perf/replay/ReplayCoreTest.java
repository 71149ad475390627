package io.orbitkv.perf.replay;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.perf.engine.InProcessManager;
import io.orbitkv.perf.engine.SimulatedEngine;
import io.orbitkv.perf.trace.ChainedBlockHashes;
import io.orbitkv.perf.trace.TraceRequest;
import io.orbitkv.protocol.engine.InstanceIdentity;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The replay's check can fail: a page the Manager hands over whose bytes are not those of its key (what a Manager that
 * skipped a fetch, or served another page at that position, would hand over) is reported as a mismatch.
 */
class ReplayCoreTest {
    private static final int BLOCK_TOKENS = 512;
    private static final long PAGE_BYTES = 64 << 10;
    private static final InstanceIdentity IDENTITY = SimulatedEngine.identity("orbitkv-replay-test", "test",
            BLOCK_TOKENS, PAGE_BYTES);

    private static final List<TraceRequest> TRACE = List.of(
            new TraceRequest(0, 3 * BLOCK_TOKENS, 1, new long[] {1, 2, 3}),
            new TraceRequest(10, 4 * BLOCK_TOKENS, 1, new long[] {1, 2, 3, 4}));

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anHonestManagerServesTheSecondRequestsPrefixAndEveryCheckedByteMatches() throws Exception {
        try (ManagerFleet fleet = ManagerFleet.start(1, PAGE_BYTES, 64, Map.of(), false)) {
            ReplayCore.Outcome out = ReplayCore.run(TRACE, fleet, new ReplayCore.Setup(-1, 0, false), IDENTITY,
                    BLOCK_TOKENS, 1, line -> { });

            assertThat(out.hitBlocks).isEqualTo(3);
            assertThat(out.mismatchedPages).isZero();
            assertThat(out.verifiedBytes).isEqualTo(3 * PAGE_BYTES);
            assertThat(out.verifiedShare()).isEqualTo(1.0);
            assertThat(out.leasesLeft).isZero();
            assertThat(out.served).extracting(ArrivalModel.Served::hitBlocks).containsExactly(0, 3);
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void pagesWhoseBytesAreNotTheirKeysAreReportedAsMismatches() throws Exception {
        try (ManagerFleet fleet = ManagerFleet.start(1, PAGE_BYTES, 64, Map.of(), false)) {
            InProcessManager manager = fleet.managers().getFirst();
            // Another engine publishes the first request's keys with other content: the pages the Manager will hand
            // over for those keys hold bytes that do not derive from them.
            try (SimulatedEngine other = SimulatedEngine.register(OrbitKvClient.connectUnix(manager.unixSocket(),
                    manager.token()), true, IDENTITY, 1)) {
                List<ByteString> chain = new ArrayList<>();
                for (byte[] hash : ChainedBlockHashes.chain(new long[] {1, 2, 3})) {
                    chain.add(ByteString.copyFrom(hash));
                }
                assertThat(other.publish(chain, 0, position -> 1_000 + position).sealedPages()).isEqualTo(3);
            }

            ReplayCore.Outcome out = ReplayCore.run(TRACE, fleet, new ReplayCore.Setup(-1, 0, false), IDENTITY,
                    BLOCK_TOKENS, 16, line -> { });

            assertThat(out.hitBlocks).isEqualTo(6);
            assertThat(out.mismatchedPages).as("every page of the wrong content is caught, by its checked prefix")
                    .isEqualTo(6);
            assertThat(out.leasesLeft).isZero();
        }
    }
}
