#!/bin/bash
# numa_job.sh -- runs inside the VM that test/rxe/numa.sh boots: two NUMA
# nodes, a virtio-net NIC on a PCI expander bridge of each (pxb,
# numa_node=0 and 1), both on one qemu hub (one L2 segment). Soft-RoCE on
# each NIC, then the placement tests (TestVMTopology) and `mptx devices`
# as a user sees it.
set -u
source "$MPTX_RXE_SHARE/lib.sh"
OUT=$MPTX_RXE_SHARE/results
mkdir -p "$OUT"
echo "== guest $(uname -r), $(nproc) vCPU, NUMA nodes: $(ls -d /sys/devices/system/node/node* 2>/dev/null | xargs -n1 basename | tr '\n' ' ')"
nics=()
for d in /sys/class/net/*; do
  n=$(basename "$d")
  [ -e "$d/device" ] && [ "$(basename "$(readlink -f "$d/device/driver")")" = virtio_net ] && nics+=("$n")
done
echo "virtio NICs: ${nics[*]}"
[ ${#nics[@]} = 2 ] || { echo "want two virtio-net NICs"; exit 1; }
i=0
for n in "${nics[@]}"; do
  ip link set "$n" up && ip addr add "10.78.0.$((i + 1))/24" dev "$n" || exit 1
  rdma link add "rxe$i" type rxe netdev "$n" || exit 1
  rxe_wait_active "rxe$i" || exit 1
  echo "rxe$i on $n: numa_node $(cat "/sys/class/net/$n/device/numa_node" 2>/dev/null || echo ?), device $(readlink -f "/sys/class/net/$n/device")"
  echo "  /sys/class/infiniband/rxe$i/device: $(readlink -f "/sys/class/infiniband/rxe$i/device" 2>/dev/null || echo none)"
  i=$((i + 1))
done
export MPTX_RXE_NUMA=rxe0,rxe1 MPTX_RXE_OUT=$OUT MPTX_BIN=$MPTX_RXE_SHARE/bin/mptx
rc=0
{
  echo '$ mptx devices'; "$MPTX_BIN" devices
  echo; echo '$ mptx devices --numa 1'; "$MPTX_BIN" devices --numa 1
  echo; echo '$ mptx devices --numa 0'; "$MPTX_BIN" devices --numa 0
} 2>&1 | tee "$OUT/devices.txt"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
(cd "$OUT" && "$MPTX_RXE_SHARE/bin/verbs.test" -test.v -test.count=1 -test.run 'TestVMTopology') 2>&1 | tee "$OUT/topology.log"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
echo "== job done, status $rc"
exit $rc
