package io.orbitkv.perf;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The one option parser of every {@code orbitkv bench NAME} and of {@code orbitkv replay}: {@code --name=value},
 * {@code --name value} or a bare {@code --flag}.
 *
 * <p>Design note: a bench reads every option it takes first, each lookup naming its default, and then calls
 * {@link #requireAllUsed()} before it measures anything. That call rejects a misspelt option (which would otherwise
 * silently run the default configuration and produce a report that looks valid but measured something else), reports
 * a missing required option, and answers {@code --help} with the options the bench just asked for. A lookup after the
 * check is a programming error (an option read late would escape the check) and throws. {@link Benchmarks#run}
 * refuses a bench that returns without having checked its options, and {@code BenchArgsTest} runs every registered
 * bench with an unknown option to prove each rejects it before it measures.
 */
public final class BenchArgs {
    private static final String HELP = "help";
    private final Map<String, String> values = new LinkedHashMap<>();
    /** Every option a lookup asked for, with its default as text ("required" or "off" where there is none). */
    private final Map<String, String> known = new LinkedHashMap<>();
    private final Set<String> missingRequired = new TreeSet<>();
    private boolean checked;

    private BenchArgs() {}

    /** Thrown by {@link #requireAllUsed()} when {@code --help} was given: its message is the usage text. */
    public static final class HelpRequested extends RuntimeException {
        private static final long serialVersionUID = 1L;

        HelpRequested(String usage) {
            super(usage, null, false, false);
        }
    }

    public static BenchArgs parse(String... args) {
        BenchArgs parsed = new BenchArgs();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (!arg.startsWith("--") || arg.length() == 2) {
                throw new IllegalArgumentException("arguments look like --name=value, got '" + arg + "'");
            }
            int eq = arg.indexOf('=');
            String name;
            String value;
            if (eq > 0) {
                name = arg.substring(2, eq);
                value = arg.substring(eq + 1);
            } else if (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                name = arg.substring(2);
                value = args[++i];
            } else {
                name = arg.substring(2);
                value = "true"; // a bare flag
            }
            if (parsed.values.put(name, value) != null) {
                throw new IllegalArgumentException("--" + name + " is given twice");
            }
        }
        return parsed;
    }

    public String string(String name, String defaultValue) {
        return lookup(name, defaultValue == null ? "off" : defaultValue, defaultValue);
    }

    /**
     * An option without a default. When it is missing the bench still reads on (so that {@code --help} can list every
     * option), gets {@code ""}, and {@link #requireAllUsed()} then refuses the run naming it.
     */
    public String required(String name) {
        String value = lookup(name, "required", null);
        if (value == null) {
            missingRequired.add(name);
            return "";
        }
        return value;
    }

    /** A path, or {@code null} when the option is absent. */
    public Path path(String name) {
        String text = lookup(name, "off", null);
        return text == null ? null : Path.of(text);
    }

    public boolean has(String name) {
        lookup(name, "off", null);
        return values.containsKey(name);
    }

    public int integer(String name, int defaultValue) {
        long value = longValue(name, defaultValue);
        if (value != (int) value) {
            throw new IllegalArgumentException("--" + name + " is out of range: " + value);
        }
        return (int) value;
    }

    public long longValue(String name, long defaultValue) {
        String text = lookup(name, Long.toString(defaultValue), null);
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
        String text = lookup(name, Double.toString(defaultValue), null);
        if (text == null) {
            return defaultValue;
        }
        try {
            double value = Double.parseDouble(text.strip());
            if (!Double.isFinite(value)) {
                throw new NumberFormatException();
            }
            return value;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + " takes a number, got '" + text + "'");
        }
    }

    public boolean flag(String name, boolean defaultValue) {
        String text = lookup(name, Boolean.toString(defaultValue), null);
        if (text == null) {
            return defaultValue;
        }
        return switch (text.strip().toLowerCase(Locale.ROOT)) {
            case "true", "yes", "1" -> true;
            case "false", "no", "0" -> false;
            default -> throw new IllegalArgumentException("--" + name + " is true or false, got '" + text + "'");
        };
    }

    /** A byte size: a plain number or one with a binary unit (KiB, MiB, GiB, TiB; K/M/G/T and KB/MB/GB read the same). */
    public long bytes(String name, String defaultValue) {
        String text = lookup(name, defaultValue, defaultValue);
        return parseBytes("--" + name, text);
    }

    /** A byte size, or 0 when the option is absent. */
    public long bytesOrZero(String name) {
        String text = lookup(name, "off", null);
        return text == null ? 0 : parseBytes("--" + name, text);
    }

    public int[] integers(String name, String defaultValue) {
        String text = lookup(name, defaultValue, defaultValue);
        try {
            return Arrays.stream(text.split(",")).map(String::strip).filter(s -> !s.isEmpty()).mapToInt(Integer::parseInt).toArray();
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + " takes a comma-separated list of integers, got '" + text + "'");
        }
    }

    /**
     * Ends the lookups: throws {@link HelpRequested} for {@code --help}, and an {@link IllegalArgumentException} for an
     * option no lookup asked for or a required option that is missing. Call it before measuring anything.
     */
    public void requireAllUsed() {
        if (checked) {
            return;
        }
        checked = true;
        if (values.containsKey(HELP)) {
            throw new HelpRequested(usage());
        }
        Set<String> unknown = new TreeSet<>(values.keySet());
        unknown.removeAll(known.keySet());
        if (!unknown.isEmpty()) {
            throw new IllegalArgumentException("unknown option(s) " + unknown.stream().map(n -> "--" + n).toList()
                    + "; known: " + known.keySet().stream().map(n -> "--" + n).toList());
        }
        if (!missingRequired.isEmpty()) {
            throw new IllegalArgumentException("missing required option(s) "
                    + missingRequired.stream().map(n -> "--" + n).toList());
        }
    }

    /** Whether {@link #requireAllUsed()} has run. */
    public boolean checked() {
        return checked;
    }

    /** One line per option the bench asked for, with its default. */
    public String usage() {
        StringBuilder text = new StringBuilder("options (default in parentheses):");
        known.forEach((name, defaultText) -> text.append("\n  --").append(name).append(" (").append(defaultText).append(')'));
        return text.toString();
    }

    private String lookup(String name, String defaultText, String defaultValue) {
        if (checked) {
            throw new IllegalStateException("--" + name + " was read after the options were checked: read every option "
                    + "before BenchArgs.requireAllUsed()");
        }
        known.putIfAbsent(name, defaultText);
        return values.getOrDefault(name, defaultValue);
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
