package io.orbitkv.client;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Enabled;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;

/**
 * One call of a {@link ColocatedChannel}, split into its steps on the engine's side (JFR; off unless a recording
 * enables {@value #NAME}). {@code wait} holds the Manager's own part ({@code io.orbitkv.ColocatedCall}) and the
 * kernel's and the scheduler's: the two messages and the wake-ups. {@code bench dram --colocated-steps} records it.
 */
@Name(ColocatedClientCallEvent.NAME)
@Label("Co-located call (engine)")
@Category({"OrbitKV", "Client"})
@Description("A call over the co-located channel as the engine sees it")
@Enabled(false)
@StackTrace(false)
final class ColocatedClientCallEvent extends jdk.jfr.Event {
    static final String NAME = "io.orbitkv.ColocatedClientCall";

    @Label("Opcode")
    int opcode;

    @Label("Encode and send")
    @Timespan(Timespan.NANOSECONDS)
    long sendNanos;

    @Label("Wait")
    @Description("From the send's return to the reply's recv returning")
    @Timespan(Timespan.NANOSECONDS)
    long waitNanos;

    @Label("Parse")
    @Timespan(Timespan.NANOSECONDS)
    long parseNanos;
}
