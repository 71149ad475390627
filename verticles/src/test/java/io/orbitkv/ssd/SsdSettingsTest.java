package io.orbitkv.ssd;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vertx.core.json.JsonObject;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.SsdWritePolicy;

class SsdSettingsTest {

    @Test
    void writePolicyAndSizesAreSwitchableInConfig() {
        SsdSettings settings = SsdSettings.fromJson(new JsonObject().put("directory", "/var/lib/orbitkv/ssd")
                .put("writePolicy", "reuse_aware").put("capacityBytes", 64L << 30).put("shardCount", 4)
                .put("reuseAwareCapacity", 1000));
        assertThat(settings.writePolicy()).isEqualTo(SsdWritePolicy.REUSE_AWARE);
        assertThat(settings.directory()).isEqualTo(Path.of("/var/lib/orbitkv/ssd"));
        assertThat(settings.extentBytes()).isEqualTo(SsdSettings.EXTENT_BYTES_DEFAULT);
        assertThat(settings.maxPayloadBytes()).isEqualTo(2L << 20);
        assertThat(settings.shardBytes()).isEqualTo(16L << 30);
        assertThat(settings.regionBytes()).isEqualTo(16 * SsdSettings.EXTENT_BYTES_DEFAULT);
        // 64 KiB pages take 68 KiB each: the capacity in pages follows the page size, not the extent
        long ideal = (64L << 30) / (68 << 10);
        assertThat(settings.pagesOf(64 << 10)).isBetween(ideal * 99 / 100, ideal);
        assertThat(settings.pagesOf(2 << 20)).isEqualTo((64L << 30) / SsdSettings.EXTENT_BYTES_DEFAULT);
        settings.validate();
        assertThat(SsdSettings.fromJson(new JsonObject()).writePolicy()).isEqualTo(SsdWritePolicy.ALL);
    }

    @Test
    void validationNamesTheBadSetting() {
        assertThatThrownBy(() -> new SsdSettings().validate()).hasMessageContaining("directory");
        assertThatThrownBy(() -> new SsdSettings().directory(Path.of("/tmp")).extentBytes(5000).validate())
                .hasMessageContaining("extentBytes");
        assertThatThrownBy(() -> new SsdSettings().directory(Path.of("/tmp")).capacityBytes(4096).validate())
                .hasMessageContaining("capacityBytes");
    }
}
