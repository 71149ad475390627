package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.protocol.engine.*;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Retention hints on a real Manager under pool pressure: a 16-page pool, half of it the retention budget, no SSD (an
 * evicted page must stay gone). RunningManager checks after each test that no lease or pool byte leaked.
 */
@Timeout(120)
class RetentionIT {
    static final int PAGE = 1 << 20;
    static final int PAGE_TOKENS = 16;

    @RegisterExtension
    final RunningManager running = new RunningManager().with("pool.size", "16MiB").with("ssd.enabled", "false")
            .with("publish.budget-fraction", "1.0").with("retention.max-ttl-ms", "60000")
            .with("grpc.max-pages-per-request", "32");

    private static GroupChain chainOf(List<ByteString> hashes) {
        return GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build();
    }

    private static EngineSession register(OrbitKvClient client, String tenant) {
        return client.register(RegisterRequest.newBuilder().setIdentity(RunningManager.identity("model-a", PAGE))
                .setRole(InstanceRole.PREFILL_AND_DECODE).setTenant(tenant).build()).await();
    }

    private double retainedBytes() throws Exception {
        return running.metric("orbitkv_retained_bytes");
    }

    @Test
    void aRetainedPrefixSurvivesPressureWhileUnretainedOnesGoFirst() throws Exception {
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client, "")) {
            List<ByteString> kept = PublishQueryRestoreIT.publish(session, "kept", 4);
            RetainReply retained = session.retain(List.of(chainOf(kept)), 60_000, 1).await();
            assertThat(retained.getRetainedBytes()).isEqualTo(4L * PAGE);
            assertThat(retained.getResidentPages()).isEqualTo(4);
            assertThat(retainedBytes()).isEqualTo(4.0 * PAGE);
            List<ByteString> other = PublishQueryRestoreIT.publish(session, "other", 4);
            // 8 of 16 pages used, "kept" least recently used: 12 more pages must evict 4, and they come from "other".
            List<ByteString> pressure = PublishQueryRestoreIT.publish(session, "pressure", 12);
            assertThat(SessionAndPressureIT.readyBlocks(session, kept)).as("the retained prefix survived").isEqualTo(4);
            assertThat(SessionAndPressureIT.readyBlocks(session, other)).as("the unretained prefix went first").isZero();
            assertThat(SessionAndPressureIT.readyBlocks(session, pressure)).isEqualTo(12);
            assertThat(session.unretain(retained.getRetentionId()).await().getReleasedBytes()).isEqualTo(4L * PAGE);
            assertThat(retainedBytes()).isZero();
            RunningManager.assertNoLeases(session);
        }
    }

    @Test
    void underPressureLowerPriorityRetentionsGoBeforeHigherOnes() throws Exception {
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client, "")) {
            List<ByteString> high = PublishQueryRestoreIT.publish(session, "high", 4);
            List<ByteString> low = PublishQueryRestoreIT.publish(session, "low", 4);
            session.retain(List.of(chainOf(high)), 60_000, 9).await();
            session.retain(List.of(chainOf(low)), 60_000, 2).await();
            // Everything resident is retained; 12 new pages must evict 4 retained ones: the lower priority's, although
            // "high" is the least recently used.
            PublishQueryRestoreIT.publish(session, "pressure", 12);
            assertThat(SessionAndPressureIT.readyBlocks(session, high)).isEqualTo(4);
            assertThat(SessionAndPressureIT.readyBlocks(session, low)).isZero();
            RunningManager.assertNoLeases(session);
        }
    }

    @Test
    void anExpiredRetentionLetsItsPagesGo() throws Exception {
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client, "")) {
            List<ByteString> brief = PublishQueryRestoreIT.publish(session, "brief", 4);
            session.retain(List.of(chainOf(brief)), 300, 5).await();
            List<ByteString> other = PublishQueryRestoreIT.publish(session, "other", 4);
            await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(500)).until(() -> retainedBytes() == 0.0);
            assertThat(running.metric("orbitkv_retentions")).isZero();
            PublishQueryRestoreIT.publish(session, "pressure", 12);
            assertThat(SessionAndPressureIT.readyBlocks(session, brief)).as("expired: plain LRU again").isZero();
            assertThat(SessionAndPressureIT.readyBlocks(session, other)).isEqualTo(4);
            RunningManager.assertNoLeases(session);
        }
    }

    @Test
    void budgetsHoldPerTenantAndInTotal() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession a = register(client, "tenant-a"); EngineSession b = register(client, "tenant-b")) {
            // The budget is 8 pages; a tenant alone may use it all.
            RetainReply all = a.retain(List.of(chainOf(RunningManager.chain("a-all", 8))), 60_000, 1).await();
            assertThat(all.getTenantBudgetBytes()).isEqualTo(8L * PAGE);
            // Nothing is left for tenant b: refused, and nothing changed.
            assertRefused(() -> b.retain(List.of(chainOf(RunningManager.chain("b", 1))), 60_000, 1).await(),
                    ErrorReason.RETENTION_OVER_BUDGET);
            assertThat(retainedBytes()).isEqualTo(8.0 * PAGE);
            a.unretain(all.getRetentionId()).await();
            // Two tenants: half each.
            RetainReply a4 = a.retain(List.of(chainOf(RunningManager.chain("a4", 4))), 60_000, 1).await();
            RetainReply b4 = b.retain(List.of(chainOf(RunningManager.chain("b4", 4))), 60_000, 1).await();
            assertThat(b4.getTenantBudgetBytes()).isEqualTo(4L * PAGE);
            assertRefused(() -> a.retain(List.of(chainOf(RunningManager.chain("a1", 1))), 60_000, 1).await(),
                    ErrorReason.RETENTION_OVER_BUDGET);
            // Another tenant's retention is not this tenant's to end.
            assertRefused(() -> a.unretain(b4.getRetentionId()).await(), ErrorReason.UNKNOWN_RETENTION);
            assertThat(retainedBytes()).isEqualTo(8.0 * PAGE);
            a.unretain(a4.getRetentionId()).await();
            b.unretain(b4.getRetentionId()).await();
            assertThat(retainedBytes()).isZero();
        }
    }

    @Test
    void refusalsAreTypedCountedAndChangeNothing() throws Exception {
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client, "")) {
            List<ByteString> kept = RunningManager.chain("kept", 2);
            session.retain(List.of(chainOf(kept)), 60_000, 1).await();
            double before = retainedBytes();
            assertRefused(() -> session.retain(RetainRequest.newBuilder().setNamespaceId(ByteString.copyFromUtf8("other"))
                    .addGroups(chainOf(kept)).setTtlMillis(1000)).await(), ErrorReason.NAMESPACE_MISMATCH);
            assertRefused(() -> session.retain(List.of(chainOf(kept)), 0, 1).await(), ErrorReason.INVALID_RETENTION_TTL);
            assertRefused(() -> session.retain(List.of(chainOf(kept)), 120_000, 1).await(),
                    ErrorReason.INVALID_RETENTION_TTL);
            assertRefused(() -> session.retain(List.of(chainOf(RunningManager.chain("long", 33))), 1000, 1).await(),
                    ErrorReason.RETENTION_CHAIN_TOO_LONG);
            assertRefused(() -> session.retain(List.of(chainOf(RunningManager.chain("big", 9))), 1000, 1).await(),
                    ErrorReason.RETENTION_OVER_BUDGET);
            assertRefused(() -> session.unretain(12345).await(), ErrorReason.UNKNOWN_RETENTION);
            assertThat(retainedBytes()).as("refusals change nothing").isEqualTo(before);
            assertThat(running.metric("orbitkv_retentions")).isEqualTo(1.0);
            assertThat(running.metric("orbitkv_rejections_total{reason=\"invalid_retention_ttl\"}")).isEqualTo(2.0);
            assertThat(running.metric("orbitkv_rejections_total{reason=\"retention_over_budget\"}")).isEqualTo(1.0);
            assertThat(running.metric("orbitkv_rejections_total{reason=\"retention_chain_too_long\"}")).isEqualTo(1.0);
        }
    }

    @Test
    void doNotStorePagesGoFirstAndMaxStoredTokensCapsAPublish() throws Exception {
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client, "")) {
            List<ByteString> transients = RunningManager.chain("decode", 4);
            List<ByteString> ordinary = PublishQueryRestoreIT.publish(session, "ordinary", 4);
            publish(session, AllocatePublishRequest.newBuilder().setDoNotStore(true), transients);
            assertThat(SessionAndPressureIT.readyBlocks(session, transients)).as("served while resident").isEqualTo(4);
            PublishQueryRestoreIT.publish(session, "pressure", 12);
            assertThat(SessionAndPressureIT.readyBlocks(session, transients)).as("transient pages went first").isZero();
            assertThat(SessionAndPressureIT.readyBlocks(session, ordinary)).isEqualTo(4);

            List<ByteString> capped = RunningManager.chain("capped", 4);
            AllocatePublishReply reply = publish(session,
                    AllocatePublishRequest.newBuilder().setMaxStoredTokens(2L * PAGE_TOKENS + 5), capped);
            assertThat(reply.getSlotsList()).extracting(PublishSlot::getStatus).containsExactly(SlotStatus.ALLOCATED,
                    SlotStatus.ALLOCATED, SlotStatus.NOT_STORED, SlotStatus.NOT_STORED);
            assertThat(SessionAndPressureIT.readyBlocks(session, capped)).isEqualTo(2);
            RunningManager.assertNoLeases(session);
        }
    }

    /** Allocates with the given options, writes and seals what was allocated. */
    private static AllocatePublishReply publish(EngineSession session, AllocatePublishRequest.Builder request,
                                                List<ByteString> hashes) {
        for (ByteString hash : hashes) {
            request.addPages(PageKey.newBuilder().setGroupId(0).setBlockHash(hash));
        }
        AllocatePublishReply allocated = session.allocate(request).await();
        List<Integer> crcs = new ArrayList<>();
        for (int i = 0; i < allocated.getSlotsCount(); i++) {
            PublishSlot slot = allocated.getSlots(i);
            if (slot.getStatus() == SlotStatus.ALLOCATED) {
                var target = session.slot(slot.getSlot());
                PublishQueryRestoreIT.fill(target, i);
                crcs.add(PublishQueryRestoreIT.crc(target));
            }
        }
        if (!crcs.isEmpty()) {
            session.seal(allocated.getPublishId(), crcs).await();
        }
        return allocated;
    }

    private static void assertRefused(org.assertj.core.api.ThrowableAssert.ThrowingCallable call, ErrorReason reason) {
        assertThatThrownBy(call).isInstanceOfSatisfying(OrbitKvException.class, e -> assertThat(e.reason()).isEqualTo(reason));
    }
}
