package io.orbitkv.nativeio.shm;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A private tmpfs mounted on an existing empty directory with the given options (e.g. {@code huge=within_size,
 * mode=0700,size=256m}): how the bench and the tests put a pool on huge pages. Needs root (the mount binary).
 *
 * <p>Design note (ownership): whoever {@link #mount}s owns the mount until {@link #close}, which unmounts it (lazily
 * when the plain unmount fails, e.g. busy) and checks {@code /proc/self/mountinfo} that it is gone; the directory
 * itself stays the caller's. A process killed in between leaves the mount behind ({@code umount DIR} removes it).
 */
public final class TmpfsMount implements AutoCloseable {
    private final Path dir;
    private boolean closed;

    private TmpfsMount(Path dir) {
        this.dir = dir;
    }

    /** Mounts a tmpfs with {@code options} on {@code dir}; an {@link IOException} carries mount's own words. */
    public static TmpfsMount mount(Path dir, String options) throws IOException {
        run(List.of("mount", "-t", "tmpfs", "-o", options, "orbitkv-pool", dir.toString()));
        return new TmpfsMount(dir);
    }

    public Path dir() {
        return dir;
    }

    /** Whether a file system is mounted exactly on {@code dir} (this process's view). */
    public static boolean mounted(Path dir) throws IOException {
        return Files.readString(Path.of("/proc/self/mountinfo")).contains(" " + dir + " ");
    }

    @Override
    public synchronized void close() throws IOException {
        if (closed) {
            return;
        }
        closed = true;
        try {
            run(List.of("umount", dir.toString()));
        } catch (IOException busy) {
            run(List.of("umount", "-l", dir.toString()));
        }
        if (mounted(dir)) {
            throw new IOException("the tmpfs on " + dir + " is still mounted after umount");
        }
    }

    private static void run(List<String> command) throws IOException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        try {
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IOException(String.join(" ", command) + " did not end within 30 s");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException(String.join(" ", command) + " interrupted", e);
        }
        if (p.exitValue() != 0) {
            throw new IOException(String.join(" ", command) + " exited " + p.exitValue() + (out.isEmpty() ? "" : ": " + out));
        }
    }
}
