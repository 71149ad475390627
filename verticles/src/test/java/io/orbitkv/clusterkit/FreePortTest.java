package io.orbitkv.clusterkit;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

class FreePortTest {

    @Test
    void portsComeFromBelowTheEphemeralRangeAndAreNeverHandedOutTwice() throws Exception {
        int[] ephemeral = LocalEtcd.ephemeralRange();
        Set<Integer> ports = new HashSet<>();
        for (int i = 0; i < 200; i++) {
            int port = LocalEtcd.freePort();
            assertThat(port).isBetween(LocalEtcd.LOWEST_HANDED_OUT, ephemeral[0] - 1);
            assertThat(ports.add(port)).as("port %d handed out twice", port).isTrue();
        }
    }

    @Test
    void aPortHandedOutCanBeBoundOnLoopback() throws Exception {
        int port = LocalEtcd.freePort();
        try (ServerSocket socket = new ServerSocket()) {
            socket.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
            assertThat(socket.getLocalPort()).isEqualTo(port);
        }
    }

    @Test
    void theEphemeralRangeIsTheKernels() {
        int[] range = LocalEtcd.ephemeralRange();
        assertThat(range[0]).isPositive().isLessThan(range[1]);
        assertThat(range[1]).isLessThanOrEqualTo(65_535);
    }
}
