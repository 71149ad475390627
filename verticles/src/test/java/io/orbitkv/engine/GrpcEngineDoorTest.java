package io.orbitkv.engine;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.buffer.Buffer;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

/** The gRPC door's own pieces, without a server: the socket's private binding and the frame guard. */
class GrpcEngineDoorTest {

    @Test
    void theSocketIsBoundInsideAPrivateDirectoryAndOnlyAppearsAtItsPathOwnerOnly() throws Exception {
        Path parent = Files.createTempDirectory("orbitkv-door");
        Files.setPosixFilePermissions(parent, PosixFilePermissions.fromString("rwxr-xr-x")); // a shared parent
        Path target = parent.resolve("engine.sock");
        try {
            GrpcEngineDoor.PrivateSocket socket = GrpcEngineDoor.PrivateSocket.prepare(target);
            assertThat(socket.bindPath().getParent()).isEqualTo(socket.directory());
            assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(socket.directory())))
                    .as("no other user can reach what is bound inside").isEqualTo("rwx------");
            try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
                server.bind(UnixDomainSocketAddress.of(socket.bindPath()));
                assertThat(Files.exists(target)).isFalse();
                socket.publish();
                assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(target))).isEqualTo("rw-------");
                assertThat(Files.exists(socket.directory())).isFalse();
                try (SocketChannel client = SocketChannel.open(UnixDomainSocketAddress.of(target));
                     SocketChannel accepted = server.accept()) {
                    client.write(ByteBuffer.wrap(new byte[] {42}));
                    ByteBuffer one = ByteBuffer.allocate(1);
                    accepted.read(one);
                    assertThat(one.get(0)).as("the renamed socket is the bound one").isEqualTo((byte) 42);
                }
            }
        } finally {
            try (Stream<Path> left = Files.list(parent)) {
                for (Path p : left.toList()) {
                    Files.deleteIfExists(p);
                }
            }
            Files.delete(parent);
        }
    }

    /** Valid frames pass however the body is split into chunks; the seed is printed on failure. */
    @ParameterizedTest
    @ValueSource(longs = {1, 2, 3, 42, 1234567})
    void validFramesPassInAnyChunkingAndBadFlagsAreCaught(long seed) {
        Random random = new Random(seed);
        Buffer body = Buffer.buffer();
        for (int i = 0; i < 5; i++) {
            byte[] payload = new byte[random.nextInt(300)];
            random.nextBytes(payload);
            body.appendByte((byte) 0).appendInt(payload.length).appendBytes(payload);
        }
        GrpcEngineDoor.FrameGuard guard = new GrpcEngineDoor.FrameGuard(false);
        int at = 0;
        while (at < body.length()) {
            int next = Math.min(body.length(), at + 1 + random.nextInt(64));
            assertThat(guard.check(body.slice(at, next))).as("seed %d at %d", seed, at).isNull();
            at = next;
        }
        assertThat(guard.midFrame()).as("seed %d", seed).isFalse();
        // A compressed frame needs a declared encoding; any other flag is never valid.
        assertThat(new GrpcEngineDoor.FrameGuard(false).check(Buffer.buffer().appendByte((byte) 1).appendInt(0))).isNotNull();
        assertThat(new GrpcEngineDoor.FrameGuard(true).check(Buffer.buffer().appendByte((byte) 1).appendInt(0))).isNull();
        assertThat(new GrpcEngineDoor.FrameGuard(true).check(Buffer.buffer().appendByte((byte) (2 + random.nextInt(250))))).isNotNull();
        GrpcEngineDoor.FrameGuard truncated = new GrpcEngineDoor.FrameGuard(false);
        assertThat(truncated.check(body.slice(0, 3))).isNull();
        assertThat(truncated.midFrame()).isTrue();
    }
}
