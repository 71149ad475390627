package io.orbitkv.nativeio.mooncake;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Raw FFM downcalls into Mooncake's Transfer Engine C API ({@code transfer_engine_c.h} at the pinned commit), one
 * handle per function, in the header's order and shaped exactly like its prototypes: {@code transfer_engine_t} and
 * every pointer are addresses, {@code size_t}/{@code uint64_t}/{@code batch_id_t} are 64-bit longs,
 * {@code segment_id_t} is an int. Nothing here validates, maps errors or owns memory: that is
 * {@link MooncakeTransferEngine}'s job, and a wrong argument here can end the process (the C wrappers neither check
 * handles nor catch C++ exceptions). Kept mechanical: change it only by re-reading the header.
 */
@SuppressWarnings("restricted") // downcall handles are the point of this class; access is granted at launch
final class TransferEngineBindings {
    static final int OPCODE_READ = 0;
    static final int OPCODE_WRITE = 1;
    static final long INVALID_BATCH = -1L; // UINT64_MAX

    /** {@code struct transfer_request { int opcode; void* source; int32 target_id; uint64 target_offset; uint64 length; }}. */
    static final StructLayout TRANSFER_REQUEST = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("opcode"), MemoryLayout.paddingLayout(4),
            ValueLayout.ADDRESS.withName("source"),
            ValueLayout.JAVA_INT.withName("target_id"), MemoryLayout.paddingLayout(4),
            ValueLayout.JAVA_LONG.withName("target_offset"),
            ValueLayout.JAVA_LONG.withName("length"));
    static final long REQUEST_OPCODE = TRANSFER_REQUEST.byteOffset(MemoryLayout.PathElement.groupElement("opcode"));
    static final long REQUEST_SOURCE = TRANSFER_REQUEST.byteOffset(MemoryLayout.PathElement.groupElement("source"));
    static final long REQUEST_TARGET_ID = TRANSFER_REQUEST.byteOffset(MemoryLayout.PathElement.groupElement("target_id"));
    static final long REQUEST_TARGET_OFFSET = TRANSFER_REQUEST.byteOffset(MemoryLayout.PathElement.groupElement("target_offset"));
    static final long REQUEST_LENGTH = TRANSFER_REQUEST.byteOffset(MemoryLayout.PathElement.groupElement("length"));

    /** {@code struct transfer_status { int status; uint64 transferred_bytes; }}. */
    static final StructLayout TRANSFER_STATUS = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("status"), MemoryLayout.paddingLayout(4),
            ValueLayout.JAVA_LONG.withName("transferred_bytes"));
    static final long STATUS_STATUS = TRANSFER_STATUS.byteOffset(MemoryLayout.PathElement.groupElement("status"));
    static final long STATUS_TRANSFERRED = TRANSFER_STATUS.byteOffset(MemoryLayout.PathElement.groupElement("transferred_bytes"));

    /** {@code struct buffer_entry { void* addr; size_t length; }}. */
    static final StructLayout BUFFER_ENTRY = MemoryLayout.structLayout(
            ValueLayout.ADDRESS.withName("addr"), ValueLayout.JAVA_LONG.withName("length"));

    /** {@code struct notify_msg { char* name; char* msg; }}, passed by value. */
    static final StructLayout NOTIFY_MSG = MemoryLayout.structLayout(
            ValueLayout.ADDRESS.withName("name"), ValueLayout.ADDRESS.withName("msg"));

    /** {@code struct nic_load_stat { char device_name[64]; uint64 inflight_bytes; double ewma_bandwidth_bps; }}. */
    static final StructLayout NIC_LOAD_STAT = MemoryLayout.structLayout(
            MemoryLayout.sequenceLayout(64, ValueLayout.JAVA_BYTE).withName("device_name"),
            ValueLayout.JAVA_LONG.withName("inflight_bytes"), ValueLayout.JAVA_DOUBLE.withName("ewma_bandwidth_bps"));

    final MethodHandle createTransferEngine;       // transfer_engine_t (const char* metadata, const char* local_server_name, const char* ip_or_host, uint64 rpc_port, int auto_discover)
    final MethodHandle discoverTopology;           // int (engine)
    final MethodHandle getLocalIpAndPort;          // int (engine, char* buf_out, size_t buf_len)
    final MethodHandle installTransport;           // transport_t (engine, const char* proto, void** args)
    final MethodHandle uninstallTransport;         // int (engine, const char* proto)
    final MethodHandle openSegment;                // segment_id_t (engine, const char* segment_name)
    final MethodHandle openSegmentNoCache;         // segment_id_t (engine, const char* segment_name)
    final MethodHandle closeSegment;               // int (engine, segment_id_t)
    final MethodHandle warmupEfaSegment;           // int (engine, const char* segment_name)
    final MethodHandle removeLocalSegment;         // int (engine, const char* segment_name)
    final MethodHandle destroyTransferEngine;      // void (engine)
    final MethodHandle registerLocalMemory;        // int (engine, void* addr, size_t length, const char* location, int remote_accessible)
    final MethodHandle unregisterLocalMemory;      // int (engine, void* addr)
    final MethodHandle registerLocalMemoryBatch;   // int (engine, buffer_entry_t* list, size_t len, const char* location)
    final MethodHandle unregisterLocalMemoryBatch; // int (engine, void** addr_list, size_t len)
    final MethodHandle allocateBatchID;            // batch_id_t (engine, size_t batch_size)
    final MethodHandle submitTransfer;             // int (engine, batch_id_t, transfer_request* entries, size_t count)
    final MethodHandle submitTransferWithNotify;   // int (engine, batch_id_t, transfer_request*, size_t, notify_msg_t)
    final MethodHandle getNotifsFromEngine;        // notify_msg_t* (engine, int* size)
    final MethodHandle freeNotifsMsgBuf;           // int (notify_msg_t* msg, int size)
    final MethodHandle genNotifyInEngine;          // int (engine, uint64 target_id, notify_msg_t)
    final MethodHandle getTransferStatus;          // int (engine, batch_id_t, size_t task_id, transfer_status* status)
    final MethodHandle freeBatchID;                // int (engine, batch_id_t)
    final MethodHandle syncSegmentCache;           // int (engine)
    final MethodHandle getNicLoadStats;            // int (engine, nic_load_stat_t* stats, size_t* count)
    final MethodHandle enableGracefulShutdown;     // void (engine)
    final MethodHandle showLinks;                  // int (engine, char* buf_out, size_t buf_len, int json)

    TransferEngineBindings(SymbolLookup lookup) {
        Linker linker = Linker.nativeLinker();
        ValueLayout a = ValueLayout.ADDRESS;
        ValueLayout i = ValueLayout.JAVA_INT;
        ValueLayout l = ValueLayout.JAVA_LONG;
        createTransferEngine = bind(linker, lookup, "createTransferEngine", FunctionDescriptor.of(a, a, a, a, l, i));
        discoverTopology = bind(linker, lookup, "discoverTopology", FunctionDescriptor.of(i, a));
        getLocalIpAndPort = bind(linker, lookup, "getLocalIpAndPort", FunctionDescriptor.of(i, a, a, l));
        installTransport = bind(linker, lookup, "installTransport", FunctionDescriptor.of(a, a, a, a));
        uninstallTransport = bind(linker, lookup, "uninstallTransport", FunctionDescriptor.of(i, a, a));
        openSegment = bind(linker, lookup, "openSegment", FunctionDescriptor.of(i, a, a));
        openSegmentNoCache = bind(linker, lookup, "openSegmentNoCache", FunctionDescriptor.of(i, a, a));
        closeSegment = bind(linker, lookup, "closeSegment", FunctionDescriptor.of(i, a, i));
        warmupEfaSegment = bind(linker, lookup, "warmupEfaSegment", FunctionDescriptor.of(i, a, a));
        removeLocalSegment = bind(linker, lookup, "removeLocalSegment", FunctionDescriptor.of(i, a, a));
        destroyTransferEngine = bind(linker, lookup, "destroyTransferEngine", FunctionDescriptor.ofVoid(a));
        registerLocalMemory = bind(linker, lookup, "registerLocalMemory", FunctionDescriptor.of(i, a, a, l, a, i));
        unregisterLocalMemory = bind(linker, lookup, "unregisterLocalMemory", FunctionDescriptor.of(i, a, a));
        registerLocalMemoryBatch = bind(linker, lookup, "registerLocalMemoryBatch", FunctionDescriptor.of(i, a, a, l, a));
        unregisterLocalMemoryBatch = bind(linker, lookup, "unregisterLocalMemoryBatch", FunctionDescriptor.of(i, a, a, l));
        allocateBatchID = bind(linker, lookup, "allocateBatchID", FunctionDescriptor.of(l, a, l));
        submitTransfer = bind(linker, lookup, "submitTransfer", FunctionDescriptor.of(i, a, l, a, l));
        submitTransferWithNotify = bind(linker, lookup, "submitTransferWithNotify", FunctionDescriptor.of(i, a, l, a, l, NOTIFY_MSG));
        getNotifsFromEngine = bind(linker, lookup, "getNotifsFromEngine", FunctionDescriptor.of(a, a, a));
        freeNotifsMsgBuf = bind(linker, lookup, "freeNotifsMsgBuf", FunctionDescriptor.of(i, a, i));
        genNotifyInEngine = bind(linker, lookup, "genNotifyInEngine", FunctionDescriptor.of(i, a, l, NOTIFY_MSG));
        getTransferStatus = bind(linker, lookup, "getTransferStatus", FunctionDescriptor.of(i, a, l, l, a));
        freeBatchID = bind(linker, lookup, "freeBatchID", FunctionDescriptor.of(i, a, l));
        syncSegmentCache = bind(linker, lookup, "syncSegmentCache", FunctionDescriptor.of(i, a));
        getNicLoadStats = bind(linker, lookup, "getNicLoadStats", FunctionDescriptor.of(i, a, a, a));
        enableGracefulShutdown = bind(linker, lookup, "enableGracefulShutdown", FunctionDescriptor.ofVoid(a));
        showLinks = bind(linker, lookup, "showLinks", FunctionDescriptor.of(i, a, a, l, i));
    }

    private static MethodHandle bind(Linker linker, SymbolLookup lookup, String name, FunctionDescriptor descriptor) {
        MemorySegment symbol = lookup.find(name)
                .orElseThrow(() -> new UnsatisfiedLinkError("Transfer Engine symbol not found: " + name));
        return linker.downcallHandle(symbol, descriptor);
    }
}
