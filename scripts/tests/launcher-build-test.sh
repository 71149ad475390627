#!/usr/bin/env bash
# Checks the launcher's rebuild rule and the build lock shared by scripts/orbitkv and scripts/test, on a scratch copy
# of the scripts with stand-ins for java, mvn and apt-get (nothing is built; about a second):
#  1. files generated under target/ do not make the jar stale; a changed source does (in a git checkout and outside);
#  2. a launcher started while scripts/test builds waits for it, then runs the jar that build made without rebuilding;
#  3. a launcher started by a build that holds the lock never rebuilds.
# Run by app's LauncherScriptTest; prints "launcher-build-test: ok" on success.
set -euo pipefail
SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
T=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "launcher-build-test: FAIL: $*" >&2; echo "--- log:" >&2; cat "$LOG" >&2 || true; exit 1; }

ROOT=$T/tree
export LOG=$T/log
mkdir -p "$ROOT/scripts" "$ROOT/app/src/main/java" "$ROOT/app/target/generated-sources" "$T/bin" "$T/jdk/bin"
cp "$SCRIPTS/lib.sh" "$SCRIPTS/orbitkv" "$SCRIPTS/test" "$ROOT/scripts/"
: > "$LOG"
cat > "$T/jdk/bin/java" <<'STUB'
#!/usr/bin/env bash
if [ "${1:-}" = -XshowSettings:properties ]; then echo "    java.specification.version = 25" >&2; exit 0; fi
echo "java $*" >> "$LOG"
STUB
cat > "$T/bin/mvn" <<'STUB'
#!/usr/bin/env bash
echo "mvn start $*" >> "$LOG"
if [ -n "${MVN_HOLD_UNTIL:-}" ]; then while [ ! -e "$MVN_HOLD_UNTIL" ]; do sleep 0.02; done; fi
mkdir -p app/target
# The jar a build makes is newer than every source it read, even one the test dated into the future.
newest=$(find . -path ./app/target -prune -o -type f -printf '%T@\n' | sort -n | tail -n 1)
touch -d "@$(( ${newest%.*} + 1 ))" app/target/orbitkv.jar
echo "mvn end" >> "$LOG"
STUB
printf '#!/bin/sh\nexit 1\n' > "$T/bin/apt-get"
chmod +x "$T/jdk/bin/java" "$T/bin/mvn" "$T/bin/apt-get"
export JAVA_HOME=$T/jdk PATH=$T/bin:$PATH
export ORBITKV_SKIP_MOONCAKE=1 # the scratch tree has no Transfer Engine to build
unset ORBITKV_BUILD_LOCK_HELD

# await FILE PATTERN: until FILE has a line matching PATTERN (at most 30 s).
await() {
  local deadline=$((SECONDS + 30))
  until grep -q -- "$2" "$1" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || fail "no line matching '$2' in $1"
    sleep 0.02
  done
}
mvn_runs() { grep -c '^mvn start' "$LOG" || true; }
# Makes PATH newer than the jar, whatever the file system's timestamp granularity.
newer_than_jar() { touch -d "@$(( $(stat -c %Y "$ROOT/app/target/orbitkv.jar") + 2 ))" "$1"; }

cd "$ROOT"
echo '<project/>' > pom.xml
echo 'class A {}' > app/src/main/java/A.java
printf 'target/\n.orbitkv-build.lock\n' > .gitignore
git init -q . && git add -A && git -c user.name=t -c user.email=t@t commit -qm init
touch app/target/orbitkv.jar
touch -d "@$(( $(stat -c %Y app/src/main/java/A.java) - 10 ))" pom.xml app/src/main/java/A.java .gitignore

# 1. Generated files do not count; a source does.
echo 'class G {}' > app/target/generated-sources/G.java
newer_than_jar app/target/generated-sources/G.java
scripts/orbitkv --help 2>/dev/null
[ "$(mvn_runs)" = 0 ] || fail "a generated file under target/ made the jar stale"
grep -q "^java .*-jar $ROOT/app/target/orbitkv.jar --help" "$LOG" || fail "the launcher did not run the jar"
newer_than_jar app/src/main/java/A.java
scripts/orbitkv --help 2>/dev/null
[ "$(mvn_runs)" = 1 ] || fail "a changed source did not rebuild the jar"
mv .git "$T/git-away"
newer_than_jar app/target/generated-sources/G.java
scripts/orbitkv --help 2>/dev/null
[ "$(mvn_runs)" = 1 ] || fail "outside git, a generated file under target/ made the jar stale"
newer_than_jar app/src/main/java/A.java
scripts/orbitkv --help 2>/dev/null
[ "$(mvn_runs)" = 2 ] || fail "outside git, a changed source did not rebuild the jar"
mv "$T/git-away" .git

# 2. A launcher started while scripts/test builds waits, then runs that build's jar without building.
: > "$LOG"
newer_than_jar app/src/main/java/A.java
MVN_HOLD_UNTIL=$T/release scripts/test -q 2>"$T/test.err" &
PIDS+=($!)
await "$LOG" '^mvn start .*verify'
scripts/orbitkv run-after-test 2>"$T/launcher.err" &
launcher=$!
PIDS+=("$launcher")
await "$T/launcher.err" 'waiting for another build of this tree'
[ "$(mvn_runs)" = 1 ] || fail "the launcher built while scripts/test held the lock"
grep -q '^java' "$LOG" && fail "the launcher ran the jar while scripts/test was building it"
touch "$T/release"
wait "$launcher" || fail "the launcher failed after waiting: $(cat "$T/launcher.err")"
[ "$(mvn_runs)" = 1 ] || fail "the launcher rebuilt the jar scripts/test had just built"
[ "$(sed -n 2p "$LOG")" = "mvn end" ] || fail "the launcher ran before scripts/test's build ended"
grep -q '^java .* run-after-test' "$LOG" || fail "the launcher did not run the jar after waiting"

# 3. Started under a build that holds the lock: never rebuilds (that build owns the jar).
: > "$LOG"
newer_than_jar app/src/main/java/A.java
ORBITKV_BUILD_LOCK_HELD=1 scripts/orbitkv nested 2>/dev/null
[ "$(mvn_runs)" = 0 ] || fail "a launcher inside a locked build rebuilt the jar"
grep -q '^java .* nested' "$LOG" || fail "a launcher inside a locked build did not run the jar"

echo "launcher-build-test: ok"
