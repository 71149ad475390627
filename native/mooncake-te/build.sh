#!/usr/bin/env bash
# Builds Mooncake's Transfer Engine (libtransfer_engine.so + libasio.so, rpath $ORIGIN) from pinned sources into a
# cache outside target/ (~/.cache/orbitkv/mooncake-te/<commit>-<key>/), so `mvn clean` does not cost a rebuild, and
# points ~/.cache/orbitkv/mooncake-te/current at it: native/pom.xml packs current/lib into the native jar (and so the
# fat jar). Prints the build's directory (holding lib/ and include/) on its last line of stdout.
#
# Sources: ../shared/vendor/mooncake-<commit>-te-src.tar.gz when present (checksum verified), else a clone of the
# same pinned commits. Debian packages are installed when missing and root. RDMA (verbs) is compiled in when
# libibverbs is present; CUDA only when a driver (libcuda.so.1) is present, because a library linked with CUDA fails
# to load on a host without one.
#
# Staleness key: pinned commit + CMake options + this script's hash. A fresh cache returns at once.
# Usage: build.sh [--print-dir]   (--print-dir: print the cache directory this host would use, build nothing)
# Env: ORBITKV_MOONCAKE_JOBS (parallel compile jobs, default 2; the build runs under nice 19).
set -euo pipefail

MOONCAKE_COMMIT=3b5a594133958449a1feaf1c9e0fc1b553e34a28
YLT_COMMIT=7801bc9ad9021781f15217552214e325a1cf7373
TARBALL_SHA256=604db16ede731bc7938520ea0cad48cc3b888d8f72d19f3f4f4abfbaea6db260
MOONCAKE_URL=https://github.com/kvcache-ai/Mooncake.git
PACKAGES=(g++ cmake make python3-dev libibverbs-dev libgoogle-glog-dev libgflags-dev libjsoncpp-dev libnuma-dev
  libyaml-cpp-dev libasio-dev libcurl4-openssl-dev libunwind-dev patchelf)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
tarball="$repo/../shared/vendor/mooncake-${MOONCAKE_COMMIT:0:8}-te-src.tar.gz"
jobs="${ORBITKV_MOONCAKE_JOBS:-2}"
log() { echo "mooncake-te: $*" >&2; }

install_packages() {
  local missing=() p installed
  # One dpkg-query for all (a dpkg -s per package costs seconds on a loaded machine).
  installed="$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null | awk '$2 == "installed" {print $1}')"
  for p in "${PACKAGES[@]}"; do grep -qx -- "$p" <<<"$installed" || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing Debian packages: ${missing[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    log "missing packages (install them as root): ${missing[*]}"
    return 1
  fi
}

have_verbs() { [ -e /usr/include/infiniband/verbs.h ] || dpkg -s libibverbs-dev >/dev/null 2>&1; }
have_cuda_driver() { command -v nvcc >/dev/null 2>&1 && ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; }

# Packages first: whether verbs is compiled in depends on them, and so does the cache key.
if [ "${1:-}" != "--print-dir" ]; then install_packages; fi
use_cuda=OFF; have_cuda_driver && use_cuda=ON
use_verbs=OFF; have_verbs && use_verbs=ON
OPTIONS=(-DCMAKE_BUILD_TYPE=Release -DWITH_TE=ON -DWITH_STORE=OFF -DWITH_STORE_RUST=OFF -DWITH_P2P_STORE=OFF
  -DUSE_CUDA=$use_cuda -DUSE_ETCD=OFF -DUSE_REDIS=OFF -DUSE_HTTP=ON -DUSE_TCP=ON -DBUILD_UNIT_TESTS=OFF
  -DBUILD_EXAMPLES=OFF -DBUILD_BENCHMARK=OFF -DBUILD_SHARED_LIBS=ON)
# Mooncake compiles the RDMA transport unconditionally and links libibverbs; without it the build cannot succeed.
[ "$use_verbs" = ON ] || { log "libibverbs-dev is required (the TE always compiles its RDMA transport)"; [ "${1:-}" = "--print-dir" ] || exit 1; }

# The work tree depends only on the sources and options, so an interrupted build resumes where it stopped even
# after this script changed; the output also depends on the script (how it is packaged).
build_key="$( { echo "$MOONCAKE_COMMIT $YLT_COMMIT"; printf '%s\n' "${OPTIONS[@]}"; } | sha256sum | cut -c1-16)"
key="$( { echo "$build_key"; sha256sum < "$here/build.sh"; } | sha256sum | cut -c1-16)"
cache="$HOME/.cache/orbitkv/mooncake-te"
out="$cache/${MOONCAKE_COMMIT:0:12}-$key"
if [ "${1:-}" = "--print-dir" ]; then echo "$out"; exit 0; fi
fresh() { [ -f "$out/OK" ] && [ -f "$out/lib/libtransfer_engine.so" ] && [ -f "$out/lib/libasio.so" ]; }
# `current` is what the Maven build packs; swapped atomically so a concurrent build never sees it half-made.
publish() {
  [ "$(readlink "$cache/current" 2>/dev/null)" = "$(basename "$out")" ] && return 0
  ln -sfn "$(basename "$out")" "$cache/.current.$$" && mv -T "$cache/.current.$$" "$cache/current"
}
if fresh; then publish; echo "$out"; exit 0; fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9   # another build of the same cache (a parallel test run) finishes first; then ours is fresh
if fresh; then publish; echo "$out"; exit 0; fi

log "no fresh build in $cache: building the Transfer Engine (minutes; first run, or its pinned sources changed)"
work="$cache/.build-$build_key"   # kept until the build succeeds: a killed build resumes from its objects
rm -rf "$out"
start=$(date +%s)
if [ ! -f "$work/src.ok" ]; then
  rm -rf "$work"
  mkdir -p "$work/src" "$work/prefix"
  if [ -f "$tarball" ]; then
    log "sources: $tarball"
    echo "$TARBALL_SHA256  $tarball" | sha256sum -c --quiet - >&2
    tar xzf "$tarball" -C "$work/src"
  else
    log "sources: $MOONCAKE_URL at $MOONCAKE_COMMIT (no vendored tarball at $tarball)"
    command -v git >/dev/null || { log "git is required to clone the sources"; exit 1; }
    git -C "$work/src" init -q
    git -C "$work/src" remote add origin "$MOONCAKE_URL"
    git -C "$work/src" fetch -q --depth 1 origin "$MOONCAKE_COMMIT"
    git -C "$work/src" checkout -q FETCH_HEAD
    git -C "$work/src" submodule update -q --init --depth 1 extern/yalantinglibs
    got="$(git -C "$work/src/extern/yalantinglibs" rev-parse HEAD)"
    [ "$got" = "$YLT_COMMIT" ] || { log "yalantinglibs is at $got, expected $YLT_COMMIT"; exit 1; }
  fi
  touch "$work/src.ok"
else
  log "resuming the build in $work"
fi

nice_run() { nice -n 19 "$@"; }
if [ ! -f "$work/prefix.ok" ]; then
  log "installing yalantinglibs headers into $work/prefix (nice 19, -j$jobs)"
  nice_run cmake -S "$work/src/extern/yalantinglibs" -B "$work/ylt" -DCMAKE_INSTALL_PREFIX="$work/prefix" \
    -DBUILD_EXAMPLES=OFF -DBUILD_BENCHMARK=OFF -DBUILD_UNIT_TESTS=OFF >"$work/ylt.log" 2>&1 \
    || { tail -n 30 "$work/ylt.log" >&2; exit 1; }
  nice_run cmake --build "$work/ylt" -j"$jobs" >>"$work/ylt.log" 2>&1 && cmake --install "$work/ylt" >>"$work/ylt.log" 2>&1 \
    || { tail -n 30 "$work/ylt.log" >&2; exit 1; }
  touch "$work/prefix.ok"
fi

log "building the transfer engine (nice 19, -j$jobs, verbs=$use_verbs cuda=$use_cuda); log: $work/te.log"
nice_run cmake -S "$work/src" -B "$work/te" -DCMAKE_PREFIX_PATH="$work/prefix" -DPython3_EXECUTABLE="$(command -v python3)" \
  "${OPTIONS[@]}" >>"$work/te.log" 2>&1 || { tail -n 40 "$work/te.log" >&2; exit 1; }
nice_run make -C "$work/te" -j"$jobs" transfer_engine >>"$work/te.log" 2>&1 || { tail -n 40 "$work/te.log" >&2; exit 1; }

staged="$out.tmp"
rm -rf "$staged"
mkdir -p "$staged/lib" "$staged/include"
cp "$work/te/mooncake-transfer-engine/src/libtransfer_engine.so" "$staged/lib/"
asio="$(find "$work/te" -name 'libasio.so' -print -quit)"
cp "$asio" "$staged/lib/"
cp "$work/src/mooncake-transfer-engine/include/transfer_engine_c.h" "$staged/include/"
strip --strip-unneeded "$staged"/lib/*.so
patchelf --set-rpath '$ORIGIN' "$staged"/lib/*.so
{ echo "commit=$MOONCAKE_COMMIT"; echo "yalantinglibs=$YLT_COMMIT"; echo "verbs=$use_verbs"; echo "cuda=$use_cuda"
  echo "seconds=$(( $(date +%s) - start ))"; } > "$staged/OK"
mv "$staged" "$out"
publish
rm -rf "$work"
log "built in $(( $(date +%s) - start )) s: $out"
echo "$out"
