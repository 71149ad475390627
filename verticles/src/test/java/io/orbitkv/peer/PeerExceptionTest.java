package io.orbitkv.peer;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.protocol.peer.PeerRejection;
import org.junit.jupiter.api.Test;

/** A peer failure crosses the event bus as a code and comes back as the same kind and rejection. */
class PeerExceptionTest {
    @Test
    void everyKindAndRejectionSurvivesItsFailureCode() {
        for (PeerException.Kind kind : PeerException.Kind.values()) {
            for (PeerRejection rejection : PeerRejection.values()) {
                if (rejection == PeerRejection.UNRECOGNIZED) {
                    continue;
                }
                PeerException sent = new PeerException(kind, rejection, "why");
                PeerException back = PeerException.fromFailure(sent.failureCode(), sent.detail());
                assertThat(back).isNotNull();
                assertThat(back.kind()).isEqualTo(kind);
                assertThat(back.rejection()).isEqualTo(rejection);
                assertThat(back.getMessage()).isEqualTo("why");
            }
        }
    }

    @Test
    void codesOfOtherRolesAreNotPeerFailures() {
        assertThat(PeerException.fromFailure(-1, "x")).isNull();
        assertThat(PeerException.fromFailure(4003, "an SSD failure's code")).isNull();
        assertThat(PeerException.fromFailure(27, "an engine ErrorReason")).isNull();
        assertThat(PeerException.fromFailure(5000 + 100 * (PeerException.Kind.values().length + 1), "x")).isNull();
    }
}
