package io.orbitkv.planning;

import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostEstimateResult;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ShadowRequest;
import io.vertx.core.Future;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * The planning role's view of the cost role: which selection mode the cost flags allow, estimates for a set of keys,
 * and shadow records. Estimates are advisory: a busy or absent cost role answers unknown, never an error.
 */
public interface EstimateSource {

    Planner.SelectionMode mode();

    /** An answer for every key asked (unknown ones included). */
    Future<Map<CostEstimateKey, CostEstimateResult>> estimates(Set<CostEstimateKey> keys);

    void recordShadow(ShadowRequest request);

    /**
     * Estimates answered synchronously for one plan made now, or {@code null} when they must be fetched
     * ({@link #estimates}); use it only within the call that obtained it.
     */
    default Planner.EstimateLookup inPlace() {
        return null;
    }

    /**
     * A complete-route sample from the execution of a plan (the route's own key, see {@link RouteTemplate#costKey}):
     * only successful executions report, so failures never train an estimate. Ignored without a cost role.
     */
    default void report(ObservationRecord record) {
    }

    /** No cost role: nothing observed, nothing selected. */
    EstimateSource NONE = new EstimateSource() {
        @Override
        public Planner.SelectionMode mode() {
            return Planner.SelectionMode.OFF;
        }

        @Override
        public Future<Map<CostEstimateKey, CostEstimateResult>> estimates(Set<CostEstimateKey> keys) {
            Map<CostEstimateKey, CostEstimateResult> none = new HashMap<>();
            keys.forEach(key -> none.put(key, new CostEstimateResult.Unavailable(CostEstimateResult.Reason.DISABLED, 0)));
            return Future.succeededFuture(none);
        }

        @Override
        public void recordShadow(ShadowRequest request) {
        }
    };

    /** The cost role through its proxy; the mode follows its flags at each call (observation can be switched live). */
    static EstimateSource of(CostProxy cost) {
        Objects.requireNonNull(cost, "cost");
        return new EstimateSource() {
            @Override
            public Planner.SelectionMode mode() {
                return cost.selectionEnabled() ? Planner.SelectionMode.SELECT
                        : cost.observationsEnabled() ? Planner.SelectionMode.SHADOW : Planner.SelectionMode.OFF;
            }

            @Override
            public Future<Map<CostEstimateKey, CostEstimateResult>> estimates(Set<CostEstimateKey> keys) {
                List<CostEstimateKey> ordered = new ArrayList<>(keys);
                List<Future<CostEstimateResult>> answers = new ArrayList<>(ordered.size());
                for (CostEstimateKey key : ordered) {
                    answers.add(cost.estimate(key));
                }
                return Future.join(answers).transform(ignored -> {
                    Map<CostEstimateKey, CostEstimateResult> byKey = new HashMap<>();
                    for (int i = 0; i < ordered.size(); i++) {
                        Future<CostEstimateResult> answer = answers.get(i);
                        byKey.put(ordered.get(i), answer.succeeded() ? answer.result()
                                : new CostEstimateResult.Unavailable(CostEstimateResult.Reason.BUSY, 0));
                    }
                    return Future.succeededFuture(byKey);
                });
            }

            @Override
            public Planner.EstimateLookup inPlace() {
                var lookup = cost.estimatesInPlace();
                return lookup == null ? null : lookup::apply;
            }

            @Override
            public void recordShadow(ShadowRequest request) {
                cost.recordShadow(request);
            }

            @Override
            public void report(ObservationRecord record) {
                cost.report(record);
            }
        };
    }
}
