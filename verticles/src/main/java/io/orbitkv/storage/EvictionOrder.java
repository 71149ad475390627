package io.orbitkv.storage;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.TreeMap;

/**
 * The evictable images (sealed, unpinned, unheld) in the order DRAM eviction takes them: transient images
 * ({@code do_not_store} publishes) first, then unretained images, then retained ones from the lowest retention
 * priority up; least recently used first within each class.
 *
 * <p>Design note: one doubly linked queue per class, threaded through the images themselves ({@link Image#orderPrev},
 * {@link Image#orderNext}, {@link Image#orderQueue}), so a pin's remove, an unpin's put and a touch are a few pointer
 * writes with no hash lookup, and eviction takes the head. An image's class is read from its fields
 * ({@link Image#transientImage}, {@link Image#retainPriority}); they change only through {@link #reprioritize}, which
 * moves the image between queues, so an image is always in the queue its fields name. Loop-confined.
 */
final class EvictionOrder {
    /** One class's images, least recently used at the head. */
    static final class Queue {
        private Image head;
        private Image tail;
        private int size;

        private void linkLast(Image image) {
            image.orderQueue = this;
            image.orderPrev = tail;
            image.orderNext = null;
            if (tail == null) {
                head = image;
            } else {
                tail.orderNext = image;
            }
            tail = image;
            size++;
        }

        private void linkFirst(Image image) {
            image.orderQueue = this;
            image.orderPrev = null;
            image.orderNext = head;
            if (head == null) {
                tail = image;
            } else {
                head.orderPrev = image;
            }
            head = image;
            size++;
        }

        private void unlink(Image image) {
            Image prev = image.orderPrev;
            Image next = image.orderNext;
            if (prev == null) {
                head = next;
            } else {
                prev.orderNext = next;
            }
            if (next == null) {
                tail = prev;
            } else {
                next.orderPrev = prev;
            }
            image.orderQueue = null;
            image.orderPrev = null;
            image.orderNext = null;
            size--;
        }
    }

    private final Queue transients = new Queue();
    private final Queue ordinary = new Queue();
    /** Retained images by priority, lowest first; a class's queue exists while it holds an image. */
    private final TreeMap<Integer, Queue> retained = new TreeMap<>();

    private Queue classOf(Image image) {
        if (image.transientImage) {
            return transients;
        }
        if (image.retainPriority == RetentionTable.NOT_RETAINED) {
            return ordinary;
        }
        return retained.computeIfAbsent(image.retainPriority, p -> new Queue());
    }

    /** Adds the image as most recently used of its class; an image already queued moves there. */
    void put(Image image) {
        if (image.orderQueue != null) {
            remove(image);
        }
        classOf(image).linkLast(image);
    }

    void remove(Image image) {
        Queue queue = image.orderQueue;
        if (queue == null) {
            return;
        }
        queue.unlink(image);
        if (queue.size == 0 && queue != transients && queue != ordinary) {
            retained.remove(image.retainPriority, queue);
        }
    }

    /** Most recently used within its class, when it is evictable. */
    void touch(Image image) {
        Queue queue = image.orderQueue;
        if (queue != null && queue.tail != image) {
            queue.unlink(image);
            queue.linkLast(image);
        }
    }

    /**
     * Changes an image's retention priority, moving it to its new class when it is evictable now. An image whose last
     * retention ended becomes the eldest unretained image: the retention kept it beyond its recency, so it goes first.
     * A retention ends its keys in chain order, so the chain's tail ends up eldest and what stays is a usable prefix.
     */
    void reprioritize(Image image, int priority) {
        boolean queued = image.orderQueue != null;
        if (queued) {
            remove(image);
        }
        image.retainPriority = priority;
        if (queued && priority == RetentionTable.NOT_RETAINED && !image.transientImage) {
            ordinary.linkFirst(image);
        } else if (queued) {
            put(image);
        }
    }

    /** Evictable images in eviction order: a live view; evict only after the iteration ended (as the caller does). */
    Iterator<Image> inOrder() {
        List<Queue> classes = new ArrayList<>(2 + retained.size());
        classes.add(transients);
        classes.add(ordinary);
        classes.addAll(retained.values());
        return new Iterator<>() {
            private int index;
            private Image next;

            @Override
            public boolean hasNext() {
                while (next == null && index < classes.size()) {
                    next = classes.get(index++).head;
                }
                return next != null;
            }

            @Override
            public Image next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                Image current = next;
                next = current.orderNext;
                return current;
            }
        };
    }

    int size() {
        int n = transients.size + ordinary.size;
        for (Queue queue : retained.values()) {
            n += queue.size;
        }
        return n;
    }
}
