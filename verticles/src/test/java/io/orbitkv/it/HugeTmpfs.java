package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.nativeio.shm.Smaps;
import io.orbitkv.nativeio.shm.TmpfsMount;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A real tmpfs mounted {@code huge=within_size} (or another huge= value) on a fresh temporary directory for one test
 * ({@link TmpfsMount}); {@link #close()} unmounts it, asserts the mount is gone and removes the directory. Where
 * mounting is impossible (not root, no mount binary, EPERM in a container) {@link #mount} skips the test by a JUnit
 * assumption that carries mount's words. (The native module has the same small wrapper: test classes are not shared between modules.)
 */
public final class HugeTmpfs implements AutoCloseable {
    public final Path dir;
    private final TmpfsMount mount;

    private HugeTmpfs(TmpfsMount mount) {
        this.mount = mount;
        this.dir = mount.dir();
    }

    public static HugeTmpfs mount(String size) throws Exception {
        return mount("within_size", size);
    }

    public static HugeTmpfs mount(String huge, String size) throws Exception {
        Path dir = Files.createTempDirectory("orbitkv-huge-");
        try {
            return new HugeTmpfs(TmpfsMount.mount(dir, "huge=" + huge + ",mode=0700,size=" + size));
        } catch (IOException e) {
            Files.deleteIfExists(dir);
            assumeTrue(false, "cannot mount a huge-page tmpfs here (needs root and mount): " + e.getMessage());
            throw e;
        }
    }

    public static boolean mounted(Path dir) throws IOException {
        return TmpfsMount.mounted(dir);
    }

    @Override
    public void close() throws Exception {
        mount.close();
        assertThat(mounted(dir)).as("%s is unmounted", dir).isFalse();
        Files.deleteIfExists(dir);
    }

    /** The kB of {@code field} (e.g. ShmemPmdMapped) in this process's smaps entries that map {@code file}; -1: none. */
    public static long smapsKb(Path file, String field) throws IOException {
        return Smaps.kb(file, field);
    }
}
