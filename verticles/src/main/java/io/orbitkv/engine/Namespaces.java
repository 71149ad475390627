package io.orbitkv.engine;

import io.orbitkv.common.OrbitException;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.GroupKind;
import io.orbitkv.protocol.engine.GroupSpec;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.Representation;
import io.orbitkv.recovery.GroupRule;
import io.orbitkv.recovery.RecoveryException;
import io.orbitkv.recovery.RecoveryRules;
import io.orbitkv.model.StateKey;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Derives an instance's namespace from everything that decides whether bytes are interchangeable: model
 * fingerprint, representation, layout, geometry, page size, TP/PP rank and size, and the group specs. Two instances
 * with equal identity get the same 16 bytes (and so share published prefixes); any difference gives another
 * namespace. Role and label are deliberately left out: a prefill and a decode instance of one model share bytes.
 */
public final class Namespaces {
    private static final int MAX_TEXT = 512;

    private Namespaces() {}

    /** The largest page a registration may declare, in tokens (keeps block positions and token counts in range). */
    public static final long MAX_PAGE_SIZE_TOKENS = 1 << 20;
    /** The largest TP or PP size a registration may declare. */
    public static final long MAX_PARALLEL_SIZE = 1 << 16;

    /**
     * Validates an identity; every refusal names the field. The wire's unsigned numbers are compared unsigned
     * (a {@code bytes_per_page} of 2^63 + 4096 is out of range, not negative).
     */
    public static void validate(InstanceIdentity id, long poolBytes) {
        requireText("model_fingerprint", id.getModelFingerprint());
        requireLength("layout", id.getLayout());
        requireLength("geometry", id.getGeometry());
        if (id.getRepresentation() != Representation.RAW) {
            throw invalid("representation must be RAW, got " + id.getRepresentation());
        }
        long pageSize = WireNumbers.u32Within("page_size_tokens", id.getPageSizeTokens(), 1, MAX_PAGE_SIZE_TOKENS,
                ErrorReason.INVALID_IDENTITY);
        long tpSize = WireNumbers.u32Within("tp_size", id.getTpSize(), 1, MAX_PARALLEL_SIZE, ErrorReason.INVALID_IDENTITY);
        WireNumbers.u32AtMost("tp_rank", id.getTpRank(), tpSize - 1, ErrorReason.INVALID_IDENTITY);
        long ppSize = WireNumbers.u32Within("pp_size", id.getPpSize(), 1, MAX_PARALLEL_SIZE, ErrorReason.INVALID_IDENTITY);
        WireNumbers.u32AtMost("pp_rank", id.getPpRank(), ppSize - 1, ErrorReason.INVALID_IDENTITY);
        if (id.getGroupsCount() == 0 || id.getGroupsCount() > 64) {
            throw invalid("an instance declares 1..64 groups, got " + id.getGroupsCount());
        }
        Set<Integer> ids = new HashSet<>();
        for (GroupSpec g : id.getGroupsList()) {
            String group = "group " + Integer.toUnsignedString(g.getGroupId());
            if (!ids.add(g.getGroupId())) {
                throw invalid(group + " declared twice");
            }
            if (g.getKind() == GroupKind.GROUP_KIND_UNSPECIFIED || g.getKind() == GroupKind.UNRECOGNIZED) {
                throw invalid(group + " has no kind");
            }
            WireNumbers.u64Within(group + " bytes_per_page", g.getBytesPerPage(), 1, poolBytes, ErrorReason.INVALID_IDENTITY);
            if (g.getKind() == GroupKind.SLIDING_WINDOW && g.getWindowTokens() == 0) {
                throw invalid("sliding-window " + group + " needs window_tokens");
            }
            if (g.getKind() == GroupKind.RECURRENT && (g.getCheckpointIntervalTokens() == 0
                    || Integer.toUnsignedLong(g.getCheckpointIntervalTokens()) % pageSize != 0)) {
                throw invalid("recurrent " + group + " needs checkpoint_interval_tokens, a multiple of the page size");
            }
        }
    }

    /**
     * The recovery rules of a validated identity: page size and one rule per group. A group spec that sets a parameter
     * of another kind (a window on a recurrent group, say) is refused as INVALID_IDENTITY.
     */
    public static RecoveryRules recoveryRules(InstanceIdentity id) {
        List<GroupRule> rules = new ArrayList<>(id.getGroupsCount());
        try {
            for (GroupSpec g : id.getGroupsList()) {
                // Qualified: the wire's GroupKind (imported) and the recovery role's share a name.
                io.orbitkv.recovery.GroupKind kind = switch (g.getKind()) {
                    case FULL_ATTENTION -> io.orbitkv.recovery.GroupKind.FULL_ATTENTION;
                    case SLIDING_WINDOW -> io.orbitkv.recovery.GroupKind.SLIDING_WINDOW;
                    case RECURRENT -> io.orbitkv.recovery.GroupKind.RECURRENT;
                    default -> throw invalid("group " + g.getGroupId() + " has no kind");
                };
                rules.add(new GroupRule(g.getGroupId(), kind, Integer.toUnsignedLong(g.getWindowTokens()),
                        Integer.toUnsignedLong(g.getCheckpointIntervalTokens())));
            }
            return new RecoveryRules(id.getPageSizeTokens(), rules);
        } catch (RecoveryException e) {
            throw invalid(e.getMessage());
        }
    }

    private static void requireText(String field, String value) {
        if (value.isBlank()) {
            throw invalid(field + " must not be empty");
        }
        requireLength(field, value);
    }

    private static void requireLength(String field, String value) {
        if (value.length() > MAX_TEXT) {
            throw invalid(field + " is longer than " + MAX_TEXT + " characters");
        }
    }

    private static OrbitException invalid(String message) {
        return new OrbitException(ErrorReason.INVALID_IDENTITY, message);
    }

    public static byte[] derive(InstanceIdentity id) {
        try {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            DataOutputStream out = new DataOutputStream(bytes);
            out.writeUTF("orbitkv-namespace-v1");
            writeText(out, id.getModelFingerprint());
            out.writeInt(id.getRepresentationValue());
            writeText(out, id.getLayout());
            writeText(out, id.getGeometry());
            out.writeInt(id.getPageSizeTokens());
            out.writeInt(id.getTpRank());
            out.writeInt(id.getTpSize());
            out.writeInt(id.getPpRank());
            out.writeInt(id.getPpSize());
            List<GroupSpec> groups = new ArrayList<>(id.getGroupsList());
            groups.sort(Comparator.comparingInt(GroupSpec::getGroupId));
            for (GroupSpec g : groups) {
                out.writeInt(g.getGroupId());
                out.writeInt(g.getKindValue());
                out.writeLong(g.getBytesPerPage());
                out.writeInt(g.getWindowTokens());
                out.writeInt(g.getCheckpointIntervalTokens());
            }
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(bytes.toByteArray());
            return Arrays.copyOf(digest, StateKey.NAMESPACE_BYTES);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JDK", e);
        }
    }

    private static void writeText(DataOutputStream out, String text) throws IOException {
        byte[] utf8 = text.getBytes(StandardCharsets.UTF_8);
        out.writeInt(utf8.length);
        out.write(utf8);
    }
}
