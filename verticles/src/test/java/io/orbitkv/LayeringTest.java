package io.orbitkv;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static org.assertj.core.api.Assertions.assertThat;

import com.tngtech.archunit.core.domain.Dependency;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.domain.JavaModifier;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchCondition;
import com.tngtech.archunit.lang.ArchRule;
import com.tngtech.archunit.lang.ConditionEvents;
import com.tngtech.archunit.lang.SimpleConditionEvent;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

/**
 * The Manager's layering, stated once. Shared words ({@code model}), infrastructure ({@code common}) and the pure
 * recovery contract ({@code recovery}) sit below the roles and know none of them. A role reaches another role only
 * through that role's surface: its {@code *Proxy} (one method per command), the {@code *Port} interface a proxy
 * implements, and its {@code *Commands} (the records those commands carry); the rest of a role is package-private
 * unless the manager (the wiring), perf or app must name it. {@code manager} wires the roles together and nothing
 * below it reaches up into it.
 */
@AnalyzeClasses(packages = "io.orbitkv", importOptions = ImportOption.DoNotIncludeTests.class)
class LayeringTest {
    static final String[] ROLES = {
        "admission", "cluster", "cost", "engine", "events", "peer", "planning", "restore", "ssd", "storage"};
    static final String[] LOWER = {"io.orbitkv.model..", "io.orbitkv.common..", "io.orbitkv.recovery.."};

    @ArchTest
    static final ArchRule lowerLayerKnowsNoRole = noClasses().that().resideInAnyPackage(LOWER)
            .should().dependOnClassesThat().resideInAnyPackage(rolePackagesAndManager())
            .because("shared words and infrastructure sit below the roles");

    @ArchTest
    static final ArchRule nothingReachesUpIntoManager = noClasses().that().resideInAnyPackage(rolePackages())
            .should().dependOnClassesThat().resideInAPackage("io.orbitkv.manager..")
            .because("the manager wires the roles; roles do not know how they are wired");

    /** A role's non-surface class used from another role fails here, so internals can stay package-private. */
    @ArchTest
    static final ArchRule rolesMeetThroughTheirSurface = classes().that()
            .resideInAnyPackage(rolePackages()).should(reachOtherRolesOnlyThroughTheirSurface());

    /**
     * The public types of each role are listed in {@code src/test/resources/role-public-types.txt}: a type that turns
     * public, or a new public one, fails here until the list names it, so a role's growing surface shows in review.
     */
    @ArchTest
    static void publicTypesPerRoleAreListed(JavaClasses classes) throws IOException {
        List<String> actual = classes.stream()
                .filter(c -> c.isTopLevelClass() && c.getModifiers().contains(JavaModifier.PUBLIC))
                .flatMap(c -> roleOf(c).map(role -> role + " " + c.getSimpleName()).stream())
                .sorted().toList();
        List<String> listed;
        try (InputStream in = LayeringTest.class.getResourceAsStream("/role-public-types.txt")) {
            listed = new String(in.readAllBytes(), StandardCharsets.UTF_8).lines()
                    .filter(line -> !line.isBlank() && !line.startsWith("#")).sorted().toList();
        }
        assertThat(actual).as("public types per role (src/test/resources/role-public-types.txt)")
                .containsExactlyElementsOf(listed);
    }

    static String[] rolePackages() {
        return Arrays.stream(ROLES).map(r -> "io.orbitkv." + r + "..").toArray(String[]::new);
    }

    static String[] rolePackagesAndManager() {
        String[] roles = rolePackages();
        String[] all = Arrays.copyOf(roles, roles.length + 1);
        all[roles.length] = "io.orbitkv.manager..";
        return all;
    }

    static Optional<String> roleOf(JavaClass type) {
        String pkg = type.getPackageName();
        for (String role : ROLES) {
            String root = "io.orbitkv." + role;
            if (pkg.equals(root) || pkg.startsWith(root + ".")) {
                return Optional.of(role);
            }
        }
        return Optional.empty();
    }

    /** A role's surface: its proxies, ports and command records, with the types nested in them. */
    static boolean isSurface(JavaClass type) {
        for (JavaClass t = type; t != null; t = t.getEnclosingClass().orElse(null)) {
            String name = t.getSimpleName();
            if (name.endsWith("Proxy") || name.endsWith("Commands") || name.endsWith("Port")) {
                return true;
            }
        }
        return false;
    }

    static ArchCondition<JavaClass> reachOtherRolesOnlyThroughTheirSurface() {
        return new ArchCondition<>("reach other roles only through their *Proxy, *Port and *Commands") {
            @Override
            public void check(JavaClass origin, ConditionEvents events) {
                Optional<String> own = roleOf(origin);
                for (Dependency d : origin.getDirectDependenciesFromSelf()) {
                    JavaClass target = d.getTargetClass().getBaseComponentType();
                    Optional<String> theirs = roleOf(target);
                    if (theirs.isPresent() && !theirs.equals(own) && !isSurface(target)) {
                        events.add(SimpleConditionEvent.violated(d, d.getDescription()));
                    }
                }
            }
        };
    }
}
