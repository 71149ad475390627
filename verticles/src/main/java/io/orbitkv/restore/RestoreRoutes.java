package io.orbitkv.restore;

import io.orbitkv.nativeio.cuda.CudaRuntime;
import io.orbitkv.nativeio.cufile.CuFile;
import io.orbitkv.protocol.engine.RestoreRoute;
import io.orbitkv.restore.RestoreCommands.RouteStatus;
import java.util.List;

/**
 * Which Manager-executed restore routes this process can execute, and for each one it cannot, why. Read from the
 * native façades' once-only probes, so every caller (registration replies, demand validation, {@code /health}) states
 * the same cause.
 */
final class RestoreRoutes {
    private static final List<RouteStatus> ROUTES = List.of(
            new RouteStatus(RestoreRoute.HOST_REGION, true, ""),
            status(RestoreRoute.CUDA_IPC, CudaRuntime.isAvailable(), CudaRuntime.unavailabilityCause()),
            // The façade may be available on a GPU machine, but no executor reads SSD extents into device memory yet:
            // the route is then unavailable for that reason, never faked through another route.
            CuFile.isAvailable()
                    ? new RouteStatus(RestoreRoute.CUFILE, false, "no cuFile restore executor yet (the cuFile library is available)")
                    : status(RestoreRoute.CUFILE, false, CuFile.unavailabilityCause()));

    private RestoreRoutes() {}

    private static RouteStatus status(RestoreRoute route, boolean available, Throwable cause) {
        return new RouteStatus(route, available, available ? "" : String.valueOf(cause.getMessage()));
    }

    /** Every route, in enum order. */
    public static List<RouteStatus> all() {
        return ROUTES;
    }

    public static RouteStatus of(RestoreRoute route) {
        for (RouteStatus status : ROUTES) {
            if (status.route() == route) {
                return status;
            }
        }
        throw new IllegalArgumentException("no restore route " + route);
    }
}
