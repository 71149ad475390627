/**
 * Unix-domain {@code SOCK_SEQPACKET} sockets through FFM: {@link io.orbitkv.nativeio.unix.SeqPacketBindings} holds
 * the raw downcall handles (shaped like the C prototypes, no logic); {@link io.orbitkv.nativeio.unix.SeqPacketSocket}
 * is the façade that owns one descriptor, captures errno and throws {@link io.orbitkv.nativeio.libc.NativeIoException}.
 * Neither the JDK ({@code UnixDomainSocketAddress} is stream-only) nor netty's native transports offer this socket type.
 */
package io.orbitkv.nativeio.unix;
