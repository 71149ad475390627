package io.orbitkv.nativeio.shm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;

/**
 * Whether a shared-memory pool file created in a directory gets transparent huge pages (2 MiB) or 4 KiB pages.
 *
 * <p>Why: on a paravirtualised host (shadow page tables) copying into and out of a 4 KiB-page mapping was measured
 * 2-4x slower than into a huge-page one, and GPU hosts normally run their DRAM pools on huge pages. The Manager asks
 * this once at start ({@code pool.huge-pages}: warn or refuse), reports it ({@code orbitkv_pool_huge_pages}), and
 * passes the answer to {@link SharedMemoryFile#create(Path, long, Kind)} (through the storage role) and the peer
 * prefault.
 *
 * <p>Design note (who reads what): {@link #of(Path)} reads two kernel files, once per call and on the caller's
 * thread (blocking file reads: never on an event loop): {@code /proc/self/mountinfo} (the mount holding the
 * directory: longest mount point that is a prefix of the directory's real path, the last such line when mounts are
 * stacked) and {@code /sys/kernel/mm/transparent_hugepage/shmem_enabled} (its bracketed value: {@code force} makes
 * every tmpfs huge, {@code deny} none). Everything else is the pure {@link #classify} over their text, which holds no
 * state and owns no resources. Failure modes: a directory that does not exist fails with the
 * {@link IOException} of {@code toRealPath}; an unreadable mountinfo fails with its {@link IOException}; a missing
 * {@code shmem_enabled} (a kernel without THP) counts as no override; a line that does not parse is skipped (the kernel
 * writes one format, so this only guards against future fields). The answer is about the mount, not a promise: a
 * kernel short of free 2 MiB blocks falls back to 4 KiB pages page by page, which only {@code /proc/self/smaps}
 * ({@code ShmemPmdMapped}, {@link Smaps#mapped}) shows: the storage role's gauges measure it.
 */
public final class PoolPages {

    /** Huge pages back a pool file in this directory. */
    public enum Kind {
        /** tmpfs with {@code huge=always} or {@code huge=within_size}, or any tmpfs with shmem_enabled {@code force}. */
        HUGE,
        /** tmpfs with {@code huge=advise}: huge where the mapping is madvised (SharedMemoryFile does that). */
        ADVISE,
        /** 4 KiB pages: not tmpfs, tmpfs without a huge option ({@code huge=never}), or shmem_enabled {@code deny}. */
        NONE
    }

    /**
     * The answer for one directory.
     *
     * @param kind       see {@link Kind}
     * @param mountPoint the mount holding the directory (unescaped), or null when none matched
     * @param fsType     its file-system type, or null
     * @param huge       its {@code huge=} super option, or {@code "never"} when absent
     * @param override   the bracketed shmem_enabled value ({@code never} when the file is absent)
     */
    public record Answer(Kind kind, String mountPoint, String fsType, String huge, String override) {
        /** True when a pool file there gets huge pages (ADVISE too: the pool mapping is madvised). */
        public boolean hugePages() {
            return kind != Kind.NONE;
        }

        /** One line for logs and errors: the mount, its type and option, and the answer. */
        public String describe() {
            return mountPoint == null ? "no mount found (" + kind + ")"
                    : "mount " + mountPoint + " (" + fsType + ", huge=" + huge + ", shmem_enabled " + override + "): "
                            + kind;
        }
    }

    /** The huge page size these pools use (x86-64 and aarch64 with 4 KiB base pages: PMD size). */
    public static final long HUGE_PAGE_BYTES = 2L << 20;

    static final Path MOUNTINFO = Path.of("/proc/self/mountinfo");
    static final Path SHMEM_ENABLED = Path.of("/sys/kernel/mm/transparent_hugepage/shmem_enabled");

    private PoolPages() {}

    /** Reads the kernel's files and answers for {@code directory} (which must exist). Blocking. */
    public static Answer of(Path directory) throws IOException {
        Path real = directory.toRealPath();
        String mountinfo = Files.readString(MOUNTINFO);
        String shmem;
        try {
            shmem = Files.readString(SHMEM_ENABLED);
        } catch (NoSuchFileException e) {
            shmem = "";
        }
        return classify(mountinfo, shmem, real.toString());
    }

    /**
     * The pure part: {@code mountinfo} is the text of {@code /proc/<pid>/mountinfo}, {@code shmemEnabled} that of
     * {@code shmem_enabled} (empty = absent), {@code realDirectory} an absolute path without symbolic links.
     */
    public static Answer classify(String mountinfo, String shmemEnabled, String realDirectory) {
        Objects.requireNonNull(realDirectory, "realDirectory");
        if (!realDirectory.startsWith("/")) {
            throw new IllegalArgumentException("not an absolute path: " + realDirectory);
        }
        String override = bracketed(shmemEnabled);
        Mount best = null;
        for (String line : mountinfo.split("\n")) {
            Mount m = Mount.parse(line);
            if (m != null && contains(m.point, realDirectory)
                    && (best == null || m.point.length() >= best.point.length())) {
                best = m; // >=: of stacked mounts on one point the later line is the visible one
            }
        }
        if (best == null) {
            return new Answer(Kind.NONE, null, null, "never", override);
        }
        String huge = best.option("huge");
        huge = huge == null ? "never" : huge;
        Kind kind;
        if (!best.fsType.equals("tmpfs")) {
            kind = Kind.NONE;
        } else if (override.equals("force")) {
            kind = Kind.HUGE;
        } else if (override.equals("deny")) {
            kind = Kind.NONE;
        } else {
            kind = switch (huge) {
                case "always", "within_size" -> Kind.HUGE;
                case "advise" -> Kind.ADVISE;
                default -> Kind.NONE;
            };
        }
        return new Answer(kind, best.point, best.fsType, huge, override);
    }

    /** The value in brackets, e.g. {@code never} of {@code "always within_size advise [never] deny force"}. */
    static String bracketed(String text) {
        int open = text.indexOf('[');
        int close = open < 0 ? -1 : text.indexOf(']', open);
        return close < 0 ? "never" : text.substring(open + 1, close).strip();
    }

    private static boolean contains(String mountPoint, String dir) {
        return mountPoint.equals("/") || dir.equals(mountPoint) || dir.startsWith(mountPoint + "/");
    }

    /** One mountinfo line: {@code id parent major:minor root point options [optional...] - fstype source super}. */
    private record Mount(String point, String fsType, List<String> superOptions) {
        static Mount parse(String line) {
            String[] f = line.strip().split(" ");
            int dash = -1;
            for (int i = 6; i < f.length; i++) {
                if (f[i].equals("-")) {
                    dash = i;
                    break;
                }
            }
            if (dash < 0 || dash + 1 >= f.length) {
                return null;
            }
            String superOpts = dash + 3 < f.length ? f[dash + 3] : "";
            return new Mount(unescape(f[4]), f[dash + 1], List.of(superOpts.split(",")));
        }

        String option(String name) {
            for (String o : superOptions) {
                if (o.startsWith(name + "=")) {
                    return o.substring(name.length() + 1);
                }
            }
            return null;
        }
    }

    /** mountinfo escapes space, tab, newline and backslash as {@code \040}, {@code \011}, {@code \012}, {@code \134}. */
    static String unescape(String field) {
        if (field.indexOf('\\') < 0) {
            return field;
        }
        StringBuilder out = new StringBuilder(field.length());
        for (int i = 0; i < field.length(); i++) {
            char c = field.charAt(i);
            if (c == '\\' && isOctal(field, i + 1)) {
                out.append((char) Integer.parseInt(field.substring(i + 1, i + 4), 8));
                i += 3;
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }

    private static boolean isOctal(String s, int from) {
        if (from + 3 > s.length()) {
            return false;
        }
        for (int i = from; i < from + 3; i++) {
            char c = s.charAt(i);
            if (c < '0' || c > '7') {
                return false;
            }
        }
        return true;
    }
}
