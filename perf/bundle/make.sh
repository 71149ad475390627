#!/usr/bin/env bash
# Builds a self-contained bundle for running the GPU qualification and the peer bench on a Linux x86-64 host that has
# no JDK, Maven, etcd or iperf3 (a lent GPU machine, say): a jlink'd Java runtime, the fat jar's classes, etcd and
# iperf3 from this machine, JUnit's console launcher with the native module's test classes, and run.sh.
#   perf/bundle/make.sh [OUT_DIR]     (default: .devbundle in the repository root; about 53 MB)
# Then, on the other host, from a copy of the repository with OUT_DIR in it:
#   OUT=/some/dir OUT_DIR/run.sh info,gpu,variants      (variants: one `bench peer` per line of OUT_DIR/variants.txt)
# Needs here: a JDK >= 25 (jlink), the fat jar (scripts/orbitkv builds it), /usr/bin/etcd, /usr/bin/iperf3, xz, and the
# JUnit console launcher in the local Maven repository (mvn dependency:get
# -Dartifact=org.junit.platform:junit-platform-console-standalone:1.14.1).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$ROOT/scripts/lib.sh"
find_java
B="${1:-$ROOT/.devbundle}"
M2="${HOME}/.m2/repository"
JAR="$ROOT/app/target/orbitkv.jar"
[ -f "$JAR" ] || { echo "make.sh: build the fat jar first (./scripts/orbitkv --help builds it)" >&2; exit 1; }
(cd "$ROOT" && mvn -q -B -o test-compile -pl native) >&2
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
mkdir -p "$B/bin" "$B/test"
"$JAVA_HOME/bin/jlink" --add-modules java.base,java.logging,java.management,jdk.management,java.naming,java.net.http,java.sql,java.xml,jdk.unsupported,java.security.jgss,java.security.sasl,java.scripting,java.instrument,jdk.jfr,jdk.zipfs,jdk.crypto.cryptoki,jdk.naming.dns,java.desktop,jdk.management.agent,java.management.rmi,java.rmi \
  --strip-debug --no-header-files --no-man-pages --output "$T/jre"
tar -C "$T" -cf - jre | xz -T0 -9 > "$B/jre.tar.xz"
mkdir "$T/app" && (cd "$T/app" && unzip -q "$JAR")
tar -C "$T/app" -cf - . | xz -T0 -9 > "$B/app.tar.xz"
xz -T0 -9 -c /usr/bin/etcd > "$B/bin/etcd.xz"
cp /usr/bin/iperf3 "$(ldconfig -p | awk '/libiperf.so.0 /{print $NF; exit}')" "$(ldconfig -p | awk '/libsctp.so.1 /{print $NF; exit}')" "$B/bin/"
cp "$M2/org/junit/platform/junit-platform-console-standalone/1.14.1/junit-platform-console-standalone-1.14.1.jar" \
   "$M2/org/assertj/assertj-core/3.27.3/assertj-core-3.27.3.jar" "$B/test/"
tar -C "$ROOT/native/target" -czf "$B/test/native-test-classes.tgz" test-classes
cp "$ROOT/perf/bundle/run.sh" "$B/run.sh"
[ -f "$B/variants.txt" ] || printf 'default\nloops0 --setting=peer.transfer-loops=0\n' > "$B/variants.txt"
du -sh "$B" >&2
