package io.orbitkv.perf.report;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class BootstrapTest {
    @Test
    void identicalRoundsGiveAPointInterval() {
        Bootstrap.Interval interval = Bootstrap.medianInterval(new double[] {0.02, 0.02, 0.02}, 0.95, 1000, 1);
        assertThat(interval.lower()).isEqualTo(0.02);
        assertThat(interval.upper()).isEqualTo(0.02);
        assertThat(interval.estimate()).isEqualTo(0.02);
    }

    @Test
    void theIntervalBracketsTheMedianAndWidensWithSpread() {
        SplittableRandom random = new SplittableRandom(7);
        double[] tight = new double[160];
        double[] wide = new double[160];
        for (int i = 0; i < tight.length; i++) {
            double noise = random.nextGaussian();
            tight[i] = 0.01 + 0.005 * noise;
            wide[i] = 0.01 + 0.2 * noise;
        }
        Bootstrap.Interval t = Bootstrap.medianInterval(tight, 0.95, 5000, 3);
        Bootstrap.Interval w = Bootstrap.medianInterval(wide, 0.95, 5000, 3);
        assertThat(t.lower()).isLessThanOrEqualTo(t.estimate());
        assertThat(t.upper()).isGreaterThanOrEqualTo(t.estimate());
        assertThat(t.upper()).isLessThan(0.03);
        // A median regression of about 1 % with wide disagreement between rounds is not shown to be under 3 %.
        assertThat(w.upper()).isGreaterThan(0.03);
        assertThat(w.upper() - w.lower()).isGreaterThan(t.upper() - t.lower());
        // Seeded: the same rounds give the same interval.
        assertThat(Bootstrap.medianInterval(wide, 0.95, 5000, 3)).isEqualTo(w);
    }

    @Test
    void refusesNothingToResample() {
        assertThatThrownBy(() -> Bootstrap.medianInterval(new double[0], 0.95, 10, 1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> Bootstrap.medianInterval(new double[] {1}, 1.5, 10, 1)).isInstanceOf(IllegalArgumentException.class);
    }
}
