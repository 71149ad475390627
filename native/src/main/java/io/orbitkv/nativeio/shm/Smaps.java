package io.orbitkv.nativeio.shm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Predicate;
import java.util.regex.Pattern;

/**
 * How the kernel maps files into this process, read from {@code /proc/self/smaps}: the proof of what a mapping really
 * got (resident bytes, bytes mapped with 2 MiB pages), whatever a mount's options promised. Reads the whole file per
 * call (tens of milliseconds in a large JVM): for start-up checks, benches and tests, not a hot path.
 */
public final class Smaps {
    /** A mapping's first line: address range, permissions, offset, device, inode, then the path. */
    private static final Pattern MAPPING = Pattern.compile("[0-9a-f]+-[0-9a-f]+ ");

    private Smaps() {}

    /** The kB of {@code field} (e.g. {@code Rss}, {@code ShmemPmdMapped}) over this process's mappings of {@code file}; -1: none. */
    public static long kb(Path file, String field) throws IOException {
        String suffix = " " + file;
        return sum(line -> line.endsWith(suffix), field);
    }

    /** The kB of {@code field} over this process's mappings of files below {@code dir}; -1: none. */
    public static long kbUnder(Path dir, String field) throws IOException {
        String prefix = " " + (dir.toString().endsWith("/") ? dir.toString() : dir + "/");
        return sum(line -> line.contains(prefix), field);
    }

    /** Bytes of this process's mappings of files below {@code dir} that the kernel maps with 2 MiB pages. */
    public static long hugeMappedBytesUnder(Path dir) throws IOException {
        long shmem = Math.max(0, kbUnder(dir, "ShmemPmdMapped"));
        long file = Math.max(0, kbUnder(dir, "FilePmdMapped"));
        return (shmem + file) * 1024;
    }

    private static long sum(Predicate<String> mapsIt, String field) throws IOException {
        String key = field + ":";
        long total = -1;
        boolean inEntry = false;
        for (String line : Files.readAllLines(Path.of("/proc/self/smaps"))) {
            if (MAPPING.matcher(line).lookingAt()) {
                inEntry = mapsIt.test(line);
            } else if (inEntry && line.startsWith(key)) {
                total = Math.max(total, 0) + Long.parseLong(line.substring(key.length()).replace("kB", "").strip());
            }
        }
        return total;
    }
}
