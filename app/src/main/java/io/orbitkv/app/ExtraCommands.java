package io.orbitkv.app;

import java.util.LinkedHashMap;
import java.util.Map;
import picocli.CommandLine;

/** Subcommands added by other parts of the project (e.g. {@code replay}); one line each. */
final class ExtraCommands {
    private ExtraCommands() {}

    static Map<String, CommandLine> all() {
        Map<String, CommandLine> commands = new LinkedHashMap<>();
        commands.put("replay", new CommandLine(new io.orbitkv.perf.replay.ReplayCommand()));
        commands.put("cluster", new CommandLine(new ClusterCommand()));
        return commands;
    }
}
