package io.orbitkv.peer;

/**
 * The {@code peer.mooncake-te.*} settings, present when {@code peer.transport: mooncake-te}.
 *
 * @param trustedNetwork {@code peer.mooncake-te.trusted-network}: this Manager's TE address and every source's TE
 *                       segment must lie inside it
 * @param discover       {@code peer.mooncake-te.protocol: auto}: TE chooses its transport from the host's topology
 *                       (RDMA where a verbs device exists, TCP otherwise); {@code tcp} (the default): TCP always
 */
public record MooncakeTeSettings(TrustedNetwork trustedNetwork, boolean discover) {
    public static final String PROTOCOL_TCP = "tcp";
    public static final String PROTOCOL_AUTO = "auto";
}
