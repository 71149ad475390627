package io.orbitkv.admission;

import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.internal.ContextInternal;
import java.util.function.Supplier;

/**
 * Runs admission's steps on admission's loop when another role calls back from its own (planning's callbacks may
 * arrive on another event-loop thread): a plain call on the same thread, else a hop whose answer completes on the
 * caller's context. Without a context (driven directly by tests) every step is a plain call.
 */
final class LoopHop {
    private final Context context;

    /** @param context the admission role's context; null when driven directly on one thread */
    LoopHop(Context context) {
        this.context = context;
    }

    <T> Future<T> run(Supplier<Future<T>> step) {
        Context here = Vertx.currentContext();
        if (context == null || here == context || (context.isEventLoopContext()
                && ((ContextInternal) context).nettyEventLoop().inEventLoop())) {
            return call(step);
        }
        Promise<T> answer = here == null ? Promise.promise() : ((ContextInternal) here).promise();
        context.runOnContext(v -> call(step).onComplete(answer));
        return answer.future();
    }

    private static <T> Future<T> call(Supplier<Future<T>> step) {
        try {
            return step.get();
        } catch (RuntimeException e) {
            return Future.failedFuture(e);
        }
    }
}
