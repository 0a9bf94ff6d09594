#!/usr/bin/env bash
# Builds the Jaeger all-in-one binary that telemetry's end-to-end test runs
# (telemetry/jaeger_e2e_test.go), once, into a cache directory, and prints
# its path on stdout.
#
#   scripts/jaeger.sh            build if needed, print the path
#   scripts/jaeger.sh --cached   print the path if already built; else exit 3
#                                without building (what `go test` uses, so a
#                                plain offline `go test ./...` never downloads)
#
# `go install github.com/jaegertracing/jaeger/cmd/jaeger@VERSION` is refused
# (Jaeger's go.mod has replace directives), so the binary is built in a
# throwaway module with `go get -tool`, keeping Jaeger's several hundred
# dependencies out of mptx's go.mod. Cold: about 6 minutes on 2 cores, a
# ~120 MB binary; later calls return the cached path at once.
#
# Environment:
#   MPTX_JAEGER_VERSION  Jaeger version (default v1.76.0)
#   MPTX_CACHE           cache directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/mptx)
set -euo pipefail
export PATH=/usr/local/go/bin:$PATH
version=${MPTX_JAEGER_VERSION:-v1.76.0}
cache=${MPTX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mptx}
bin=$cache/jaeger-$version
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
if [ "${1:-}" = "--cached" ]; then
  echo "jaeger.sh: $bin not built yet (run scripts/jaeger.sh or make jaeger)" >&2
  exit 3
fi
mkdir -p "$cache"
work=$(mktemp -d "${TMPDIR:-/tmp}/mptx-jaeger.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "jaeger.sh: building Jaeger $version into $bin (cold build: several minutes)" >&2
(
  cd "$work"
  go mod init mptx.local/jaegerbuild >/dev/null 2>&1
  GOFLAGS=-mod=mod go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$version" >&2
  GOFLAGS=-buildvcs=false go build -trimpath -o "$bin.tmp.$$" github.com/jaegertracing/jaeger/cmd/jaeger >&2
)
mv -f "$bin.tmp.$$" "$bin"
echo "$bin"
