package io.orbitkv.perf.dram;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import jdk.jfr.Configuration;
import jdk.jfr.Recording;

/**
 * {@code bench dram --profile=DIR}: a JFR recording of the measured query window of part (b) only (not the cycles,
 * the warm-up or part (c)), written to {@code DIR/query.jfr}. The Manager runs in this JVM, so one recording holds
 * both sides of the call: the bench's thread, the gRPC client's loop and the Manager's loops. The JDK's
 * {@code profile} settings with execution samples every millisecond (the query is ~100 µs: the default 10–20 ms
 * period gives too few samples per run) and allocation samples. Reading it: perf/README.md ("bench dram").
 *
 * <p>Design note (ownership): the recording is this object's until {@link #stop} writes and closes it; a recorder
 * that cannot start is reported on stderr and the run goes on unprofiled.
 */
final class QueryProfile {
    private final Path file;
    private final Recording recording;

    private QueryProfile(Path file, Recording recording) {
        this.file = file;
        this.recording = recording;
    }

    /** Starts recording into {@code dir}, or answers null without {@code --profile} or when JFR cannot start. */
    static QueryProfile start(String dir) {
        return start(dir, "query.jfr");
    }

    /** The same recording into {@code dir/fileName} (another measured window of the bench). */
    static QueryProfile start(String dir, String fileName) {
        if (dir.isEmpty()) {
            return null;
        }
        try {
            Path directory = Path.of(dir);
            Files.createDirectories(directory);
            Recording recording = new Recording(Configuration.getConfiguration("profile"));
            recording.setName("bench-dram-query");
            recording.enable("jdk.ExecutionSample").withPeriod(Duration.ofMillis(1));
            recording.enable("jdk.NativeMethodSample").withPeriod(Duration.ofMillis(1));
            recording.start();
            return new QueryProfile(directory.resolve(fileName), recording);
        } catch (Exception e) {
            System.err.println("bench dram: --profile: no JFR recording: " + e);
            return null;
        }
    }

    /** Stops and writes the recording; answers the file written (or why not). */
    String stop() {
        try {
            recording.stop();
            recording.dump(file);
            System.err.println("bench dram: --profile: " + file);
            return file.toString();
        } catch (Exception e) {
            System.err.println("bench dram: --profile: the recording was not written: " + e);
            return "not written: " + e.getMessage();
        } finally {
            recording.close();
        }
    }
}
