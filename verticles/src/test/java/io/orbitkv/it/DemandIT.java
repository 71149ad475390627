package io.orbitkv.it;

import static io.orbitkv.it.HybridModel.*;
import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.protocol.engine.*;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The demand contract and ticket lifecycle through the real gRPC API with a hybrid model (full attention + sliding
 * window + recurrent), against a real Manager. Every test ends by checking that no lease, query or pin is left.
 */
@Timeout(120)
class DemandIT {
    @RegisterExtension
    final RunningManager running = new RunningManager().with("query.max-outstanding-per-instance", "2");

    OrbitKvClient client;
    EngineSession session;
    List<ByteString> chain;

    @BeforeEach
    void register() throws Exception {
        client = running.unixClient();
        session = client.register(HybridModel.identity(), InstanceRole.PREFILL_AND_DECODE).await();
        chain = PublishQueryRestoreIT.chain("doc", 12);
    }

    @AfterEach
    void nothingLeaked() throws Exception {
        try {
            assertNothingHeld(running, session);
        } finally {
            session.close();
            client.close();
        }
    }

    /** Attention and window pages for 10 blocks, but the recurrent checkpoint only at 4 pages. */
    private void publishTenAttentionPagesAndACheckpointAtFour() {
        publish(session, "doc", chain, FULL, range(0, 10), true);
        publish(session, "doc", chain, WINDOW, range(0, 10), true);
        publish(session, "doc", chain, RECURRENT, List.of(3), true);
    }

    @Test
    void aLongerAttentionMatchWithAShorterCheckpointRestoresOnlyTheLegalBoundaryAndItsRequiredRanges() {
        publishTenAttentionPagesAndACheckpointAtFour();
        QueryReply reply = session.demand(demand("req-1", 0, 101, chain, 10).build()).await();

        assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY);
        assertThat(reply.getDetail()).isEqualTo(QueryStatus.READY);
        assertThat(reply.getBoundaryTokens()).isEqualTo(4 * P);
        assertThat(reply.getReadyBlocks()).isEqualTo(4);
        assertThat(reply.getRequestId()).isEqualTo("req-1");
        assertThat(reply.getOperationId()).isEqualTo(101);
        // Full attention: every page below the boundary; window (2 pages): the last two; recurrent: the checkpoint.
        Map<Integer, List<Integer>> leased = verifyLease(session, reply, "doc");
        assertThat(leased).containsExactly(Map.entry(FULL, List.of(0, 1, 2, 3)), Map.entry(WINDOW, List.of(2, 3)),
                Map.entry(RECURRENT, List.of(3)));
        assertThat(reply.getLeasedRangesList()).containsExactly(
                GroupSpans.newBuilder().setGroupId(FULL).addSpans(span(0, 4)).build(),
                GroupSpans.newBuilder().setGroupId(WINDOW).addSpans(span(2, 4)).build(),
                GroupSpans.newBuilder().setGroupId(RECURRENT).addSpans(span(3, 4)).build());
        assertThat(session.stats().await().getActiveLeases()).isEqualTo(1);
        assertThat(session.release(reply.getLease().getLeaseId()).await().getReleasedPages()).isEqualTo(7);
    }

    @Test
    void theValidPrefixOriginIsNeverRestoredAndAMissingCheckpointEverywhereIsAMiss() {
        publish(session, "doc", chain, FULL, range(0, 10), true);
        publish(session, "doc", chain, WINDOW, range(0, 10), true);
        publish(session, "doc", chain, RECURRENT, List.of(7), true);
        // The engine already holds 2 pages: full attention restores [2, 8), the window [6, 8), the checkpoint 7.
        QueryReply reply = session.demand(demand("req-origin", 0, 7, chain, 10).setValidPrefixTokens(2 * P).build()).await();
        assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY);
        assertThat(reply.getBoundaryTokens()).isEqualTo(8 * P);
        assertThat(verifyLease(session, reply, "doc")).containsExactly(Map.entry(FULL, range(2, 8)),
                Map.entry(WINDOW, List.of(6, 7)), Map.entry(RECURRENT, List.of(7)));
        session.release(reply.getLease().getLeaseId()).await();

        // Without any recurrent checkpoint in the allowed ranges, ten attention pages restore nothing.
        QueryReply miss = session.demand(demand("req-miss", 0, 8, chain, 10)
                .setGroups(2, GroupDemand.newBuilder().setGroupId(RECURRENT).addRanges(span(0, 6))).build()).await();
        assertThat(miss.getStatus()).isEqualTo(QueryStatus.MISS);
        assertThat(miss.getDetail()).isEqualTo(QueryStatus.MISS);
        assertThat(miss.hasLease()).isFalse();
    }

    @Test
    void aHigherRevisionWithOtherRangesOfAnotherGroupRevisesTheOperationAndReleasesTheOldLease() {
        publishTenAttentionPagesAndACheckpointAtFour();
        publish(session, "doc", chain, RECURRENT, List.of(7), true);
        // Revision 0 allows the recurrent group only [0, 4): boundary 4 pages.
        Demand first = demand("req-rev", 0, 42, chain, 10)
                .setGroups(2, GroupDemand.newBuilder().setGroupId(RECURRENT).addRanges(span(0, 4))).build();
        QueryReply r0 = session.demand(first).await();
        assertThat(r0.getBoundaryTokens()).isEqualTo(4 * P);

        // The same revision and demand again: the same answer, the same lease.
        QueryReply again = session.submitDemand(first).await();
        assertThat(again.getTicket()).isEqualTo(r0.getTicket());
        assertThat(again.getLease().getLeaseId()).isEqualTo(r0.getLease().getLeaseId());

        // Revision 1: same selected-group hashes, but the recurrent group now allows [0, 8): boundary 8 pages.
        Demand second = demand("req-rev", 1, 42, chain, 10).build();
        QueryReply r1 = session.demand(second).await();
        assertThat(r1.getTicket()).isEqualTo(r0.getTicket());
        assertThat(r1.getRevision()).isEqualTo(1);
        assertThat(r1.getBoundaryTokens()).isEqualTo(8 * P);
        assertThat(verifyLease(session, r1, "doc")).containsExactly(Map.entry(FULL, range(0, 8)),
                Map.entry(WINDOW, List.of(6, 7)), Map.entry(RECURRENT, List.of(7)));
        assertThat(session.stats().await().getActiveLeases()).as("the old revision's lease was released").isEqualTo(1);
        assertThat(refused(() -> session.release(r0.getLease().getLeaseId())).reason()).isEqualTo(ErrorReason.UNKNOWN_LEASE);

        // Going backwards, or claiming revision 1 again with another demand, is refused; nothing changes.
        OrbitKvException backwards = refused(() -> session.submitDemand(first));
        assertThat(backwards.reason()).isEqualTo(ErrorReason.REVISION_BACKWARDS);
        assertThat(backwards.grpcStatus()).isEqualTo("INVALID_ARGUMENT");
        assertThat(refused(() -> session.submitDemand(second.toBuilder().setPriority(9).build())).reason())
                .isEqualTo(ErrorReason.DUPLICATE_OPERATION);
        // Another request may not take the live operation id.
        assertThat(refused(() -> session.submitDemand(demand("req-other", 0, 42, chain, 4).build())).reason())
                .isEqualTo(ErrorReason.DUPLICATE_OPERATION);
        assertThat(session.poll(r1.getTicket()).await().getLease().getLeaseId()).isEqualTo(r1.getLease().getLeaseId());

        // Releasing twice is a double claim of the same lease; cancelling twice of the same ticket.
        assertThat(session.release(r1.getLease().getLeaseId()).await().getReleasedPages()).isEqualTo(11);
        assertThat(refused(() -> session.release(r1.getLease().getLeaseId())).reason()).isEqualTo(ErrorReason.UNKNOWN_LEASE);
        assertThat(session.cancel(r1.getTicket()).await().getReleasedPages()).isZero();
        assertThat(refused(() -> session.cancel(r1.getTicket())).reason()).isEqualTo(ErrorReason.UNKNOWN_TICKET);
    }

    @Test
    void pendingWhileALaterCheckpointIsBeingWrittenThenReadyAtTheLongerBoundary() {
        publishTenAttentionPagesAndACheckpointAtFour();
        long writing = publish(session, "doc", chain, RECURRENT, List.of(7), false);
        QueryReply pending = session.submitDemand(demand("req-wait", 0, 5, chain, 10).build()).await();
        assertThat(pending.getStatus()).isEqualTo(QueryStatus.PENDING);
        assertThat(pending.getDetail()).as("evidence of a legal boundary, nothing reserved").isEqualTo(QueryStatus.CANDIDATE);
        assertThat(pending.getRetryAfterMicros()).isPositive();
        assertThat(pending.hasLease()).isFalse();
        assertThat(session.stats().await().getSessionOutstandingQueries()).isEqualTo(1);

        // A zero waiting budget does not wait for the write: it settles on what is resident (4 pages) at once.
        QueryReply impatient = session.submitDemand(demand("req-now", 0, 6, chain, 10).setMaxWaitMicros(0).build()).await();
        assertThat(impatient.getStatus()).isEqualTo(QueryStatus.READY);
        assertThat(impatient.getBoundaryTokens()).isEqualTo(4 * P);
        session.release(impatient.getLease().getLeaseId()).await();

        // Sealing the checkpoint lets the waiting ticket settle at 8 pages.
        // The slot was filled at allocation; seal without checksums (the bytes are checked on restore).
        session.seal(writing, List.of()).await();
        QueryReply ready = session.poll(pending.getTicket()).await();
        assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
        assertThat(ready.getBoundaryTokens()).isEqualTo(8 * P);
        assertThat(session.poll(pending.getTicket()).await()).as("a settled answer repeats").isEqualTo(ready);
        session.release(ready.getLease().getLeaseId()).await();
    }

    @Test
    void cancelOfAPendingTicketRevokesItAndOutstandingQueriesAreBoundedPerSession() {
        publishTenAttentionPagesAndACheckpointAtFour();
        long writing = publish(session, "doc", chain, RECURRENT, List.of(7), false);
        QueryReply a = session.submitDemand(demand("req-a", 0, 1, chain, 10).build()).await();
        QueryReply b = session.submitDemand(demand("req-b", 0, 2, chain, 10).build()).await();
        assertThat(List.of(a.getStatus(), b.getStatus())).containsOnly(QueryStatus.PENDING);
        OrbitKvException third = refused(() -> session.submitDemand(demand("req-c", 0, 3, chain, 10).build()));
        assertThat(third.reason()).isEqualTo(ErrorReason.TOO_MANY_OUTSTANDING);
        assertThat(third.grpcStatus()).isEqualTo("RESOURCE_EXHAUSTED");

        assertThat(session.cancel(a.getTicket()).await().getReleasedPages()).isZero();
        assertThat(refused(() -> session.poll(a.getTicket())).reason()).isEqualTo(ErrorReason.UNKNOWN_TICKET);
        // The cancelled request's id and operation are free again.
        QueryReply c = session.submitDemand(demand("req-a", 0, 1, chain, 10).build()).await();
        assertThat(c.getTicket()).isNotEqualTo(a.getTicket());
        assertThat(session.cancel(c.getTicket()).await().getReleasedPages()).isZero();
        assertThat(session.cancel(b.getTicket()).await().getReleasedPages()).isZero();
        session.abort(writing).await();
    }

    @Test
    void cancelOfAReadyTicketReleasesItsLease() {
        publishTenAttentionPagesAndACheckpointAtFour();
        QueryReply ready = session.demand(demand("req-cancel", 0, 9, chain, 10).build()).await();
        assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
        assertThat(session.cancel(ready.getTicket()).await().getReleasedPages()).isEqualTo(7);
        assertThat(refused(() -> session.release(ready.getLease().getLeaseId())).reason()).isEqualTo(ErrorReason.UNKNOWN_LEASE);
    }

    @Test
    void badDemandsAreRefusedWithTypedReasonsBeforeAnythingIsReserved() throws Exception {
        publishTenAttentionPagesAndACheckpointAtFour();
        Demand good = demand("req-bad", 0, 11, chain, 10).build();

        OrbitKvException outOfOrder = refused(() -> session.submitDemand(good.toBuilder()
                .setGroups(1, GroupDemand.newBuilder().setGroupId(WINDOW).addRanges(span(5, 8)).addRanges(span(0, 2))).build()));
        assertThat(outOfOrder.reason()).isEqualTo(ErrorReason.INVALID_DEMAND);
        assertThat(outOfOrder.getMessage()).contains("RANGES_OUT_OF_ORDER");

        OrbitKvException overlap = refused(() -> session.submitDemand(good.toBuilder()
                .setGroups(1, GroupDemand.newBuilder().setGroupId(WINDOW).addRanges(span(0, 5)).addRanges(span(4, 8))).build()));
        assertThat(overlap.reason()).isEqualTo(ErrorReason.INVALID_DEMAND);
        assertThat(overlap.getMessage()).contains("RANGES_OVERLAP");

        OrbitKvException incomplete = refused(() -> session.submitDemand(good.toBuilder().removeGroups(2).build()));
        assertThat(incomplete.reason()).isEqualTo(ErrorReason.INVALID_DEMAND);
        assertThat(incomplete.getMessage()).contains("MISSING_GROUP");

        OrbitKvException pageSize = refused(() -> session.submitDemand(good.toBuilder().setPageSizeTokens(32).build()));
        assertThat(pageSize.reason()).isEqualTo(ErrorReason.INVALID_DEMAND);
        assertThat(pageSize.getMessage()).contains("PAGE_SIZE_MISMATCH");

        OrbitKvException hashes = refused(() -> session.submitDemand(good.toBuilder()
                .setGroups(0, good.getGroups(0).toBuilder().clearBlockHashes().addAllBlockHashes(chain.subList(0, 9))).build()));
        assertThat(hashes.reason()).isEqualTo(ErrorReason.INVALID_DEMAND);
        assertThat(hashes.getMessage()).contains("HASH_COUNT_MISMATCH");

        OrbitKvException emptyRange = refused(() -> session.submitDemand(good.toBuilder()
                .setGroups(1, GroupDemand.newBuilder().setGroupId(WINDOW).addRanges(span(3, 3))).build()));
        assertThat(emptyRange.reason()).isEqualTo(ErrorReason.INVALID_DEMAND);

        OrbitKvException beyond = refused(() -> session.submitDemand(good.toBuilder()
                .setGroups(1, GroupDemand.newBuilder().setGroupId(WINDOW).addRanges(span(0, 11))).build()));
        assertThat(beyond.getMessage()).contains("RANGE_BEYOND_SELECTED_END");

        assertThat(refused(() -> session.submitDemand(good.toBuilder().setTargetTpRank(1).build())).reason())
                .isEqualTo(ErrorReason.INVALID_DEMAND);
        assertThat(refused(() -> session.submitDemand(good.toBuilder().setOperationId(0).build())).reason())
                .isEqualTo(ErrorReason.MALFORMED_REQUEST);
        assertThat(refused(() -> session.submitDemand(good.toBuilder().setNamespaceId(ByteString.copyFrom(new byte[16])).build()))
                .reason()).isEqualTo(ErrorReason.NAMESPACE_MISMATCH);
        assertThat(refused(() -> session.cancel(987_654)).reason()).isEqualTo(ErrorReason.UNKNOWN_TICKET);
        assertThat(refused(() -> session.poll(987_654)).reason()).isEqualTo(ErrorReason.UNKNOWN_TICKET);
        // The prefix form cannot restore a hybrid model exactly.
        assertThat(refused(() -> session.submit(List.of(GroupChain.newBuilder().setGroupId(RECURRENT)
                .addAllBlockHashes(chain).build()), 0)).reason()).isEqualTo(ErrorReason.INVALID_DEMAND);

        assertThat(running.metric("orbitkv_rejections_total{reason=\"invalid_demand\"}")).isGreaterThanOrEqualTo(9.0);
        // After all that, the valid demand still works.
        QueryReply ok = session.demand(good).await();
        assertThat(ok.getBoundaryTokens()).isEqualTo(4 * P);
        session.release(ok.getLease().getLeaseId()).await();
    }

    @Test
    void unregisteringWithPendingAndReadyTicketsReleasesEverything() throws Exception {
        publishTenAttentionPagesAndACheckpointAtFour();
        publish(session, "doc", chain, RECURRENT, List.of(7), false);
        session.submitDemand(demand("req-p", 0, 1, chain, 10).build()).await();
        session.submitDemand(demand("req-r", 0, 2, chain, 10).setMaxWaitMicros(0).build()).await();
        EngineSession other = client.register(HybridModel.identity(), InstanceRole.DECODE).await();
        UnregisterReply gone = other.unregister().await();
        assertThat(gone.getReleasedLeases()).isZero();
        other.close();
        EngineSession holder = session;
        UnregisterReply released = holder.unregister().await();
        assertThat(released.getReleasedLeases()).isEqualTo(1);
        assertThat(released.getCancelledQueries()).isEqualTo(1);
        assertThat(released.getAbortedPublishes()).isEqualTo(1);
        holder.close();
        session = client.register(HybridModel.identity(), InstanceRole.DECODE).await();
    }
}
