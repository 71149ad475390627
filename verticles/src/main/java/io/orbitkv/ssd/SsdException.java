package io.orbitkv.ssd;

import io.orbitkv.common.KindedException;

/** A typed SSD refusal or miss. */
public final class SsdException extends KindedException {
    public SsdException(SsdFailure failure, String message) {
        super(failure, message);
    }

    @Override
    public SsdFailure failure() {
        return (SsdFailure) super.failure();
    }
}
