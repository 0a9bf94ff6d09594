package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mptx-dev/mptx/internal/sysfstest"
)

const devicesCluster = `version: 1
hosts:
  - name: node-a
    nics:
      - {device: mlx5_0, rail: r0, switch: leaf0}
      - {device: mlx5_1, rail: r1}
      - {device: mlx5_2, rail: r2}
      - {device: mlx5_3, rail: r3}
  - name: node-b
    addresses: [192.0.2.11]
    nics:
      - {device: mlx5_0, rail: r0, switch: leaf0}
      - {device: mlx5_1, rail: r1}
`

// TestDevicesSynthetic runs `mptx devices` on a synthetic two-socket
// sysfs tree: the placement table, and the ranking for GPU memory.
func TestDevicesSynthetic(t *testing.T) {
	root := t.TempDir()
	sysfstest.TwoSocket(root)
	cluster := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(cluster, []byte(devicesCluster), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := runDevices(&out, devicesOpts{sysfs: root, cluster: cluster, self: "node-a", peer: "192.0.2.11", pci: sysfstest.GPU, numa: -1, showChoices: true})
	if err != nil {
		t.Fatal(err)
	}
	want := `DEVICE  NUMA             PCI           SWITCH  NETDEV  ADDRESSES  RAIL  LEAF   PCIE PATH
mlx5_0  0                0000:03:00.0  -       ens1f0  -          r0    leaf0  pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0
mlx5_1  0                0000:05:00.0  -       ens2f0  -          r1    -      pci0000:00/0000:00:02.0/0000:05:00.0
mlx5_2  1                0000:81:00.0  A       ens3f0  -          r2    -      pci0000:80/0000:80:01.0/0000:81:00.0
mlx5_3  1                0000:81:00.1  A       ens3f1  -          r3    -      pci0000:80/0000:80:01.0/0000:81:00.1
rxe0    0 (netdev eth0)  0000:00:03.0  -       eth0    -          -     -      pci0000:00/0000:00:03.0
rxe1    -                -             -       veth0   -          -     -      -
NUMA: node0 cpus 0-15; node1 cpus 16-31

TIER  DEVICE  PEER    MEMORY       RAIL         USE
0     mlx5_0  mlx5_0  pcie-switch  same-switch  preferred
1     mlx5_1  mlx5_1  numa-local   same-rail    fallback
1     rxe0    -       numa-local   unknown      fallback
1     rxe1    -       numa-local   unknown      fallback
2     mlx5_2  mlx5_0  numa-remote  crossed      fallback
2     mlx5_3  mlx5_1  numa-remote  crossed      fallback
`
	if got := out.String(); got != want {
		t.Errorf("mptx devices:\n%s\nwant:\n%s", got, want)
	}
	// JSON: the same facts, machine-readable.
	out.Reset()
	if err := runDevices(&out, devicesOpts{sysfs: root, numa: 1, showChoices: true, asJSON: true}); err != nil {
		t.Fatal(err)
	}
	var j devicesOutput
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, out.String())
	}
	if len(j.Placement) != 6 || j.Placement[2].NUMANode != 1 || len(j.Nodes) != 2 || len(j.Choices) != 6 || j.Choices[0].Device != "mlx5_2" || j.Choices[0].Tier != 0 {
		t.Errorf("JSON = %+v", j)
	}
}

func TestDevicesBadInput(t *testing.T) {
	root := t.TempDir()
	sysfstest.TwoSocket(root)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("version: 1\nhosts:\n  - name: a\n    nics:\n      - {device: mlx5_0}\n"), 0o644)
	for _, tc := range []struct {
		o    devicesOpts
		want string
	}{
		{devicesOpts{sysfs: root, numa: -1, peer: "b", showChoices: true}, "--peer needs --cluster"},
		{devicesOpts{sysfs: root, numa: -1, cluster: bad}, "hosts[0].nics[0].rail: empty"},
		{devicesOpts{sysfs: root, numa: -1, pci: "0000:99:00.0", showChoices: true}, "--pci: verbs: PCI function 0000:99:00.0 not found"},
	} {
		err := runDevices(&bytes.Buffer{}, tc.o)
		var u usageError
		if err == nil || !errors.As(err, &u) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("runDevices(%+v) = %v, want a usage error containing %q", tc.o, err, tc.want)
		}
	}
	// An empty tree: no devices, said plainly.
	var out bytes.Buffer
	if err := runDevices(&out, devicesOpts{sysfs: t.TempDir(), numa: -1}); err != nil || !strings.Contains(out.String(), "no RDMA devices") {
		t.Errorf("empty tree: %v\n%s", err, out.String())
	}
}
