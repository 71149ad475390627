package io.orbitkv.perf.peer;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import jdk.jfr.Configuration;
import jdk.jfr.Recording;

/**
 * {@code bench peer --profile=DIR}: profiles of one mode's measured window only (not the pool prefault, the warm-ups
 * or the baselines). The requester (this JVM) records JFR with the JDK's {@code profile} settings through
 * {@link Recording}; the source process gets the same through {@code jcmd PID JFR.start/JFR.dump}; and when
 * {@code perf} is on the PATH, {@code perf record -e cpu-clock -g} samples both processes, kernel included (where a
 * transfer loop's time goes is mostly in the kernel: recv and sendfile copies, page faults). Files:
 * {@code DIR/MODE-requester.jfr}, {@code DIR/MODE-source.jfr}, {@code DIR/MODE.perf.data}; at the window's end both JVMs
 * write their JIT symbol maps ({@code jcmd PID Compiler.perfmap}: {@code /tmp/perf-PID.map}, where perf looks), so
 * perf names compiled Java frames instead of bare addresses. Reading them: perf/README.md ("bench peer", profiling).
 *
 * <p>Design note (ownership): the window owns its recording and the perf process; {@link #close} stops and writes
 * them (a perf that does not stop on SIGINT within 10 s is killed by pid). A profiler that cannot start is reported on
 * stderr and left out; it never fails the run.
 */
final class BenchProfile implements AutoCloseable {
    private final Path dir;
    private final String mode;
    private final long sourcePid;
    private final Recording recording;
    private final boolean sourceRecording;
    private final Process perf;
    private final List<String> written = new ArrayList<>();

    private BenchProfile(Path dir, String mode, long sourcePid) {
        this.dir = dir;
        this.mode = mode;
        this.sourcePid = sourcePid;
        Recording r = null;
        try {
            r = new Recording(Configuration.getConfiguration("profile"));
            r.setName("bench-peer-" + mode);
            r.start();
        } catch (Exception e) {
            System.err.println("bench peer: --profile: no JFR recording of the requester: " + e);
        }
        this.recording = r;
        this.sourceRecording = jcmd(sourcePid, "JFR.start", "name=bench-peer", "settings=profile");
        Process p = null;
        try {
            p = new ProcessBuilder("perf", "record", "-q", "-e", "cpu-clock", "-F", "499", "-g", "-p",
                    ProcessHandle.current().pid() + "," + sourcePid, "-o", dir.resolve(mode + ".perf.data").toString())
                    .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        } catch (IOException e) {
            System.err.println("bench peer: --profile: perf is not available (" + e.getMessage() + "): JFR only");
        }
        this.perf = p;
    }

    /** Starts the profilers of {@code mode}'s measured window, or answers null without {@code --profile}. */
    static BenchProfile start(String dirArg, String mode, long sourcePid) throws IOException {
        if (dirArg.isEmpty()) {
            return null;
        }
        Path dir = Path.of(dirArg);
        Files.createDirectories(dir);
        return new BenchProfile(dir, mode, sourcePid);
    }

    private static boolean jcmd(long pid, String... command) {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "jcmd").toString(),
                String.valueOf(pid)));
        cmd.addAll(List.of(command));
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            return p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0;
        } catch (IOException e) {
            System.err.println("bench peer: --profile: jcmd failed: " + e.getMessage());
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** The files written (after {@link #close}). */
    List<String> files() {
        return written;
    }

    @Override
    public void close() throws Exception {
        if (recording != null) {
            Path file = dir.resolve(mode + "-requester.jfr");
            recording.stop();
            recording.dump(file);
            recording.close();
            written.add(file.toString());
        }
        if (sourceRecording) {
            Path file = dir.resolve(mode + "-source.jfr");
            if (jcmd(sourcePid, "JFR.dump", "name=bench-peer", "filename=" + file)
                    && jcmd(sourcePid, "JFR.stop", "name=bench-peer")) {
                written.add(file.toString());
            }
        }
        if (perf != null) {
            for (long pid : new long[] {ProcessHandle.current().pid(), sourcePid}) {
                if (!jcmd(pid, "Compiler.perfmap")) {
                    System.err.println("bench peer: --profile: no JIT symbol map of pid " + pid);
                }
            }
            new ProcessBuilder("kill", "-INT", String.valueOf(perf.pid())).start().waitFor(10, TimeUnit.SECONDS);
            // on a loaded machine perf may need a while to write its buffers out; killed, it leaves a truncated file
            if (!perf.waitFor(60, TimeUnit.SECONDS)) {
                perf.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            } else {
                written.add(dir.resolve(mode + ".perf.data").toString());
            }
        }
        System.err.println("bench peer: --profile: " + mode + ": " + written);
    }
}
