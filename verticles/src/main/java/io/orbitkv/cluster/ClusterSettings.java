package io.orbitkv.cluster;

import java.net.URI;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * The cluster settings of one Manager (the {@code cluster.*} keys; off by default, and then nothing here runs).
 *
 * @param memberId              this Manager's member id: 1..63 of {@code [a-z0-9-]}, the only peer label metrics carry
 * @param etcdEndpoints         etcd client URLs
 * @param prefix                the etcd key prefix of this cluster; members live under {@code prefix/members/}
 * @param leaseTtlSeconds       the member key's lease; a Manager gone this long (or cut off from etcd this long) is gone
 * @param host                  the address the event bus and Hazelcast bind to and advertise
 * @param eventBusPort          the clustered event bus's TLS port; 0 = any free port (Hazelcast tells peers)
 * @param hazelcastPort         Hazelcast's member port (membership and subscriptions)
 * @param staticSeeds           extra Hazelcast seeds {@code host:port}, beside those read from etcd
 * @param tlsCa                 PEM of the cluster CA: the only issuer a peer's certificate may have
 * @param tlsCert               PEM of this Manager's certificate
 * @param tlsKey                PEM (PKCS#8) of this Manager's private key
 * @param inventoryIntervalMs   how often the residency stream is published (an empty batch is a heartbeat)
 * @param inventoryMaxBatch     residency events per batch at most
 * @param maxKeysPerPeer        peer evidence kept per member and medium at most; the oldest is dropped first (counted)
 * @param testDropBatch         test hook: the publisher silently skips its N-th non-empty batch (0 = never)
 */
public record ClusterSettings(String memberId, List<URI> etcdEndpoints, String prefix, int leaseTtlSeconds,
                              String host, int eventBusPort, int hazelcastPort, List<String> staticSeeds,
                              Path tlsCa, Path tlsCert, Path tlsKey, long inventoryIntervalMs,
                              int inventoryMaxBatch, int maxKeysPerPeer, long testDropBatch) {
    private static final Pattern MEMBER_ID = Pattern.compile("[a-z0-9][a-z0-9-]{0,62}");

    public ClusterSettings {
        Objects.requireNonNull(memberId, "memberId");
        if (!validMemberId(memberId)) {
            throw new IllegalArgumentException("member id must be 1..63 of [a-z0-9-] starting with a letter or digit, got '"
                    + memberId + "'");
        }
        etcdEndpoints = List.copyOf(etcdEndpoints);
        staticSeeds = List.copyOf(staticSeeds);
        if (etcdEndpoints.isEmpty()) {
            throw new IllegalArgumentException("at least one etcd endpoint is needed");
        }
    }

    public static boolean validMemberId(String id) {
        return id != null && MEMBER_ID.matcher(id).matches();
    }

    /** The etcd key of a member. */
    public String memberKey(String id) {
        return membersPrefix() + id;
    }

    public String membersPrefix() {
        return prefix + "/members/";
    }

    /** With another member id and ports (tests and the local cluster start several Managers from one template). */
    public ClusterSettings withMember(String id, int newHazelcastPort, Path cert, Path key) {
        return new ClusterSettings(id, etcdEndpoints, prefix, leaseTtlSeconds, host, eventBusPort, newHazelcastPort,
                staticSeeds, tlsCa, cert, key, inventoryIntervalMs, inventoryMaxBatch, maxKeysPerPeer, testDropBatch);
    }
}
