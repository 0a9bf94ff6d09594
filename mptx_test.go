package mptx_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/mem"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// want returns transfer id's bytes as the memRig sends them.
func want(id multipath.TransferID, size units.Bytes) []byte {
	b := make([]byte, size)
	pattern(b, id)
	return b
}

func TestEndToEndRatesAndIntegrity(t *testing.T) {
	paths := []mem.PathConfig{
		{Rate: 40 * units.Gbps, NIC: 0}, {Rate: 20 * units.Gbps, NIC: 1}, {Rate: 10 * units.Gbps, NIC: 2}, {Rate: 10 * units.Gbps, NIC: 3},
	}
	// 256 one-MiB chunks: fine enough that chunk granularity at the tail
	// (where the congestion-aware policy keeps slow paths idle) moves the
	// split by less than the tolerance.
	const size = 256 * units.MiB
	r := newMemRig(t, paths, size, mptx.SenderConfig{Engine: multipath.Config{CC: "fixed", ChunkSize: units.MiB}})
	r.ship(1)
	if r.sent[1] != nil || r.recvd[1] != nil {
		t.Fatalf("sender %v, receiver %v", r.sent[1], r.recvd[1])
	}
	if !bytes.Equal(r.recv, want(1, size)) {
		t.Fatal("received tensor differs from the sent one")
	}
	var total units.Bytes
	for i := range paths {
		total += r.net.PathBytes(i)
	}
	want := []float64{0.5, 0.25, 0.125, 0.125}
	ideal := (80 * units.Gbps).TxTime(size)
	if el := r.doneAt[1].Sub(vtime.Epoch); el > ideal*11/10 {
		t.Errorf("completion %v, want within 10%% of the ideal %v", el, ideal)
	}
	for i := range paths {
		got := float64(r.net.PathBytes(i)) / float64(total)
		if d := got/want[i] - 1; d > 0.1 || d < -0.1 {
			t.Errorf("path %d carried %.3f of the bytes, want %.3f ±10%%", i, got, want[i])
		}
	}
}

func TestEndToEndPathDies(t *testing.T) {
	paths := []mem.PathConfig{
		{Rate: 10 * units.Gbps, NIC: 0}, {Rate: 10 * units.Gbps, NIC: 1, FailAt: vtime.Epoch.Add(8 * time.Millisecond)}, {Rate: 10 * units.Gbps, NIC: 2},
	}
	const size = 64 * units.MiB
	r := newMemRig(t, paths, size, mptx.SenderConfig{Engine: multipath.Config{CC: "dcqcn", ChunkSize: units.MiB}})
	r.ship(9)
	if r.sent[9] != nil || r.recvd[9] != nil {
		t.Fatalf("sender %v, receiver %v", r.sent[9], r.recvd[9])
	}
	if !bytes.Equal(r.recv, want(9, size)) {
		t.Fatal("received tensor differs from the sent one after a path died")
	}
	st := r.snd.Engine().Stats(1)
	if st.State == multipath.PathUp || st.Requeues == 0 || st.Reason != "retry-exceeded" {
		t.Errorf("path 1: %+v; want it out of use, with requeues, lost to retry-exceeded", st)
	}
	rs := r.rcv.Stats()
	if rs.Chunks != 64 {
		t.Errorf("receiver counted %d distinct chunks, want 64 (each exactly once)", rs.Chunks)
	}
	t.Logf("path 1 %s (%s), %d requeues; receiver duplicates %d", st.State, st.Reason, st.Requeues, rs.Duplicates)
}

// TestEndToEndMarkedPathCompletes is a regression test: with software
// pacing, a path whose pacing block had expired while its window was full
// kept returning that past instant as the engine's deadline, and the driver
// spun without progress. DCQCN on a CNP-marked path reproduced it.
func TestEndToEndMarkedPathCompletes(t *testing.T) {
	paths := []mem.PathConfig{{Rate: 40 * units.Gbps, NIC: 0, CNPEvery: 4 * units.MiB}, {Rate: 20 * units.Gbps, NIC: 1}, {Rate: 10 * units.Gbps, NIC: 2}}
	const size = 48 * units.MiB
	r := newMemRig(t, paths, size, mptx.SenderConfig{Engine: multipath.Config{CC: "dcqcn", ChunkSize: units.MiB}})
	r.ship(1)
	if r.sent[1] != nil || r.recvd[1] != nil {
		t.Fatalf("sender %v, receiver %v", r.sent[1], r.recvd[1])
	}
	if st := r.snd.Engine().Stats(0); st.CNPs == 0 {
		t.Errorf("path 0 saw no CNPs; the scenario lost its point")
	}
}

// TestEndToEndSlowPathFairShare: one path 10× slower than the other three
// carries at most its fair share (1/31 of the bytes), on the in-memory
// backend through the real driver.
func TestEndToEndSlowPathFairShare(t *testing.T) {
	paths := []mem.PathConfig{{Rate: 10 * units.Gbps, NIC: 0}, {Rate: 10 * units.Gbps, NIC: 1}, {Rate: 10 * units.Gbps, NIC: 2}, {Rate: units.Gbps, NIC: 3}}
	const size = 64 * units.MiB
	r := newMemRig(t, paths, size, mptx.SenderConfig{Engine: multipath.Config{CC: "dcqcn", ChunkSize: units.MiB}})
	r.ship(1)
	if r.sent[1] != nil || r.recvd[1] != nil {
		t.Fatalf("sender %v, receiver %v", r.sent[1], r.recvd[1])
	}
	if share := float64(r.net.PathBytes(3)) / float64(size); share > 1.0/31 {
		t.Errorf("the 1 Gb/s path carried %.4f of the bytes, want at most its fair share %.4f", share, 1.0/31)
	}
	ideal := (31 * units.Gbps).TxTime(size)
	if el := r.doneAt[1].Sub(vtime.Epoch); el > ideal*11/10 {
		t.Errorf("completion %v, want within 10%% of the ideal %v", el, ideal)
	}
}

// TestEndToEndECNShrinksShare: CNPs on one path (the backend counts one
// per 256 KiB it carries) make DCQCN cut that path's rate and the
// congestion-aware policy move chunks to the others. The paper's DCQCN
// (α raised by every CNP) is used: ConnectX's default α, updated every
// microsecond, barely moves with one CNP per 210 µs.
func TestEndToEndECNShrinksShare(t *testing.T) {
	share := func(cnpEvery units.Bytes) float64 {
		paths := []mem.PathConfig{{Rate: 10 * units.Gbps, NIC: 0, CNPEvery: cnpEvery}, {Rate: 10 * units.Gbps, NIC: 1}, {Rate: 10 * units.Gbps, NIC: 2}}
		const size = 48 * units.MiB
		r := newMemRig(t, paths, size, mptx.SenderConfig{Engine: multipath.Config{CC: "dcqcn", CCParams: cc.Params{"profile": "paper"}, ChunkSize: units.MiB}})
		r.ship(1)
		if r.sent[1] != nil || r.recvd[1] != nil {
			t.Fatalf("sender %v, receiver %v", r.sent[1], r.recvd[1])
		}
		return float64(r.net.PathBytes(0)) / float64(size)
	}
	clean, marked := share(0), share(256*units.KiB)
	if marked > clean*0.7 {
		t.Errorf("marked path share %.3f vs %.3f unmarked; want it to fall by more than 30%%", marked, clean)
	}
	t.Logf("path 0 share: %.3f unmarked, %.3f with a CNP per 256 KiB", clean, marked)
}

type traceRecorder struct{ b bytes.Buffer }

func (r *traceRecorder) Record(ev *multipath.Event) {
	fmt.Fprintf(&r.b, "%d %v t%d c%d p%d a%d %d %s\n", ev.Now, ev.Kind, ev.Transfer, ev.Chunk, ev.Path, ev.Attempt, ev.Bytes, ev.Reason)
}

// TestEndToEndDeterministic: the same seed gives a byte-identical engine
// event trace over the in-memory backend (random path policy, CNPs and a
// path failure included); another seed gives a different one.
func TestEndToEndDeterministic(t *testing.T) {
	trace := func(seed uint64) string {
		paths := []mem.PathConfig{{Rate: 10 * units.Gbps, NIC: 0, CNPEvery: units.MiB}, {Rate: 25 * units.Gbps, NIC: 1, FailAt: vtime.Epoch.Add(3 * time.Millisecond)},
			{Rate: 10 * units.Gbps, NIC: 2}, {Rate: 5 * units.Gbps, NIC: 3}}
		rec := &traceRecorder{}
		const size = 32 * units.MiB
		r := newMemRig(t, paths, size, mptx.SenderConfig{Engine: multipath.Config{CC: "dcqcn", Policy: multipath.Random, Seed: seed, Recorder: rec}})
		r.ship(1)
		if r.sent[1] != nil {
			t.Fatal(r.sent[1])
		}
		return rec.b.String()
	}
	a, b, c := trace(7), trace(7), trace(8)
	if a != b {
		t.Fatal("the same seed gave different event traces")
	}
	if a == c {
		t.Fatal("different seeds gave identical traces: the random policy ignores its seed")
	}
}
