package io.orbitkv.model;

import java.util.Map;

/**
 * The cluster's current members as this Manager sees them (the membership role answers): what a role that talks to
 * other members (the peer role's warming) reads without depending on the membership role itself. Answers are local and
 * cheap.
 */
public interface MemberDirectory {
    /** The members currently believed alive, this Manager included. */
    Map<String, MemberRecord> members();

    /** This Manager's member id. */
    String memberId();

    /** This Manager's incarnation. */
    long incarnation();
}
