package io.orbitkv.common;

import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.eventbus.MessageCodec;

/**
 * Event-bus codec for Java records sent between verticles of one Manager: {@code transform} hands over the same
 * object (records are immutable), and the wire methods refuse to run, since these messages never leave the process.
 */
public final class LocalCodec<T> implements MessageCodec<T, T> {
    private final Class<T> type;

    private LocalCodec(Class<T> type) {
        this.type = type;
    }

    /** Registers a default local codec for each type on this Vertx; types already registered are left as they are. */
    public static void register(Vertx vertx, Class<?>... types) {
        for (Class<?> type : types) {
            registerOne(vertx, type);
        }
    }

    private static synchronized <T> void registerOne(Vertx vertx, Class<T> type) {
        try {
            vertx.eventBus().registerDefaultCodec(type, new LocalCodec<>(type));
        } catch (IllegalStateException alreadyRegistered) {
            // Another role registered it first on this Vertx: same codec, nothing to do.
        }
    }

    @Override
    public void encodeToWire(Buffer buffer, T t) {
        throw new UnsupportedOperationException(type.getName() + " is a local message and never crosses hosts");
    }

    @Override
    public T decodeFromWire(int pos, Buffer buffer) {
        throw new UnsupportedOperationException(type.getName() + " is a local message and never crosses hosts");
    }

    @Override
    public T transform(T t) {
        return t;
    }

    @Override
    public String name() {
        return "local:" + type.getName();
    }

    @Override
    public byte systemCodecID() {
        return -1;
    }
}
