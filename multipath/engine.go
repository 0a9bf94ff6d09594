// The Engine, its construction and its read-only queries.

package multipath

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/pacing"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Errors returned by Submit.
var (
	ErrTooManyTransfers = errors.New("multipath: too many concurrent transfers")
	ErrDuplicateID      = errors.New("multipath: transfer id already in use")
	ErrNoPath           = errors.New("multipath: no usable path")
	ErrCanceled         = errors.New("multipath: transfer canceled")
	ErrUnknownTransfer  = errors.New("multipath: no live transfer with this id")
	ErrAborted          = errors.New("multipath: engine aborted")
)

// Defaults (see Config).
const (
	defaultBaseRTT          = 10 * time.Microsecond
	defaultMTU              = 4096
	defaultMaxWRPerPath     = 64
	defaultMinTimeout       = 10 * time.Millisecond
	defaultQuarantineMin    = time.Millisecond
	defaultQuarantineMax    = time.Second
	defaultMaxProbeFailures = 5
	defaultCC               = "dcqcn"
	// markedGain is the EWMA gain of a path's marked-chunk fraction.
	markedGain = 1.0 / 8
	// rateGain is the EWMA gain of a path's delivery-rate estimate.
	rateGain = 1.0 / 4
)

// TransferSpec describes a transfer to Submit.
type TransferSpec struct {
	ID   TransferID
	Size units.Bytes // tensor bytes, > 0
	// ChunkSize overrides Config.ChunkSize for this transfer (0: use it).
	ChunkSize units.Bytes
	// Local and Remote are the tensor's base offsets in the local send
	// region and the receiver's advertised region.
	Local, Remote units.Bytes
	// Hold submits the transfer without scheduling it: it takes its slot
	// and tag (so the receiver can be told both before anything is
	// posted) and waits for Start, which may also set Remote. A held
	// transfer can be canceled.
	Hold bool
	// Priority is the transfer's class, 0 (PriorityDefault) to
	// MaxPriority: chunks of a higher class are handed out first, and may
	// set aside the unposted segments of a lower class's chunk on a busy
	// path (see the package doc, "Priorities").
	Priority Priority
}

// Completion is a send completion (or a failed post) reported to the
// engine.
type Completion struct {
	WorkID uint64 // the Action's WorkID
	OK     bool
	// Reason names the failure when !OK, e.g. "retry-exceeded"; it must
	// be a static string (qp.Status.String()).
	Reason string
	// ECNMarked is the number of the work request's bytes that carried CE
	// marks, where the backend knows (the simulator).
	ECNMarked units.Bytes
	// Hops carries per-hop telemetry for HPCC, NHops == 0 if none.
	Hops  [cc.MaxHops]cc.INTHop
	NHops int
}

// PathStats is a snapshot of one path's statistics.
type PathStats struct {
	Name       string
	State      PathState
	Reason     string        // why the path was last lost ("" if never)
	Bytes      units.Bytes   // bytes acknowledged (all attempts)
	Chunks     int           // chunks completed on the path
	Requeues   int           // chunks taken off the path after a failure or stall
	Downs      int           // times the path was lost
	SRTT       time.Duration // smoothed network RTT (serialisation removed)
	MinRTT     time.Duration
	Window     units.Bytes   // effective window (CC window capped by MaxInFlight)
	Rate       units.BitRate // CC rate
	RateEst    units.BitRate // measured delivery rate
	InFlight   units.Bytes
	ECNMarks   uint64  // ECN-marked packets reported by OnCounters
	CNPs       uint64  // CNPs reported by OnCounters
	Marked     float64 // EWMA fraction of recent chunks that saw marks
	Probes     int     // probes sent
	ProbeFails int     // consecutive failed probes
}

// TransferStats is a snapshot of one live transfer.
type TransferStats struct {
	ID        TransferID
	Slot      int
	Plan      chunk.Plan
	Done      int // chunks acknowledged
	Requeues  int
	StartedAt vtime.Time
}

// Engine is the multipath transfer engine. See the package documentation
// for the driver's duties. The zero value is not usable; call New.
type Engine struct {
	cfg     Config
	rng     *rand.Rand
	rec     Recorder
	ev      Event
	segment units.Bytes

	paths []path
	ports []*pacing.Port

	transfers []transfer
	freeSlots []uint16
	active    []uint16 // live transfer slots in submission order
	pending   units.Bytes
	pendingN  int

	// Priority classes (priority.go).
	cls      [NumPriorities]class
	clsPend  uint8       // classes with pending chunks
	clsLive  uint8       // classes with live transfers
	mixed    bool        // more than one class live
	soleCls  Priority    // the live class when not mixed
	plain    bool        // one class live and one tier (classesChanged)
	guard    units.Bytes // Config.PriorityGuard resolved; 0: none
	skipped  units.Bytes // chunk bytes the top class got while a lower one waited
	serveSeq uint64
	suspSet  pathSet  // paths with a chunk set aside
	deepCls  Priority // chunks of lower classes keep a shallow send queue (depth)

	// Tiers (tier.go).
	tiered   bool
	tierSets []pathSet  // paths per tier, lowest tier first
	tierUpTo []pathSet  // paths of tiers 0..k
	tierOpen int        // highest tier index taking new chunks
	spillAt  vtime.Time // when the next tier opens if the open ones still have no room; vtime.Never: none

	work     []work
	freeWork int32

	notes    []note
	noteHead int
	noteLen  int
	rrPath   int
	lastPath int
	// repick is set by every input that can free a path or change the
	// estimates pick compares; while it is clear, a pick that waited
	// would wait again and is skipped.
	repick   bool
	stale    uint64
	draining int // transfers ended but waiting for outstanding work requests
	held     int // transfers submitted with Hold, not yet started

	// Path sets and the deadline cache (sets.go).
	all       pathSet // every path
	up        pathSet // paths in PathUp
	busy      pathSet // paths with an active chunk
	recheck   pathSet // paths Actions must visit
	paced     pathSet // paths held back by pacing (blockedUntil set)
	dirty     pathSet // paths whose cached deadline is stale
	freeSet   pathSet // paths free to take a chunk, but for those in freeDirty
	freeDirty pathSet
	fenceSet  pathSet      // paths owing an ActReset
	hwSet     pathSet      // paths owing an ActSetRate (hardware pacing)
	dlTree    []vtime.Time // min-tree of the paths' deadlines (sets.go)
	dlSize    int          // its leaf count: a power of two >= the paths
}

// New validates cfg and builds an engine.
func New(cfg Config) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.CC == "" && cfg.NewCC == nil {
		cfg.CC = defaultCC
	}
	if cfg.MaxTransfers == 0 || cfg.MaxTransfers > chunk.MaxSlots {
		cfg.MaxTransfers = chunk.MaxSlots
	}
	if cfg.MaxWRPerPath == 0 {
		cfg.MaxWRPerPath = defaultMaxWRPerPath
	}
	if cfg.MinTimeout == 0 {
		cfg.MinTimeout = defaultMinTimeout
	}
	if cfg.QuarantineMin == 0 {
		cfg.QuarantineMin = defaultQuarantineMin
	}
	if cfg.QuarantineMax == 0 {
		cfg.QuarantineMax = max(defaultQuarantineMax, cfg.QuarantineMin)
	}
	if cfg.MaxProbeFailures == 0 {
		cfg.MaxProbeFailures = defaultMaxProbeFailures
	}
	if cfg.ECNPenalty == 0 {
		cfg.ECNPenalty = 1
	} else if cfg.ECNPenalty < 0 {
		cfg.ECNPenalty = 0
	}
	e := &Engine{cfg: cfg, rec: cfg.Recorder, rng: cfg.Rand, guard: cfg.PriorityGuard, spillAt: vtime.Never, plain: true}
	if e.guard == 0 {
		e.guard = defaultPriorityGuard
	} else if e.guard < 0 {
		e.guard = 0
	}
	if e.rng == nil {
		e.rng = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	}
	e.cfg.Paths = append([]PathConfig(nil), cfg.Paths...)
	e.paths = make([]path, len(cfg.Paths))
	e.ports = make([]*pacing.Port, MaxPaths)
	e.all = allPaths(len(cfg.Paths))
	e.up, e.recheck, e.dirty, e.freeDirty = e.all, e.all, e.all, e.all
	e.dlSize = 1
	for e.dlSize < len(cfg.Paths) {
		e.dlSize *= 2
	}
	e.dlTree = make([]vtime.Time, 2*e.dlSize)
	for i := range e.dlTree {
		e.dlTree[i] = vtime.Never
	}
	for i := range e.paths {
		if err := e.initPath(i); err != nil {
			return nil, err
		}
	}
	nWork := len(e.paths) * (cfg.MaxWRPerPath + 1)
	e.work = make([]work, nWork)
	for i := range e.work {
		e.work[i].nextFree = int32(i + 1)
		e.work[i].gen = 1
	}
	e.work[nWork-1].nextFree = -1
	e.transfers = make([]transfer, cfg.MaxTransfers)
	e.freeSlots = make([]uint16, cfg.MaxTransfers)
	for i := range e.freeSlots {
		e.freeSlots[i] = uint16(cfg.MaxTransfers - 1 - i)
	}
	e.active = make([]uint16, 0, cfg.MaxTransfers)
	e.initTiers()
	e.classesChanged()
	if cfg.Priorities {
		e.deepCls = 1
	}
	e.notes = make([]note, cfg.MaxTransfers)
	return e, nil
}

func (e *Engine) initPath(i int) error {
	pc := &e.cfg.Paths[i]
	if pc.Name == "" {
		pc.Name = fmt.Sprintf("path%d", i)
	}
	if pc.BaseRTT == 0 {
		pc.BaseRTT = defaultBaseRTT
	}
	if pc.MTU == 0 {
		pc.MTU = defaultMTU
	}
	info := cc.PathInfo{LineRate: pc.LineRate, BaseRTT: pc.BaseRTT, MTU: pc.MTU, Hops: max(pc.Hops, 1)}
	var alg cc.Algorithm
	var err error
	if e.cfg.NewCC != nil {
		alg, err = e.cfg.NewCC(i, info)
	} else {
		alg, err = cc.New(e.cfg.CC, e.cfg.CCParams, info)
	}
	if err != nil {
		return fmt.Errorf("multipath: path %d (%s): %w", i, pc.Name, err)
	}
	if alg == nil {
		return fmt.Errorf("multipath: path %d (%s): NewCC returned a nil algorithm", i, pc.Name)
	}
	p := &e.paths[i]
	p.cfg = *pc
	p.idx = i
	p.alg = alg
	for _, q := range e.cfg.Paths {
		if q.NIC == pc.NIC {
			p.nicPaths++
		}
	}
	p.rateEst = pc.LineRate
	p.fifo = make([]uint64, e.cfg.MaxWRPerPath+1)
	pcfg := pacing.Config{
		Rate:    min(alg.Rate(), pc.LineRate),
		Burst:   e.cfg.Pacing.Burst,
		PFCXoff: e.cfg.Pacing.PFCXoff,
		Segment: e.cfg.Segment,
		// The default segment scales with the line rate above 100 Gb/s
		// (pacing.SegmentRate): 512 KiB at 400 Gb/s.
		LineRate: pc.LineRate,
	}
	seg := e.cfg.Segment
	if e.cfg.Pacing.Hardware {
		if seg == 0 {
			seg = chunk.MaxSize
		}
		p.hwRate = min(alg.Rate(), pc.LineRate)
		e.hwSet |= bitOf(i)
	} else if !e.cfg.Pacing.Disabled {
		pc, err := pacing.New(pcfg)
		if err != nil {
			return fmt.Errorf("multipath: path %d (%s): %w", i, p.cfg.Name, err)
		}
		p.pacer = pc
		p.pacedRate = pc.Rate()
		// The port's line rate is the fastest of its paths' (they should
		// all state the NIC's rate). A NIC with a single path needs no
		// port bucket: that path's own pacer never exceeds the line rate.
		var line units.BitRate
		onNIC := 0
		for _, q := range e.cfg.Paths {
			if q.NIC == p.cfg.NIC {
				line = max(line, q.LineRate)
				onNIC++
			}
		}
		if onNIC > 1 && e.ports[p.cfg.NIC] == nil {
			port, err := pacing.NewPort(pacing.PortConfig{LineRate: line, Burst: e.cfg.Pacing.Burst, PFCXoff: e.cfg.Pacing.PFCXoff, Segment: e.cfg.Segment})
			if err != nil {
				return fmt.Errorf("multipath: NIC %d port pacer: %w", p.cfg.NIC, err)
			}
			e.ports[p.cfg.NIC] = port
		}
		if onNIC > 1 {
			p.port = e.ports[p.cfg.NIC]
		}
		if seg == 0 {
			seg = pc.Segment()
		}
	}
	if seg == 0 {
		seg = pacing.DefaultSegment
	}
	p.segBase = seg
	if e.segment == 0 || seg < e.segment {
		e.segment = seg
	}
	p.eff = float64(min(alg.Rate(), pc.LineRate)) / 8e9
	p.maxInFlight = e.cfg.MaxInFlight
	if p.maxInFlight == 0 {
		p.maxInFlight = max(2*pc.LineRate.BytesIn(pc.BaseRTT), pc.MTU)
	}
	e.refreshRate(p)
	e.refreshWindow(p) // even if the CC reports a zero rate and window
	return nil
}

// Segment returns the smallest of the paths' segment sizes, the largest
// work request each posts: Config.Segment or, by default, the pacer's
// segment for the path's line rate (pacing.Config.LineRate; 128 KiB up to
// 100 Gb/s) or, with hardware pacing, a whole chunk. A path shrinks its
// segment to half its window when the window is smaller than two segments.
func (e *Engine) Segment() units.Bytes { return e.segment }

// NumPaths returns the number of paths.
func (e *Engine) NumPaths() int { return len(e.paths) }

// CC returns path i's congestion controller (for inspection; do not feed it
// events directly).
func (e *Engine) CC(i int) cc.Algorithm { return e.paths[i].alg }

// Live returns the number of transfers not yet reported: held, in
// progress, or ended and draining (waiting for their posted work requests to complete
// or be fenced).
func (e *Engine) Live() int { return len(e.active) + e.draining + e.held }

// Transfer returns a snapshot of live transfer id, false if none.
func (e *Engine) Transfer(id TransferID) (TransferStats, bool) {
	for _, s := range e.active {
		t := &e.transfers[s]
		if t.id == id {
			return TransferStats{ID: id, Slot: int(s), Plan: t.plan, Done: t.done, Requeues: t.requeues, StartedAt: t.startAt}, true
		}
	}
	return TransferStats{}, false
}

// Stats returns a snapshot of path i.
func (e *Engine) Stats(i int) PathStats {
	p := &e.paths[i]
	return PathStats{
		Name: p.cfg.Name, State: p.state, Reason: p.reason,
		Bytes: p.bytes, Chunks: p.chunks, Requeues: p.requeues, Downs: p.downs,
		SRTT: p.srtt, MinRTT: p.minRTT, Window: e.window(p), Rate: p.alg.Rate(), RateEst: p.rateEst,
		InFlight: p.inflight, ECNMarks: p.ecn, CNPs: p.cnps, Marked: p.marked,
		Probes: p.probes, ProbeFails: p.probeFail,
	}
}

// Stale returns how many completions were ignored as unknown or stale.
func (e *Engine) Stale() uint64 { return e.stale }

func (e *Engine) event(k EventKind, now vtime.Time) {
	e.ev = Event{Kind: k, Now: now}
}
