package io.orbitkv.manager;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Removes pool files left in the shared-memory directory by Managers that died without stopping (kill -9, OOM).
 * A pool file is named {@code orbitkv-pool-<pid>-<incarnation>}; one whose process no longer exists and that this
 * user owns is unlinked. Engines that still map it keep their mapping; only the name goes.
 */
public final class StalePools {
    static final String PREFIX = "orbitkv-pool-";
    private static final Pattern NAME = Pattern.compile(Pattern.quote(PREFIX) + "(\\d+)-[0-9a-f]+");

    private StalePools() {}

    public static List<Path> removeDead(Path shmDir) throws IOException {
        List<Path> removed = new ArrayList<>();
        String me = System.getProperty("user.name");
        try (DirectoryStream<Path> files = Files.newDirectoryStream(shmDir, PREFIX + "*")) {
            for (Path file : files) {
                Matcher m = NAME.matcher(file.getFileName().toString());
                if (!m.matches()) {
                    continue;
                }
                long pid = Long.parseLong(m.group(1));
                boolean alive = ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
                if (!alive && Files.getOwner(file).getName().equals(me) && Files.deleteIfExists(file)) {
                    removed.add(file);
                }
            }
        }
        return removed;
    }
}
