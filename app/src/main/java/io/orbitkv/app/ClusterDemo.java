package io.orbitkv.app;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.clusterkit.LocalCluster;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.GroupChain;
import io.orbitkv.protocol.engine.GroupKind;
import io.orbitkv.protocol.engine.GroupSpec;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.LeasedPage;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.PublishSlot;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.protocol.engine.Representation;
import io.orbitkv.protocol.engine.SlotStatus;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * The scripted scenario of {@code orbitkv cluster demo}: a local cluster (etcd and N Manager processes), pages
 * published on manager-1 and observed as peer evidence on every other Manager, pages published on manager-2, manager-2
 * killed (SIGKILL) and its departure observed within its lease (its evidence fenced everywhere), manager-2 restarted (a
 * new incarnation) and only its new inventory observed; finally an engine on every other Manager demands manager-1's
 * pages, which its Manager fetches from manager-1 through the peer route (every byte checked against what manager-1
 * published: {@code peer_hits}, {@code peer_bytes_verified}, {@code mismatches}). Everything it started is stopped
 * before the report is returned.
 *
 * <p>Figures come from the Managers' own meters: inventory lag is each subscriber's
 * {@code orbitkv_cluster_inventory_lag_seconds} quantiles (owner's residency change → delta applied; the worst node is
 * reported), resyncs and fenced evidence are summed over the Managers alive at the end.
 */
final class ClusterDemo {
    private static final long PAGE_BYTES = 64 << 10;
    private static final Duration WAIT = Duration.ofSeconds(30);

    private ClusterDemo() {}

    record Report(JsonObject json, boolean passed) {
        JsonObject toJson() {
            return json;
        }
    }

    static Report run(Path dir, int managers, int pages, List<String> managerCommand, Consumer<String> log) throws Exception {
        List<String> failures = new ArrayList<>();
        JsonObject json = new JsonObject();
        List<Long> pids = new ArrayList<>();
        long etcdPid;
        LocalCluster cluster = LocalCluster.start(new LocalCluster.Options(managers, dir, managerCommand, Map.of(
                "cluster.lease-ttl-s", "3", "cluster.prefix", "/orbitkv-demo", "pool.size", "64MiB",
                "session.ttl-ms", "60000", "peer.port", LocalCluster.AUTO_PORT)));
        try {
            etcdPid = cluster.etcd().pid();
            cluster.nodes().forEach(n -> pids.add(n.pid()));
            cluster.nodes().forEach(n -> log.accept("started " + n));
            LocalCluster.Node m1 = cluster.node(1);
            LocalCluster.Node m2 = cluster.node(2);
            check(failures, "every Manager sees " + managers + " members",
                    until(() -> cluster.nodes().stream().allMatch(n -> members(cluster, n) == managers)));
            log.accept("members seen by each: " + cluster.nodes().stream().map(n -> n.memberId() + "=" + members(cluster, n)).toList());
            // Each follows every other's stream from its first snapshot on (its evidence gauge appears then).
            check(failures, "every Manager follows every other's inventory", until(() -> cluster.nodes().stream()
                    .allMatch(n -> cluster.nodes().stream().filter(of -> of != n).allMatch(of -> synced(cluster, n, of)))));

            log.accept("publishing " + pages + " pages on manager-1");
            long published;
            List<ByteString> m1Hashes = new ArrayList<>();
            try (Engine engine = Engine.connect(m1)) {
                for (int done = 0; done < pages; done += 8) {
                    m1Hashes.addAll(engine.publish("demo-" + done, Math.min(8, pages - done)));
                }
                published = System.nanoTime();
            }
            boolean seen = until(() -> cluster.nodes().stream().filter(n -> n != m1)
                    .allMatch(n -> evidence(cluster, n, m1) == pages));
            json.put("evidence_visible_on_all_peers_ms", (System.nanoTime() - published) / 1_000_000);
            check(failures, "every peer holds manager-1's " + pages + " keys as evidence", seen);

            try (Engine engine = Engine.connect(m2)) {
                engine.publish("before-kill", 8);
            }
            check(failures, "every peer holds manager-2's 8 keys", until(() -> cluster.nodes().stream()
                    .filter(n -> n != m2).allMatch(n -> evidence(cluster, n, m2) == 8)));
            log.accept("killing manager-2 (SIGKILL, pid " + m2.pid() + ")");
            long oldIncarnation = m2.incarnation();
            long killed = System.nanoTime();
            cluster.kill(m2);
            boolean left = until(() -> cluster.nodes().stream().filter(n -> n != m2)
                    .allMatch(n -> members(cluster, n) == managers - 1));
            json.put("departure_detected_ms", (System.nanoTime() - killed) / 1_000_000);
            check(failures, "the others see manager-2 leave", left);
            check(failures, "manager-2's evidence is gone everywhere", until(() -> cluster.nodes().stream()
                    .filter(n -> n != m2).allMatch(n -> evidence(cluster, n, m2) == 0)));

            log.accept("restarting manager-2");
            cluster.launch(m2, Map.of());
            pids.add(m2.pid());
            check(failures, "manager-2 has a new incarnation", m2.incarnation() != oldIncarnation);
            check(failures, "every Manager sees " + managers + " members again",
                    until(() -> cluster.nodes().stream().allMatch(n -> members(cluster, n) == managers)));
            try (Engine engine = Engine.connect(m2)) {
                engine.publish("after-restart", 8);
            }
            // The new incarnation's keys only: its 8 new pages, plus what it recovered from its SSD tier at start (the
            // old incarnation's pages that reached SSD are the new one's now, re-announced under the new incarnation).
            check(failures, "every peer holds the new manager-2's keys (its 8 new pages and what it recovered from SSD)",
                    until(() -> {
                        List<Double> seenOf2 = cluster.nodes().stream().filter(n -> n != m2)
                                .map(n -> evidence(cluster, n, m2)).distinct().toList();
                        return seenOf2.size() == 1 && seenOf2.getFirst() >= 8 && seenOf2.getFirst() <= 16;
                    }));
            check(failures, "manager-2 learned manager-1's keys again", until(() -> evidence(cluster, m2, m1) == pages));

            // Warming (peer.warm-connections, on by default) readies each Manager's paths to the others in the
            // background when it sees them; the first fetch below is timed once every Manager counts the others warm,
            // as on Managers that have been up a while (the wait is reported, not timed into the fetch).
            long warming = System.nanoTime();
            boolean warmed = until(() -> cluster.nodes().stream().allMatch(n ->
                    cluster.metric(n, "orbitkv_peer_warm_members", "").orElse(0) >= managers - 1));
            json.put("peer_warm_members_wait_ms", (System.nanoTime() - warming) / 1_000_000);
            json.put("peer_warmed_before_first_fetch", warmed);

            // Fetch across Managers: an engine on every other Manager demands manager-1's pages (known there only
            // from the inventory); each READY page's bytes are compared with what manager-1 published.
            CrossFetch fetched = new CrossFetch();
            for (LocalCluster.Node n : cluster.nodes()) {
                if (n != m1) {
                    fetched.add(fetchAcross(cluster, n, m1Hashes, log));
                }
            }
            check(failures, "every other Manager fetched all of manager-1's pages from it, every byte verified",
                    fetched.hits == (long) pages * (managers - 1) && fetched.verifiedBytes == fetched.hits * PAGE_BYTES);
            check(failures, "no fetched page differed from what manager-1 published", fetched.mismatches == 0);
            json.put("peer_hits", fetched.hits);
            json.put("peer_bytes_verified", fetched.verifiedBytes);
            json.put("mismatches", fetched.mismatches);
            json.put("peer_fetch_ms_max", fetched.maxMillis);

            // Again, with pages manager-1 publishes now: the other Managers' paths to it are in use already, so this
            // is what a fetch costs once warm. The first round above was each Manager's first fetch from manager-1
            // (manager-2 restarted just before it); with warming its paths were opened when manager-1 was seen.
            List<ByteString> warmHashes = new ArrayList<>();
            try (Engine engine = Engine.connect(m1)) {
                for (int done = 0; done < pages; done += 8) {
                    warmHashes.addAll(engine.publish("demo-warm-" + done, Math.min(8, pages - done)));
                }
            }
            check(failures, "every peer holds manager-1's second " + pages + " keys as evidence", until(() -> cluster
                    .nodes().stream().filter(n -> n != m1).allMatch(n -> evidence(cluster, n, m1) >= 2L * pages)));
            CrossFetch warm = new CrossFetch();
            for (LocalCluster.Node n : cluster.nodes()) {
                if (n != m1) {
                    warm.add(fetchAcross(cluster, n, warmHashes, log));
                }
            }
            check(failures, "every other Manager fetched manager-1's second pages, every byte verified",
                    warm.hits == (long) pages * (managers - 1) && warm.verifiedBytes == warm.hits * PAGE_BYTES);
            check(failures, "no page of the second fetch differed from what manager-1 published", warm.mismatches == 0);
            json.put("peer_first_fetch_ms_max", fetched.maxMillis);
            json.put("peer_warm_fetch_ms_max", warm.maxMillis);
            json.put("peer_first_to_warm_fetch", warm.maxMillis == 0 ? null
                    : Math.round(100.0 * fetched.maxMillis / warm.maxMillis) / 100.0);
            json.put("peer_warm_hits", warm.hits);

            double p50 = 0;
            double p99 = 0;
            double resyncs = 0;
            double fenced = 0;
            double rejected = 0;
            int minMembers = Integer.MAX_VALUE;
            JsonObject perNode = new JsonObject();
            for (LocalCluster.Node n : cluster.nodes()) {
                String text = cluster.metrics(n);
                double np50 = LocalCluster.sample(text, "orbitkv_cluster_inventory_lag_seconds", "quantile=\"0.5\"").orElse(0) * 1000;
                double np99 = LocalCluster.sample(text, "orbitkv_cluster_inventory_lag_seconds", "quantile=\"0.99\"").orElse(0) * 1000;
                p50 = Math.max(p50, np50);
                p99 = Math.max(p99, np99);
                resyncs += LocalCluster.sample(text, "orbitkv_cluster_inventory_resyncs_total", "").orElse(0);
                fenced += LocalCluster.sample(text, "orbitkv_cluster_evidence_fenced_total", "").orElse(0);
                for (String reason : List.of("not-member", "malformed", "fenced", "snapshot-refused")) {
                    rejected += LocalCluster.sample(text, "orbitkv_cluster_messages_rejected_total",
                            "reason=\"" + reason + "\"").orElse(0);
                }
                int m = (int) LocalCluster.sample(text, "orbitkv_cluster_members", "").orElse(0);
                minMembers = Math.min(minMembers, m);
                JsonObject evidence = new JsonObject();
                for (LocalCluster.Node of : cluster.nodes()) {
                    if (of != n) {
                        evidence.put(of.memberId(), (long) evidence(cluster, n, of));
                    }
                }
                perNode.put(n.memberId(), new JsonObject().put("members", m).put("inventory_lag_ms_p50", round(np50))
                        .put("inventory_lag_ms_p99", round(np99)).put("evidence_keys", evidence));
            }
            json.put("members", minMembers);
            json.put("inventory_lag_ms_p50", round(p50));
            json.put("inventory_lag_ms_p99", round(p99));
            json.put("resyncs", (long) resyncs);
            json.put("fenced_evidence", (long) fenced);
            json.put("rejected_messages", (long) rejected);
            json.put("published_pages", 2 * pages + 16);
            json.put("nodes", perNode);
        } finally {
            cluster.close();
        }
        long left = pids.stream().filter(pid -> ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)).count()
                + (ProcessHandle.of(etcdPid).map(ProcessHandle::isAlive).orElse(false) ? 1 : 0);
        check(failures, "no process left running", left == 0);
        json.put("processes_left", left);
        json.put("config", new JsonObject().put("managers", managers).put("lease_ttl_s", 3).put("page_bytes", PAGE_BYTES)
                .put("inventory_interval_ms", 50));
        json.put("lag_definition", "owner's residency change (its wall clock) to the delta applied on a subscriber; "
                + "worst node's quantile (Micrometer, 2-minute window); same host, so one clock");
        json.put("passed", failures.isEmpty());
        json.put("failures", new JsonArray(failures));
        return new Report(json, failures.isEmpty());
    }

    private static double round(double ms) {
        return Math.round(ms * 100) / 100.0;
    }

    private static void check(List<String> failures, String what, boolean ok) {
        if (!ok) {
            failures.add(what);
        }
    }

    /** Polls a condition every 50 ms for up to 30 s. */
    private static boolean until(BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            if (condition.getAsBoolean()) {
                return true;
            }
            Thread.sleep(50);
        }
        return condition.getAsBoolean();
    }

    private static boolean synced(LocalCluster cluster, LocalCluster.Node on, LocalCluster.Node of) {
        return cluster.metrics(on).contains("orbitkv_cluster_peer_evidence_keys{member=\"" + of.memberId() + "\"");
    }

    private static int members(LocalCluster cluster, LocalCluster.Node node) {
        return (int) cluster.metric(node, "orbitkv_cluster_members", "").orElse(-1);
    }

    private static double evidence(LocalCluster cluster, LocalCluster.Node on, LocalCluster.Node of) {
        return cluster.metric(on, "orbitkv_cluster_peer_evidence_keys", "member=\"" + of.memberId() + "\"").orElse(0);
    }

    /** A page's contents: derived from its hash, so any Manager can check a copy of it. */
    static void fill(MemorySegment target, ByteString hash) {
        byte[] pattern = hash.toByteArray();
        for (long at = 0; at < target.byteSize(); at += pattern.length) {
            MemorySegment.copy(MemorySegment.ofArray(pattern), 0, target, at,
                    Math.min(pattern.length, target.byteSize() - at));
        }
    }

    /** What the cross-Manager fetches found. */
    private static final class CrossFetch {
        long hits;
        long verifiedBytes;
        long mismatches;
        long maxMillis;

        void add(CrossFetch other) {
            hits += other.hits;
            verifiedBytes += other.verifiedBytes;
            mismatches += other.mismatches;
            maxMillis = Math.max(maxMillis, other.maxMillis);
        }
    }

    /**
     * An engine on {@code on} demands {@code hashes} (published on another Manager only) and polls until the answer
     * settles; READY pages are compared byte for byte with {@link #fill}. Hits are the pages {@code on}'s peer role
     * fetched and sealed for it; mismatches add the checksum mismatches its peer role counted (never served).
     */
    private static CrossFetch fetchAcross(LocalCluster cluster, LocalCluster.Node on, List<ByteString> hashes,
                                          Consumer<String> log) throws Exception {
        CrossFetch found = new CrossFetch();
        double fetchedBefore = cluster.metric(on, "orbitkv_peer_fetched_pages_total", "").orElse(0);
        double mismatchedBefore = cluster.metric(on, "orbitkv_peer_checksum_mismatches_total", "").orElse(0);
        try (Engine engine = Engine.connect(on)) {
            long started = System.nanoTime(); // from the demand, not the engine's registration
            QueryReply reply = engine.session.submit(List.of(GroupChain.newBuilder().setGroupId(0)
                    .addAllBlockHashes(hashes).build()), 0).await(10, TimeUnit.SECONDS);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (reply.getStatus() == QueryStatus.PENDING && System.nanoTime() < deadline) {
                Thread.sleep(Math.max(1, reply.getRetryAfterMicros() / 1000));
                reply = engine.session.poll(reply.getTicket()).await(10, TimeUnit.SECONDS);
            }
            found.maxMillis = (System.nanoTime() - started) / 1_000_000;
            log.accept(on.memberId() + " demanded " + hashes.size() + " pages of another Manager: " + reply.getStatus()
                    + " after " + found.maxMillis + " ms");
            if (reply.getStatus() == QueryStatus.READY) {
                MemorySegment expected = MemorySegment.ofArray(new byte[(int) PAGE_BYTES]);
                for (LeasedPage page : reply.getLease().getPagesList()) {
                    fill(expected, hashes.get(page.getPosition()));
                    if (engine.session.slot(page.getSlot()).mismatch(expected) == -1) {
                        found.verifiedBytes += PAGE_BYTES;
                    } else {
                        found.mismatches++;
                    }
                }
                engine.session.release(reply.getLease().getLeaseId()).await(10, TimeUnit.SECONDS);
            } else if (reply.getStatus() == QueryStatus.PENDING) {
                engine.session.cancel(reply.getTicket()).await(10, TimeUnit.SECONDS);
            }
        }
        found.hits = (long) (cluster.metric(on, "orbitkv_peer_fetched_pages_total", "").orElse(0) - fetchedBefore);
        found.mismatches += (long) (cluster.metric(on, "orbitkv_peer_checksum_mismatches_total", "").orElse(0)
                - mismatchedBefore);
        return found;
    }

    /** An engine session on a node over TCP, publishing synthetic pages of group 0. */
    private record Engine(OrbitKvClient client, EngineSession session) implements AutoCloseable {
        static Engine connect(LocalCluster.Node node) throws Exception {
            OrbitKvClient client = OrbitKvClient.connectTcp("127.0.0.1", node.grpcPort(),
                    OrbitKvClient.readToken(node.tokenFile()));
            InstanceIdentity identity = InstanceIdentity.newBuilder().setModelFingerprint("cluster-demo")
                    .setRepresentation(Representation.RAW).setLayout("demo:NHD").setGeometry("layers=2")
                    .setPageSizeTokens(16).setTpRank(0).setTpSize(1).setPpRank(0).setPpSize(1)
                    .addGroups(GroupSpec.newBuilder().setGroupId(0).setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(PAGE_BYTES))
                    .build();
            return new Engine(client, client.register(identity, InstanceRole.PREFILL_AND_DECODE).await(10, TimeUnit.SECONDS));
        }

        /** Publishes {@code n} pages (hashes of {@code seed:i}, contents {@link #fill}); answers their hashes. */
        List<ByteString> publish(String seed, int n) throws Exception {
            List<PageKey> keys = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                byte[] hash = MessageDigest.getInstance("SHA-256").digest((seed + ":" + i).getBytes());
                keys.add(PageKey.newBuilder().setGroupId(0).setBlockHash(ByteString.copyFrom(hash)).build());
            }
            AllocatePublishReply allocated = session.allocate(keys).await(10, TimeUnit.SECONDS);
            for (int i = 0; i < allocated.getSlotsCount(); i++) {
                PublishSlot slot = allocated.getSlots(i);
                if (slot.getStatus() == SlotStatus.ALLOCATED) {
                    fill(session.slot(slot.getSlot()), keys.get(i).getBlockHash());
                }
            }
            session.seal(allocated.getPublishId(), List.of()).await(10, TimeUnit.SECONDS);
            return keys.stream().map(PageKey::getBlockHash).toList();
        }

        @Override
        public void close() throws Exception {
            session.close();
            client.close();
        }
    }
}
