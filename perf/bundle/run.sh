#!/usr/bin/env bash
# Runs from a bundle made by perf/bundle/make.sh on a host without a JDK: unpacks the Java runtime and the fat jar into
# /tmp/ok, installs etcd (/usr/bin/etcd, when missing) and iperf3 (/usr/local/bin/iperf3), then the phases asked for.
# Usage: [OUT=dir] BUNDLE/run.sh PHASES   (PHASES: comma list of
#   info      the host: cores, kernel, memory, GPUs, huge-page settings
#   gpu       CudaRuntimeTest and CuFileTest (JUnit console), bench gpu-restore (128 pages, 10 rounds; 512 pages, 5)
#   variants  one `bench peer ARGS` per line `NAME ARGS` of BUNDLE/variants.txt, with per-thread CPU samples)
# Results (JSON reports, logs) land in OUT (default /tmp/out) as gpu.tgz, peer.tgz, cpu.tgz and steps.log.
set -uo pipefail
B="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"; mkdir -p "$O"
PHASES=",${1:-info,gpu,peer},"
T0=$(date +%s); el() { echo "[+$(( $(date +%s) - T0 ))s] $*" | tee -a "$O/steps.log" >&2; }
W=/tmp/ok; mkdir -p $W
el unpack
tar -C $W -xJf "$B/jre.tar.xz" & mkdir -p $W/app && tar -C $W/app -xJf "$B/app.tar.xz" & { [ -x /usr/bin/etcd ] || xz -dc "$B/bin/etcd.xz" > /usr/bin/etcd; } & wait
chmod +x /usr/bin/etcd
python3 - <<PY
import os, zipfile
root="$W/app"
with zipfile.ZipFile("$W/orbitkv.jar","w",zipfile.ZIP_STORED) as z:
    z.write(os.path.join(root,"META-INF/MANIFEST.MF"),"META-INF/MANIFEST.MF")
    for d,_,fs in os.walk(root):
        for f in fs:
            p=os.path.join(d,f); a=os.path.relpath(p,root)
            if a!="META-INF/MANIFEST.MF": z.write(p,a)
PY
mkdir -p /usr/local/lib/iperf && cp "$B/bin/libiperf.so.0" "$B/bin/libsctp.so.1" "$B/bin/iperf3" /usr/local/lib/iperf/
printf '#!/bin/sh\nLD_LIBRARY_PATH=/usr/local/lib/iperf exec /usr/local/lib/iperf/iperf3 "$@"\n' > /usr/local/bin/iperf3; chmod +x /usr/local/bin/iperf3
J=$W/jre/bin/java; JAR=$W/orbitkv.jar; FL="--enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow"
el "unpacked: $($J -version 2>&1 | head -1); iperf3 $(/usr/local/bin/iperf3 -v | head -1); etcd $(/usr/bin/etcd --version | head -1)"
CUDART=$(find /usr/local /opt /usr/lib -name 'libcudart.so.13*' 2>/dev/null | head -1)
CUFILE=$(find /usr/local /opt /usr/lib -name 'libcufile.so*' 2>/dev/null | grep -v rdma | head -1)
export LD_LIBRARY_PATH="$(dirname "${CUDART:-/x/x}"):$(dirname "${CUFILE:-/x/x}"):${LD_LIBRARY_PATH:-}"
if [[ $PHASES == *,info,* ]]; then
  { echo "nproc $(nproc)"; uname -a; free -g; lscpu | head -20; nvidia-smi -L; echo "cudart=$CUDART cufile=$CUFILE";
    cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/shmem_enabled; mount | grep -E 'shm|tmpfs' | head;
    cat /proc/sys/kernel/io_uring_disabled 2>/dev/null; } > "$O/info.txt" 2>&1
  el info; cat "$O/info.txt" | head -12 >&2
fi
if [[ $PHASES == *,gpu,* ]]; then
  mkdir -p $W/tc && tar -C $W/tc -xzf "$B/test/native-test-classes.tgz"
  el "gpu tests"
  timeout 150 $J $FL -jar "$B/test/junit-platform-console-standalone-1.14.1.jar" execute \
    --class-path "$W/tc/test-classes:$JAR:$B/test/assertj-core-3.27.3.jar" \
    --select-class io.orbitkv.nativeio.cuda.CudaRuntimeTest --select-class io.orbitkv.nativeio.cufile.CuFileTest \
    --details=tree --disable-banner > "$O/gpu-tests.txt" 2>&1; el "gpu tests rc=$?"; tail -30 "$O/gpu-tests.txt" >&2
  el "bench gpu-restore"
  timeout 200 $J $FL -jar $JAR bench gpu-restore --rounds=10 > "$O/gpu-restore.out" 2> "$O/gpu-restore.err"; el "gpu-restore rc=$?"
  tail -3 "$O/gpu-restore.err" >&2; tail -1 "$O/gpu-restore.out" >&2
  timeout 200 $J $FL -jar $JAR bench gpu-restore --pages=512 --pool-bytes=3GiB --rounds=5 > "$O/gpu-restore512.out" 2> "$O/gpu-restore512.err"; el "gpu-restore512 rc=$?"
  tail -1 "$O/gpu-restore512.out" >&2
fi
if [[ $PHASES == *,variants,* ]]; then
  # one bench peer per line of variants.txt: NAME ARGS...
  while read -r name args; do
    [ -z "$name" ] && continue
    el "bench peer $name: $args"
    # per-thread CPU of every java process, sampled while the bench runs (ticks; pid, tid, name)
    ( while sleep 2; do for p in $(pgrep -f 'orbitkv'); do for t in /proc/$p/task/*; do
        echo "$(date +%s) $p ${t##*/} $(cut -d' ' -f14,15 $t/stat 2>/dev/null) $(cat $t/comm 2>/dev/null | tr ' ' _)"; done; done; done ) > "$O/cpu-$name.txt" 2>/dev/null &
    S=$!
    timeout 150 $J $FL -jar $JAR bench peer $args > "$O/peer-$name.out" 2> "$O/peer-$name.err"; el "rc=$?"
    kill $S 2>/dev/null
    tail -1 "$O/peer-$name.out" | python3 -c 'import sys,json; d=json.loads(sys.stdin.read()); print({k:round(v,3) for k,v in d["ratios"].items()}, round(d["figures"]["plaintext_bytes_per_s"]/1e9,2), round(d["figures"]["tls_bytes_per_s"]/1e9,2), round(d["baselines"]["iperf3_bytes_per_s"]/1e9,2), round(d["baselines"]["iperf3_parallel_bytes_per_s"]/1e9,2), d["config"].get("transfer_loops"), d["config"].get("requester_verify_threads"))' >&2
  done < "$B/variants.txt"
  (cd "$O" && tar -czf cpu.tgz cpu-*.txt && rm -f cpu-*.txt && tar -czf peer.tgz peer-* && rm -f peer-*)
fi
(cd "$O" && tar -czf gpu.tgz $(ls gpu-* info.txt 2>/dev/null) && rm -f gpu-* info.txt)
el done
