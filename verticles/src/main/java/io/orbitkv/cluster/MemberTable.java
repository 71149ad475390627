package io.orbitkv.cluster;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import io.orbitkv.model.MemberChange;
import io.orbitkv.model.MemberRecord;

/**
 * The members this Manager knows, as etcd last told it (the prefix read, then watch events). Pure logic, confined to
 * the membership role's event loop; the role publishes immutable copies.
 *
 * <p>Design note (fencing): a member is identified by its id; a put with a different incarnation is a restart, and
 * everything heard from the old incarnation is void (the change says so). A put with an <em>older</em> incarnation than
 * the one held is ignored: a late event of a dead process never replaces its successor. A delete (the lease expired
 * or the member left) removes it. Changes are reported so the inventory directory can fence evidence.
 */
final class MemberTable {
    private final String self;
    private final Map<String, MemberRecord> members = new TreeMap<>();

    MemberTable(String self) {
        this.self = self;
    }

    /** Applies a put; {@code Optional.empty()} when it changes nothing or is an older incarnation. */
    Optional<MemberChange> put(MemberRecord member) {
        MemberRecord held = members.get(member.id());
        if (held == null) {
            members.put(member.id(), member);
            return Optional.of(new MemberChange.Joined(member));
        }
        if (member.incarnation() < held.incarnation()) {
            return Optional.empty();
        }
        members.put(member.id(), member);
        if (member.incarnation() > held.incarnation()) {
            return Optional.of(new MemberChange.Restarted(held, member));
        }
        return member.equals(held) ? Optional.empty() : Optional.of(new MemberChange.Updated(member));
    }

    /** Applies a delete of a member key. */
    Optional<MemberChange> delete(String id) {
        MemberRecord held = members.remove(id);
        return held == null ? Optional.empty() : Optional.of(new MemberChange.Left(held));
    }

    /** Replaces everything with a fresh read of the prefix; returns the changes that amounts to. */
    List<MemberChange> replaceAll(List<MemberRecord> current) {
        Map<String, MemberRecord> next = new TreeMap<>();
        for (MemberRecord m : current) {
            next.merge(m.id(), m, (a, b) -> a.incarnation() >= b.incarnation() ? a : b);
        }
        List<MemberChange> changes = new ArrayList<>();
        for (MemberRecord held : List.copyOf(members.values())) {
            if (!next.containsKey(held.id())) {
                delete(held.id()).ifPresent(changes::add);
            }
        }
        for (MemberRecord m : next.values()) {
            put(m).ifPresent(changes::add);
        }
        return changes;
    }

    Optional<MemberRecord> get(String id) {
        return Optional.ofNullable(members.get(id));
    }

    /** Every member, this Manager included. */
    Map<String, MemberRecord> snapshot() {
        return Map.copyOf(members);
    }

    /** Every member but this Manager. */
    List<MemberRecord> peers() {
        return members.values().stream().filter(m -> !m.id().equals(self)).toList();
    }
}
