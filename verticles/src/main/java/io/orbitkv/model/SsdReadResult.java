package io.orbitkv.model;

import io.orbitkv.model.SsdLease;

/**
 * A verified read: {@code lengthBytes} payload bytes at the start of the destination match the extent's CRC32C,
 * {@code payloadCrc32c} (handed on to engines with the page, so they can verify their own copy).
 */
public record SsdReadResult(SsdLease lease, long lengthBytes, ReadPath path, int payloadCrc32c) {

    /** How the bytes reached the destination. */
    public enum ReadPath {
        /** One O_DIRECT read of the 4 KiB-rounded length straight into the destination. */
        DIRECT,
        /** Aligned head straight into the destination, the last partial 4 KiB block through a small bounce block. */
        DIRECT_WITH_TAIL,
        /** Unaligned destination: the whole payload through an owned bounce buffer, then copied. */
        BOUNCE,
        /** Buffered (non-O_DIRECT) shard: exact length straight into the destination. */
        BUFFERED
    }
}
