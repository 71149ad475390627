package io.orbitkv.protocol.colocated;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.List;

/**
 * The co-located channel's wire format: one {@code SOCK_SEQPACKET} message is one frame, so no length prefix is needed.
 *
 * <pre>
 *  offset 0  u8   version ({@value #VERSION})
 *  offset 1  u8   opcode: 0 = Hello, n = the n-th engine.proto call of {@link #METHODS}
 *  offset 2  u16  status (replies): 0 = OK, an ErrorReason number, or {@value #STATUS_INTERNAL}; 0 in requests
 *  offset 4  u32  request id: chosen by the client, echoed in the reply
 *  offset 8  body: the engine.proto request or reply message (protobuf); on a refusal "REASON: explanation" in UTF-8
 * </pre>
 *
 * All integers little-endian. The first frame of a connection is Hello with the engine token (UTF-8) as its body; its
 * reply body is {@code u32 maxFrameBytes, u32 maxInFlight}. Shared by the Manager's door and the clients (the Python
 * client mirrors these constants).
 */
public final class ColocatedFrame {
    public static final int VERSION = 1;
    public static final int HEADER_BYTES = 8;
    public static final int OP_HELLO = 0;
    public static final int STATUS_OK = 0;
    /** A failure inside the Manager (not a refusal of the request): gRPC's INTERNAL. */
    public static final int STATUS_INTERNAL = 0xFFFF;
    /** The Hello reply's body: max frame bytes and max requests in flight, both u32. */
    public static final int HELLO_REPLY_BODY_BYTES = 8;
    /** engine.proto's calls in wire order: opcode = index + 1. Appending keeps older clients' opcodes. */
    public static final List<String> METHODS = List.of("Register", "Unregister", "Heartbeat", "AllocatePublish",
            "SealPublish", "AbortPublish", "SubmitQuery", "SubmitDemand", "PollQuery", "CancelQuery", "ReleaseLease",
            "Stats", "Ping", "Retain", "Unretain");

    private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private ColocatedFrame() {}

    /** The opcode of an engine.proto method name, or -1 when the channel does not carry it. */
    public static int opcode(String methodName) {
        int index = METHODS.indexOf(methodName);
        return index < 0 ? -1 : index + 1;
    }

    /** The method name of an opcode, or null (Hello and unknown opcodes). */
    public static String method(int opcode) {
        return opcode >= 1 && opcode <= METHODS.size() ? METHODS.get(opcode - 1) : null;
    }

    public static void writeHeader(MemorySegment frame, int opcode, int status, int requestId) {
        frame.set(ValueLayout.JAVA_BYTE, 0, (byte) VERSION);
        frame.set(ValueLayout.JAVA_BYTE, 1, (byte) opcode);
        frame.set(U16, 2, (short) status);
        frame.set(U32, 4, requestId);
    }

    public static int version(MemorySegment frame) {
        return frame.get(ValueLayout.JAVA_BYTE, 0) & 0xff;
    }

    public static int opcode(MemorySegment frame) {
        return frame.get(ValueLayout.JAVA_BYTE, 1) & 0xff;
    }

    public static int status(MemorySegment frame) {
        return frame.get(U16, 2) & 0xffff;
    }

    public static int requestId(MemorySegment frame) {
        return frame.get(U32, 4);
    }

    public static int u32(MemorySegment frame, long offset) {
        return frame.get(U32, offset);
    }

    public static void u32(MemorySegment frame, long offset, int value) {
        frame.set(U32, offset, value);
    }
}
