package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.it.ColocatedChannelIT.RawChannel;
import io.orbitkv.it.ColocatedChannelIT.RawReply;
import io.orbitkv.protocol.colocated.ColocatedFrame;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.StatsRequest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The co-located channel on a Manager of several event loops, where a call that reaches a role on another loop
 * completes after the loop has read the next frames: the in-flight bound is what stops a burst, and each refusal and
 * each answer comes once.
 */
@Timeout(120)
class ColocatedChannelLoopsIT {
    static final int IN_FLIGHT = 2;

    @RegisterExtension
    final RunningManager running = new RunningManager().with("ssd.enabled", "false")
            .with("manager.event-loop-threads", "4")
            .with("engine.colocated-max-in-flight", Integer.toString(IN_FLIGHT));

    @Test
    void requestsBeyondTheInFlightBoundAreRefusedAndEveryRequestIsAnsweredOnce() throws Exception {
        int requests = 64;
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", 64 << 10).build(),
                     InstanceRole.PREFILL_AND_DECODE).await();
             RawChannel raw = RawChannel.authenticated(running)) {
            // Stats asks the storage and admission roles, which sit on other loops than the engine role's here.
            byte[] stats = StatsRequest.newBuilder().setSession(session.session()).build().toByteArray();
            for (int id = 1; id <= requests; id++) {
                raw.send(ColocatedFrame.opcode("Stats"), id, stats);
            }
            boolean[] answered = new boolean[requests + 1];
            int refused = 0;
            for (int n = 0; n < requests; n++) {
                RawReply reply = raw.receive();
                assertThat(answered[reply.requestId()]).as("request %d answered twice", reply.requestId()).isFalse();
                answered[reply.requestId()] = true;
                assertThat(reply.status()).isIn(ColocatedFrame.STATUS_OK, ErrorReason.TOO_MANY_OUTSTANDING.getNumber());
                refused += reply.status() == ColocatedFrame.STATUS_OK ? 0 : 1;
            }
            // Up to 16 frames are read per wake-up of the loop, faster than the other loops answer.
            assertThat(refused).isPositive().isLessThan(requests);
            raw.send(ColocatedFrame.opcode("Stats"), requests + 1, stats);
            assertThat(raw.receive()).isEqualTo(new RawReply(requests + 1, ColocatedFrame.STATUS_OK));
        }
        assertThat(running.metric("orbitkv_rejections_total{reason=\"too_many_outstanding\"}")).isPositive();
    }
}
