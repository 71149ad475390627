package io.orbitkv.codecs.extent;

/**
 * What an extent read from disk turned out to be. Disk content is data, not a programming error, so decoding never
 * throws: the index rebuild and the restore path switch over these cases and count them.
 */
public sealed interface ExtentDecodeResult {

    /** Header intact and committed; for a whole-extent decode, the payload matched its length and CRC32C too. */
    record Valid(SsdExtentHeader header) implements ExtentDecodeResult {
    }

    /**
     * The header was written completely but the extent was not: an interrupted or never-committed write. The header
     * is given where it could be decoded (null only for {@link TornReason#HEADER_TRUNCATED}), so a rebuild can still
     * see which generation was being written.
     */
    record Torn(TornReason reason, SsdExtentHeader header) implements ExtentDecodeResult {
    }

    /** Magic present but the header block fails its checksum or its fields are inconsistent. */
    record Corrupt(CorruptReason reason) implements ExtentDecodeResult {
    }

    /** No extent magic: never written, zeroed, or foreign bytes. */
    enum NotAnExtent implements ExtentDecodeResult {
        INSTANCE
    }

    enum TornReason {
        /** Fewer than 4096 bytes were available for the header block. */
        HEADER_TRUNCATED,
        /** The header's commit flag is not set. */
        NOT_COMMITTED,
        /** Fewer payload bytes are present than the header declares. */
        PAYLOAD_TRUNCATED,
        /** The payload bytes do not match the header's CRC32C. */
        PAYLOAD_CHECKSUM_MISMATCH
    }

    enum CorruptReason {
        HEADER_CHECKSUM_MISMATCH,
        UNSUPPORTED_FORMAT_VERSION,
        INCONSISTENT_FIELDS
    }

    /** True only for {@link Valid}. */
    default boolean isValid() {
        return this instanceof Valid;
    }
}
