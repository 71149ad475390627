package io.orbitkv.events;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.common.ConfigException;
import io.orbitkv.common.ConfigValues;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The events section: off by default, and every bad value refused with its key. */
class EventsSettingsTest {
    static EventsSettings parse(Map<String, String> values) {
        Map<String, String> all = new HashMap<>(EventsSettings.DEFAULTS);
        all.putAll(values);
        return EventsSettings.fromConfig(new ConfigValues(all));
    }

    @Test
    void offByDefault() {
        EventsSettings settings = parse(Map.of());
        assertThat(settings.enabled()).isFalse();
        assertThat(settings.publishes()).isFalse();
        assertThat(settings.ssdReadCapacityBytesPerSecond()).as("not known unless measured").isEqualTo(-1);
        assertThat(settings.summaryPrefixBlocks()).containsExactly(1, 16, 64, 256);
    }

    @Test
    void anEndpointTurnsEventsAndSummariesOn() {
        EventsSettings settings = parse(Map.of("events.endpoint", "tcp://127.0.0.1:5557",
                "events.replay-endpoint", "tcp://127.0.0.1:5558", "events.summary.ssd-read-capacity", "1GiB"));
        assertThat(settings.publishes()).isTrue();
        assertThat(settings.enabled()).isTrue();
        assertThat(settings.replayEndpoint()).isEqualTo("tcp://127.0.0.1:5558");
        assertThat(settings.ssdReadCapacityBytesPerSecond()).isEqualTo(1L << 30);
        assertThat(parse(Map.of("events.summary.enabled", "true")).publishes()).isFalse();
    }

    @Test
    void badValuesAreRefusedWithTheirKey() {
        Map<String, List<String>> bad = Map.of(
                "events.endpoint", List.of("127.0.0.1:5557", "http://x"),
                "events.summary.prefix-blocks", List.of("0", "a,b", "-1", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"),
                "events.interval-ms", List.of("0", "x"),
                "events.summary.ssd-read-capacity", List.of("fast"));
        bad.forEach((key, values) -> values.forEach(value -> assertThatThrownBy(() -> parse(Map.of(key, value)))
                .isInstanceOf(ConfigException.class).hasMessageContaining(key)));
        assertThatThrownBy(() -> parse(Map.of("events.replay-endpoint", "tcp://127.0.0.1:5558")))
                .isInstanceOf(ConfigException.class).hasMessageContaining("events.replay-endpoint");
    }
}
