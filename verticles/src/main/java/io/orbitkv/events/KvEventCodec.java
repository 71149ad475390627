package io.orbitkv.events;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * Encodes a batch of {@link KvEvent}s as vLLM's {@code KVEventBatch} in msgpack, as {@code msgspec} writes it for the
 * classes of {@code vllm/distributed/kv_events.py} (vLLM commit {@code 0181ea3173e53eea8cf04a86891488e3dc89bb34}):
 * structs are maps in field order; events are tagged ({@code "type"}: the class name); {@code omit_defaults} leaves
 * out fields equal to their default of None ({@code data_parallel_rank}, {@code extra_keys}, the cache-spec fields),
 * while fields without a default are always written, None as nil. {@code token_ids} is empty and
 * {@code parent_block_hash}, {@code lora_id} and {@code lora_name} are nil: the Manager never sees tokens, chain
 * links or adapters, only the engine's block hashes. {@code block_size} is the namespace's page size in tokens when an
 * engine of that namespace told it, else 0 (not known here). Pure; no state.
 */
final class KvEventCodec {
    private KvEventCodec() {}

    /**
     * One {@code KVEventBatch}: {@code ts} in seconds since the epoch (wall clock, as vLLM's {@code time.time()});
     * {@code namespace} (hex; null for a batch about every namespace) is an extra field that vLLM's decoder skips, so
     * that a replayed batch, which travels without its topic, still names its namespace.
     */
    static byte[] encodeBatch(double ts, List<KvEvent> events, String namespace, int blockSizeTokens) {
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            p.packMapHeader(namespace == null ? 2 : 3);
            p.packString("ts").packDouble(ts);
            p.packString("events").packArrayHeader(events.size());
            for (KvEvent event : events) {
                switch (event) {
                    case KvEvent.BlockStored s -> {
                        p.packMapHeader(9);
                        p.packString("type").packString("BlockStored");
                        hashes(p, s.blockHashes());
                        p.packString("parent_block_hash").packNil();
                        p.packString("token_ids").packArrayHeader(0);
                        p.packString("block_size").packInt(blockSizeTokens);
                        p.packString("lora_id").packNil();
                        p.packString("medium").packString(s.medium().name());
                        p.packString("lora_name").packNil();
                        p.packString("group_idx").packInt(s.groupId());
                    }
                    case KvEvent.BlockRemoved r -> {
                        p.packMapHeader(4);
                        p.packString("type").packString("BlockRemoved");
                        hashes(p, r.blockHashes());
                        p.packString("medium").packString(r.medium().name());
                        p.packString("group_idx").packInt(r.groupId());
                    }
                    case KvEvent.AllBlocksCleared c -> {
                        p.packMapHeader(1);
                        p.packString("type").packString("AllBlocksCleared");
                    }
                }
            }
            if (namespace != null) {
                p.packString("namespace").packString(namespace);
            }
            return p.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException("msgpack into memory cannot fail", e);
        }
    }

    private static void hashes(MessageBufferPacker p, List<byte[]> hashes) throws IOException {
        p.packString("block_hashes").packArrayHeader(hashes.size());
        for (byte[] hash : hashes) {
            p.packBinaryHeader(hash.length).writePayload(hash);
        }
    }
}
