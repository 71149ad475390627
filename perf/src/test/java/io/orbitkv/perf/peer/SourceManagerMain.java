package io.orbitkv.perf.peer;

import io.orbitkv.manager.Manager;
import io.orbitkv.manager.ManagerConfig;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * The source Manager of {@code bench peer} in its own process for the tests (the fat jar's {@code orbitkv manager} is
 * built after them): {@code --set key=value} arguments, the Manager's ready line, stopped by SIGTERM.
 */
public final class SourceManagerMain {
    private SourceManagerMain() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> settings = new LinkedHashMap<>();
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equals("--set")) {
                String kv = args[++i];
                settings.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
            }
        }
        Manager manager = Manager.start(ManagerConfig.from(settings)).await(120, TimeUnit.SECONDS);
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

    /** This main with the test JVM's class path. */
    static List<String> command() {
        return List.of(ProcessHandle.current().info().command().orElse("java"), "--enable-native-access=ALL-UNNAMED",
                "--sun-misc-unsafe-memory-access=allow", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-cp", System.getProperty("java.class.path"), SourceManagerMain.class.getName());
    }
}
