package io.orbitkv.ssd;

import io.orbitkv.model.SsdResidencyChange;

/**
 * Observer of SSD residency, called on the SSD role's thread in commit/removal order. Keep it short and non-blocking.
 * A removal is always reported before the extent's bytes can change on disk.
 */
@FunctionalInterface
public interface SsdListener {

    SsdListener NONE = change -> {
    };

    void onResidencyChange(SsdResidencyChange change);
}
