#!/usr/bin/env bash
# GPU qualification of the CUDA restore route, for a machine with an NVIDIA GPU and driver. Run from anywhere:
#   perf/gpu/qualify.sh [--pages 128] [--page-bytes 2MiB] [--rounds 5] [--device 0]
# It builds what it needs (the fat jar, through scripts/orbitkv) and then:
#   1. the CUDA façade's GPU test (CudaRuntimeTest: pinned 2 MiB host->device->host round trip, IPC handle export);
#   2. orbitkv bench gpu-restore: restore throughput of 2 MiB pages from the Manager's pinned pool into engine device
#      memory imported through CUDA IPC from a second (engine) process, against cudaMemcpyAsync of the same bytes from
#      the same pinned pool in the same run, paired per round in alternating order (restore_ratio); both sides poisoned,
#      read back and compared with key-derived bytes in every round.
# Results go to perf/gpu/out/ (test log, the bench's JSON report); the last stdout line is the bench report.
# Exit status: 0 only when both steps passed. Without a GPU it stops at the first step, naming the cause.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$ROOT/perf/gpu/out"
mkdir -p "$OUT"
cd "$ROOT"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "qualify: no NVIDIA GPU/driver here (nvidia-smi missing or failing); the CUDA route cannot be qualified" >&2
  exit 3
fi
nvidia-smi -L | tee "$OUT/gpus.txt" >&2
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current \
  --format=csv | tee -a "$OUT/gpus.txt" >&2

echo "qualify: 1/2 CUDA façade tests on the GPU" >&2
# The round-trip test must run (not be skipped) on a GPU machine: fail if it was skipped.
./scripts/test -pl native -am -Dtest='CudaRuntimeTest,CuFileTest' -Dsurefire.failIfNoSpecifiedTests=false \
  2>&1 | tee "$OUT/native-tests.log" >&2
report="native/target/surefire-reports/TEST-io.orbitkv.nativeio.cuda.CudaRuntimeTest.xml"
# The GPU round trip must have run (not been skipped): its <testcase> element must carry no <skipped/> or failure.
if ! python3 - "$report" <<'PY'
import sys, xml.etree.ElementTree as ET
cases = {c.get("name"): c for c in ET.parse(sys.argv[1]).getroot().iter("testcase")}
gpu = [c for n, c in cases.items() if n.startswith("onAGpu")]
ok = len(gpu) == 1 and not any(gpu[0].find(t) is not None for t in ("skipped", "failure", "error"))
sys.exit(0 if ok else 1)
PY
then
  echo "qualify: CudaRuntimeTest's GPU round trip did not run and pass (see $OUT/native-tests.log)" >&2
  exit 1
fi

echo "qualify: 2/2 orbitkv bench gpu-restore" >&2
set +e
./scripts/orbitkv bench gpu-restore "$@" | tee "$OUT/bench.out"
status=${PIPESTATUS[0]}
set -e
tail -n 1 "$OUT/bench.out" > "$OUT/gpu-restore.json"
echo "qualify: bench exit $status; report in $OUT/gpu-restore.json" >&2
exit "$status"
