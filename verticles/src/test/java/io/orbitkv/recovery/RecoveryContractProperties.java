package io.orbitkv.recovery;

import org.junit.jupiter.api.Test;
import org.quicktheories.QuickTheory;
import org.quicktheories.api.Pair;
import org.quicktheories.core.Gen;
import org.quicktheories.generators.Generate;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.OptionalLong;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.generators.SourceDSL.arbitrary;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

/**
 * Invariants of {@link RecoveryContract} over random rule sets (1 to 4 groups of any kinds, page sizes 1, 2 and 16,
 * unaligned windows, intervals of 1 to 4 pages) and random availability over 24 block positions: mostly complete
 * with a few holes, sometimes sparse.
 *
 * <p>The central one is {@link #legalityIsExactlyRequiredRangesBeingAvailable}: a boundary is legal if and only if it is
 * a checkpoint boundary of every recurrent group and every page {@code requiredRanges} names is available. Necessity and
 * minimality, the intersection law and the full-attention prefix law are stated on their own so that a failure names
 * the broken fact.
 *
 * <p>QuickTheories draws {@value #TRIES} scenarios per property from a fresh seed; a failure prints the shrunk
 * scenario and "Seed was N", and {@code -DQT_SEED=N} replays exactly that run.
 */
class RecoveryContractProperties {
    static final int MAX_PAGES = 24;
    static final int TRIES = 300;

    /** One generated case: rules, one availability view per group, and a page-aligned span origin &lt;= end. */
    record Scenario(RecoveryRules rules, List<GroupAvailability> availability, long origin, long end) {
        int pageSize() {
            return rules.pageSizeTokens();
        }

        /** Every page-aligned b with origin &lt; b &lt;= end. */
        List<Long> candidates() {
            var candidates = new ArrayList<Long>();
            for (long b = origin + pageSize(); b <= end; b += pageSize()) {
                candidates.add(b);
            }
            return candidates;
        }

        GroupAvailability view(int groupId) {
            return availability.stream().filter(view -> view.groupId() == groupId).findFirst().orElseThrow();
        }

        List<GroupAvailability> replacing(GroupAvailability replacement) {
            return availability.stream()
                    .map(view -> view.groupId() == replacement.groupId() ? replacement : view)
                    .toList();
        }

        List<Long> legal() {
            return RecoveryContract.legalBoundaries(rules, availability, origin, end);
        }
    }

    record RuleShape(GroupKind kind, int windowTokens, int intervalPages) {
        GroupRule toRule(int groupId, int pageSize) {
            return switch (kind) {
                case FULL_ATTENTION -> GroupRule.fullAttention(groupId);
                case SLIDING_WINDOW -> GroupRule.slidingWindow(groupId, windowTokens);
                case RECURRENT -> GroupRule.recurrent(groupId, (long) intervalPages * pageSize);
            };
        }
    }

    static QuickTheory properties() {
        return QuickTheory.qt().withExamples(TRIES);
    }

    static Gen<Scenario> scenarios() {
        return arbitrary().pick(1, 2, 16).flatMap(pageSize -> lists().of(ruleShapes(pageSize)).ofSizeBetween(1, 4).zip(
                lists().of(availableBlocks()).ofSize(4),
                integers().between(0, MAX_PAGES),
                integers().between(0, MAX_PAGES),
                (shapes, blocks, a, b) -> {
                    var rules = new ArrayList<GroupRule>();
                    var views = new ArrayList<GroupAvailability>();
                    for (int i = 0; i < shapes.size(); i++) {
                        int groupId = 3 * i + 1;
                        rules.add(shapes.get(i).toRule(groupId, pageSize));
                        views.add(GroupAvailability.of(groupId, blocks.get(i)));
                    }
                    return new Scenario(new RecoveryRules(pageSize, rules), views,
                            (long) Math.min(a, b) * pageSize, (long) Math.max(a, b) * pageSize);
                }));
    }

    static Gen<RuleShape> ruleShapes(int pageSize) {
        return arbitrary().enumValues(GroupKind.class).zip(
                integers().between(1, 8 * pageSize),
                integers().between(1, 4),
                RuleShape::new);
    }

    /** Three in four views are complete but for up to 4 holes; one in four holds any subset of the 24 positions. */
    static Gen<BitSet> availableBlocks() {
        Gen<BitSet> fewHoles = lists().of(integers().between(0, MAX_PAGES - 1)).ofSizeBetween(0, 4)
                .map(holes -> {
                    var blocks = new BitSet();
                    blocks.set(0, MAX_PAGES);
                    holes.forEach(blocks::clear);
                    return blocks;
                });
        Gen<BitSet> sparse = lists().of(integers().between(0, MAX_PAGES - 1)).ofSizeBetween(0, MAX_PAGES)
                .map(present -> {
                    var blocks = new BitSet();
                    present.forEach(blocks::set);
                    return blocks;
                });
        return Generate.frequency(Pair.of(3, fewHoles), Pair.of(1, sparse));
    }

    /** The required ranges for b, or null when some recurrent group can have no checkpoint at b. */
    static List<GroupRanges> requiredOrNull(Scenario s, long boundary) {
        for (GroupRule rule : s.rules().groups()) {
            if (rule.kind() == GroupKind.RECURRENT && boundary % rule.checkpointIntervalTokens() != 0) {
                return null;
            }
        }
        return RecoveryContract.requiredRanges(s.rules(), boundary, s.origin());
    }

    static boolean allAvailable(Scenario s, List<GroupRanges> required) {
        for (GroupRanges group : required) {
            GroupAvailability view = s.view(group.groupId());
            for (BlockRange range : group.ranges()) {
                if (!view.allAvailable(range.startInclusive(), range.endExclusive())) {
                    return false;
                }
            }
        }
        return true;
    }

    @Test
    void legalBoundariesAreAscendingPageAlignedAndInsideTheSpan() {
        properties().forAll(scenarios()).checkAssert(s -> {
            List<Long> legal = s.legal();
            assertThat(legal).isSorted().doesNotHaveDuplicates();
            assertThat(legal).allSatisfy(b -> {
                assertThat(b).isGreaterThan(s.origin()).isLessThanOrEqualTo(s.end());
                assertThat(b % s.pageSize()).isZero();
            });
            OptionalLong best = RecoveryContract.bestBoundary(s.rules(), s.availability(), s.origin(), s.end());
            assertThat(best).isEqualTo(legal.isEmpty() ? OptionalLong.empty() : OptionalLong.of(legal.getLast()));
        });
    }

    @Test
    void legalityIsExactlyRequiredRangesBeingAvailable() {
        properties().forAll(scenarios()).checkAssert(s -> {
            Set<Long> legal = Set.copyOf(s.legal());
            for (long b : s.candidates()) {
                List<GroupRanges> required = requiredOrNull(s, b);
                boolean expected = required != null && allAvailable(s, required);
                assertThat(legal.contains(b)).as("boundary %d", b).isEqualTo(expected);
                assertThat(RecoveryContract.isLegal(s.rules(), s.availability(), s.origin(), b)).isEqualTo(expected);
            }
        });
    }

    @Test
    void aLegalBoundaryNeverLacksARequiredPage() {
        properties().forAll(scenarios()).checkAssert(s -> {
            for (long b : s.legal()) {
                for (GroupRanges group : RecoveryContract.requiredRanges(s.rules(), b, s.origin())) {
                    GroupAvailability view = s.view(group.groupId());
                    for (BlockRange range : group.ranges()) {
                        for (int position = range.startInclusive(); position < range.endExclusive(); position++) {
                            assertThat(view.isAvailable(position))
                                    .as("boundary %d group %d position %d", b, group.groupId(), position).isTrue();
                        }
                    }
                }
            }
        });
    }

    /** Minimality: losing any single required page makes the boundary illegal, so no required page is surplus. */
    @Test
    void everyRequiredPageIsNecessary() {
        properties().forAll(scenarios()).checkAssert(s -> {
            for (long b : s.legal()) {
                for (GroupRanges group : RecoveryContract.requiredRanges(s.rules(), b, s.origin())) {
                    for (BlockRange range : group.ranges()) {
                        for (int position = range.startInclusive(); position < range.endExclusive(); position++) {
                            var lessAvailable = s.replacing(s.view(group.groupId()).without(position));
                            assertThat(RecoveryContract.legalBoundaries(s.rules(), lessAvailable, s.origin(), s.end()))
                                    .as("boundary %d without group %d position %d", b, group.groupId(), position)
                                    .doesNotContain(b);
                        }
                    }
                }
            }
        });
    }

    /** Sufficiency: with nothing but the required pages available, the boundary is legal. */
    @Test
    void theRequiredPagesAloneMakeABoundaryLegal() {
        properties().forAll(scenarios()).checkAssert(s -> {
            for (long b : s.candidates()) {
                List<GroupRanges> required = requiredOrNull(s, b);
                if (required == null) {
                    continue;
                }
                var onlyRequired = required.stream().map(group -> {
                    var blocks = new BitSet();
                    group.ranges().forEach(range -> blocks.set(range.startInclusive(), range.endExclusive()));
                    return GroupAvailability.of(group.groupId(), blocks);
                }).toList();
                assertThat(RecoveryContract.isLegal(s.rules(), onlyRequired, s.origin(), b)).as("boundary %d", b).isTrue();
            }
        });
    }

    /** Every required page lies in what its group's rule reaches: never below the origin, never outside the window. */
    @Test
    void requiredRangesStayInsideWhatEachGroupAttendsTo() {
        properties().forAll(scenarios()).checkAssert(s -> {
            int pageSize = s.pageSize();
            for (long b : s.candidates()) {
                List<GroupRanges> required = requiredOrNull(s, b);
                if (required == null) {
                    continue;
                }
                int boundaryPosition = (int) (b / pageSize);
                for (GroupRanges group : required) {
                    GroupRule rule = s.rules().rule(group.groupId());
                    assertThat(group.ranges()).hasSize(1);
                    BlockRange range = group.ranges().getFirst();
                    assertThat(range.endExclusive()).isEqualTo(boundaryPosition);
                    assertThat((long) range.startInclusive() * pageSize).isGreaterThanOrEqualTo(s.origin());
                    switch (rule.kind()) {
                        case FULL_ATTENTION -> assertThat((long) range.startInclusive() * pageSize).isEqualTo(s.origin());
                        case SLIDING_WINDOW -> {
                            long oldestAttended = Math.max(s.origin(), b - rule.windowTokens());
                            assertThat(range.contains((int) (oldestAttended / pageSize))).isTrue();
                            // The first page still holds a token the window attends to.
                            assertThat((long) (range.startInclusive() + 1) * pageSize).isGreaterThan(oldestAttended);
                        }
                        case RECURRENT -> assertThat(range.length()).isEqualTo(1);
                    }
                }
            }
        });
    }

    /** Adding a group can only remove boundaries: the legal set of all groups is the intersection of each alone. */
    @Test
    void combiningGroupsIsTheIntersectionOfEachGroupAlone() {
        properties().forAll(scenarios()).checkAssert(s -> {
            Set<Long> intersection = new LinkedHashSet<>(s.candidates());
            for (GroupRule rule : s.rules().groups()) {
                var alone = RecoveryRules.of(s.pageSize(), rule);
                List<Long> legalAlone = RecoveryContract.legalBoundaries(alone, List.of(s.view(rule.groupId())),
                        s.origin(), s.end());
                intersection.retainAll(legalAlone);
                OptionalLong bestAlone = RecoveryContract.bestBoundary(alone, List.of(s.view(rule.groupId())),
                        s.origin(), s.end());
                OptionalLong bestAll = RecoveryContract.bestBoundary(s.rules(), s.availability(), s.origin(), s.end());
                if (bestAll.isPresent()) {
                    assertThat(bestAlone).isPresent();
                    assertThat(bestAll.getAsLong()).isLessThanOrEqualTo(bestAlone.getAsLong());
                }
            }
            assertThat(s.legal()).containsExactlyElementsOf(intersection);
        });
    }

    /** Full attention: the legal boundaries are origin+P, origin+2P, ... up to the first missing page or the end. */
    @Test
    void fullAttentionLegalBoundariesAreAContiguousRunFromTheOrigin() {
        properties().forAll(scenarios()).checkAssert(s -> {
            var fullAttention = new RecoveryRules(s.pageSize(),
                    s.rules().groups().stream().map(rule -> GroupRule.fullAttention(rule.groupId())).toList());
            int pageSize = s.pageSize();
            int originPosition = (int) (s.origin() / pageSize);
            int lastPosition = (int) (s.end() / pageSize);
            for (GroupAvailability view : s.availability().subList(0, fullAttention.groups().size())) {
                lastPosition = Math.min(lastPosition, view.firstMissingFrom(originPosition));
            }
            var expected = new ArrayList<Long>();
            for (int position = originPosition + 1; position <= lastPosition; position++) {
                expected.add((long) position * pageSize);
            }
            assertThat(RecoveryContract.legalBoundaries(fullAttention, s.availability(), s.origin(), s.end()))
                    .containsExactlyElementsOf(expected);
        });
    }

    @Test
    void moreAvailabilityNeverRemovesALegalBoundary() {
        properties().forAll(scenarios(), integers().between(0, 3), integers().between(0, MAX_PAGES - 1))
                .checkAssert((s, groupIndex, position) -> {
                    GroupAvailability view = s.availability().get(groupIndex % s.availability().size());
                    var moreAvailable = s.replacing(view.with(position));
                    assertThat(RecoveryContract.legalBoundaries(s.rules(), moreAvailable, s.origin(), s.end()))
                            .containsAll(s.legal());
                });
    }
}
