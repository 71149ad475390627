package io.orbitkv.perf.peer;

import io.orbitkv.nativeio.shm.TmpfsMount;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Where {@code bench peer} puts both Managers' pool files: a directory the caller names, the Manager's default
 * ({@code /dev/shm}), or a private tmpfs mounted with {@code huge=within_size} for the bench (root only), the
 * configuration the README recommends for the DRAM pool.
 * On this kind of machine a pool on 4 KiB pages moves bytes 2-3x slower than the same pool on 2 MiB pages (every
 * first touch and TLB miss of a 4 KiB page is paid per page), so the bench says which one it measured.
 *
 * <p>Design note (ownership): a directory this class mounted is its own: {@link #close} unmounts it ({@link TmpfsMount}) and
 * removes the mount point; a directory the caller named is never touched. The mount is owner-only (mode
 * 0700) and sized for both pools plus a margin, so a runaway writer fills it, not the host's memory.
 */
final class BenchPoolDir implements AutoCloseable {
    private final Path dir;
    private final TmpfsMount mount;
    private final String description;

    private BenchPoolDir(Path dir, TmpfsMount mount, String description) {
        this.dir = dir;
        this.mount = mount;
        this.description = description;
    }

    Path dir() {
        return dir;
    }

    /** How the directory came to be (reported in the bench's config). */
    String description() {
        return description;
    }

    /** Whether this is the huge-page tmpfs the bench mounted (not a fallback or a given directory). */
    boolean hugeMount() {
        return mount != null;
    }

    /** The Manager's default pool directory, as a Manager with no pool settings would use it. */
    static BenchPoolDir managerDefault(Path dir) {
        BenchPoolDir given = given(dir);
        return new BenchPoolDir(given.dir, null, dir + " (the default pool.shm-dir)");
    }

    /** The caller's directory, as is. */
    static BenchPoolDir given(Path dir) {
        if (!Files.isDirectory(dir)) {
            throw new IllegalArgumentException("--pool-dir " + dir + " is not a directory");
        }
        return new BenchPoolDir(dir, null, dir.toString());
    }

    /**
     * A tmpfs with huge pages mounted under {@code parent} for {@code bytes}; when that is impossible (not root, no
     * permission) {@code /dev/shm}, with the reason in the description.
     */
    static BenchPoolDir hugeOrShm(Path parent, long bytes) throws IOException {
        Path mountPoint = Files.createDirectory(parent.resolve("pool-huge"));
        try {
            TmpfsMount mount = TmpfsMount.mount(mountPoint, "huge=within_size,mode=0700,size=" + bytes);
            return new BenchPoolDir(mountPoint, mount, "tmpfs huge=within_size (mounted by the bench)");
        } catch (IOException e) {
            Files.deleteIfExists(mountPoint);
            return new BenchPoolDir(Path.of("/dev/shm"), null,
                    "/dev/shm (4 KiB pages: could not mount a huge-page tmpfs: " + e.getMessage() + ")");
        }
    }

    @Override
    public void close() throws IOException {
        if (mount != null) {
            mount.close();
            Files.deleteIfExists(dir);
        }
    }
}
