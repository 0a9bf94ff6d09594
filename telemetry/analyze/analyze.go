package analyze

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/mptx-dev/mptx/telemetry/schema"
	"github.com/mptx-dev/mptx/units"
)

// Options tune Analyze. The zero value uses the defaults.
type Options struct {
	// StragglerFactor: an acknowledged attempt whose latency exceeds this
	// multiple of its path's median chunk latency is a straggler. Zero
	// means 2.
	StragglerFactor float64
	// SlowFactor: a path whose per-chunk rate (PathStats.ChunkRate) is
	// below this fraction of the median path's is called the bottleneck.
	// Zero means 0.75.
	SlowFactor float64
	// StallFactor: a transfer is receiver-bound when the receiver spent
	// more than this multiple of the transfer's network time (the
	// sender's completion) after the last chunk arrived (its lag), and at
	// least MinStall. Zero means 0.5.
	StallFactor float64
	// MinStall is the least receiver lag called a stall. Zero means 100µs.
	MinStall time.Duration
}

// withDefaults fills opt's zero fields and validates it.
func (opt Options) withDefaults() (Options, error) {
	if opt.StragglerFactor == 0 {
		opt.StragglerFactor = 2
	}
	if opt.SlowFactor == 0 {
		opt.SlowFactor = 0.75
	}
	if opt.StallFactor == 0 {
		opt.StallFactor = 0.5
	}
	if opt.MinStall == 0 {
		opt.MinStall = 100 * time.Microsecond
	}
	if opt.StragglerFactor < 1 || math.IsNaN(opt.StragglerFactor) || math.IsInf(opt.StragglerFactor, 0) {
		return opt, fmt.Errorf("analyze: StragglerFactor = %v: want >= 1", opt.StragglerFactor)
	}
	if opt.SlowFactor <= 0 || opt.SlowFactor > 1 || math.IsNaN(opt.SlowFactor) {
		return opt, fmt.Errorf("analyze: SlowFactor = %v: want in (0, 1]", opt.SlowFactor)
	}
	if opt.StallFactor <= 0 || math.IsNaN(opt.StallFactor) || math.IsInf(opt.StallFactor, 0) {
		return opt, fmt.Errorf("analyze: StallFactor = %v: want > 0", opt.StallFactor)
	}
	if opt.MinStall < 0 {
		return opt, fmt.Errorf("analyze: MinStall = %v: want >= 0", opt.MinStall)
	}
	return opt, nil
}

// Report is the analysis of every transfer found, in start order.
type Report struct {
	Transfers []*Transfer `json:"transfers"`
}

// Transfer is one transfer's analysis. Times are offsets from the
// transfer's start unless named otherwise.
type Transfer struct {
	TraceID    string        `json:"trace_id"`
	ID         int64         `json:"transfer_id"`
	Name       string        `json:"name,omitempty"`
	Service    string        `json:"service,omitempty"`
	Outcome    string        `json:"outcome"` // done, failed, abandoned, incomplete (no transfer span)
	Error      string        `json:"error,omitempty"`
	Bytes      units.Bytes   `json:"bytes"`
	ChunkSize  units.Bytes   `json:"chunk_size"`
	Chunks     int           `json:"chunks"`
	Paths      int           `json:"paths"`
	CC         string        `json:"cc,omitempty"`
	Backend    string        `json:"backend,omitempty"`
	Peer       string        `json:"peer,omitempty"`
	Start      time.Time     `json:"start"`
	Completion time.Duration `json:"completion_ns"`
	Goodput    units.BitRate `json:"goodput_bps"` // Bytes over Completion

	Critical   *Critical    `json:"critical,omitempty"`
	PerPath    []*PathStats `json:"paths_detail"`
	Imbalance  float64      `json:"imbalance"` // max/mean path finish time over paths that finished chunks
	Bottleneck *int         `json:"bottleneck_path,omitempty"`
	Requeues   int          `json:"requeues"`
	// RequeueReasons counts requeued attempts by reason.
	RequeueReasons map[string]int `json:"requeue_reasons,omitempty"`
	Stragglers     []Straggler    `json:"stragglers"`
	// StragglerFactor is Options.StragglerFactor as applied.
	StragglerFactor float64       `json:"straggler_factor"`
	MedianLatency   time.Duration `json:"median_chunk_latency_ns"`

	// Receiver is the receiving end's view of the transfer (its
	// mptx.receive and mptx.recv.chunk spans in the same trace), if any.
	Receiver *ReceiverView `json:"receiver,omitempty"`
	// ReceiverBound, when set, says why the transfer was receiver-bound:
	// the receiver spent more than Options.StallFactor × the network time
	// after the last chunk arrived.
	ReceiverBound string `json:"receiver_bound,omitempty"`

	// Attempts are every chunk attempt, in start order (for Timeline).
	Attempts []Attempt `json:"-"`
	// Events are the path events on the transfer span, in time order (for
	// Timeline).
	Events []PathEvent `json:"-"`

	key      key
	attempts int  // len(Attempts) when finished
	slim     bool // a copy reduced to what aggregation needs
}

// PathEvent is a path event recorded on a transfer span.
type PathEvent struct {
	Name string        // schema.EventPathDown, EventPathUp, EventPathQuarantine, EventRequeue, EventCNPBurst, EventPFCPause
	Path int           // the path
	At   time.Duration // since the transfer's start
	// Chunk is the requeued chunk (EventRequeue), the CNP count
	// (EventCNPBurst); Dur the pause (EventPFCPause) or backoff
	// (EventPathQuarantine).
	Chunk int64
	Dur   time.Duration
}

// ReceiverView is a transfer as its receiver saw it, on the receiver's
// clock: network time is the sender's business (Transfer.Completion);
// receiver time is what happened after each chunk arrived.
type ReceiverView struct {
	Service  string        `json:"service,omitempty"`
	Peer     string        `json:"peer,omitempty"` // the sender
	Outcome  string        `json:"outcome"`
	Error    string        `json:"error,omitempty"`
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"duration_ns"` // announcement to done, receiver clock
	// Chunks arrived, Duplicates (arrived again), Rejected (hand-off
	// refused by the application).
	Chunks     int `json:"chunks"`
	Duplicates int `json:"duplicates"`
	Rejected   int `json:"rejected"`
	// LastArrival is the last chunk's arrival since Start; Lag the time
	// from it to the end: the receiver's share after the network
	// delivered everything.
	LastArrival time.Duration `json:"last_arrival_ns"`
	Lag         time.Duration `json:"lag_ns"`
	// Completion-queue wait (arrival to poll) and hand-off (the
	// application's OnChunk) per chunk: nearest-rank percentiles over the
	// receiver's chunk spans (the maxima and the total also from the
	// receive span when its chunk spans are missing).
	QueueP50     time.Duration `json:"queue_p50_ns"`
	QueueP99     time.Duration `json:"queue_p99_ns"`
	QueueMax     time.Duration `json:"queue_max_ns"`
	HandoffP50   time.Duration `json:"handoff_p50_ns"`
	HandoffP99   time.Duration `json:"handoff_p99_ns"`
	HandoffTotal time.Duration `json:"handoff_total_ns"`
}

// Critical describes the chunk acknowledged last: it set the completion
// time.
type Critical struct {
	Chunk    int64         `json:"chunk"`
	Path     int           `json:"path"`
	Device   string        `json:"device,omitempty"`
	Attempts int           `json:"attempts"`
	Start    time.Duration `json:"start_ns"`  // its final attempt's start
	Finish   time.Duration `json:"finish_ns"` // its acknowledgement
	Latency  time.Duration `json:"latency_ns"`
	Why      []string      `json:"why"`
}

// PathStats is one path's share of a transfer.
type PathStats struct {
	Path       int           `json:"path"`
	Device     string        `json:"device,omitempty"`
	NIC        string        `json:"nic,omitempty"`
	QPN        int64         `json:"qpn,omitempty"`
	Bytes      units.Bytes   `json:"bytes"` // acknowledged
	Share      float64       `json:"share"` // of all acknowledged bytes
	Chunks     int           `json:"chunks"`
	Throughput units.BitRate `json:"throughput_bps"` // Bytes over first start to Finish
	// ChunkRate is the median over acknowledged attempts of bytes over
	// latency: the path's typical per-chunk speed, which one straggler
	// does not move. Bottleneck detection compares it across paths.
	ChunkRate  units.BitRate `json:"chunk_rate_p50_bps"`
	P50        time.Duration `json:"latency_p50_ns"`
	P99        time.Duration `json:"latency_p99_ns"`
	Finish     time.Duration `json:"finish_ns"` // last acknowledgement on the path
	Requeues   int           `json:"requeues"`  // attempts requeued away from this path
	Stragglers int           `json:"stragglers"`
	ECNChunks  int           `json:"ecn_marked_chunks"`
	Down       int           `json:"down_events"`
	CNPs       int64         `json:"cnps"` // in CNP burst events
	PFCPause   time.Duration `json:"pfc_pause_ns"`

	first     time.Duration
	latencies []time.Duration
	rates     []units.BitRate
}

// Straggler is an acknowledged attempt much slower than the median.
type Straggler struct {
	Chunk   int64         `json:"chunk"`
	Path    int           `json:"path"`
	Attempt int           `json:"attempt"`
	Latency time.Duration `json:"latency_ns"`
	Factor  float64       `json:"factor"` // Latency over its path's median
}

// Attempt is one chunk attempt span.
type Attempt struct {
	Chunk   int64
	Path    int
	Try     int // attempt number, 1 for the first
	Bytes   units.Bytes
	Start   time.Duration
	End     time.Duration
	Outcome string
	Reason  string
	ECN     int64
}

type key struct {
	trace pcommon.TraceID
	id    int64
}

// builder collects one transfer's spans, both ends, until it is
// finalized.
type builder struct {
	t        *Transfer
	hasSpan  bool // the sender's mptx.transfer span arrived
	start    pcommon.Timestamp
	end      pcommon.Timestamp
	attempts []rawAttempt
	events   []rawEvent
	seen     map[pcommon.SpanID]struct{} // duplicate spans are dropped

	recv      *spanRec  // the mptx.receive span, once arrived
	recvParts []recvRaw // its mptx.recv.chunk spans
	rv        *ReceiverView
}

type rawAttempt struct {
	Attempt
	start, end pcommon.Timestamp
	device     string
	nic        string
	qpn        int64
	rtt        int64
}

type rawEvent struct {
	name  string
	path  int
	count int64
	dur   time.Duration
	at    pcommon.Timestamp
}

type recvRaw struct {
	queue, handoff time.Duration
	rejected       bool
}

// add adds one span; it reports false for a span already seen.
func (b *builder) add(r *spanRec) bool {
	if b.seen == nil {
		b.seen = map[pcommon.SpanID]struct{}{}
	}
	if _, dup := b.seen[r.span]; dup {
		return false
	}
	b.seen[r.span] = struct{}{}
	switch r.kind {
	case recTransfer:
		t := b.t
		if r.service != "" {
			t.Service = r.service
		}
		b.hasSpan = true
		b.start, b.end = r.start, r.end
		t.Bytes, t.ChunkSize, t.Chunks, t.Paths = units.Bytes(r.bytes), units.Bytes(r.chunkSize), int(r.chunks), int(r.paths)
		t.CC, t.Backend, t.Peer, t.Name = r.cc, r.backend, r.peer, r.name
		t.Outcome = cmp.Or(r.outcome, "unknown")
		if t.Outcome != schema.TransferDone {
			t.Error = r.errMsg
		}
		b.events = r.events
	case recChunk:
		if r.service != "" && b.t.Service == "" {
			b.t.Service = r.service
		}
		b.attempts = append(b.attempts, rawAttempt{
			Attempt: Attempt{Chunk: r.index, Path: int(r.path), Try: int(r.attempt), Bytes: units.Bytes(r.chunkBytes),
				Outcome: r.outcome, Reason: r.reason, ECN: r.ecn},
			start: r.start, end: r.end, device: r.device, nic: r.nic, qpn: r.qpn, rtt: r.rtt,
		})
	case recReceive:
		rc := *r
		b.recv = &rc
	case recRecvChunk:
		b.recvParts = append(b.recvParts, recvRaw{queue: time.Duration(r.queue), handoff: time.Duration(r.handoff), rejected: r.reason != ""})
	}
	return true
}

// hasSender reports whether any sender span arrived.
func (b *builder) hasSender() bool { return b.hasSpan || len(b.attempts) > 0 }

// finishReceiver computes the receiver's view from its spans.
func (b *builder) finishReceiver() *ReceiverView {
	r := b.recv
	rv := &ReceiverView{Service: r.service, Peer: r.peer, Outcome: cmp.Or(r.outcome, "unknown"),
		Start: r.start.AsTime().UTC(), Duration: time.Duration(r.end - r.start),
		Chunks: int(r.recvChunks), Duplicates: int(r.dups),
		QueueMax: time.Duration(r.queueMax), HandoffTotal: time.Duration(r.handoffSum)}
	if rv.Outcome != schema.TransferDone {
		rv.Error = r.errMsg
	}
	if r.hasArrival {
		rv.LastArrival, rv.Lag = time.Duration(r.lastArrival), time.Duration(r.lag)
	}
	if len(b.recvParts) > 0 {
		q := make([]time.Duration, 0, len(b.recvParts))
		h := make([]time.Duration, 0, len(b.recvParts))
		var sum time.Duration
		for _, p := range b.recvParts {
			q = append(q, p.queue)
			h = append(h, p.handoff)
			sum += p.handoff
			if p.rejected {
				rv.Rejected++
			}
		}
		rv.QueueP50, rv.QueueP99 = percentile(q, 50), percentile(q, 99)
		rv.QueueMax = max(rv.QueueMax, q[len(q)-1])
		rv.HandoffP50, rv.HandoffP99 = percentile(h, 50), percentile(h, 99)
		rv.HandoffTotal = max(rv.HandoffTotal, sum)
	}
	b.recv, b.recvParts = nil, b.recvParts[:0]
	return rv
}

// attach joins the receiver's view to t and decides whether t was
// receiver-bound.
func attach(t *Transfer, rv *ReceiverView, opt Options) {
	t.Receiver = rv
	t.ReceiverBound = ""
	if rv.Lag < opt.MinStall || t.Completion <= 0 || t.Outcome == "incomplete" {
		return
	}
	if float64(rv.Lag) <= opt.StallFactor*float64(t.Completion) {
		return
	}
	var most string
	switch {
	case rv.HandoffTotal >= rv.QueueMax && rv.HandoffTotal > 0:
		most = fmt.Sprintf("the application's hand-off (%v in all, p99 %v per chunk)", round(rv.HandoffTotal), round(rv.HandoffP99))
	case rv.QueueMax > 0:
		most = fmt.Sprintf("completions waiting to be polled (up to %v: the receiver was not polling)", round(rv.QueueMax))
	default:
		most = "neither hand-off nor polling: the receiver's own completion"
	}
	t.ReceiverBound = fmt.Sprintf("receiver lag %v after the last chunk arrived vs %v network time; most of it %s", round(rv.Lag), round(t.Completion), most)
}

// Analyze computes the report for every transfer in td, sender and
// receiver spans joined by trace and transfer id. It returns an error if
// td holds no mptx spans or a span is malformed. For many transfers read
// with Scan instead: it holds only what is needed at a time.
func Analyze(td ptrace.Traces, opt Options) (*Report, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	recs, spans, err := extract(td, nil)
	if err != nil {
		return nil, err
	}
	if spans == 0 {
		return nil, ErrNoSpans
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("analyze: %d spans but none named %s, %s, %s or %s: not an mptx trace", spans, schema.SpanTransfer, schema.SpanChunk, schema.SpanReceive, schema.SpanRecvChunk)
	}
	c := &collector{opt: opt, byKey: map[key]*Transfer{}}
	st := newStream(opt, c)
	st.add(recs)
	st.close()
	return &Report{Transfers: c.sorted()}, nil
}

// collector is the sink that keeps every transfer (Analyze).
type collector struct {
	opt   Options
	all   []*Transfer
	byKey map[key]*Transfer
}

func (c *collector) transfer(t *Transfer) {
	c.all = append(c.all, t)
	c.byKey[t.key] = t
}

func (c *collector) lateReceiver(k key, rv *ReceiverView) {
	if t := c.byKey[k]; t != nil {
		attach(t, rv, c.opt)
	}
}

// sorted returns the transfers in start order (then id).
func (c *collector) sorted() []*Transfer {
	slices.SortStableFunc(c.all, func(a, b *Transfer) int {
		if x := a.Start.Compare(b.Start); x != 0 {
			return x
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return c.all
}

// finish computes the transfer's figures.
func (b *builder) finish(opt Options) *Transfer {
	t := b.t
	if !b.hasSpan {
		t.Outcome = "incomplete"
		for i, a := range b.attempts {
			if i == 0 || a.start < b.start {
				b.start = a.start
			}
			b.end = max(b.end, a.end)
		}
	}
	t.Start = b.start.AsTime().UTC()
	t.Completion = time.Duration(b.end - b.start)
	off := func(ts pcommon.Timestamp) time.Duration { return time.Duration(int64(ts) - int64(b.start)) }
	slices.SortStableFunc(b.attempts, func(x, y rawAttempt) int {
		return cmp.Or(cmp.Compare(x.start, y.start), cmp.Compare(x.Chunk, y.Chunk), cmp.Compare(x.Try, y.Try))
	})

	paths := map[int]*PathStats{}
	pathOf := func(p int) *PathStats {
		ps := paths[p]
		if ps == nil {
			ps = &PathStats{Path: p, first: -1}
			paths[p] = ps
		}
		return ps
	}
	attemptsPerChunk := map[int64]int{}
	var acked []*rawAttempt
	var all []time.Duration
	var total units.Bytes
	for i := range b.attempts {
		a := &b.attempts[i]
		a.Start, a.End = off(a.start), off(a.end)
		t.Attempts = append(t.Attempts, a.Attempt)
		ps := pathOf(a.Path)
		if ps.Device == "" {
			ps.Device, ps.QPN, ps.NIC = a.device, a.qpn, a.nic
		}
		attemptsPerChunk[a.Chunk] = max(attemptsPerChunk[a.Chunk], a.Try)
		switch a.Outcome {
		case schema.OutcomeAcked:
			acked = append(acked, a)
			lat := a.End - a.Start
			ps.Bytes += a.Bytes
			ps.Chunks++
			ps.latencies = append(ps.latencies, lat)
			ps.rates = append(ps.rates, units.RateOf(a.Bytes, lat))
			all = append(all, lat)
			ps.Finish = max(ps.Finish, a.End)
			if ps.first < 0 || a.Start < ps.first {
				ps.first = a.Start
			}
			if a.ECN > 0 {
				ps.ECNChunks++
			}
			total += a.Bytes
		case schema.OutcomeRequeued:
			ps.Requeues++
			t.Requeues++
			if t.RequeueReasons == nil {
				t.RequeueReasons = map[string]int{}
			}
			t.RequeueReasons[cmp.Or(a.Reason, "unknown")]++
		}
	}
	for _, e := range b.events {
		switch e.name {
		case schema.EventPathDown:
			pathOf(e.path).Down++
		case schema.EventCNPBurst:
			pathOf(e.path).CNPs += e.count
		case schema.EventPFCPause:
			pathOf(e.path).PFCPause += e.dur
		}
		t.Events = append(t.Events, PathEvent{Name: e.name, Path: e.path, At: off(e.at), Chunk: e.count, Dur: e.dur})
	}
	slices.SortStableFunc(t.Events, func(x, y PathEvent) int { return cmp.Compare(x.At, y.At) })
	if t.Bytes > 0 && t.Completion > 0 && t.Outcome == schema.TransferDone {
		t.Goodput = units.RateOf(t.Bytes, t.Completion)
	}
	t.attempts = len(t.Attempts)
	t.MedianLatency = percentile(all, 50)
	t.StragglerFactor = opt.StragglerFactor

	// Per path.
	var finishes []float64
	var rates []units.BitRate
	for _, ps := range paths {
		t.PerPath = append(t.PerPath, ps)
	}
	slices.SortFunc(t.PerPath, func(x, y *PathStats) int { return cmp.Compare(x.Path, y.Path) })
	for _, ps := range t.PerPath {
		if total > 0 {
			ps.Share = float64(ps.Bytes) / float64(total)
		}
		ps.P50 = percentile(ps.latencies, 50)
		ps.P99 = percentile(ps.latencies, 99)
		if ps.Chunks > 0 {
			ps.Throughput = units.RateOf(ps.Bytes, ps.Finish-ps.first)
			slices.Sort(ps.rates)
			ps.ChunkRate = ps.rates[(len(ps.rates)-1)/2]
			finishes = append(finishes, float64(ps.Finish))
			rates = append(rates, ps.ChunkRate)
		}
	}
	if len(finishes) > 0 {
		sum, mx := 0.0, 0.0
		for _, f := range finishes {
			sum += f
			mx = max(mx, f)
		}
		if mean := sum / float64(len(finishes)); mean > 0 {
			t.Imbalance = mx / mean
		}
	}
	var medianRate units.BitRate
	if len(rates) > 1 {
		slices.Sort(rates)
		medianRate = rates[len(rates)/2]
		var slowest *PathStats
		for _, ps := range t.PerPath {
			if ps.Chunks > 0 && (slowest == nil || ps.ChunkRate < slowest.ChunkRate) {
				slowest = ps
			}
		}
		if float64(slowest.ChunkRate) < opt.SlowFactor*float64(medianRate) {
			p := slowest.Path
			t.Bottleneck = &p
		}
	}

	// Stragglers: slow relative to their own path's median, so that a
	// slow path (reported as the bottleneck) does not make every one of
	// its chunks a straggler.
	t.Stragglers = []Straggler{}
	for _, a := range acked {
		ps := paths[a.Path]
		lat := a.End - a.Start
		if ps.P50 <= 0 {
			continue
		}
		if f := float64(lat) / float64(ps.P50); f > opt.StragglerFactor {
			t.Stragglers = append(t.Stragglers, Straggler{Chunk: a.Chunk, Path: a.Path, Attempt: a.Try, Latency: lat, Factor: round3(f)})
			ps.Stragglers++
		}
	}
	slices.SortStableFunc(t.Stragglers, func(x, y Straggler) int { return cmp.Compare(y.Latency, x.Latency) })

	// Critical chunk: the last acknowledgement.
	var crit *rawAttempt
	for _, a := range acked {
		if crit == nil || a.End > crit.End || (a.End == crit.End && a.Chunk > crit.Chunk) {
			crit = a
		}
	}
	if crit != nil {
		c := &Critical{Chunk: crit.Chunk, Path: crit.Path, Device: crit.device, Attempts: attemptsPerChunk[crit.Chunk],
			Start: crit.Start, Finish: crit.End, Latency: crit.End - crit.Start}
		c.Why = b.why(c, crit, paths, medianRate, opt)
		t.Critical = c
	}
	for _, ps := range t.PerPath {
		ps.Share = round3(ps.Share)
	}
	t.Imbalance = round3(t.Imbalance)
	return t
}

// why lists the reasons the critical chunk finished when it did, most
// telling first.
func (b *builder) why(c *Critical, crit *rawAttempt, paths map[int]*PathStats, medianRate units.BitRate, opt Options) []string {
	t := b.t
	ps := paths[c.Path]
	var why []string
	if c.Attempts > 1 {
		var prev []string
		for _, a := range b.attempts {
			if a.Chunk == c.Chunk && a.Outcome != schema.OutcomeAcked {
				prev = append(prev, fmt.Sprintf("attempt %d on path %d %s at +%v (%s)", a.Try, a.Path, a.Outcome, a.End, cmp.Or(a.Reason, "no reason")))
			}
		}
		why = append(why, fmt.Sprintf("requeued: %d attempts; %s", c.Attempts, strings.Join(prev, ", ")))
	}
	if t.Bottleneck != nil && *t.Bottleneck == c.Path {
		why = append(why, fmt.Sprintf("path %d is the bottleneck: chunks move at %s vs %s on the median path", c.Path, FormatRate(ps.ChunkRate), FormatRate(medianRate)))
	}
	if ps.P50 > 0 {
		if f := float64(c.Latency) / float64(ps.P50); f > opt.StragglerFactor {
			why = append(why, fmt.Sprintf("straggler: latency %v is %.1f× path %d's median %v", c.Latency, f, c.Path, ps.P50))
		}
	}
	if crit.ECN > 0 {
		why = append(why, fmt.Sprintf("congestion: %d ECN marks during the attempt", crit.ECN))
	} else if ps.CNPs > 0 {
		why = append(why, fmt.Sprintf("congestion: %d CNPs on path %d during the transfer", ps.CNPs, c.Path))
	}
	if ps.PFCPause > 0 {
		why = append(why, fmt.Sprintf("PFC paused path %d for %v", c.Path, ps.PFCPause))
	}
	if ps.Down > 0 {
		why = append(why, fmt.Sprintf("path %d went down %d×", c.Path, ps.Down))
	}
	if len(why) == 0 {
		why = append(why, fmt.Sprintf("no anomaly: last chunk scheduled (attempt started at +%v, latency %v near the median %v)", c.Start, c.Latency, t.MedianLatency))
	}
	return why
}

// FormatRate formats r with three significant digits (97.1Gbps).
func FormatRate(r units.BitRate) string {
	for _, u := range []struct {
		v    units.BitRate
		name string
	}{{units.Tbps, "Tbps"}, {units.Gbps, "Gbps"}, {units.Mbps, "Mbps"}, {units.Kbps, "Kbps"}} {
		if r >= u.v {
			return strconv.FormatFloat(float64(r)/float64(u.v), 'g', 3, 64) + u.name
		}
	}
	return strconv.FormatInt(int64(r), 10) + "bps"
}

// FormatBytes formats b exactly when it is a binary multiple (4MiB) and
// with three significant digits otherwise (4.00MiB for 4194427B).
func FormatBytes(b units.Bytes) string {
	for _, u := range []struct {
		v    units.Bytes
		name string
	}{{units.GiB, "GiB"}, {units.MiB, "MiB"}, {units.KiB, "KiB"}} {
		if b >= u.v {
			if b%u.v == 0 {
				return b.String()
			}
			return strconv.FormatFloat(float64(b)/float64(u.v), 'f', 2, 64) + u.name
		}
	}
	return b.String()
}

// percentile returns the nearest-rank p-th percentile of d (unsorted; it
// is sorted in place), or 0 for none.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	rank := (p*len(d) + 99) / 100 // ceil(p/100 · n)
	return d[max(rank, 1)-1]
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
