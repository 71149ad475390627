package io.orbitkv.nativeio.mooncake;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Function;

/**
 * Typed façade over Mooncake's Transfer Engine (TE): one engine in P2P-handshake mode (no metadata server; its segment
 * name is the {@code ip:port} it listens on) with the TCP transport, local memory registration, remote segments, and
 * batches of reads and writes polled to completion ({@link TransferBatch}).
 *
 * <p>Design note. <b>Probe once, keep the cause:</b> the library is found and every symbol linked when this class
 * initializes ({@link MooncakeLibrary}); a failure makes the façade unavailable with that cause and every entry point
 * throws {@link MooncakeUnavailableException} carrying it. <b>Validate before calling:</b> TE's C wrappers dereference
 * handles unchecked and do not catch C++ exceptions, so a stale handle or a bad argument ends the process; every call
 * here first checks what TE would trust: the engine is open, batch ids and segment ids are ones this engine handed out
 * and still live, local ranges are native, alive and inside one of this engine's registrations, lengths are positive
 * and ranges do not wrap, strings have no NUL. <b>Ownership:</b> the engine owns its registrations (the caller owns the
 * memory and keeps it mapped until the registration is closed), its remote segments and its batches; a batch is freed
 * only after TE reports every task terminal (TE refuses otherwise and the batch stays owned); {@link #close()} refuses
 * while a batch is live, then unregisters what is left and destroys the engine. Counters ({@link #liveResources()})
 * let tests assert that everything came back. <b>Concurrency:</b> native calls run under the read side of a lock
 * whose write side {@link #close()} takes, so no call can race the destruction; a batch serializes its own calls.
 * {@link #openSegment}, {@link TransferBatch#submit} (first contact with a peer) and engine creation block on the
 * network: call them from worker threads.
 *
 * <p><b>Threads TE starts</b> (per engine, all joined by {@code destroyTransferEngine}, which {@link #close()} calls):
 * the P2P handshake listener (accept loop on the engine's RPC port), the TCP transport's asio worker (accept loop and
 * all data-plane I/O on its data port), and, only when enabled through TE's {@code MC_*} environment variables, a
 * metadata-refresh poller and a metrics reporter. TE also raises the process's open-file limit to its maximum when an
 * engine starts. <b>Trust:</b> both listeners bind every interface whatever address is given, and authenticate nobody:
 * anyone who can reach the ports can read and write every registered range (see {@code docs/mooncake-te.md}).
 */
public final class MooncakeTransferEngine implements AutoCloseable {
    /** TE's metadata mode that needs no server: peers exchange descriptors on the engine's RPC port. */
    static final String P2P_HANDSHAKE = "P2PHANDSHAKE";
    /** Memory location hint that lets TE find the NUMA node itself (ignored by the TCP transport). */
    public static final String LOCATION_ANY = "*";
    /** Upper bound on a batch's capacity: TE reserves its task list up front. */
    public static final int MAX_BATCH_CAPACITY = 1 << 16;
    private static final int SEGMENT_NAME_BYTES = 256;

    private static final TransferEngineBindings BINDINGS;
    private static final String ORIGIN;
    private static final Throwable UNAVAILABILITY_CAUSE;

    static final AtomicInteger LIVE_ENGINES = new AtomicInteger();
    static final AtomicInteger LIVE_REGISTRATIONS = new AtomicInteger();
    static final AtomicInteger LIVE_BATCHES = new AtomicInteger();

    static {
        TransferEngineBindings bindings = null;
        String origin = null;
        Throwable cause = null;
        try {
            MooncakeLibrary.Loaded loaded = MooncakeLibrary.load();
            bindings = new TransferEngineBindings(loaded.lookup());
            origin = loaded.origin();
        } catch (Throwable t) {
            cause = t;
        }
        BINDINGS = cause == null ? bindings : null;
        ORIGIN = cause == null ? origin : null;
        UNAVAILABILITY_CAUSE = cause;
    }

    final TransferEngineBindings bindings = BINDINGS;
    private final MemorySegment handle;
    private final String segmentName;
    private final ReentrantReadWriteLock lifecycle = new ReentrantReadWriteLock();
    /** Registrations by base address (TE keys them so); guarded by {@link #state}. */
    private final TreeMap<Long, MemoryRegistration> registrations = new TreeMap<>();
    private final Map<String, RemoteSegment> segments = new HashMap<>();
    private final List<TransferBatch> batches = new ArrayList<>();
    private final Object state = new Object();
    private boolean closed;

    private MooncakeTransferEngine(MemorySegment handle, String segmentName) {
        this.handle = handle;
        this.segmentName = segmentName;
    }

    public static boolean isAvailable() {
        return UNAVAILABILITY_CAUSE == null;
    }

    /** Why TE is unavailable (the link or load error), or null when it is available. */
    public static Throwable unavailabilityCause() {
        return UNAVAILABILITY_CAUSE;
    }

    /** The report for {@code /health}. */
    public static MooncakeStatus status() {
        return new MooncakeStatus(isAvailable(), ORIGIN,
                UNAVAILABILITY_CAUSE == null ? null : String.valueOf(UNAVAILABILITY_CAUSE.getMessage()));
    }

    private static void ensureAvailable(String what) {
        if (UNAVAILABILITY_CAUSE != null) {
            throw new MooncakeUnavailableException(what, UNAVAILABILITY_CAUSE);
        }
    }

    /**
     * Starts an engine in P2P-handshake mode with the TCP transport, advertising {@code hostAddress} (an IP literal:
     * what peers connect to) on ports TE picks. Its listeners nevertheless bind every interface.
     */
    public static MooncakeTransferEngine startTcp(String hostAddress) {
        return start(hostAddress, false);
    }

    /**
     * Starts an engine in P2P-handshake mode whose transport TE chooses from the host's topology (its auto-discovery):
     * RDMA where a verbs device (an RDMA NIC, or soft-RoCE) is found, TCP otherwise; TE's log on stderr says which
     * ("Using RDMA transport" / "Using TCP transport"). Otherwise as {@link #startTcp}.
     */
    public static MooncakeTransferEngine startDiscovered(String hostAddress) {
        return start(hostAddress, true);
    }

    private static MooncakeTransferEngine start(String hostAddress, boolean discover) {
        ensureAvailable("createTransferEngine");
        String host = ipLiteral(hostAddress);
        MemorySegment engine;
        try (Arena arena = Arena.ofConfined()) {
            engine = (MemorySegment) invoke(() -> (MemorySegment) BINDINGS.createTransferEngine.invokeExact(
                    arena.allocateFrom(P2P_HANDSHAKE), arena.allocateFrom(host), arena.allocateFrom(host), 0L,
                    discover ? 1 : 0));
            if (engine.equals(MemorySegment.NULL)) {
                throw new MooncakeException("createTransferEngine", -1, "the engine did not start on " + host
                        + " (see TE's log on stderr)");
            }
            MemorySegment transport = discover ? MemorySegment.NULL : (MemorySegment) invoke(() -> (MemorySegment)
                    BINDINGS.installTransport.invokeExact(engine, arena.allocateFrom("tcp"), MemorySegment.NULL));
            if (!discover && transport.equals(MemorySegment.NULL)) {
                destroy(engine);
                throw new MooncakeException("installTransport", -1, "the TCP transport did not install");
            }
            MemorySegment name = arena.allocate(SEGMENT_NAME_BYTES);
            int rc = invokeInt(() -> (int) BINDINGS.getLocalIpAndPort.invokeExact(engine, name, (long) SEGMENT_NAME_BYTES));
            if (rc != 0) {
                destroy(engine);
                throw new MooncakeException("getLocalIpAndPort", rc, null);
            }
            LIVE_ENGINES.incrementAndGet();
            return new MooncakeTransferEngine(engine, name.getString(0));
        }
    }

    /** This engine's segment name ({@code ip:port}), which peers pass to {@link #openSegment}. */
    public String segmentName() {
        return segmentName;
    }

    /**
     * Registers {@code memory} (native, alive, not overlapping another registration of this engine) so transfers can
     * use it locally and, when {@code remoteAccessible}, peers can read and write it. The caller keeps the memory
     * mapped until the returned registration is closed.
     */
    public MemoryRegistration register(MemorySegment memory, String location, boolean remoteAccessible) {
        Objects.requireNonNull(memory, "memory");
        String where = cString(location, "location");
        if (!memory.isNative() || !memory.scope().isAlive()) {
            throw new IllegalArgumentException("only live native memory can be registered");
        }
        if (memory.byteSize() <= 0) {
            throw new IllegalArgumentException("cannot register an empty range");
        }
        lifecycle.readLock().lock();
        try {
            synchronized (state) {
                ensureOpen("registerLocalMemory");
                long start = memory.address();
                long end = start + memory.byteSize();
                Map.Entry<Long, MemoryRegistration> below = registrations.floorEntry(end - 1);
                if (below != null && below.getValue().end() > start) {
                    throw new IllegalArgumentException("range [" + Long.toHexString(start) + ", "
                            + Long.toHexString(end) + ") overlaps a registration of this engine");
                }
                try (Arena arena = Arena.ofConfined()) {
                    int rc = invokeInt(() -> (int) bindings.registerLocalMemory.invokeExact(handle,
                            MemorySegment.ofAddress(start), memory.byteSize(), arena.allocateFrom(where),
                            remoteAccessible ? 1 : 0));
                    check("registerLocalMemory", rc);
                }
                MemoryRegistration registration = new MemoryRegistration(this, memory);
                registrations.put(start, registration);
                LIVE_REGISTRATIONS.incrementAndGet();
                return registration;
            }
        } finally {
            lifecycle.readLock().unlock();
        }
    }

    /** {@link #register(MemorySegment, String, boolean)} with TE locating the memory and peers allowed in. */
    public MemoryRegistration register(MemorySegment memory) {
        return register(memory, LOCATION_ANY, true);
    }

    void unregister(MemoryRegistration registration) {
        lifecycle.readLock().lock();
        try {
            synchronized (state) {
                if (closed || registrations.get(registration.address()) != registration) {
                    return;
                }
                registrations.remove(registration.address());
                LIVE_REGISTRATIONS.decrementAndGet();
                check("unregisterLocalMemory", invokeInt(() -> (int) bindings.unregisterLocalMemory.invokeExact(handle,
                        MemorySegment.ofAddress(registration.address()))));
            }
        } finally {
            lifecycle.readLock().unlock();
        }
    }

    /**
     * Opens the peer engine named {@code segmentName} ({@code ip:port}, as its {@link #segmentName()}): a handshake
     * over the network, which fails typed when nobody answers. Opened once per name; closed with the engine.
     */
    public RemoteSegment openSegment(String segmentName) {
        String name = cString(segmentName, "segment name");
        int colon = name.lastIndexOf(':');
        if (colon <= 0 || colon == name.length() - 1 || !name.substring(colon + 1).chars().allMatch(Character::isDigit)
                || Integer.parseInt(name.substring(colon + 1)) > 65535) {
            throw new IllegalArgumentException("a segment name is host:port, got '" + name + "'");
        }
        lifecycle.readLock().lock();
        try {
            synchronized (state) {
                ensureOpen("openSegment");
                RemoteSegment open = segments.get(name);
                if (open != null) {
                    return open;
                }
            }
            int id;
            try (Arena arena = Arena.ofConfined()) { // blocks on the handshake: outside the state monitor
                MemorySegment cName = arena.allocateFrom(name);
                id = invokeInt(() -> (int) bindings.openSegment.invokeExact(handle, cName));
            }
            if (id < 0) {
                throw new MooncakeException("openSegment", id, "segment " + name);
            }
            synchronized (state) {
                return segments.computeIfAbsent(name, n -> new RemoteSegment(this, n, id));
            }
        } finally {
            lifecycle.readLock().unlock();
        }
    }

    /** A batch of up to {@code capacity} transfers (1 to {@link #MAX_BATCH_CAPACITY}). */
    public TransferBatch allocateBatch(int capacity) {
        if (capacity <= 0 || capacity > MAX_BATCH_CAPACITY) {
            throw new IllegalArgumentException("batch capacity " + capacity + " not in [1, " + MAX_BATCH_CAPACITY + "]");
        }
        lifecycle.readLock().lock();
        try {
            synchronized (state) {
                ensureOpen("allocateBatchID");
                long id = invokeLong(() -> (long) bindings.allocateBatchID.invokeExact(handle, (long) capacity));
                if (id == TransferEngineBindings.INVALID_BATCH || id == 0) {
                    throw new MooncakeException("allocateBatchID", (int) id, "no batch allocated");
                }
                TransferBatch batch = new TransferBatch(this, id, capacity);
                batches.add(batch);
                LIVE_BATCHES.incrementAndGet();
                return batch;
            }
        } finally {
            lifecycle.readLock().unlock();
        }
    }

    /**
     * Checks one request against what TE trusts: the local range is alive, native and inside a registration of this
     * engine; the target segment was opened by this engine; the remote range does not wrap.
     */
    void validate(TransferRequest request) {
        MemorySegment local = request.local();
        if (!local.isNative() || !local.scope().isAlive()) {
            throw new IllegalArgumentException("the local range must be live native memory");
        }
        if (local.byteSize() <= 0) {
            throw new IllegalArgumentException("a transfer moves at least one byte");
        }
        if (request.target().engine() != this || segments.get(request.target().name()) != request.target()) {
            throw new IllegalArgumentException("segment " + request.target().name() + " was not opened by this engine");
        }
        long remote = request.remoteAddress();
        if (remote == 0 || Long.compareUnsigned(remote + local.byteSize(), remote) < 0) {
            throw new IllegalArgumentException("remote range at 0x" + Long.toHexString(remote) + " of "
                    + local.byteSize() + " bytes is not a valid range");
        }
        long start = local.address();
        Map.Entry<Long, MemoryRegistration> owner = registrations.floorEntry(start);
        if (owner == null || owner.getValue().end() < start + local.byteSize()
                || !owner.getValue().memory().scope().isAlive()) {
            throw new IllegalArgumentException("local range at 0x" + Long.toHexString(start)
                    + " is not inside a live registration of this engine");
        }
    }

    /** Runs {@code call} on the engine's handle unless the engine is closed; holds off {@link #close()} meanwhile. */
    <T> T withHandle(String what, Function<MemorySegment, T> call) {
        lifecycle.readLock().lock();
        try {
            synchronized (state) {
                ensureOpen(what);
            }
            return call.apply(handle);
        } finally {
            lifecycle.readLock().unlock();
        }
    }

    /** Under {@link #state}: used by batches to validate against registrations and segments consistently. */
    Object stateLock() {
        return state;
    }

    void batchFreed(TransferBatch batch) {
        synchronized (state) {
            if (batches.remove(batch)) {
                LIVE_BATCHES.decrementAndGet();
            }
        }
    }

    private void ensureOpen(String what) {
        if (closed) {
            throw new IllegalStateException(what + ": the transfer engine " + segmentName + " is closed");
        }
    }

    /**
     * Destroys the engine: refused (with {@link IllegalStateException}, the engine left open) while a batch is live,
     * because TE's workers may still write into its tasks; otherwise closes remote segments, unregisters what is
     * still registered and calls {@code destroyTransferEngine}, which joins TE's threads and closes its sockets.
     * Idempotent.
     */
    @Override
    public void close() {
        lifecycle.writeLock().lock();
        try {
            synchronized (state) {
                if (closed) {
                    return;
                }
                if (!batches.isEmpty()) {
                    throw new IllegalStateException(batches.size() + " transfer batch(es) still live on " + segmentName
                            + ": free them (after their tasks are terminal) before closing the engine");
                }
                closed = true;
                for (RemoteSegment segment : segments.values()) {
                    int ignored = invokeInt(() -> (int) bindings.closeSegment.invokeExact(handle, segment.id()));
                }
                segments.clear();
                for (MemoryRegistration registration : registrations.values()) {
                    int ignored = invokeInt(() -> (int) bindings.unregisterLocalMemory.invokeExact(handle,
                            MemorySegment.ofAddress(registration.address())));
                    LIVE_REGISTRATIONS.decrementAndGet();
                }
                registrations.clear();
                destroy(handle);
                LIVE_ENGINES.decrementAndGet();
            }
        } finally {
            lifecycle.writeLock().unlock();
        }
    }

    /** Native resources handed out and not yet released, by kind. */
    public record LiveResources(int engines, int registrations, int batches) {
        public int total() {
            return engines + registrations + batches;
        }
    }

    public static LiveResources liveResources() {
        return new LiveResources(LIVE_ENGINES.get(), LIVE_REGISTRATIONS.get(), LIVE_BATCHES.get());
    }

    // ---- helpers ----

    private static void destroy(MemorySegment engine) {
        try {
            BINDINGS.destroyTransferEngine.invokeExact(engine);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** An IP literal (no name lookup: TE would resolve it itself, and a name could resolve elsewhere later). */
    private static String ipLiteral(String hostAddress) {
        Objects.requireNonNull(hostAddress, "hostAddress");
        InetAddress address;
        try {
            address = InetAddress.ofLiteral(hostAddress);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("the engine's host must be an IP literal, got '" + hostAddress + "'", e);
        }
        return address instanceof Inet6Address ? address.getHostAddress() : hostAddress;
    }

    static String cString(String value, String what) {
        Objects.requireNonNull(value, what);
        if (value.isEmpty() || value.indexOf('\0') >= 0) {
            throw new IllegalArgumentException(what + " must be non-empty without NUL characters");
        }
        return value;
    }

    static void check(String operation, int rc) {
        if (rc != 0) {
            throw new MooncakeException(operation, rc, null);
        }
    }

    @FunctionalInterface
    interface NativeCall<T> {
        T call() throws Throwable;
    }

    @FunctionalInterface
    interface NativeIntCall {
        int call() throws Throwable;
    }

    @FunctionalInterface
    interface NativeLongCall {
        long call() throws Throwable;
    }

    static <T> T invoke(NativeCall<T> call) {
        try {
            return call.call();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int invokeInt(NativeIntCall call) {
        try {
            return call.call();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static long invokeLong(NativeLongCall call) {
        try {
            return call.call();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            throw r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException("Transfer Engine downcall failed", t);
    }
}
