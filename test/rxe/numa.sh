#!/usr/bin/env bash
# numa.sh -- Soft-RoCE on two emulated NUMA nodes: boots the rxe VM
# (test/rxe/vm.sh) with two NUMA nodes and a virtio-net NIC on a PCI
# expander bridge of each (qemu's pxb device carries the node to the
# guest's ACPI tables, so the NICs' numa_node reads 0 and 1), and runs
# numa_job.sh there: the placement mptx reads and `mptx devices`. Root.
# Results land in .rxe-share/results (devices.txt, topology.log).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=/usr/local/go/bin:$PATH
[ "$(id -u)" = 0 ] || { echo "numa.sh: needs root (see test/rxe/vm.sh)" >&2; exit 1; }
SHARE=$PWD/.rxe-share
rm -rf "$SHARE/bin" "$SHARE/results"
mkdir -p "$SHARE/bin"
export CGO_ENABLED=1
go build -o "$SHARE/bin/mptx" ./cmd/mptx
go test -c -o "$SHARE/bin/verbs.test" ./qp/verbs
export MPTX_RXE_SHARE=$SHARE MPTX_RXE_MEM=2048 MPTX_RXE_SMP=2
export MPTX_RXE_QEMU_ARGS="-object memory-backend-ram,id=m0,size=1024M -object memory-backend-ram,id=m1,size=1024M \
 -numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1 \
 -device pxb,id=pxb0,bus_nr=32,numa_node=0,bus=pci.0 -device pxb,id=pxb1,bus_nr=64,numa_node=1,bus=pci.0 \
 -netdev hubport,id=n0,hubid=0 -device virtio-net-pci,netdev=n0,bus=pxb0,addr=0 \
 -netdev hubport,id=n1,hubid=0 -device virtio-net-pci,netdev=n1,bus=pxb1,addr=0"
rc=0
bash test/rxe/vm.sh test/rxe/numa_job.sh || rc=$?
cat "$SHARE/results/devices.txt" 2>/dev/null || true
exit $rc
