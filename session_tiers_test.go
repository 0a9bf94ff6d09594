package mptx_test

import (
	"reflect"
	"testing"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/internal/sysfstest"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/mem"
	"github.com/mptx-dev/mptx/qp/verbs"
	"github.com/mptx-dev/mptx/units"
)

// TestTieredPathsFromRanking: on the synthetic two-socket host, memory on
// node 0 ranks mlx5_0 and mlx5_1 (node 0) in tier 0 and mlx5_2 and mlx5_3
// (node 1) in tier 1; each path of a connection over them gets its NIC's
// tier, a device the ranking does not name the tier after the last, and
// the rest of the path's configuration is what NewSender would fill.
func TestTieredPathsFromRanking(t *testing.T) {
	root := t.TempDir()
	sysfstest.TwoSocket(root)
	topo, err := verbs.ReadTopology(root)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := verbs.ChoosePaths(topo, verbs.PathQuery{Memory: verbs.Locality{NUMANode: 0}, Candidates: []string{"mlx5_2", "mlx5_0", "mlx5_3", "mlx5_1"}})
	if err != nil {
		t.Fatal(err)
	}
	var infos []qp.PathInfo
	for i, d := range []string{"mlx5_0", "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "rxe9"} {
		infos = append(infos, qp.PathInfo{QPN: uint32(0x40 + i), Device: d, NIC: i / 2, LineRate: 100 * units.Gbps, MTU: 4096, Hops: 3})
	}
	paths, err := mptx.TieredPaths(infos, cs)
	if err != nil {
		t.Fatal(err)
	}
	var tiers []int
	for _, p := range paths {
		tiers = append(tiers, p.Tier)
	}
	if want := []int{0, 0, 0, 1, 1, 2}; !reflect.DeepEqual(tiers, want) {
		t.Errorf("tiers %v, want %v (ranking %v)", tiers, want, cs)
	}
	want := multipath.PathConfig{Name: "mlx5_2/qp67", NIC: 1, LineRate: 100 * units.Gbps, MTU: 4096, Hops: 3, Tier: 1}
	if paths[3] != want {
		t.Errorf("path 3: %+v, want %+v", paths[3], want)
	}
	if _, err := multipath.New(multipath.Config{Paths: paths}); err != nil {
		t.Errorf("the engine refuses the tiered paths: %v", err)
	}
}

// TestTieredFallback: a driver over qp/mem whose two paths on NIC mem0 are
// preferred (tier 0) and whose two on mem1 are the fall-back (tier 1)
// ships a tensor on mem0 alone; when both mem0 paths fail, the next tensor
// is shipped whole over mem1 instead of failing, its bytes checked at the
// receiver.
func TestTieredFallback(t *testing.T) {
	pcs := []mem.PathConfig{{Rate: 10 * units.Gbps, NIC: 0}, {Rate: 10 * units.Gbps, NIC: 0}, {Rate: 10 * units.Gbps, NIC: 1}, {Rate: 10 * units.Gbps, NIC: 1}}
	probe, err := mem.New(mem.Config{Paths: pcs})
	if err != nil {
		t.Fatal(err)
	}
	ranking := []verbs.PathChoice{{Device: "mem0", Tier: 0}, {Device: "mem1", Tier: 1}}
	paths, err := mptx.TieredPaths(probe.Conn().Paths(), ranking)
	if err != nil {
		t.Fatal(err)
	}
	r := newMemRig(t, pcs, 8*units.MiB, mptx.SenderConfig{Engine: multipath.Config{Paths: paths}})
	r.ship(1)
	eng := r.snd.Engine()
	var b [4]units.Bytes
	for i := range b {
		b[i] = eng.Stats(i).Bytes
	}
	if b[2] != 0 || b[3] != 0 || b[0]+b[1] != 8*units.MiB {
		t.Errorf("bytes per path %v: want the 8 MiB on the tier-0 paths (mem0)", b)
	}
	r.net.Fail(0)
	r.net.Fail(1)
	r.ship(2)
	if err := r.sent[2]; err != nil {
		t.Fatalf("transfer 2 failed with its preferred paths down: %v", err)
	}
	if err := r.recvd[2]; err != nil {
		t.Fatalf("transfer 2 at the receiver: %v", err)
	}
	for _, msg := range r.bad {
		t.Error(msg)
	}
	for i := range b {
		b[i] = eng.Stats(i).Bytes - b[i]
	}
	if b[2]+b[3] != 8*units.MiB {
		t.Errorf("transfer 2's bytes per path %v: want all 8 MiB on mem1", b)
	}
	t.Logf("transfer 2 bytes per path %v", b)
}
