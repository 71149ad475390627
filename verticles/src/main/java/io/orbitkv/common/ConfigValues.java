package io.orbitkv.common;

import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The Manager's configuration as one flat map of dotted keys, every key present (defaults merged in), with typed
 * readers that reject a bad value with a {@link ConfigException} naming the key. Each role's settings read their own
 * section from it ({@code CostSettings.fromConfig}, {@code ClusterSettings.fromConfig}, ...).
 */
public final class ConfigValues {
    private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*([KMGT]i?B|B)?", Pattern.CASE_INSENSITIVE);

    private final Map<String, String> values;

    public ConfigValues(Map<String, String> values) {
        this.values = new TreeMap<>(values);
    }

    /** The raw text of {@code key}; a key nobody defined is a programming error. */
    public String string(String key) {
        return Objects.requireNonNull(values.get(key), () -> "no such configuration key: " + key);
    }

    public boolean isBlank(String key) {
        return string(key).isBlank();
    }

    public boolean bool(String key) {
        return switch (string(key).strip().toLowerCase(Locale.ROOT)) {
            case "1", "true", "yes", "on" -> true;
            case "0", "false", "no", "off" -> false;
            default -> throw new ConfigException(key, "must be true/false (or 1/0), got '" + string(key) + "'");
        };
    }

    /** A size such as 1GiB, 512MiB or 4096 (bytes), within [min, max]. */
    public long size(String key, long min, long max) {
        long n = parseSize(key, string(key));
        if (n < min || n > max) {
            throw new ConfigException(key, "must be between " + min + " and " + max + " bytes, got " + n);
        }
        return n;
    }

    public long integer(String key, long min, long max) {
        long n;
        try {
            n = Long.parseLong(string(key).strip());
        } catch (NumberFormatException e) {
            throw new ConfigException(key, "must be an integer, got '" + string(key) + "'");
        }
        if (n < min || n > max) {
            throw new ConfigException(key, "must be between " + min + " and " + max + ", got " + n);
        }
        return n;
    }

    /** A count of threads or loops: {@code auto} (then {@code auto}'s value for this host) or 0..{@code max}. */
    public int countOrAuto(String key, int auto, int max) {
        return string(key).strip().equals("auto") ? auto : (int) integer(key, 0, max);
    }

    public int port(String key) {
        return (int) integer(key, 0, 65535);
    }

    /** A fraction in (0, 1]. */
    public double fraction(String key) {
        double d;
        try {
            d = Double.parseDouble(string(key).strip());
        } catch (NumberFormatException e) {
            throw new ConfigException(key, "must be a fraction in (0, 1], got '" + string(key) + "'");
        }
        if (!(d > 0 && d <= 1)) {
            throw new ConfigException(key, "must be a fraction in (0, 1], got " + d);
        }
        return d;
    }

    public String host(String key) {
        String h = string(key).strip();
        if (h.isEmpty() || h.contains(" ") || h.contains("/")) {
            throw new ConfigException(key, "must be a host name or address, got '" + string(key) + "'");
        }
        return h;
    }

    public Path path(String key, boolean mayBeEmpty) {
        String p = string(key).strip();
        if (p.isEmpty() && !mayBeEmpty) {
            throw new ConfigException(key, "must not be empty");
        }
        try {
            return Path.of(p);
        } catch (InvalidPathException e) {
            throw new ConfigException(key, "not a valid path: " + e.getMessage());
        }
    }

    /** Parses a size such as 1GiB, 512MiB or 4096 (binary units only). */
    public static long parseSize(String key, String text) {
        Matcher m = SIZE.matcher(text.strip());
        if (!m.matches()) {
            throw new ConfigException(key, "must be a size such as 1GiB, 512MiB or 4096, got '" + text + "'");
        }
        long n;
        try {
            n = Long.parseLong(m.group(1));
        } catch (NumberFormatException e) {
            throw new ConfigException(key, "number too large: '" + text + "'");
        }
        String unit = m.group(2) == null ? "B" : m.group(2).toUpperCase(Locale.ROOT);
        int shift = switch (unit.charAt(0)) {
            case 'K' -> 10;
            case 'M' -> 20;
            case 'G' -> 30;
            case 'T' -> 40;
            default -> 0;
        };
        if (shift > 0 && !unit.contains("I")) {
            throw new ConfigException(key, "use binary units (KiB, MiB, GiB, TiB), got '" + text + "'");
        }
        if (n > (Long.MAX_VALUE >> shift)) {
            throw new ConfigException(key, "size too large: '" + text + "'");
        }
        return n << shift;
    }
}
