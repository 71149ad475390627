#!/usr/bin/env bash
# The GPU check of the CUDA restore route, made to fit one device call of at most five minutes on a fresh GPU machine
# (no JDK, no Maven, no network). Two halves:
#
#   perf/gpu/qualify.sh --prepare        HERE (JDK 25, Maven with the project's dependencies): builds the fat jar and
#                                        the bundle of perf/bundle/make.sh in .devbundle (a jlink'd Java runtime, the
#                                        jar's classes, JUnit's console launcher, the native module's test classes).
#   perf/gpu/qualify.sh [BENCH OPTIONS]  ON THE GPU MACHINE, from the repository root with .devbundle carried along:
#       1. a GPU and its driver must be there (exit 3, naming what is missing, otherwise);
#       2. unpacks the bundle's Java runtime and jar;
#       3. the tests that need CUDA: CudaRuntimeTest and CuFileTest (the GPU round trip must run, not be skipped);
#       4. orbitkv bench gpu-restore (default 128 x 2 MiB pages, 5 rounds; BENCH OPTIONS are passed on), whose report
#          carries restore_ratio and the breakdown of the restore's time (per demand, page, batch and stream);
#       5. everything into $OUT (default perf/gpu/out): steps.log, info.txt, gpu-tests.txt, gpu-restore.json (the
#          bench's report), gpu-restore.err.
#   The device call: command "perf/gpu/qualify.sh", carry [".devbundle"], timeout_s 300.
#
# Exit status: 0 only when the tests and the bench passed; 3 without a GPU; 2 without a bundle; 1 otherwise.
# Each step has its own time limit (tests 90 s, bench 150 s) so that the whole stays under five minutes.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUNDLE="${ORBITKV_BUNDLE:-$ROOT/.devbundle}"

if [ "${1:-}" = --prepare ]; then
  set -e
  ORBITKV_AOT_CACHE=0 "$ROOT/scripts/orbitkv" --version >/dev/null # builds the fat jar when stale
  "$ROOT/perf/bundle/make.sh" "$BUNDLE"
  echo "qualify: bundle ready in $BUNDLE; on the GPU machine: perf/gpu/qualify.sh (carry .devbundle)" >&2
  exit 0
fi

OUT="${OUT:-$ROOT/perf/gpu/out}"
mkdir -p "$OUT"
T0=$(date +%s)
step() { echo "[+$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/steps.log" >&2; }

# 1. A GPU and its driver. ORBITKV_QUALIFY_WITHOUT_GPU=1 (a check of this script on a machine without one) goes on
# to the other steps, which then fail naming CUDA's cause.
if [ "${ORBITKV_QUALIFY_WITHOUT_GPU:-0}" = 1 ]; then
  step "no GPU check (ORBITKV_QUALIFY_WITHOUT_GPU=1): the CUDA steps below must fail"
elif ! command -v nvidia-smi >/dev/null 2>&1; then
  step "FAIL: no NVIDIA driver here (nvidia-smi is missing): the CUDA route cannot be qualified on this machine"
  exit 3
elif ! nvidia-smi -L > "$OUT/gpus.txt" 2>&1 || ! grep -q '^GPU ' "$OUT/gpus.txt"; then
  step "FAIL: nvidia-smi finds no GPU: $(head -n 1 "$OUT/gpus.txt")"
  exit 3
else
  step "GPUs: $(tr '\n' ';' < "$OUT/gpus.txt")"
fi

# 2. The bundle.
for part in jre.tar.xz app.tar.xz test/native-test-classes.tgz; do
  if [ ! -f "$BUNDLE/$part" ]; then
    step "FAIL: $BUNDLE/$part is missing: run perf/gpu/qualify.sh --prepare on the build machine and carry .devbundle"
    exit 2
  fi
done
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
tar -C "$W" -xJf "$BUNDLE/jre.tar.xz" & mkdir -p "$W/app" && tar -C "$W/app" -xJf "$BUNDLE/app.tar.xz" &
mkdir -p "$W/tc" && tar -C "$W/tc" -xzf "$BUNDLE/test/native-test-classes.tgz" & wait
# The classes back into one jar (stored, not compressed: it is read once).
python3 - "$W" <<'PY' 2>>"$OUT/steps.log" || { step "FAIL: could not rebuild the jar from the bundle"; exit 1; }
import os, sys, zipfile
root = os.path.join(sys.argv[1], "app")
with zipfile.ZipFile(os.path.join(sys.argv[1], "orbitkv.jar"), "w", zipfile.ZIP_STORED) as z:
    z.write(os.path.join(root, "META-INF/MANIFEST.MF"), "META-INF/MANIFEST.MF")
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            a = os.path.relpath(p, root)
            if a != "META-INF/MANIFEST.MF":
                z.write(p, a)
PY
J="$W/jre/bin/java"
FLAGS=(--enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xlog:disable -Xlog:all=warning:stderr)
CUDART=$(find /usr/local /opt /usr/lib -name 'libcudart.so.13*' 2>/dev/null | head -n 1)
CUFILE=$(find /usr/local /opt /usr/lib -name 'libcufile.so*' 2>/dev/null | grep -v rdma | head -n 1)
export LD_LIBRARY_PATH="$(dirname "${CUDART:-/x/x}"):$(dirname "${CUFILE:-/x/x}"):${LD_LIBRARY_PATH:-}"
{ echo "nproc $(nproc)"; uname -a; free -g; nvidia-smi 2>&1; echo "cudart=$CUDART cufile=$CUFILE"; "$J" -version; } \
  > "$OUT/info.txt" 2>&1
step "unpacked: $("$J" -version 2>&1 | head -n 1); cudart ${CUDART:-not found}"

# 3. The tests that need CUDA: the GPU round trip must have run and passed, not been skipped.
step "tests: CudaRuntimeTest, CuFileTest"
timeout 90 "$J" "${FLAGS[@]}" -jar "$BUNDLE"/test/junit-platform-console-standalone-*.jar execute \
  --class-path "$W/tc/test-classes:$W/orbitkv.jar:$(ls "$BUNDLE"/test/assertj-core-*.jar | head -n 1)" \
  --select-class io.orbitkv.nativeio.cuda.CudaRuntimeTest --select-class io.orbitkv.nativeio.cufile.CuFileTest \
  --details=tree --disable-banner --reports-dir="$OUT/junit" > "$OUT/gpu-tests.txt" 2>&1
tests=$?
gpu_ran=$(python3 - "$OUT/junit" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
ok = False
for f in glob.glob(sys.argv[1] + "/*.xml"):
    for c in ET.parse(f).getroot().iter("testcase"):
        if c.get("classname", "").endswith("CudaRuntimeTest") and c.get("name", "").startswith("onAGpu"):
            ok = not any(c.find(t) is not None for t in ("skipped", "failure", "error"))
print("yes" if ok else "no")
PY
)
step "tests rc=$tests, GPU round trip ran and passed: $gpu_ran"

# 4. The bench, with its breakdown.
step "bench gpu-restore $*"
timeout 150 "$J" "${FLAGS[@]}" -jar "$W/orbitkv.jar" bench gpu-restore "$@" > "$OUT/gpu-restore.out" 2> "$OUT/gpu-restore.err"
bench=$?
tail -n 1 "$OUT/gpu-restore.out" > "$OUT/gpu-restore.json"
python3 - "$OUT/gpu-restore.json" <<'PY' >&2 || true
import json, sys
r = json.load(open(sys.argv[1]))
print("restore_ratio", r.get("restore_ratio"), "passed", r.get("passed"), r.get("failures"))
print("breakdown", json.dumps(r.get("figures", {}).get("breakdown")))
PY
step "bench rc=$bench; report in $OUT/gpu-restore.json"

[ "$tests" = 0 ] && [ "$gpu_ran" = yes ] && [ "$bench" = 0 ]
