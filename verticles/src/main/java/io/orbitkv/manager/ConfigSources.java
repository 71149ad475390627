package io.orbitkv.manager;

import io.orbitkv.common.ConfigException;
import io.vertx.config.ConfigRetriever;
import io.vertx.config.ConfigRetrieverOptions;
import io.vertx.config.ConfigStoreOptions;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.json.JsonObject;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * Gathers the flat key map from, in rising precedence: the YAML file (vertx-config's yaml store), environment
 * variables {@code ORBITKV_<KEY>} (dots and dashes become underscores: {@code pool.size} ← {@code
 * ORBITKV_POOL_SIZE}), and command-line overrides.
 */
public final class ConfigSources {
    private ConfigSources() {}

    public static Future<Map<String, String>> gather(Vertx vertx, Path yaml, Map<String, String> env,
                                                     Map<String, String> overrides) {
        Future<JsonObject> file;
        if (yaml == null) {
            file = Future.succeededFuture(new JsonObject());
        } else if (!Files.isReadable(yaml)) {
            return Future.failedFuture(new ConfigException("config", "cannot read configuration file " + yaml));
        } else {
            ConfigStoreOptions store = new ConfigStoreOptions().setType("file").setFormat("yaml")
                    .setConfig(new JsonObject().put("path", yaml.toString()));
            ConfigRetriever retriever = ConfigRetriever.create(vertx, new ConfigRetrieverOptions().addStore(store)
                    .setScanPeriod(-1));
            file = retriever.getConfig().eventually(() -> {
                retriever.close();
                return Future.succeededFuture();
            }).recover(e -> Future.failedFuture(new ConfigException("config", "cannot parse " + yaml + ": " + e.getMessage())));
        }
        return file.map(json -> {
            Map<String, String> flat = new TreeMap<>();
            flatten("", json, flat);
            for (String key : ManagerConfig.DEFAULTS.keySet()) {
                String value = env.get(envName(key));
                if (value != null) {
                    flat.put(key, value);
                }
            }
            flat.putAll(overrides);
            return flat;
        });
    }

    public static String envName(String key) {
        return "ORBITKV_" + key.toUpperCase(Locale.ROOT).replace('.', '_').replace('-', '_');
    }

    private static void flatten(String prefix, JsonObject json, Map<String, String> out) {
        for (Map.Entry<String, Object> e : json) {
            String key = prefix.isEmpty() ? e.getKey() : prefix + "." + e.getKey();
            if (e.getValue() instanceof JsonObject nested) {
                flatten(key, nested, out);
            } else if (e.getValue() instanceof Map<?, ?> map) {
                flatten(key, new JsonObject(castMap(map)), out);
            } else {
                out.put(key, e.getValue() == null ? "" : String.valueOf(e.getValue()));
            }
        }
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> castMap(Map<?, ?> map) {
        return (Map<String, Object>) map;
    }
}
