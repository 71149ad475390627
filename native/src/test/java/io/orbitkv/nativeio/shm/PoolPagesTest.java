package io.orbitkv.nativeio.shm;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** The mountinfo/shmem_enabled parser on real-format text, and once on this process's own files for /dev/shm. */
class PoolPagesTest {
    private static final String NEVER = "always within_size advise [never] deny force\n";

    /** Lines as a 6.x kernel writes them: root, /dev/shm stacked twice, a huge tmpfs, one with a space in its name. */
    private static final String MOUNTINFO = """
            23 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro
            24 23 0:22 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,size=24683748k
            29 24 0:26 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683748k,huge=always
            40 23 0:40 / /mnt/pool rw,relatime shared:9 - tmpfs orbitkv-pool rw,size=262144k,mode=700,huge=within_size
            41 40 0:41 / /mnt/pool/advised rw,relatime - tmpfs orbitkv-pool rw,size=65536k,mode=700,huge=advise
            42 23 0:42 / /mnt/my\\040pool rw,relatime master:3 - tmpfs my\\040pool rw,size=65536k,huge=always
            43 23 0:43 / /mnt/never rw,relatime - tmpfs tmpfs rw,size=65536k,huge=never
            44 23 0:44 / /mnt/hugetlb rw,relatime - hugetlbfs hugetlbfs rw,pagesize=2M
            45 23 0:45 / /mnt/poolside rw,relatime - tmpfs tmpfs rw,size=65536k
            """;

    private static PoolPages.Answer at(String dir) {
        return PoolPages.classify(MOUNTINFO, NEVER, dir);
    }

    @Test
    void hugeWithinSizeAndAlwaysAreHugeAdviseIsAdviseAndPlainTmpfsIsNone() {
        assertThat(at("/mnt/pool").kind()).isEqualTo(PoolPages.Kind.HUGE);
        assertThat(at("/mnt/pool/sub/dir").kind()).isEqualTo(PoolPages.Kind.HUGE);
        assertThat(at("/mnt/pool").huge()).isEqualTo("within_size");
        assertThat(at("/mnt/pool/advised").kind()).isEqualTo(PoolPages.Kind.ADVISE);
        assertThat(at("/mnt/pool/advised").hugePages()).isTrue();
        assertThat(at("/mnt/never").kind()).isEqualTo(PoolPages.Kind.NONE);
        assertThat(at("/mnt/never").hugePages()).isFalse();
        // A prefix of the name is not a parent: /mnt/poolside is its own plain tmpfs, not under /mnt/pool.
        assertThat(at("/mnt/poolside").kind()).isEqualTo(PoolPages.Kind.NONE);
        assertThat(at("/mnt/poolside").mountPoint()).isEqualTo("/mnt/poolside");
    }

    @Test
    void notTmpfsIsNoneEvenWithHugePagesOfItsOwn() {
        assertThat(at("/var/lib").kind()).isEqualTo(PoolPages.Kind.NONE);
        assertThat(at("/var/lib").fsType()).isEqualTo("ext4");
        assertThat(at("/var/lib").mountPoint()).isEqualTo("/");
        assertThat(at("/mnt/hugetlb").kind()).isEqualTo(PoolPages.Kind.NONE);
    }

    @Test
    void stackedMountsAnswerForTheLastOneTheVisibleOne() {
        assertThat(at("/dev/shm").kind()).isEqualTo(PoolPages.Kind.HUGE);
        assertThat(PoolPages.classify("""
                29 24 0:26 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683748k,huge=always
                24 23 0:22 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,size=24683748k
                """, NEVER, "/dev/shm").kind()).isEqualTo(PoolPages.Kind.NONE);
    }

    @Test
    void escapedSpacesInMountPointsAreUnescaped() {
        PoolPages.Answer answer = at("/mnt/my pool/x");
        assertThat(answer.mountPoint()).isEqualTo("/mnt/my pool");
        assertThat(answer.kind()).isEqualTo(PoolPages.Kind.HUGE);
        assertThat(at("/mnt/my\\040pool").mountPoint()).isEqualTo("/");
        assertThat(PoolPages.unescape("a\\134b\\011c\\012d")).isEqualTo("a\\b\tc\nd");
        assertThat(PoolPages.unescape("trailing\\04")).isEqualTo("trailing\\04");
    }

    @Test
    void shmemEnabledForceMakesEveryTmpfsHugeAndDenyNone() {
        String force = "always within_size advise never deny [force]\n";
        String deny = "always within_size advise never [deny] force\n";
        assertThat(PoolPages.classify(MOUNTINFO, force, "/mnt/never").kind()).isEqualTo(PoolPages.Kind.HUGE);
        assertThat(PoolPages.classify(MOUNTINFO, force, "/mnt/poolside").kind()).isEqualTo(PoolPages.Kind.HUGE);
        assertThat(PoolPages.classify(MOUNTINFO, force, "/var/lib").kind()).isEqualTo(PoolPages.Kind.NONE);
        assertThat(PoolPages.classify(MOUNTINFO, deny, "/mnt/pool").kind()).isEqualTo(PoolPages.Kind.NONE);
        assertThat(PoolPages.classify(MOUNTINFO, deny, "/mnt/pool/advised").kind()).isEqualTo(PoolPages.Kind.NONE);
        assertThat(PoolPages.classify(MOUNTINFO, deny, "/mnt/pool").describe()).contains("/mnt/pool", "deny");
        // Other global values (and an absent file: a kernel without THP) leave the mount's option in charge.
        assertThat(PoolPages.classify(MOUNTINFO, "always [within_size] advise never deny force", "/mnt/never").kind())
                .isEqualTo(PoolPages.Kind.NONE);
        assertThat(PoolPages.classify(MOUNTINFO, "", "/mnt/pool").kind()).isEqualTo(PoolPages.Kind.HUGE);
    }

    @Test
    void malformedLinesAreSkippedAndNoMatchIsNone() {
        String text = "garbage\n\n1 2 3\n40 23 0:40 / /mnt/pool rw - tmpfs\n" + MOUNTINFO.lines()
                .filter(l -> l.contains("/mnt/pool rw")).findFirst().orElseThrow();
        assertThat(PoolPages.classify(text, NEVER, "/mnt/pool").kind()).isEqualTo(PoolPages.Kind.HUGE);
        PoolPages.Answer none = PoolPages.classify("garbage\n", NEVER, "/mnt/pool");
        assertThat(none.kind()).isEqualTo(PoolPages.Kind.NONE);
        assertThat(none.mountPoint()).isNull();
    }

    @Test
    void theRealDevShmAnswersFromThisProcesssMountinfo() throws Exception {
        PoolPages.Answer answer = PoolPages.of(Path.of("/dev/shm"));
        assertThat(answer.mountPoint()).isEqualTo("/dev/shm");
        assertThat(answer.fsType()).isEqualTo("tmpfs");
        String override = PoolPages.bracketed(Files.readString(PoolPages.SHMEM_ENABLED));
        PoolPages.Kind expected = override.equals("force") ? PoolPages.Kind.HUGE
                : override.equals("deny") ? PoolPages.Kind.NONE
                : switch (answer.huge()) {
                    case "always", "within_size" -> PoolPages.Kind.HUGE;
                    case "advise" -> PoolPages.Kind.ADVISE;
                    default -> PoolPages.Kind.NONE;
                };
        assertThat(answer.kind()).isEqualTo(expected);
    }
}
