package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assumptions.assumeThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.manager.Manager;
import io.orbitkv.protocol.engine.*;
import java.io.File;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Faults of the SSD tier seen through a whole Manager: the DRAM path goes on, and nothing wrong is ever served. */
@Timeout(120)
class SsdFaultIT {
    static final int PAGE = 1 << 20;

    static boolean run(String... command) throws Exception {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD)
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null"))).start();
        boolean done = p.waitFor(30, TimeUnit.SECONDS);
        p.getInputStream().close();
        p.getOutputStream().close();
        p.getErrorStream().close();
        return done && p.exitValue() == 0;
    }

    static Manager start(Path data, Path ssdDir, String capacity) throws Exception {
        return Manager.start(RunningManager.config(Map.of("data-dir", data.toString(), "pool.size", "16MiB",
                "grpc.tcp-port", "0", "metrics.port", "0", "ssd.dir", ssdDir.toString(), "ssd.capacity", capacity)))
                .await(60, TimeUnit.SECONDS);
    }

    @Test
    void aFullDiskRejectsSsdWritesAndLeavesTheDramPathAlone() throws Exception {
        Path data = Files.createTempDirectory("orbitkv-enospc");
        Path ssdDir = Files.createDirectory(data.resolve("small-ssd"));
        assumeThat(run("mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", ssdDir.toString()))
                .as("needs root to mount a 12 MiB tmpfs").isTrue();
        try {
            // A sparse store of 24 MiB on a 12 MiB file system: it opens, and fills up after a few writes.
            Manager manager = Manager.start(RunningManager.config(Map.of("data-dir", data.toString(), "pool.size", "16MiB",
                    "grpc.tcp-port", "0", "metrics.port", "0", "ssd.dir", ssdDir.toString(), "ssd.capacity", "24MiB",
                    "ssd.extent", "1MiB", "ssd.preallocate", "false"))).await(60, TimeUnit.SECONDS);
            try (OrbitKvClient client = OrbitKvClient.connectUnix(manager.unixSocket(), manager.token());
                 EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
                for (int round = 0; round < 4; round++) {
                    List<ByteString> hashes = PublishQueryRestoreIT.publish(session, "fill" + round, 6);
                    QueryReply reply = session.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build())).await();
                    assertThat(reply.getStatus()).as("the DRAM path works while the disk is full").isEqualTo(QueryStatus.READY);
                    assertThat(reply.getReadyBlocks()).isEqualTo(6);
                    SsdTierIT.verify(session, reply, "fill" + round);
                    session.release(reply.getLease().getLeaseId()).await();
                }
                await().atMost(Duration.ofSeconds(20)).until(() -> droppedForSpace(manager) > 0);
                assertThat(manager.registry().scrape()).contains("orbitkv_leases_active 0.0");
            } finally {
                manager.close();
            }
        } finally {
            assertThat(run("umount", ssdDir.toString())).isTrue();
            RunningManager.deleteTree(data);
        }
    }

    static double droppedForSpace(Manager manager) {
        return manager.registry().scrape().lines()
                .filter(l -> l.startsWith("orbitkv_ssd_writes_dropped_total{") && l.contains("NO_SPACE"))
                .mapToDouble(l -> Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1))).sum();
    }

    @Test
    void aCorruptedExtentOnDiskIsAMissNeverWrongBytes() throws Exception {
        Path data = Files.createTempDirectory("orbitkv-corrupt");
        Path ssdDir = Files.createDirectory(data.resolve("ssd"));
        List<ByteString> hashes;
        Manager first = start(data, ssdDir, "32MiB");
        try (OrbitKvClient client = OrbitKvClient.connectUnix(first.unixSocket(), first.token());
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
            hashes = PublishQueryRestoreIT.publish(session, "fragile", 3);
            await().atMost(Duration.ofSeconds(20)).until(() -> first.registry().scrape().contains("orbitkv_ssd_keys 3.0"));
        } finally {
            first.close();
        }
        // Flip one payload byte of every extent on disk (past each 4 KiB header), behind the Manager's back.
        Path shard;
        try (var files = Files.list(ssdDir)) {
            shard = files.filter(p -> p.getFileName().toString().startsWith("shard-")).findFirst().orElseThrow();
        }
        long extent = (2L << 20) + 4096;
        try (var channel = FileChannel.open(shard, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            for (long offset = 0; offset + extent <= channel.size(); offset += extent) {
                ByteBuffer one = ByteBuffer.allocate(1);
                channel.read(one, offset + 4096 + 100);
                one.flip();
                byte flipped = (byte) (one.get(0) ^ 0x5a);
                channel.write(ByteBuffer.wrap(new byte[] {flipped}), offset + 4096 + 100);
            }
        }
        Manager second = start(data, ssdDir, "32MiB");
        try (OrbitKvClient client = OrbitKvClient.connectUnix(second.unixSocket(), second.token());
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
            QueryReply reply = session.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build())).await();
            assertThat(reply.getStatus()).as("corrupt extents are misses, never served").isEqualTo(QueryStatus.MISS);
            assertThat(second.registry().scrape()).contains("orbitkv_ssd_restore_failures_total");
            double corrupt = second.registry().scrape().lines().filter(l -> l.startsWith("orbitkv_ssd_extents_corrupt_total"))
                    .mapToDouble(l -> Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1))).sum();
            assertThat(corrupt).isGreaterThanOrEqualTo(1.0);
        } finally {
            second.close();
            RunningManager.deleteTree(data);
        }
    }
}
