package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.orbitkv.peer.PeerTransport;
import io.orbitkv.protocol.peer.PeerGrant;
import io.orbitkv.protocol.peer.PeerKey;
import io.orbitkv.protocol.peer.PeerReserveReply;
import io.orbitkv.protocol.peer.PeerReserveRequest;
import io.orbitkv.protocol.peer.PeerTransferGrpcClient;
import io.orbitkv.storage.StateKey;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Raw peer-protocol steps the peer ITs drive themselves (reserve a lease, destinations to receive it into). */
final class PeerTransferITSupport {
    private PeerTransferITSupport() {}

    /** Reserves {@code keys} on the source over {@code grpc} (whose certificate names the requester); the grant. */
    static PeerGrant grant(PeerTransferGrpcClient grpc, long requesterIncarnation, List<StateKey> keys,
                           List<Long> generations) throws Exception {
        PeerReserveRequest.Builder r = PeerReserveRequest.newBuilder()
                .setNamespace(ByteString.copyFrom(PeerTransferIT.namespace))
                .setSourceIncarnation(PeerTransferIT.source.incarnation())
                .setRequesterIncarnation(requesterIncarnation).setLeaseMs(30_000);
        for (int i = 0; i < keys.size(); i++) {
            r.addKeys(PeerKey.newBuilder().setGroupId(0).setBlockHash(ByteString.copyFrom(keys.get(i).blockHash()))
                    .setGeneration(generations.get(i)));
        }
        PeerReserveReply reply = grpc.reserve(r.build()).await(10, TimeUnit.SECONDS);
        assertThat(reply.hasGrant()).as("granted: " + reply).isTrue();
        return reply.getGrant();
    }

    /** As the in-JVM requester (manager-2). */
    static PeerGrant grant(PeerTransferGrpcClient grpc, List<StateKey> keys, List<Long> generations) throws Exception {
        return grant(grpc, PeerTransferIT.requester.membershipRole().orElseThrow().incarnation(), keys, generations);
    }

    /** {@code n} zeroed off-heap destinations of {@code bytes} each (owned by an automatic arena). */
    static List<PeerTransport.Destination> destinations(int n, long bytes) {
        List<PeerTransport.Destination> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(new PeerTransport.Destination(Arena.ofAuto().allocate(bytes, 4096)));
        }
        return out;
    }

    static boolean allZero(MemorySegment segment) {
        return segment.mismatch(Arena.ofAuto().allocate(segment.byteSize())) == -1;
    }
}
