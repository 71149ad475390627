package io.orbitkv.events;

import io.micrometer.core.instrument.Counter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The ZeroMQ side of KV events, as vLLM's {@code ZmqEventPublisher} ({@code vllm/distributed/kv_events.py}, vLLM
 * commit {@code 0181ea3173e53eea8cf04a86891488e3dc89bb34}): a PUB socket sending {@code (topic, seq, payload)} with
 * {@code seq} an 8-byte big-endian count, and, when configured, a ROUTER
 * socket where a subscriber that missed batches sends {@code ("", start_seq)} (8 bytes, big-endian; a DEALER adds the
 * empty frame itself) and receives {@code ("", seq, payload)} for every buffered batch from {@code start_seq} on, then
 * {@code ("", -1, "")}. Replies carry no topic: the payload names its namespace. After {@code events.heartbeat-ms}
 * without a batch an empty one (topic empty, no events) is sent, so a subscriber notices a lost last batch.
 *
 * <p>Design note (sequences and catching up): vLLM counts from 0 per publisher; here the first sequence of a Manager
 * start is its start time in microseconds since the epoch, so sequences keep increasing across restarts and a
 * subscriber sees a restart as a gap, not as old numbers. A subscriber that cannot be served contiguously drops what it
 * knew and applies the stream from the next batch that begins with {@code AllBlocksCleared}: one begins every Manager
 * start, and when a replay asks for batches no longer buffered and no such batch is buffered, the publisher asks the
 * events role to send one (with the full state after it).
 *
 * <p>Design note (threads and ownership): ZeroMQ sockets are single-threaded, so one platform thread owns the context,
 * both sockets, the sequence and the replay buffer; nothing else touches them. The events role hands it encoded batches
 * through a bounded queue ({@link #offer} never waits: a full queue answers false and the role sends the batch again
 * later; the Vert.x-context hand-off in {@code common} delivers to a context, not to a thread that must also poll a
 * socket). The thread waits on the queue at most {@value #POLL_MS} ms between looks at the replay socket. The replay
 * buffer keeps the last batches within both a count and a byte bound, eldest out first. {@link #close} stops the thread,
 * which closes the sockets (linger 0) and the context; batches still queued are not sent (subscribers of a Manager that
 * stops see its next start's {@code AllBlocksCleared}).
 */
final class KvEventPublisher implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(KvEventPublisher.class);
    private static final long POLL_MS = 5;
    private static final byte[] END_SEQ = ByteBuffer.allocate(8).putLong(-1).array();
    private static final byte[] EMPTY = new byte[0];

    /**
     * One encoded batch for the topic (the namespace in hex; empty for batches about every namespace);
     * {@code clears}: it begins with {@code AllBlocksCleared}.
     */
    record Batch(String topic, byte[] payload, int events, boolean clears) {}

    private record Buffered(long seq, byte[] payload, boolean clears) {}

    /** What the publisher counts (thread-safe meters). */
    record Meters(Counter events, Counter batches, Counter dropped, Counter replays) {}

    private final String endpoint;
    private final String replayEndpoint;
    private final int hwm;
    private final long heartbeatNanos;
    private long lastSentNanos = System.nanoTime();
    private final int replayBatches;
    private final long replayBytes;
    private final Meters meters;
    private final ArrayBlockingQueue<Batch> queue;
    private final CompletableFuture<Void> bound = new CompletableFuture<>();
    private final ArrayDeque<Buffered> buffer = new ArrayDeque<>();
    private final Runnable resync;
    private long bufferedBytes;
    private int bufferedClears;
    private long nextSeq;
    private volatile boolean running = true;
    private volatile String boundEndpoint;
    private volatile String boundReplayEndpoint;
    private Thread thread;

    KvEventPublisher(String endpoint, String replayEndpoint, int hwm, long heartbeatMs, int queueCapacity,
                     int replayBatches,
                     long replayBytes, Meters meters, long firstSeq, Runnable resync) {
        this.endpoint = endpoint;
        this.replayEndpoint = replayEndpoint;
        this.hwm = hwm;
        this.heartbeatNanos = TimeUnit.MILLISECONDS.toNanos(heartbeatMs);
        this.replayBatches = replayBatches;
        this.replayBytes = replayBytes;
        this.meters = meters;
        this.queue = new ArrayBlockingQueue<>(queueCapacity);
        this.nextSeq = firstSeq;
        this.resync = resync;
    }

    /** Starts the thread; completes once both sockets are bound, or fails with the bind's cause. */
    CompletionStage<Void> start() {
        thread = Thread.ofPlatform().name("orbitkv-kv-events").daemon().start(this::run);
        return bound;
    }

    /** The PUB socket's address as bound (a wildcard port resolved). */
    String endpoint() {
        return boundEndpoint;
    }

    /** The ROUTER socket's address as bound; null without replay. */
    String replayEndpoint() {
        return boundReplayEndpoint;
    }

    /** Queues a batch; false at once when the queue is full or the publisher stopped. */
    boolean offer(Batch batch) {
        return running && queue.offer(batch);
    }

    int queued() {
        return queue.size();
    }

    private void run() {
        try (ZContext context = new ZContext()) {
            ZMQ.Socket pub = context.createSocket(SocketType.PUB);
            ZMQ.Socket replay = null;
            try {
                pub.setLinger(0);
                pub.setSndHWM(hwm);
                pub.bind(endpoint);
                boundEndpoint = pub.getLastEndpoint();
                if (replayEndpoint != null) {
                    replay = context.createSocket(SocketType.ROUTER);
                    replay.setLinger(0);
                    // A ROUTER drops what exceeds a peer's high-water mark silently: one answer is at most the whole
                    // buffer plus its end marker, so that must fit.
                    replay.setSndHWM(replayBatches + 2);
                    replay.bind(replayEndpoint);
                    boundReplayEndpoint = replay.getLastEndpoint();
                }
            } catch (RuntimeException e) {
                running = false;
                bound.completeExceptionally(e);
                return;
            }
            bound.complete(null);
            loop(pub, replay);
        } catch (RuntimeException e) {
            LOG.error("kv events: the publisher thread failed; no more events are sent", e);
            running = false;
        }
    }

    private void loop(ZMQ.Socket pub, ZMQ.Socket replay) {
        while (running) {
            if (replay != null) {
                serveReplays(replay);
            }
            Batch batch;
            try {
                batch = queue.poll(POLL_MS, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                return;
            }
            while (batch != null && running) {
                publish(pub, batch);
                batch = queue.poll();
            }
            if (heartbeatNanos > 0 && System.nanoTime() - lastSentNanos >= heartbeatNanos) {
                publish(pub, new Batch("", KvEventCodec.encodeBatch(System.currentTimeMillis() / 1000.0, List.of(),
                        null, 0), 0, false));
            }
        }
    }

    private void publish(ZMQ.Socket pub, Batch batch) {
        long seq = nextSeq++;
        lastSentNanos = System.nanoTime();
        byte[] seqBytes = ByteBuffer.allocate(8).putLong(seq).array();
        boolean sent = pub.sendMore(batch.topic().getBytes(StandardCharsets.UTF_8)) && pub.sendMore(seqBytes)
                && pub.send(batch.payload());
        if (sent) {
            meters.batches().increment();
            meters.events().increment(batch.events());
        } else {
            // A PUB socket drops silently at a subscriber's high-water mark; a refused send means the socket is
            // going away. Either way the batch stays replayable below.
            meters.dropped().increment();
        }
        buffer.addLast(new Buffered(seq, batch.payload(), batch.clears()));
        bufferedBytes += batch.payload().length;
        bufferedClears += batch.clears() ? 1 : 0;
        while (!buffer.isEmpty() && (buffer.size() > replayBatches || bufferedBytes > replayBytes)) {
            Buffered eldest = buffer.removeFirst();
            bufferedBytes -= eldest.payload().length;
            bufferedClears -= eldest.clears() ? 1 : 0;
        }
    }

    private void serveReplays(ZMQ.Socket replay) {
        byte[] identity;
        while ((identity = replay.recv(ZMQ.DONTWAIT)) != null) {
            byte[] delimiter = replay.hasReceiveMore() ? replay.recv() : null;
            byte[] start = delimiter != null && replay.hasReceiveMore() ? replay.recv() : null;
            boolean extra = false;
            while (replay.hasReceiveMore()) {
                replay.recv();
                extra = true;
            }
            if (start == null || start.length != 8 || delimiter.length != 0 || extra) {
                LOG.debug("kv events: malformed replay request ignored");
                continue;
            }
            long from = ByteBuffer.wrap(start).getLong();
            if ((buffer.isEmpty() ? from < nextSeq : from < buffer.peekFirst().seq()) && bufferedClears == 0) {
                // Batches the requester needs are gone and nothing buffered starts afresh: have the role send
                // AllBlocksCleared and the full state again (requests meanwhile coalesce there).
                resync.run();
            }
            for (Iterator<Buffered> it = buffer.iterator(); it.hasNext(); ) {
                Buffered b = it.next();
                if (b.seq() >= from) {
                    replay.sendMore(identity);
                    replay.sendMore(EMPTY);
                    replay.sendMore(ByteBuffer.allocate(8).putLong(b.seq()).array());
                    replay.send(b.payload());
                }
            }
            replay.sendMore(identity);
            replay.sendMore(EMPTY);
            replay.sendMore(END_SEQ);
            replay.send(EMPTY);
            meters.replays().increment();
        }
    }

    @Override
    public void close() {
        running = false;
        Thread t = thread;
        if (t != null) {
            try {
                t.join(TimeUnit.SECONDS.toMillis(5));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
