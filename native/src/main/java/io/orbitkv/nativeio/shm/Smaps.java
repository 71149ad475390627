package io.orbitkv.nativeio.shm;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Predicate;
import java.util.regex.Pattern;

/**
 * How the kernel maps files into this process, read from {@code /proc/self/smaps}: the proof of what a mapping really
 * got (resident bytes, bytes mapped with 2 MiB pages), whatever a mount's options promised. Reads the whole file per
 * call (tens of milliseconds in a large JVM): for start-up checks, benches, tests and rate-limited gauges (the
 * storage role's {@code PoolHugePageMeter}), never a hot path.
 */
public final class Smaps {
    /** A mapping's first line: address range, permissions, offset, device, inode, then the path. */
    private static final Pattern MAPPING = Pattern.compile("[0-9a-f]+-[0-9a-f]+ ");

    private static final Path SMAPS = Path.of("/proc/self/smaps");

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

    /**
     * Of this process's mappings of exactly {@code file} (every mapping of it, summed: a page two mappings map counts
     * twice): the bytes they map ({@code Rss}: pages touched through them) and of those the bytes mapped with 2 MiB
     * pages ({@code ShmemPmdMapped} + {@code FilePmdMapped}). Zeros when nothing maps it. One pass over the file.
     *
     * @param residentBytes   {@code Rss} of those mappings, in bytes
     * @param hugeMappedBytes the part of it the kernel maps with 2 MiB pages (PMD entries), in bytes
     */
    public record Mapped(long residentBytes, long hugeMappedBytes) {
        public static final Mapped NONE = new Mapped(0, 0);
    }

    /** See {@link Mapped}; {@code file} as the kernel names it (a real path: no symbolic links). */
    public static Mapped mapped(Path file) throws IOException {
        String suffix = " " + file;
        long rssKb = 0;
        long pmdKb = 0;
        boolean inEntry = false;
        try (BufferedReader smaps = Files.newBufferedReader(SMAPS)) {
            for (String line = smaps.readLine(); line != null; line = smaps.readLine()) {
                if (MAPPING.matcher(line).lookingAt()) {
                    inEntry = line.endsWith(suffix);
                } else if (inEntry) {
                    if (line.startsWith("Rss:")) {
                        rssKb += kbOf(line, 4);
                    } else if (line.startsWith("ShmemPmdMapped:")) {
                        pmdKb += kbOf(line, 15);
                    } else if (line.startsWith("FilePmdMapped:")) {
                        pmdKb += kbOf(line, 14);
                    }
                }
            }
        }
        return new Mapped(rssKb * 1024, pmdKb * 1024);
    }

    private static long kbOf(String line, int keyLength) {
        return Long.parseLong(line.substring(keyLength).replace("kB", "").strip());
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
        for (String line : Files.readAllLines(SMAPS)) {
            if (MAPPING.matcher(line).lookingAt()) {
                inEntry = mapsIt.test(line);
            } else if (inEntry && line.startsWith(key)) {
                total = Math.max(total, 0) + Long.parseLong(line.substring(key.length()).replace("kB", "").strip());
            }
        }
        return total;
    }
}
