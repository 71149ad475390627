package io.orbitkv.nativeio.mooncake;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Locale;

/**
 * Finds and loads {@code libtransfer_engine.so} (with {@code libasio.so}, which it finds through its
 * {@code $ORIGIN} rpath).
 *
 * <p>Where from, in order: the directory named by {@value #DIRECTORY_PROP_NAME} when that property is set (only
 * there: an operator's explicit choice is never second-guessed); else the pair carried as class-path resources under
 * {@value #RESOURCE_ROOT}/&lt;arch&gt;/ (the native jar and so the fat jar carry them when
 * {@code native/mooncake-te/build.sh} built them). Resources are copied into a fresh directory only this user can
 * read ({@code 0700}), loaded, and deleted at once: the mapping outlives the files, and nothing is left behind even
 * when the process is killed. The library is never unloaded (its static state and threads live in the process).
 *
 * <p>TE logs through glog to stderr; unless the operator set {@code GLOG_minloglevel}, it is set to 1 (warnings and
 * errors) before loading, because glog reads it once when the library initializes.
 */
@SuppressWarnings("restricted")
final class MooncakeLibrary {
    static final String DIRECTORY_PROP_NAME = "orbitkv.mooncake.dir";
    static final String RESOURCE_ROOT = "/native/mooncake-te";
    static final String ENGINE_LIBRARY = "libtransfer_engine.so";
    static final String ASIO_LIBRARY = "libasio.so";

    /** The loaded library and a description of where it came from (for {@code /health}). */
    record Loaded(SymbolLookup lookup, String origin) {}

    private MooncakeLibrary() {}

    static Loaded load() {
        String directory = System.getProperty(DIRECTORY_PROP_NAME);
        if (directory != null && !directory.isBlank()) {
            Path library = Path.of(directory).resolve(ENGINE_LIBRARY);
            if (!Files.isRegularFile(library)) {
                throw new UnsatisfiedLinkError(ENGINE_LIBRARY + " not found in " + directory + " (-D"
                        + DIRECTORY_PROP_NAME + ")");
            }
            return new Loaded(open(library), library.toString());
        }
        String resourceDir = RESOURCE_ROOT + "/" + architecture() + "/";
        if (MooncakeLibrary.class.getResource(resourceDir + ENGINE_LIBRARY) == null) {
            throw new UnsatisfiedLinkError("the Transfer Engine is not built into this build (no " + resourceDir
                    + ENGINE_LIBRARY + " on the class path; native/mooncake-te/build.sh builds it, or set -D"
                    + DIRECTORY_PROP_NAME + ")");
        }
        Path extracted = null;
        try {
            extracted = Files.createTempDirectory("orbitkv-mooncake-te-",
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            copy(resourceDir + ASIO_LIBRARY, extracted.resolve(ASIO_LIBRARY));
            copy(resourceDir + ENGINE_LIBRARY, extracted.resolve(ENGINE_LIBRARY));
            return new Loaded(open(extracted.resolve(ENGINE_LIBRARY)), "class path " + resourceDir + ENGINE_LIBRARY);
        } catch (IOException e) {
            UnsatisfiedLinkError error = new UnsatisfiedLinkError("cannot extract the Transfer Engine: " + e);
            error.initCause(e);
            throw error;
        } finally {
            if (extracted != null) {
                deleteQuietly(extracted.resolve(ENGINE_LIBRARY));
                deleteQuietly(extracted.resolve(ASIO_LIBRARY));
                deleteQuietly(extracted);
            }
        }
    }

    private static SymbolLookup open(Path library) {
        quietGlogUnlessConfigured();
        try {
            return SymbolLookup.libraryLookup(library, Arena.global());
        } catch (IllegalArgumentException e) { // dlopen's own message: a missing dependency, a foreign ELF...
            UnsatisfiedLinkError error = new UnsatisfiedLinkError("cannot load " + library + ": " + e.getMessage());
            error.initCause(e);
            throw error;
        }
    }

    private static void copy(String resource, Path target) throws IOException {
        try (InputStream in = MooncakeLibrary.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IOException("missing class-path resource " + resource);
            }
            Files.copy(in, target, StandardCopyOption.REPLACE_EXISTING);
        }
    }

    private static void deleteQuietly(Path path) {
        try {
            Files.deleteIfExists(path);
        } catch (IOException ignored) {
            // a leftover in a 0700 temporary directory is harmless
        }
    }

    static String architecture() {
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        return switch (arch) {
            case "amd64", "x86_64" -> "linux-x86_64";
            case "aarch64", "arm64" -> "linux-aarch64";
            default -> "linux-" + arch;
        };
    }

    private static void quietGlogUnlessConfigured() {
        if (System.getenv("GLOG_minloglevel") != null) {
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            Linker linker = Linker.nativeLinker();
            MemorySegment symbol = linker.defaultLookup().find("setenv").orElse(null);
            if (symbol == null) {
                return;
            }
            MethodHandle setenv = linker.downcallHandle(symbol, FunctionDescriptor.of(ValueLayout.JAVA_INT,
                    ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
            int ignored = (int) setenv.invokeExact(arena.allocateFrom("GLOG_minloglevel"), arena.allocateFrom("1"), 0);
        } catch (Throwable ignored) {
            // only log verbosity is at stake
        }
    }
}
