package io.orbitkv.nativeio.libc;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.extension.AnnotatedElementContext;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.io.TempDirFactory;

/** Temporary directories under /tmp explicitly: the tests need a real disk file system (ext4 here) for O_DIRECT. */
public final class TmpDirFactory implements TempDirFactory {

    @Override
    public Path createTempDirectory(AnnotatedElementContext elementContext, ExtensionContext extensionContext)
            throws IOException {
        return Files.createTempDirectory(Path.of("/tmp"), "orbitkv-native-");
    }
}
