package io.orbitkv.ssd;

import io.orbitkv.common.TypedFailure;

/** A typed SSD refusal or miss. No stack trace: misses are expected control flow. */
public final class SsdException extends RuntimeException implements TypedFailure {

    private final SsdFailure failure;

    public SsdException(SsdFailure failure, String message) {
        super(failure.name() + ": " + message, null, false, false);
        this.failure = failure;
    }

    public SsdFailure failure() {
        return failure;
    }

    @Override
    public int failureCode() {
        return failure.code();
    }

    /** The message without the failure prefix. */
    @Override
    public String detail() {
        String message = getMessage();
        int colon = message.indexOf(": ");
        return colon < 0 ? message : message.substring(colon + 2);
    }
}
