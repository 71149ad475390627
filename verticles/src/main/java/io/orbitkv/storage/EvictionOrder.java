package io.orbitkv.storage;

import io.orbitkv.model.StateKey;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.TreeMap;

/**
 * The evictable images (sealed, unpinned, unheld) in the order DRAM eviction takes them: transient images
 * ({@code do_not_store} publishes) first, then unretained images, then retained ones from the lowest retention
 * priority up; least recently used first within each class.
 *
 * <p>Design note: one access-ordered map per class, so eviction and a touch stay O(1) and a class change (a retention
 * granted or ended, see {@link RetentionTable}) moves one image. An image's class is read from its fields
 * ({@link Image#transientImage}, {@link Image#retainPriority}); they change only through {@link #reprioritize}, which
 * moves the image between maps, so an image is always found in the map its fields name. Loop-confined.
 */
final class EvictionOrder {
    private final LinkedHashMap<StateKey, Image> transients = new LinkedHashMap<>(16, 0.75f, true);
    private final LinkedHashMap<StateKey, Image> ordinary = new LinkedHashMap<>(16, 0.75f, true);
    /** Retained images by priority, lowest first. */
    private final TreeMap<Integer, LinkedHashMap<StateKey, Image>> retained = new TreeMap<>();

    private LinkedHashMap<StateKey, Image> classOf(Image image, boolean create) {
        if (image.transientImage) {
            return transients;
        }
        if (image.retainPriority == RetentionTable.NOT_RETAINED) {
            return ordinary;
        }
        return create ? retained.computeIfAbsent(image.retainPriority, p -> new LinkedHashMap<>(16, 0.75f, true))
                : retained.get(image.retainPriority);
    }

    void put(Image image) {
        classOf(image, true).put(image.key, image);
    }

    void remove(Image image) {
        LinkedHashMap<StateKey, Image> queue = classOf(image, false);
        if (queue != null) {
            queue.remove(image.key);
            if (queue.isEmpty() && image.retainPriority != RetentionTable.NOT_RETAINED && !image.transientImage) {
                retained.remove(image.retainPriority);
            }
        }
    }

    /** Most recently used within its class, when it is evictable. */
    void touch(Image image) {
        LinkedHashMap<StateKey, Image> queue = classOf(image, false);
        if (queue != null) {
            queue.get(image.key);
        }
    }

    /**
     * Changes an image's retention priority, moving it to its new class when it is evictable now. An image whose last
     * retention ended becomes the eldest unretained image: the retention kept it beyond its recency, so it goes first.
     * A retention ends its keys in chain order, so the chain's tail ends up eldest and what stays is a usable prefix.
     */
    void reprioritize(Image image, int priority) {
        LinkedHashMap<StateKey, Image> queue = classOf(image, false);
        boolean queued = queue != null && queue.containsKey(image.key);
        if (queued) {
            remove(image);
        }
        image.retainPriority = priority;
        if (queued && priority == RetentionTable.NOT_RETAINED) {
            ordinary.putFirst(image.key, image);
        } else if (queued) {
            put(image);
        }
    }

    /** Evictable images in eviction order: a live view; evict only after the iteration ended (as the caller does). */
    Iterator<Image> inOrder() {
        List<Map<StateKey, Image>> classes = new ArrayList<>(2 + retained.size());
        classes.add(transients);
        classes.add(ordinary);
        classes.addAll(retained.values());
        return new Iterator<>() {
            private int index;
            private Iterator<Image> current = List.<Image>of().iterator();

            @Override
            public boolean hasNext() {
                while (!current.hasNext() && index < classes.size()) {
                    current = classes.get(index++).values().iterator();
                }
                return current.hasNext();
            }

            @Override
            public Image next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                return current.next();
            }
        };
    }

    int size() {
        int n = transients.size() + ordinary.size();
        for (Map<StateKey, Image> queue : retained.values()) {
            n += queue.size();
        }
        return n;
    }
}
