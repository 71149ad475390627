package io.orbitkv.restore;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The per-device bound under random submit/complete interleavings (seeded; the seed is in the test name): never more
 * than 128 in flight, every credit returned exactly once, a full device grants nothing.
 */
class DeviceAdmissionTest {

    @ParameterizedTest(name = "seed {0}")
    @ValueSource(longs = {1, 2, 3, 42, 20261201})
    void creditsNeverExceedTheBoundAndAllComeBack(long seed) {
        Random random = new Random(seed);
        DeviceAdmission device = new DeviceAdmission(DeviceAdmission.DEFAULT_MAX_IN_FLIGHT);
        Deque<Integer> batches = new ArrayDeque<>();
        long granted = 0;
        for (int step = 0; step < 10_000; step++) {
            if (random.nextInt(3) > 0) {
                int wanted = 1 + random.nextInt(32);
                int got = device.acquire(wanted);
                assertThat(got).isBetween(0, wanted);
                if (device.inFlight() - got < DeviceAdmission.DEFAULT_MAX_IN_FLIGHT - wanted) {
                    assertThat(got).as("room left: everything wanted is granted").isEqualTo(wanted);
                }
                if (got > 0) {
                    batches.add(got);
                    granted += got;
                }
            } else if (!batches.isEmpty()) {
                device.release(batches.poll());
            }
            assertThat(device.inFlight()).isBetween(0, DeviceAdmission.DEFAULT_MAX_IN_FLIGHT);
        }
        while (!batches.isEmpty()) {
            device.release(batches.poll());
        }
        assertThat(device.inFlight()).isZero();
        assertThat(device.completed()).isEqualTo(granted);
        assertThat(device.peakInFlight()).isEqualTo(DeviceAdmission.DEFAULT_MAX_IN_FLIGHT);
        assertThat(device.acquire(0)).isZero();
    }

    @ParameterizedTest(name = "max {0}")
    @ValueSource(ints = {1, 128})
    void aFullDeviceGrantsNothingAndOverReleaseIsAnError(int max) {
        DeviceAdmission device = new DeviceAdmission(max);
        assertThat(device.acquire(max + 5)).isEqualTo(max);
        assertThat(device.acquire(1)).isZero();
        assertThatThrownBy(() -> device.release(max + 1)).isInstanceOf(IllegalStateException.class);
        device.release(max);
        assertThat(device.inFlight()).isZero();
    }
}
