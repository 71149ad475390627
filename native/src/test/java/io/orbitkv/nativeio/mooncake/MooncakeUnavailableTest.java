package io.orbitkv.nativeio.mooncake;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The unavailable path, whatever this machine built: a child JVM is pointed (with {@code -Dorbitkv.mooncake.dir}) at
 * a directory without the library, or with a file that is not one. The probe must keep a typed cause naming it, every
 * entry point must refuse with that same cause, and the process must end normally.
 */
class MooncakeUnavailableTest {
    /** A real ELF shared object that is not the Transfer Engine (zlib is on every machine that runs a JDK here). */
    private static final Path SOME_SHARED_LIBRARY = Stream.of("/lib/x86_64-linux-gnu/libz.so.1",
                    "/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib/aarch64-linux-gnu/libz.so.1", "/lib64/libz.so.1")
            .map(Path::of).filter(Files::isRegularFile).findFirst()
            .orElseThrow(() -> new IllegalStateException("no libz.so.1 found to stand in for a foreign library"));

    @Test
    void withoutTheLibraryTheProbeKeepsTheCauseAndEveryEntryPointRefusesWithIt(@TempDir Path empty) throws Exception {
        List<String> out = probeIn(empty);
        assertThat(out).contains("available=false", "loaded=false", "causeType=UnsatisfiedLinkError", "refused=true",
                "live=0");
        assertThat(out).anySatisfy(line -> assertThat(line).startsWith("cause=")
                .contains("libtransfer_engine.so not found in " + empty));
    }

    @Test
    void aFileThatIsNotALibraryIsRefusedWithTheLoadersReason(@TempDir Path dir) throws Exception {
        Files.writeString(dir.resolve(MooncakeLibrary.ENGINE_LIBRARY), "not an ELF object");
        List<String> out = probeIn(dir);
        assertThat(out).contains("available=false", "causeType=UnsatisfiedLinkError", "refused=true", "live=0");
        assertThat(out).anySatisfy(line -> assertThat(line).startsWith("cause=cannot load ")
                .contains(dir.resolve(MooncakeLibrary.ENGINE_LIBRARY).toString()));
    }

    @Test
    void aLibraryWithoutTheEnginesSymbolsIsRefusedNamingTheMissingOne(@TempDir Path dir) throws Exception {
        Files.copy(SOME_SHARED_LIBRARY, dir.resolve(MooncakeLibrary.ENGINE_LIBRARY));
        List<String> out = probeIn(dir);
        assertThat(out).contains("available=false", "causeType=UnsatisfiedLinkError", "refused=true", "live=0",
                "cause=Transfer Engine symbol not found: createTransferEngine");
    }

    @Test
    void librariesOnTheClassPathAreExtractedPrivatelyLoadedAndDeleted(@TempDir Path dir) throws Exception {
        // A real shared object in the jar's place: loading it proves the extraction; its missing symbols stop the probe.
        Path resources = dir.resolve("classes");
        Path platform = resources.resolve(MooncakeLibrary.RESOURCE_ROOT.substring(1)).resolve(MooncakeLibrary.architecture());
        Files.createDirectories(platform);
        Files.copy(SOME_SHARED_LIBRARY, platform.resolve(MooncakeLibrary.ENGINE_LIBRARY));
        Files.copy(SOME_SHARED_LIBRARY, platform.resolve(MooncakeLibrary.ASIO_LIBRARY));
        Path tmp = Files.createDirectories(dir.resolve("tmp"));
        List<String> out = run(List.of("-Djava.io.tmpdir=" + tmp), resources + File.pathSeparator
                + System.getProperty("java.class.path"));
        assertThat(out).contains("available=false", "refused=true", "live=0",
                "cause=Transfer Engine symbol not found: createTransferEngine");
        try (Stream<Path> left = Files.list(tmp)) {
            assertThat(left).as("extracted libraries left behind").isEmpty();
        }
    }

    @Test
    void theStatusReportNamesTheCauseWhenUnavailableAndTheOriginWhenLoaded() {
        MooncakeStatus status = MooncakeTransferEngine.status();
        assertThat(status.loaded()).isEqualTo(MooncakeTransferEngine.isAvailable());
        if (status.loaded()) {
            assertThat(status.origin()).contains(MooncakeLibrary.ENGINE_LIBRARY);
            assertThat(status.cause()).isNull();
        } else {
            assertThat(status.origin()).isNull();
            assertThat(status.cause()).isEqualTo(MooncakeTransferEngine.unavailabilityCause().getMessage());
        }
    }

    private static List<String> probeIn(Path directory) throws IOException, InterruptedException {
        return run(List.of("-D" + MooncakeLibrary.DIRECTORY_PROP_NAME + "=" + directory),
                System.getProperty("java.class.path"));
    }

    private static List<String> run(List<String> properties, String classPath) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("--enable-native-access=ALL-UNNAMED");
        command.addAll(properties);
        command.add("-cp");
        command.add(classPath);
        command.add(MooncakeProbeMain.class.getName());
        Process child = new ProcessBuilder(command).redirectErrorStream(true).start();
        try {
            byte[] output = child.getInputStream().readAllBytes();
            assertThat(child.waitFor(60, TimeUnit.SECONDS)).as("probe child exited").isTrue();
            String text = new String(output, StandardCharsets.UTF_8);
            assertThat(child.exitValue()).as("probe child exit status; output:\n%s", text).isZero();
            return text.lines().toList();
        } finally {
            child.destroyForcibly();
        }
    }
}
