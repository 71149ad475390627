package io.orbitkv.cluster;

import com.hazelcast.config.Config;
import com.hazelcast.config.JoinConfig;
import com.hazelcast.config.NetworkConfig;
import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.KeyValue;
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
import java.net.ServerSocket;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

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
 * from etcd once with a short-lived client (bounded by a deadline). Newcomers join the members they are seeded with;
 * the first Manager (no seeds) forms the cluster alone and is joined by the next. If etcd is down at start, only
 * {@code cluster.hazelcast-seeds} are used.
 */
public final class ClusterVertx {
    private static final Logger LOG = LoggerFactory.getLogger(ClusterVertx.class);

    private ClusterVertx() {}

    /** The Hazelcast addresses of the members etcd lists now ({@code host:port}), bounded by {@code deadline}. */
    public static List<String> seedsFromEtcd(ClusterSettings settings, Duration deadline) {
        List<String> seeds = new ArrayList<>();
        try (Client client = Client.builder().endpoints(settings.etcdEndpoints().toArray(java.net.URI[]::new))
                .connectTimeout(deadline).retryMaxAttempts(1).retryMaxDuration(deadline).build()) {
            for (KeyValue kv : client.getKVClient().get(ByteSequence.from(settings.membersPrefix(), StandardCharsets.UTF_8),
                    GetOption.builder().isPrefix(true).build()).get(deadline.toMillis(), TimeUnit.MILLISECONDS).getKvs()) {
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
        } catch (Exception e) {
            LOG.warn("cluster: etcd could not be read to seed the event-bus cluster ({}); using cluster.hazelcast-seeds only",
                    e.toString());
        }
        return seeds;
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
        List<String> seeds = seedsFromEtcd(settings, Duration.ofSeconds(2));
        options.setEventBusOptions(eventBusOptions(settings, eventBusPort));
        HazelcastClusterManager manager = new HazelcastClusterManager(hazelcastConfig(settings, seeds));
        LOG.info("cluster member {}: joining the event-bus cluster on {}:{} (seeds {})", settings.memberId(),
                settings.host(), settings.hazelcastPort(), seeds);
        return builder.with(options).withClusterManager(manager).buildClustered()
                .await(timeout.toMillis(), TimeUnit.MILLISECONDS);
    }
}
