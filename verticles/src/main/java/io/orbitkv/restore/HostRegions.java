package io.orbitkv.restore;

import io.orbitkv.common.OrbitException;
import io.orbitkv.nativeio.libc.Libc;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.protocol.engine.ErrorReason;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

/**
 * Maps an engine's host region after checking it is one the Manager may write: an absolute path to a regular file
 * (not a link), owned by the Manager's user, with no group or other permission bits, at least the registered size.
 * Blocking file calls: run on a worker thread. The caller owns the returned mapping and closes it (unmapping only;
 * the engine created the file and removes it).
 */
final class HostRegions {
    private static final Set<PosixFilePermission> GROUP_OR_OTHER = EnumSet.of(PosixFilePermission.GROUP_READ,
            PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.OTHERS_READ,
            PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);

    private HostRegions() {}

    static SharedMemoryFile map(String pathText, long sizeBytes) {
        Path path = Path.of(pathText);
        if (!path.isAbsolute()) {
            throw invalid("host region path must be absolute");
        }
        try {
            PosixFileAttributes attributes = Files.readAttributes(path, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
            if (!attributes.isRegularFile()) {
                throw invalid("host region is not a regular file");
            }
            int uid = (Integer) Files.getAttribute(path, "unix:uid", LinkOption.NOFOLLOW_LINKS);
            if (uid != Libc.effectiveUid()) {
                throw invalid("host region is not owned by the Manager's user");
            }
            if (attributes.permissions().stream().anyMatch(GROUP_OR_OTHER::contains)) {
                throw invalid("host region must be owner-only (no group/other permission bits)");
            }
            if (attributes.size() < sizeBytes) {
                throw invalid("host region holds " + attributes.size() + " bytes, registered as " + sizeBytes);
            }
            return SharedMemoryFile.map(path, sizeBytes);
        } catch (IOException e) {
            throw invalid("host region cannot be mapped: " + e.getClass().getSimpleName());
        }
    }

    private static OrbitException invalid(String why) {
        return new OrbitException(ErrorReason.INVALID_DESTINATION, why);
    }
}
