#!/bin/bash
# job.sh -- the mptx rxe CI job; runs inside the VM (test/rxe/vm.sh) as root.
# Two wires (veth pairs, MTU 9000 -> IB MTU 4096), Soft-RoCE on every end:
#   path 0: rxe0 (va, 10.77.0.1) <-> rxe1 (vb, 10.77.0.2)
#   path 1: rxe2 (wa, 10.77.1.1) <-> rxe3 (wb, 10.77.1.2)
# The sender side is rxe0/rxe2, the receiver side rxe1/rxe3. Then it runs the
# test binaries scripts/rxe-test.sh built into $MPTX_RXE_SHARE/bin.
set -u
RUN=${1:-}   # optional go test -run regexp, from scripts/rxe-test.sh (MPTX_RXE_RUN)
source "$MPTX_RXE_SHARE/lib.sh"
OUT=$MPTX_RXE_SHARE/results
mkdir -p "$OUT"
echo "== guest $(uname -r), $(nproc) vCPU, $(awk '/MemTotal/{print int($2/1024)}' /proc/meminfo) MiB"
echo 96 >/proc/sys/vm/nr_hugepages   # 192 MiB of 2 MiB pages for the pools
rxe_pair va vb 10.77.0.1 10.77.0.2 9000 rxe0 rxe1 || exit 1
rxe_pair wa wb 10.77.1.1 10.77.1.2 9000 rxe2 rxe3 || exit 1
rdma link show
export MPTX_RXE_SENDER=rxe0,rxe2 MPTX_RXE_RECEIVER=rxe1,rxe3 MPTX_RXE_WIRES=va,wa
export MPTX_RXE_ADDRS=10.77.0.1,10.77.1.1 MPTX_RXE_PEER_ADDRS=10.77.0.2,10.77.1.2
export MPTX_BIN=$MPTX_RXE_SHARE/bin/mptx MPTX_RXE_OUT=$OUT
rc=0
for t in "$MPTX_RXE_SHARE"/bin/*.test; do
  echo "=== $(basename "$t") (uptime $(uptime_s)s)"
  # Every test and the VM microbenchmarks (50 iterations); with RUN, the
  # matching tests and benchmarks, each benchmark a single iteration.
  (cd "$OUT" && "$t" -test.v -test.count=1 -test.timeout=40m ${RUN:+-test.run "$RUN"} \
     -test.bench "${RUN:-BenchmarkVM}" -test.benchtime "$([ -n "$RUN" ] && echo 1x || echo 50x)") 2>&1 | tee "$OUT/$(basename "$t").log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  # The throughput comparisons with ib_write_bw: benchmarks (a speed target
  # is reported, never asserted in a test), one operation of three rounds.
  if [ -z "$RUN" ] && "$t" -test.list 'BenchmarkPerftest' | grep -q .; then
    echo "=== $(basename "$t") perftest benchmarks (uptime $(uptime_s)s)"
    (cd "$OUT" && "$t" -test.v -test.run '^$' -test.bench 'BenchmarkPerftest' -test.benchtime 1x -test.timeout=20m) 2>&1 \
      | tee "$OUT/$(basename "$t").perftest.log"
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  fi
done
echo "== job done (uptime $(uptime_s)s), status $rc"
exit $rc
