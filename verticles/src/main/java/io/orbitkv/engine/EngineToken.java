package io.orbitkv.engine;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.Set;

/**
 * The engine token file: read when present, created (0600, 32 random bytes as hex) when absent.
 *
 * <p>Design note: the token is the secret every engine call presents, so a token file another user can read or
 * replace makes it worthless. An existing file must be a regular file (not a link), owned by the Manager's effective
 * uid, with no group or other permission bits; otherwise startup stops with {@link InsecureTokenFileException}
 * naming the problem and the fix (the Manager reports it like a configuration error, exit code 2). A new file is
 * written to a sibling created 0600 and renamed into place, so it is never visible with other permissions.
 */
public final class EngineToken {
    /** The token file exists but is not safe to trust. */
    public static final class InsecureTokenFileException extends IOException {
        InsecureTokenFileException(String message) {
            super(message);
        }
    }

    private static final Set<PosixFilePermission> GROUP_OR_OTHERS = EnumSet.of(
            PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE,
            PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);

    private EngineToken() {}

    /** Reads the token file, creating it when absent; {@code ownerUid} is the Manager's effective uid. */
    public static String loadOrCreate(Path tokenFile, int ownerUid) throws IOException {
        if (Files.exists(tokenFile, LinkOption.NOFOLLOW_LINKS)) {
            requireOwnerOnly(tokenFile, ownerUid);
            String existing = Files.readString(tokenFile).strip();
            if (existing.length() < 16) {
                throw new IOException("engine token in " + tokenFile + " is shorter than 16 characters");
            }
            return existing;
        }
        byte[] secret = new byte[32];
        new SecureRandom().nextBytes(secret);
        String token = HexFormat.of().formatHex(secret);
        Files.createDirectories(tokenFile.toAbsolutePath().getParent());
        Path tmp = tokenFile.resolveSibling(tokenFile.getFileName() + ".tmp");
        Files.deleteIfExists(tmp);
        Files.createFile(tmp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        Files.writeString(tmp, token + "\n");
        Files.move(tmp, tokenFile, StandardCopyOption.ATOMIC_MOVE);
        return token;
    }

    /** Refuses a token file that is a link, another user's, or readable/writable by group or others. */
    static void requireOwnerOnly(Path tokenFile, int ownerUid) throws IOException {
        PosixFileAttributes attributes = Files.readAttributes(tokenFile, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        if (!attributes.isRegularFile()) {
            throw new InsecureTokenFileException("engine token file " + tokenFile + " is not a regular file (a link or a"
                    + " directory): point auth.token-file at the file itself");
        }
        int uid = (Integer) Files.getAttribute(tokenFile, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        if (uid != ownerUid) {
            throw new InsecureTokenFileException("engine token file " + tokenFile + " is owned by uid " + uid
                    + ", not by the Manager's uid " + ownerUid + ": another user could read or replace it");
        }
        Set<PosixFilePermission> loose = EnumSet.noneOf(PosixFilePermission.class);
        loose.addAll(attributes.permissions());
        loose.retainAll(GROUP_OR_OTHERS);
        if (!loose.isEmpty()) {
            throw new InsecureTokenFileException("engine token file " + tokenFile + " has mode "
                    + PosixFilePermissions.toString(attributes.permissions()) + ": group or others may use it; run"
                    + " chmod 600 " + tokenFile);
        }
    }
}
