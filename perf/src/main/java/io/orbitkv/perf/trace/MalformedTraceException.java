package io.orbitkv.perf.trace;

/**
 * A trace line that is not a well-formed Mooncake request. Carries the source and the 1-based line number so a user
 * can open the file at the right place; the message names both.
 */
public final class MalformedTraceException extends RuntimeException {

    private final String source;
    private final long lineNumber;

    MalformedTraceException(String source, long lineNumber, String problem, Throwable cause) {
        super(source + ":" + lineNumber + ": " + problem, cause);
        this.source = source;
        this.lineNumber = lineNumber;
    }

    /** The file path (or other name) the trace was read from. */
    public String source() {
        return source;
    }

    /** 1-based line number of the offending line. */
    public long lineNumber() {
        return lineNumber;
    }
}
