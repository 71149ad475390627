package io.orbitkv.manager;

import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.orbitkv.events.EventsProxy;
import io.orbitkv.nativeio.mooncake.MooncakeTransferEngine;
import io.orbitkv.restore.RestoreCommands;
import io.orbitkv.restore.RestoreProxy;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.http.HttpServer;
import io.vertx.core.json.JsonObject;

/**
 * Serves {@code GET /metrics} (Prometheus text), {@code GET /health} (JSON) and, with the events role,
 * {@code GET /kv/summary} (the router summary, JSON) on the metrics address. The scrape runs
 * on a worker (ordered: one at a time), never on this verticle's event loop; meters read only snapshots or atomics
 * their roles publish, never a role's loop-confined state.
 */
public final class HealthAndMetricsVerticle extends VerticleBase {
    private final PrometheusMeterRegistry registry;
    private final String host;
    private final int port;
    private final boolean transferEngineProbed;
    private final boolean summaries;
    private HttpServer server;

    /**
     * {@code transferEngineProbed}: whether the Manager probed the Transfer Engine (only with a peer transport);
     * {@code summaries}: whether the events role runs and {@code /kv/summary} answers.
     */
    public HealthAndMetricsVerticle(PrometheusMeterRegistry registry, String host, int port, boolean transferEngineProbed,
                                    boolean summaries) {
        this.registry = registry;
        this.host = host;
        this.port = port;
        this.transferEngineProbed = transferEngineProbed;
        this.summaries = summaries;
    }

    /** What /health says of the Transfer Engine; without a peer transport it was never loaded, and is not now. */
    private JsonObject transferEngine() {
        if (!transferEngineProbed) {
            return JsonObject.of("loaded", false, "cause", "not probed: no peer transport on this Manager");
        }
        return JsonObject.of("loaded", MooncakeTransferEngine.status().loaded(), "cause",
                MooncakeTransferEngine.status().cause());
    }

    public int actualPort() {
        return server.actualPort();
    }

    /** Manager-executed restore routes: whether each can run here and, if not, the cause its probe kept. */
    static io.vertx.core.json.JsonArray restoreRoutes() {
        io.vertx.core.json.JsonArray routes = new io.vertx.core.json.JsonArray();
        for (RestoreCommands.RouteStatus status : RestoreProxy.routes()) {
            JsonObject route = new JsonObject().put("route", status.route().name()).put("available", status.available());
            if (!status.available()) {
                route.put("cause", status.cause());
            }
            routes.add(route);
        }
        return routes;
    }

    @Override
    public Future<?> start() {
        StorageProxy storage = new StorageProxy(vertx);
        EventsProxy events = summaries ? new EventsProxy(vertx) : null;
        return vertx.createHttpServer().requestHandler(request -> {
            switch (request.path()) {
                // A scrape walks every meter (and formats them): a worker does it, one at a time, not this loop.
                case "/metrics" -> vertx.executeBlocking(registry::scrape, true).onComplete(ar -> {
                    if (ar.succeeded()) {
                        request.response().putHeader("content-type", "text/plain; version=0.0.4; charset=utf-8")
                                .end(ar.result());
                    } else {
                        request.response().setStatusCode(500).end("scrape failed\n");
                    }
                });
                case "/health" -> storage.stats().onComplete(ar -> {
                    if (ar.succeeded()) {
                        request.response().putHeader("content-type", "application/json").end(new JsonObject()
                                .put("status", "UP").put("pool_bytes", ar.result().poolBytes())
                                .put("pool_used_bytes", ar.result().usedBytes())
                                .put("resident_images", ar.result().residentImages())
                                .put("restore_routes", restoreRoutes())
                                .put("mooncake_te", transferEngine()).encode());
                    } else {
                        request.response().setStatusCode(503).putHeader("content-type", "application/json")
                                .end(new JsonObject().put("status", "DOWN").put("reason", "storage role not answering").encode());
                    }
                });
                case "/kv/summary" -> {
                    if (events == null) {
                        request.response().setStatusCode(404).end("no router summary: set events.summary.enabled or "
                                + "events.endpoint\n");
                        return;
                    }
                    events.summary().onComplete(ar -> {
                        if (ar.succeeded()) {
                            request.response().putHeader("content-type", "application/json")
                                    .end(ar.result().toJson().encode());
                        } else {
                            request.response().setStatusCode(503).end("summary unavailable\n");
                        }
                    });
                }
                default -> request.response().setStatusCode(404).end("not found: try /metrics or /health\n");
            }
        }).listen(port, host).onSuccess(s -> server = s);
    }
}
