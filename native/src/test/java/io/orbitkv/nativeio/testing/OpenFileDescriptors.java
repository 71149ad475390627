package io.orbitkv.nativeio.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;

/** Counts this process's open descriptors through /proc/self/fd, to assert that tests leak none. */
public final class OpenFileDescriptors {

    private OpenFileDescriptors() {
    }

    public static long count() {
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
