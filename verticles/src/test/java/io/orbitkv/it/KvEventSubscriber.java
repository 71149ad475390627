package io.orbitkv.it;

import java.nio.ByteBuffer;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.Value;
import org.msgpack.value.ValueFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * A router's view of one Manager, rebuilt only from its KV event stream (vLLM's format): a SUB socket for live
 * batches and a DEALER on the replay socket to catch up. It asks for a replay when it connects and whenever a batch's
 * sequence is not the next one; when the replay cannot continue its sequence (it connected late, or the Manager
 * restarted), it drops what it knew and applies the stream from the next batch that begins with AllBlocksCleared.
 * {@link #dropping} makes it ignore what arrives, as a subscriber that lost its connection for a while. Keys are
 * "namespace-hex/block-hash-hex" per medium.
 */
final class KvEventSubscriber implements AutoCloseable {
    private static final Value TYPE = ValueFactory.newString("type");

    private final ZContext context = new ZContext();
    private final Set<String> cpu = new HashSet<>();
    private final Set<String> disk = new HashSet<>();
    private final Thread thread;
    private final String replayEndpoint;
    private volatile boolean running = true;
    volatile boolean dropping;
    final AtomicLong droppedBatches = new AtomicLong();
    final AtomicLong replayedBatches = new AtomicLong();
    final AtomicLong clears = new AtomicLong();
    final AtomicLong storedOnDisk = new AtomicLong();
    final AtomicLong removedFromCpu = new AtomicLong();
    /** Replay requests asked again after no answer (see {@link #catchUp}). */
    final AtomicLong unansweredReplays = new AtomicLong();
    private long lastSeq = -1;
    /** Nothing applied can be trusted to be contiguous: wait for a batch that begins with AllBlocksCleared. */
    private boolean awaitingClear = true;
    private volatile Throwable failure;

    KvEventSubscriber(String endpoint, String replayEndpoint) {
        this.replayEndpoint = replayEndpoint;
        ZMQ.Socket sub = context.createSocket(SocketType.SUB);
        sub.setReceiveTimeOut(20);
        sub.connect(endpoint);
        sub.subscribe(new byte[0]);
        thread = Thread.ofPlatform().name("test-kv-subscriber").start(() -> run(sub));
    }

    private void run(ZMQ.Socket sub) {
        try {
            catchUp();
            while (running) {
                byte[] topic = sub.recv();
                if (topic == null) {
                    continue;
                }
                long seq = ByteBuffer.wrap(sub.recv()).getLong();
                byte[] payload = sub.recv();
                if (dropping) {
                    droppedBatches.incrementAndGet();
                    continue;
                }
                if (!awaitingClear && seq <= lastSeq) {
                    continue; // already applied through a replay
                }
                if (awaitingClear || seq != lastSeq + 1) {
                    catchUp();
                }
                offer(seq, payload);
            }
        } catch (Throwable t) {
            failure = t;
        }
    }

    /**
     * Replays everything buffered after the last applied sequence. ZeroMQ does not promise delivery of a request or
     * its answer across a (re)connection, so a subscriber asks again, as a router's would, a bounded number of times.
     */
    private void catchUp() throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                catchUpOnce();
                return;
            } catch (ReplayUnanswered e) {
                if (attempt == 3) {
                    throw new AssertionError("no replay answer within 3 x 10 s", e);
                }
                unansweredReplays.incrementAndGet();
            }
        }
    }

    /** A replay request that got no answer (or an answer cut short) within its receive timeout. */
    private static final class ReplayUnanswered extends Exception {
        ReplayUnanswered() {
            super("no replay answer within 10 s", null, false, false);
        }
    }

    private void catchUpOnce() throws Exception {
        ZMQ.Socket replay = context.createSocket(SocketType.DEALER);
        try {
            replay.setReceiveTimeOut(10_000);
            replay.connect(replayEndpoint);
            replay.sendMore(new byte[0]);
            replay.send(ByteBuffer.allocate(8).putLong(awaitingClear ? 0 : lastSeq + 1).array());
            while (true) {
                byte[] empty = replay.recv();
                if (empty == null) {
                    throw new ReplayUnanswered();
                }
                long seq = ByteBuffer.wrap(replay.recv()).getLong();
                byte[] payload = replay.recv();
                if (seq == -1) {
                    return;
                }
                if (offer(seq, payload)) {
                    replayedBatches.incrementAndGet();
                }
            }
        } finally {
            replay.close();
        }
    }

    /** Applies a batch if it continues the sequence (or starts afresh with a clear); answers whether it did. */
    private boolean offer(long seq, byte[] payload) throws Exception {
        Map<Value, Value> batch = decode(payload);
        if (!awaitingClear && seq > lastSeq + 1) {
            // The batches in between are gone: start over from the next clear.
            awaitingClear = true;
        }
        if (awaitingClear) {
            List<Value> events = batch.get(ValueFactory.newString("events")).asArrayValue().list();
            if (events.isEmpty() || !events.get(0).asMapValue().map().get(TYPE).asStringValue().asString()
                    .equals("AllBlocksCleared")) {
                return false;
            }
            awaitingClear = false;
        } else if (seq != lastSeq + 1) {
            return false;
        }
        apply(batch);
        lastSeq = seq;
        return true;
    }

    private static Map<Value, Value> decode(byte[] payload) throws Exception {
        try (MessageUnpacker unpacker = MessagePack.newDefaultUnpacker(payload)) {
            return unpacker.unpackValue().asMapValue().map();
        }
    }

    private synchronized void apply(Map<Value, Value> batch) {
        Value ns = batch.get(ValueFactory.newString("namespace"));
        for (Value e : batch.get(ValueFactory.newString("events")).asArrayValue()) {
            Map<Value, Value> event = e.asMapValue().map();
            String type = event.get(TYPE).asStringValue().asString();
            if (type.equals("AllBlocksCleared")) {
                cpu.clear();
                disk.clear();
                clears.incrementAndGet();
                continue;
            }
            boolean onCpu = event.get(ValueFactory.newString("medium")).asStringValue().asString().equals("CPU");
            Set<String> keys = onCpu ? cpu : disk;
            List<Value> hashes = event.get(ValueFactory.newString("block_hashes")).asArrayValue().list();
            for (Value h : hashes) {
                String key = ns.asStringValue().asString() + "/" + HexFormat.of().formatHex(h.asBinaryValue().asByteArray());
                if (type.equals("BlockStored")) {
                    keys.add(key);
                } else {
                    keys.remove(key);
                }
            }
            if (type.equals("BlockStored") && !onCpu) {
                storedOnDisk.addAndGet(hashes.size());
            } else if (type.equals("BlockRemoved") && onCpu) {
                removedFromCpu.addAndGet(hashes.size());
            }
        }
    }

    synchronized Set<String> cpu() {
        check();
        return Set.copyOf(cpu);
    }

    synchronized Set<String> disk() {
        check();
        return Set.copyOf(disk);
    }

    private void check() {
        if (failure != null) {
            throw new AssertionError("the subscriber failed", failure);
        }
    }

    @Override
    public void close() throws InterruptedException {
        running = false;
        thread.join(5_000);
        context.close();
    }
}
