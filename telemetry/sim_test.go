package telemetry_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/telemetry"
	"github.com/mptx-dev/mptx/telemetry/analyze"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// pfcGlue is the simulator side of telemetry.PFCRecorder: a sim.Tracer
// that turns XOFF..XON episodes of the ports named in pathOf into
// RecordPFCPause calls for the path whose traffic those ports carry.
type pfcGlue struct {
	rec    telemetry.PFCRecorder
	pathOf map[string]int      // port name → path
	since  map[string]sim.Time // open pause episodes
	n      int
}

func (g *pfcGlue) Trace(ev *sim.TraceEvent) {
	path, ok := g.pathOf[ev.Where]
	if !ok {
		return
	}
	switch ev.Kind {
	case sim.TrPauseSent:
		if _, open := g.since[ev.Where]; !open {
			g.since[ev.Where] = ev.At
		}
	case sim.TrResumeSent:
		if at, open := g.since[ev.Where]; open {
			delete(g.since, ev.Where)
			g.rec.RecordPFCPause(path, at.VTime(), time.Duration((ev.At - at).VTime()))
			g.n++
		}
	}
}

// TestSimulatedBottleneck runs the engine inside the packet simulator over
// three rails, one of which crosses a deliberate bottleneck (a 25 Gb/s
// switch-to-receiver link where the others run at 100 Gb/s), records the
// spans stamped with virtual time, and checks that the analysis names
// that path as the bottleneck.
func TestSimulatedBottleneck(t *testing.T) {
	const rails, slow = 3, 1
	w := sim.NewWorld(7)
	net := sim.NewNetwork(w)
	src, err := net.AddHost("src", rails, sim.NICConfig{})
	if err != nil {
		t.Fatal(err)
	}
	dst, err := net.AddHost("dst", rails, sim.NICConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ecn := sim.ECNForRate(25 * units.Gbps)
	var sws []*sim.Switch
	for r := range rails {
		sw, err := net.AddSwitch(fmt.Sprintf("rail%d", r), sim.SwitchConfig{ECN: ecn, Buffer: 512 * units.KiB})
		if err != nil {
			t.Fatal(err)
		}
		sws = append(sws, sw)
		rate := 100 * units.Gbps
		if _, err := net.Link(src.NIC(r), sw, sim.LinkConfig{Rate: rate, Delay: sim.Microsecond}); err != nil {
			t.Fatal(err)
		}
		if r == slow {
			rate = 25 * units.Gbps // the deliberate bottleneck
		}
		if _, err := net.Link(sw, dst.NIC(r), sim.LinkConfig{Rate: rate, Delay: sim.Microsecond}); err != nil {
			t.Fatal(err)
		}
	}
	if err := net.Build(); err != nil {
		t.Fatal(err)
	}
	conn, recv, err := simqp.Connect(net, src, dst, simqp.Options{QPs: rails, Rails: []int{0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}

	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	attrs := make([]telemetry.PathAttr, rails)
	for i, pi := range conn.Paths() {
		attrs[i] = telemetry.PathAttr{Device: pi.Device, QPN: pi.QPN}
	}
	// Synchronous: the simulation is single-goroutine and deterministic.
	rec, err := telemetry.NewRecorder(telemetry.Config{TracerProvider: tp, Wall: telemetry.FixedEpoch(epoch),
		CC: "dcqcn", Backend: "sim", Peer: "dst", Paths: attrs, Synchronous: true})
	if err != nil {
		t.Fatal(err)
	}
	glue := &pfcGlue{rec: rec, pathOf: map[string]int{}, since: map[string]sim.Time{}}
	for r := range sws {
		// The switch's ingress from the sender sends XOFF when the
		// bottleneck queue backs up: that pauses path r.
		a, b := src.NIC(r).Port().Cable().Ends()
		for _, p := range []*sim.Port{a, b} {
			if p.Switch() != nil {
				glue.pathOf[p.Name()] = r
			}
		}
	}
	w.SetTracer(glue)

	var doneAt vtime.Time
	var doneErr error
	done := false
	snd, err := mptx.NewSender(conn, mptx.SenderConfig{
		Engine: multipath.Config{CC: "dcqcn", ChunkSize: 256 * units.KiB, Recorder: rec},
		OnDone: func(_ multipath.TransferID, now vtime.Time, err error) { done, doneAt, doneErr = true, now, err },
	})
	if err != nil {
		t.Fatal(err)
	}
	const size = 32 * units.MiB
	rcv, err := mptx.NewReceiver(recv, mptx.ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	slot, plan, err := snd.Submit(w.Now().VTime(), multipath.TransferSpec{ID: 5, Size: size})
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.Expect(slot, 5, plan, 0); err != nil {
		t.Fatal(err)
	}
	d := simqp.Drive(w, snd)
	conn.SetNotify(d.Notify)
	rd := simqp.Drive(w, rcv)
	recv.SetNotify(rd.Notify)
	for !done && w.Step() {
	}
	d.Stop()
	rd.Stop()
	if !done || doneErr != nil {
		t.Fatalf("transfer done=%v err=%v at %v", done, doneErr, w.Now())
	}
	rec.Close(doneAt)

	td, err := analyze.Parse(exportJSON(t, sr.Ended()), "sim")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := analyze.Analyze(td, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var tbl strings.Builder
	_ = rep.WriteTable(&tbl)
	t.Logf("simulated run (virtual time), %d PFC pause episodes recorded:\n%s", glue.n, tbl.String())
	tr := rep.Transfers[0]
	if tr.Bottleneck == nil || *tr.Bottleneck != slow {
		t.Fatalf("bottleneck = %v, want path %d (the 25 Gb/s rail)", tr.Bottleneck, slow)
	}
	var pfc time.Duration
	for _, p := range tr.PerPath {
		if p.Path == slow {
			pfc = p.PFCPause
		}
	}
	if glue.n == 0 || pfc <= 0 {
		t.Errorf("PFC: %d pause episodes recorded, %v on path %d in the analysis; want both > 0 (the bottleneck's 512 KiB switch buffer backs up)", glue.n, pfc, slow)
	}
	if got, want := tr.Start, epoch; !got.Equal(want.Add(time.Duration(vtime.Epoch))) && got.Sub(want) > time.Millisecond {
		t.Errorf("transfer start %v, want virtual time on the fixed epoch %v", got, want)
	}
	if got := tr.Completion; got != doneAt.Sub(vtime.Time(0)) && got > doneAt.Sub(0) {
		t.Errorf("completion %v beyond the virtual done time %v", got, doneAt)
	}
}
