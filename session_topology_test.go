package mptx_test

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/internal/sysfstest"
	"github.com/mptx-dev/mptx/qp/verbs"
)

func TestTopologyTCPPaths(t *testing.T) {
	root := t.TempDir()
	sysfstest.TwoSocket(root)
	topo, err := verbs.ReadTopology(root)
	if err != nil {
		t.Fatal(err)
	}
	addr := map[string]string{"mlx5_0": "10.0.0.1/24", "mlx5_1": "10.0.1.1/24", "mlx5_2": "10.0.2.1/24"}
	for i := range topo.Devices {
		if a, ok := addr[topo.Devices[i].Device]; ok {
			topo.Devices[i].Addrs = []netip.Prefix{netip.MustParsePrefix("fe80::1/64"), netip.MustParsePrefix(a)}
		}
	}
	cluster, err := verbs.ParseCluster([]byte(`version: 1
hosts:
  - {name: a, nics: [{device: mlx5_0, rail: r0}, {device: mlx5_1, rail: r1}, {device: mlx5_2, rail: r0}]}
  - {name: b, nics: [{device: mlx5_0, rail: r0, address: 10.0.0.2}, {device: mlx5_1, rail: r1, address: 10.0.1.2}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := verbs.ChoosePaths(topo, verbs.PathQuery{Memory: verbs.Locality{NUMANode: 0}, Cluster: cluster, Self: "a", Peer: "b", Candidates: []string{"mlx5_0", "mlx5_1", "mlx5_2"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := mptx.TopologyTCPPaths(topo, cs, cluster, "b", 2, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []mptx.TCPPath{
		{Local: "10.0.0.1", Remote: "10.0.0.2", NIC: 0}, {Local: "10.0.0.1", Remote: "10.0.0.2", NIC: 0},
		{Local: "10.0.1.1", Remote: "10.0.1.2", NIC: 1}, {Local: "10.0.1.1", Remote: "10.0.1.2", NIC: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("preferred tier: %+v, want %+v (choices %v)", got, want, cs)
	}
	all, err := mptx.TopologyTCPPaths(topo, cs, cluster, "b", 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[2] != (mptx.TCPPath{Local: "10.0.2.1", Remote: "10.0.0.2", NIC: 2}) {
		t.Errorf("all tiers: %+v; want mlx5_2 (node 1) last, to the peer's rail-0 NIC", all)
	}
	if _, err := mptx.TopologyTCPPaths(topo, cs, nil, "", 0, false); err == nil || !strings.Contains(err.Error(), "perNIC = 0") {
		t.Errorf("perNIC 0: %v", err)
	}
	bare, _ := verbs.ReadTopology(root)
	if _, err := mptx.TopologyTCPPaths(bare, cs, nil, "", 1, false); err == nil || !strings.Contains(err.Error(), "has an address") {
		t.Errorf("no addresses: %v", err)
	}
}
