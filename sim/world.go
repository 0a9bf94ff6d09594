package sim

import (
	"math/rand/v2"
	"strconv"
)

// Handler is anything that can be scheduled: its Fire method runs when the
// world's clock reaches the scheduled instant. Elements usually implement
// Handler on a small embedded field (a Timer or a pipe) so that one element
// can own several kinds of event without allocating closures.
type Handler interface {
	Fire(now Time)
}

// World is one simulation: its clock, its event list (a timing wheel with
// a heap behind it, ordered on (time, sequence number), so that events due
// at the same instant run in the order they were scheduled), its random
// number generator (a PCG seeded
// from the world's seed; nothing in the simulator draws randomness from
// anywhere else) and its packet pool.
//
// A World is not safe for concurrent use and starts no goroutines; it holds
// no package-level state, so any number of worlds can run in parallel, one
// per goroutine. The same seed and the same construction give the same
// sequence of events, byte for byte.
//
// The zero value is not usable; call NewWorld.
type World struct {
	q       eventQueue // first: its bucket array must be line-aligned
	now     Time
	seq     uint64
	rng     *rand.Rand
	seed    uint64
	fired   uint64
	stop    bool
	daemons int // samplers: each holds one heap entry
	idle    int // heap entries of stopped timers (no-ops when they fire)
	tracer  Tracer
	tev     TraceEvent // reused for every trace call

	// packet pool
	free     *Packet
	live     int // packets handed out and not yet freed
	maxLive  int
	allocd   int // packets ever allocated
	poolStep int
	extFree  []*pktExt
}

// NewWorld returns an empty world at time Start whose random number
// generator is seeded with seed.
func NewWorld(seed uint64) *World {
	w := &World{
		now:      Start,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		seed:     seed,
		poolStep: minPoolBlock,
	}
	w.q.init()
	return w
}

// Now returns the current simulation time.
func (w *World) Now() Time { return w.now }

// Seed returns the seed the world was created with.
func (w *World) Seed() uint64 { return w.seed }

// Rand returns the world's random number generator. Everything random in a
// world must be drawn from it, in event order, for runs to be reproducible.
func (w *World) Rand() *rand.Rand { return w.rng }

// Events returns the number of events fired so far.
func (w *World) Events() uint64 { return w.fired }

// Pending returns the number of events that still matter: entries in the
// event list other than those of stopped timers and of samplers.
func (w *World) Pending() int { return w.q.len() - w.idle - w.daemons }

// At schedules h to fire at instant at. Scheduling in the past is a bug and
// panics. Events due at the same instant fire in the order At was called.
func (w *World) At(at Time, h Handler) {
	if at < w.now {
		w.badAt(at)
	}
	w.seq++
	if onWheel(w.now, at) {
		w.q.wheelPush(at, h)
		return
	}
	w.q.heapPush(at, w.seq, h)
}

//go:noinline
func (w *World) badAt(at Time) {
	panic("sim: BUG: At(" + at.String() + ") is before now " + w.now.String())
}

// After schedules h to fire d after now.
func (w *World) After(d Time, h Handler) { w.At(w.now+d, h) }

// Step fires the earliest event and reports whether there was one.
func (w *World) Step() bool {
	if w.q.len() == 0 {
		return false
	}
	at, h := w.q.pop(w.now)
	w.now = at
	w.fired++
	h.Fire(at)
	return true
}

// Run fires events in time order until none that matters is left (only
// stopped timers' and samplers' entries remain) or Stop is called. The
// clock is left at the last event that mattered.
func (w *World) Run() {
	w.stop = false
	for !w.stop && w.q.len() > w.idle+w.daemons {
		at, h := w.q.pop(w.now)
		w.now = at
		w.fired++
		h.Fire(at)
	}
}

// RunUntil fires every event due at or before t (unless Stop is called),
// then advances the clock to t. It reports whether events that matter
// remain.
func (w *World) RunUntil(t Time) bool {
	w.stop = false
	for !w.stop && w.q.len() > 0 && w.q.peek(w.now) <= t {
		at, h := w.q.pop(w.now)
		w.now = at
		w.fired++
		h.Fire(at)
	}
	if !w.stop && t > w.now {
		w.now = t
	}
	return w.Pending() > 0
}

// RunFor is RunUntil(Now()+d).
func (w *World) RunFor(d Time) bool { return w.RunUntil(w.now + d) }

// Stop makes Run or RunUntil return after the event being fired.
func (w *World) Stop() { w.stop = true }

// NewPacket returns a zeroed packet from the world's pool. The pool grows in
// blocks and never shrinks, so a run in steady state allocates nothing.
func (w *World) NewPacket() *Packet {
	p := w.free
	if p == nil {
		w.growPool()
		p = w.free
	}
	w.free = p.next
	*p = Packet{}
	w.live++
	if w.live > w.maxLive {
		w.maxLive = w.live
	}
	return p
}

// FreePacket returns p to the pool. Freeing a packet twice, or one that is
// still linked into a queue, is a bug and panics.
func (w *World) FreePacket(p *Packet) {
	if p.flags&flagFree != 0 {
		panic("sim: BUG: packet freed twice")
	}
	if p.next != nil {
		panic("sim: BUG: freeing a packet that is still queued")
	}
	if p.ext != nil {
		w.extFree = append(w.extFree, p.ext)
		p.ext = nil
	}
	p.flags = flagFree
	p.next = w.free
	w.free = p
	w.live--
}

// minPoolBlock is the fewest packets the pool allocates at once: 32 KiB,
// which the Go allocator serves as a large object at a page boundary, so
// that every 64-byte packet lies in exactly one cache line (smaller objects
// with pointers start 8 bytes into their slot, after a type header).
const minPoolBlock = 512

func (w *World) growPool() {
	blk := make([]Packet, w.poolStep)
	for i := range blk {
		blk[i].flags = flagFree
		blk[i].next = w.free
		w.free = &blk[i]
	}
	w.allocd += len(blk)
	if w.poolStep < 4096 {
		w.poolStep *= 2
	}
}

// newExt returns an empty packet extension from the pool.
func (w *World) newExt() *pktExt {
	n := len(w.extFree)
	if n == 0 {
		blk := make([]pktExt, 256)
		for i := range blk {
			w.extFree = append(w.extFree, &blk[i])
		}
		n = len(w.extFree)
	}
	x := w.extFree[n-1]
	w.extFree[n-1] = nil
	w.extFree = w.extFree[:n-1]
	x.nhops, x.reth, x.rkey = 0, false, 0
	return x
}

// PoolStats reports the packet pool: packets in use now, the most ever in
// use at once, and packets allocated.
func (w *World) PoolStats() (live, peak, allocated int) { return w.live, w.maxLive, w.allocd }

// SetTracer installs t to receive trace events (nil removes it).
func (w *World) SetTracer(t Tracer) { w.tracer = t }

// trace fills the reusable event and hands it to the tracer. Callers check
// w.tracer != nil first so that an untraced run builds nothing.
func (w *World) trace(k TraceKind, where string, qpn, psn uint32, n int64) {
	w.tev = TraceEvent{Kind: k, At: w.now, Where: where, QPN: qpn, PSN: psn, N: n}
	w.tracer.Trace(&w.tev)
}

// TraceKind classifies trace events.
type TraceKind uint8

// Trace event kinds.
const (
	TrDrop       TraceKind = iota + 1 // Where: port; N: frame bytes; QPN/PSN of the packet
	TrPauseSent                       // Where: port that sent XOFF
	TrResumeSent                      // Where: port that sent XON
	TrCNPSent                         // Where: NIC; QPN: the requester's QP
	TrNAKSent                         // Where: NIC; QPN: requester QP; PSN: expected PSN
	TrTimeout                         // Where: NIC; QPN; PSN: oldest unacked
	TrQPError                         // Where: NIC; QPN
	TrSendDone                        // Where: NIC; QPN; N: bytes
	TrRecvDone                        // Where: NIC; QPN; N: bytes
	TrLinkDown                        // Where: cable
	TrLinkUp                          // Where: cable
	TrWatchdog                        // Where: port; N: ps paused
	TrQPReset                         // Where: NIC; QPN; PSN: the fresh start PSN
)

var traceNames = [...]string{
	TrDrop: "drop", TrPauseSent: "pause", TrResumeSent: "resume", TrCNPSent: "cnp",
	TrNAKSent: "nak", TrTimeout: "timeout", TrQPError: "qp-error", TrSendDone: "send-done",
	TrRecvDone: "recv-done", TrLinkDown: "link-down", TrLinkUp: "link-up", TrWatchdog: "watchdog",
	TrQPReset: "qp-reset",
}

// String returns the kind's name.
func (k TraceKind) String() string {
	if int(k) < len(traceNames) && traceNames[k] != "" {
		return traceNames[k]
	}
	return "TraceKind(" + strconv.Itoa(int(k)) + ")"
}

// TraceEvent is one trace record. The world reuses one value for every
// call: tracers copy what they keep.
type TraceEvent struct {
	Kind  TraceKind
	At    Time
	Where string // name of the port, NIC or cable (built at construction)
	QPN   uint32
	PSN   uint32
	N     int64
}

// String formats the event on one line.
func (e *TraceEvent) String() string {
	return strconv.FormatInt(int64(e.At), 10) + " " + e.Kind.String() + " " + e.Where +
		" qpn=" + strconv.FormatUint(uint64(e.QPN), 10) + " psn=" + strconv.FormatUint(uint64(e.PSN), 10) +
		" n=" + strconv.FormatInt(e.N, 10)
}

// Tracer receives trace events synchronously from inside the event loop. It
// must not block and must not schedule events.
type Tracer interface {
	Trace(ev *TraceEvent)
}
