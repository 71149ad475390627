package io.orbitkv.events;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.Value;
import org.msgpack.value.ValueFactory;

/** The batch layout vLLM's msgspec decoder expects: maps in field order, tagged events, None as nil. */
class KvEventCodecTest {
    static Map<Value, Value> decode(byte[] payload) throws Exception {
        try (MessageUnpacker unpacker = MessagePack.newDefaultUnpacker(payload)) {
            Value value = unpacker.unpackValue();
            assertThat(unpacker.hasNext()).as("one value per payload").isFalse();
            return value.asMapValue().map();
        }
    }

    static Value key(String name) {
        return ValueFactory.newString(name);
    }

    @Test
    void aBatchIsAKvEventBatchMapWithTaggedEvents() throws Exception {
        byte[] h1 = {1, 2, 3};
        byte[] h2 = {4, 5};
        byte[] payload = KvEventCodec.encodeBatch(1234.5, List.of(
                new KvEvent.BlockStored(new ArrayList<>(List.of(h1, h2)), 0, KvEvent.Medium.DISK),
                new KvEvent.BlockRemoved(new ArrayList<>(List.of(h1)), 2, KvEvent.Medium.CPU),
                new KvEvent.AllBlocksCleared()), "00ff", 16);
        Map<Value, Value> batch = decode(payload);
        assertThat(batch.keySet()).containsExactly(key("ts"), key("events"), key("namespace"));
        assertThat(batch.get(key("ts")).asFloatValue().toDouble()).isEqualTo(1234.5);
        assertThat(batch.get(key("namespace")).asStringValue().asString()).isEqualTo("00ff");
        List<Value> events = batch.get(key("events")).asArrayValue().list();
        assertThat(events).hasSize(3);

        Map<Value, Value> stored = events.get(0).asMapValue().map();
        assertThat(stored.keySet()).containsExactly(key("type"), key("block_hashes"), key("parent_block_hash"),
                key("token_ids"), key("block_size"), key("lora_id"), key("medium"), key("lora_name"), key("group_idx"));
        assertThat(stored.get(key("type")).asStringValue().asString()).isEqualTo("BlockStored");
        List<Value> hashes = stored.get(key("block_hashes")).asArrayValue().list();
        assertThat(hashes.get(0).asBinaryValue().asByteArray()).isEqualTo(h1);
        assertThat(hashes.get(1).asBinaryValue().asByteArray()).isEqualTo(h2);
        assertThat(stored.get(key("parent_block_hash")).isNilValue()).isTrue();
        assertThat(stored.get(key("token_ids")).asArrayValue().size()).isZero();
        assertThat(stored.get(key("block_size")).asIntegerValue().toInt()).isEqualTo(16);
        assertThat(stored.get(key("medium")).asStringValue().asString()).isEqualTo("DISK");
        assertThat(stored.get(key("group_idx")).asIntegerValue().toInt()).isZero();

        Map<Value, Value> removed = events.get(1).asMapValue().map();
        assertThat(removed.keySet()).containsExactly(key("type"), key("block_hashes"), key("medium"), key("group_idx"));
        assertThat(removed.get(key("type")).asStringValue().asString()).isEqualTo("BlockRemoved");
        assertThat(removed.get(key("medium")).asStringValue().asString()).isEqualTo("CPU");
        assertThat(removed.get(key("group_idx")).asIntegerValue().toInt()).isEqualTo(2);

        assertThat(events.get(2).asMapValue().map()).containsExactly(
                Map.entry(key("type"), ValueFactory.newString("AllBlocksCleared")));
    }

    @Test
    void aBatchAboutEveryNamespaceHasNoNamespaceField() throws Exception {
        Map<Value, Value> batch = decode(KvEventCodec.encodeBatch(1, List.of(new KvEvent.AllBlocksCleared()), null, 0));
        assertThat(batch.keySet()).containsExactly(key("ts"), key("events"));
    }
}
