package io.orbitkv.cluster;

import io.orbitkv.model.MemberChange;
import io.orbitkv.model.MemberDirectory;

/**
 * What another role may ask of the membership role: the members it knows ({@link MemberDirectory}) and to hear their
 * changes. The peer role uses it to end the leases of members that left and to warm paths to new ones.
 */
public interface MembershipPort extends MemberDirectory {
    /** What a listener hears; called on the membership role's context. */
    interface Listener {
        void onMembership(MemberChange change);

        /** etcd has not answered for a lease ttl: no peer is current any more. */
        void onPeersUnknown();

        /** etcd answers again and the member table was re-read. */
        void onPeersKnown();
    }

    void addListener(Listener listener);
}
