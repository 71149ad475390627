/**
 * The recovery contract: which token boundaries a (hybrid) model can resume from given the pages the Manager can
 * restore, and which block ranges each layer group must restore for a chosen boundary.
 *
 * <p>Pure logic with no Vert.x and no I/O, so the admission role calls it inline on its own thread:
 * <ol>
 *   <li>at registration, build {@link io.orbitkv.recovery.RecoveryRules} from the instance's page size and group
 *       specs (refusal: {@link io.orbitkv.recovery.RecoveryException}, reported as {@code INVALID_IDENTITY});</li>
 *   <li>per demand, {@link io.orbitkv.recovery.DemandValidator#validate} before admitting the query;</li>
 *   <li>from discovered replicas, one {@link io.orbitkv.recovery.GroupAvailability} per group, then
 *       {@link io.orbitkv.recovery.RecoveryContract#bestBoundary} (empty means MISS) and
 *       {@link io.orbitkv.recovery.RecoveryContract#requiredRanges} to slice the reads;</li>
 *   <li>after acquiring leases, {@link io.orbitkv.recovery.RecoveryContract#isLegal} on what was actually acquired.</li>
 * </ol>
 * The semantics, with diagrams, are in the design note on {@link io.orbitkv.recovery.RecoveryContract}.
 */
package io.orbitkv.recovery;
