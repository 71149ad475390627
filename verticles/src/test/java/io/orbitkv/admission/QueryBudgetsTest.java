package io.orbitkv.admission;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.common.OrbitException;
import io.orbitkv.model.TenantName;
import org.junit.jupiter.api.Test;

class QueryBudgetsTest {

    @Test
    void equalSharesSplitTheBudgetAmongTenantsHoldingBytes() {
        QueryBudgets budgets = new QueryBudgets(1000, 1000, 100, TenantShares.equalShares());
        assertThat(budgets.tenantShareBytes("a")).isEqualTo(1000);
        budgets.charge(1, "a", false, 400);
        assertThat(budgets.tenantShareBytes("b")).isEqualTo(500);
        assertThat(budgets.tenantShareBytes("a")).isEqualTo(1000);
        budgets.check(2, "b", false, 500);
        assertThatThrownBy(() -> budgets.check(2, "b", false, 501)).isInstanceOf(OrbitException.class)
                .hasMessageContaining("tenant 'b'");
        budgets.refund(1, "a", false, 400);
        assertThat(budgets.isEmpty()).isTrue();
    }

    @Test
    void speculativeBytesAreCappedYieldToDemandAndAreNotChargedToInstanceOrTenant() {
        QueryBudgets budgets = new QueryBudgets(1000, 300, 100, TenantShares.parse("a=0.5"));
        budgets.charge(1, "a", true, 100);
        budgets.check(1, "a", false, 300);
        assertThatThrownBy(() -> budgets.check(1, "a", true, 1)).hasMessageContaining("cap");
        budgets.refund(1, "a", true, 100);
        budgets.charge(1, "a", false, 300);
        budgets.charge(2, "b", false, 300);
        budgets.charge(3, "c", false, 350);
        assertThatThrownBy(() -> budgets.check(4, "d", true, 51)).hasMessageContaining("yields to demand");
        budgets.check(4, "d", true, 50);
        assertThatThrownBy(() -> budgets.check(1, "a", false, 1)).hasMessageContaining("instance budget");
    }

    @Test
    void tenantSharesParseAndRefuseNonsense() {
        TenantShares shares = TenantShares.parse(" a=0.5 , b=0.25");
        assertThat(shares.fractionOf("a")).isEqualTo(0.5);
        assertThat(shares.fractionOf("other")).isEqualTo(0.25);
        assertThat(TenantShares.parse("").configured()).isFalse();
        assertThatThrownBy(() -> TenantShares.parse("a=0.7,b=0.5")).hasMessageContaining("more than 1");
        assertThatThrownBy(() -> TenantShares.parse("a=0.5,a=0.1")).hasMessageContaining("twice");
        assertThatThrownBy(() -> TenantShares.parse("a")).hasMessageContaining("tenant=fraction");
        assertThatThrownBy(() -> TenantShares.parse("a=0")).hasMessageContaining("(0, 1]");
        assertThat(TenantName.valid("")).isTrue();
        assertThat(TenantName.valid("x y")).isFalse();
    }

    @Test
    void confidenceScalesTheSpeculationAdmitted() {
        long budget = 1000;
        assertThat(QueryBudgets.admitSpeculation(0.5f, 400, 0, budget))
                .isEqualTo(QueryBudgets.SpeculationAdmission.ADMITTED);
        assertThat(QueryBudgets.admitSpeculation(0.5f, 400, 200, budget))
                .isEqualTo(QueryBudgets.SpeculationAdmission.REFUSED_BY_CONFIDENCE);
        assertThat(QueryBudgets.admitSpeculation(0.9f, 400, 200, budget))
                .isEqualTo(QueryBudgets.SpeculationAdmission.ADMITTED);
        // Unknown confidence (0) admits up to the whole budget.
        assertThat(QueryBudgets.admitSpeculation(0f, 1000, 0, budget))
                .isEqualTo(QueryBudgets.SpeculationAdmission.ADMITTED);
        assertThat(QueryBudgets.admitSpeculation(1f, 1001, 0, budget))
                .isEqualTo(QueryBudgets.SpeculationAdmission.REFUSED_BY_BUDGET);
    }
}
