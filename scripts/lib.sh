# Shared by scripts/orbitkv and scripts/test: find Java >= 25, and the repository root.
# shellcheck shell=bash
ORBITKV_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

java_major() {
  "$1/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = \([0-9]*\).*/\1/p' | head -n 1
}

find_java() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ] && [ "$(java_major "$JAVA_HOME")" -ge 25 ] 2>/dev/null; then
    return 0
  fi
  local candidate
  for candidate in /usr/lib/jvm/*; do
    if [ -x "$candidate/bin/javac" ] && [ "$(java_major "$candidate")" -ge 25 ] 2>/dev/null; then
      export JAVA_HOME="$candidate"
      return 0
    fi
  done
  echo "orbitkv: no Java 25 or newer found: set JAVA_HOME to a JDK >= 25 (looked in \$JAVA_HOME and /usr/lib/jvm)." >&2
  echo "         On Debian/Ubuntu with the Adoptium repository: apt-get install temurin-25-jdk" >&2
  return 1
}

need_maven() {
  if ! command -v mvn >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "orbitkv: installing maven (Debian package)" >&2
      apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null
    fi
  fi
  command -v mvn >/dev/null 2>&1 || { echo "orbitkv: Maven (mvn) is required to build; install it (apt-get install maven)." >&2; return 1; }
}

# etcd for the cluster tests and `orbitkv cluster up|demo`: Debian's etcd-server (/usr/bin/etcd), installed when
# missing and root. Without it the cluster tests are skipped with a message saying so.
need_etcd() {
  if [ ! -x /usr/bin/etcd ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "orbitkv: installing etcd-server (Debian package) for the cluster" >&2
    (apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null) \
      || echo "orbitkv: could not install etcd-server; the cluster tests will be skipped" >&2
    # The package may register a system service; nothing here relies on it, and tests start their own etcd.
  fi
  [ -x /usr/bin/etcd ] || echo "orbitkv: /usr/bin/etcd is missing (apt-get install etcd-server): cluster tests are skipped" >&2
}

# need_tool COMMAND PACKAGE: installs the Debian PACKAGE when COMMAND is missing and we are root (as for Maven);
# otherwise says what to install and fails.
need_tool() {
  if ! command -v "$1" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "orbitkv: installing $2 (Debian package) for $1" >&2
      apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
    fi
  fi
  command -v "$1" >/dev/null 2>&1 || { echo "orbitkv: $1 is required here; install it (apt-get install $2)." >&2; return 1; }
}

ORBITKV_JAR="$ORBITKV_ROOT/app/target/orbitkv.jar"
ORBITKV_JVM_FLAGS=(--enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow)
# The start-up cache (JDK 25 AOT cache: classes loaded and linked, method profiles) recorded from one Manager start
# of this jar; the launcher records it once per build and passes it to every command. ORBITKV_AOT_CACHE=0: never.
ORBITKV_AOT="$ORBITKV_ROOT/app/target/orbitkv.aot"
# The JVM reports cache problems through its unified log, on stdout by default: keep stdout for reports and lines.
ORBITKV_AOT_LOG_FLAGS=(-Xlog:disable -Xlog:all=warning:stderr)
ORBITKV_BUILD_LOCK="$ORBITKV_ROOT/.orbitkv-build.lock"

# The files the fat jar is built from: in a git checkout the tracked ones and new ones git does not ignore, so that
# what a build generates (target/, ignored) never counts as a change; outside git, the same paths found on disk with
# every target/ pruned. NUL-separated.
jar_sources() {
  if git -C "$ORBITKV_ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$ORBITKV_ROOT" ls-files -z --cached --others --exclude-standard -- '*pom.xml' '*/src/main/*'
  else
    (cd "$ORBITKV_ROOT" && find . \( -name target -o -name .git \) -prune -o -type f \
      \( -name pom.xml -o -path '*/src/main/*' \) -printf '%P\0')
  fi
}

# Whether the fat jar is missing or older than one of its sources.
jar_stale() {
  [ -f "$ORBITKV_JAR" ] || return 0
  local source
  while IFS= read -r -d '' source; do
    [ "$ORBITKV_ROOT/$source" -nt "$ORBITKV_JAR" ] && return 0
  done < <(jar_sources)
  return 1
}

# Takes this tree's build lock for the rest of the calling process: scripts/test holds it for its whole run (the
# Python tests run Managers from the jar it built) and scripts/orbitkv while it rebuilds the jar, so that neither
# rebuilds the jar under the other. Waits, saying so, while another build holds it. Children inherit the lock
# (ORBITKV_BUILD_LOCK_HELD) and must not take it again.
hold_build_lock() {
  if [ -n "${ORBITKV_BUILD_LOCK_HELD:-}" ]; then
    return 0
  fi
  if ! command -v flock >/dev/null 2>&1; then
    echo "orbitkv: flock (util-linux) is missing: builds of this tree are not serialized" >&2
    return 0
  fi
  exec 9>>"$ORBITKV_BUILD_LOCK"
  if ! flock -n 9; then
    echo "orbitkv: waiting for another build of this tree to finish ($ORBITKV_BUILD_LOCK)" >&2
    flock 9
  fi
  export ORBITKV_BUILD_LOCK_HELD=$$
}

# Gives the build lock back (before exec'ing a long-running process that would otherwise inherit it).
release_build_lock() {
  if [ "${ORBITKV_BUILD_LOCK_HELD:-}" = "$$" ]; then
    exec 9>&-
    unset ORBITKV_BUILD_LOCK_HELD
  fi
}

# Mooncake Transfer Engine: builds libtransfer_engine.so + libasio.so when missing or stale (a cached build returns at
# once; the first takes minutes) so that the native jar, the tests and the fat jar carry them. A build failure stops
# with the reason; ORBITKV_SKIP_MOONCAKE=1 skips it for quick targeted runs (what was built before is used; without one the TE
# tests skip, saying why).
need_mooncake_te() {
  if [ "${ORBITKV_SKIP_MOONCAKE:-0}" = 1 ]; then
    echo "orbitkv: ORBITKV_SKIP_MOONCAKE=1: not building the Mooncake Transfer Engine; what was built before is used" >&2
    return 0
  fi
  "$ORBITKV_ROOT/native/mooncake-te/build.sh" >/dev/null || {
    echo "orbitkv: the Mooncake Transfer Engine did not build (see above); fix it or set ORBITKV_SKIP_MOONCAKE=1" >&2
    return 1
  }
}

# Which JDK records or reads the start-up cache: a cache recorded by another JDK is not used.
jdk_identity() {
  echo "$(readlink -f "$JAVA_HOME/bin/java") $(sed -n 's/^JAVA_RUNTIME_VERSION=//p' "$JAVA_HOME/release" 2>/dev/null)"
}

# Whether the start-up cache exists, is newer than the jar and was recorded by this JDK.
aot_fresh() {
  [ -s "$ORBITKV_AOT" ] && [ -f "$ORBITKV_JAR" ] && [ "$ORBITKV_AOT" -nt "$ORBITKV_JAR" ] \
    && [ "$(cat "$ORBITKV_AOT.jdk" 2>/dev/null)" = "$(jdk_identity)" ]
}

# Records the start-up cache: one Manager started (small pool and SSD tier in a scratch directory), exercised by the
# engine simulator (so a first demand finds its classes loaded and its code profiled) and stopped in
# order, with the JVM writing what it loaded, linked and profiled. A failure only means starting without the cache.
record_aot() {
  local scratch tmp
  scratch=$(mktemp -d)
  tmp="$ORBITKV_AOT.tmp.$$"
  echo "orbitkv: recording the start-up cache (once per build)..." >&2
  # Bounded: a start that hangs (an environment pointing at a cluster, say) only costs the cache.
  if (cd "$ORBITKV_ROOT" && timeout 300 "$JAVA_HOME/bin/java" "${ORBITKV_JVM_FLAGS[@]}" ${ORBITKV_JAVA_OPTS:-} \
        "${ORBITKV_AOT_LOG_FLAGS[@]}" -XX:AOTCacheOutput="$tmp" -jar "$ORBITKV_JAR" manager --exit-when-ready \
        --data-dir "$scratch/data" --pool-size 64MiB --grpc-port 0 --metrics-port 0 --set ssd.capacity=64MiB \
        --exercise 20) \
        >"$scratch/out" 2>"$scratch/err" && [ -s "$tmp" ]; then
    mv -f "$tmp" "$ORBITKV_AOT"
    jdk_identity > "$ORBITKV_AOT.jdk"
  else
    echo "orbitkv: the start-up cache was not recorded; starting without it ($(tail -n 1 "$scratch/err" 2>/dev/null))" >&2
    rm -f "$tmp" "$tmp.config"
  fi
  rm -rf "$scratch"
}
