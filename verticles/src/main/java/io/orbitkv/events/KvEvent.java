package io.orbitkv.events;

import java.util.List;

/**
 * One KV cache event in vLLM's vocabulary: blocks of one namespace and group stored on or removed from one medium, or
 * every block of this Manager cleared. Block hashes are the engine's own (the key's block hash bytes).
 */
sealed interface KvEvent {
    /** vLLM's medium names: this Manager's DRAM pool is {@code CPU}, its SSD tier {@code DISK}. */
    enum Medium {
        CPU, DISK
    }

    /** Blocks now served from {@code medium}; the parent hash is unknown to the Manager (keys carry no chain link). */
    record BlockStored(List<byte[]> blockHashes, int groupId, Medium medium) implements KvEvent {}

    record BlockRemoved(List<byte[]> blockHashes, int groupId, Medium medium) implements KvEvent {}

    /** Everything a subscriber holds for this Manager is void (it restarted, or will resend what it holds). */
    record AllBlocksCleared() implements KvEvent {}
}
