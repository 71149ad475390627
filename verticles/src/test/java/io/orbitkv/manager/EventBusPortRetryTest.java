package io.orbitkv.manager;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.BindException;
import java.net.InetAddress;
import java.net.ServerSocket;
import org.junit.jupiter.api.Test;

/** Which start failures make the Manager probe another event-bus port: only a bind to an address in use. */
class EventBusPortRetryTest {

    @Test
    void aBindToATakenPortIsRecognisedThroughItsCauses() throws IOException {
        try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             ServerSocket second = new ServerSocket()) {
            BindException bind = null;
            try {
                second.bind(taken.getLocalSocketAddress());
            } catch (BindException e) {
                bind = e;
            }
            assertTrue(bind != null, "binding a taken port must fail");
            assertTrue(Manager.addressInUse(new IllegalStateException("join failed", new RuntimeException(bind))));
        }
        // netty's native transport reports it as an IOException whose message carries the errno text
        assertTrue(Manager.addressInUse(new RuntimeException(
                new IOException("bind(..) failed with error(-98): Address already in use"))));
    }

    @Test
    void otherFailuresAreNotRetried() {
        assertFalse(Manager.addressInUse(new IllegalStateException("etcd unreachable", new IOException("refused"))));
        assertFalse(Manager.addressInUse(new IllegalStateException((String) null)));
    }
}
