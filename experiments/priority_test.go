package experiments

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/units"
)

// prioritySpec is a 2 MiB tensor of class prio sent at start from host 0
// to host 1 (100 Gb/s, one switch, 1 µs cables) over a connection of 4
// queue pairs under the default engine (DCQCN, congestion-aware), beside
// a 1 GiB bulk transfer of the default class on the same connection when
// bulk is set. The run stops 2 ms after the tensor's start: the bulk
// transfer need not finish.
func prioritySpec(start time.Duration, prio int, bulk bool) string {
	b := ""
	if bulk {
		b = "  - {kind: incast, senders: [0], receiver: 1, size: 1GiB, class: background, connection: tensor}\n"
	}
	return fmt.Sprintf(`name: priority
topology: {kind: star, hosts: 2, host_rate: 100Gbps, link_delay: 1us}
workloads:
%s  - {kind: incast, senders: [0], receiver: 1, size: 2MiB, start: %s, priority: %d}
matrix: {cc: dcqcn, paths: 4}
seeds: [1]
stop: {time: %s}
`, b, Duration(start), prio, Duration(start+2*time.Millisecond))
}

// tensorFCT runs spec and returns the tensor-class flow's completion time.
func tensorFCT(t *testing.T, spec string) time.Duration {
	t.Helper()
	r, err := SimRun(context.Background(), Expand(mustParse(t, spec))[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Flows {
		if f.Class == ClassTensor {
			if !f.Done {
				t.Fatalf("the 2 MiB tensor did not complete: %+v", f)
			}
			return time.Duration(f.FCTNs)
		}
	}
	t.Fatal("no tensor flow")
	return 0
}

// TestPriorityBesideBulk: a 2 MiB high-priority tensor submitted while a
// 1 GiB bulk transfer is in flight on the same connection completes
// within 1.2× of its time on an idle connection, in the packet-level
// simulator with the real driver and engine; at the default class it
// takes about twice as long.
//
// Expected value. Alone, the tensor takes T_idle: four 512 KiB chunks, one
// per queue pair, at the NIC's 100 Gb/s, plus a round trip (175.6 µs).
// Beside the bulk transfer its chunks set the bulk chunks' unposted
// segments aside (multipath, "Priorities"), so what delays it is what the
// bulk transfer has already posted to the NIC. The connection carries two
// classes, so the bulk class keeps a shallow queue: the 4 queue pairs of
// the NIC share one path's allowance, the window (2 × 100 Gb/s × the
// 4.68 µs base RTT = 117,050 B) plus two segments (half the window in
// whole 4 KiB MTUs: 57,344 B each), W = 231,738 B, which the NIC sends
// with 82 B of headers and framing per 4 KiB packet: 19.0 µs at line
// rate. So T_busy ≤ T_idle + 19.0 µs (≤ 1.11 × T_idle). Where the tensor
// lands relative to the bulk transfer's segments decides how much of W
// is still queued, so the arrival is varied over five instants 83 µs
// apart (a 4 MiB bulk chunk's time over four queue pairs is 336 µs); the
// bound is checked at each, with 1 µs for the engine's pacing granularity.
// Without priorities (class 0: one chunk per transfer per turn) the
// tensor's chunks alternate with 4 MiB bulk chunks: more than 1.5 ×
// T_idle at every arrival, so the bound does tell priority apart.
func TestPriorityBesideBulk(t *testing.T) {
	starts := []time.Duration{2000, 2083, 2166, 2249, 2332}
	if testing.Short() {
		starts = starts[:2]
	}
	idle := tensorFCT(t, prioritySpec(2*time.Millisecond, 4, false))
	const line = 100 * units.Gbps
	w := units.Bytes(117050 + 2*57344)
	pkts := (w + 4095) / 4096
	bound := idle + line.TxTime(w+pkts*(sim.DataHeaders+sim.WireOverhead)) + time.Microsecond
	t.Logf("idle %v; bound beside the bulk %v (%.3f×)", idle, bound, float64(bound)/float64(idle))
	for _, us := range starts {
		start := us * time.Microsecond
		busy := tensorFCT(t, prioritySpec(start, 4, true))
		fifo := tensorFCT(t, prioritySpec(start, 0, true))
		t.Logf("arrival %v: class 4 %v (%.3f×), class 0 %v (%.2f×)", start, busy, float64(busy)/float64(idle), fifo, float64(fifo)/float64(idle))
		if busy > bound || float64(busy) > 1.2*float64(idle) {
			t.Errorf("arrival %v: the high-priority tensor took %v beside the bulk transfer, want ≤ %v (and ≤ 1.2 × %v)", start, busy, bound, idle)
		}
		if float64(fifo) < 1.5*float64(idle) {
			t.Errorf("arrival %v: at the default class the tensor took %v, under 1.5 × %v: the bulk transfer does not load the connection", start, fifo, idle)
		}
	}
}

// TestConnectionField: a background workload with connection: tensor
// shares the tensor flows' connection (and its queue pairs) between two
// hosts; without it, it gets a one-QP connection of its own; flows carry
// their workload's priority.
func TestConnectionField(t *testing.T) {
	for _, tc := range []struct {
		conn  string
		conns int
	}{{"tensor", 2}, {"background", 3}} {
		spec := fmt.Sprintf(`name: conn
topology: {kind: star, hosts: 3}
workloads:
  - {kind: incast, senders: [1], receiver: 0, size: 2MiB, start: 1ms, priority: 4}
  - {kind: incast, senders: [1, 2], receiver: 0, size: 8MiB, class: background, connection: %s}
matrix: {cc: dcqcn, paths: 4}
`, tc.conn)
		r, err := newSimRun(context.Background(), Expand(mustParse(t, spec))[0])
		if err != nil {
			t.Fatal(err)
		}
		if len(r.conns) != tc.conns {
			t.Errorf("connection: %s: %d connections, want %d", tc.conn, len(r.conns), tc.conns)
		}
		for i, f := range r.tr.Flows {
			c := r.conn(i)
			want := 4
			if f.Class == ClassBackground {
				want = 0
			}
			if f.Priority != want {
				t.Errorf("flow %d (%s): priority %d, want %d", f.ID, f.Class, f.Priority, want)
			}
			if paths := len(c.conn.Paths()); f.Class == ClassBackground && tc.conn == "background" && paths != 1 {
				t.Errorf("flow %d on its own background connection with %d paths, want 1", f.ID, paths)
			} else if (f.Class == ClassTensor || tc.conn == "tensor") && paths != 4 {
				t.Errorf("flow %d (%s, connection %s) on a connection of %d paths, want 4", f.ID, f.Class, tc.conn, paths)
			}
		}
	}
}
