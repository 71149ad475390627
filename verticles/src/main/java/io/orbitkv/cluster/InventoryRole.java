package io.orbitkv.cluster;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.EvidenceSource;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.ReplicaSet;
import io.orbitkv.protocol.peer.InventoryBatch;
import io.orbitkv.protocol.peer.InventoryEntry;
import io.orbitkv.protocol.peer.InventorySnapshot;
import io.orbitkv.protocol.peer.InventorySnapshotRequest;
import io.orbitkv.model.StateKey;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.VerticleBase;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.Message;
import io.vertx.core.eventbus.MessageConsumer;
import io.vertx.core.eventbus.MessageConsumerOptions;
import io.vertx.core.internal.ContextInternal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import io.orbitkv.common.RateLimitedLog;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.ResidentKey;
import io.orbitkv.model.ResidencySnapshot;
import io.orbitkv.model.ResidencyEvent;
import io.orbitkv.model.ResidencyPage;
import io.orbitkv.model.MemberChange;

/**
 * The inventory role: publishes this Manager's residency stream to its peers and keeps the bounded directory of what
 * each peer holds, which it answers as peer evidence ({@link EvidenceSource}: peer DRAM and peer SSD records only;
 * the storage role answers for local media).
 *
 * <p>Design note (publishing): every {@code cluster.inventory.interval-ms} the role reads at most
 * {@code cluster.inventory.max-batch} residency events after the last sequence it published (metadata only, from the
 * storage role) and publishes them as one {@link InventoryBatch} on the clustered event bus (protobuf bytes; mutual
 * TLS between Managers). With nothing new, an empty batch every ten intervals is a heartbeat that still states the last
 * sequence, so a subscriber notices a lost last batch. If the storage ring lost events before they were published, the
 * batch says {@code reset} and subscribers resync. Snapshots are served on this member's own address.
 *
 * <p>Design note (subscribing): a batch is accepted only from a current member at its current incarnation (membership
 * from etcd); others are refused and counted. A gap (or an unknown member, or a reset) asks the owner for a snapshot;
 * batches arriving meanwhile are held (at most {@value #MAX_HELD_BATCHES} per member; beyond that the snapshot is
 * followed by another gap) and replayed after it. Evidence leaves with the member, with its incarnation, and with
 * membership itself when etcd is unreachable for a lease ttl.
 *
 * <p>Design note (concurrency and ownership): everything here is confined to this verticle's context, including the
 * directory; {@link #discover} hops onto it and completes on the caller's context. The role owns no memory but the
 * directory (bounded per member) and the held batches (bounded).
 */
public final class InventoryRole extends VerticleBase implements EvidenceSource {
    private static final Logger LOG = LoggerFactory.getLogger(InventoryRole.class);
    static final String BATCHES = "orbitkv.cluster.inventory";
    static final String SNAPSHOT_PREFIX = "orbitkv.cluster.inventory.snapshot.";
    static final String MEMBER_HEADER = "orbitkv-member";
    static final int MAX_HELD_BATCHES = 256;
    private static final int HEARTBEAT_EVERY = 10;
    private static final long SNAPSHOT_TIMEOUT_MS = 10_000;

    private final ClusterSettings settings;
    private final MembershipRole membership;
    private final StorageProxy storage;
    private final MeterRegistry registry;
    private final InventoryDirectory directory;
    private final Map<String, List<InventoryBatch>> snapshotsPending = new HashMap<>();
    private final Map<String, Meter> evidenceGauges = new HashMap<>();
    /** Refused and failed inventory messages: one WARN line per kind and member per interval. */
    private final RateLimitedLog refusals = new RateLimitedLog(LOG);

    private volatile Context context;
    private long timer = -1;
    private long lastPublished = -1;
    private boolean publishing;
    private int quietTicks;
    private long nonEmptyBatches;
    private MessageConsumer<Buffer> batchConsumer;
    private MessageConsumer<Buffer> snapshotConsumer;

    private Timer lag;
    private Counter resyncs;
    private Counter gaps;
    private Counter sent;
    private Counter received;
    private Counter droppedByTestHook;

    public InventoryRole(ClusterSettings settings, MembershipRole membership, StorageProxy storage, MeterRegistry registry) {
        this.settings = settings;
        this.membership = membership;
        this.storage = storage;
        this.registry = registry;
        this.directory = new InventoryDirectory(settings.maxKeysPerPeer());
    }

    static String snapshotAddress(String memberId) {
        return SNAPSHOT_PREFIX + memberId;
    }

    @Override
    public Future<?> start() {
        context = vertx.getOrCreateContext();
        lag = Timer.builder("orbitkv.cluster.inventory.lag")
                .description("From a residency change on the owner to its delta applied here (owner wall clock)")
                .publishPercentiles(0.5, 0.99).distributionStatisticExpiry(Duration.ofMinutes(2)).register(registry);
        resyncs = Counter.builder("orbitkv.cluster.inventory.resyncs")
                .description("Peer inventories resynchronised from a snapshot").register(registry);
        gaps = Counter.builder("orbitkv.cluster.inventory.gaps")
                .description("Inventory batches that did not follow the last applied sequence").register(registry);
        sent = Counter.builder("orbitkv.cluster.inventory.batches").tag("direction", "sent")
                .description("Inventory batches").register(registry);
        received = Counter.builder("orbitkv.cluster.inventory.batches").tag("direction", "received")
                .description("Inventory batches").register(registry);
        droppedByTestHook = Counter.builder("orbitkv.cluster.inventory.batches").tag("direction", "dropped-by-test-hook")
                .description("Inventory batches").register(registry);
        FunctionCounter.builder("orbitkv.cluster.evidence.fenced", directory, InventoryDirectory::fenced)
                .description("Peer evidence records dropped: member left, restarted (older incarnation), or unknown")
                .register(registry);
        FunctionCounter.builder("orbitkv.cluster.evidence.dropped", directory, InventoryDirectory::droppedOverCap)
                .description("Peer evidence records dropped over cluster.inventory.max-keys-per-peer (oldest first)")
                .register(registry);
        for (String reason : List.of("not-member", "malformed", "fenced", "snapshot-refused")) {
            rejected(reason);
        }
        membership.addListener(new MembershipRole.Listener() {
            @Override
            public void onMembership(MemberChange change) {
                context.runOnContext(v -> onMemberChange(change));
            }

            @Override
            public void onPeersUnknown() {
                context.runOnContext(v -> {
                    directory.clear();
                    snapshotsPending.clear();
                    refreshGauges();
                });
            }

            @Override
            public void onPeersKnown() {
                // Nothing to do: the next batch of each peer finds it unsynced and asks for a snapshot.
            }
        });
        // Bounded: a burst beyond this is dropped by the event bus; the next batch then shows a gap and resyncs.
        batchConsumer = vertx.eventBus().<Buffer>consumer(new MessageConsumerOptions()
                .setAddress(BATCHES).setMaxBufferedMessages(1024), this::onBatch);
        snapshotConsumer = vertx.eventBus().<Buffer>consumer(snapshotAddress(settings.memberId()), this::onSnapshotRequest);
        return Future.all(batchConsumer.completion(), snapshotConsumer.completion())
                .compose(v -> storage.stats())
                .map(stats -> {
                    lastPublished = stats.residencySequence();
                    timer = vertx.setPeriodic(settings.inventoryIntervalMs(), id -> publishTick());
                    return null;
                });
    }

    @Override
    public Future<?> stop() {
        vertx.cancelTimer(timer);
        return Future.all(batchConsumer.unregister(), snapshotConsumer.unregister());
    }

    // ---- publishing ----

    private void publishTick() {
        if (publishing) {
            return;
        }
        publishing = true;
        storage.residencySince(lastPublished, settings.inventoryMaxBatch()).onComplete(ar -> {
            publishing = false;
            if (ar.failed()) {
                LOG.warn("cluster: the residency stream could not be read ({})", ar.cause().toString());
                return;
            }
            ResidencyPage page = ar.result();
            if (page.events().isEmpty() && !page.gap() && ++quietTicks < HEARTBEAT_EVERY) {
                return;
            }
            quietTicks = 0;
            long after = lastPublished;
            long last = page.events().isEmpty() ? page.lastSequence() : page.events().getLast().sequence();
            InventoryBatch.Builder batch = InventoryBatch.newBuilder().setMemberId(settings.memberId())
                    .setIncarnation(membership.incarnation()).setEpoch(membership.epoch())
                    .setAfterSequence(after).setLastSequence(last).setReset(page.gap())
                    .setSentAtMillis(System.currentTimeMillis());
            for (ResidencyEvent event : page.events()) {
                batch.addEntries(entry(event.change(), event.key(), event.generation(), event.lengthBytes(),
                        event.sequence(), event.atMillis()));
            }
            lastPublished = last;
            if (!page.events().isEmpty() && ++nonEmptyBatches == settings.testDropBatch()) {
                // The test hook of the gap → resync test: this batch is lost on the way.
                LOG.info("cluster: test hook fault-injection.inventory.drop-batch: batch ({}, {}] not sent", after, last);
                droppedByTestHook.increment();
                return;
            }
            vertx.eventBus().publish(BATCHES, Buffer.buffer(batch.build().toByteArray()),
                    new DeliveryOptions().addHeader(MEMBER_HEADER, settings.memberId()));
            sent.increment();
        });
    }

    private static InventoryEntry entry(ResidencyEvent.Change change, StateKey key, long generation, long lengthBytes,
                                        long sequence, long atMillis) {
        return InventoryEntry.newBuilder().setChange(switch (change) {
                    case DRAM_ADDED -> InventoryEntry.Change.DRAM_ADDED;
                    case DRAM_REMOVED -> InventoryEntry.Change.DRAM_REMOVED;
                    case SSD_ADDED -> InventoryEntry.Change.SSD_ADDED;
                    case SSD_REMOVED -> InventoryEntry.Change.SSD_REMOVED;
                }).setNamespace(ByteString.copyFrom(key.namespace())).setGroupId(key.groupId())
                .setBlockHash(ByteString.copyFrom(key.blockHash())).setGeneration(generation)
                .setLengthBytes(lengthBytes).setSequence(sequence).setAtMillis(atMillis).build();
    }

    // ---- snapshots: serving ----

    private void onSnapshotRequest(Message<Buffer> message) {
        InventorySnapshotRequest request;
        try {
            request = InventorySnapshotRequest.parseFrom(message.body().getBytes());
        } catch (InvalidProtocolBufferException e) {
            rejected("malformed").increment();
            message.fail(400, "malformed snapshot request");
            return;
        }
        if (!ClusterSettings.validMemberId(request.getMemberId())
                || !membership.isCurrent(new PeerOwner(request.getMemberId(), request.getIncarnation()))) {
            rejected("snapshot-refused").increment();
            refusals.warn("inventory snapshot request refused", memberOrUnknown(request.getMemberId()),
                    "not a current member at that incarnation");
            message.fail(403, "not a current member");
            return;
        }
        storage.residencySnapshot(settings.maxKeysPerPeer()).onComplete(ar -> {
            if (ar.failed()) {
                message.fail(500, "snapshot unavailable");
                return;
            }
            ResidencySnapshot snapshot = ar.result();
            InventorySnapshot.Builder reply = InventorySnapshot.newBuilder().setMemberId(settings.memberId())
                    .setIncarnation(membership.incarnation()).setSequence(snapshot.sequence());
            for (ResidentKey k : snapshot.dram()) {
                reply.addDram(entry(ResidencyEvent.Change.DRAM_ADDED, k.key(), k.generation(), k.lengthBytes(), 0, 0));
            }
            for (ResidentKey k : snapshot.ssd()) {
                reply.addSsd(entry(ResidencyEvent.Change.SSD_ADDED, k.key(), k.generation(), k.lengthBytes(), 0, 0));
            }
            message.reply(Buffer.buffer(reply.build().toByteArray()));
        });
    }

    // ---- subscribing ----

    private void onBatch(Message<Buffer> message) {
        if (settings.memberId().equals(message.headers().get(MEMBER_HEADER))) {
            return; // our own publication, delivered to our own consumer too
        }
        InventoryBatch batch;
        List<InventoryDirectory.Change> changes;
        try {
            batch = InventoryBatch.parseFrom(message.body().getBytes());
            changes = changes(batch.getEntriesList());
        } catch (InvalidProtocolBufferException | IllegalArgumentException e) {
            rejected("malformed").increment();
            return;
        }
        if (batch.getMemberId().equals(settings.memberId())) {
            return;
        }
        if (!ClusterSettings.validMemberId(batch.getMemberId())) {
            rejected("malformed").increment();
            refusals.warn("inventory batch refused", null, "malformed member id");
            return;
        }
        PeerOwner owner = new PeerOwner(batch.getMemberId(), batch.getIncarnation());
        if (!membership.isCurrent(owner)) {
            rejected("not-member").increment();
            refusals.warn("inventory batch refused", owner.memberId(), "not a current member at that incarnation");
            return;
        }
        received.increment();
        List<InventoryBatch> held = snapshotsPending.get(owner.memberId());
        if (held != null) {
            if (held.size() < MAX_HELD_BATCHES) {
                held.add(batch);
            }
            return;
        }
        apply(owner, batch, changes);
    }

    private void apply(PeerOwner owner, InventoryBatch batch, List<InventoryDirectory.Change> changes) {
        InventoryDirectory.Outcome outcome = directory.applyBatch(owner, batch.getAfterSequence(),
                batch.getLastSequence(), batch.getReset(), changes);
        switch (outcome) {
            case APPLIED -> {
                long now = System.currentTimeMillis();
                for (InventoryDirectory.Change change : changes) {
                    if (change.atMillis() > 0) {
                        lag.record(Math.max(0, now - change.atMillis()), TimeUnit.MILLISECONDS);
                    }
                }
                refreshGauges();
            }
            case GAP -> {
                gaps.increment();
                requestSnapshot(owner);
            }
            case NOT_SYNCED -> requestSnapshot(owner);
            case FENCED -> {
                rejected("fenced").increment();
                refusals.warn("inventory batch fenced", owner.memberId(), "an older incarnation than the member's");
            }
            case DUPLICATE -> { }
        }
    }

    private void requestSnapshot(PeerOwner owner) {
        if (snapshotsPending.containsKey(owner.memberId())) {
            return;
        }
        snapshotsPending.put(owner.memberId(), new ArrayList<>());
        byte[] request = InventorySnapshotRequest.newBuilder().setMemberId(settings.memberId())
                .setIncarnation(membership.incarnation()).build().toByteArray();
        vertx.eventBus().<Buffer>request(snapshotAddress(owner.memberId()), Buffer.buffer(request),
                new DeliveryOptions().setSendTimeout(SNAPSHOT_TIMEOUT_MS)).onComplete(ar -> {
            List<InventoryBatch> held = snapshotsPending.remove(owner.memberId());
            if (held == null) {
                return; // membership changed meanwhile (cleared)
            }
            if (ar.failed()) {
                refusals.warn("inventory snapshot failed", owner.memberId(),
                        RateLimitedLog.describe(ar.cause()) + "; the next batch asks again");
                return;
            }
            InventorySnapshot snapshot;
            List<InventoryDirectory.Change> resident = new ArrayList<>();
            try {
                snapshot = InventorySnapshot.parseFrom(ar.result().body().getBytes());
                resident.addAll(changes(snapshot.getDramList()));
                resident.addAll(changes(snapshot.getSsdList()));
            } catch (InvalidProtocolBufferException | IllegalArgumentException e) {
                rejected("malformed").increment();
                return;
            }
            PeerOwner snapOwner = new PeerOwner(owner.memberId(), snapshot.getIncarnation());
            if (!snapshot.getMemberId().equals(owner.memberId()) || !membership.isCurrent(snapOwner)) {
                rejected("not-member").increment();
                refusals.warn("inventory snapshot refused", owner.memberId(), "not from the current member");
                return;
            }
            directory.applySnapshot(snapOwner, snapshot.getSequence(), resident);
            resyncs.increment();
            for (InventoryBatch batch : held) {
                if (batch.getIncarnation() == snapOwner.incarnation()) {
                    apply(snapOwner, batch, changes(batch.getEntriesList()));
                }
            }
            refreshGauges();
        });
    }

    private void onMemberChange(MemberChange change) {
        switch (change) {
            case MemberChange.Left left -> {
                directory.departed(left.member().id());
                snapshotsPending.remove(left.member().id());
            }
            case MemberChange.Restarted restarted -> {
                directory.fence(restarted.member().id(), restarted.member().incarnation());
                snapshotsPending.remove(restarted.member().id());
            }
            case MemberChange.Joined joined -> { }
            case MemberChange.Updated updated -> { }
        }
        refreshGauges();
    }

    private static List<InventoryDirectory.Change> changes(List<InventoryEntry> entries) {
        List<InventoryDirectory.Change> changes = new ArrayList<>(entries.size());
        for (InventoryEntry e : entries) {
            ResidencyEvent.Change change = switch (e.getChange()) {
                case DRAM_ADDED -> ResidencyEvent.Change.DRAM_ADDED;
                case DRAM_REMOVED -> ResidencyEvent.Change.DRAM_REMOVED;
                case SSD_ADDED -> ResidencyEvent.Change.SSD_ADDED;
                case SSD_REMOVED -> ResidencyEvent.Change.SSD_REMOVED;
                default -> throw new IllegalArgumentException("unknown inventory change " + e.getChangeValue());
            };
            StateKey key = StateKey.of(e.getNamespace().toByteArray(), e.getGroupId(), e.getBlockHash().toByteArray());
            changes.add(new InventoryDirectory.Change(change, key, e.getGeneration(), e.getLengthBytes(),
                    e.getSequence(), e.getAtMillis()));
        }
        return changes;
    }

    /** A member id fit for a log line: a valid one as is, anything else as unknown. */
    private static String memberOrUnknown(String memberId) {
        return ClusterSettings.validMemberId(memberId) ? memberId : null;
    }

    // ---- metrics ----

    private Counter rejected(String reason) {
        return Counter.builder("orbitkv.cluster.messages.rejected").tag("reason", reason)
                .description("Cluster messages refused (not from a current member, malformed, fenced incarnation, "
                        + "snapshot to a non-member)").register(registry);
    }

    /** One gauge per member with evidence (member ids are bounded by the cluster); removed when it has none. */
    private void refreshGauges() {
        for (String member : directory.members()) {
            evidenceGauges.computeIfAbsent(member, m -> Gauge.builder("orbitkv.cluster.peer.evidence.keys", directory,
                            d -> d.keys(m)).tag("member", m)
                    .description("Keys known from a peer's inventory (bounded by cluster.inventory.max-keys-per-peer); "
                            + "present from the peer's first snapshot until it leaves")
                    .register(registry));
        }
        evidenceGauges.entrySet().removeIf(e -> {
            if (directory.keys(e.getKey()) == 0 && !directory.members().contains(e.getKey())) {
                registry.remove(e.getValue());
                return true;
            }
            return false;
        });
    }

    // ---- the planner's port ----

    /** Peer DRAM and SSD records of the demand's keys (local media are the storage role's). */
    @Override
    public Future<DemandEvidence> discover(DemandView demand) {
        if (context == null) {
            return Future.succeededFuture(DemandEvidence.none()); // not deployed yet: no peer is known
        }
        Context caller = Vertx.currentContext();
        Promise<DemandEvidence> answer = caller == null ? Promise.promise()
                : ((ContextInternal) caller).promise();
        context.runOnContext(v -> {
            Map<StateKey, ReplicaSet> found = new HashMap<>();
            for (DemandView.GroupKeys group : demand.groups()) {
                for (PositionedKey key : group.keys()) {
                    ReplicaSet set = directory.replicas(key.key(), ReplicaSet.empty());
                    if (!set.isEmpty()) {
                        found.put(key.key(), set);
                    }
                }
            }
            answer.complete(DemandEvidence.of(found));
        });
        return answer.future();
    }

    /** Peer records of one key (tests, tools): completes on this role's context. */
    public Future<ReplicaSet> replicas(StateKey key) {
        Promise<ReplicaSet> answer = Promise.promise();
        context.runOnContext(v -> answer.complete(directory.replicas(key, ReplicaSet.empty())));
        return answer.future();
    }

    /** Keys known from {@code memberId} (tests, tools). */
    public Future<Integer> evidenceKeys(String memberId) {
        Promise<Integer> answer = Promise.promise();
        context.runOnContext(v -> answer.complete(directory.keys(memberId)));
        return answer.future();
    }
}
