package io.orbitkv.perf.start;

/** The baseline of {@code bench start}: the JVM's own start, a main that prints one line and returns. */
public final class TrivialMain {
    static final String LINE = "trivial main started";

    private TrivialMain() {}

    public static void main(String[] args) {
        System.out.println(LINE);
    }
}
