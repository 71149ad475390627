package io.orbitkv.perf.dram;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import jdk.jfr.Configuration;
import jdk.jfr.Recording;

/**
 * {@code bench dram --profile-cycle=DIR}: profiles of the timed publish→restore rounds only (not the warm-ups, the calls
 * alone or the query parts). This JVM holds the Manager and the engine, so one JFR recording with the JDK's
 * {@code profile} settings sees both ({@code DIR/dram-cycle.jfr}: where CPU goes, allocations, GC, thread parks).
 * When {@code perf} is on the PATH, {@code perf record} also takes this process's scheduler events
 * ({@code sched_switch}, {@code sched_wakeup}; {@code DIR/dram-cycle.sched.perf}): {@code perf sched latency -i FILE}
 * then says per thread how long a woken thread waited for a CPU, which no Java profiler shows and which is where a
 * control call after a long copy loses its time on a loaded or idling VM. Reading them: perf/README.md ("bench dram").
 *
 * <p>Design note (ownership): the profile owns its recording and the perf process; {@link #stop} stops and writes
 * them (a perf that does not stop on SIGINT within 10 s is killed by pid). A profiler that cannot start is reported
 * on stderr and left out; it never fails the run.
 */
final class CycleProfile {
    private final Path dir;
    private final Recording recording;
    private final Process perf;

    private CycleProfile(Path dir) {
        this.dir = dir;
        Recording r = null;
        try {
            r = new Recording(Configuration.getConfiguration("profile"));
            r.setName("bench-dram-cycle");
            r.start();
        } catch (Exception e) {
            System.err.println("bench dram: --profile-cycle: no JFR recording: " + e);
        }
        this.recording = r;
        Process p = null;
        try {
            p = new ProcessBuilder("perf", "record", "-q", "-e", "sched:sched_switch", "-e", "sched:sched_wakeup",
                    "-p", String.valueOf(ProcessHandle.current().pid()), "-o", schedFile().toString())
                    .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        } catch (IOException e) {
            System.err.println("bench dram: --profile-cycle: perf is not available (" + e.getMessage() + "): JFR only");
        }
        this.perf = p;
    }

    /** Starts the profilers of the timed rounds, or answers null without {@code --profile-cycle}. */
    static CycleProfile start(String dirArg) throws IOException {
        if (dirArg.isEmpty()) {
            return null;
        }
        Path dir = Path.of(dirArg);
        Files.createDirectories(dir);
        return new CycleProfile(dir);
    }

    private Path schedFile() {
        return dir.resolve("dram-cycle.sched.perf");
    }

    /** Stops both profilers and answers the files written. */
    List<String> stop() throws IOException, InterruptedException {
        List<String> written = new ArrayList<>();
        if (recording != null) {
            Path file = dir.resolve("dram-cycle.jfr");
            recording.stop();
            recording.dump(file);
            recording.close();
            written.add(file.toString());
        }
        if (perf != null) {
            new ProcessBuilder("kill", "-INT", String.valueOf(perf.pid())).start().waitFor(10, TimeUnit.SECONDS);
            if (perf.waitFor(10, TimeUnit.SECONDS) && Files.exists(schedFile())) {
                written.add(schedFile().toString());
            } else {
                perf.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        }
        System.err.println("bench dram: --profile-cycle: " + written);
        return written;
    }
}
