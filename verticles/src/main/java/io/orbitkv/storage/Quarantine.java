package io.orbitkv.storage;

import java.util.ArrayDeque;
import java.util.OptionalLong;

/**
 * Timed holds on slot generations of sessions that ended.
 *
 * <p>Design note: a lease or an open publish handed to an engine stays reachable by that engine's process after the
 * Manager stopped trusting it: an engine whose session lapsed may still be copying out of leased slots or writing into
 * its publish slots. So when a session ends (lapse, unregister, resume) its slots are not reused for the quarantine
 * time, by one mechanism: a hold on the slot's exact generation. A held sealed image stays resident and may be leased
 * again (its bytes are the real ones); it is only kept out of the eviction order. An unsealed slot of the ended
 * session has left the key index (its key may be published again elsewhere) but stays allocated to the hold. Holds all
 * last the same time, so they expire in the order they were taken: a FIFO, drained by {@link #end} with the owner's
 * clock; the owner (the storage role) arms a timer for {@link #nextEndNanos}. An engine still holding such a lease
 * learns at release that it must discard its copy (the engine role's tombstones), and nothing it copies within the
 * quarantine is someone else's bytes. Loop-confined, like the store.
 */
final class Quarantine {
    /** A hold on one slot generation: of a resident image, or of a slot detached from the index ({@code image} null). */
    private record Hold(long untilNanos, Image image, PoolAllocator.Slot slot) {}

    private final ResidentImages images;
    private final ArrayDeque<Hold> holds = new ArrayDeque<>();
    private long slots;
    private long bytes;
    private long events;

    Quarantine(ResidentImages images) {
        this.images = images;
    }

    /** Holds a resident image until {@code untilNanos}: it stays leasable, out of the eviction order. */
    void hold(Image image, long untilNanos) {
        add(new Hold(untilNanos, image, image.slot));
    }

    /** Holds a slot already out of the key index until {@code untilNanos}, then frees it. */
    void holdDetached(PoolAllocator.Slot slot, long untilNanos) {
        add(new Hold(untilNanos, null, slot));
    }

    private void add(Hold hold) {
        holds.addLast(hold);
        events++;
        Image image = hold.image();
        if (image == null || image.holds++ == 0) {
            slots++;
            bytes += hold.slot().lengthBytes();
        }
    }

    /** Ends the holds whose time is up ({@code nowNanos} from the same clock as the deadlines); returns how many. */
    int end(long nowNanos) {
        int ended = 0;
        while (!holds.isEmpty() && nowNanos - holds.peekFirst().untilNanos() >= 0) {
            Hold hold = holds.pollFirst();
            ended++;
            if (hold.image() == null) {
                slots--;
                bytes -= hold.slot().lengthBytes();
                images.allocator().free(hold.slot());
                continue;
            }
            Image image = hold.image();
            if (--image.holds == 0) {
                slots--;
                bytes -= image.slot.lengthBytes();
                images.releasedHold(image);
            }
        }
        return ended;
    }

    /** When the eldest hold ends, if any. */
    OptionalLong nextEndNanos() {
        return holds.isEmpty() ? OptionalLong.empty() : OptionalLong.of(holds.peekFirst().untilNanos());
    }

    /** Distinct slots held now. */
    long slots() {
        return slots;
    }

    long bytes() {
        return bytes;
    }

    /** Slots put into quarantine since start (one per slot per ended session). */
    long events() {
        return events;
    }
}
