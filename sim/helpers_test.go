package sim_test

import (
	"math"
	"testing"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// bulk is the physics tests' load generator, deliberately not the engine:
// those tests check the fabric model (go-back-N, PFC, ECMP, failures)
// against closed-form expectations, which need a load whose every post is
// known, not one shaped by congestion control and path choice (the
// engine's own tests run on multipath/enginetest, and the engine on the
// simulator in engine_integration_test.go and integrity_test.go). It ships
// size bytes over a connection's paths as WRITE WITH IMM work requests of
// seg bytes, keeps up to depth of them outstanding per path, and when a
// work request fails it marks the path dead and requeues the segment on
// the live paths. It implements simqp.Stepper and allocates nothing per
// step once its queues have grown.
type bulk struct {
	w       *sim.World
	c       *simqp.Conn
	size    units.Bytes
	seg     units.Bytes
	depth   int
	next    units.Bytes // offset of the next new segment
	requeue []units.Bytes
	out     []int
	dead    []bool
	done    units.Bytes
	doneAt  sim.Time
	firstAt sim.Time    // first successful completion
	first   units.Bytes // its bytes
	failAt  []sim.Time  // first failed completion per path
	buf     []qp.Completion
	wr      [1]qp.SendWR
	rr      int
	loop    bool   // start over when done (steady-state traffic)
	onDone  func() // called once when every byte is acknowledged
}

func newBulk(w *sim.World, c *simqp.Conn, size, seg units.Bytes, depth int) *bulk {
	n := len(c.Paths())
	b := &bulk{w: w, c: c, size: size, seg: seg, depth: depth,
		out: make([]int, n), dead: make([]bool, n), failAt: make([]sim.Time, n),
		buf: make([]qp.Completion, 64), requeue: make([]units.Bytes, 0, 64)}
	return b
}

func (b *bulk) Step(now vtime.Time) vtime.Time {
	for {
		k, _ := b.c.Poll(b.buf)
		for _, c := range b.buf[:k] {
			b.out[c.Path]--
			off := units.Bytes(c.ID)
			if c.Status == qp.StatusOK {
				if b.firstAt == 0 {
					b.firstAt, b.first = sim.FromVTime(c.At), c.Bytes
				}
				b.done += c.Bytes
				if b.done >= b.size && b.doneAt == 0 {
					b.doneAt = sim.FromVTime(c.At)
					if b.onDone != nil {
						b.onDone()
					}
				}
				continue
			}
			if !b.dead[c.Path] {
				b.dead[c.Path] = true
				b.failAt[c.Path] = sim.FromVTime(c.At)
			}
			b.requeue = append(b.requeue, off)
		}
		if k < len(b.buf) {
			break
		}
	}
	if b.loop && b.done >= b.size {
		b.done, b.next, b.doneAt = 0, 0, 0
	}
	n := len(b.out)
	for progress := true; progress; {
		progress = false
		for i := 0; i < n; i++ {
			p := (b.rr + i) % n
			if b.dead[p] || b.out[p] >= b.depth {
				continue
			}
			var off units.Bytes
			switch {
			case len(b.requeue) > 0:
				off = b.requeue[len(b.requeue)-1]
				b.requeue = b.requeue[:len(b.requeue)-1]
			case b.next < b.size:
				off = b.next
				b.next += b.seg
			default:
				continue
			}
			l := min(b.seg, b.size-off)
			b.wr[0] = qp.SendWR{ID: uint64(off), Op: qp.OpWriteImm, Local: off, Remote: off, Len: l, Imm: uint32(off / b.seg)}
			if k, err := b.c.PostSend(p, b.wr[:]); k != 1 || err != nil {
				b.dead[p] = true
				b.requeue = append(b.requeue, off)
				continue
			}
			b.out[p]++
			progress = true
		}
		b.rr = (b.rr + 1) % n
	}
	return 0
}

// jain returns Jain's fairness index of xs: (Σx)² / (n·Σx²).
func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(xs)) * s2)
}

// within reports whether got is within rel (relative) of want.
func within(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// wireTime is the serialisation time of a WRITE WITH IMM message of n
// payload bytes at rate r with the given MTU, from the header accounting
// in sim's package documentation: every packet carries 62 bytes of
// headers and 20 of preamble and gap, the first also a 16-byte RETH, the
// last a 4-byte ImmDt.
func wireTime(n, mtu units.Bytes, r units.BitRate) float64 {
	pkts := (n + mtu - 1) / mtu
	wire := n + pkts*(sim.DataHeaders+sim.WireOverhead) + sim.RETHHeader + sim.ImmDtHeader
	return float64(wire) * 8 / float64(r)
}

// totals sums counters over every port of a network.
func totals(net *sim.Network) (c sim.PortCounters) {
	add := func(p *sim.Port) {
		x := p.Counters()
		c.Drops += x.Drops
		c.LinkDrops += x.LinkDrops
		c.LossDrops += x.LossDrops
		c.NoRoute += x.NoRoute
		c.PauseSent += x.PauseSent
		c.PauseRecv += x.PauseRecv
		c.ResumeSent += x.ResumeSent
		c.ECNMarks += x.ECNMarks
		c.WatchdogDrops += x.WatchdogDrops
		c.TxPackets += x.TxPackets
	}
	for _, s := range net.Switches {
		for _, p := range s.Ports() {
			add(p)
		}
	}
	for _, n := range net.NICs {
		add(n.Port())
	}
	return c
}

func mustT(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// stepFunc adapts a function to simqp.Stepper (no timers).
type stepFunc func()

func (f stepFunc) Step(vtime.Time) vtime.Time { f(); return 0 }
