package io.orbitkv.cluster;

import io.orbitkv.manager.Manager;
import io.orbitkv.it.RunningManager;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * A Manager in its own process for the cluster tests (the fat jar's {@code orbitkv manager} is built after these
 * tests run): {@code --set key=value} arguments over the built-in defaults, the same ready line, stopped by SIGTERM.
 */
public final class ManagerProcessMain {
    private ManagerProcessMain() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> settings = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--set") && i + 1 < args.length) {
                String kv = args[++i];
                settings.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
            }
        }
        // The event-loop count the build asks of the integration suite (RunningManager.EVENT_LOOPS_PROPERTY) holds here too.
        Manager manager = Manager.start(RunningManager.config(settings)).await(120, TimeUnit.SECONDS);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                manager.close();
            } catch (Exception e) {
                System.err.println("stop failed: " + e);
            }
            stopped.countDown();
        }));
        System.out.println(manager.readyLine());
        System.out.flush();
        stopped.await();
    }

    /** The command that runs this main with the test JVM's class path, flags and event-loop count. */
    static List<String> command() {
        String javaBinary = ProcessHandle.current().info().command().orElse("java");
        return List.of(javaBinary, "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
                "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
                "-D" + RunningManager.EVENT_LOOPS_PROPERTY + "=" + System.getProperty(RunningManager.EVENT_LOOPS_PROPERTY, ""),
                "-cp", System.getProperty("java.class.path"), ManagerProcessMain.class.getName());
    }
}
