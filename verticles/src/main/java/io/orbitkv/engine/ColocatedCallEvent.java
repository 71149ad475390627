package io.orbitkv.engine;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Enabled;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;

/**
 * One call answered by the co-located door, split into its steps on the Manager's side (JFR; off unless a recording
 * enables {@value #NAME}). The steps run from the frame's arrival in the Manager (its recv returned on the event loop)
 * to the reply's send returning, one after the other. {@code bench dram --colocated-steps} records it.
 */
@Name(ColocatedCallEvent.NAME)
@Label("Co-located call (Manager)")
@Category({"OrbitKV", "Engine"})
@Description("A call over the co-located channel, from its frame's arrival to its reply's send")
@Enabled(false)
@StackTrace(false)
final class ColocatedCallEvent extends jdk.jfr.Event {
    static final String NAME = "io.orbitkv.ColocatedCall";

    @Label("Opcode")
    int opcode;

    @Label("Decode")
    @Description("Frame checks and the protobuf decode of the request")
    @Timespan(Timespan.NANOSECONDS)
    long decodeNanos;

    @Label("Run")
    @Description("The engine call itself: from its start to its future's completion")
    @Timespan(Timespan.NANOSECONDS)
    long runNanos;

    @Label("Reply")
    @Description("Tracking, the protobuf encode of the reply and its send")
    @Timespan(Timespan.NANOSECONDS)
    long replyNanos;
}
