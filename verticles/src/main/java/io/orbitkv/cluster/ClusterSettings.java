package io.orbitkv.cluster;

import io.orbitkv.model.MemberRecord;
import java.util.Map;

import io.orbitkv.common.ConfigException;
import io.orbitkv.common.ConfigValues;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

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

    /** The keys and defaults this section (and its fault-injection knob) adds to the Manager's configuration. */
    public static final Map<String, String> DEFAULTS = Map.ofEntries(
            // Off by default: a single Manager needs none of it. See docs/cluster.md.
            Map.entry("cluster.enabled", "false"),
            Map.entry("cluster.member-id", ""),
            Map.entry("cluster.etcd-endpoints", "http://127.0.0.1:2379"),
            Map.entry("cluster.prefix", "/orbitkv"),
            Map.entry("cluster.lease-ttl-s", "5"),
            Map.entry("cluster.host", "127.0.0.1"),
            Map.entry("cluster.eventbus-port", "0"),
            Map.entry("cluster.hazelcast-port", "5701"),
            Map.entry("cluster.hazelcast-seeds", ""),
            Map.entry("cluster.tls.ca", ""),
            Map.entry("cluster.tls.cert", ""),
            Map.entry("cluster.tls.key", ""),
            Map.entry("cluster.inventory.interval-ms", "50"),
            Map.entry("cluster.inventory.max-batch", "1024"),
            Map.entry("cluster.inventory.max-keys-per-peer", "65536"),
            // A test hook, never for operators (0 = off): the publisher skips its N-th non-empty batch.
            Map.entry("fault-injection.inventory.drop-batch", "0"));

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
        return MemberRecord.validMemberId(id);
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

    /** The {@code cluster.*} section (and the inventory fault-injection knob); empty unless {@code cluster.enabled}. */
    public static Optional<ClusterSettings> fromConfig(ConfigValues v) {
        if (!v.bool("cluster.enabled")) {
            return Optional.empty();
        }
        String id = v.string("cluster.member-id").strip();
        if (!validMemberId(id)) {
            throw new ConfigException("cluster.member-id", "must be 1..63 of [a-z0-9-] starting with a letter or digit (it is "
                    + "the only peer label metrics carry), got '" + id + "'");
        }
        List<URI> endpoints = new ArrayList<>();
        for (String e : v.string("cluster.etcd-endpoints").split(",")) {
            if (e.isBlank()) {
                continue;
            }
            try {
                URI uri = new URI(e.strip());
                if (!"http".equals(uri.getScheme()) && !"https".equals(uri.getScheme()) || uri.getHost() == null || uri.getPort() < 0) {
                    throw new URISyntaxException(e, "not http(s)://host:port");
                }
                endpoints.add(uri);
            } catch (URISyntaxException ex) {
                throw new ConfigException("cluster.etcd-endpoints", "must be comma-separated http://host:port URLs, got '"
                        + v.string("cluster.etcd-endpoints") + "'");
            }
        }
        if (endpoints.isEmpty()) {
            throw new ConfigException("cluster.etcd-endpoints", "at least one etcd URL is needed");
        }
        String prefix = v.string("cluster.prefix").strip();
        if (!prefix.matches("/[A-Za-z0-9._/-]{1,100}") || prefix.endsWith("/")) {
            throw new ConfigException("cluster.prefix", "must be an etcd key prefix such as /orbitkv, got '" + prefix + "'");
        }
        List<String> seeds = new ArrayList<>();
        for (String seed : v.string("cluster.hazelcast-seeds").split(",")) {
            if (!seed.isBlank()) {
                if (!seed.strip().matches("[A-Za-z0-9.:\\[\\]-]+:\\d{1,5}")) {
                    throw new ConfigException("cluster.hazelcast-seeds", "must be comma-separated host:port, got '" + seed + "'");
                }
                seeds.add(seed.strip());
            }
        }
        Path ca = tlsFile(v, "cluster.tls.ca");
        Path cert = tlsFile(v, "cluster.tls.cert");
        Path key = tlsFile(v, "cluster.tls.key");
        return Optional.of(new ClusterSettings(id, endpoints, prefix,
                (int) v.integer("cluster.lease-ttl-s", 2, 300), v.host("cluster.host"), v.port("cluster.eventbus-port"),
                (int) v.integer("cluster.hazelcast-port", 1, 65535), seeds, ca, cert, key,
                v.integer("cluster.inventory.interval-ms", 5, 60_000),
                (int) v.integer("cluster.inventory.max-batch", 1, 1 << 16),
                (int) v.integer("cluster.inventory.max-keys-per-peer", 16, 1 << 24),
                v.integer("fault-injection.inventory.drop-batch", 0, Long.MAX_VALUE)));
    }

    /** A TLS file the cluster needs: named, and readable now (else the Manager would fail later, at first contact). */
    private static Path tlsFile(ConfigValues v, String key) {
        String p = v.string(key).strip();
        if (p.isEmpty()) {
            throw new ConfigException(key, "is required with cluster.enabled (make them with ./scripts/orbitkv cluster certs)");
        }
        Path path = Path.of(p);
        if (!Files.isReadable(path)) {
            throw new ConfigException(key, path + " is not a readable file");
        }
        return path;
    }
}
