package io.orbitkv.app;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The Managers the cluster commands start load from the launcher's start-up cache when this JVM does. */
class ClusterCommandTest {
    @Test
    void aStartUpCacheOfThisJvmIsPassedToTheManagersBeforeTheClassPath() {
        List<String> command = ClusterCommand.managerCommand(
                List.of("-Xlog:disable", "-XX:AOTCache=/opt/orbitkv/orbitkv.aot", "--enable-native-access=ALL-UNNAMED"));
        assertThat(command).contains("-XX:AOTCache=/opt/orbitkv/orbitkv.aot");
        assertThat(command.indexOf("-XX:AOTCache=/opt/orbitkv/orbitkv.aot")).isLessThan(command.indexOf("-cp"));
        assertThat(command).doesNotContain("-Xlog:disable");
        assertThat(command.getLast()).isEqualTo("manager");
    }

    @Test
    void withoutACacheTheManagersStartWithout() {
        assertThat(ClusterCommand.managerCommand(List.of("-Xmx1g")))
                .noneMatch(arg -> arg.startsWith("-XX:AOTCache"));
    }
}
