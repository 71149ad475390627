#!/usr/bin/env bash
# Runs the Mooncake Transfer Engine's RDMA path between two Managers on this host: `orbitkv bench peer` with
# `--transport mooncake-te` and `peer.mooncake-te.protocol=auto`, so that TE picks its RDMA transport (it does when it
# finds a verbs device), against iperf3 as the bench always does. It checks first that it can, and fails saying why.
#
# Needs:
#   - an RDMA device: an RDMA NIC (InfiniBand, RoCE, iWARP) with its driver loaded, so that it is listed under
#     /sys/class/infiniband; or soft-RoCE: a kernel with the rdma_rxe module and the `rdma` tool (iproute2), then
#     --soft-roce IFACE (as root) creates rxe device orbitkv_rxe0 on IFACE (an Ethernet interface with an IPv4
#     address; not lo) and removes it at the end;
#   - the Transfer Engine built with RDMA (native/mooncake-te/build.sh links libibverbs when libibverbs-dev is
#     installed; it is on Debian) in ~/.cache/orbitkv/mooncake-te/current;
#   - locked memory: RDMA pins registered memory, so `ulimit -l` must be unlimited or at least the pools' size;
#   - what `bench peer` needs anyway: etcd-server and iperf3 (installed when missing and root), Java 25.
#
# Usage: perf/rdma/te-rdma.sh [--check] [--soft-roce IFACE] [bench peer options...]
#   --check     stop after the checks (exit 0: this host can run the RDMA path)
# Exit status: 0 the run used RDMA and passed; 2 a prerequisite is missing; 3 TE did not choose RDMA; else the bench's.
#
# Test seams: ORBITKV_INFINIBAND_SYSFS (default /sys/class/infiniband), ORBITKV_MOONCAKE_LIB (the library to check).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
sysfs="${ORBITKV_INFINIBAND_SYSFS:-/sys/class/infiniband}"
lib="${ORBITKV_MOONCAKE_LIB:-$HOME/.cache/orbitkv/mooncake-te/current/lib/libtransfer_engine.so}"
check_only=0
soft_roce=""
bench_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check_only=1; shift ;;
    --soft-roce) soft_roce="${2:?--soft-roce needs an interface name}"; shift 2 ;;
    *) bench_args+=("$1"); shift ;;
  esac
done

missing() {
  echo "te-rdma: cannot run the Transfer Engine's RDMA path here: $*" >&2
  exit 2
}

created_rxe=""
cleanup() {
  if [ -n "$created_rxe" ]; then
    rdma link delete "$created_rxe" 2>/dev/null || echo "te-rdma: could not remove $created_rxe (rdma link delete $created_rxe)" >&2
  fi
}
trap cleanup EXIT

if [ -n "$soft_roce" ]; then
  [ "$(id -u)" = 0 ] || missing "--soft-roce needs root (modprobe rdma_rxe; rdma link add)"
  command -v rdma >/dev/null || missing "the rdma tool is not installed (apt-get install iproute2)"
  [ "$soft_roce" != lo ] || missing "soft-RoCE cannot use the loopback interface: name an Ethernet interface"
  [ -e "/sys/class/net/$soft_roce" ] || missing "no network interface $soft_roce"
  modprobe rdma_rxe 2>/dev/null || missing "this kernel has no rdma_rxe module (soft-RoCE): use a host with an RDMA NIC"
  rdma link add orbitkv_rxe0 type rxe netdev "$soft_roce" || missing "rdma link add orbitkv_rxe0 type rxe netdev $soft_roce failed"
  created_rxe=orbitkv_rxe0
fi

devices=()
if [ -d "$sysfs" ]; then
  for d in "$sysfs"/*; do
    [ -e "$d" ] && devices+=("$(basename "$d")")
  done
fi
if [ ${#devices[@]} -eq 0 ]; then
  missing "no RDMA device ($sysfs lists none). Needs an RDMA NIC with its driver, or soft-RoCE: a kernel with" \
    "rdma_rxe and, as root, $0 --soft-roce IFACE"
fi
echo "te-rdma: RDMA devices: ${devices[*]}" >&2

[ -f "$lib" ] || missing "the Transfer Engine is not built ($lib): run native/mooncake-te/build.sh"
if ! ldd "$lib" 2>/dev/null | grep -q libibverbs; then
  missing "$lib is not linked with libibverbs: rebuild it with libibverbs-dev installed (native/mooncake-te/build.sh)"
fi
locked="$(ulimit -l)"
if [ "$locked" != unlimited ] && [ "$locked" -lt $((1024 * 1024)) ]; then
  missing "locked memory is limited to ${locked} KiB (ulimit -l): RDMA pins registered pages; raise it (ulimit -l unlimited)"
fi
if [ "$check_only" = 1 ]; then
  echo "te-rdma: this host can run the RDMA path" >&2
  exit 0
fi

log="$(mktemp -t orbitkv-te-rdma.XXXXXX)"
echo "te-rdma: bench peer over TE with protocol auto; TE's log in $log" >&2
set +e
# TE says which transport it installed at INFO level ("Using RDMA transport"); the façade shows warnings only otherwise
GLOG_minloglevel=0 "$root/scripts/orbitkv" bench peer --transport mooncake-te --setting peer.mooncake-te.protocol=auto \
  "${bench_args[@]}" 2> >(tee "$log" >&2)
status=$?
set -e
if ! grep -q "Using RDMA transport" "$log"; then
  echo "te-rdma: the Transfer Engine did not choose RDMA (see 'Using ... transport' in $log): the figures are TCP's" >&2
  exit 3
fi
exit "$status"
