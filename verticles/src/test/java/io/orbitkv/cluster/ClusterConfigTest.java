package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.clusterkit.ClusterCertificates;
import io.orbitkv.common.ConfigException;
import io.orbitkv.manager.ManagerConfig;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The cluster.* keys: off by default; when on, each bad value stops startup naming its key. */
class ClusterConfigTest {
    @TempDir
    Path dir;

    private Map<String, String> valid() throws Exception {
        ClusterCertificates.create(dir.resolve("certs"), 1, List.of("127.0.0.1"), Duration.ofDays(1));
        Map<String, String> m = new HashMap<>();
        m.put("cluster.enabled", "true");
        m.put("cluster.member-id", "manager-1");
        m.put("cluster.tls.ca", dir.resolve("certs/ca.pem").toString());
        m.put("cluster.tls.cert", dir.resolve("certs/manager-1.pem").toString());
        m.put("cluster.tls.key", dir.resolve("certs/manager-1.key").toString());
        return m;
    }

    @Test
    void offByDefault() {
        assertThat(ManagerConfig.from(Map.of()).cluster()).isEmpty();
    }

    @Test
    void aValidClusterConfiguration() throws Exception {
        ClusterSettings s = ManagerConfig.from(valid()).cluster().orElseThrow();
        assertThat(s.memberId()).isEqualTo("manager-1");
        assertThat(s.membersPrefix()).isEqualTo("/orbitkv/members/");
        assertThat(s.etcdEndpoints()).extracting(Object::toString).containsExactly("http://127.0.0.1:2379");
        assertThat(s.leaseTtlSeconds()).isEqualTo(5);
        assertThat(s.maxKeysPerPeer()).isEqualTo(65536);
    }

    @Test
    void badValuesNameTheirKey() throws Exception {
        Map<String, String> base = valid();
        for (Map.Entry<String, String> bad : List.of(Map.entry("cluster.member-id", ""),
                Map.entry("cluster.member-id", "Manager One"), Map.entry("cluster.etcd-endpoints", "etcd:2379"),
                Map.entry("cluster.prefix", "orbitkv"), Map.entry("cluster.lease-ttl-s", "1"),
                Map.entry("cluster.hazelcast-seeds", "not a seed"), Map.entry("cluster.tls.key", ""),
                Map.entry("cluster.tls.ca", dir.resolve("missing.pem").toString()),
                Map.entry("cluster.inventory.max-keys-per-peer", "0"))) {
            Map<String, String> m = new HashMap<>(base);
            m.put(bad.getKey(), bad.getValue());
            assertThatThrownBy(() -> ManagerConfig.from(m)).as(bad.toString()).isInstanceOf(ConfigException.class)
                    .hasMessageContaining(bad.getKey());
        }
    }
}
