package io.orbitkv.perf.peer;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

/**
 * Where {@code bench peer} puts both Managers' pool files: a directory the caller names, or a private tmpfs mounted
 * with {@code huge=within_size} for the bench (root only), the configuration the README recommends for the DRAM pool.
 * On this kind of machine a pool on 4 KiB pages moves bytes 2-3x slower than the same pool on 2 MiB pages (every
 * first touch and TLB miss of a 4 KiB page is paid per page), so the bench says which one it measured.
 *
 * <p>Design note (ownership): a directory this class mounted is its own: {@link #close} unmounts it (lazily when
 * busy) and removes the mount point; a directory the caller named is never touched. The mount is owner-only (mode
 * 0700) and sized for both pools plus a margin, so a runaway writer fills it, not the host's memory.
 */
final class BenchPoolDir implements AutoCloseable {
    private static final Pattern MAPPING = Pattern.compile("[0-9a-f]+-[0-9a-f]+ ");

    private final Path dir;
    private final boolean mounted;
    private final String description;

    private BenchPoolDir(Path dir, boolean mounted, String description) {
        this.dir = dir;
        this.mounted = mounted;
        this.description = description;
    }

    Path dir() {
        return dir;
    }

    /** How the directory came to be (reported in the bench's config). */
    String description() {
        return description;
    }

    /** The caller's directory, as is. */
    static BenchPoolDir given(Path dir) {
        if (!Files.isDirectory(dir)) {
            throw new IllegalArgumentException("--pool-dir " + dir + " is not a directory");
        }
        return new BenchPoolDir(dir, false, dir.toString());
    }

    /**
     * A tmpfs with huge pages mounted under {@code parent} for {@code bytes}; when that is impossible (not root, no
     * permission) {@code /dev/shm}, with the reason in the description.
     */
    static BenchPoolDir hugeOrShm(Path parent, long bytes) throws IOException, InterruptedException {
        Path mountPoint = Files.createDirectory(parent.resolve("pool-huge"));
        List<String> command = List.of("mount", "-t", "tmpfs", "-o",
                "huge=within_size,mode=0700,size=" + bytes, "orbitkv-bench-pool", mountPoint.toString());
        String why;
        try {
            Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes()).trim();
            if (p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0) {
                return new BenchPoolDir(mountPoint, true, "tmpfs huge=within_size (mounted by the bench)");
            }
            why = out.isEmpty() ? "mount exited " + p.exitValue() : out;
        } catch (IOException e) {
            why = e.getMessage();
        }
        Files.deleteIfExists(mountPoint);
        return new BenchPoolDir(Path.of("/dev/shm"), false, "/dev/shm (4 KiB pages: could not mount a huge-page tmpfs: "
                + why + ")");
    }

    @Override
    public void close() throws IOException, InterruptedException {
        if (!mounted) {
            return;
        }
        Process p = new ProcessBuilder("umount", dir.toString()).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
            new ProcessBuilder("umount", "-l", dir.toString()).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).start().waitFor(30, TimeUnit.SECONDS);
        }
        Files.deleteIfExists(dir);
    }

    /**
     * Bytes of this process's mappings of files under {@code dir} that the kernel maps with 2 MiB pages
     * ({@code ShmemPmdMapped} and {@code FilePmdMapped} in {@code /proc/self/smaps}): the proof that the pool really
     * is on huge pages, whatever the mount options promised.
     */
    static long hugeMappedBytes(Path dir) throws IOException {
        String prefix = dir.toString().endsWith("/") ? dir.toString() : dir + "/";
        long kib = 0;
        boolean inPool = false;
        for (String line : Files.readAllLines(Path.of("/proc/self/smaps"))) {
            if (MAPPING.matcher(line).lookingAt()) { // a mapping's first line: range, perms, offset, dev, inode, path
                inPool = line.contains(" " + prefix);
            } else if (inPool && (line.startsWith("ShmemPmdMapped:") || line.startsWith("FilePmdMapped:"))) {
                kib += Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        return kib * 1024;
    }
}
