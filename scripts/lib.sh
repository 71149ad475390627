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
