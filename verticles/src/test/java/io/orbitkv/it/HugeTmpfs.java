package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * A real tmpfs mounted {@code huge=within_size} (or another huge= value) on a fresh temporary directory for one test class; {@link #close()}
 * unmounts it, removes the directory and asserts the mount is gone. Where mounting is impossible (not root, no mount
 * binary, EPERM in a container) {@link #mount} skips the test by a JUnit assumption that carries mount's words.
 */
// A copy of native's io.orbitkv.nativeio.shm.HugeTmpfs (test classes are not shared between the modules).
public final class HugeTmpfs implements AutoCloseable {
    public final Path dir;

    private HugeTmpfs(Path dir) {
        this.dir = dir;
    }

    public static HugeTmpfs mount(String size) throws Exception {
        return mount("within_size", size);
    }

    public static HugeTmpfs mount(String huge, String size) throws Exception {
        Path dir = Files.createTempDirectory("orbitkv-huge-");
        String[] out = new String[1];
        int rc;
        try {
            rc = run(out, "mount", "-t", "tmpfs", "-o", "huge=" + huge + ",mode=0700,size=" + size, "orbitkv-pool",
                    dir.toString());
        } catch (IOException e) {
            rc = -1;
            out[0] = e.getMessage();
        }
        if (rc != 0) {
            Files.deleteIfExists(dir);
        }
        assumeTrue(rc == 0, "cannot mount a huge-page tmpfs here (needs root and mount): " + out[0]);
        return new HugeTmpfs(dir);
    }

    public static boolean mounted(Path dir) throws IOException {
        return Files.readString(Path.of("/proc/self/mountinfo")).contains(" " + dir + " ");
    }

    @Override
    public void close() throws Exception {
        String[] out = new String[1];
        int rc = run(out, "umount", dir.toString());
        assertThat(rc).as("umount %s: %s", dir, out[0]).isZero();
        assertThat(mounted(dir)).as("%s is unmounted", dir).isFalse();
        Files.deleteIfExists(dir);
    }

    private static int run(String[] out, String... command) throws Exception {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        byte[] text = p.getInputStream().readAllBytes();
        assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
        out[0] = new String(text, StandardCharsets.UTF_8).strip();
        return p.exitValue();
    }

    /** The kB of {@code field} (e.g. ShmemPmdMapped) in this process's smaps entries that map {@code file}; -1: none. */
    public static long smapsKb(Path file, String field) throws IOException {
        long total = -1;
        boolean inEntry = false;
        for (String line : Files.readAllLines(Path.of("/proc/self/smaps"))) {
            if (line.matches("^[0-9a-f]+-[0-9a-f]+ .*")) {
                inEntry = line.endsWith(" " + file);
                continue;
            }
            if (inEntry && line.startsWith(field + ":")) {
                long kb = Long.parseLong(line.substring(field.length() + 1).replace("kB", "").strip());
                total = Math.max(total, 0) + kb;
            }
        }
        return total;
    }
}
