package io.orbitkv.model;

/**
 * What one membership event changed, as the membership role reports it to its listeners. A member is identified by its
 * id; a new incarnation is a restart, so everything heard from the previous one is void.
 */
public sealed interface MemberChange {
    record Joined(MemberRecord member) implements MemberChange {}

    record Restarted(MemberRecord previous, MemberRecord member) implements MemberChange {}

    /** Same incarnation, new epoch or endpoints (it re-registered after losing its lease). */
    record Updated(MemberRecord member) implements MemberChange {}

    record Left(MemberRecord member) implements MemberChange {}
}
