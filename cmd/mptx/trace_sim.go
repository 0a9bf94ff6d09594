package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mptx-dev/mptx/experiments"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/telemetry"
	"github.com/mptx-dev/mptx/vtime"
)

// simObserver is the telemetry of one simulated run: a Recorder per
// connection (spans and metrics stamped with virtual time from the
// command's start) and the PFC pauses of the fabric, as mptx.pfc.pause
// events on the paths they stop. A pause counts for a path when the switch
// port facing the path's NIC sent it (XOFF until XON): that stops the
// NIC's traffic, hence every path on it. Pauses deeper in the fabric,
// which stop a path only through the links it crosses, are left out. ECN
// marks and CNPs are the engine's own (chunk spans' mptx.chunk.ecn_marks,
// mptx.cnp.burst events).
type simObserver struct {
	tel    *telemetry.Telemetry
	own    bool // tel belongs to this run: shut it down at Done
	epoch  time.Time
	stderr io.Writer
	name   string

	mu     sync.Mutex // Done may race with the metrics reader's clock
	recs   []*telemetry.Recorder
	ports  map[string][]pausedPath
	open   map[string]sim.Time
	pauses int
	last   vtime.Time
}

type pausedPath struct {
	rec  *telemetry.Recorder
	path int
}

var _ experiments.Observer = (*simObserver)(nil)

func newSimObserver(tel *telemetry.Telemetry, own bool, wallStart time.Time, name string, stderr io.Writer) *simObserver {
	o := &simObserver{tel: tel, own: own, epoch: wallStart.Add(-time.Duration(sim.Start.VTime())), stderr: stderr, name: name,
		ports: map[string][]pausedPath{}, open: map[string]sim.Time{}}
	tel.UseVirtualClock(wallStart, o.wallNow)
	return o
}

// wallNow is the run's virtual clock as wall time, for metric points.
func (o *simObserver) wallNow() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.epoch.Add(time.Duration(o.last))
}

func (o *simObserver) Conn(c experiments.ObservedConn) multipath.Recorder {
	attrs := make([]telemetry.PathAttr, len(c.Paths))
	for i, p := range c.Paths {
		attrs[i] = telemetry.PathAttr{Device: p.Device, QPN: p.QPN, NIC: fmt.Sprintf("%s.nic%d", c.Src, p.NIC)}
	}
	rec, err := telemetry.NewRecorder(telemetry.Config{TracerProvider: o.tel.TracerProvider, MeterProvider: o.tel.MeterProvider,
		Wall: telemetry.FixedEpoch(o.epoch), CC: c.CC, Backend: "sim", Peer: c.Dst, Paths: attrs,
		MaxTransfers: 256, Synchronous: true}) // the run is one goroutine; 256 = a connection's slots
	if err != nil {
		fmt.Fprintf(o.stderr, "mptx: %s: connection %s→%s not traced: %v\n", o.name, c.Src, c.Dst, err)
		return nil
	}
	o.recs = append(o.recs, rec)
	for i, p := range c.IngressPorts {
		if p != "" {
			o.ports[p] = append(o.ports[p], pausedPath{rec, i})
		}
	}
	return rec
}

// Trace implements sim.Tracer: pause episodes on the ports facing the
// senders' NICs.
func (o *simObserver) Trace(ev *sim.TraceEvent) {
	switch ev.Kind {
	case sim.TrPauseSent:
		if _, ok := o.ports[ev.Where]; ok {
			if _, open := o.open[ev.Where]; !open {
				o.open[ev.Where] = ev.At
			}
		}
	case sim.TrResumeSent:
		if at, ok := o.open[ev.Where]; ok {
			delete(o.open, ev.Where)
			o.pause(ev.Where, at.VTime(), ev.At.VTime())
		}
	}
	o.mu.Lock()
	o.last = max(o.last, ev.At.VTime())
	o.mu.Unlock()
}

func (o *simObserver) pause(port string, from, to vtime.Time) {
	o.pauses++
	for _, pp := range o.ports[port] {
		pp.rec.RecordPFCPause(pp.path, from, to.Sub(from))
	}
}

func (o *simObserver) Done(now vtime.Time) {
	for p, at := range o.open { // pauses still on at the end
		o.pause(p, at.VTime(), max(now, at.VTime()))
	}
	clear(o.open)
	o.mu.Lock()
	o.last = max(o.last, now)
	o.mu.Unlock()
	for _, r := range o.recs {
		r.Close(now)
	}
	if o.own {
		if err := o.tel.Shutdown(context.Background()); err != nil {
			fmt.Fprintf(o.stderr, "mptx: %s: telemetry: %v\n", o.name, err)
		}
	}
}

// traceSim turns telemetry on for mptx sim (--trace FILE or OTEL_*): the
// returned context makes SimRun report to an observer, and finish flushes.
func traceSim(ctx context.Context, t *traceFlag, stderr io.Writer) (context.Context, func() error, error) {
	tel, err := t.start(ctx, "mptx-sim", true)
	if err != nil || tel == nil {
		return ctx, func() error { return nil }, err
	}
	start := time.Now()
	ctx = experiments.WithObserver(ctx, func(r experiments.Run) experiments.Observer {
		return newSimObserver(tel, false, start, r.Spec.Name, stderr)
	})
	return ctx, func() error { return finishTelemetry(context.Background(), tel, stderr) }, nil
}

// traceSweep turns telemetry on for the runs of mptx exp run that match
// pattern (a shell pattern on "scenario/label/seedN", label being the
// run's short policy label with dashes for spaces as in "dcqcn-nopace",
// or on the run's hash, or a prefix of it; empty: every run), each into its own file dir/<scenario>-<hash>.otlp.jsonl.
// Sweeps are not traced unless asked: a trace per run costs microseconds
// per chunk and megabytes per run. Runs reused from earlier results are
// not run, hence not traced (add --force).
func traceSweep(ctx context.Context, dir, pattern string, stderr io.Writer) (context.Context, error) {
	if dir == "" {
		if pattern != "" {
			return ctx, badInput("--trace-run %q needs --trace DIR", pattern)
		}
		return ctx, nil
	}
	if pattern == "" {
		pattern = "*"
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return ctx, badInput("--trace-run %q: %v (want a shell pattern on scenario/policy/seedN or a hash)", pattern, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ctx, err
	}
	return experiments.WithObserver(ctx, func(r experiments.Run) experiments.Observer {
		label := fmt.Sprintf("%s/%s/seed%d", r.Spec.Name, strings.ReplaceAll(r.Label(), " ", "-"), r.Seed)
		m1, _ := path.Match(pattern, label)
		m2, _ := path.Match(pattern, r.Hash)
		if !m1 && !m2 && !strings.HasPrefix(r.Hash, pattern) {
			return nil
		}
		file := filepath.Join(dir, safeName(r.Spec.Name)+"-"+safeName(r.Hash)+".otlp.jsonl")
		tel, err := telemetry.Setup(ctx, telemetry.SetupConfig{ServiceName: "mptx-sim", TraceFile: file, VirtualTime: true})
		if err != nil {
			fmt.Fprintf(stderr, "mptx: %s: not traced: %v\n", label, err)
			return nil
		}
		return newSimObserver(tel, true, time.Now(), label, stderr)
	}), nil
}
