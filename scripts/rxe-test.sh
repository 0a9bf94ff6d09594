#!/usr/bin/env bash
# rxe-test.sh -- `make rxe-test`: build mptx's verbs test binaries and the
# mptx command on this host, boot the Soft-RoCE VM (test/rxe/vm.sh) and run
# them there against real rdma_rxe devices (test/rxe/job.sh). Needs root.
# Exits with the job's status; results land in .rxe-share/results.
#
#   MPTX_RXE_RUN=REGEXP   run only the matching tests (go test -run)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
[ "$(id -u)" = 0 ] || { echo "rxe-test: needs root (qemu with 9p passthrough of /, apt-get)" >&2; exit 1; }
bash scripts/deps.sh
SHARE=$PWD/.rxe-share   # under the repo, not /tmp: the guest sees the host root, but its /tmp is its own
rm -rf "$SHARE/bin" "$SHARE/results"
mkdir -p "$SHARE/bin"
T0=$EPOCHREALTIME
export CGO_ENABLED=1
go build -o "$SHARE/bin/mptx" ./cmd/mptx
for pkg in ./qp/verbs ./test/rxe; do
  ls "$pkg"/*_test.go >/dev/null 2>&1 || continue
  go test -c -o "$SHARE/bin/$(basename "$pkg").test" "$pkg"
done
echo "rxe-test: built in $(awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')s"
export MPTX_RXE_SHARE=$SHARE
# The host's load while the VM runs (TCG throughput follows it): sampled
# every 5 s into the share, where the throughput tests quote it.
: >"$SHARE/host-load.txt"
( while :; do echo "$(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)" >>"$SHARE/host-load.txt"; sleep 5; done ) &
sampler=$!
trap 'kill $sampler 2>/dev/null || true' EXIT
rc=0
bash test/rxe/vm.sh test/rxe/job.sh "${MPTX_RXE_RUN:-}" || rc=$?
[ -f "$SHARE/results/summary.txt" ] && cat "$SHARE/results/summary.txt"
cat "$SHARE/vm-timing.txt" 2>/dev/null || true
awk '{n++; s+=$2; if ($2>m) m=$2} END {if (n) printf "host load (1-min average) during the run: mean %.1f, max %.1f over %d samples\n", s/n, m, n}' "$SHARE/host-load.txt"
exit $rc
