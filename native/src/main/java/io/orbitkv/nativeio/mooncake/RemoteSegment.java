package io.orbitkv.nativeio.mooncake;

/** A peer engine opened by one engine ({@link MooncakeTransferEngine#openSegment}); closed with that engine. */
public final class RemoteSegment {
    private final MooncakeTransferEngine engine;
    private final String name;
    private final int id;

    RemoteSegment(MooncakeTransferEngine engine, String name, int id) {
        this.engine = engine;
        this.name = name;
        this.id = id;
    }

    /** The peer's segment name ({@code ip:port}). */
    public String name() {
        return name;
    }

    int id() {
        return id;
    }

    MooncakeTransferEngine engine() {
        return engine;
    }

    @Override
    public String toString() {
        return "RemoteSegment[" + name + "]";
    }
}
