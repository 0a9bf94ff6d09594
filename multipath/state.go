// The engine's state: paths, transfers, chunk attempts and work requests, and
// the work-request table that names every posted work request.

package multipath

import (
	"fmt"
	"time"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/pacing"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// PathState is a path's place in the failure state machine.
type PathState uint8

// Path states.
const (
	// PathUp: the path carries chunks.
	PathUp PathState = iota
	// PathQuarantined: the path failed (error completion, failed post or
	// stall) and waits out its backoff before a probe.
	PathQuarantined
	// PathProbing: a probe is outstanding; its completion decides.
	PathProbing
	// PathDown: the driver reported the path down; it waits for OnPathUp.
	PathDown
	// PathDead: MaxProbeFailures consecutive probes failed. A dead path
	// does not count as usable (transfers fail when every path is down
	// or dead), but it is still probed every QuarantineMax, so a link that
	// comes back after a long outage brings its path back.
	PathDead
)

var pathStateNames = [...]string{"up", "quarantined", "probing", "down", "dead"}

// String returns the state's name.
func (s PathState) String() string {
	if int(s) < len(pathStateNames) {
		return pathStateNames[s]
	}
	return fmt.Sprintf("PathState(%d)", uint8(s))
}

// usable reports whether the path may carry or regain traffic on its own.
func (s PathState) usable() bool { return s <= PathProbing }

type chunkStatus uint8

const (
	chunkPending chunkStatus = iota // waiting for a path
	chunkActive                     // assigned; segments being posted
	chunkPosted                     // every segment posted; waiting for completions
	chunkDone
)

type chunkState struct {
	status  chunkStatus
	queued  bool // in the transfer's requeue list
	path    int16
	attempt uint16
	next    int32 // requeue list link, -1 = end
	posted  units.Bytes
	acked   units.Bytes
	startAt vtime.Time
	marks0  uint64 // path's mark counter at attempt start
}

type transfer struct {
	live      bool   // chunks are being scheduled
	held      bool   // submitted with Hold, waiting for Start
	draining  bool   // ended (result set); waiting for its outstanding work requests
	result    error  // how it ended, once draining
	out       int32  // segment work requests posted and not yet completed or fenced
	gen       uint32 // bumped per Submit; work of an earlier occupant of the slot is stale
	tag       int    // chunk.MakeTag(slot, gen)
	id        TransferID
	plan      chunk.Plan
	local     units.Bytes
	remote    units.Bytes
	chunks    []chunkState
	nextFresh int   // next never-assigned chunk
	reqHead   int32 // requeue FIFO
	reqTail   int32
	done      int
	requeues  int
	startAt   vtime.Time
	prio      Priority
}

type workKind uint8

const (
	workFree workKind = iota
	workSegment
	workProbe
)

type work struct {
	gen      uint32
	kind     workKind
	path     uint16
	slot     uint16
	attempt  uint16
	tgen     uint32
	chunk    uint32
	len      units.Bytes
	postAt   vtime.Time
	nextFree int32
}

type note struct {
	kind ActionKind
	id   TransferID
	err  error
}

type path struct {
	cfg       PathConfig
	idx       int // index in Engine.paths
	alg       cc.Algorithm
	pacer     *pacing.Pacer // nil when pacing is disabled
	pacedRate units.BitRate
	ccRate    units.BitRate // alg.Rate() as of the last refreshRate
	ccWin     units.Bytes   // alg.Window() as of the last refreshRate
	eff       float64       // effective rate, bytes/ns (refreshRate)
	win       units.Bytes   // effective window (refreshRate)
	seg       units.Bytes   // work-request size (refreshRate)
	segBase   units.Bytes   // the configured or pacer's segment, before the window's cap
	hwRate    units.BitRate // Pacing.Hardware: the rate to program (Engine.hwSet: changed since the last ActSetRate)
	port      *pacing.Port  // shared by paths on one NIC; nil when disabled

	state       PathState
	reason      string
	upAt        vtime.Time // errors of work posted before this are stale
	backoff     time.Duration
	until       vtime.Time // quarantine end
	probeID     uint64
	probeFail   int
	probeReason string // why the last probe failed
	qpErr       bool   // lost to an error completion: reset the QP before probing
	fence       bool   // lost with work outstanding that nothing flushes: emit ActReset
	fencing     bool   // ActReset emitted; waiting for OnReset
	fromDead    bool   // the outstanding probe is a dead path's slow retry
	lastProbe   vtime.Time

	hasActive   bool
	activeSlot  uint16
	activeChunk uint32
	activeCls   Priority // the active chunk's transfer's class
	// A chunk of a lower class set aside by the active one (priority.go):
	// its unposted segments go on once the active chunk is posted.
	pinned       bool // the active chunk was handed out by the starvation guard: it is not set aside
	hasSusp      bool
	suspCls      Priority
	suspSlot     uint16
	suspChunk    uint32
	tierIdx      uint8 // index of the path's tier in Engine.tierSets
	nicPaths     int   // paths on this path's NIC, itself included
	inflight     units.Bytes
	wrOut        int
	blockedUntil vtime.Time // pacing: the active chunk's next segment may go then

	fifo     []uint64 // outstanding work ids in post order (ring)
	fifoHead int
	fifoLen  int

	maxInFlight units.Bytes
	txLen       units.Bytes   // the last completed work request's size ...
	txTime      time.Duration // ... and its serialisation time at line rate
	srtt        time.Duration // smoothed network RTT
	minRTT      time.Duration
	rawSRTT     time.Duration // smoothed post→completion time (timeouts)
	rawVar      time.Duration
	rateEst     units.BitRate
	lastAck     vtime.Time
	marked      float64
	sawCounters bool
	cntECN      uint64
	cntCNP      uint64
	marks       uint64 // cumulative ECN+CNP deltas

	bytes    units.Bytes
	chunks   int
	requeues int
	downs    int
	ecn      uint64
	cnps     uint64
	probes   int
}

// oldest returns the id of the oldest outstanding work request on p.
func (e *Engine) oldest(p *path) (uint64, bool) {
	for p.fifoLen > 0 {
		id := p.fifo[p.fifoHead]
		w := &e.work[int(uint32(id))-1]
		if w.gen == uint32(id>>32) && w.kind != workFree {
			return id, true
		}
		p.fifoHead++
		if p.fifoHead == len(p.fifo) {
			p.fifoHead = 0
		}
		p.fifoLen--
	}
	return 0, false
}

func (e *Engine) allocWork(kind workKind, pathIdx int, slot uint16, ch uint32, attempt uint16, n units.Bytes, now vtime.Time) (uint64, bool) {
	idx := e.freeWork
	if idx < 0 {
		return 0, false
	}
	w := &e.work[idx]
	e.freeWork = w.nextFree
	w.kind, w.path, w.slot, w.chunk, w.attempt, w.len, w.postAt = kind, uint16(pathIdx), slot, ch, attempt, n, now
	w.tgen = e.transfers[slot].gen
	if kind == workSegment {
		e.transfers[slot].out++
	}
	id := uint64(w.gen)<<32 | uint64(idx+1)
	p := &e.paths[pathIdx]
	p.wrOut++
	e.mark(bitOf(pathIdx))
	if p.fifoLen == len(p.fifo) { // cannot happen: wrOut bounds it; drop the oldest
		e.oldest(p)
	}
	if p.fifoLen < len(p.fifo) {
		j := p.fifoHead + p.fifoLen
		if j >= len(p.fifo) {
			j -= len(p.fifo)
		}
		p.fifo[j] = id
		p.fifoLen++
	}
	return id, true
}

func (e *Engine) freeWorkSlot(idx int) {
	if e.freeWork < 0 {
		e.recheck = e.all // paths held back by the full table may post again
	}
	w := &e.work[idx]
	w.kind = workFree
	w.gen++
	if w.gen == 0 {
		w.gen = 1
	}
	w.nextFree = e.freeWork
	e.freeWork = int32(idx)
}

// chunkLen returns chunk i's length under plan (0 <= i < plan.Count, which
// the engine's chunk indices always are): plan.Span's arithmetic, which
// inlines where Span, with its range check, does not.
func chunkLen(plan *chunk.Plan, i int) units.Bytes {
	return min(plan.ChunkSize, plan.Size-units.Bytes(i)*plan.ChunkSize)
}

// chunkOff returns chunk i's offset under plan, as chunkLen.
func chunkOff(plan *chunk.Plan, i int) units.Bytes { return units.Bytes(i) * plan.ChunkSize }
