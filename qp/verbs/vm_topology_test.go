//go:build linux && cgo

package verbs

import (
	"os"
	"strings"
	"testing"
)

// TestVMTopology runs in the VM test/rxe/numa.sh boots: two emulated NUMA
// nodes, a virtio-net NIC on a PCI expander bridge of each, Soft-RoCE on
// both (MPTX_RXE_NUMA names the two rxe devices). mptx must place each on
// its NIC's node and PCI host bridge, and rank the one on the memory's
// node first.
func TestVMTopology(t *testing.T) {
	env := os.Getenv("MPTX_RXE_NUMA")
	if env == "" {
		t.Skip("needs Soft-RoCE on two emulated NUMA nodes: run test/rxe/numa.sh (as root; boots a qemu VM)")
	}
	names := strings.Split(env, ",")
	topo, err := ReadTopology(SysRoot)
	if err != nil {
		t.Fatal(err)
	}
	if err := topo.ReadAddrs(); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	if err := WriteTopology(&sb, topo, nil, ""); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", sb.String())
	if len(topo.Nodes) != 2 {
		t.Errorf("Nodes = %v, want two NUMA nodes", topo.Nodes)
	}
	nodeOf := map[int]string{}
	bridges := map[string]bool{}
	for _, n := range names {
		p, ok := topo.Device(n)
		if !ok {
			t.Fatalf("%s not in the topology", n)
		}
		if !strings.HasPrefix(p.Via, "netdev ") || p.PCIAddr == "" || p.HostBridge == "" || len(p.Addrs) == 0 {
			t.Errorf("%s: %+v; want the NUMA node and PCIe path of its virtio NIC, and its address", n, p)
		}
		if p.NUMANode < 0 {
			t.Errorf("%s: NUMA node unknown", n)
		}
		nodeOf[p.NUMANode] = n
		bridges[p.HostBridge] = true
	}
	if len(nodeOf) != 2 || len(bridges) != 2 {
		t.Fatalf("the two devices sit on nodes %v behind host bridges %v; want one each", nodeOf, bridges)
	}
	// libibverbs' view agrees (Devices reads the same placement).
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if p, ok := topo.Device(d.Name); ok && d.NUMANode != p.NUMANode {
			t.Errorf("Devices(): %s on node %d, topology says %d", d.Name, d.NUMANode, p.NUMANode)
		}
	}
	h, err := OpenHost(HostConfig{Devices: names, PoolSize: 4 << 20, HugePages: HugeNever})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for node, dev := range nodeOf {
		cs, err := ChoosePaths(topo, PathQuery{Candidates: names, Memory: Locality{NUMANode: node}})
		if err != nil {
			t.Fatal(err)
		}
		if got := Preferred(cs); len(got) != 1 || got[0] != dev {
			t.Errorf("memory on node %d: preferred %v, want [%s] (%v)", node, got, dev, cs)
		}
		hc, err := h.ChooseNICs(PathQuery{Memory: Locality{NUMANode: node}})
		if err != nil {
			t.Fatal(err)
		}
		if got := Preferred(hc); len(got) != 1 || got[0] != dev {
			t.Errorf("Host.ChooseNICs, memory on node %d: preferred %v, want [%s] (%v)", node, got, dev, hc)
		}
		t.Logf("memory on node %d: %v", node, hc)
	}
}
