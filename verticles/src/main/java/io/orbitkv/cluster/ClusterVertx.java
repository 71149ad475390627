package io.orbitkv.cluster;

import com.hazelcast.config.Config;
import com.hazelcast.config.JoinConfig;
import com.hazelcast.config.NetworkConfig;
import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.KeyValue;
import io.etcd.jetcd.kv.TxnResponse;
import io.etcd.jetcd.op.Cmp;
import io.etcd.jetcd.op.CmpTarget;
import io.etcd.jetcd.op.Op;
import io.etcd.jetcd.options.PutOption;
import io.etcd.jetcd.options.GetOption;
import io.vertx.core.Vertx;
import io.vertx.core.VertxBuilder;
import io.vertx.core.VertxOptions;
import io.vertx.core.eventbus.EventBusOptions;
import io.vertx.core.http.ClientAuth;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import io.vertx.spi.cluster.hazelcast.HazelcastClusterManager;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import io.orbitkv.model.MemberRecord;

/**
 * The clustered Vertx of a Manager with {@code cluster.enabled}: the Hazelcast cluster manager, joined over TCP/IP
 * only (multicast, auto-detection and phone-home off), seeded from the members etcd knows, and an event bus whose
 * connections between Managers are mutual TLS with the cluster's certificates (client authentication required).
 *
 * <p>Design note (what TLS protects): every event-bus message between Managers travels over a TLS connection whose
 * both ends presented a certificate issued by the cluster CA; a node without one cannot complete the handshake, so it
 * neither receives nor sends a message. Hazelcast's own member protocol (who is in the cluster, which node consumes
 * which address) is not encrypted by the open-source Hazelcast: it binds to {@code cluster.host} only, carries no
 * payload nor inventory, and a rogue node that joins it still gets no message (its event-bus handshake fails).
 *
 * <p>Design note (seeding): Hazelcast's TCP/IP join needs member addresses before the Vertx exists, so they are read
 * from etcd once with a short-lived client (bounded by a deadline). Newcomers join the members they are seeded with.
 * With no member yet, the Manager that wins {@code prefix/founder} (an etcd transaction) forms the cluster and the
 * others, started at the same instant, seed from it (see {@link #seedsFromEtcd}). If etcd is down at start, only
 * {@code cluster.hazelcast-seeds} are used.
 */
public final class ClusterVertx {
    private static final Logger LOG = LoggerFactory.getLogger(ClusterVertx.class);

    /** How long the founder key outlives the seeding client: the founder registers as a member well within it. */
    static final long FOUNDER_TTL_SECONDS = 30;

    /** The whole seeding (members read, founder transaction) is bounded by this at start. */
    static final Duration SEEDING_DEADLINE = Duration.ofSeconds(6);

    private ClusterVertx() {}

    /**
     * The Hazelcast addresses to join ({@code host:port}), bounded by {@code deadline}: the members etcd lists now;
     * with none, the founder's. Managers started at the same instant all see no member yet, so each would form an
     * event-bus cluster of its own and never learn of the others: instead the first to create {@code prefix/founder}
     * (an etcd transaction, under a short lease) forms the cluster, and the others seed from its address. A founder
     * that dies before it registers leaves a dead seed; Hazelcast then forms alone, as without the key.
     */
    public static List<String> seedsFromEtcd(ClusterSettings settings, Duration deadline) {
        List<String> seeds = new ArrayList<>();
        String self = settings.host() + ":" + settings.hazelcastPort();
        try (Client client = Client.builder().endpoints(settings.etcdEndpoints().toArray(URI[]::new))
                .connectTimeout(deadline).retryMaxAttempts(1).retryMaxDuration(deadline).build()) {
            long until = System.nanoTime() + deadline.toNanos();
            for (KeyValue kv : client.getKVClient().get(bytes(settings.membersPrefix()),
                    GetOption.builder().isPrefix(true).build()).get(left(until), TimeUnit.NANOSECONDS).getKvs()) {
                try {
                    MemberRecord member = MemberRecord.parse(kv.getValue().getBytes());
                    String hz = member.endpoints().get("hazelcast");
                    if (hz != null && !member.id().equals(settings.memberId())) {
                        seeds.add(hz);
                    }
                } catch (IllegalArgumentException malformed) {
                    LOG.warn("cluster: skipped a malformed member key while seeding ({})", malformed.getMessage());
                }
            }
            if (seeds.isEmpty()) {
                String founder = claimFounder(client, settings, self, until);
                if (!founder.equals(self)) {
                    seeds.add(founder);
                }
            }
        } catch (Exception e) {
            LOG.warn("cluster: etcd could not be read to seed the event-bus cluster ({}); using cluster.hazelcast-seeds only",
                    e.toString());
        }
        return seeds;
    }

    /**
     * Creates {@code prefix/founder} = {@code self} unless it exists (one transaction), and answers the founder's
     * address. The key lives for {@link #FOUNDER_TTL_SECONDS}: long enough for the founder to register as a member,
     * after which newcomers seed from the members.
     */
    private static String claimFounder(Client client, ClusterSettings settings, String self, long until)
            throws Exception {
        ByteSequence key = bytes(settings.prefix() + "/founder");
        long lease = client.getLeaseClient().grant(FOUNDER_TTL_SECONDS).get(left(until), TimeUnit.NANOSECONDS).getID();
        TxnResponse txn = client.getKVClient().txn()
                .If(new Cmp(key, Cmp.Op.EQUAL, CmpTarget.createRevision(0)))
                .Then(Op.put(key, bytes(self), PutOption.builder().withLeaseId(lease).build()))
                .Else(Op.get(key, GetOption.DEFAULT))
                .commit().get(left(until), TimeUnit.NANOSECONDS);
        if (txn.isSucceeded()) {
            LOG.info("cluster member {}: no member yet; founding the event-bus cluster", settings.memberId());
            return self;
        }
        client.getLeaseClient().revoke(lease);
        List<KeyValue> existing = txn.getGetResponses().isEmpty() ? List.of() : txn.getGetResponses().getFirst().getKvs();
        return existing.isEmpty() ? self : existing.getFirst().getValue().toString(StandardCharsets.UTF_8);
    }

    private static long left(long untilNanos) {
        return Math.max(1, untilNanos - System.nanoTime());
    }

    private static ByteSequence bytes(String text) {
        return ByteSequence.from(text, StandardCharsets.UTF_8);
    }

    /** The Hazelcast configuration: TCP/IP join to {@code seeds}, nothing discovered or reported otherwise. */
    public static Config hazelcastConfig(ClusterSettings settings, List<String> seeds) {
        Config config = new Config();
        config.setClusterName("orbitkv" + settings.prefix().replace('/', '-'));
        config.setInstanceName("orbitkv-" + settings.memberId() + "-" + Long.toHexString(System.nanoTime()));
        config.setProperty("hazelcast.phone.home.enabled", "false");
        config.setProperty("hazelcast.logging.type", "slf4j");
        config.setProperty("hazelcast.shutdownhook.enabled", "false");
        config.setProperty("hazelcast.socket.bind.any", "false");
        config.setProperty("hazelcast.wait.seconds.before.join", "1");
        config.setProperty("hazelcast.max.wait.seconds.before.join", "3");
        config.setProperty("hazelcast.merge.first.run.delay.seconds", "5");
        config.setProperty("hazelcast.merge.next.run.delay.seconds", "5");
        config.setProperty("hazelcast.heartbeat.interval.seconds", "1");
        config.setProperty("hazelcast.max.no.heartbeat.seconds", String.valueOf(Math.max(5, settings.leaseTtlSeconds())));
        config.setProperty("hazelcast.graceful.shutdown.max.wait", "10");
        NetworkConfig network = config.getNetworkConfig();
        network.setPort(settings.hazelcastPort()).setPortAutoIncrement(false);
        network.setPublicAddress(settings.host() + ":" + settings.hazelcastPort());
        network.getInterfaces().setEnabled(true).addInterface(settings.host());
        JoinConfig join = network.getJoin();
        join.getMulticastConfig().setEnabled(false);
        join.getAutoDetectionConfig().setEnabled(false);
        Set<String> members = new LinkedHashSet<>(seeds);
        members.addAll(settings.staticSeeds());
        members.add(settings.host() + ":" + settings.hazelcastPort());
        join.getTcpIpConfig().setEnabled(true).setConnectionTimeoutSeconds(2).setMembers(new ArrayList<>(members));
        return config;
    }

    /** The event bus's options: its TLS port on {@code cluster.host}, mutual TLS with the cluster CA. */
    public static EventBusOptions eventBusOptions(ClusterSettings settings, int port) {
        EventBusOptions bus = new EventBusOptions().setHost(settings.host()).setPort(port)
                .setClusterPublicHost(settings.host()).setClusterPublicPort(port);
        bus.setSsl(true)
                .setKeyCertOptions(new PemKeyCertOptions().setCertPath(settings.tlsCert().toString())
                        .setKeyPath(settings.tlsKey().toString()))
                .setTrustOptions(new PemTrustOptions().addCertPath(settings.tlsCa().toString()))
                .setClientAuth(ClientAuth.REQUIRED);
        return bus;
    }

    /** The event-bus port to advertise: the configured one, or a free one now when it is 0. */
    public static int eventBusPort(ClusterSettings settings) {
        if (settings.eventBusPort() != 0) {
            return settings.eventBusPort();
        }
        try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getByName(settings.host()))) {
            return probe.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException("no free event-bus port on " + settings.host() + ": " + e.getMessage(), e);
        }
    }

    /**
     * Builds and joins the clustered Vertx (blocking, bounded by {@code timeout}): {@code builder} carries the
     * Manager's options (event loops, transport, metrics); the event bus and cluster manager are set here.
     */
    public static Vertx start(VertxBuilder builder, VertxOptions options, ClusterSettings settings, int eventBusPort,
                              Duration timeout) throws Exception {
        // A cold JVM's first etcd call (class loading, connection) can take seconds on a loaded host; a seeding that
        // gives up too early makes a Manager form an event-bus cluster of its own.
        List<String> seeds = seedsFromEtcd(settings, SEEDING_DEADLINE);
        options.setEventBusOptions(eventBusOptions(settings, eventBusPort));
        HazelcastClusterManager manager = new HazelcastClusterManager(hazelcastConfig(settings, seeds));
        LOG.info("cluster member {}: joining the event-bus cluster on {}:{} (seeds {})", settings.memberId(),
                settings.host(), settings.hazelcastPort(), seeds);
        return builder.with(options).withClusterManager(manager).buildClustered()
                .await(timeout.toMillis(), TimeUnit.MILLISECONDS);
    }
}
