package io.orbitkv.nativeio.libc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.nativeio.testing.OpenFileDescriptors;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.util.Set;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LibcTest {

    @TempDir(factory = TmpDirFactory.class)
    Path dir;

    @BeforeEach
    void requireLibc() {
        assumeTrue(Libc.isAvailable(), () -> "libc unavailable: " + Libc.unavailabilityCause());
    }

    @Test
    void openInMissingDirectoryFailsWithEnoent() {
        long fdsBefore = OpenFileDescriptors.count();
        Path missing = dir.resolve("no-such-dir").resolve("shard-0");

        assertThatThrownBy(() -> Libc.open(missing, Libc.O_RDWR | Libc.O_CREAT | Libc.O_DIRECT, Libc.MODE_0600))
                .isInstanceOfSatisfying(NativeIoException.class, e -> {
                    assertThat(e.errno()).isEqualTo(NativeIoException.ENOENT);
                    assertThat(e.operation()).isEqualTo("open");
                    assertThat(e.path()).isEqualTo(missing);
                    assertThat(e.getMessage()).contains("No such file or directory").contains(missing.toString());
                });
        assertThat(OpenFileDescriptors.count()).isEqualTo(fdsBefore);
    }

    @Test
    void createsPreallocatesSizesTruncatesSyncsAndClosesOnce() throws Exception {
        long fdsBefore = OpenFileDescriptors.count();
        Path path = dir.resolve("shard-0");
        NativeFileDescriptor file = Libc.open(path, Libc.O_RDWR | Libc.O_CREAT | Libc.O_DIRECT, Libc.MODE_0600);
        try {
            assertThat(file.direct()).isTrue();
            assertThat(OpenFileDescriptors.count()).isEqualTo(fdsBefore + 1);
            assertThat(Files.getPosixFilePermissions(path))
                    .isEqualTo(Set.of(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE));
            file.fallocate(0, 0, 1 << 20);
            assertThat(file.size()).isEqualTo(1 << 20);
            file.fallocate(Libc.FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20);
            assertThat(file.size()).isEqualTo(1 << 20);
            file.truncate(8192);
            assertThat(file.size()).isEqualTo(8192);
            file.datasync();
        } finally {
            file.close();
        }
        file.close(); // idempotent
        assertThat(file.isClosed()).isTrue();
        assertThatThrownBy(file::size).isInstanceOfSatisfying(NativeIoException.class,
                e -> assertThat(e.errno()).isEqualTo(NativeIoException.EBADF));
        assertThat(OpenFileDescriptors.count()).isEqualTo(fdsBefore);
    }

    @Test
    void describesErrnos() {
        assertThat(Libc.describeErrno(NativeIoException.ENOSPC)).isEqualTo("No space left on device");
    }
}
