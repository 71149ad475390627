package io.orbitkv.common;

/** An invalid configuration value: names the key and the reason. The Manager exits non-zero before listening. */
public final class ConfigException extends RuntimeException {
    private final String key;

    public ConfigException(String key, String reason) {
        super("invalid configuration " + key + ": " + reason);
        this.key = key;
    }

    public String key() {
        return key;
    }
}
