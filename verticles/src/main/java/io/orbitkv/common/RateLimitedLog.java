package io.orbitkv.common;

import java.lang.ref.WeakReference;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;

/**
 * One WARN line per failure, rate-limited per (kind, member): the first occurrence of a kind for a member is logged
 * at once; later ones within {@code interval} are counted, and one line per interval says how many there were
 * ("N more since ..."), either with the next occurrence after the interval or, when none comes, from
 * {@link #flushDue()}.
 *
 * <p>Callers pass only bounded, non-identifying words: a failure kind (an enum name), a member id, a fixed reason.
 * Never a key, hash, namespace, request or lease id: the lines are for operators, and the request identities are the
 * engines' business. The number of (kind, member) pairs tracked is bounded ({@link #MAX_KEYS}); beyond it, one shared
 * pair stands for the rest, so a flood of made-up member ids cannot grow memory.
 *
 * <p>Concurrency: thread-safe (roles on several loops may share one); each pair's counts are updated under its own
 * lock, and lines are written outside any lock. Limiters on the {@link Ticker#SYSTEM} clock register (weakly) with
 * one JVM-wide daemon thread that flushes due summaries once a second; limiters on another clock are flushed by
 * their owner (tests step a manual clock and call {@link #flushDue()}).
 */
public final class RateLimitedLog {
    public static final Duration INTERVAL_DEFAULT = Duration.ofSeconds(30);
    static final int MAX_KEYS = 1024;
    static final int MAX_DESCRIPTION = 160;
    static final String UNKNOWN_MEMBER = "(unknown)";
    static final String OVERFLOW_MEMBER = "(other members)";

    private final Logger logger;
    private final Ticker ticker;
    private final long intervalNanos;
    private final Map<Key, Window> windows = new ConcurrentHashMap<>();

    private record Key(String kind, String member) {}

    /** One pair's current interval: when its last line was written and what was suppressed since. */
    private static final class Window {
        long lineNanos;
        long suppressed;
        long occurrences;
        String lastMessage;
    }

    public RateLimitedLog(Logger logger, Ticker ticker, Duration interval) {
        this.logger = Objects.requireNonNull(logger, "logger");
        this.ticker = Objects.requireNonNull(ticker, "ticker");
        this.intervalNanos = interval.toNanos();
        if (intervalNanos <= 0) {
            throw new IllegalArgumentException("interval must be positive: " + interval);
        }
        if (ticker == Ticker.SYSTEM) {
            Flusher.register(this);
        }
    }

    /** A limiter on the system clock with the default interval. */
    public RateLimitedLog(Logger logger) {
        this(logger, Ticker.SYSTEM, INTERVAL_DEFAULT);
    }

    /**
     * One failure of {@code kind} concerning {@code member}: logs {@code message} as a WARN line (prefixed with the
     * kind and member), or counts it when a line for the same pair was written less than an interval ago.
     *
     * @return whether a line was written
     */
    public boolean warn(String kind, String member, String message) {
        Key key = key(kind, member == null ? UNKNOWN_MEMBER : member);
        Window window = windows.get(key);
        boolean first = false;
        if (window == null) {
            Window fresh = new Window();
            fresh.lineNanos = ticker.nanos();
            window = windows.putIfAbsent(key, fresh);
            if (window == null) {
                window = fresh;
                first = true;
            }
        }
        long suppressedBefore;
        long sinceNanos;
        synchronized (window) {
            long now = ticker.nanos();
            window.lastMessage = message;
            window.occurrences++;
            if (first) {
                suppressedBefore = 0;
                sinceNanos = 0;
            } else if (now - window.lineNanos < intervalNanos) {
                window.suppressed++;
                return false;
            } else {
                suppressedBefore = window.suppressed;
                sinceNanos = now - window.lineNanos;
                window.suppressed = 0;
                window.lineNanos = now;
            }
        }
        if (suppressedBefore == 0) {
            logger.warn("{} (member {}): {}", key.kind(), key.member(), message);
        } else {
            logger.warn("{} (member {}): {} ({} more since the last line {} s ago)", key.kind(), key.member(), message,
                    suppressedBefore, seconds(sinceNanos));
        }
        return true;
    }

    /** Writes one summary line for each pair whose interval has passed with occurrences suppressed; returns how many. */
    public int flushDue() {
        int written = 0;
        for (Map.Entry<Key, Window> e : windows.entrySet()) {
            Window window = e.getValue();
            long suppressed;
            long sinceNanos;
            String last;
            synchronized (window) {
                long now = ticker.nanos();
                if (window.suppressed == 0 || now - window.lineNanos < intervalNanos) {
                    continue;
                }
                suppressed = window.suppressed;
                sinceNanos = now - window.lineNanos;
                last = window.lastMessage;
                window.suppressed = 0;
                window.lineNanos = now;
            }
            logger.warn("{} (member {}): {} more since the last line {} s ago, the latest: {}", e.getKey().kind(),
                    e.getKey().member(), suppressed, seconds(sinceNanos), last);
            written++;
        }
        return written;
    }

    /**
     * A short description of a connection-level failure (a TLS handshake, a socket error): the root cause's type and
     * message, at most {@value #MAX_DESCRIPTION} characters. Only for failures below the request layer, whose messages
     * name no request (alerts, certificate path errors, resets).
     */
    public static String describe(Throwable failure) {
        Throwable root = failure;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        String text = root.getClass().getSimpleName() + (root.getMessage() == null ? "" : ": " + root.getMessage());
        return text.length() <= MAX_DESCRIPTION ? text : text.substring(0, MAX_DESCRIPTION) + "...";
    }

    /** Every occurrence reported for a pair, written or not (what a caller or test can await). */
    public long occurrences(String kind, String member) {
        Window window = windows.get(new Key(kind, member == null ? UNKNOWN_MEMBER : member));
        if (window == null) {
            return 0;
        }
        synchronized (window) {
            return window.occurrences;
        }
    }

    /** The occurrences counted and not yet written for a pair (tests). */
    long suppressed(String kind, String member) {
        Window window = windows.get(new Key(kind, member));
        if (window == null) {
            return 0;
        }
        synchronized (window) {
            return window.suppressed;
        }
    }

    private Key key(String kind, String member) {
        Key key = new Key(kind, member);
        if (windows.size() >= MAX_KEYS && !windows.containsKey(key)) {
            return new Key(kind, OVERFLOW_MEMBER);
        }
        return key;
    }

    private static String seconds(long nanos) {
        return String.format(java.util.Locale.ROOT, "%.1f", nanos / 1e9);
    }

    /** The one daemon thread that flushes the summaries of system-clock limiters; it holds them weakly. */
    private static final class Flusher {
        private static final CopyOnWriteArrayList<WeakReference<RateLimitedLog>> LIMITERS = new CopyOnWriteArrayList<>();
        private static volatile ScheduledExecutorService timer;

        static void register(RateLimitedLog log) {
            LIMITERS.add(new WeakReference<>(log));
            if (timer == null) {
                synchronized (Flusher.class) {
                    if (timer == null) {
                        timer = Executors.newSingleThreadScheduledExecutor(Thread.ofPlatform().daemon()
                                .name("orbitkv-log-summaries").factory());
                        timer.scheduleWithFixedDelay(Flusher::flushAll, 1, 1, TimeUnit.SECONDS);
                    }
                }
            }
        }

        private static void flushAll() {
            for (WeakReference<RateLimitedLog> ref : LIMITERS) {
                RateLimitedLog log = ref.get();
                if (log == null) {
                    LIMITERS.remove(ref);
                } else {
                    try {
                        log.flushDue();
                    } catch (RuntimeException e) {
                        // a broken appender must not stop the summaries of the other limiters
                    }
                }
            }
        }
    }
}
