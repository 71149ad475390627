package io.orbitkv.cost;

import io.vertx.core.json.JsonObject;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class CostSettingsTest {

    @Test
    void offByDefaultAndOnlyOneMeansOn() {
        assertThat(CostSettings.from(Map.of(), new JsonObject())).isEqualTo(CostSettings.disabled());
        assertThat(CostSettings.from(Map.of("ORBITKV_COST_OBSERVATIONS", "0"), null).observationsEnabled()).isFalse();
        assertThat(CostSettings.from(Map.of("ORBITKV_COST_OBSERVATIONS", "true"), null).observationsEnabled())
                .isFalse();
        CostSettings on = CostSettings.from(Map.of("ORBITKV_COST_OBSERVATIONS", "1"), null);
        assertThat(on.observationsEnabled()).isTrue();
        assertThat(on.selectionEnabled()).isFalse();
    }

    @Test
    void selectionNeedsObservationsToo() {
        assertThat(CostSettings.from(Map.of("ORBITKV_COST_SELECTION", "1"), null).selectionEnabled()).isFalse();
        CostSettings both = CostSettings.from(
                Map.of("ORBITKV_COST_OBSERVATIONS", "1", "ORBITKV_COST_SELECTION", "1"), null);
        assertThat(both.observationsEnabled()).isTrue();
        assertThat(both.selectionEnabled()).isTrue();
        assertThatThrownBy(() -> new CostSettings(false, true, 1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void configKeysFlatOrNested() {
        assertThat(CostSettings.from(Map.of(), new JsonObject().put("cost.observations", true))
                .observationsEnabled()).isTrue();
        CostSettings nested = CostSettings.from(Map.of(), new JsonObject().put("cost",
                new JsonObject().put("observations", true).put("selection", true).put("intakeCapacity", 32)));
        assertThat(nested).isEqualTo(new CostSettings(true, true, 32));
        assertThat(CostSettings.from(Map.of(), new JsonObject().put("cost.observations", "yes"))
                .observationsEnabled()).isFalse();
    }
}
