package io.orbitkv.common;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;
import static org.awaitility.Awaitility.await;

import io.orbitkv.protocol.engine.ErrorReason;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.VerticleBase;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.eventbus.DeliveryOptions;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The direct path keeps the bus's guarantees: a role that stops withdraws its handlers at once (callers on another
 * event loop and outside Vert.x then get SHUTTING_DOWN); a call not answered within its send timeout fails TIMEOUT; an
 * address admits at most its bound of calls in flight; a role is not re-entered mid-update.
 */
class RoleProxiesTest {
    static final String ADDRESS = "test.echo";
    final Vertx vertx = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(2));

    @AfterEach
    void close() throws Exception {
        vertx.close().await(10, TimeUnit.SECONDS);
    }

    /** Serves ADDRESS; its stop withdraws first and then waits, so a call during the stop can be made. */
    static final class Echo extends VerticleBase {
        final Promise<Void> stopped = Promise.promise();
        volatile String thread;

        @Override
        public Future<?> start() {
            RoleProxies.<String, String>serve(vertx.eventBus(), ADDRESS, c -> {
                thread = Thread.currentThread().getName();
                return Future.succeededFuture("echo " + c);
            });
            return Future.succeededFuture();
        }

        @Override
        public Future<?> stop() {
            RoleProxies.withdrawAll(context);
            return stopped.future();
        }
    }

    static final class Caller extends VerticleBase {
        Future<String> call() {
            Promise<String> answer = Promise.promise();
            context.runOnContext(v -> RoleProxies.<String>request(vertx.eventBus(), ADDRESS, "x", new DeliveryOptions())
                    .onComplete(answer));
            return answer.future();
        }
    }

    @Test
    void aStoppingRoleIsWithdrawnFromTheDirectPathAndTheBusAtOnce() throws Exception {
        Echo echo = new Echo();
        Caller caller = new Caller();
        String echoId = vertx.deployVerticle(echo).await(10, TimeUnit.SECONDS);
        vertx.deployVerticle(caller).await(10, TimeUnit.SECONDS);
        assertThat(caller.call().await(10, TimeUnit.SECONDS)).isEqualTo("echo x");
        assertThat(RoleProxies.served(vertx, ADDRESS)).isTrue();

        Future<Void> undeployed = vertx.undeploy(echoId);
        // The stop is under way (it waits for the test) and already refuses.
        await().atMost(Duration.ofSeconds(10)).until(() -> !RoleProxies.served(vertx, ADDRESS));
        OrbitException direct = catchThrowableOfType(OrbitException.class, () -> caller.call().await(10, TimeUnit.SECONDS));
        assertThat(direct.reason()).isEqualTo(ErrorReason.SHUTTING_DOWN);
        OrbitException viaBus = catchThrowableOfType(OrbitException.class, () -> RoleProxies.<String>request(vertx.eventBus(),
                ADDRESS, "y", new DeliveryOptions().setSendTimeout(5000)).await(10, TimeUnit.SECONDS));
        assertThat(viaBus.reason()).isEqualTo(ErrorReason.SHUTTING_DOWN);
        echo.stopped.complete();
        undeployed.await(10, TimeUnit.SECONDS);
    }

    /** A role whose handlers {@code setup} serves from its start; {@link #on} runs work on its context. */
    static final class Role extends VerticleBase {
        final Consumer<Role> setup;

        Role(Consumer<Role> setup) {
            this.setup = setup;
        }

        @Override
        public Future<?> start() {
            setup.accept(this);
            return Future.succeededFuture();
        }

        <T> Future<T> on(java.util.function.Supplier<Future<T>> work) {
            Promise<T> answer = Promise.promise();
            context.runOnContext(v -> work.get().onComplete(answer));
            return answer.future();
        }
    }

    static final DeliveryOptions SOON = new DeliveryOptions().setSendTimeout(10_000);

    @Test
    void aRoleIsNotReenteredMidUpdate() throws Exception {
        // One event loop, as in a default Manager: every call below is a direct call on the same thread.
        Vertx one = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(1));
        try {
            boolean[] updating = new boolean[1];
            // A's update calls B, and B's handler calls A back while A's update is still on the stack.
            Role a = new Role(r -> {
                RoleProxies.<String, String>serve(one.eventBus(), "a.update", c -> {
                    updating[0] = true;
                    Future<String> viaB = RoleProxies.request(one.eventBus(), "b.ask", c, SOON);
                    updating[0] = false;
                    return viaB;
                });
                RoleProxies.<String, String>serve(one.eventBus(), "a.read",
                        c -> Future.succeededFuture(updating[0] ? "saw a half-done update" : "saw a finished update"));
            });
            Role b = new Role(r -> RoleProxies.<String, String>serve(one.eventBus(), "b.ask",
                    c -> RoleProxies.request(one.eventBus(), "a.read", c, SOON)));
            Role caller = new Role(r -> { });
            for (Role role : List.of(a, b, caller)) {
                one.deployVerticle(role).await(10, TimeUnit.SECONDS);
            }
            String answer = caller.<String>on(() -> RoleProxies.request(one.eventBus(), "a.update", "x", SOON))
                    .await(10, TimeUnit.SECONDS);
            assertThat(answer).isEqualTo("saw a finished update");
            assertThat(RoleProxies.deferred(one, "a.read")).isEqualTo(1);
            assertThat(RoleProxies.deferred(one, "b.ask")).as("B was not mid-update: a plain call").isZero();
            assertThat(RoleProxies.inFlight(one, "a.update")).isZero();
        } finally {
            one.close().await(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void aDirectCallNotAnsweredInTimeFailsTimeoutAndItsSlotIsHeldUntilTheRoleAnswers() throws Exception {
        List<Promise<String>> pending = new ArrayList<>();
        Role slow = new Role(r -> RoleProxies.<String, String>serve(vertx.eventBus(), "slow", c -> {
            Promise<String> answer = Promise.promise();
            pending.add(answer);
            return answer.future();
        }));
        Role caller = new Role(r -> { });
        vertx.deployVerticle(slow).await(10, TimeUnit.SECONDS);
        vertx.deployVerticle(caller).await(10, TimeUnit.SECONDS);

        RoleCallException timedOut = catchThrowableOfType(RoleCallException.class, () -> caller.<String>on(
                () -> RoleProxies.request(vertx.eventBus(), "slow", "x", new DeliveryOptions().setSendTimeout(100)))
                .await(10, TimeUnit.SECONDS));
        assertThat(timedOut.failure()).isEqualTo(RoleCallFailure.TIMEOUT);
        assertThat(RoleProxies.timedOut(vertx, "slow")).isEqualTo(1);
        assertThat(RoleProxies.inFlight(vertx, "slow")).as("the role still works on it").isEqualTo(1);
        slow.on(() -> {
            pending.forEach(p -> p.complete("late"));
            return Future.succeededFuture();
        }).await(10, TimeUnit.SECONDS);
        assertThat(RoleProxies.inFlight(vertx, "slow")).isZero();

        // The event bus answers the same typed failure.
        RoleCallException viaBus = catchThrowableOfType(RoleCallException.class, () -> RoleProxies.<String>request(
                vertx.eventBus(), "slow", "y", new DeliveryOptions().setSendTimeout(100)).await(10, TimeUnit.SECONDS));
        assertThat(viaBus.failure()).isEqualTo(RoleCallFailure.TIMEOUT);
        slow.on(() -> {
            pending.forEach(p -> p.tryComplete("late"));
            return Future.succeededFuture();
        }).await(10, TimeUnit.SECONDS);
    }

    @Test
    void anAddressAdmitsItsBoundOfCallsInFlightAndRefusesMoreCounted() throws Exception {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        RoleProxies.bindMetrics(vertx, registry);
        List<Promise<String>> pending = new ArrayList<>();
        Role busy = new Role(r -> RoleProxies.<String, String>serve(vertx.eventBus(), "busy", 2, c -> {
            Promise<String> answer = Promise.promise();
            pending.add(answer);
            return answer.future();
        }));
        Role caller = new Role(r -> { });
        vertx.deployVerticle(busy).await(10, TimeUnit.SECONDS);
        vertx.deployVerticle(caller).await(10, TimeUnit.SECONDS);

        List<Future<String>> calls = caller.<List<Future<String>>>on(() -> {
            List<Future<String>> made = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                made.add(RoleProxies.request(vertx.eventBus(), "busy", "c" + i, SOON));
            }
            return Future.succeededFuture(made);
        }).await(10, TimeUnit.SECONDS);
        RoleCallException refused = catchThrowableOfType(RoleCallException.class,
                () -> calls.get(2).await(10, TimeUnit.SECONDS));
        assertThat(refused.failure()).isEqualTo(RoleCallFailure.IN_FLIGHT_LIMIT);
        RoleCallException viaBus = catchThrowableOfType(RoleCallException.class, () -> RoleProxies.<String>request(
                vertx.eventBus(), "busy", "bus", SOON).await(10, TimeUnit.SECONDS));
        assertThat(viaBus.failure()).isEqualTo(RoleCallFailure.IN_FLIGHT_LIMIT);
        assertThat(RoleProxies.inFlight(vertx, "busy")).isEqualTo(2);
        assertThat(RoleProxies.refused(vertx, "busy")).isEqualTo(2);
        assertThat(registry.get("orbitkv.role.calls.refused").tag("command", "busy").functionCounter().count())
                .isEqualTo(2);

        busy.on(() -> {
            pending.forEach(p -> p.complete("done"));
            return Future.succeededFuture();
        }).await(10, TimeUnit.SECONDS);
        assertThat(calls.get(0).await(10, TimeUnit.SECONDS)).isEqualTo("done");
        assertThat(RoleProxies.inFlight(vertx, "busy")).isZero();
        Future<String> later = caller.on(() -> RoleProxies.request(vertx.eventBus(), "busy", "later", SOON));
        await().atMost(Duration.ofSeconds(10)).until(() -> pending.size() == 3);
        busy.on(() -> {
            pending.get(2).complete("admitted");
            return Future.succeededFuture();
        }).await(10, TimeUnit.SECONDS);
        assertThat(later.await(10, TimeUnit.SECONDS)).isEqualTo("admitted");
    }
}
