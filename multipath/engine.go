package multipath

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
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

// TransferSpec describes a transfer to Submit.
type TransferSpec struct {
	ID   TransferID
	Size units.Bytes // tensor bytes, > 0
	// ChunkSize overrides Config.ChunkSize for this transfer (0: use it).
	ChunkSize units.Bytes
	// Local and Remote are the tensor's base offsets in the local send
	// region and the receiver's advertised region.
	Local, Remote units.Bytes
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
	live      bool
	gen       uint32 // bumped per Submit; work of an earlier occupant of the slot is stale
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
	alg       cc.Algorithm
	pacer     *pacing.Pacer // nil when pacing is disabled
	pacedRate units.BitRate
	eff       float64       // effective rate, bytes/ns (refreshRate)
	win       units.Bytes   // effective window (refreshRate)
	seg       units.Bytes   // work-request size (refreshRate)
	hwRate    units.BitRate // Pacing.Hardware: the rate to program
	hwDirty   bool          // hwRate changed since the last ActSetRate
	portRate  units.BitRate
	port      *pacing.Port // shared by paths on one NIC; nil when disabled

	state       PathState
	reason      string
	upAt        vtime.Time // errors of work posted before this are stale
	backoff     time.Duration
	until       vtime.Time // quarantine end
	probeID     uint64
	probeFail   int
	probeReason string // why the last probe failed
	qpErr       bool   // lost to an error completion: reset the QP before probing
	fromDead    bool   // the outstanding probe is a dead path's slow retry
	lastProbe   vtime.Time

	hasActive    bool
	activeSlot   uint16
	activeChunk  uint32
	inflight     units.Bytes
	wrOut        int
	blockedUntil vtime.Time // pacing: the active chunk's next segment may go then

	fifo     []uint64 // outstanding work ids in post order (ring)
	fifoHead int
	fifoLen  int

	maxInFlight units.Bytes
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
	rr        int      // round-robin cursor into active
	pending   units.Bytes
	pendingN  int

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
	repick    bool
	stale     uint64
	closedErr error
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
	e := &Engine{cfg: cfg, rec: cfg.Recorder, rng: cfg.Rand}
	if e.rng == nil {
		e.rng = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	}
	e.cfg.Paths = append([]PathConfig(nil), cfg.Paths...)
	e.paths = make([]path, len(cfg.Paths))
	e.ports = make([]*pacing.Port, MaxPaths)
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
	p.alg = alg
	p.rateEst = pc.LineRate
	p.fifo = make([]uint64, e.cfg.MaxWRPerPath+1)
	pcfg := pacing.Config{
		Rate:    min(alg.Rate(), pc.LineRate),
		Burst:   e.cfg.Pacing.Burst,
		PFCXoff: e.cfg.Pacing.PFCXoff,
		Segment: e.cfg.Segment,
	}
	seg := e.cfg.Segment
	if e.cfg.Pacing.Hardware {
		if seg == 0 {
			seg = chunk.MaxSize
		}
		p.hwRate = min(alg.Rate(), pc.LineRate)
		p.hwDirty = true
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
			p.portRate = p.port.Rate()
		}
		if seg == 0 {
			seg = pc.Segment()
		}
	}
	if seg == 0 {
		seg = pacing.DefaultSegment
	}
	if e.segment == 0 || seg < e.segment {
		e.segment = seg
	}
	p.eff = float64(min(alg.Rate(), pc.LineRate)) / 8e9
	p.maxInFlight = e.cfg.MaxInFlight
	if p.maxInFlight == 0 {
		p.maxInFlight = max(2*pc.LineRate.BytesIn(pc.BaseRTT), pc.MTU)
	}
	e.refreshRate(p)
	return nil
}

// Segment returns the segment size chunks are posted in.
func (e *Engine) Segment() units.Bytes { return e.segment }

// NumPaths returns the number of paths.
func (e *Engine) NumPaths() int { return len(e.paths) }

// CC returns path i's congestion controller (for inspection; do not feed it
// events directly).
func (e *Engine) CC(i int) cc.Algorithm { return e.paths[i].alg }

// Submit starts a transfer. It returns the transfer's slot, which the
// receiver needs to decode immediates (chunk.DecodeImm), and the chunk
// plan.
func (e *Engine) Submit(now vtime.Time, spec TransferSpec) (int, chunk.Plan, error) {
	if spec.Size <= 0 {
		return 0, chunk.Plan{}, fmt.Errorf("multipath: transfer %d: Size = %d B (valid: > 0)", spec.ID, spec.Size)
	}
	if spec.Local < 0 || spec.Remote < 0 {
		return 0, chunk.Plan{}, fmt.Errorf("multipath: transfer %d: Local %d / Remote %d offsets must be >= 0", spec.ID, spec.Local, spec.Remote)
	}
	for _, s := range e.active {
		if e.transfers[s].id == spec.ID {
			return 0, chunk.Plan{}, fmt.Errorf("%w: %d", ErrDuplicateID, spec.ID)
		}
	}
	usable := 0
	for i := range e.paths {
		if e.paths[i].state.usable() {
			usable++
		}
	}
	if usable == 0 {
		return 0, chunk.Plan{}, fmt.Errorf("%w for transfer %d: %s", ErrNoPath, spec.ID, e.pathReport())
	}
	cs := spec.ChunkSize
	if cs == 0 {
		cs = e.cfg.ChunkSize
	}
	plan, err := chunk.NewPlan(spec.Size, cs, usable)
	if err != nil {
		return 0, chunk.Plan{}, fmt.Errorf("multipath: transfer %d: %w", spec.ID, err)
	}
	if len(e.freeSlots) == 0 {
		return 0, chunk.Plan{}, fmt.Errorf("%w (%d live)", ErrTooManyTransfers, len(e.active))
	}
	slot := e.freeSlots[len(e.freeSlots)-1]
	e.freeSlots = e.freeSlots[:len(e.freeSlots)-1]
	t := &e.transfers[slot]
	chunks := t.chunks[:0]
	if cap(chunks) < plan.Count {
		chunks = make([]chunkState, plan.Count)
	} else {
		chunks = chunks[:plan.Count]
		clear(chunks)
	}
	*t = transfer{
		live: true, gen: t.gen + 1, id: spec.ID, plan: plan, local: spec.Local, remote: spec.Remote,
		chunks: chunks, reqHead: -1, reqTail: -1, startAt: now,
	}
	e.active = append(e.active, slot)
	e.repick = true
	e.pending += plan.Size
	e.pendingN += plan.Count
	if e.rec != nil {
		e.event(EvTransferStart, now)
		e.ev.Transfer, e.ev.Bytes, e.ev.Chunk, e.ev.Size = spec.ID, plan.Size, uint32(plan.Count), plan.ChunkSize
		e.rec.Record(&e.ev)
	}
	return int(slot), plan, nil
}

// Live returns the number of transfers in progress.
func (e *Engine) Live() int { return len(e.active) }

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

// ---------------------------------------------------------------------------
// Inputs

// OnCompletion feeds one send completion (or a failed post, with OK false)
// at now. Unknown and stale work ids are counted and ignored.
func (e *Engine) OnCompletion(now vtime.Time, c *Completion) {
	e.repick = true
	idx := int(uint32(c.WorkID)) - 1
	gen := uint32(c.WorkID >> 32)
	if idx < 0 || idx >= len(e.work) || e.work[idx].gen != gen || e.work[idx].kind == workFree {
		e.stale++
		return
	}
	w := e.work[idx] // copy: the slot is freed below
	e.freeWorkSlot(idx)
	p := &e.paths[w.path]
	p.wrOut--
	if w.kind == workProbe {
		e.onProbeDone(now, p, int(w.path), w.postAt, c.OK, c.Reason)
		return
	}
	p.inflight -= w.len
	if !c.OK {
		if w.postAt >= p.upAt && p.state == PathUp {
			p.qpErr = true
			e.lose(now, int(w.path), PathQuarantined, c.Reason)
		}
		return
	}
	e.sample(now, p, w.len, w.postAt, c)
	t := &e.transfers[w.slot]
	if !t.live || t.gen != w.tgen || int(w.chunk) >= len(t.chunks) {
		return
	}
	ch := &t.chunks[w.chunk]
	if ch.attempt != w.attempt || ch.status == chunkDone || ch.status == chunkPending {
		return // an older attempt finishing late
	}
	ch.acked += w.len
	if ch.status == chunkPosted && ch.acked >= chunkLen(&t.plan, int(w.chunk)) {
		e.chunkDone(now, w.slot, w.chunk, int(w.path), now.Sub(w.postAt))
	}
}

// sample updates a path's RTT, rate and CC state from one OK completion.
func (e *Engine) sample(now vtime.Time, p *path, n units.Bytes, postAt vtime.Time, c *Completion) {
	raw := now.Sub(postAt)
	if raw < 0 {
		raw = 0
	}
	// TIMELY §4.1: the completion time of a segment includes its own
	// serialisation; subtract it at line rate to get the network RTT.
	rtt := raw - p.cfg.LineRate.TxTime(n)
	if rtt < time.Nanosecond {
		rtt = time.Nanosecond
	}
	if p.srtt == 0 {
		p.srtt, p.rawSRTT, p.rawVar = rtt, raw, raw/2
	} else {
		// RFC 6298 §2.3 gains.
		d := p.rawSRTT - raw
		if d < 0 {
			d = -d
		}
		p.rawVar += (d - p.rawVar) / 4
		p.rawSRTT += (raw - p.rawSRTT) / 8
		p.srtt += (rtt - p.srtt) / 8
	}
	if p.minRTT == 0 || rtt < p.minRTT {
		p.minRTT = rtt
	}
	// Delivery rate: bytes over the time since the later of the previous
	// completion and this work request's post (a busy path's service rate).
	from := max(p.lastAck, postAt)
	if dt := now.Sub(from); dt > 0 {
		s := units.RateOf(n, dt)
		p.rateEst += units.BitRate(float64(s-p.rateEst) * rateGain)
		p.rateEst = p.rateEst.Clamp(units.Mbps, p.cfg.LineRate)
	}
	p.lastAck = now
	p.bytes += n
	ack := cc.Ack{Now: now, Acked: n, RTT: rtt, InFlight: p.inflight, ECNMarked: c.ECNMarked, NHops: c.NHops}
	if c.NHops > 0 {
		ack.Hops = c.Hops
	}
	p.alg.OnAck(ack)
	e.syncRate(now, p)
}

// syncRate pushes the CC rate into the path's pacer (or marks it for an
// ActSetRate with hardware pacing) and refreshes the cached effective rate.
func (e *Engine) syncRate(now vtime.Time, p *path) {
	e.refreshRate(p)
	if p.pacer == nil {
		if e.cfg.Pacing.Hardware {
			if r := min(p.alg.Rate(), p.cfg.LineRate); r != p.hwRate {
				p.hwRate, p.hwDirty = r, true
			}
		}
		return
	}
	r := min(p.alg.Rate(), p.cfg.LineRate)
	if r != p.pacedRate {
		p.pacer.SetRate(now, r)
		p.pacedRate = r
	}
}

// OnProbeReply feeds an RTT measured by a backend's own ping-pong probe on
// path i (backends whose probes complete as work requests use
// OnCompletion instead).
func (e *Engine) OnProbeReply(now vtime.Time, i int, rtt time.Duration) {
	if i < 0 || i >= len(e.paths) || rtt <= 0 {
		return
	}
	p := &e.paths[i]
	if p.srtt == 0 {
		p.srtt = rtt
	} else {
		p.srtt += (rtt - p.srtt) / 8
	}
	if p.minRTT == 0 || rtt < p.minRTT {
		p.minRTT = rtt
	}
	e.refreshRate(p)
	if e.rec != nil {
		e.event(EvProbe, now)
		e.ev.Path, e.ev.RTT = i, rtt
		e.rec.Record(&e.ev)
	}
}

// OnCounters feeds a reading of path i's cumulative counters: CE-marked
// packets and CNPs received. The first reading is a baseline; a reading
// lower than the previous one is taken as a counter reset.
func (e *Engine) OnCounters(now vtime.Time, i int, ecnMarked, cnps uint64) {
	if i < 0 || i >= len(e.paths) {
		return
	}
	p := &e.paths[i]
	if !p.sawCounters {
		p.sawCounters, p.cntECN, p.cntCNP = true, ecnMarked, cnps
		return
	}
	e.repick = true
	dE, dC := ecnMarked-p.cntECN, cnps-p.cntCNP
	if ecnMarked < p.cntECN {
		dE = ecnMarked
	}
	if cnps < p.cntCNP {
		dC = cnps
	}
	p.cntECN, p.cntCNP = ecnMarked, cnps
	if dE == 0 && dC == 0 {
		return
	}
	p.ecn += dE
	p.cnps += dC
	p.marks += dE + dC
	if dC > 0 {
		p.alg.OnCNP(cc.CNP{Now: now, Count: int(min(dC, math.MaxInt32))})
		e.syncRate(now, p)
		if e.rec != nil {
			e.event(EvCNP, now)
			e.ev.Path, e.ev.ECN = i, dC
			e.rec.Record(&e.ev)
		}
	}
}

// OnPathDown reports that path i is down (link down, QP torn down). Its
// chunks are requeued; it is not probed until OnPathUp. reason should be
// a static string.
func (e *Engine) OnPathDown(now vtime.Time, i int, reason string) {
	e.repick = true
	if i < 0 || i >= len(e.paths) {
		return
	}
	if s := e.paths[i].state; s == PathDown || s == PathDead {
		return
	}
	e.lose(now, i, PathDown, reason)
}

// OnPathUp reports that path i is back; it is probed before reuse.
func (e *Engine) OnPathUp(now vtime.Time, i int) {
	e.repick = true
	if i < 0 || i >= len(e.paths) {
		return
	}
	p := &e.paths[i]
	if p.state != PathDown {
		return
	}
	p.state = PathQuarantined
	p.until = now
	p.probeFail = 0
}

// OnTimer runs the engine's timers due at now: CC timers, pacing wake-ups
// (nothing to do: Actions retries), stall timeouts and quarantine expiry
// (Actions sends the probes). Early or repeated calls are harmless.
func (e *Engine) OnTimer(now vtime.Time) {
	e.repick = true
	for i := range e.paths {
		p := &e.paths[i]
		if d := p.alg.Deadline(); d != 0 && d <= now {
			p.alg.OnTimer(now)
			e.syncRate(now, p)
		}
		if p.state != PathUp {
			continue
		}
		if id, ok := e.oldest(p); ok {
			w := &e.work[int(uint32(id))-1]
			if now >= w.postAt.Add(e.timeout(p)) {
				p.alg.OnTimeout(now)
				e.syncRate(now, p)
				e.lose(now, i, PathQuarantined, "stalled")
			}
		}
	}
}

// timeout is path p's stall timeout: 2·srtt + 4·rttvar of the post→
// completion time, at least Config.MinTimeout.
func (e *Engine) timeout(p *path) time.Duration {
	return max(e.cfg.MinTimeout, 2*p.rawSRTT+4*p.rawVar)
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

// Deadline returns the earliest instant the engine needs OnTimer or
// Actions to run again, 0 if none.
func (e *Engine) Deadline() vtime.Time {
	var d vtime.Time
	for i := range e.paths {
		p := &e.paths[i]
		d = vtime.Earliest(d, p.alg.Deadline())
		switch p.state {
		case PathQuarantined, PathDead:
			if p.probeID == 0 {
				d = vtime.Earliest(d, p.until)
			}
		case PathUp:
			if p.hasActive && p.blockedUntil != 0 {
				d = vtime.Earliest(d, p.blockedUntil)
			}
			if id, ok := e.oldest(p); ok {
				d = vtime.Earliest(d, e.work[int(uint32(id))-1].postAt.Add(e.timeout(p)))
			} else if e.cfg.ProbeInterval > 0 && p.probeID == 0 {
				d = vtime.Earliest(d, p.lastProbe.Add(e.cfg.ProbeInterval))
			}
		}
	}
	return d
}

// ---------------------------------------------------------------------------
// Outputs

// Actions fills dst with what the driver should do now and returns how
// many actions it wrote. Call it again while it fills dst completely.
func (e *Engine) Actions(now vtime.Time, dst []Action) int {
	n := 0
	for n < len(dst) && e.noteLen > 0 {
		nt := e.notes[e.noteHead]
		e.notes[e.noteHead] = note{}
		e.noteHead = (e.noteHead + 1) % len(e.notes)
		e.noteLen--
		dst[n] = Action{Kind: nt.kind, Transfer: nt.id, Err: nt.err}
		n++
	}
	n = e.probes(now, dst, n)
	if e.cfg.Pacing.Hardware {
		for i := range e.paths {
			p := &e.paths[i]
			if p.hwDirty && n < len(dst) {
				p.hwDirty = false
				dst[n] = Action{Kind: ActSetRate, Path: i, Rate: p.hwRate}
				n++
			}
		}
	}
	for n < len(dst) {
		progress := false
		np := len(e.paths)
		for k := 0; k < np && n < len(dst); k++ {
			i := e.rrPath + k
			if i >= np {
				i -= np
			}
			p := &e.paths[i]
			if p.state != PathUp || !p.hasActive || p.blockedUntil > now {
				continue
			}
			// A pacing block that has passed is over even if the window
			// now holds the path: Deadline must not keep returning it.
			p.blockedUntil = 0
			if (p.inflight == 0 || p.inflight < p.win+2*p.seg) && p.wrOut < e.cfg.MaxWRPerPath {
				var moved bool
				n, moved = e.post(now, i, dst, n)
				progress = progress || moved
			}
		}
		e.rrPath++
		if e.rrPath >= np {
			e.rrPath = 0
		}
		if n < len(dst) && e.pendingN > 0 && (e.repick || progress) {
			if i := e.pick(now); i >= 0 && e.assign(now, i) {
				progress = true
			} else {
				e.repick = false
			}
		}
		if !progress {
			break
		}
	}
	return n
}

// probes emits probes for quarantined paths whose backoff has passed and,
// with ProbeInterval, for idle paths.
func (e *Engine) probes(now vtime.Time, dst []Action, n int) int {
	for i := range e.paths {
		if n >= len(dst) {
			break
		}
		p := &e.paths[i]
		if p.probeID != 0 || p.wrOut >= e.cfg.MaxWRPerPath+1 {
			continue
		}
		due := (p.state == PathQuarantined || p.state == PathDead) && now >= p.until
		idle := e.cfg.ProbeInterval > 0 && p.state == PathUp && p.wrOut == 0 && now >= p.lastProbe.Add(e.cfg.ProbeInterval)
		if !due && !idle {
			continue
		}
		id, ok := e.allocWork(workProbe, i, 0, 0, 0, 0, now)
		if !ok {
			break
		}
		if due {
			p.fromDead = p.state == PathDead
			p.state = PathProbing
		}
		p.probeID = id
		p.lastProbe = now
		p.probes++
		dst[n] = Action{Kind: ActProbe, Path: i, WorkID: id, HasImm: true, ImmData: chunk.ProbeImm, Reset: p.qpErr && due}
		n++
	}
	return n
}

func (e *Engine) onProbeDone(now vtime.Time, p *path, i int, postAt vtime.Time, ok bool, reason string) {
	p.probeID = 0
	if ok {
		rtt := now.Sub(postAt)
		if p.state == PathProbing {
			p.qpErr = false
			p.state = PathUp
			p.upAt = now
			p.probeFail = 0
			p.reason, p.probeReason = "", ""
			p.blockedUntil = 0
			if e.rec != nil {
				e.event(EvPathUp, now)
				e.ev.Path = i
				e.rec.Record(&e.ev)
			}
		}
		e.OnProbeReply(now, i, rtt)
		return
	}
	if p.state == PathUp {
		p.qpErr = true
		e.lose(now, i, PathQuarantined, reason)
		return
	}
	if p.state != PathProbing {
		return
	}
	// A failed work request leaves an RC queue pair in the error state,
	// whatever took the path out of use first (a stall, say): the next
	// probe must reset it.
	p.qpErr = true
	p.probeFail++
	p.probeReason = reason
	if p.fromDead || p.probeFail >= e.cfg.MaxProbeFailures {
		p.state = PathDead
		p.until = now.Add(e.cfg.QuarantineMax)
		e.checkUsable(now)
		return
	}
	p.state = PathQuarantined
	p.backoff = min(2*p.backoff, e.cfg.QuarantineMax)
	p.until = now.Add(p.backoff)
	if e.rec != nil {
		e.event(EvPathQuarantine, now)
		e.ev.Path, e.ev.Reason, e.ev.Latency = i, reason, p.backoff
		e.rec.Record(&e.ev)
	}
}

// window is path p's effective window: the CC window capped by
// MaxInFlight and, with software pacing and a rate-based algorithm below
// line rate, by one rate × base-RTT product (at least one MTU). The pacer
// enforces the rate; the window bounds what can pile up in the NIC's send
// queue while PFC pauses the port: posted work requests leave at line rate
// once the pause lifts, so a backlog posted at an old, higher rate would
// otherwise undo a rate cut and keep the queue above Kmin long enough for
// DCQCN to cut again and again. Hardware pacing drains the backlog at the
// rate itself. Without pacing (PacingConfig.Disabled) nothing enforces a
// rate-based algorithm's rate: that is what "pacing off" means.
func (e *Engine) window(p *path) units.Bytes { return p.win }

func (e *Engine) computeWindow(p *path) units.Bytes {
	w := min(p.alg.Window(), p.maxInFlight)
	if p.pacer != nil {
		if r := p.alg.Rate(); r < p.cfg.LineRate {
			w = min(w, max(r.BytesIn(p.cfg.BaseRTT), p.cfg.MTU))
		}
	}
	return w
}

// segFor is the work-request size for path p: Config.Segment (or the
// pacer's), shrunk to half the path's effective window, in whole MTUs,
// when that window is smaller than two segments. Feedback on a window-based
// path arrives per completion, so a segment larger than the window would
// stretch the control loop to one segment time (at a collapsed window, many
// milliseconds) instead of about an RTT.
func (e *Engine) segFor(p *path) units.Bytes { return p.seg }

func (e *Engine) computeSegFor(p *path) units.Bytes {
	if e.cfg.Pacing.Hardware && p.alg.Window() == units.MaxBytes {
		return e.segment // the NIC paces a rate-based path: whole chunks
	}
	w := p.win
	if w >= 2*e.segment {
		return e.segment
	}
	mtu := p.cfg.MTU
	return max(mtu, min(e.segment, w/2/mtu*mtu))
}

// post posts as many segments of path i's active chunk as window, queue
// depth and pacing allow.
func (e *Engine) post(now vtime.Time, i int, dst []Action, n int) (int, bool) {
	p := &e.paths[i]
	if p.blockedUntil > now {
		return n, false
	}
	p.blockedUntil = 0
	t := &e.transfers[p.activeSlot]
	ch := &t.chunks[p.activeChunk]
	clen := chunkLen(&t.plan, int(p.activeChunk))
	moved := false
	win := e.window(p)
	// Read the pacers once per call and settle once at the end: a burst
	// of several segments costs two bucket reads and two updates, not
	// four per segment.
	// Cheap checks first: a path whose window or send queue is full needs
	// no pacer reads.
	segMax := e.segFor(p)
	if first := min(segMax, clen-ch.posted); (p.inflight > 0 && p.inflight+first > win+2*segMax) ||
		p.wrOut >= e.cfg.MaxWRPerPath || e.freeWork < 0 || ch.posted >= clen {
		return n, false
	}
	avail, pb, qb := units.MaxBytes, units.MaxBytes, units.MaxBytes
	if p.pacer != nil {
		pb = p.pacer.Budget(now)
		if p.port != nil {
			qb = p.port.Budget(now)
		}
		avail = min(pb, qb)
	}
	var sent units.Bytes
	paced := false
	for n < len(dst) && ch.posted < clen {
		seg := min(segMax, clen-ch.posted)
		// A completion comes only after a whole work request crossed, so
		// the engine's in-flight count overstates the bytes in the
		// network by up to one segment being serialised and one queued
		// behind it: allow the window plus two segments, or a path with
		// a window of one BDP could not keep its pipe full.
		if p.inflight > 0 && p.inflight+seg > win+2*segMax {
			break
		}
		if p.wrOut >= e.cfg.MaxWRPerPath || e.freeWork < 0 {
			break
		}
		if seg > avail {
			paced = true
			break
		}
		avail -= seg
		sent += seg
		off := chunkOff(&t.plan, int(p.activeChunk)) + ch.posted
		last := ch.posted+seg == clen
		id, _ := e.allocWork(workSegment, i, p.activeSlot, p.activeChunk, ch.attempt, seg, now)
		a := Action{
			Kind: ActPost, Path: i, WorkID: id, Transfer: t.id, Chunk: p.activeChunk,
			Offset: off, Local: t.local + off, Remote: t.remote + off, Len: seg, Attempt: ch.attempt,
		}
		if last {
			a.HasImm = true
			a.ImmData, _ = chunk.EncodeImm(int(p.activeSlot), p.activeChunk)
		}
		dst[n] = a
		n++
		ch.posted += seg
		p.inflight += seg
		p.alg.OnSend(cc.Sent{Now: now, Bytes: seg, InFlight: p.inflight})
		moved = true
		if last {
			ch.status = chunkPosted
			p.hasActive = false
			if ch.acked >= clen { // completions raced ahead (cannot happen on RC, but be exact)
				e.chunkDone(now, p.activeSlot, p.activeChunk, i, 0)
			}
		}
	}
	if moved {
		e.refreshRate(p) // OnSend may move a window (HPCC's update mark)
	}
	if p.pacer != nil {
		if sent > 0 {
			p.pacer.OnSent(now, sent)
			if p.port != nil {
				p.port.OnSent(now, sent)
			}
		}
		if paced {
			// Wake when both buckets hold the next segment: the deficit
			// at each bucket's rate, rounded up (Pacer.NextSend gives
			// the same instant to the nanosecond but costs several
			// bucket reads; a wake-up a nanosecond early only re-blocks).
			seg := min(segMax, clen-ch.posted)
			wait := p.pacedRate.TxTime(seg - (pb - sent))
			if d := seg - (qb - sent); p.port != nil && d > 0 {
				wait = max(wait, p.portRate.TxTime(d))
			}
			p.blockedUntil = now.Add(max(wait, time.Nanosecond))
		}
	}
	return n, moved
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
	id := uint64(w.gen)<<32 | uint64(idx+1)
	p := &e.paths[pathIdx]
	p.wrOut++
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
	w := &e.work[idx]
	w.kind = workFree
	w.gen++
	if w.gen == 0 {
		w.gen = 1
	}
	w.nextFree = e.freeWork
	e.freeWork = int32(idx)
}

// ---------------------------------------------------------------------------
// Path choice

// free reports whether path p can take a new chunk.
func (e *Engine) free(p *path) bool {
	return p.state == PathUp && !p.hasActive && p.wrOut < e.cfg.MaxWRPerPath &&
		(p.inflight == 0 || p.inflight < e.window(p)+e.segFor(p))
}

// effRate is path p's effective rate in bytes per nanosecond, as cached
// by refreshRate.
func (e *Engine) effRate(p *path) float64 { return p.eff }

// refreshRate recomputes p's cached effective rate, window and segment
// size after anything they depend on changed: every call into p's CC
// algorithm is followed by one.
func (e *Engine) refreshRate(p *path) {
	p.eff = e.computeEffRate(p)
	p.win = e.computeWindow(p)
	p.seg = e.computeSegFor(p)
}

func (e *Engine) computeEffRate(p *path) float64 {
	r := min(p.rateEst, p.alg.Rate(), p.cfg.LineRate)
	if s := p.srtt; s > 0 {
		if w := p.alg.Window(); w < units.MaxBytes {
			r = min(r, units.RateOf(w, s))
		}
	}
	if r < units.Mbps {
		r = units.Mbps
	}
	return float64(r) / 8e9
}

// finish estimates, in ns from now, when a chunk of c bytes placed on p
// would complete.
func (e *Engine) finish(now vtime.Time, p *path, c units.Bytes, r float64) (f, backlog float64) {
	backlog = float64(p.inflight)
	if p.hasActive {
		t := &e.transfers[p.activeSlot]
		backlog += float64(chunkLen(&t.plan, int(p.activeChunk)) - t.chunks[p.activeChunk].posted)
	}
	f = (backlog+float64(c))/r + float64(p.srtt)/2
	if p.blockedUntil > now {
		f += float64(p.blockedUntil - now)
	}
	return f * (1 + e.cfg.ECNPenalty*p.marked), backlog
}

// pick chooses the path for the next pending chunk, -1 to wait.
func (e *Engine) pick(now vtime.Time) int {
	var freeSet [MaxPaths]bool
	anyFree := false
	for i := range e.paths {
		if e.free(&e.paths[i]) {
			freeSet[i], anyFree = true, true
		}
	}
	if !anyFree {
		return -1
	}
	c := e.peekLen()
	switch e.cfg.Policy {
	case RoundRobin:
		np := len(e.paths)
		for k := 1; k <= np; k++ {
			i := (e.lastPath + k) % np
			if freeSet[i] {
				e.lastPath = i
				return i
			}
		}
		return -1
	case Random:
		var cand [MaxPaths]int8
		m := 0
		for i := range e.paths {
			if freeSet[i] {
				cand[m] = int8(i)
				m++
			}
		}
		if m == 0 {
			return -1
		}
		return int(cand[e.rng.IntN(m)])
	case MinRTT:
		best := -1
		for i := range e.paths {
			p := &e.paths[i]
			if freeSet[i] && (best < 0 || p.srtt < e.paths[best].srtt) {
				best = i
			}
		}
		return best
	case PowerOfTwo:
		var cand [MaxPaths]int8
		m := 0
		for i := range e.paths {
			if freeSet[i] {
				cand[m] = int8(i)
				m++
			}
		}
		switch m {
		case 0:
			return -1
		case 1:
			return int(cand[0])
		}
		a := e.rng.IntN(m)
		b := e.rng.IntN(m - 1)
		if b >= a {
			b++
		}
		pa, pb := &e.paths[cand[a]], &e.paths[cand[b]]
		fa, _ := e.finish(now, pa, c, e.effRate(pa))
		fb, _ := e.finish(now, pb, c, e.effRate(pb))
		if fb < fa {
			return int(cand[b])
		}
		return int(cand[a])
	}
	// CongestionAware: earliest estimated finish among free paths, unless
	// another path would finish the chunk sooner and still has time for the
	// rest of the work (ECF, Lim et al., CoNEXT'17): a free path q waits if
	// f_q > max(min_{p≠q} f_p, T), where f_p is p's estimated finish for the
	// chunk and T = (backlog of the others + pending bytes) / (their rates)
	// the time the others need for all remaining work. In bulk T is large
	// and every path takes chunks; near the tail a slow path stays idle.
	var f [MaxPaths]float64
	best, bestF, bestR, bestB := -1, math.Inf(1), 0.0, 0.0
	sumR, sumB := 0.0, 0.0
	for i := range e.paths {
		p := &e.paths[i]
		f[i] = math.Inf(1)
		if p.state != PathUp {
			continue
		}
		r := e.effRate(p)
		fi, b := e.finish(now, p, c, r)
		f[i] = fi
		sumR += r
		sumB += b
		if fi < bestF && freeSet[i] {
			best, bestF, bestR, bestB = i, fi, r, b
		}
	}
	if best < 0 {
		return -1
	}
	if others := sumR - bestR; others > 0 {
		minOther := math.Inf(1)
		for i := range e.paths {
			if i != best && f[i] < minOther {
				minOther = f[i]
			}
		}
		tOthers := (sumB - bestB + float64(e.pending)) / others
		if bestF > max(minOther, tOthers) {
			return -1
		}
	}
	return best
}

// peekLen returns the length of the chunk assign would hand out next.
func (e *Engine) peekLen() units.Bytes {
	na := len(e.active)
	for k := 0; k < na; k++ {
		t := &e.transfers[e.active[(e.rr+k)%na]]
		if t.reqHead >= 0 {
			return chunkLen(&t.plan, int(t.reqHead))
		}
		if t.nextFresh < t.plan.Count {
			return chunkLen(&t.plan, t.nextFresh)
		}
	}
	return 0
}

// assign hands the next pending chunk (round-robin over transfers) to
// path i.
func (e *Engine) assign(now vtime.Time, i int) bool {
	na := len(e.active)
	for k := 0; k < na; k++ {
		j := (e.rr + k) % na
		slot := e.active[j]
		t := &e.transfers[slot]
		var idx int
		switch {
		case t.reqHead >= 0:
			idx = int(t.reqHead)
			ch := &t.chunks[idx]
			t.reqHead = ch.next
			if t.reqHead < 0 {
				t.reqTail = -1
			}
			ch.queued = false
		case t.nextFresh < t.plan.Count:
			idx = t.nextFresh
			t.nextFresh++
		default:
			continue
		}
		e.rr = (j + 1) % na
		p := &e.paths[i]
		ch := &t.chunks[idx]
		ch.status = chunkActive
		ch.path = int16(i)
		ch.attempt++
		ch.posted, ch.acked = 0, 0
		ch.startAt = now
		ch.marks0 = p.marks
		clen := chunkLen(&t.plan, idx)
		e.pending -= clen
		e.pendingN--
		p.hasActive, p.activeSlot, p.activeChunk = true, slot, uint32(idx)
		if e.rec != nil {
			e.event(EvChunkStart, now)
			e.ev.Transfer, e.ev.Chunk, e.ev.Path, e.ev.Attempt, e.ev.Bytes = t.id, uint32(idx), i, ch.attempt, clen
			e.rec.Record(&e.ev)
		}
		return true
	}
	return false
}

// ---------------------------------------------------------------------------
// Completion and failure

func (e *Engine) chunkDone(now vtime.Time, slot uint16, idx uint32, pi int, rtt time.Duration) {
	t := &e.transfers[slot]
	ch := &t.chunks[idx]
	ch.status = chunkDone
	t.done++
	p := &e.paths[pi]
	p.chunks++
	p.backoff = 0
	marked := p.marks - ch.marks0
	x := 0.0
	if marked > 0 {
		x = 1
	}
	p.marked += (x - p.marked) * markedGain
	if e.rec != nil {
		clen := chunkLen(&t.plan, int(idx))
		e.event(EvChunkDone, now)
		e.ev.Transfer, e.ev.Chunk, e.ev.Path, e.ev.Attempt, e.ev.Bytes = t.id, idx, pi, ch.attempt, clen
		e.ev.RTT, e.ev.Latency, e.ev.ECN = rtt, now.Sub(ch.startAt), marked
		e.rec.Record(&e.ev)
		e.event(EvPathSample, now)
		e.ev.Path, e.ev.Window, e.ev.Rate, e.ev.InFlight, e.ev.SRTT, e.ev.Bytes = pi, e.window(p), p.alg.Rate(), p.inflight, p.srtt, p.bytes
		e.rec.Record(&e.ev)
	}
	if t.done == t.plan.Count {
		e.finishTransfer(now, slot, nil)
	}
}

// finishTransfer retires slot with err (nil: done).
func (e *Engine) finishTransfer(now vtime.Time, slot uint16, err error) {
	t := &e.transfers[slot]
	if !t.live {
		return
	}
	kind, ev := ActDone, EvTransferDone
	if err != nil {
		kind, ev = ActFailed, EvTransferFailed
		// Withdraw the transfer's unassigned and active chunks.
		for i := range t.chunks {
			ch := &t.chunks[i]
			if ch.status == chunkPending {
				if i >= t.nextFresh || ch.queued {
					e.pending -= chunkLen(&t.plan, i)
					e.pendingN--
				}
			}
		}
		for i := range e.paths {
			p := &e.paths[i]
			if p.hasActive && p.activeSlot == slot {
				p.hasActive = false
			}
		}
	}
	if e.rec != nil {
		e.event(ev, now)
		e.ev.Transfer, e.ev.Bytes = t.id, t.plan.Size
		if err != nil {
			e.ev.Reason = "no usable path"
		}
		e.rec.Record(&e.ev)
	}
	e.pushNote(note{kind: kind, id: t.id, err: err})
	t.live = false
	for j, s := range e.active {
		if s == slot {
			copy(e.active[j:], e.active[j+1:])
			e.active = e.active[:len(e.active)-1]
			if e.rr > j {
				e.rr--
			}
			break
		}
	}
	if len(e.active) > 0 {
		e.rr %= len(e.active)
	} else {
		e.rr = 0
	}
	e.freeSlots = append(e.freeSlots, slot)
}

func (e *Engine) pushNote(nt note) {
	if e.noteLen == len(e.notes) {
		panic("multipath: BUG: note ring overflow")
	}
	e.notes[(e.noteHead+e.noteLen)%len(e.notes)] = nt
	e.noteLen++
}

// lose takes path i out of use: state becomes to (PathQuarantined or
// PathDown), its chunks are requeued, and transfers fail if no path is left.
func (e *Engine) lose(now vtime.Time, i int, to PathState, reason string) {
	p := &e.paths[i]
	wasUp := p.state == PathUp
	p.state = to
	p.reason = reason
	p.upAt = vtime.Never
	p.hasActive = false
	p.blockedUntil = 0
	if to == PathQuarantined {
		p.backoff = min(max(2*p.backoff, e.cfg.QuarantineMin), e.cfg.QuarantineMax)
		p.until = now.Add(p.backoff)
	}
	if wasUp {
		p.downs++
		e.requeuePath(now, i, reason)
	}
	if e.rec != nil {
		e.event(EvPathDown, now)
		e.ev.Path, e.ev.Reason = i, reason
		e.rec.Record(&e.ev)
		if to == PathQuarantined {
			e.event(EvPathQuarantine, now)
			e.ev.Path, e.ev.Reason, e.ev.Latency = i, reason, p.backoff
			e.rec.Record(&e.ev)
		}
	}
	e.checkUsable(now)
}

// requeuePath puts every unfinished chunk attempt on path i back in its
// transfer's requeue list.
func (e *Engine) requeuePath(now vtime.Time, i int, reason string) {
	for _, slot := range e.active {
		t := &e.transfers[slot]
		for j := range t.chunks {
			ch := &t.chunks[j]
			if (ch.status != chunkActive && ch.status != chunkPosted) || int(ch.path) != i {
				continue
			}
			ch.status = chunkPending
			ch.posted, ch.acked = 0, 0
			ch.queued = true
			ch.next = -1
			if t.reqTail >= 0 {
				t.chunks[t.reqTail].next = int32(j)
			} else {
				t.reqHead = int32(j)
			}
			t.reqTail = int32(j)
			t.requeues++
			e.paths[i].requeues++
			e.pending += chunkLen(&t.plan, j)
			e.pendingN++
			if e.rec != nil {
				e.event(EvChunkRequeue, now)
				e.ev.Transfer, e.ev.Chunk, e.ev.Path, e.ev.Attempt, e.ev.Reason = t.id, uint32(j), i, ch.attempt, reason
				e.rec.Record(&e.ev)
			}
		}
	}
}

// checkUsable fails every live transfer when no path is usable.
func (e *Engine) checkUsable(now vtime.Time) {
	for i := range e.paths {
		if e.paths[i].state.usable() {
			return
		}
	}
	if len(e.active) == 0 {
		return
	}
	report := e.pathReport()
	for len(e.active) > 0 {
		slot := e.active[0]
		err := fmt.Errorf("%w for transfer %d (%d of %d chunks done): %s",
			ErrNoPath, e.transfers[slot].id, e.transfers[slot].done, e.transfers[slot].plan.Count, report)
		e.finishTransfer(now, slot, err)
	}
}

// pathReport describes every path and why it is not usable.
func (e *Engine) pathReport() string {
	var b strings.Builder
	for i := range e.paths {
		p := &e.paths[i]
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "path %d (%s): %s", i, p.cfg.Name, p.state)
		if p.reason != "" {
			fmt.Fprintf(&b, " (%s)", p.reason)
		}
		if p.probeFail > 0 {
			fmt.Fprintf(&b, " after %d failed probes (last: %s)", p.probeFail, p.probeReason)
		}
	}
	return b.String()
}

// chunkLen returns chunk i's length under plan.
func chunkLen(plan *chunk.Plan, i int) units.Bytes {
	_, n := plan.Span(i)
	return n
}

// chunkOff returns chunk i's offset under plan.
func chunkOff(plan *chunk.Plan, i int) units.Bytes {
	off, _ := plan.Span(i)
	return off
}
