package io.orbitkv.nativeio.shm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.ValueLayout;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.UUID;
import org.junit.jupiter.api.Test;

class SharedMemoryFileTest {
    private static Path shmPath() {
        return Path.of("/dev/shm", "orbitkv-test-" + UUID.randomUUID());
    }

    @Test
    void createdFileIsOwnerOnlySharedWithAMapperAndRemovedOnClose() throws Exception {
        Path path = shmPath();
        try (SharedMemoryFile pool = SharedMemoryFile.create(path, 1 << 20)) {
            assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(path))).isEqualTo("rw-------");
            pool.segment().set(ValueLayout.JAVA_LONG, 4096, 0x1234_5678_9abcL);
            try (SharedMemoryFile engine = SharedMemoryFile.map(path, 1 << 20)) {
                assertThat(engine.segment().get(ValueLayout.JAVA_LONG, 4096)).isEqualTo(0x1234_5678_9abcL);
                engine.segment().set(ValueLayout.JAVA_BYTE, 100, (byte) 7);
            }
            assertThat(pool.segment().get(ValueLayout.JAVA_BYTE, 100)).isEqualTo((byte) 7);
            assertThat(Files.exists(path)).as("a mapper never removes the file").isTrue();
        }
        assertThat(Files.exists(path)).isFalse();
    }

    @Test
    void creatingOverAnExistingFileFailsAndAccessAfterCloseIsRefused() throws Exception {
        Path path = shmPath();
        SharedMemoryFile pool = SharedMemoryFile.create(path, 8192);
        assertThatThrownBy(() -> SharedMemoryFile.create(path, 8192))
                .isInstanceOf(FileAlreadyExistsException.class);
        pool.close();
        pool.close();
        assertThatThrownBy(() -> pool.segment().get(ValueLayout.JAVA_BYTE, 0))
                .isInstanceOf(IllegalStateException.class);
    }

    @Test
    void mappingMoreThanTheFileHoldsIsAClearError() throws Exception {
        Path path = shmPath();
        try (SharedMemoryFile pool = SharedMemoryFile.create(path, 8192)) {
            assertThatThrownBy(() -> SharedMemoryFile.map(path, 1 << 20)).hasMessageContaining("expected");
        }
    }

    @Test
    void creatingReservesEveryPageUpFront() throws Exception {
        Path path = shmPath();
        long size = 64L << 20;
        try (SharedMemoryFile file = SharedMemoryFile.create(path, size)) {
            Process stat = new ProcessBuilder("stat", "--format=%b %B", path.toString()).redirectErrorStream(true).start();
            String[] blocks = new String(stat.getInputStream().readAllBytes()).strip().split(" ");
            assertThat(stat.waitFor()).isZero();
            assertThat(Long.parseLong(blocks[0]) * Long.parseLong(blocks[1])).as("bytes allocated").isGreaterThanOrEqualTo(size);
            assertThat(file.segment().byteSize()).isEqualTo(size);
        }
        assertThat(Files.exists(path)).isFalse();
    }
}
