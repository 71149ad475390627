package io.orbitkv.cost;

import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.eventbus.MessageCodec;
import io.vertx.core.shareddata.LocalMap;

import java.util.Objects;

/**
 * Local-only event-bus codec: {@link #transform} hands the receiver the very object the sender passed, so records
 * travel between verticles without copies or JSON. Messages must therefore be immutable. Sending such a message to
 * another host fails loudly in {@link #encodeToWire}.
 *
 * <p>Lives in the cost package until a shared home exists; nothing in it is cost-specific.
 */
public final class LocalObjectCodec<T> implements MessageCodec<T, T> {

    private static final String REGISTRY_MAP = "orbitkv.local-object-codecs";
    private static final Object REGISTRATION_LOCK = new Object();

    private final Class<T> type;
    private final String name;

    private LocalObjectCodec(Class<T> type) {
        this.type = Objects.requireNonNull(type, "type");
        this.name = "orbitkv-local:" + type.getName();
    }

    /**
     * Registers a default local codec for {@code type} on this Vertx unless one was already registered through this
     * method. Safe to call from any thread and any number of times.
     */
    public static <T> void registerOnce(Vertx vertx, Class<T> type) {
        synchronized (REGISTRATION_LOCK) {
            LocalMap<String, Boolean> registered = vertx.sharedData().getLocalMap(REGISTRY_MAP);
            if (registered.putIfAbsent(type.getName(), Boolean.TRUE) == null) {
                vertx.eventBus().registerDefaultCodec(type, new LocalObjectCodec<>(type));
            }
        }
    }

    @Override
    public void encodeToWire(Buffer buffer, T message) {
        throw new UnsupportedOperationException(name + " is local-only; " + type.getName() + " cannot leave the host");
    }

    @Override
    public T decodeFromWire(int position, Buffer buffer) {
        throw new UnsupportedOperationException(name + " is local-only");
    }

    @Override
    public T transform(T message) {
        return message;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public byte systemCodecID() {
        return -1;
    }
}
