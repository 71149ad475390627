package io.orbitkv.cost;

import io.orbitkv.common.ConfigValues;
import io.vertx.core.json.JsonObject;
import java.util.Map;
import java.util.Objects;

/**
 * Switches and bounds of the cost role. Observations (and shadow comparisons) are off by default: with them off the
 * proxy is a counter-free no-op. Selection is a guarded flag that later issues read; it is only ever on when
 * observations are on.
 *
 * <p>Observations are on when the environment has {@value #OBSERVATIONS_ENV}{@code =1} or the config has
 * {@value #OBSERVATIONS_CONFIG_KEY}{@code = true} (flat key, or {@code {"cost": {"observations": true}}}). Any other
 * value, including {@code 0} or absence, keeps them off. Selection likewise with {@value #SELECTION_ENV} /
 * {@value #SELECTION_CONFIG_KEY}.
 *
 * @param intakeCapacity most messages in flight to the cost role before updates are dropped
 */
public record CostSettings(boolean observationsEnabled, boolean selectionEnabled, int intakeCapacity) {

    /** The keys and defaults of the {@code cost.*} section of the Manager's configuration. */
    public static final Map<String, String> DEFAULTS = Map.of(
            "cost.observations", "false",
            "cost.selection", "false",
            "cost.intake-capacity", "1024");

    public static final String OBSERVATIONS_ENV = "ORBITKV_COST_OBSERVATIONS";
    public static final String SELECTION_ENV = "ORBITKV_COST_SELECTION";
    public static final String OBSERVATIONS_CONFIG_KEY = "cost.observations";
    public static final String SELECTION_CONFIG_KEY = "cost.selection";
    public static final String INTAKE_CAPACITY_CONFIG_KEY = "cost.intakeCapacity";
    public static final int INTAKE_CAPACITY_DEFAULT = 1024;

    public CostSettings {
        if (intakeCapacity < 1) {
            throw new IllegalArgumentException("intakeCapacity must be >= 1: " + intakeCapacity);
        }
        if (selectionEnabled && !observationsEnabled) {
            throw new IllegalArgumentException("selection requires observations");
        }
    }

    public static CostSettings disabled() {
        return new CostSettings(false, false, INTAKE_CAPACITY_DEFAULT);
    }

    /** Observations and shadow on, selection off. */
    public static CostSettings observing(int intakeCapacity) {
        return new CostSettings(true, false, intakeCapacity);
    }

    /** From the process environment and the given config. */
    public static CostSettings fromEnvironment(JsonObject config) {
        return from(System.getenv(), config);
    }

    public static CostSettings from(Map<String, String> environment, JsonObject config) {
        Objects.requireNonNull(environment, "environment");
        JsonObject safeConfig = config == null ? new JsonObject() : config;
        boolean observations = "1".equals(environment.get(OBSERVATIONS_ENV))
                || configFlag(safeConfig, OBSERVATIONS_CONFIG_KEY);
        boolean selection = observations && ("1".equals(environment.get(SELECTION_ENV))
                || configFlag(safeConfig, SELECTION_CONFIG_KEY));
        int capacity = configInt(safeConfig, INTAKE_CAPACITY_CONFIG_KEY, INTAKE_CAPACITY_DEFAULT);
        return new CostSettings(observations, selection, capacity);
    }

    private static boolean configFlag(JsonObject config, String dottedKey) {
        return Boolean.TRUE.equals(lookup(config, dottedKey));
    }

    private static int configInt(JsonObject config, String dottedKey, int defaultValue) {
        return lookup(config, dottedKey) instanceof Number number ? number.intValue() : defaultValue;
    }

    /** The flat key if present, else the nested path ({@code cost.observations} → {@code cost → observations}). */
    private static Object lookup(JsonObject config, String dottedKey) {
        if (config.containsKey(dottedKey)) {
            return config.getValue(dottedKey);
        }
        Object node = config;
        for (String part : dottedKey.split("\\.")) {
            if (!(node instanceof JsonObject object)) {
                return null;
            }
            node = object.getValue(part);
        }
        return node;
    }

    /**
     * The {@code cost.*} section of the Manager's configuration ({@code ORBITKV_COST_OBSERVATIONS=1} arrives here as
     * {@code cost.observations}): observation and shadow on or off; selection needs both.
     */
    public static CostSettings fromConfig(ConfigValues v) {
        boolean observations = v.bool("cost.observations");
        boolean selection = v.bool("cost.selection");
        return new CostSettings(observations, observations && selection,
                (int) v.integer("cost.intake-capacity", 1, 1 << 20));
    }
}
