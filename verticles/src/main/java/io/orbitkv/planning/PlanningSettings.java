package io.orbitkv.planning;

import io.orbitkv.common.ConfigException;
import io.orbitkv.common.ConfigValues;
import java.util.Map;

/**
 * The planning role's section of the Manager's configuration ({@code planning.*}).
 *
 * @param transfers the transfer queues, one per source medium: outstanding (submitted, not yet terminal) bytes, the
 *                  share of them speculative reads may hold, how many transfers may wait, and their order
 */
public record PlanningSettings(TransferScheduler.Settings transfers) {

    /** The keys and defaults this section adds to the Manager's configuration. */
    public static final Map<String, String> DEFAULTS = Map.of(
            // The planning role's per-medium transfer queues (SSD reads back into DRAM today).
            "planning.transfers.outstanding-per-medium", "256MiB",
            "planning.transfers.speculative-fraction", "0.25",
            "planning.transfers.max-queued-per-medium", "1024",
            // arrival: each class by arrival; slack: by latest start time (no TTFT gain measured yet: perf/README verdicts).
            "planning.transfers.order", "arrival");

    public static PlanningSettings fromConfig(ConfigValues v) {
        long outstanding = v.size("planning.transfers.outstanding-per-medium", 4096, 1L << 40);
        double speculative = v.fraction("planning.transfers.speculative-fraction");
        int queued = (int) v.integer("planning.transfers.max-queued-per-medium", 1, 1 << 20);
        String order = v.string("planning.transfers.order").strip();
        if (!order.equals("slack") && !order.equals("arrival")) {
            throw new ConfigException("planning.transfers.order", "must be slack or arrival, got '" + order + "'");
        }
        return new PlanningSettings(TransferScheduler.Settings.uniform(outstanding, speculative, queued)
                .withSlackOrder(order.equals("slack")));
    }
}
