package io.orbitkv.model;

/**
 * What a caller may hold on to: a key at one exact slot generation, and the CRC32C of its bytes when known
 * (an unsigned 32-bit value, or {@link #CRC_UNKNOWN}).
 */
public record ImageRef(StateKey key, long offset, long lengthBytes, long generation, long crc32c) {
    public static final long CRC_UNKNOWN = -1;

    /** A reference whose checksum is unknown (descriptors named by an engine). */
    public ImageRef(StateKey key, long offset, long lengthBytes, long generation) {
        this(key, offset, lengthBytes, generation, CRC_UNKNOWN);
    }

    public boolean crcKnown() {
        return crc32c != CRC_UNKNOWN;
    }
}
