package io.orbitkv.common;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.protocol.engine.ErrorReason;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.EventBus;
import io.vertx.core.eventbus.Message;
import io.vertx.core.eventbus.MessageConsumer;
import io.vertx.core.eventbus.ReplyException;
import io.vertx.core.eventbus.ReplyFailure;
import io.vertx.core.internal.ContextInternal;
import io.vertx.core.shareddata.LocalMap;
import io.vertx.core.shareddata.Shareable;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;

/**
 * The one mechanism behind every typed role proxy: a local request/reply whose failure comes back as the same
 * {@link OrbitException} the receiving role threw.
 *
 * <p>Design note (the fast path): a role's handler always runs on the role's own context, which keeps its state
 * confined. Between roles of one Manager, though, the event bus adds a reply address, a consumer and a timer per
 * call; measured, that roughly doubled the query round trip. So {@link #serve} also records the handler and its
 * context in the Vertx's local shared map, and {@link #request} from a Vert.x thread calls it directly: on the role's
 * own event-loop thread as a plain call (the handler's future completes in place), otherwise by hopping to the role's
 * context and completing on the caller's. Callers outside Vert.x (tools, tests) still go through the event bus.
 *
 * <p>Design note (the bus's guarantees on both paths): (1) a call answered later than its {@code sendTimeout} fails
 * {@link RoleCallFailure#TIMEOUT} (the timer is only armed when the answer does not come in place); (2) each address
 * admits at most its bound of calls in flight (an {@link InFlightGate}; the slot is held until the handler's future
 * completes, even after the caller timed out) and refuses more with {@link RoleCallFailure#IN_FLIGHT_LIMIT}; (3) a
 * role is never re-entered mid-update: a direct call to a role whose handler is on the stack (A calls B, which calls A
 * back before A's handler returned) is queued on the role's context, as the bus would deliver it, and runs after the
 * update finished. Each is counted per address ({@code orbitkv.role.calls.*}, tag {@code command}: a fixed role
 * address, never a reply address) once {@link #bindMetrics} was called.
 * Either path gives the caller the same typed failures.
 *
 * <p>Withdrawal: a stopping role calls {@link #withdrawAll} first thing; its handlers leave the direct path and the
 * event bus together, so from then on every caller gets SHUTTING_DOWN (NO_HANDLERS on the bus) instead of reaching a
 * role that is tearing its state down. With several event loops the same holds: the hop to the role's context is
 * only taken while the handler is still served.
 */
public final class RoleProxies {
    private static final String LOCAL_ROLES = "orbitkv.local-roles";
    private static final String CALL_STATS = "orbitkv.role-call-stats";
    private static final String METRICS = "orbitkv.role-call-metrics";
    private static final String ROLE_STATE = "orbitkv.role-state";

    /**
     * Calls one address admits in flight unless its role says otherwise: above every bound the engine doors apply
     * (query.max-outstanding is 8192 by default), so it never refuses what they admitted; it stops a runaway caller
     * from growing a role's pending work without limit.
     */
    public static final int DEFAULT_MAX_IN_FLIGHT = 16_384;

    private RoleProxies() {}

    /**
     * Whether a role's handler is on the stack (mid-update). One per role context, touched only on its thread; shared
     * by every address the role serves.
     */
    private static final class RoleState {
        int depth;
    }

    /** The bound and the counters of one address; kept across a role's redeploy so meters stay valid. */
    private record CallStats(InFlightGate gate, AtomicLong timedOut, AtomicLong deferred) implements Shareable {}

    private record Metrics(MeterRegistry registry) implements Shareable {}

    /**
     * A role handler, the context that owns its state, its event-bus consumer and its address's bound. Shareable:
     * lives in the Vertx's local map until the role withdraws it.
     */
    private record LocalRole(String address, Context context, RoleState state, Function<Object, Future<Object>> handler,
                             MessageConsumer<?> consumer, CallStats stats) implements Shareable {}

    @SuppressWarnings("unchecked")
    public static <R> Future<R> request(EventBus bus, String address, Object command, DeliveryOptions options) {
        Context caller = Vertx.currentContext();
        if (caller != null) {
            LocalRole role = caller.owner().sharedData().<String, LocalRole>getLocalMap(LOCAL_ROLES).get(address);
            if (role != null) {
                return (Future<R>) withTimeout(caller, role, callLocal(caller, role, command), options.getSendTimeout());
            }
        }
        return bus.<R>request(address, command, options).transform(ar -> {
            if (ar.succeeded()) {
                return Future.succeededFuture(ar.result().body());
            }
            return Future.failedFuture(toOrbitException(ar.cause()));
        });
    }

    private static Future<Object> callLocal(Context caller, LocalRole role, Object command) {
        // Same thread (the role's context runs on the caller's event loop, the default with one loop): a plain call,
        // unless the role is mid-update. Confinement is per thread, so this keeps the role's state single-threaded
        // without a task hop.
        boolean sameThread = caller == role.context() || (role.context().isEventLoopContext()
                && ((ContextInternal) role.context()).nettyEventLoop().inEventLoop());
        if (sameThread && role.state().depth == 0) {
            return admit(role, command);
        }
        if (sameThread) {
            role.stats().deferred().incrementAndGet();
        }
        Promise<Object> answer = ((ContextInternal) caller).promise();
        role.context().runOnContext(v -> admit(role, command).onComplete(answer));
        return answer.future();
    }

    /** Fails the caller's future with TIMEOUT when the answer has not come within {@code timeoutMs}. */
    private static Future<Object> withTimeout(Context caller, LocalRole role, Future<Object> result, long timeoutMs) {
        if (result.isComplete() || timeoutMs <= 0) {
            return result;
        }
        Promise<Object> answer = ((ContextInternal) caller).promise();
        // The timer and the answer both complete on the caller's context, so check-then-fail cannot race.
        long timer = caller.owner().setTimer(timeoutMs, id -> {
            if (!answer.future().isComplete()) {
                role.stats().timedOut().incrementAndGet();
                answer.fail(new RoleCallException(RoleCallFailure.TIMEOUT,
                        "no answer from " + role.address() + " within " + timeoutMs + " ms"));
            }
        });
        result.onComplete(ar -> {
            caller.owner().cancelTimer(timer);
            if (ar.succeeded()) {
                answer.tryComplete(ar.result());
            } else {
                answer.tryFail(ar.cause());
            }
        });
        return answer.future();
    }

    /** Takes a slot of the address's bound and runs the handler; the slot is given back when its future completes. */
    private static Future<Object> admit(LocalRole role, Object command) {
        InFlightGate gate = role.stats().gate();
        if (!gate.tryEnter()) {
            return Future.failedFuture(refusal(role.address(), gate));
        }
        Future<Object> result = invoke(role.state(), role.handler(), command);
        if (result.isComplete()) {
            gate.exit();
        } else {
            result.onComplete(ar -> gate.exit());
        }
        return result;
    }

    private static RoleCallException refusal(String address, InFlightGate gate) {
        return new RoleCallException(RoleCallFailure.IN_FLIGHT_LIMIT, address + " has " + gate.capacity()
                + " calls in flight");
    }

    @SuppressWarnings("unchecked")
    private static <C, R> Future<R> invoke(RoleState state, Function<C, Future<R>> handler, Object command) {
        state.depth++;
        try {
            return handler.apply((C) command);
        } catch (RuntimeException e) {
            return Future.failedFuture(e);
        } finally {
            state.depth--;
        }
    }

    /**
     * Withdraws every handler the role running on {@code context} serves: from the direct path and from the event
     * bus, at once. A role calls it first thing in {@code stop()}, so from then on callers get SHUTTING_DOWN instead of
     * reaching a role that is tearing its state down. Answers how many it withdrew.
     */
    public static int withdrawAll(Context context) {
        LocalMap<String, LocalRole> roles = context.owner().sharedData().getLocalMap(LOCAL_ROLES);
        int withdrawn = 0;
        for (String address : List.copyOf(roles.keySet())) {
            LocalRole role = roles.get(address);
            if (role != null && role.context() == context && roles.remove(address, role)) {
                role.consumer().unregister();
                withdrawn++;
            }
        }
        return withdrawn;
    }

    /** Whether a handler is served at {@code address} on the direct path (for tests of withdrawal). */
    public static boolean served(Vertx vertx, String address) {
        return vertx.sharedData().getLocalMap(LOCAL_ROLES).get(address) != null;
    }

    /** Calls now in flight at {@code address} (0 when never served). */
    public static int inFlight(Vertx vertx, String address) {
        CallStats stats = vertx.sharedData().<String, CallStats>getLocalMap(CALL_STATS).get(address);
        return stats == null ? 0 : stats.gate().inFlight();
    }

    /** Calls refused at {@code address} for its in-flight bound, direct or by bus. */
    public static long refused(Vertx vertx, String address) {
        CallStats stats = vertx.sharedData().<String, CallStats>getLocalMap(CALL_STATS).get(address);
        return stats == null ? 0 : stats.gate().refused();
    }

    /** Direct calls to {@code address} that timed out. */
    public static long timedOut(Vertx vertx, String address) {
        CallStats stats = vertx.sharedData().<String, CallStats>getLocalMap(CALL_STATS).get(address);
        return stats == null ? 0 : stats.timedOut().get();
    }

    /** Direct calls to {@code address} queued because its role was mid-update. */
    public static long deferred(Vertx vertx, String address) {
        CallStats stats = vertx.sharedData().<String, CallStats>getLocalMap(CALL_STATS).get(address);
        return stats == null ? 0 : stats.deferred().get();
    }

    /**
     * Publishes every address's call counters to {@code registry}: those served already and those served later on
     * this Vertx. The Manager calls it once, before deploying its roles.
     */
    public static void bindMetrics(Vertx vertx, MeterRegistry registry) {
        vertx.sharedData().<String, Metrics>getLocalMap(METRICS).put(METRICS, new Metrics(registry));
        LocalMap<String, CallStats> all = vertx.sharedData().getLocalMap(CALL_STATS);
        for (String address : List.copyOf(all.keySet())) {
            register(registry, address, all.get(address));
        }
    }

    private static void register(MeterRegistry registry, String address, CallStats stats) {
        FunctionCounter.builder("orbitkv.role.calls.refused", stats, s -> s.gate().refused()).tag("command", address)
                .description("Calls refused because the role had its bound of calls in flight").register(registry);
        FunctionCounter.builder("orbitkv.role.calls.timed.out", stats, s -> s.timedOut().get()).tag("command", address)
                .description("Direct calls not answered within their send timeout").register(registry);
        FunctionCounter.builder("orbitkv.role.calls.deferred", stats, s -> s.deferred().get()).tag("command", address)
                .description("Direct calls queued because the role was mid-update").register(registry);
        Gauge.builder("orbitkv.role.calls.in.flight", stats, s -> s.gate().inFlight()).tag("command", address)
                .description("Calls the role has not answered yet").register(registry);
    }

    private static CallStats stats(Vertx vertx, String address, int maxInFlight) {
        LocalMap<String, CallStats> all = vertx.sharedData().getLocalMap(CALL_STATS);
        CallStats created = new CallStats(new InFlightGate(maxInFlight), new AtomicLong(), new AtomicLong());
        CallStats existing = all.putIfAbsent(address, created);
        if (existing != null) {
            return existing;
        }
        Metrics metrics = vertx.sharedData().<String, Metrics>getLocalMap(METRICS).get(METRICS);
        if (metrics != null) {
            register(metrics.registry(), address, created);
        }
        return created;
    }

    /** {@link #serve(EventBus, String, int, Function)} with {@link #DEFAULT_MAX_IN_FLIGHT}. */
    public static <C, R> MessageConsumer<C> serve(EventBus bus, String address, Function<C, Future<R>> handler) {
        return serve(bus, address, DEFAULT_MAX_IN_FLIGHT, handler);
    }

    /**
     * Binds a role's handler to an address with a bound of {@code maxInFlight} calls in flight, turning typed
     * failures into coded replies; returns the consumer. Called on the role's context; {@link #withdrawAll} undoes it.
     */
    @SuppressWarnings("unchecked")
    public static <C, R> MessageConsumer<C> serve(EventBus bus, String address, int maxInFlight,
                                                  Function<C, Future<R>> handler) {
        Context owner = Vertx.currentContext();
        RoleState state = owner == null ? null : owner.get(ROLE_STATE);
        if (state == null) {
            state = new RoleState();
            if (owner != null) {
                owner.put(ROLE_STATE, state);
            }
        }
        RoleState roleState = state;
        // Outside a context (tools) the handler is reached by bus only, with a bound of its own.
        CallStats stats = owner == null
                ? new CallStats(new InFlightGate(maxInFlight), new AtomicLong(), new AtomicLong())
                : stats(owner.owner(), address, maxInFlight);
        MessageConsumer<C> consumer = bus.<C>localConsumer(address, (Message<C> message) -> {
            InFlightGate gate = stats.gate();
            if (!gate.tryEnter()) {
                RoleCallException refused = refusal(address, gate);
                message.fail(refused.failureCode(), refused.detail());
                return;
            }
            Future<R> result = invoke(roleState, handler, message.body());
            result.onComplete(ar -> {
                gate.exit();
                if (ar.succeeded()) {
                    message.reply(ar.result());
                } else if (ar.cause() instanceof TypedFailure typed) {
                    message.fail(typed.failureCode(), typed.detail());
                } else {
                    message.fail(-1, String.valueOf(ar.cause()));
                }
            });
        });
        if (owner != null) {
            Function<Object, Future<Object>> untyped = c -> (Future<Object>) (Future<?>) handler.apply((C) c);
            owner.owner().sharedData().<String, LocalRole>getLocalMap(LOCAL_ROLES)
                    .put(address, new LocalRole(address, owner, roleState, untyped, consumer, stats));
        }
        return consumer;
    }

    static Throwable toOrbitException(Throwable cause) {
        if (cause instanceof ReplyException reply && reply.failureType() == ReplyFailure.RECIPIENT_FAILURE) {
            ErrorReason reason = ErrorReason.forNumber(reply.failureCode());
            if (reason != null && reason != ErrorReason.ERROR_REASON_UNSPECIFIED) {
                return new OrbitException(reason, reply.getMessage());
            }
            RoleCallFailure call = RoleCallFailure.forCode(reply.failureCode());
            if (call != null) {
                return new RoleCallException(call, reply.getMessage());
            }
        }
        if (cause instanceof ReplyException reply && reply.failureType() == ReplyFailure.TIMEOUT) {
            return new RoleCallException(RoleCallFailure.TIMEOUT, reply.getMessage());
        }
        if (cause instanceof ReplyException reply && reply.failureType() == ReplyFailure.NO_HANDLERS) {
            return new OrbitException(ErrorReason.SHUTTING_DOWN, "role not available: " + reply.getMessage());
        }
        return cause;
    }
}
