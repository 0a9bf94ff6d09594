package verbs

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mptx-dev/mptx/internal/sysfstest"
)

func TestReadTopologySynthetic(t *testing.T) {
	root := t.TempDir()
	sysfstest.TwoSocket(root)
	topo, err := ReadTopology(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []Placement{
		{Device: "mlx5_0", NUMANode: 0, PCIAddr: "0000:03:00.0", HostBridge: "pci0000:00", PCIPath: []string{"0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"}, Via: "device", Netdevs: []string{"ens1f0"}},
		{Device: "mlx5_1", NUMANode: 0, PCIAddr: "0000:05:00.0", HostBridge: "pci0000:00", PCIPath: []string{"0000:00:02.0", "0000:05:00.0"}, Via: "device", Netdevs: []string{"ens2f0"}},
		{Device: "mlx5_2", NUMANode: 1, PCIAddr: "0000:81:00.0", HostBridge: "pci0000:80", PCIPath: []string{"0000:80:01.0", "0000:81:00.0"}, Via: "device", Netdevs: []string{"ens3f0"}},
		{Device: "mlx5_3", NUMANode: 1, PCIAddr: "0000:81:00.1", HostBridge: "pci0000:80", PCIPath: []string{"0000:80:01.0", "0000:81:00.1"}, Via: "device", Netdevs: []string{"ens3f1"}},
		{Device: "rxe0", NUMANode: 0, PCIAddr: "0000:00:03.0", HostBridge: "pci0000:00", PCIPath: []string{"0000:00:03.0"}, Via: "netdev eth0", Netdevs: []string{"eth0"}},
		{Device: "rxe1", NUMANode: -1, Netdevs: []string{"veth0"}},
	}
	if !reflect.DeepEqual(topo.Devices, want) {
		for i := range max(len(want), len(topo.Devices)) {
			var g, w Placement
			if i < len(topo.Devices) {
				g = topo.Devices[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("device %d:\n got %+v\nwant %+v", i, g, w)
			}
		}
	}
	if want := []NUMANode{{0, "0-15"}, {1, "16-31"}}; !reflect.DeepEqual(topo.Nodes, want) {
		t.Errorf("Nodes = %v, want %v", topo.Nodes, want)
	}
	if got := switchGroups(topo.Devices); !reflect.DeepEqual(got, []string{"-", "-", "A", "A", "-", "-"}) {
		t.Errorf("switchGroups = %v, want mlx5_2 and mlx5_3 (one card) grouped", got)
	}
	hb, path, numa, err := PCIePath(root, sysfstest.GPU)
	if err != nil || hb != "pci0000:00" || numa != 0 || len(path) != 4 {
		t.Fatalf("PCIePath(GPU) = %q %v %d %v", hb, path, numa, err)
	}
	if _, _, _, err := PCIePath(root, "0000:ff:00.0"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("PCIePath of a missing function = %v", err)
	}
	if _, _, _, err := PCIePath(root, "gpu0"); err == nil || !strings.Contains(err.Error(), "want domain:bus:device.function") {
		t.Errorf("PCIePath(\"gpu0\") = %v", err)
	}
	// No sysfs at all: an empty topology, no error.
	empty, err := ReadTopology(filepath.Join(root, "nowhere"))
	if err != nil || len(empty.Devices) != 0 {
		t.Errorf("ReadTopology(missing) = %+v, %v", empty, err)
	}
}

func TestPCIeRelation(t *testing.T) {
	sw := []string{"0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"}
	gpu := []string{"0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:04:00.0"}
	other := []string{"0000:00:02.0", "0000:05:00.0"}
	fn0 := []string{"0000:80:01.0", "0000:81:00.0"}
	fn1 := []string{"0000:80:01.0", "0000:81:00.1"}
	for _, tc := range []struct {
		hbA  string
		a    []string
		nA   int
		hbB  string
		b    []string
		nB   int
		want PCIeRelation
	}{
		{"pci0000:00", sw, 0, "pci0000:00", gpu, 0, PCIeSwitch},
		{"pci0000:00", sw, 0, "pci0000:00", other, 0, PCIeHostBridge},
		{"pci0000:80", fn0, 1, "pci0000:80", fn1, 1, PCIeSwitch},
		{"pci0000:00", sw, 0, "pci0000:80", fn0, 1, PCIeSystem},
		{"pci0000:00", sw, 0, "pci0000:40", fn0, 0, PCIeNode},
		{"pci0000:00", sw, -1, "pci0000:40", fn0, 0, PCIeNode},
		{"pci0000:00", nil, 0, "pci0000:00", sw, 0, PCIeUnknown},
	} {
		if got := pcieRelation(tc.hbA, tc.a, tc.nA, tc.hbB, tc.b, tc.nB); got != tc.want {
			t.Errorf("pcieRelation(%s %v, %s %v) = %v, want %v", tc.hbA, tc.a, tc.hbB, tc.b, got, tc.want)
		}
	}
}

const testCluster = `
version: 1
hosts:
  - name: node-a
    addresses: [192.0.2.10]
    nics:
      - {device: mlx5_0, rail: r0, switch: leaf0, address: 10.0.0.1}
      - {device: mlx5_1, rail: r1}
      - {device: mlx5_2, rail: r2}
      - {device: mlx5_3, rail: r3}
      - {device: rxe0, rail: r1}
  - name: node-b
    addresses: [192.0.2.11]
    nics:
      - {device: mlx5_0, rail: r0, switch: leaf0}
      - {device: mlx5_1, rail: r1}
      - {device: mlx5_5, rail: r1}
`

func mustCluster(t *testing.T, s string) *Cluster {
	t.Helper()
	c, err := ParseCluster([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func choices(t *testing.T, topo *Topology, q PathQuery) string {
	t.Helper()
	cs, err := ChoosePaths(topo, q)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, c := range cs {
		s = append(s, c.String())
	}
	return strings.Join(s, "; ")
}

// TestChoosePaths: path choice on the synthetic two-socket host.
func TestChoosePaths(t *testing.T) {
	root := t.TempDir()
	sysfstest.TwoSocket(root)
	topo, err := ReadTopology(root)
	if err != nil {
		t.Fatal(err)
	}
	hb, path, numa, err := PCIePath(root, sysfstest.GPU)
	if err != nil {
		t.Fatal(err)
	}
	gpu := Locality{NUMANode: numa, PCIAddr: sysfstest.GPU, PCIHostBridge: hb, PCIPath: path}
	c := mustCluster(t, testCluster)
	for _, tc := range []struct {
		name string
		q    PathQuery
		want string
	}{
		{"memory anywhere: one tier", PathQuery{Memory: Locality{NUMANode: -1}},
			"mlx5_0->? tier 0 (numa-local, unknown); mlx5_1->? tier 0 (numa-local, unknown); mlx5_2->? tier 0 (numa-local, unknown); mlx5_3->? tier 0 (numa-local, unknown); rxe0->? tier 0 (numa-local, unknown); rxe1->? tier 0 (numa-local, unknown)"},
		{"host memory on node 1: its NICs first; rxe1 has no node, so no penalty", PathQuery{Memory: Locality{NUMANode: 1}},
			"mlx5_2->? tier 0 (numa-local, unknown); mlx5_3->? tier 0 (numa-local, unknown); rxe1->? tier 0 (numa-local, unknown); mlx5_0->? tier 1 (numa-remote, unknown); mlx5_1->? tier 1 (numa-remote, unknown); rxe0->? tier 1 (numa-remote, unknown)"},
		{"GPU memory: the NIC on its switch, then its node", PathQuery{Memory: gpu, Candidates: []string{"mlx5_3", "mlx5_1", "mlx5_0", "mlx5_2"}},
			"mlx5_0->? tier 0 (pcie-switch, unknown); mlx5_1->? tier 1 (numa-local, unknown); mlx5_3->? tier 2 (numa-remote, unknown); mlx5_2->? tier 2 (numa-remote, unknown)"},
		{"cluster: rails pair NICs; crossed rails last", PathQuery{Memory: gpu, Cluster: c, Self: "node-a", Peer: "192.0.2.11"},
			"mlx5_0->mlx5_0 tier 0 (pcie-switch, same-switch); mlx5_1->mlx5_1 tier 1 (numa-local, same-rail); rxe0->mlx5_5 tier 1 (numa-local, same-rail); rxe1->? tier 1 (numa-local, unknown); mlx5_2->mlx5_0 tier 2 (numa-remote, crossed); mlx5_3->mlx5_1 tier 2 (numa-remote, crossed)"},
		{"cluster, memory on node 1: rail alignment comes before NUMA", PathQuery{Memory: Locality{NUMANode: 1}, Cluster: c, Self: "192.0.2.10", Peer: "node-b", Candidates: []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}},
			"mlx5_0->mlx5_0 tier 0 (numa-remote, same-switch); mlx5_1->mlx5_1 tier 1 (numa-remote, same-rail); mlx5_2->mlx5_5 tier 2 (numa-local, crossed); mlx5_3->mlx5_0 tier 2 (numa-local, crossed)"},
	} {
		if got := choices(t, topo, tc.q); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	cs, _ := ChoosePaths(topo, PathQuery{Memory: gpu})
	if got := Preferred(cs); !reflect.DeepEqual(got, []string{"mlx5_0"}) {
		t.Errorf("Preferred = %v, want [mlx5_0]", got)
	}
	for _, tc := range []struct {
		q    PathQuery
		want string
	}{
		{PathQuery{Candidates: []string{"mlx5_9"}}, `device "mlx5_9" is not in the topology (devices: mlx5_0, mlx5_1, mlx5_2, mlx5_3, rxe0, rxe1)`},
		{PathQuery{Cluster: c, Self: "node-z", Peer: "node-b"}, `this host "node-z" is not in the cluster topology (hosts: node-a, node-b)`},
		{PathQuery{Cluster: c, Self: "node-a", Peer: "10.9.9.9"}, `peer "10.9.9.9" is not in the cluster topology`},
	} {
		if _, err := ChoosePaths(topo, tc.q); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ChoosePaths(%+v) = %v, want an error containing %q", tc.q, err, tc.want)
		}
	}
	if _, err := ChoosePaths(&Topology{}, PathQuery{}); err == nil {
		t.Error("ChoosePaths on an empty topology succeeded")
	}
}

func TestParseCluster(t *testing.T) {
	c := mustCluster(t, testCluster)
	if h, ok := c.Host("10.0.0.1"); !ok || h.Name != "node-a" {
		t.Errorf("Host(NIC address 10.0.0.1) = %v, %v", h, ok)
	}
	if h, ok := c.Host("::ffff:192.0.2.11"); !ok || h.Name != "node-b" {
		t.Errorf("Host(IPv4-mapped 192.0.2.11) = %v, %v", h, ok)
	}
	if n, ok := c.Hosts[1].NIC("mlx5_5"); !ok || n.Rail != "r1" {
		t.Errorf("NIC(mlx5_5) = %+v, %v", n, ok)
	}
	// JSON is YAML too; numbers are fine as rail labels.
	j := mustCluster(t, `{"version": 1, "hosts": [{"name": "a", "nics": [{"device": "mlx5_0", "rail": 0}]}]}`)
	if j.Hosts[0].NICs[0].Rail != "0" {
		t.Errorf("rail 0 from JSON = %q, want \"0\"", j.Hosts[0].NICs[0].Rail)
	}
	for _, tc := range []struct{ file, want string }{
		{``, "the file is empty"},
		{`version: 2` + "\nhosts: []", "version: 2 (valid: 1)"},
		{`version: 1`, "hosts: empty"},
		{`{version: 1, hosts: [{nics: [{device: a, rail: r}]}]}`, "hosts[0].name: empty"},
		{`{version: 1, hosts: [{name: a, nics: [{device: x, rail: r}]}, {name: a, nics: [{device: x, rail: r}]}]}`, `hosts[1].name: "a" is also hosts[0].name`},
		{`{version: 1, hosts: [{name: a, nics: []}]}`, "hosts[0].nics: empty"},
		{`{version: 1, hosts: [{name: a, nics: [{rail: r}]}]}`, "hosts[0].nics[0].device: empty"},
		{`{version: 1, hosts: [{name: a, nics: [{device: x, rail: r}, {device: x, rail: s}]}]}`, `hosts[0].nics[1].device: "x" is also hosts[0].nics[0].device`},
		{`{version: 1, hosts: [{name: a, nics: [{device: x}]}]}`, "hosts[0].nics[0].rail: empty"},
		{`{version: 1, hosts: [{name: a, nics: [{device: x, rail: r, address: 10.0.0.300}]}]}`, `hosts[0].nics[0].address: "10.0.0.300" is not an IP address`},
		{`{version: 1, hosts: [{name: a, addresses: [10.0.0.1], nics: [{device: x, rail: r}]}, {name: b, nics: [{device: x, rail: r, address: 10.0.0.1}]}]}`, "hosts[1].nics[0].address: 10.0.0.1 is also hosts[0].addresses[0]"},
		{`{version: 1, hosts: [{name: a, nics: [{device: x, rail: r, speed: 400}]}]}`, `unknown field "speed"`},
		{`version: [1]`, "bad cluster topology"},
	} {
		_, err := ParseCluster([]byte(tc.file))
		if err == nil || !errors.Is(err, ErrCluster) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseCluster(%q) = %v, want ErrCluster containing %q", tc.file, err, tc.want)
		}
	}
	p := filepath.Join(t.TempDir(), "topo.yaml")
	os.WriteFile(p, []byte("version: 3\nhosts: []\n"), 0o644)
	if _, err := LoadCluster(p); err == nil || !strings.HasPrefix(err.Error(), p+": ") {
		t.Errorf("LoadCluster = %v, want the error prefixed with the path", err)
	}
}

func TestWriteTopology(t *testing.T) {
	root := t.TempDir()
	sysfstest.TwoSocket(root)
	topo, err := ReadTopology(root)
	if err != nil {
		t.Fatal(err)
	}
	topo.Devices[0].Addrs = []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24"), netip.MustParsePrefix("fe80::1/64")}
	var sb strings.Builder
	if err := WriteTopology(&sb, topo, mustCluster(t, testCluster), "node-a"); err != nil {
		t.Fatal(err)
	}
	want := `DEVICE  NUMA             PCI           SWITCH  NETDEV  ADDRESSES               RAIL  LEAF   PCIE PATH
mlx5_0  0                0000:03:00.0  -       ens1f0  10.0.0.1/24,fe80::1/64  r0    leaf0  pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0
mlx5_1  0                0000:05:00.0  -       ens2f0  -                       r1    -      pci0000:00/0000:00:02.0/0000:05:00.0
mlx5_2  1                0000:81:00.0  A       ens3f0  -                       r2    -      pci0000:80/0000:80:01.0/0000:81:00.0
mlx5_3  1                0000:81:00.1  A       ens3f1  -                       r3    -      pci0000:80/0000:80:01.0/0000:81:00.1
rxe0    0 (netdev eth0)  0000:00:03.0  -       eth0    -                       r1    -      pci0000:00/0000:00:03.0
rxe1    -                -             -       veth0   -                       -     -      -
NUMA: node0 cpus 0-15; node1 cpus 16-31
`
	if got := sb.String(); got != want {
		t.Errorf("WriteTopology:\n%s\nwant:\n%s", got, want)
	}
}
