package io.orbitkv.model;

import java.nio.file.Path;

/**
 * How this Manager meets other members on the network: the host it binds and advertises, and the mutual-TLS files
 * (the cluster CA, the only issuer a member's certificate may have; this Manager's certificate and PKCS#8 key).
 */
public record MemberNetwork(String host, Path tlsCa, Path tlsCert, Path tlsKey) {}
