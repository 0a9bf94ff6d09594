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

	// Attempts are every chunk attempt, in start order (for Timeline).
	Attempts []Attempt `json:"-"`
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

type builder struct {
	t        *Transfer
	hasSpan  bool
	start    pcommon.Timestamp
	end      pcommon.Timestamp
	attempts []rawAttempt
	events   []rawEvent
}

type rawAttempt struct {
	Attempt
	start, end pcommon.Timestamp
	device     string
	qpn        int64
	rtt        int64
}

type rawEvent struct {
	name  string
	path  int
	count int64
	dur   time.Duration
}

// Analyze computes the report for every transfer in td. It returns an
// error if td holds no mptx spans or a span is malformed.
func Analyze(td ptrace.Traces, opt Options) (*Report, error) {
	if opt.StragglerFactor == 0 {
		opt.StragglerFactor = 2
	}
	if opt.SlowFactor == 0 {
		opt.SlowFactor = 0.75
	}
	if opt.StragglerFactor < 1 || math.IsNaN(opt.StragglerFactor) {
		return nil, fmt.Errorf("analyze: StragglerFactor = %v: want >= 1", opt.StragglerFactor)
	}
	if opt.SlowFactor <= 0 || opt.SlowFactor > 1 || math.IsNaN(opt.SlowFactor) {
		return nil, fmt.Errorf("analyze: SlowFactor = %v: want in (0, 1]", opt.SlowFactor)
	}
	builders := map[key]*builder{}
	var order []key
	seen := map[[24]byte]bool{} // trace+span id: drop duplicate spans
	get := func(k key) *builder {
		b := builders[k]
		if b == nil {
			b = &builder{t: &Transfer{TraceID: k.trace.String(), ID: k.id}}
			builders[k] = b
			order = append(order, k)
		}
		return b
	}
	spans := 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		service := ""
		if v, ok := rs.Resource().Attributes().Get(schema.AttrServiceName); ok {
			service = v.AsString()
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				sp := ss.At(k)
				spans++
				if sp.Name() != schema.SpanTransfer && sp.Name() != schema.SpanChunk {
					continue
				}
				var sk [24]byte
				tid, sid := sp.TraceID(), sp.SpanID()
				copy(sk[:16], tid[:])
				copy(sk[16:], sid[:])
				if seen[sk] {
					continue
				}
				seen[sk] = true
				a := sp.Attributes()
				id, ok := intAttr(a, schema.AttrTransferID)
				if !ok {
					return nil, fmt.Errorf("analyze: span %s %s has no %s attribute", sp.Name(), sid, schema.AttrTransferID)
				}
				if sp.EndTimestamp() < sp.StartTimestamp() {
					return nil, fmt.Errorf("analyze: span %s %s ends (%d) before it starts (%d)", sp.Name(), sid, sp.EndTimestamp(), sp.StartTimestamp())
				}
				b := get(key{tid, id})
				if service != "" {
					b.t.Service = service
				}
				if sp.Name() == schema.SpanTransfer {
					if err := b.transferSpan(sp); err != nil {
						return nil, err
					}
				} else if err := b.chunkSpan(sp); err != nil {
					return nil, err
				}
			}
		}
	}
	if spans == 0 {
		return nil, ErrNoSpans
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("analyze: %d spans but none named %s or %s: not an mptx trace", spans, schema.SpanTransfer, schema.SpanChunk)
	}
	rep := &Report{}
	for _, k := range order {
		rep.Transfers = append(rep.Transfers, builders[k].finish(opt))
	}
	slices.SortStableFunc(rep.Transfers, func(a, b *Transfer) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return rep, nil
}

func intAttr(m pcommon.Map, k string) (int64, bool) {
	v, ok := m.Get(k)
	if !ok {
		return 0, false
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), true
	case pcommon.ValueTypeDouble:
		return int64(v.Double()), true
	case pcommon.ValueTypeStr: // some backends stringify integers
		var n int64
		if _, err := fmt.Sscan(v.Str(), &n); err == nil {
			return n, true
		}
	}
	return 0, false
}

func strAttr(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok {
		return v.AsString()
	}
	return ""
}

func (b *builder) transferSpan(sp ptrace.Span) error {
	a := sp.Attributes()
	t := b.t
	b.hasSpan = true
	b.start, b.end = sp.StartTimestamp(), sp.EndTimestamp()
	n, _ := intAttr(a, schema.AttrTransferBytes)
	cs, _ := intAttr(a, schema.AttrChunkSize)
	chunks, _ := intAttr(a, schema.AttrTransferChunks)
	paths, _ := intAttr(a, schema.AttrPaths)
	if n < 0 || cs < 0 || chunks < 0 || paths < 0 || chunks > 1<<32 || paths > 1<<16 {
		return fmt.Errorf("analyze: transfer span %s: negative or absurd size attributes (bytes %d, chunk size %d, chunks %d, paths %d)", sp.SpanID(), n, cs, chunks, paths)
	}
	t.Bytes, t.ChunkSize, t.Chunks, t.Paths = units.Bytes(n), units.Bytes(cs), int(chunks), int(paths)
	t.CC = strAttr(a, schema.AttrCC)
	t.Backend = strAttr(a, schema.AttrBackend)
	t.Peer = strAttr(a, schema.AttrNetworkPeerAddress)
	t.Outcome = strAttr(a, schema.AttrTransferOutcome)
	if t.Outcome == "" {
		t.Outcome = "unknown"
	}
	if t.Outcome != schema.TransferDone {
		t.Error = strAttr(a, schema.AttrErrorType)
		if t.Error == "" {
			t.Error = sp.Status().Message()
		}
	}
	evs := sp.Events()
	for i := 0; i < evs.Len(); i++ {
		e := evs.At(i)
		ea := e.Attributes()
		p, _ := intAttr(ea, schema.AttrPath)
		re := rawEvent{name: e.Name(), path: int(p)}
		switch e.Name() {
		case schema.EventCNPBurst:
			re.count, _ = intAttr(ea, schema.AttrCNPCount)
		case schema.EventPFCPause:
			d, _ := intAttr(ea, schema.AttrPauseNs)
			re.dur = time.Duration(d)
		case schema.EventPathDown:
		default:
			continue
		}
		b.events = append(b.events, re)
	}
	return nil
}

func (b *builder) chunkSpan(sp ptrace.Span) error {
	a := sp.Attributes()
	var ra rawAttempt
	ra.start, ra.end = sp.StartTimestamp(), sp.EndTimestamp()
	ra.Chunk, _ = intAttr(a, schema.AttrChunkIndex)
	p, ok := intAttr(a, schema.AttrPath)
	if !ok || p < 0 || p > 1<<16 {
		return fmt.Errorf("analyze: chunk span %s: %s = %d (present %v): want 0..65536", sp.SpanID(), schema.AttrPath, p, ok)
	}
	ra.Path = int(p)
	at, _ := intAttr(a, schema.AttrAttempt)
	ra.Try = int(at)
	n, _ := intAttr(a, schema.AttrChunkBytes)
	if n < 0 {
		return fmt.Errorf("analyze: chunk span %s: %s = %d: want >= 0", sp.SpanID(), schema.AttrChunkBytes, n)
	}
	ra.Bytes = units.Bytes(n)
	ra.Outcome = strAttr(a, schema.AttrChunkOutcome)
	ra.Reason = strAttr(a, schema.AttrErrorType)
	ra.ECN, _ = intAttr(a, schema.AttrChunkECN)
	ra.device = strAttr(a, schema.AttrDevice)
	ra.qpn, _ = intAttr(a, schema.AttrQPN)
	ra.rtt, _ = intAttr(a, schema.AttrChunkRTT)
	b.attempts = append(b.attempts, ra)
	return nil
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
			ps.Device, ps.QPN = a.device, a.qpn
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
		ps := pathOf(e.path)
		switch e.name {
		case schema.EventPathDown:
			ps.Down++
		case schema.EventCNPBurst:
			ps.CNPs += e.count
		case schema.EventPFCPause:
			ps.PFCPause += e.dur
		}
	}
	if t.Bytes > 0 && t.Completion > 0 && t.Outcome == schema.TransferDone {
		t.Goodput = units.RateOf(t.Bytes, t.Completion)
	}
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
