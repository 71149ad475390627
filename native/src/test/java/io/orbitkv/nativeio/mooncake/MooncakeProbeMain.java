package io.orbitkv.nativeio.mooncake;

/**
 * Run in a child JVM by {@link MooncakeUnavailableTest}: prints what the probe concluded and what an entry point
 * does with it, one {@code key=value} per line, so the parent can check a probe it cannot re-run in its own JVM.
 */
public final class MooncakeProbeMain {
    private MooncakeProbeMain() {}

    public static void main(String[] args) {
        MooncakeStatus status = MooncakeTransferEngine.status();
        System.out.println("available=" + MooncakeTransferEngine.isAvailable());
        System.out.println("loaded=" + status.loaded());
        System.out.println("cause=" + status.cause());
        System.out.println("causeType=" + (MooncakeTransferEngine.unavailabilityCause() == null ? "none"
                : MooncakeTransferEngine.unavailabilityCause().getClass().getSimpleName()));
        try (MooncakeTransferEngine engine = MooncakeTransferEngine.startTcp("127.0.0.1")) {
            System.out.println("started=" + engine.segmentName());
        } catch (MooncakeUnavailableException refused) {
            System.out.println("refused=" + (refused.getCause() == MooncakeTransferEngine.unavailabilityCause()));
        }
        System.out.println("live=" + MooncakeTransferEngine.liveResources().total());
    }
}
