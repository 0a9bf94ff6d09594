package sim_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/sim/topo"
	"github.com/mptx-dev/mptx/units"
)

// testSeed returns the seed for randomised scenarios: TEST_SEED if set,
// else def; it is logged so that a failure can be replayed.
func testSeed(t *testing.T, def uint64) uint64 {
	t.Helper()
	s := def
	if v := os.Getenv("TEST_SEED"); v != "" {
		x, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("TEST_SEED=%q: %v", v, err)
		}
		s = x
	}
	t.Logf("TEST_SEED=%d", s)
	return s
}

type textTracer struct{ buf bytes.Buffer }

func (tt *textTracer) Trace(ev *sim.TraceEvent) {
	tt.buf.WriteString(ev.String())
	tt.buf.WriteByte('\n')
}

// detRun runs a scenario that exercises every source of randomness (ECMP
// seeds, UDP source ports, random loss, RED marking, NIC DCQCN, spraying
// off) and returns its trace and a dump of every counter.
func detRun(t *testing.T, seed uint64) []byte {
	t.Helper()
	w := sim.NewWorld(seed)
	tr := &textTracer{}
	w.SetTracer(tr)
	tp, err := topo.LeafSpine(w, topo.LeafSpineConfig{
		Common: topo.Common{ECNByRate: true, NIC: sim.NICConfig{DCQCN: &cc.DCQCNConfig{}, AckTimeout: 8}},
		Leaves: 2, Spines: 2, HostsPerLeaf: 4,
	})
	mustT(t, err)
	a, _ := tp.Leaves[0].Ports()[4].Cable().Ends() // a leaf-spine cable
	mustT(t, a.SetLoss(0.002))
	for i := 0; i < 4; i++ {
		c, _, err := simqp.Connect(tp.Net, tp.Hosts[i], tp.Hosts[4+(i+1)%4], simqp.Options{QPs: 2})
		mustT(t, err)
		b := newBulk(w, c, 8*units.MiB, 512*units.KiB, 4)
		d := simqp.Drive(w, b)
		c.SetNotify(d.Notify)
	}
	w.Run()
	fmt.Fprintf(&tr.buf, "end %d events %d\n", w.Now(), w.Events())
	for _, s := range tp.Net.Switches {
		for _, p := range s.Ports() {
			fmt.Fprintf(&tr.buf, "%s %+v\n", p.Name(), p.Counters())
		}
	}
	for _, n := range tp.Net.NICs {
		fmt.Fprintf(&tr.buf, "%s %+v\n", n.Name(), n.Port().Counters())
		for _, q := range n.QPs() {
			fmt.Fprintf(&tr.buf, "  qp %#x sport %d %+v\n", q.QPN(), q.SrcPort(), q.Counters())
		}
	}
	return tr.buf.Bytes()
}

// TestDeterminism: the same seed gives a byte-identical trace and
// counters; another seed gives a different run.
func TestDeterminism(t *testing.T) {
	seed := testSeed(t, 77)
	a, b := detRun(t, seed), detRun(t, seed)
	if !bytes.Equal(a, b) {
		t.Fatalf("two runs with seed %d differ (%d and %d bytes of trace)", seed, len(a), len(b))
	}
	c := detRun(t, seed+1)
	if bytes.Equal(a, c) {
		t.Fatalf("seeds %d and %d gave identical runs", seed, seed+1)
	}
	t.Logf("%d bytes of trace, sha256 %x", len(a), sha256.Sum256(a))
	if !bytes.Contains(a, []byte(" drop ")) || !bytes.Contains(a, []byte(" nak ")) {
		t.Errorf("the determinism scenario saw no drops or NAKs: it does not exercise random loss")
	}
}

// TestParallelWorlds: worlds share no state, so runs in parallel
// goroutines give the same results as sequential ones.
func TestParallelWorlds(t *testing.T) {
	want := detRun(t, 5)
	res := make(chan []byte, 4)
	for i := 0; i < 4; i++ {
		go func() { res <- detRun(t, 5) }()
	}
	for i := 0; i < 4; i++ {
		if got := <-res; !bytes.Equal(got, want) {
			t.Fatal("a world run in parallel differs from the sequential run")
		}
	}
}

// TestSteadyStateNoAllocs: once pools and rings have grown, the whole
// per-packet path — NIC arbitration, segmentation, switching with PFC,
// ECN and INT, NIC DCQCN, ACKs, completions through simqp and the driver
// — allocates nothing.
func TestSteadyStateNoAllocs(t *testing.T) {
	w := sim.NewWorld(3)
	tp, err := topo.LeafSpine(w, topo.LeafSpineConfig{
		Common: topo.Common{ECNByRate: true, Switch: sim.SwitchConfig{INT: true}, NIC: sim.NICConfig{DCQCN: &cc.DCQCNConfig{}}},
		Leaves: 2, Spines: 2, HostsPerLeaf: 2,
	})
	mustT(t, err)
	for i := 0; i < 2; i++ {
		c, _, err := simqp.Connect(tp.Net, tp.Hosts[i], tp.Hosts[3-i], simqp.Options{QPs: 2})
		mustT(t, err)
		b := newBulk(w, c, 16*units.MiB, 256*units.KiB, 4)
		b.loop = true
		d := simqp.Drive(w, b)
		c.SetNotify(d.Notify)
	}
	w.RunFor(5 * sim.Millisecond) // warm up
	ev := w.Events()
	if a := testing.AllocsPerRun(20, func() { w.RunFor(100 * sim.Microsecond) }); a != 0 {
		t.Errorf("100 us of traffic allocates %v times; want 0", a)
	}
	t.Logf("%d events per 100 us", (w.Events()-ev)/21)
}

// TestINT: with INT on, each completion carries one stamp per switch
// egress of the path, in path order, with the port's rate and a timestamp
// between the post and the completion.
func TestINT(t *testing.T) {
	w := sim.NewWorld(1)
	tp, err := topo.LeafSpine(w, topo.LeafSpineConfig{
		Common: topo.Common{Switch: sim.SwitchConfig{INT: true}},
		Leaves: 2, Spines: 2, HostsPerLeaf: 1, UplinkRate: 400 * units.Gbps,
	})
	mustT(t, err)
	c, _, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[1], simqp.Options{})
	mustT(t, err)
	if n, err := c.PostSend(0, []qp.SendWR{{ID: 7, Op: qp.OpWrite, Len: 64 * units.KiB}}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	w.Run()
	var cs [4]qp.Completion
	n, _ := c.Poll(cs[:])
	if n != 1 {
		t.Fatalf("%d completions", n)
	}
	var hops [sim.MaxHops]qp.INTHop
	k := c.INT(7, hops[:])
	path := tp.Net.PathOf(c.QPs()[0])
	want := path[1:] // switch egresses
	if k != len(want) {
		t.Fatalf("INT returned %d hops, want %d (switch egresses on the path)", k, len(want))
	}
	for i, h := range hops[:k] {
		if h.Rate != want[i].Rate() {
			t.Errorf("hop %d rate %v, want %v (%s)", i, h.Rate, want[i].Rate(), want[i].Name())
		}
		if h.TS <= sim.Start.VTime() || h.TS > cs[0].At || (i > 0 && h.TS < hops[i-1].TS) {
			t.Errorf("hop %d timestamp %v out of order (completion at %v)", i, h.TS, cs[0].At)
		}
		if h.TxBytes <= 0 {
			t.Errorf("hop %d TxBytes %v", i, h.TxBytes)
		}
	}
	if c.INT(8, hops[:]) != 0 {
		t.Error("INT of an unknown id returned stamps")
	}
}

// TestRateLimit: a QP's hardware rate limit (ibv_modify_qp_rate_limit)
// caps its wire rate: goodput = limit × 4096/4178 (TestLineRate's
// efficiency), within 1 %.
func TestRateLimit(t *testing.T) {
	w := sim.NewWorld(1)
	tp, err := topo.Star(w, topo.StarConfig{Hosts: 2})
	mustT(t, err)
	c, _, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[1], simqp.Options{})
	mustT(t, err)
	const limit = 30 * units.Gbps
	mustT(t, c.SetRate(0, limit))
	if !c.Caps().HWRateLimit {
		t.Error("Caps().HWRateLimit = false")
	}
	const size, seg = 32 * units.MiB, units.MiB
	b := newBulk(w, c, size, seg, 4)
	d := simqp.Drive(w, b)
	c.SetNotify(d.Notify)
	w.Run()
	got := float64(b.done-b.first) * 8 / (b.doneAt - b.firstAt).Seconds()
	want := float64(seg) * 8 / wireTime(seg, sim.DefaultMTU, limit)
	t.Logf("rate limit %v: goodput %.3f Gb/s, predicted %.3f", limit, got/1e9, want/1e9)
	if !within(got, want, 0.01) {
		t.Errorf("goodput %.3f Gb/s, want %.3f ± 1%%", got/1e9, want/1e9)
	}
}

// TestMultiRail: a host with R NICs, each on its own plane, drives R
// paths at once: aggregate goodput = R × line rate × 4096/4178 within
// 1 %, and each plane carries exactly one path's traffic.
func TestMultiRail(t *testing.T) {
	const R = 4
	w := sim.NewWorld(1)
	tp, err := topo.MultiRail(w, topo.MultiRailConfig{Hosts: 4, Rails: R, HostsPerLeaf: 2, Spines: 2})
	mustT(t, err)
	if got := len(tp.Net.NICs); got != 4*R {
		t.Fatalf("%d NICs, want %d", got, 4*R)
	}
	c, _, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[3], simqp.Options{QPs: R})
	mustT(t, err)
	for i, p := range c.Paths() {
		if p.NIC != i {
			t.Errorf("path %d on rail %d, want %d", i, p.NIC, i)
		}
		for _, port := range tp.Net.PathOf(c.QPs()[i]) {
			if s := port.Switch(); s != nil && s.Name()[:2] != fmt.Sprintf("r%d", i) {
				t.Errorf("path %d crosses %s, outside plane %d", i, s.Name(), i)
			}
		}
	}
	const size, seg = 64 * units.MiB, units.MiB
	b := newBulk(w, c, size, seg, 4)
	d := simqp.Drive(w, b)
	c.SetNotify(d.Notify)
	w.Run()
	got := float64(b.done) * 8 / (b.doneAt - sim.Start).Seconds()
	want := R * float64(seg) * 8 / wireTime(seg, sim.DefaultMTU, tp.HostRate)
	t.Logf("%d rails: %.2f Gb/s, predicted %.2f (start-up RTT included)", R, got/1e9, want/1e9)
	if !within(got, want, 0.01) {
		t.Errorf("aggregate goodput %.2f Gb/s, want %.2f ± 1%%", got/1e9, want/1e9)
	}
}

// TestTopologies checks the builders' sizes against their formulas.
func TestTopologies(t *testing.T) {
	w := sim.NewWorld(1)
	ft, err := topo.FatTree(w, topo.FatTreeConfig{K: 8})
	mustT(t, err)
	// k³/4 hosts, 5k²/4 switches, k³/4 host cables + k³/2 switch cables
	if len(ft.Hosts) != 128 || len(ft.Net.Switches) != 80 || len(ft.Net.Cables) != 128+256 {
		t.Errorf("fat-tree(8): %d hosts, %d switches, %d cables; want 128, 80, 384", len(ft.Hosts), len(ft.Net.Switches), len(ft.Net.Cables))
	}
	// hosts in different pods are 6 cables apart, with (k/2)² equal-cost paths
	p := ft.Net.Path(ft.Hosts[0].NIC(0), ft.Hosts[127].NIC(0), 1)
	if len(p) != 6 {
		t.Errorf("fat-tree inter-pod path has %d hops, want 6", len(p))
	}
	if got := len(ft.Edges[0].RouteTo(ft.Hosts[127].NIC(0))); got != 4 {
		t.Errorf("edge switch has %d uplinks towards another pod, want k/2 = 4", got)
	}
	if got := len(ft.Aggs[0].RouteTo(ft.Hosts[127].NIC(0))); got != 4 {
		t.Errorf("aggregation switch has %d uplinks towards another pod, want k/2 = 4", got)
	}
	w2 := sim.NewWorld(1)
	ls, err := topo.LeafSpine(w2, topo.LeafSpineConfig{Leaves: 4, Spines: 2, HostsPerLeaf: 8, Oversubscription: 2})
	mustT(t, err)
	// 8 × 100G down, 2 uplinks: 2:1 means 200G each
	if ls.CoreRate != 200*units.Gbps {
		t.Errorf("leaf-spine 2:1 uplink rate %v, want 200Gbps", ls.CoreRate)
	}
	if _, err := topo.FatTree(sim.NewWorld(1), topo.FatTreeConfig{K: 5}); err == nil {
		t.Error("fat-tree with odd k accepted")
	}
	if _, err := topo.LeafSpine(sim.NewWorld(1), topo.LeafSpineConfig{Leaves: 3, Spines: 1, HostsPerLeaf: 1, Rails: 2}); err == nil {
		t.Error("leaf-spine with Leaves not a multiple of Rails accepted")
	}
	// rail-optimised leaf-spine: NIC r of each host on leaf g·R + r
	w3 := sim.NewWorld(1)
	ro, err := topo.LeafSpine(w3, topo.LeafSpineConfig{Leaves: 4, Spines: 2, HostsPerLeaf: 2, Rails: 2})
	mustT(t, err)
	for _, h := range ro.Hosts {
		for r := 0; r < 2; r++ {
			g := h.Index() / 2
			if sw := h.NIC(r).Port().Remote().Switch(); sw != ro.Leaves[g*2+r] {
				t.Errorf("%s attached to %s, want %s", h.NIC(r).Name(), sw.Name(), ro.Leaves[g*2+r].Name())
			}
		}
	}
}

// TestQueueSampler: the sampler records a port's queue and stops when the
// traffic ends.
func TestQueueSampler(t *testing.T) {
	w := sim.NewWorld(1)
	tp, err := topo.Star(w, topo.StarConfig{Hosts: 3})
	mustT(t, err)
	bott := tp.Hosts[2].NIC(0).Port().Remote()
	qs := sim.SampleQueues(w, 10*sim.Microsecond, bott)
	for i := 0; i < 2; i++ {
		c, _, err := simqp.Connect(tp.Net, tp.Hosts[i], tp.Hosts[2], simqp.Options{})
		mustT(t, err)
		b := newBulk(w, c, 4*units.MiB, units.MiB, 4)
		d := simqp.Drive(w, b)
		c.SetNotify(d.Notify)
	}
	w.Run()
	var peak units.Bytes
	for _, q := range qs.Q[0] {
		peak = max(peak, q)
	}
	end := w.Now()
	t.Logf("%d samples, peak %v, port max %v", len(qs.T), peak, bott.Counters().QueueMax)
	if len(qs.T) < 50 || qs.T[len(qs.T)-1] > end+10*sim.Microsecond {
		t.Errorf("%d samples, last at %v, run ended %v", len(qs.T), qs.T[len(qs.T)-1], end)
	}
	if peak == 0 || peak > bott.Counters().QueueMax {
		t.Errorf("sampled peak %v, port max %v", peak, bott.Counters().QueueMax)
	}
}
