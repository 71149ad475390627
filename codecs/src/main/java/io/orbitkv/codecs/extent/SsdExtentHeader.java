package io.orbitkv.codecs.extent;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Objects;
import java.util.zip.CRC32C;

/**
 * The self-describing header block written in front of every SSD extent's payload.
 *
 * <p>Design note: an extent on disk is {@code [header block: 4096 bytes][payload][zero padding to 4096]}. The header
 * block is a whole O_DIRECT unit, so a rebuild after a crash can scan a shard file reading one aligned 4 KiB block per
 * extent, decide from it alone whether an extent is there and what it holds, and only later verify the payload when
 * it is actually restored. Two checksums split the two questions:
 * <ul>
 *   <li>the <b>header CRC32C</b> covers the entire 4096-byte block (the CRC field counted as zero), so any change to
 *       any header byte, padding included, is detected and reported as {@link ExtentDecodeResult.Corrupt};</li>
 *   <li>the <b>payload CRC32C</b> covers exactly {@code payloadLength} payload bytes; a valid header whose payload
 *       does not match (or is shorter than declared) is a torn write, reported as {@link ExtentDecodeResult.Torn}.</li>
 * </ul>
 * An extent is only trusted when it is committed: the writer sets the commit flag and a monotonically increasing
 * commit sequence in the same single write as the payload; an uncommitted header decodes as torn. The generation
 * distinguishes successive occupants of the same ring slot, so a stale index entry never matches a reused extent.
 *
 * <p>All multi-byte fields are little-endian. Layout (byte offsets):
 * <pre>
 *   0  u32  magic "OKVX"              30  u8   block hash length (1..64)
 *   4  u16  format version (1)        31  u8   commit flag (1 = committed)
 *   6  u16  header length (4096)      32  u64  payload length (bytes)
 *   8  16B  namespace                 40  u64  extent length (header + payload, multiple of 4096)
 *  24  u32  group id                  48  u64  generation
 *  28  u16  representation code       56  u64  commit sequence
 *                                     64  u32  payload CRC32C
 *                                     68  u32  header CRC32C (whole block, this field as zero)
 *                                     72  64B  block hash, zero padded
 *                                    136  ...  zero up to 4096
 * </pre>
 */
public final class SsdExtentHeader {

    /** Size of the header block and the alignment unit of every extent. */
    public static final int HEADER_BLOCK_BYTES = 4096;
    /** Extent lengths and file offsets are multiples of this. */
    public static final int EXTENT_ALIGNMENT_BYTES = 4096;
    public static final int MAGIC = 0x58564B4F; // bytes "OKVX" read little-endian
    public static final int FORMAT_VERSION = 1;
    public static final int NAMESPACE_BYTES = 16;
    public static final int MAX_BLOCK_HASH_BYTES = 64;

    static final int OFFSET_MAGIC = 0;
    static final int OFFSET_FORMAT_VERSION = 4;
    static final int OFFSET_HEADER_LENGTH = 6;
    static final int OFFSET_NAMESPACE = 8;
    static final int OFFSET_GROUP_ID = 24;
    static final int OFFSET_REPRESENTATION = 28;
    static final int OFFSET_BLOCK_HASH_LENGTH = 30;
    static final int OFFSET_COMMIT_FLAG = 31;
    static final int OFFSET_PAYLOAD_LENGTH = 32;
    static final int OFFSET_EXTENT_LENGTH = 40;
    static final int OFFSET_GENERATION = 48;
    static final int OFFSET_COMMIT_SEQUENCE = 56;
    static final int OFFSET_PAYLOAD_CRC = 64;
    static final int OFFSET_HEADER_CRC = 68;
    static final int OFFSET_BLOCK_HASH = 72;

    private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final byte[] ZERO_CRC_FIELD = new byte[4];

    private final byte[] namespace;
    private final int groupId;
    private final byte[] blockHash;
    private final int representationCode;
    private final long payloadLength;
    private final long extentLength;
    private final long generation;
    private final boolean committed;
    private final long commitSequence;
    private final int payloadCrc32c;

    /**
     * @param namespace          exactly 16 bytes (copied)
     * @param groupId            the KV group within the namespace
     * @param blockHash          1..64 bytes of chained block hash (copied)
     * @param representationCode payload representation (identity, codec id ...), 0..65535
     * @param payloadLength      payload bytes, not counting header or padding
     * @param generation         generation of this occupant of the extent slot
     * @param committed          whether the extent is committed (uncommitted decodes as torn)
     * @param commitSequence     shard-wide commit order, used to pick the newest copy on rebuild
     * @param payloadCrc32c      CRC32C of the payload bytes
     */
    public SsdExtentHeader(byte[] namespace, int groupId, byte[] blockHash, int representationCode, long payloadLength,
                           long generation, boolean committed, long commitSequence, int payloadCrc32c) {
        Objects.requireNonNull(namespace, "namespace");
        Objects.requireNonNull(blockHash, "blockHash");
        if (namespace.length != NAMESPACE_BYTES) {
            throw new IllegalArgumentException("namespace must be " + NAMESPACE_BYTES + " bytes, got " + namespace.length);
        }
        if (blockHash.length < 1 || blockHash.length > MAX_BLOCK_HASH_BYTES) {
            throw new IllegalArgumentException("block hash must be 1.." + MAX_BLOCK_HASH_BYTES + " bytes, got "
                    + blockHash.length);
        }
        if (representationCode < 0 || representationCode > 0xFFFF) {
            throw new IllegalArgumentException("representation code out of u16 range: " + representationCode);
        }
        if (payloadLength < 0 || payloadLength > Long.MAX_VALUE - 2L * HEADER_BLOCK_BYTES) {
            throw new IllegalArgumentException("payload length out of range: " + payloadLength);
        }
        this.namespace = namespace.clone();
        this.groupId = groupId;
        this.blockHash = blockHash.clone();
        this.representationCode = representationCode;
        this.payloadLength = payloadLength;
        this.extentLength = extentLengthFor(payloadLength);
        this.generation = generation;
        this.committed = committed;
        this.commitSequence = commitSequence;
        this.payloadCrc32c = payloadCrc32c;
    }

    /** A committed header describing {@code payload}, its CRC32C computed here. */
    public static SsdExtentHeader committedFor(byte[] namespace, int groupId, byte[] blockHash, int representationCode,
                                               long generation, long commitSequence, MemorySegment payload) {
        return new SsdExtentHeader(namespace, groupId, blockHash, representationCode, payload.byteSize(), generation,
                true, commitSequence, Crc32c.of(payload));
    }

    /** Header block plus payload rounded up to the 4096-byte extent alignment. */
    public static long extentLengthFor(long payloadLength) {
        long unpadded = HEADER_BLOCK_BYTES + payloadLength;
        return (unpadded + EXTENT_ALIGNMENT_BYTES - 1) & -EXTENT_ALIGNMENT_BYTES;
    }

    /**
     * Writes the 4096-byte header block into the first {@link #HEADER_BLOCK_BYTES} bytes of {@code block}: every byte
     * of the block is written (padding zeroed), and the header CRC is computed last.
     */
    public void encode(MemorySegment block) {
        if (block.byteSize() < HEADER_BLOCK_BYTES) {
            throw new IllegalArgumentException("header block needs " + HEADER_BLOCK_BYTES + " bytes, got "
                    + block.byteSize());
        }
        MemorySegment header = block.asSlice(0, HEADER_BLOCK_BYTES);
        header.fill((byte) 0);
        header.set(U32, OFFSET_MAGIC, MAGIC);
        header.set(U16, OFFSET_FORMAT_VERSION, (short) FORMAT_VERSION);
        header.set(U16, OFFSET_HEADER_LENGTH, (short) HEADER_BLOCK_BYTES);
        MemorySegment.copy(namespace, 0, header, ValueLayout.JAVA_BYTE, OFFSET_NAMESPACE, NAMESPACE_BYTES);
        header.set(U32, OFFSET_GROUP_ID, groupId);
        header.set(U16, OFFSET_REPRESENTATION, (short) representationCode);
        header.set(ValueLayout.JAVA_BYTE, OFFSET_BLOCK_HASH_LENGTH, (byte) blockHash.length);
        header.set(ValueLayout.JAVA_BYTE, OFFSET_COMMIT_FLAG, (byte) (committed ? 1 : 0));
        header.set(U64, OFFSET_PAYLOAD_LENGTH, payloadLength);
        header.set(U64, OFFSET_EXTENT_LENGTH, extentLength);
        header.set(U64, OFFSET_GENERATION, generation);
        header.set(U64, OFFSET_COMMIT_SEQUENCE, commitSequence);
        header.set(U32, OFFSET_PAYLOAD_CRC, payloadCrc32c);
        MemorySegment.copy(blockHash, 0, header, ValueLayout.JAVA_BYTE, OFFSET_BLOCK_HASH, blockHash.length);
        header.set(U32, OFFSET_HEADER_CRC, headerCrc(header));
    }

    /**
     * Decodes only the header block (the first 4096 bytes of {@code block}); the payload is not checked. A valid
     * result means the header is intact and committed; {@link #verifyPayload} decides whether the payload is.
     */
    public static ExtentDecodeResult decodeHeader(MemorySegment block) {
        if (block.byteSize() < HEADER_BLOCK_BYTES) {
            return new ExtentDecodeResult.Torn(ExtentDecodeResult.TornReason.HEADER_TRUNCATED, null);
        }
        MemorySegment header = block.asSlice(0, HEADER_BLOCK_BYTES);
        if (header.get(U32, OFFSET_MAGIC) != MAGIC) {
            return ExtentDecodeResult.NotAnExtent.INSTANCE;
        }
        if (header.get(U32, OFFSET_HEADER_CRC) != headerCrc(header)) {
            return new ExtentDecodeResult.Corrupt(ExtentDecodeResult.CorruptReason.HEADER_CHECKSUM_MISMATCH);
        }
        // The CRC matched, so what follows was written by an encoder: a mismatch now is a foreign or future format.
        int version = Short.toUnsignedInt(header.get(U16, OFFSET_FORMAT_VERSION));
        if (version != FORMAT_VERSION) {
            return new ExtentDecodeResult.Corrupt(ExtentDecodeResult.CorruptReason.UNSUPPORTED_FORMAT_VERSION);
        }
        int headerLength = Short.toUnsignedInt(header.get(U16, OFFSET_HEADER_LENGTH));
        int blockHashLength = Byte.toUnsignedInt(header.get(ValueLayout.JAVA_BYTE, OFFSET_BLOCK_HASH_LENGTH));
        long payloadLength = header.get(U64, OFFSET_PAYLOAD_LENGTH);
        long extentLength = header.get(U64, OFFSET_EXTENT_LENGTH);
        byte commitFlag = header.get(ValueLayout.JAVA_BYTE, OFFSET_COMMIT_FLAG);
        if (headerLength != HEADER_BLOCK_BYTES || blockHashLength < 1 || blockHashLength > MAX_BLOCK_HASH_BYTES
                || payloadLength < 0 || payloadLength > Long.MAX_VALUE - 2L * HEADER_BLOCK_BYTES
                || extentLength != extentLengthFor(payloadLength) || (commitFlag != 0 && commitFlag != 1)) {
            return new ExtentDecodeResult.Corrupt(ExtentDecodeResult.CorruptReason.INCONSISTENT_FIELDS);
        }
        byte[] namespace = header.asSlice(OFFSET_NAMESPACE, NAMESPACE_BYTES).toArray(ValueLayout.JAVA_BYTE);
        byte[] blockHash = header.asSlice(OFFSET_BLOCK_HASH, blockHashLength).toArray(ValueLayout.JAVA_BYTE);
        SsdExtentHeader decoded = new SsdExtentHeader(namespace, header.get(U32, OFFSET_GROUP_ID), blockHash,
                Short.toUnsignedInt(header.get(U16, OFFSET_REPRESENTATION)), payloadLength,
                header.get(U64, OFFSET_GENERATION), commitFlag == 1, header.get(U64, OFFSET_COMMIT_SEQUENCE),
                header.get(U32, OFFSET_PAYLOAD_CRC));
        if (!decoded.committed) {
            return new ExtentDecodeResult.Torn(ExtentDecodeResult.TornReason.NOT_COMMITTED, decoded);
        }
        return new ExtentDecodeResult.Valid(decoded);
    }

    /**
     * Decodes a whole extent: the header block followed by the payload. {@code extent} must start at the header
     * block; bytes beyond header + payload length (padding) are ignored.
     */
    public static ExtentDecodeResult decode(MemorySegment extent) {
        ExtentDecodeResult headerResult = decodeHeader(extent);
        if (!(headerResult instanceof ExtentDecodeResult.Valid(SsdExtentHeader header))) {
            return headerResult;
        }
        return header.verifyPayload(extent.asSlice(HEADER_BLOCK_BYTES));
    }

    /**
     * Checks {@code payload} (starting at the first payload byte, possibly longer than the payload because of
     * padding) against this header's payload length and CRC32C.
     */
    public ExtentDecodeResult verifyPayload(MemorySegment payload) {
        if (payload.byteSize() < payloadLength) {
            return new ExtentDecodeResult.Torn(ExtentDecodeResult.TornReason.PAYLOAD_TRUNCATED, this);
        }
        if (Crc32c.of(payload.asSlice(0, payloadLength)) != payloadCrc32c) {
            return new ExtentDecodeResult.Torn(ExtentDecodeResult.TornReason.PAYLOAD_CHECKSUM_MISMATCH, this);
        }
        return new ExtentDecodeResult.Valid(this);
    }

    private static int headerCrc(MemorySegment header) {
        CRC32C crc = new CRC32C();
        Crc32c.update(crc, header.asSlice(0, OFFSET_HEADER_CRC));
        crc.update(ZERO_CRC_FIELD);
        Crc32c.update(crc, header.asSlice(OFFSET_HEADER_CRC + 4));
        return (int) crc.getValue();
    }

    /** A copy of the 16-byte namespace. */
    public byte[] namespace() {
        return namespace.clone();
    }

    /** Whether this header's namespace equals {@code candidate}, without copying. */
    public boolean namespaceEquals(byte[] candidate) {
        return Arrays.equals(namespace, candidate);
    }

    public int groupId() {
        return groupId;
    }

    /** A copy of the block hash (1..64 bytes). */
    public byte[] blockHash() {
        return blockHash.clone();
    }

    /** Whether this header's block hash equals {@code candidate}, without copying. */
    public boolean blockHashEquals(byte[] candidate) {
        return Arrays.equals(blockHash, candidate);
    }

    public int representationCode() {
        return representationCode;
    }

    public long payloadLength() {
        return payloadLength;
    }

    /** Header block + payload + padding: the bytes this extent occupies on disk, a multiple of 4096. */
    public long extentLength() {
        return extentLength;
    }

    public long generation() {
        return generation;
    }

    public boolean committed() {
        return committed;
    }

    public long commitSequence() {
        return commitSequence;
    }

    public int payloadCrc32c() {
        return payloadCrc32c;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof SsdExtentHeader that
                && Arrays.equals(namespace, that.namespace) && groupId == that.groupId
                && Arrays.equals(blockHash, that.blockHash) && representationCode == that.representationCode
                && payloadLength == that.payloadLength && generation == that.generation
                && committed == that.committed && commitSequence == that.commitSequence
                && payloadCrc32c == that.payloadCrc32c;
    }

    @Override
    public int hashCode() {
        int result = Arrays.hashCode(namespace);
        result = 31 * result + groupId;
        result = 31 * result + Arrays.hashCode(blockHash);
        result = 31 * result + Long.hashCode(generation);
        result = 31 * result + Long.hashCode(commitSequence);
        return 31 * result + payloadCrc32c;
    }

    @Override
    public String toString() {
        HexFormat hex = HexFormat.of();
        return "SsdExtentHeader[namespace=" + hex.formatHex(namespace) + ", groupId=" + groupId
                + ", blockHash=" + hex.formatHex(blockHash) + ", representationCode=" + representationCode
                + ", payloadLength=" + payloadLength + ", extentLength=" + extentLength
                + ", generation=" + generation + ", committed=" + committed
                + ", commitSequence=" + commitSequence + ", payloadCrc32c=" + Integer.toHexString(payloadCrc32c)
                + "]";
    }
}
