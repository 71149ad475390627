package io.orbitkv.common;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.ssd.SsdException;
import io.orbitkv.ssd.SsdFailure;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

class KindedExceptionTest {
    @Test
    void everyKindedFailureReadsKindColonDetailCarriesItsCodeAndNoStackTrace() {
        List<KindedException> all = List.of(
                new RoleCallException(RoleCallFailure.TIMEOUT, "no answer in 5 ms: a: b"),
                new SsdException(SsdFailure.STALE_GENERATION, "no answer in 5 ms: a: b"),
                new PlanningException(PlanningFailure.SOURCE_REJECTED, "no answer in 5 ms: a: b"));
        for (KindedException e : all) {
            assertThat(e.getMessage()).isEqualTo(e.failure().name() + ": no answer in 5 ms: a: b");
            assertThat(e.detail()).as("only the kind's prefix is cut").isEqualTo("no answer in 5 ms: a: b");
            assertThat(e.failureCode()).isEqualTo(e.failure().code());
            assertThat(e.getStackTrace()).isEmpty();
        }
        assertThat(new SsdException(SsdFailure.CLOSED, "x").failure()).isSameAs(SsdFailure.CLOSED);
        assertThat(PlanningException.failureOf(all.get(2))).isSameAs(PlanningFailure.SOURCE_REJECTED);
        assertThat(((RoleCallException) all.get(0)).failure()).isSameAs(RoleCallFailure.TIMEOUT);
    }

    @Test
    void theKindsCodesAreDisjointSoAProxyMapsACodeBackToOneKind() {
        List<Integer> codes = new ArrayList<>();
        Stream.of(RoleCallFailure.values(), SsdFailure.values(), PlanningFailure.values())
                .flatMap(Stream::of).forEach(kind -> codes.add(((FailureKind) kind).code()));
        assertThat(codes).doesNotHaveDuplicates();
        for (RoleCallFailure f : RoleCallFailure.values()) {
            assertThat(RoleCallFailure.forCode(f.code())).isSameAs(f);
            assertThat(SsdFailure.forCode(f.code())).isNull();
            assertThat(PlanningFailure.forCode(f.code())).isNull();
        }
    }
}
