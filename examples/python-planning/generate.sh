#!/usr/bin/env bash
# Generates the Python code of agentmesh's protos into OUT (default: ./gen beside this script),
# for the Python planning stage and the Python client: every file of proto/ plus the two
# third-party protos of examples/proto (google.rpc.Status, for the StageError detail, and the
# gRPC health service). Needs protoc with the well-known types (Debian: protobuf-compiler and
# libprotobuf-dev) and grpc_python_plugin (Debian: protobuf-compiler-grpc).
#
#   ./generate.sh [OUT]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$here/gen}"

for tool in protoc grpc_python_plugin; do
	command -v "$tool" >/dev/null || {
		echo "generate.sh: $tool not found (Debian: apt-get install protobuf-compiler libprotobuf-dev protobuf-compiler-grpc)" >&2
		exit 1
	}
done

mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$root"
mapfile -t agentmesh < <(cd proto && find agentmesh -name '*.proto' | LC_ALL=C sort)
protoc -I proto -I examples/proto \
	--plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" \
	--python_out="$out" --grpc_python_out="$out" \
	"${agentmesh[@]}" google/rpc/status.proto grpc_health/v1/health.proto
echo "generated Python code in $out"
