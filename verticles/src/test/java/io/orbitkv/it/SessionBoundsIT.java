package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.protocol.engine.EngineServiceGrpcClient;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.RegisterRequest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Issue 9 item 5 (sessions): registered sessions are bounded; one more is a typed, counted refusal. */
@Timeout(120)
class SessionBoundsIT {
    @RegisterExtension
    final RunningManager running = new RunningManager().with("session.max-registered", "2").with("ssd.enabled", "false");

    @Test
    void registeringBeyondTheLimitIsRefusedAndAResumeKeepsItsPlace() throws Exception {
        try (OrbitKvClient client = running.unixClient()) {
            EngineSession first = client.register(RunningManager.identity("m", 4096).build(), InstanceRole.DECODE).await();
            EngineSession second = client.register(RunningManager.identity("m", 4096).build(), InstanceRole.DECODE).await();
            assertThatThrownBy(() -> client.register(RunningManager.identity("m", 4096).build(), InstanceRole.DECODE).await())
                    .isInstanceOfSatisfying(OrbitKvException.class, e -> {
                        assertThat(e.reason()).isEqualTo(ErrorReason.TOO_MANY_SESSIONS);
                        assertThat(e.grpcStatus()).isEqualTo("RESOURCE_EXHAUSTED");
                        assertThat(e.getMessage()).contains("session.max-registered");
                    });
            assertThat(running.metric("orbitkv_rejections_total{reason=\"too_many_sessions\"}")).isEqualTo(1.0);
            assertThat(running.metric("orbitkv_instances")).isEqualTo(2.0);
            // A resume replaces a session, it does not add one.
            client.call(EngineServiceGrpcClient.Register, RegisterRequest.newBuilder().setIdentity(second.identity())
                    .setRole(InstanceRole.DECODE).setResumeInstanceId(second.instanceId()).build()).await();
            assertThat(running.metric("orbitkv_instances")).isEqualTo(2.0);
            second.abandon();
            // Leaving frees a place.
            first.close();
            try (EngineSession third = client.register(RunningManager.identity("m", 4096).build(), InstanceRole.DECODE).await()) {
                assertThat(third.instanceId()).isPositive();
            }
        }
    }
}
