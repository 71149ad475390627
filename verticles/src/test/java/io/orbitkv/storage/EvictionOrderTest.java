package io.orbitkv.storage;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.model.StateKey;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * The eviction order's queues against a plain model of its contract (one access-ordered map per class: transient,
 * ordinary, retained by priority; a put moves an image to its class's tail, a touch refreshes a queued image, an ended
 * retention puts the image first among the ordinary ones), over random puts, removes, touches and priority changes.
 */
class EvictionOrderTest {

    /** The contract as maps, the way it reads. */
    private static final class Model {
        final LinkedHashMap<Image, Boolean> transients = new LinkedHashMap<>();
        final LinkedHashMap<Image, Boolean> ordinary = new LinkedHashMap<>();
        final TreeMap<Integer, LinkedHashMap<Image, Boolean>> retained = new TreeMap<>();

        LinkedHashMap<Image, Boolean> classOf(Image image) {
            if (image.transientImage) {
                return transients;
            }
            if (image.retainPriority == RetentionTable.NOT_RETAINED) {
                return ordinary;
            }
            return retained.computeIfAbsent(image.retainPriority, p -> new LinkedHashMap<>());
        }

        boolean queued(Image image) {
            return transients.containsKey(image) || ordinary.containsKey(image)
                    || retained.values().stream().anyMatch(q -> q.containsKey(image));
        }

        void put(Image image) {
            remove(image);
            classOf(image).put(image, true);
        }

        void remove(Image image) {
            transients.remove(image);
            ordinary.remove(image);
            retained.values().forEach(q -> q.remove(image));
            retained.values().removeIf(Map::isEmpty);
        }

        void touch(Image image) {
            if (queued(image)) {
                put(image);
            }
        }

        void reprioritize(Image image, int priority) {
            boolean queued = queued(image);
            remove(image);
            image.retainPriority = priority;
            if (queued && priority == RetentionTable.NOT_RETAINED) {
                LinkedHashMap<Image, Boolean> first = new LinkedHashMap<>();
                first.put(image, true);
                first.putAll(ordinary);
                ordinary.clear();
                ordinary.putAll(first);
            } else if (queued) {
                put(image);
            }
        }

        List<Image> inOrder() {
            List<Image> all = new ArrayList<>(transients.keySet());
            all.addAll(ordinary.keySet());
            retained.values().forEach(q -> all.addAll(q.keySet()));
            return all;
        }
    }

    private static List<Image> images(int count, Random random) {
        List<Image> images = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            byte[] hash = new byte[32];
            random.nextBytes(hash);
            Image image = new Image(StateKey.of(new byte[StateKey.NAMESPACE_BYTES], 0, hash),
                    new PoolAllocator.Slot(i * 4096L, 4096, 4096, i + 1), 1, 1);
            image.transientImage = random.nextInt(8) == 0;
            images.add(image);
        }
        return images;
    }

    private static List<Image> drain(Iterator<Image> order) {
        List<Image> all = new ArrayList<>();
        order.forEachRemaining(all::add);
        return all;
    }

    @Test
    void queuesKeepTheOrderOfTheContract() {
        for (long seed = 1; seed <= 200; seed++) {
            Random random = new Random(seed);
            List<Image> images = images(1 + random.nextInt(24), random);
            EvictionOrder order = new EvictionOrder();
            Model model = new Model();
            for (int step = 0; step < 300; step++) {
                Image image = images.get(random.nextInt(images.size()));
                switch (random.nextInt(4)) {
                    case 0 -> {
                        order.put(image);
                        model.put(image);
                    }
                    case 1 -> {
                        order.remove(image);
                        model.remove(image);
                    }
                    case 2 -> {
                        order.touch(image);
                        model.touch(image);
                    }
                    default -> {
                        if (!image.transientImage) {
                            int priority = random.nextInt(3) == 0 ? RetentionTable.NOT_RETAINED : random.nextInt(4);
                            // The model reads the priority off the image: give it the image as it was.
                            int before = image.retainPriority;
                            order.reprioritize(image, priority);
                            image.retainPriority = before;
                            model.reprioritize(image, priority);
                        }
                    }
                }
                assertThat(drain(order.inOrder())).as("seed %d step %d", seed, step).isEqualTo(model.inOrder());
                assertThat(order.size()).isEqualTo(model.inOrder().size());
            }
        }
    }

    @Test
    void anEvictedHeadLeavesTheRestInOrder() {
        Random random = new Random(7);
        List<Image> images = images(5, random);
        images.forEach(i -> i.transientImage = false);
        EvictionOrder order = new EvictionOrder();
        images.forEach(order::put);
        order.touch(images.get(0));
        order.remove(images.get(1));
        assertThat(drain(order.inOrder())).containsExactly(images.get(2), images.get(3), images.get(4), images.get(0));
        order.put(images.get(1));
        order.put(images.get(2));
        assertThat(drain(order.inOrder())).containsExactly(images.get(3), images.get(4), images.get(0), images.get(1),
                images.get(2));
    }
}
