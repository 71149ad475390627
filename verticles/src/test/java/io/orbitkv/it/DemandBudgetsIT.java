package io.orbitkv.it;

import static io.orbitkv.it.HybridModel.*;
import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.protocol.engine.*;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Query byte budget, per-instance budgets, tenant shares and the speculative cap, through the real gRPC API.
 *
 * <p>Pool 64 MiB, pages of 16 KiB. Query byte budget 0.25% of the pool = 167772 bytes = 10.24 pages; instance budget
 * 40% of that = 4.1 pages; tenant "a" 50% = 5.12 pages, every other tenant the remaining 50%; speculative cap 0.05% of
 * the pool = 33554 bytes = 2.05 pages.
 */
@Timeout(120)
class DemandBudgetsIT {
    @RegisterExtension
    final RunningManager running = new RunningManager()
            .with("query.byte-budget-fraction", "0.0025")
            .with("query.instance-budget-fraction", "0.4")
            .with("query.tenant-shares", "a=0.5")
            .with("query.speculative-fraction", "0.0005");

    static Demand fullAttention(String request, long operation, List<ByteString> chain, int pages, boolean speculative) {
        return Demand.newBuilder().setRequestId(request).setOperationId(operation).setPageSizeTokens(P)
                .setSelectedEndTokens((long) pages * P).setSelectedGroupId(0).setSpeculative(speculative)
                .addGroups(GroupDemand.newBuilder().setGroupId(0).addAllBlockHashes(chain.subList(0, pages))
                        .addRanges(span(0, pages))).build();
    }

    EngineSession register(OrbitKvClient client, String tenant) {
        return client.register(RegisterRequest.newBuilder().setIdentity(HybridModel.fullAttention())
                .setRole(InstanceRole.DECODE).setTenant(tenant).build()).await();
    }

    @Test
    void instanceBudgetsTenantSharesAndSpeculativeWarmingAreEnforcedAndRefusalsLeakNothing() throws Exception {
        List<ByteString> chain = PublishQueryRestoreIT.chain("budget", 8);
        try (OrbitKvClient client = running.unixClient();
             EngineSession a1 = register(client, "a");
             EngineSession a2 = register(client, "a");
             EngineSession b = register(client, "b")) {
            publish(a1, "budget", chain, 0, range(0, 8), true);

            QueryReply a1Four = a1.demand(fullAttention("a1-4", 1, chain, 4, false)).await();
            assertThat(a1Four.getStatus()).isEqualTo(QueryStatus.READY);
            // A fifth page would pass tenant a's share (5 <= 5.12) but not this instance's budget (4.1 pages).
            OrbitKvException instance = refused(() -> a1.demand(fullAttention("a1-1", 2, chain, 1, false)));
            assertThat(instance.reason()).isEqualTo(ErrorReason.BUDGET_EXCEEDED);
            assertThat(instance.getMessage()).contains("instance budget");
            assertThat(a1.stats().await().getSessionOutstandingQueries()).as("a refused ticket is gone").isZero();

            QueryReply a2One = a2.demand(fullAttention("a2-1", 1, chain, 1, false)).await();
            assertThat(a2One.getStatus()).isEqualTo(QueryStatus.READY);
            OrbitKvException tenant = refused(() -> a2.demand(fullAttention("a2-1b", 2, chain, 1, false)));
            assertThat(tenant.reason()).isEqualTo(ErrorReason.BUDGET_EXCEEDED);
            assertThat(tenant.getMessage()).contains("tenant 'a'");

            QueryReply bFour = b.demand(fullAttention("b-4", 1, chain, 4, false)).await();
            assertThat(bFour.getStatus()).isEqualTo(QueryStatus.READY);
            // Demand holds 9 pages of the 10.24-page budget: 2 speculative pages are refused first.
            OrbitKvException yields = refused(() -> b.demand(fullAttention("b-spec", 2, chain, 2, true)));
            assertThat(yields.reason()).isEqualTo(ErrorReason.BUDGET_EXCEEDED);
            assertThat(yields.getMessage()).contains("speculative warming yields to demand");

            a1.release(a1Four.getLease().getLeaseId()).await();
            // Now 5 demand pages: warming fits, settles RESIDENT (held in DRAM, not for consumption) and is not
            // charged to b's instance budget (b already holds 4 of its 4.1 pages).
            QueryReply warm = b.demand(fullAttention("b-spec", 2, chain, 2, true)).await();
            assertThat(warm.getStatus()).isEqualTo(QueryStatus.RESIDENT);
            assertThat(warm.getDetail()).isEqualTo(QueryStatus.RESIDENT);
            assertThat(warm.getLease().getPagesCount()).isEqualTo(2);
            assertThat(running.metric("orbitkv_leases_speculative_bytes")).isEqualTo(2.0 * PAGE_BYTES);
            OrbitKvException cap = refused(() -> a1.demand(fullAttention("a1-spec", 3, chain, 1, true)));
            assertThat(cap.reason()).isEqualTo(ErrorReason.BUDGET_EXCEEDED);
            assertThat(cap.getMessage()).contains("cap");
            // Upgrading the warmed request to a real demand (higher revision) releases the speculative lease and
            // charges b's own budget, which has no room for 2 more pages.
            OrbitKvException upgrade = refused(() -> b.demand(fullAttention("b-spec", 2, chain, 2, false).toBuilder()
                    .setRevision(1).build()));
            assertThat(upgrade.reason()).isEqualTo(ErrorReason.BUDGET_EXCEEDED);
            assertThat(running.metric("orbitkv_leases_speculative_bytes")).isZero();

            a2.release(a2One.getLease().getLeaseId()).await();
            b.release(bFour.getLease().getLeaseId()).await();
            assertNothingHeld(running, a1);
            assertThat(running.metric("orbitkv_rejections_total{reason=\"budget_exceeded\"}")).isEqualTo(5.0);
        }
    }

    @Test
    void withoutConfiguredSharesTheDefaultTenantHasTheWholeBudget() throws Exception {
        List<ByteString> chain = PublishQueryRestoreIT.chain("default", 8);
        try (OrbitKvClient client = running.unixClient();
             EngineSession anonymous = register(client, "")) {
            publish(anonymous, "default", chain, 0, range(0, 8), true);
            // With "a=0.5" configured, the unlisted default tenant gets the remaining half (5.12 pages), but the
            // instance budget (4.1 pages) binds first.
            assertThat(refused(() -> anonymous.demand(fullAttention("x", 1, chain, 5, false))).reason())
                    .isEqualTo(ErrorReason.BUDGET_EXCEEDED);
            QueryReply four = anonymous.demand(fullAttention("y", 2, chain, 4, false)).await();
            assertThat(four.getStatus()).isEqualTo(QueryStatus.READY);
            anonymous.release(four.getLease().getLeaseId()).await();
            assertNothingHeld(running, anonymous);
            assertThat(refused(() -> client.register(RegisterRequest.newBuilder().setIdentity(HybridModel.fullAttention())
                    .setRole(InstanceRole.DECODE).setTenant("no spaces").build())).reason()).isEqualTo(ErrorReason.INVALID_IDENTITY);
        }
    }
}
