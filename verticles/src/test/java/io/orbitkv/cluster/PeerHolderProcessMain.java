package io.orbitkv.cluster;

import io.orbitkv.it.RunningManager;
import io.orbitkv.manager.Manager;
import io.orbitkv.peer.PeerCommands;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.StateKey;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * A requester Manager in its own process that acquires a peer lease and holds it until it is killed (the fault test
 * of a requester that dies holding a source lease). Arguments: {@code --set key=value} as {@link ManagerProcessMain},
 * and {@code --hold FILE}: once FILE exists (the test writes it when it knows the source's generations) this Manager
 * acquires those pages from the named source through its own peer role (source lease + local slots), prints
 * {@code PEER HELD <pages>} and keeps holding. FILE: {@code <member> <incarnation>}, the namespace in hex, then one
 * {@code <group> <block hash hex> <generation>} line per page.
 */
public final class PeerHolderProcessMain {
    private PeerHolderProcessMain() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> settings = new LinkedHashMap<>();
        Path hold = null;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--set") && i + 1 < args.length) {
                String kv = args[++i];
                settings.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
            } else if (args[i].equals("--hold") && i + 1 < args.length) {
                hold = Path.of(args[++i]);
            }
        }
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
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (hold != null && !Files.exists(hold) && System.nanoTime() < deadline) {
            Thread.sleep(20); // the test writes the file once it knows the generations
        }
        if (hold != null && Files.exists(hold)) {
            List<String> lines = Files.readAllLines(hold);
            String[] owner = lines.get(0).split(" ");
            byte[] namespace = HexFormat.of().parseHex(lines.get(1));
            List<StateKey> keys = new ArrayList<>();
            List<Long> generations = new ArrayList<>();
            for (String line : lines.subList(2, lines.size())) {
                String[] f = line.split(" ");
                keys.add(StateKey.of(namespace, Integer.parseInt(f[0]), HexFormat.of().parseHex(f[1])));
                generations.add(Long.parseLong(f[2]));
            }
            PeerCommands.Acquired held = manager.peer().orElseThrow().acquire(new PeerOwner(owner[0], Long.parseLong(owner[1])),
                    namespace, keys, generations, java.time.Duration.ofSeconds(60)).await(30, TimeUnit.SECONDS);
            System.out.println("PEER HELD " + held.keys().size());
            System.out.flush();
        }
        stopped.await();
    }

    /** The command that runs this main with the test JVM's class path, flags and event-loop count. */
    static List<String> command(Path hold) {
        List<String> command = new ArrayList<>(ManagerProcessMain.command());
        command.set(command.size() - 1, PeerHolderProcessMain.class.getName());
        command.add("--hold");
        command.add(hold.toString());
        return command;
    }
}
