#!/usr/bin/env bash
# Regenerates orbitkv/_proto/engine_pb2.py and engine_pb2_grpc.py from protocol/src/main/proto/engine.proto with
# Debian's protoc (protobuf-compiler) and gRPC Python plugin (protobuf-compiler-grpc). The proto is mapped to the
# import path orbitkv/_proto/engine.proto so the generated gRPC module imports its messages from the package.
# tests/test_stubs.py checks that the checked-in modules describe exactly what engine.proto says.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$here}"
command -v protoc >/dev/null || { echo "protoc missing: apt-get install protobuf-compiler" >&2; exit 1; }
plugin="$(command -v grpc_python_plugin || true)"
[ -n "$plugin" ] || { echo "grpc_python_plugin missing: apt-get install protobuf-compiler-grpc" >&2; exit 1; }
protoc "-Iorbitkv/_proto=$root/protocol/src/main/proto" \
  "--python_out=$out" "--grpc_out=$out" "--plugin=protoc-gen-grpc=$plugin" \
  "orbitkv/_proto/engine.proto"
