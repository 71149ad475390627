package io.orbitkv.perf;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The {@code --name=value} (or {@code --name value}) arguments of one {@code orbitkv bench NAME} run. Every lookup
 * names its default, and {@link #requireAllUsed()} rejects a misspelt option instead of silently running the default
 * configuration, which would produce a report that looks valid but measured something else.
 */
public final class BenchArgs {
    private final Map<String, String> values = new LinkedHashMap<>();
    private final Set<String> used = new TreeSet<>();

    private BenchArgs() {}

    public static BenchArgs parse(String[] args) {
        BenchArgs parsed = new BenchArgs();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (!arg.startsWith("--") || arg.length() == 2) {
                throw new IllegalArgumentException("arguments look like --name=value, got '" + arg + "'");
            }
            int eq = arg.indexOf('=');
            if (eq > 0) {
                parsed.values.put(arg.substring(2, eq), arg.substring(eq + 1));
            } else if (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                parsed.values.put(arg.substring(2), args[++i]);
            } else {
                parsed.values.put(arg.substring(2), "true"); // a bare flag
            }
        }
        return parsed;
    }

    public String string(String name, String defaultValue) {
        used.add(name);
        return values.getOrDefault(name, defaultValue);
    }

    public boolean has(String name) {
        used.add(name);
        return values.containsKey(name);
    }

    public int integer(String name, int defaultValue) {
        return (int) longValue(name, defaultValue);
    }

    public long longValue(String name, long defaultValue) {
        String text = string(name, null);
        if (text == null) {
            return defaultValue;
        }
        try {
            return Long.parseLong(text.strip().replace("_", ""));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + " takes an integer, got '" + text + "'");
        }
    }

    public double decimal(String name, double defaultValue) {
        String text = string(name, null);
        if (text == null) {
            return defaultValue;
        }
        try {
            return Double.parseDouble(text.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + " takes a number, got '" + text + "'");
        }
    }

    public boolean flag(String name, boolean defaultValue) {
        String text = string(name, null);
        return text == null ? defaultValue : Boolean.parseBoolean(text.strip());
    }

    /** A byte size: a plain number or one with a binary unit (KiB, MiB, GiB, TiB; K/M/G/T and KB/MB/GB read the same). */
    public long bytes(String name, String defaultValue) {
        return parseBytes("--" + name, string(name, defaultValue));
    }

    public int[] integers(String name, String defaultValue) {
        String text = string(name, defaultValue);
        try {
            return Arrays.stream(text.split(",")).map(String::strip).filter(s -> !s.isEmpty()).mapToInt(Integer::parseInt).toArray();
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + " takes a comma-separated list of integers, got '" + text + "'");
        }
    }

    /** Throws when an argument was given that no lookup asked for (a typo would otherwise be ignored). */
    public void requireAllUsed() {
        Set<String> unknown = new TreeSet<>(values.keySet());
        unknown.removeAll(used);
        if (!unknown.isEmpty()) {
            throw new IllegalArgumentException("unknown option(s) " + unknown + "; known: " + used);
        }
    }

    public static long parseBytes(String what, String text) {
        String t = text.strip().toUpperCase(Locale.ROOT).replace("_", "");
        long multiplier = 1;
        String[][] units = {{"TIB", "TB", "T"}, {"GIB", "GB", "G"}, {"MIB", "MB", "M"}, {"KIB", "KB", "K"}, {"B"}};
        long[] factors = {1L << 40, 1L << 30, 1L << 20, 1L << 10, 1};
        outer:
        for (int i = 0; i < units.length; i++) {
            for (String unit : units[i]) {
                if (t.endsWith(unit)) {
                    t = t.substring(0, t.length() - unit.length()).strip();
                    multiplier = factors[i];
                    break outer;
                }
            }
        }
        try {
            return Math.multiplyExact(Long.parseLong(t), multiplier);
        } catch (NumberFormatException | ArithmeticException e) {
            throw new IllegalArgumentException(what + " takes a size such as 256MiB, got '" + text + "'");
        }
    }
}
