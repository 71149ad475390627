package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.MemberRecord;
import io.orbitkv.model.MemberChange;

class MemberTableTest {
    static MemberRecord member(String id, long incarnation, long epoch) {
        return new MemberRecord(id, incarnation, epoch, Map.of("hazelcast", "127.0.0.1:5701"), List.of("dram"));
    }

    @Test
    void joinRestartUpdateLeave() {
        MemberTable table = new MemberTable("self");
        assertThat(table.put(member("b", 5, 1))).containsInstanceOf(MemberChange.Joined.class);
        assertThat(table.put(member("b", 5, 1))).as("the same record again changes nothing").isEmpty();
        assertThat(table.put(member("b", 5, 2))).containsInstanceOf(MemberChange.Updated.class);
        assertThat(table.put(member("b", 9, 1))).containsInstanceOf(MemberChange.Restarted.class);
        assertThat(table.put(member("b", 7, 3))).as("a late event of an older incarnation is ignored").isEmpty();
        assertThat(table.get("b")).map(MemberRecord::incarnation).contains(9L);
        assertThat(table.delete("b")).containsInstanceOf(MemberChange.Left.class);
        assertThat(table.delete("b")).isEmpty();
    }

    @Test
    void replaceAllReportsTheDifference() {
        MemberTable table = new MemberTable("self");
        table.put(member("self", 1, 1));
        table.put(member("b", 5, 1));
        table.put(member("c", 6, 1));
        List<MemberChange> changes = table.replaceAll(List.of(member("self", 1, 1), member("b", 8, 1), member("d", 2, 1)));
        assertThat(changes).hasSize(3);
        assertThat(changes).anySatisfy(c -> assertThat(c).isInstanceOf(MemberChange.Left.class));
        assertThat(changes).anySatisfy(c -> assertThat(c).isInstanceOf(MemberChange.Restarted.class));
        assertThat(changes).anySatisfy(c -> assertThat(c).isInstanceOf(MemberChange.Joined.class));
        assertThat(table.peers()).extracting(MemberRecord::id).containsExactly("b", "d");
    }

    @Test
    void recordsRoundTripAndMalformedOnesAreRefused() {
        MemberRecord record = member("manager-1", MemberRecord.newIncarnation(1_700_000_000_000L, 42), 3);
        assertThat(MemberRecord.parse(record.toBytes())).isEqualTo(record);
        assertThatThrownBy(() -> MemberRecord.parse("{nope".getBytes(StandardCharsets.UTF_8)))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> MemberRecord.parse("{\"id\":\"UPPER\",\"incarnation\":1,\"epoch\":1}".getBytes(StandardCharsets.UTF_8)))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> MemberRecord.parse("{\"id\":\"a\",\"incarnation\":0,\"epoch\":1}".getBytes(StandardCharsets.UTF_8)))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> MemberRecord.parse(new byte[MemberRecord.MAX_VALUE_BYTES + 1]))
                .isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void incarnationsAreTimeOrderedAndRandomWithinAMillisecond() {
        long earlier = MemberRecord.newIncarnation(1_700_000_000_000L, -1);
        long later = MemberRecord.newIncarnation(1_700_000_000_001L, 0);
        assertThat(later).isGreaterThan(earlier);
        assertThat(MemberRecord.newIncarnation(1_700_000_000_000L, 2)).isNotEqualTo(MemberRecord.newIncarnation(1_700_000_000_000L, 4));
        assertThat(earlier).isPositive();
    }
}
