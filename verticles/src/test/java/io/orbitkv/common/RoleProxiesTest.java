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
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A role that stops withdraws its handlers at once: callers on another event loop (the direct path) and outside
 * Vert.x (the event bus) then get SHUTTING_DOWN instead of reaching a role that is tearing its state down.
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
}
