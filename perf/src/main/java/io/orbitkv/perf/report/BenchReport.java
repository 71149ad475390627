package io.orbitkv.perf.report;

import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * The result of one {@code orbitkv bench NAME} run as one JSON object:
 * <pre>{"bench": NAME, "figures": {...}, "baselines": {...}, "ratios": {...}, "config": {...}, "machine": {...},
 *  "passed": true|false, "failures": [reasons], ...ratios promoted to the top level}</pre>
 *
 * <p>Contract: every bench prints exactly this object, on one line, as its last line of stdout ({@link #printTo}), so
 * scripts can take {@code tail -n 1} and parse it. {@code figures} are what was measured, {@code baselines} the
 * physical limits measured in the same run (memcpy, disk, loopback) or the offline bounds, {@code ratios} figure over
 * baseline. A ratio promoted with {@link Builder#topLevelRatio} also appears at the top level (e.g.
 * {@code "throughput_ratio"}) where the acceptance scripts look for it. Figures that come from a model (a TTFT
 * computed from assumed rates, bytes at a scale that was not moved) go in a separate {@code model} section
 * ({@link Builder#model}) with the assumptions they rest on, never among the measured {@code figures}. A check the run itself makes (restored bytes
 * equal to published ones, no lease left at the end) that fails is recorded with {@link Builder#failure}: the report
 * still carries every figure, says {@code "passed": false} with the reasons, and the command exits non-zero.
 *
 * <p>Design note: values must be JSON-representable and finite. A NaN or infinite double (typically a ratio over a
 * zero baseline) would encode as a bare {@code NaN}, which no JSON parser accepts, so it is rejected when added,
 * where the bug is, rather than when a script fails to parse the report.
 */
public final class BenchReport {

    /** Top-level key: whether every check the run made passed. */
    public static final String PASSED = "passed";
    /** Top-level key: the reasons the run did not pass (empty when it passed). */
    public static final String FAILURES = "failures";
    /** Section of figures computed from a model rather than measured; present only when a bench has one. */
    public static final String MODEL = "model";
    private static final Set<String> RESERVED_KEYS = Set.of("bench", "figures", "baselines", "ratios", "config", "machine",
            PASSED, FAILURES, MODEL);

    private final JsonObject json;

    private BenchReport(JsonObject json) {
        this.json = json;
    }

    public static Builder builder(String bench) {
        return new Builder(bench);
    }

    /** Whether a report (as printed) passed its own checks; a report without the key predates them and passes. */
    public static boolean passed(JsonObject report) {
        return report.getBoolean(PASSED, true);
    }

    /** The bench name. */
    public String bench() {
        return json.getString("bench");
    }

    /** A copy of the report object. */
    public JsonObject toJson() {
        return json.copy();
    }

    /** The report on a single line (no line terminator; newlines inside strings are escaped by JSON encoding). */
    public String toOneLine() {
        return json.encode();
    }

    /** Prints the report as one line; call it last so it is the last line of stdout. */
    public void printTo(PrintStream out) {
        out.println(toOneLine());
        out.flush();
    }

    /** Writes the report, pretty-printed, to {@code outDir/NAME.json}, creating the directory; returns the file. */
    public Path writeTo(Path outDir) throws IOException {
        return writeTo(outDir, bench() + ".json");
    }

    /**
     * Writes the report, pretty-printed, to {@code outDir/fileName}. The file is written beside its final name and
     * moved into place, so a reader never sees half a report.
     */
    public Path writeTo(Path outDir, String fileName) throws IOException {
        Files.createDirectories(outDir);
        Path target = outDir.resolve(fileName);
        Path partial = outDir.resolve(fileName + ".partial");
        Files.writeString(partial, json.encodePrettily() + "\n", StandardCharsets.UTF_8);
        Files.move(partial, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        return target;
    }

    @Override
    public String toString() {
        return toOneLine();
    }

    /** Collects the sections; keys keep insertion order in the output. Not thread-safe. */
    public static final class Builder {
        private final String bench;
        private final JsonObject figures = new JsonObject();
        private final JsonObject baselines = new JsonObject();
        private final JsonObject ratios = new JsonObject();
        private final JsonObject config = new JsonObject();
        private final Map<String, Double> topLevelRatios = new LinkedHashMap<>();
        private final JsonArray failures = new JsonArray();
        private final JsonObject model = new JsonObject();
        private MachineInfo machine;

        private Builder(String bench) {
            if (bench == null || bench.isBlank()) {
                throw new IllegalArgumentException("bench name must not be blank");
            }
            this.bench = bench;
        }

        /** A measured value: a number, string, boolean, {@link JsonObject} or {@link JsonArray}. */
        public Builder figure(String name, Object value) {
            figures.put(requireName(name), requireJsonValue(name, value));
            return this;
        }

        /** A reference the figures are compared with (physical limit or offline bound). */
        public Builder baseline(String name, Object value) {
            baselines.put(requireName(name), requireJsonValue(name, value));
            return this;
        }

        /** A figure divided by its baseline. */
        public Builder ratio(String name, double value) {
            ratios.put(requireName(name), requireFinite(name, value));
            return this;
        }

        /** {@code numerator / denominator}; a zero denominator is rejected (there is no honest ratio). */
        public Builder ratio(String name, double numerator, double denominator) {
            return ratio(name, numerator / denominator);
        }

        /** A ratio that also appears at the top level of the report, where acceptance scripts read it. */
        public Builder topLevelRatio(String name, double value) {
            if (RESERVED_KEYS.contains(name)) {
                throw new IllegalArgumentException("\"" + name + "\" is a section of the report, not a ratio name");
            }
            ratio(name, value); // validates before anything is promoted
            topLevelRatios.put(name, value);
            return this;
        }

        /** {@code numerator / denominator}, also promoted to the top level. */
        public Builder topLevelRatio(String name, double numerator, double denominator) {
            return topLevelRatio(name, numerator / denominator);
        }

        /** A setting the run used (capacity, concurrency, trace path, ...). */
        public Builder config(String name, Object value) {
            config.put(requireName(name), requireJsonValue(name, value));
            return this;
        }

        /** A modelled (not measured) value: it goes in the {@code model} section, beside its assumptions. */
        public Builder model(String name, Object value) {
            model.put(requireName(name), requireJsonValue(name, value));
            return this;
        }

        /** A check of the run that failed (wrong bytes, a leaked lease, ...): the report says it did not pass. */
        public Builder failure(String reason) {
            failures.add(requireName(reason));
            return this;
        }

        /** {@link #failure} when {@code condition} does not hold. */
        public Builder check(boolean condition, String reasonWhenNot) {
            return condition ? this : failure(reasonWhenNot);
        }

        /** The machine; probed at {@link #build()} when not given. */
        public Builder machine(MachineInfo machine) {
            this.machine = Objects.requireNonNull(machine, "machine");
            return this;
        }

        public BenchReport build() {
            JsonObject json = new JsonObject()
                    .put("bench", bench)
                    .put("figures", figures.copy())
                    .put("baselines", baselines.copy())
                    .put("ratios", ratios.copy())
                    .put("config", config.copy())
                    .put("machine", (machine != null ? machine : MachineInfo.probe()).toJson())
                    .put(PASSED, failures.isEmpty())
                    .put(FAILURES, failures.copy());
            if (!model.isEmpty()) {
                json.put(MODEL, model.copy());
            }
            topLevelRatios.forEach(json::put);
            return new BenchReport(json);
        }

        private static String requireName(String name) {
            if (name == null || name.isBlank()) {
                throw new IllegalArgumentException("name must not be blank");
            }
            return name;
        }

        private static Object requireJsonValue(String name, Object value) {
            switch (value) {
                case null -> throw new IllegalArgumentException("\"" + name + "\" is null");
                case Double d -> requireFinite(name, d);
                case Float f -> requireFinite(name, f);
                case Number n -> { }
                case String s -> { }
                case Boolean b -> { }
                case JsonObject o -> requireFiniteNumbers(name, o.getMap().values());
                case JsonArray a -> requireFiniteNumbers(name, a.getList());
                default -> throw new IllegalArgumentException("\"" + name + "\" has type "
                        + value.getClass().getName() + "; use a number, string, boolean, JsonObject or JsonArray");
            }
            return value;
        }

        private static void requireFiniteNumbers(String name, Iterable<?> values) {
            for (Object value : values) {
                switch (value) {
                    case Double d -> requireFinite(name, d);
                    case Float f -> requireFinite(name, f);
                    case JsonObject o -> requireFiniteNumbers(name, o.getMap().values());
                    case JsonArray a -> requireFiniteNumbers(name, a.getList());
                    case Map<?, ?> m -> requireFiniteNumbers(name, m.values());
                    case Iterable<?> i -> requireFiniteNumbers(name, i);
                    case null, default -> { }
                }
            }
        }

        private static double requireFinite(String name, double value) {
            if (!Double.isFinite(value)) {
                throw new IllegalArgumentException("\"" + name + "\" is " + value + ", which JSON cannot represent");
            }
            return value;
        }
    }
}
