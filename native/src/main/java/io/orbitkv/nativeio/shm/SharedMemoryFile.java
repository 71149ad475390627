package io.orbitkv.nativeio.shm;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import io.orbitkv.nativeio.libc.Libc;
import io.orbitkv.nativeio.libc.NativeFileDescriptor;
import io.orbitkv.nativeio.libc.NativeIoException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

/**
 * An owner-only shared-memory file mapped read-write into this process.
 *
 * <p>Design note (ownership): the creator ({@link #create}) owns the file: it creates it exclusively with mode 0600,
 * reserves every byte up front with one {@code fallocate} (so a full tmpfs fails here with a clear error instead of a SIGBUS on first touch),
 * and removes it on {@link #close()}. Before reserving it sizes and maps the file and advises the mapping
 * {@code MADV_HUGEPAGE}, so a tmpfs mounted {@code huge=always|within_size|advise} backs the pool with 2 MiB pages
 * ({@link PoolPages}); on {@code huge=advise} the reservation faults the pages in through that mapping first. A mapper ({@link #map}) — an engine process — only maps an existing file and
 * never removes it. The mapping lives in a shared {@link Arena}: the segment stays valid until {@code close()}, after
 * which any access fails with {@link IllegalStateException} instead of touching unmapped memory. {@code close()} is
 * idempotent.
 */
public final class SharedMemoryFile implements AutoCloseable {
    private static final Set<PosixFilePermission> OWNER_ONLY =
            PosixFilePermissions.fromString("rw-------");

    private final Path path;
    private final long sizeBytes;
    private final boolean owner;
    private final Arena arena;
    private final MemorySegment segment;
    private boolean closed;

    private SharedMemoryFile(Path path, long sizeBytes, boolean owner, Arena arena, MemorySegment segment) {
        this.path = path;
        this.sizeBytes = sizeBytes;
        this.owner = owner;
        this.arena = arena;
        this.segment = segment;
    }

    /**
     * Creates {@code path} exclusively (mode 0600), reserves {@code sizeBytes} and maps it; reads the page kind of its
     * directory itself ({@link PoolPages#of}: NONE when that cannot be told). A caller that already knows it (the
     * Manager asks once at start) passes it to {@link #create(Path, long, PoolPages.Kind)}.
     */
    public static SharedMemoryFile create(Path path, long sizeBytes) throws IOException {
        PoolPages.Kind pages;
        try {
            pages = PoolPages.of(path.toAbsolutePath().getParent()).kind();
        } catch (IOException e) {
            pages = PoolPages.Kind.NONE; // fallocate alone reserves; only huge=advise would miss its huge pages
        }
        return create(path, sizeBytes, pages);
    }

    /**
     * Creates {@code path} exclusively (mode 0600), reserves {@code sizeBytes} and maps it, for a directory whose
     * {@link PoolPages} kind is {@code pages}: ADVISE reserves by faulting every page in through the madvised mapping
     * (huge pages), the others by {@code fallocate} alone.
     */
    public static SharedMemoryFile create(Path path, long sizeBytes, PoolPages.Kind pages) throws IOException {
        java.util.Objects.requireNonNull(pages, "pages");
        if (sizeBytes <= 0) {
            throw new IllegalArgumentException("shared-memory size must be positive, got " + sizeBytes);
        }
        Files.createFile(path, PosixFilePermissions.asFileAttribute(OWNER_ONLY));
        // The umask may not strip bits from an explicit attribute on every file system; set it again to be sure.
        Files.setPosixFilePermissions(path, OWNER_ONLY);
        Arena arena = Arena.ofShared();
        try (FileChannel channel = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            // Size first, then map and advise, then reserve: tmpfs picks a page's size when it allocates it, and
            // huge=within_size looks at the file size, huge=advise at the mapping's MADV_HUGEPAGE (see PoolPages).
            try (NativeFileDescriptor fd = Libc.open(path, Libc.O_RDWR | Libc.O_CLOEXEC, Libc.MODE_0600)) {
                fd.truncate(sizeBytes); // sparse: allocates nothing yet
            }
            MemorySegment segment = channel.map(FileChannel.MapMode.READ_WRITE, 0, sizeBytes, arena);
            boolean advised = adviseHugePages(path, segment);
            reserve(path, channel, sizeBytes, advised && pages == PoolPages.Kind.ADVISE ? segment : null);
            return new SharedMemoryFile(path, sizeBytes, true, arena, segment);
        } catch (IOException | RuntimeException e) {
            arena.close();
            Files.deleteIfExists(path);
            throw e;
        }
    }

    /** Maps an existing shared-memory file created by another process; the caller never removes it. */
    public static SharedMemoryFile map(Path path, long sizeBytes) throws IOException {
        Arena arena = Arena.ofShared();
        try (FileChannel channel = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            long actual = channel.size();
            if (actual < sizeBytes) {
                throw new IOException("shared-memory file " + path + " holds " + actual + " bytes, expected " + sizeBytes);
            }
            MemorySegment segment = channel.map(FileChannel.MapMode.READ_WRITE, 0, sizeBytes, arena);
            adviseHugePages(path, segment); // this mapping, too, maps the file's huge pages whole (huge=advise)
            return new SharedMemoryFile(path, sizeBytes, false, arena, segment);
        } catch (IOException | RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    /**
     * Reserves every byte with one {@code fallocate} (tmpfs allocates its pages now), so a file system without space
     * fails here with "No space left on device" rather than later with SIGBUS in a memcpy. A file system without
     * {@code fallocate} (EOPNOTSUPP) falls back to writing one byte into every 4 KiB, which reserves the same.
     */
    private static void reserve(Path path, FileChannel channel, long sizeBytes, MemorySegment populate)
            throws IOException {
        // A full tmpfs: populate stops with EFAULT (the fault it met was SIGBUS; madvise reports it, nobody gets the
        // signal) and fallocate then fails with ENOSPC, the error the caller sees.
        if (populate != null) {
            // huge=advise: fallocate has no mapping, so it would allocate 4 KiB pages; faulting every page in through
            // the madvised mapping allocates 2 MiB ones. Any failure is left to fallocate below; EINVAL = a kernel
            // before 5.14 (then 4 KiB pages on huge=advise).
            try {
                Libc.madvise(populate, Libc.MADV_POPULATE_WRITE, path);
            } catch (NativeIoException e) {
                // fallocate below reserves, or reports why it cannot.
            }
        }
        try (NativeFileDescriptor fd = Libc.open(path, Libc.O_RDWR | Libc.O_CLOEXEC, Libc.MODE_0600)) {
            fd.fallocate(0, 0, sizeBytes);
        } catch (NativeIoException e) {
            if (e.errno() != EOPNOTSUPP) {
                throw new IOException("could not reserve " + sizeBytes + " bytes of shared memory in " + path + ": "
                        + e.getMessage(), e);
            }
            writeEveryPage(channel, sizeBytes);
        }
        if (channel.size() != sizeBytes) {
            throw new IOException("could not reserve " + sizeBytes + " bytes of shared memory");
        }
    }

    private static final int EOPNOTSUPP = 95;

    /**
     * {@code madvise(MADV_HUGEPAGE)} on the fresh mapping; false: a kernel without transparent huge pages (EINVAL,
     * ignored); any other error fails the create or map.
     */
    private static boolean adviseHugePages(Path path, MemorySegment segment) throws IOException {
        try {
            Libc.madvise(segment, Libc.MADV_HUGEPAGE, path);
            return true;
        } catch (NativeIoException e) {
            if (e.errno() != NativeIoException.EINVAL) {
                throw new IOException("could not advise huge pages for the shared memory " + path + ": "
                        + e.getMessage(), e);
            }
            return false;
        }
    }

    private static void writeEveryPage(FileChannel channel, long sizeBytes) throws IOException {
        ByteBuffer zero = ByteBuffer.allocate(1);
        for (long offset = 0; offset < sizeBytes; offset += 4096) {
            zero.clear();
            channel.write(zero, offset);
        }
        zero.clear();
        channel.write(zero, sizeBytes - 1);
    }

    public Path path() {
        return path;
    }

    public long sizeBytes() {
        return sizeBytes;
    }

    /** The whole mapping; valid until {@link #close()}. */
    public MemorySegment segment() {
        return segment;
    }

    public boolean isOwner() {
        return owner;
    }

    @Override
    public synchronized void close() throws IOException {
        if (closed) {
            return;
        }
        closed = true;
        arena.close();
        if (owner) {
            Files.deleteIfExists(path);
        }
    }
}
