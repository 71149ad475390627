package io.orbitkv.planning;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.OptionalLong;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.plan.TimeEstimate;

class PrefetchPolicyTest {
    private static final long NOW = 1_000_000_000L;
    private static final long MS = 1_000_000;

    @Test
    void aPrefetchStartsNoLaterThanFirstUseMinusRouteTimeMinusMargin() {
        TimeEstimate route = TimeEstimate.of(40 * MS, 10 * MS);
        OptionalLong firstUse = OptionalLong.of(NOW + 200 * MS);
        // latest = first use - (40 + 10) - max(1 ms, 5 % of 40 ms = 2 ms) = now + 148 ms
        assertThat(PrefetchPolicy.latestStartNanos(firstUse, route)).hasValue(NOW + 148 * MS);
        PrefetchPolicy.Start roomy = PrefetchPolicy.speculativeStart(NOW, firstUse, route, false);
        assertThat(roomy).isEqualTo(new PrefetchPolicy.Start(NOW, NOW + 148 * MS, PrefetchPolicy.Reason.START_NOW));
        PrefetchPolicy.Start tight = PrefetchPolicy.speculativeStart(NOW, firstUse, route, true);
        assertThat(tight).isEqualTo(new PrefetchPolicy.Start(NOW + 148 * MS, NOW + 148 * MS,
                PrefetchPolicy.Reason.START_AT_LATEST));
        // A small estimate still keeps the 1 ms floor.
        assertThat(PrefetchPolicy.latestStartNanos(firstUse, TimeEstimate.of(MS, 0))).hasValue(NOW + 198 * MS);
    }

    @Test
    void aLateOrDeadlineFreePrefetchStartsAtOnce() {
        TimeEstimate route = TimeEstimate.of(40 * MS, 0);
        assertThat(PrefetchPolicy.speculativeStart(NOW, OptionalLong.of(NOW + 10 * MS), route, true))
                .isEqualTo(new PrefetchPolicy.Start(NOW, NOW - 32 * MS, PrefetchPolicy.Reason.START_NOW_LATE));
        assertThat(PrefetchPolicy.speculativeStart(NOW, OptionalLong.empty(), route, true).reason())
                .isEqualTo(PrefetchPolicy.Reason.START_NOW_NO_DEADLINE);
        assertThat(PrefetchPolicy.speculativeStart(NOW, OptionalLong.of(NOW + 10 * MS), TimeEstimate.UNKNOWN, true))
                .isEqualTo(new PrefetchPolicy.Start(NOW, Long.MAX_VALUE, PrefetchPolicy.Reason.START_NOW_NO_DEADLINE));
    }

    @Test
    void aDemandReadWithoutFirstUseIsDueNow() {
        assertThat(PrefetchPolicy.demandLatestStartNanos(NOW, OptionalLong.empty(), TimeEstimate.of(5 * MS, 0)))
                .isEqualTo(NOW);
        assertThat(PrefetchPolicy.demandLatestStartNanos(NOW, OptionalLong.of(NOW + 100 * MS), TimeEstimate.of(5 * MS, 0)))
                .isEqualTo(NOW + 94 * MS);
        assertThat(PrefetchPolicy.demandLatestStartNanos(NOW, OptionalLong.of(NOW + 100 * MS), TimeEstimate.UNKNOWN))
                .isEqualTo(NOW);
    }
}
