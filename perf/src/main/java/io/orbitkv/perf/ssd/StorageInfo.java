package io.orbitkv.perf.ssd;

import io.vertx.core.json.JsonObject;
import java.io.IOException;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/** Which file system and block device a directory lives on, for a bench report (read from the JDK and sysfs). */
final class StorageInfo {

    private StorageInfo() {
    }

    /** {@code filesystem}, {@code device} and, when sysfs knows the device, {@code rotational} and {@code model}. */
    static JsonObject of(Path dir) {
        JsonObject info = new JsonObject();
        try {
            FileStore store = Files.getFileStore(dir);
            info.put("filesystem", store.type()).put("device", store.name());
            String name = Path.of(store.name()).getFileName() == null ? "" : Path.of(store.name()).getFileName().toString();
            Path block = Path.of("/sys/class/block", name);
            if (!name.isEmpty() && Files.isDirectory(block)) {
                // A partition's queue and device attributes live on its parent disk.
                Path disk = Files.exists(block.resolve("partition")) ? block.toRealPath().getParent() : block;
                readAttribute(disk.resolve("queue/rotational")).ifPresent(v -> info.put("rotational", "1".equals(v)));
                readAttribute(disk.resolve("device/model")).ifPresent(v -> info.put("model", v));
            }
        } catch (IOException | RuntimeException e) {
            info.put("unknown", e.toString());
        }
        return info;
    }

    private static Optional<String> readAttribute(Path file) {
        try {
            return Optional.of(Files.readString(file).trim());
        } catch (IOException e) {
            return Optional.empty();
        }
    }
}
