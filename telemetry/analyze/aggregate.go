package analyze

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mptx-dev/mptx/telemetry/schema"
	"github.com/mptx-dev/mptx/units"
)

// Summary aggregates the transfers a Scan selected: what an SRE asks of
// an hour of traffic. Percentiles are nearest-rank, read from fixed-size
// log-linear histograms (within 3.1 % of the exact value), so the
// summary's memory does not grow with the number of chunks.
type Summary struct {
	Input    InputStats     `json:"input"`
	Selected int            `json:"selected"` // transfers that passed the filter
	Skipped  int            `json:"skipped"`  // transfers seen and filtered out
	Outcomes map[string]int `json:"outcomes"` // sender outcome (receiver-only: "receiver-only")
	// Failed counts selected transfers that failed or were abandoned at
	// either end; a Scan whose Failed is not zero makes `mptx trace
	// analyze` exit with status 1.
	Failed     int       `json:"failed"`
	First      time.Time `json:"first_start"`
	Last       time.Time `json:"last_start"`
	Bytes      int64     `json:"bytes_done"`     // of transfers done
	Completion Quantiles `json:"completion"`     // network time (sender's span) of transfers done
	Goodput    Rates     `json:"goodput"`        // of transfers done
	Attempts   int64     `json:"chunk_attempts"` // sender chunk spans
	Requeues   int64     `json:"requeues"`
	// RequeueRate is requeues per chunk attempt.
	RequeueRate    float64        `json:"requeue_rate"`
	RequeueReasons map[string]int `json:"requeue_reasons,omitempty"`
	// Down counts path-down events (each followed by probes and, after a
	// queue-pair error, a reset), Quarantines the quarantine events;
	// DownRate is path-down events per transfer.
	Down        int64   `json:"path_down_events"`
	Quarantines int64   `json:"quarantines"`
	DownRate    float64 `json:"down_rate"`

	Paths       []*PathAgg    `json:"paths"`
	NICs        []*NICAgg     `json:"nics"`
	Bottlenecks []*Bottleneck `json:"bottlenecks"`
	Receiver    *ReceiverAgg  `json:"receiver,omitempty"`
	Stalls      []*StallGroup `json:"receiver_stalls,omitempty"`

	FailedTransfers []FailedTransfer `json:"failed_transfers,omitempty"` // the first MaxListed
	FailureReasons  map[string]int   `json:"failure_reasons,omitempty"`

	// Findings are the headline conclusions, most telling first: the
	// paths that are usually the bottleneck, receivers that stall,
	// failures.
	Findings []string        `json:"findings"`
	Metrics  *MetricsSummary `json:"metrics,omitempty"`
	Warnings []string        `json:"warnings,omitempty"`

	// Transfers are the selected transfers kept whole (ScanConfig.Detail).
	Transfers []*Transfer `json:"transfers,omitempty"`
}

// MaxListed bounds the failed transfers and stall examples a Summary lists.
const MaxListed = 50

// InputStats counts what a Scan read.
type InputStats struct {
	Sources     int   `json:"sources"`
	Lines       int64 `json:"lines"`
	Bytes       int64 `json:"bytes"`
	Spans       int64 `json:"spans"`      // of any name
	MptxSpans   int64 `json:"mptx_spans"` // the four mptx span names
	MetricLines int64 `json:"metric_lines"`
	Duplicates  int64 `json:"duplicate_spans"`
	Late        int64 `json:"late_spans"` // sender spans after their transfer span's line
}

// Quantiles of durations.
type Quantiles struct {
	N   int64         `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// Rates are quantiles of rates; the low tail is what hurts, so P10 and P1
// are given.
type Rates struct {
	N   int64         `json:"n"`
	P1  units.BitRate `json:"p1_bps"`
	P10 units.BitRate `json:"p10_bps"`
	P50 units.BitRate `json:"p50_bps"`
}

func quantiles(h *hist) Quantiles {
	return Quantiles{N: h.n, P50: time.Duration(h.quantile(50)), P90: time.Duration(h.quantile(90)),
		P99: time.Duration(h.quantile(99)), Max: time.Duration(h.max)}
}

func rates(h *hist) Rates {
	return Rates{N: h.n, P1: units.BitRate(h.quantile(1)), P10: units.BitRate(h.quantile(10)), P50: units.BitRate(h.quantile(50))}
}

// PathAgg is one path over the selected transfers: a path index of one
// service (a sender), with its device and interface.
type PathAgg struct {
	Service string `json:"service,omitempty"`
	Path    int    `json:"path"`
	Device  string `json:"device,omitempty"`
	NIC     string `json:"nic,omitempty"`
	// Transfers that used the path; Chunks and Bytes acknowledged on it.
	Transfers int         `json:"transfers"`
	Chunks    int64       `json:"chunks"`
	Bytes     units.Bytes `json:"bytes"`
	// Latency of acknowledged attempts; ChunkRate their bytes over
	// latency; Throughput the path's per-transfer throughput.
	Latency    Quantiles     `json:"latency"`
	ChunkRate  Rates         `json:"chunk_rate"`
	Throughput Rates         `json:"throughput"`
	Requeues   int64         `json:"requeues"`
	Down       int64         `json:"down_events"`
	ECNChunks  int64         `json:"ecn_marked_chunks"`
	CNPs       int64         `json:"cnps"`
	PFCPause   time.Duration `json:"pfc_pause_ns"`
	// Bottleneck counts transfers where this path was the bottleneck,
	// Critical those where it carried the last chunk acknowledged.
	Bottleneck int `json:"bottleneck"`
	Critical   int `json:"critical"`

	lat, rate, tput hist
}

// NICAgg is one device (RDMA device, or interface when no device is
// known) of one service over the selected transfers: its paths together.
type NICAgg struct {
	Service    string      `json:"service,omitempty"`
	Device     string      `json:"device"`
	Paths      []int       `json:"paths"`
	Chunks     int64       `json:"chunks"`
	Bytes      units.Bytes `json:"bytes"`
	Latency    Quantiles   `json:"latency"`
	ChunkRate  Rates       `json:"chunk_rate"`
	Requeues   int64       `json:"requeues"`
	Down       int64       `json:"down_events"`
	Bottleneck int         `json:"bottleneck"`

	lat, rate hist
}

// Bottleneck is how often one path was the bottleneck.
type Bottleneck struct {
	Service string  `json:"service,omitempty"`
	Path    int     `json:"path"`
	Device  string  `json:"device,omitempty"`
	Count   int     `json:"transfers"`
	Share   float64 `json:"share"` // of the selected transfers with at least two paths carrying chunks
}

// ReceiverAgg summarises the receivers' views of the selected transfers
// that have one.
type ReceiverAgg struct {
	Transfers  int       `json:"transfers"`
	Lag        Quantiles `json:"lag"`         // last arrival to done, per transfer
	QueueMax   Quantiles `json:"queue_max"`   // longest completion-queue wait, per transfer
	HandoffP99 Quantiles `json:"handoff_p99"` // per transfer: the p99 of its chunks' hand-offs
	Duplicates int64     `json:"duplicates"`
	Rejected   int64     `json:"rejected"`
	Bound      int       `json:"receiver_bound"` // transfers receiver-bound (Options.StallFactor)
}

// StallGroup gathers the receiver-bound transfers of one receiver.
type StallGroup struct {
	Receiver string    `json:"receiver"` // the receiver's service, else the sender's peer address
	Peer     string    `json:"peer,omitempty"`
	Count    int       `json:"transfers"`
	Of       int       `json:"of"` // selected transfers to this receiver
	Lag      Quantiles `json:"lag"`
	Network  Quantiles `json:"network"` // the same transfers' network time
	Handoff  Quantiles `json:"handoff_total"`
	QueueMax Quantiles `json:"queue_max"`
	Cause    string    `json:"cause"`
	Examples []string  `json:"examples"` // trace ids

	lag, net, handoff, queue hist
}

// FailedTransfer is one selected transfer that failed at either end.
type FailedTransfer struct {
	TraceID string    `json:"trace_id"`
	ID      int64     `json:"transfer_id"`
	Name    string    `json:"name,omitempty"`
	Service string    `json:"service,omitempty"`
	Peer    string    `json:"peer,omitempty"`
	Start   time.Time `json:"start"`
	Side    string    `json:"side"` // sender or receiver
	Outcome string    `json:"outcome"`
	Error   string    `json:"error"`
}

// aggregator is the sink behind Scan: it filters transfers, folds the
// selected ones into the summary's histograms and counters, keeps a
// compact record of each for the receiver join, and the first Detail
// whole.
type aggregator struct {
	opt    Options
	filter Filter
	detail int
	s      Summary

	paths    map[pathKey]*PathAgg
	nics     map[nicKey]*NICAgg
	bottle   map[pathKey]int
	multi    int // selected transfers with >= 2 paths carrying chunks
	complete hist
	goodput  hist

	brief    map[key]*brief // every selected transfer, for the receiver join
	rejected map[key]struct{}
	kept     map[key]*Transfer
	// pending holds transfers that only their receiver's part (not yet
	// seen) can select; pendingWhole counts those held whole.
	pending      map[key]*Transfer
	pendingWhole int
}

type pathKey struct {
	service string
	path    int
}

type nicKey struct{ service, device string }

// brief is what the aggregator keeps of a selected transfer.
type brief struct {
	traceID, service, peer, name string
	id                           int64
	start                        time.Time
	completion                   time.Duration
	outcome, err                 string
	rv                           *ReceiverView
}

func newAggregator(opt Options, f Filter, detail int) *aggregator {
	return &aggregator{opt: opt, filter: f, detail: detail,
		s:     Summary{Outcomes: map[string]int{}, RequeueReasons: map[string]int{}, FailureReasons: map[string]int{}},
		paths: map[pathKey]*PathAgg{}, nics: map[nicKey]*NICAgg{}, bottle: map[pathKey]int{},
		brief: map[key]*brief{}, rejected: map[key]struct{}{}, kept: map[key]*Transfer{}, pending: map[key]*Transfer{}}
}

func (a *aggregator) transfer(t *Transfer) {
	match, final := a.filter.decide(t)
	switch {
	case final && match:
		a.fold(t)
	case final:
		a.reject(t.key)
	default:
		// Only the receiver's part can still select it: wait for it, with
		// what folding needs and nothing more (about 80 bytes per chunk).
		if len(a.kept)+a.pendingWhole < a.detail {
			a.pendingWhole++
			a.pending[t.key] = t
		} else {
			a.pending[t.key] = slim(t)
		}
	}
}

func (a *aggregator) reject(k key) {
	a.s.Skipped++
	a.rejected[k] = struct{}{}
}

// slim returns a copy of t with what fold needs: the acknowledged
// attempts, the per-path figures without their samples.
func slim(t *Transfer) *Transfer {
	c := *t
	c.Attempts = nil
	for _, at := range t.Attempts {
		if at.Outcome == schema.OutcomeAcked {
			c.Attempts = append(c.Attempts, Attempt{Path: at.Path, Bytes: at.Bytes, Start: at.Start, End: at.End, Outcome: at.Outcome})
		}
	}
	c.PerPath = make([]*PathStats, len(t.PerPath))
	for i, ps := range t.PerPath {
		cp := *ps
		cp.latencies, cp.rates = nil, nil
		c.PerPath[i] = &cp
	}
	c.Stragglers = nil
	c.slim = true
	return &c
}

// fold adds a selected transfer to the summary.
func (a *aggregator) fold(t *Transfer) {
	s := &a.s
	s.Selected++
	s.Outcomes[t.Outcome]++
	if s.First.IsZero() || t.Start.Before(s.First) {
		s.First = t.Start
	}
	if t.Start.After(s.Last) {
		s.Last = t.Start
	}
	if t.Outcome == schema.TransferDone {
		s.Bytes += int64(t.Bytes)
		a.complete.add(int64(t.Completion))
		if t.Goodput > 0 {
			a.goodput.add(int64(t.Goodput))
		}
	}
	for r, n := range t.RequeueReasons {
		s.RequeueReasons[r] += n
	}
	s.Requeues += int64(t.Requeues)
	s.Attempts += int64(t.attempts)
	for _, e := range t.Events {
		switch e.Name {
		case schema.EventPathDown:
			s.Down++
		case schema.EventPathQuarantine:
			s.Quarantines++
		}
	}
	carrying := 0
	for _, ps := range t.PerPath {
		pk := pathKey{t.Service, ps.Path}
		p := a.paths[pk]
		if p == nil {
			p = &PathAgg{Service: t.Service, Path: ps.Path}
			a.paths[pk] = p
		}
		if p.Device == "" {
			p.Device, p.NIC = ps.Device, ps.NIC
		}
		p.Transfers++
		p.Chunks += int64(ps.Chunks)
		p.Bytes += ps.Bytes
		p.Requeues += int64(ps.Requeues)
		p.Down += int64(ps.Down)
		p.ECNChunks += int64(ps.ECNChunks)
		p.CNPs += ps.CNPs
		p.PFCPause += ps.PFCPause
		if ps.Chunks > 0 {
			carrying++
			p.tput.add(int64(ps.Throughput))
		}
		dev := cmp.Or(ps.Device, fmt.Sprintf("path %d", ps.Path))
		nk := nicKey{t.Service, dev}
		n := a.nics[nk]
		if n == nil {
			n = &NICAgg{Service: t.Service, Device: dev}
			a.nics[nk] = n
		}
		if !slices.Contains(n.Paths, ps.Path) {
			n.Paths = append(n.Paths, ps.Path)
		}
		n.Chunks += int64(ps.Chunks)
		n.Bytes += ps.Bytes
		n.Requeues += int64(ps.Requeues)
		n.Down += int64(ps.Down)
	}
	for i := range t.Attempts {
		at := &t.Attempts[i]
		if at.Outcome != schema.OutcomeAcked {
			continue
		}
		lat := at.End - at.Start
		p := a.paths[pathKey{t.Service, at.Path}]
		p.lat.add(int64(lat))
		r := int64(units.RateOf(at.Bytes, lat))
		p.rate.add(r)
		if n := a.nics[nicKey{t.Service, cmp.Or(p.Device, fmt.Sprintf("path %d", at.Path))}]; n != nil {
			n.lat.add(int64(lat))
			n.rate.add(r)
		}
	}
	if carrying >= 2 {
		a.multi++
	}
	if t.Bottleneck != nil {
		pk := pathKey{t.Service, *t.Bottleneck}
		a.bottle[pk]++
		if p := a.paths[pk]; p != nil {
			p.Bottleneck++
			if n := a.nics[nicKey{t.Service, cmp.Or(p.Device, fmt.Sprintf("path %d", p.Path))}]; n != nil {
				n.Bottleneck++
			}
		}
	}
	if t.Critical != nil {
		if p := a.paths[pathKey{t.Service, t.Critical.Path}]; p != nil {
			p.Critical++
		}
	}
	a.brief[t.key] = &brief{traceID: t.TraceID, service: t.Service, peer: t.Peer, name: t.Name, id: t.ID, start: t.Start,
		completion: t.Completion, outcome: t.Outcome, err: t.Error, rv: t.Receiver}
	if len(a.kept) < a.detail && !t.slim {
		a.kept[t.key] = t
		a.s.Transfers = append(a.s.Transfers, t)
	}
}

func (a *aggregator) lateReceiver(k key, rv *ReceiverView) {
	if t := a.pending[k]; t != nil {
		delete(a.pending, k)
		if !t.slim {
			a.pendingWhole--
		}
		attach(t, rv, a.opt)
		if a.filter.Match(t) {
			a.fold(t)
		} else {
			a.reject(k)
		}
		return
	}
	if b := a.brief[k]; b != nil {
		b.rv = rv
	}
	if t := a.kept[k]; t != nil {
		attach(t, rv, a.opt)
	}
}

// finish computes the summary.
func (a *aggregator) finish() *Summary {
	// Transfers still waiting for a receiver part that never came: decide
	// on the sender's part alone, in start order.
	var left []*Transfer
	for _, t := range a.pending {
		left = append(left, t)
	}
	slices.SortFunc(left, func(x, y *Transfer) int {
		return cmp.Or(x.Start.Compare(y.Start), cmp.Compare(x.TraceID, y.TraceID), cmp.Compare(x.ID, y.ID))
	})
	clear(a.pending)
	for _, t := range left {
		if a.filter.Match(t) {
			a.fold(t)
		} else {
			a.reject(t.key)
		}
	}
	s := &a.s
	s.Completion = quantiles(&a.complete)
	s.Goodput = rates(&a.goodput)
	if s.Attempts > 0 {
		s.RequeueRate = float64(s.Requeues) / float64(s.Attempts)
	}
	if s.Selected > 0 {
		s.DownRate = float64(s.Down) / float64(s.Selected)
	}
	for _, p := range a.paths {
		p.Latency, p.ChunkRate, p.Throughput = quantiles(&p.lat), rates(&p.rate), rates(&p.tput)
		s.Paths = append(s.Paths, p)
	}
	slices.SortFunc(s.Paths, func(x, y *PathAgg) int { return cmp.Or(cmp.Compare(x.Service, y.Service), cmp.Compare(x.Path, y.Path)) })
	for _, n := range a.nics {
		n.Latency, n.ChunkRate = quantiles(&n.lat), rates(&n.rate)
		slices.Sort(n.Paths)
		s.NICs = append(s.NICs, n)
	}
	slices.SortFunc(s.NICs, func(x, y *NICAgg) int {
		return cmp.Or(cmp.Compare(x.Service, y.Service), cmp.Compare(x.Device, y.Device))
	})
	for pk, c := range a.bottle {
		b := &Bottleneck{Service: pk.service, Path: pk.path, Count: c}
		if p := a.paths[pk]; p != nil {
			b.Device = p.Device
		}
		if a.multi > 0 {
			b.Share = round3(float64(c) / float64(a.multi))
		}
		s.Bottlenecks = append(s.Bottlenecks, b)
	}
	slices.SortFunc(s.Bottlenecks, func(x, y *Bottleneck) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Service, y.Service), cmp.Compare(x.Path, y.Path))
	})
	a.receivers()
	a.failures()
	a.findings()
	if len(s.RequeueReasons) == 0 {
		s.RequeueReasons = nil
	}
	if len(s.FailureReasons) == 0 {
		s.FailureReasons = nil
	}
	slices.SortStableFunc(s.Transfers, func(x, y *Transfer) int { return cmp.Or(x.Start.Compare(y.Start), cmp.Compare(x.ID, y.ID)) })
	return s
}

// receivers joins the receivers' views and groups the receiver-bound
// transfers by receiver.
func (a *aggregator) receivers() {
	var lag, queue, handoff hist
	ra := &ReceiverAgg{}
	groups := map[string]*StallGroup{}
	totals := map[string]int{}
	for _, b := range a.sortedBriefs() {
		rv := b.rv
		if rv == nil {
			continue
		}
		who := cmp.Or(rv.Service, b.peer, "unknown receiver")
		totals[who]++
		ra.Transfers++
		lag.add(int64(rv.Lag))
		queue.add(int64(rv.QueueMax))
		handoff.add(int64(rv.HandoffP99))
		ra.Duplicates += int64(rv.Duplicates)
		ra.Rejected += int64(rv.Rejected)
		t := Transfer{Completion: b.completion, Outcome: b.outcome}
		attach(&t, rv, a.opt)
		if t.ReceiverBound == "" {
			continue
		}
		ra.Bound++
		g := groups[who]
		if g == nil {
			g = &StallGroup{Receiver: who, Peer: b.peer}
			groups[who] = g
		}
		g.Count++
		g.lag.add(int64(rv.Lag))
		g.net.add(int64(b.completion))
		g.handoff.add(int64(rv.HandoffTotal))
		g.queue.add(int64(rv.QueueMax))
		if len(g.Examples) < 5 {
			g.Examples = append(g.Examples, b.traceID)
		}
	}
	if ra.Transfers == 0 {
		return
	}
	ra.Lag, ra.QueueMax, ra.HandoffP99 = quantiles(&lag), quantiles(&queue), quantiles(&handoff)
	a.s.Receiver = ra
	for who, g := range groups {
		g.Of = totals[who]
		g.Lag, g.Network, g.Handoff, g.QueueMax = quantiles(&g.lag), quantiles(&g.net), quantiles(&g.handoff), quantiles(&g.queue)
		if g.Handoff.P50 >= g.QueueMax.P50 {
			g.Cause = fmt.Sprintf("the application's hand-off (p50 %v per transfer)", round(g.Handoff.P50))
		} else {
			g.Cause = fmt.Sprintf("completions waiting to be polled (p50 longest wait %v per transfer)", round(g.QueueMax.P50))
		}
		a.s.Stalls = append(a.s.Stalls, g)
	}
	slices.SortFunc(a.s.Stalls, func(x, y *StallGroup) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Receiver, y.Receiver))
	})
}

// sortedBriefs returns the selected transfers in start order.
func (a *aggregator) sortedBriefs() []*brief {
	out := make([]*brief, 0, len(a.brief))
	for _, b := range a.brief {
		out = append(out, b)
	}
	slices.SortFunc(out, func(x, y *brief) int {
		return cmp.Or(x.start.Compare(y.start), cmp.Compare(x.traceID, y.traceID), cmp.Compare(x.id, y.id))
	})
	return out
}

// failures lists the selected transfers that failed at either end.
func (a *aggregator) failures() {
	s := &a.s
	for _, b := range a.sortedBriefs() {
		side, outcome, msg := "", "", ""
		bad := func(o string) bool { return o == schema.TransferFailed || o == schema.TransferAbandoned }
		switch {
		case bad(b.outcome):
			side, outcome, msg = "sender", b.outcome, b.err
		case b.rv != nil && bad(b.rv.Outcome):
			side, outcome, msg = "receiver", b.rv.Outcome, b.rv.Error
		default:
			continue
		}
		s.Failed++
		msg = cmp.Or(msg, "no reason recorded")
		s.FailureReasons[side+": "+msg]++
		if len(s.FailedTransfers) < MaxListed {
			s.FailedTransfers = append(s.FailedTransfers, FailedTransfer{TraceID: b.traceID, ID: b.id, Name: b.name, Service: b.service,
				Peer: b.peer, Start: b.start, Side: side, Outcome: outcome, Error: msg})
		}
	}
}

// Thresholds of the findings.
const (
	// findBottleneckShare: a path is named when it was the bottleneck of
	// at least this share of the multi-path transfers (and of 3).
	findBottleneckShare = 0.05
)

// findings states the headline conclusions.
func (a *aggregator) findings() {
	s := &a.s
	for _, b := range s.Bottlenecks {
		if b.Count < 3 || b.Share < findBottleneckShare {
			continue
		}
		p := a.paths[pathKey{b.Service, b.Path}]
		var others []units.BitRate
		var otherP99 []time.Duration
		for _, q := range s.Paths {
			if q.Service == b.Service && q.Path != b.Path && q.ChunkRate.N > 0 {
				others = append(others, q.ChunkRate.P50)
				otherP99 = append(otherP99, q.Latency.P99)
			}
		}
		line := fmt.Sprintf("slow path: %s was the bottleneck in %d of %d multi-path transfers (%.1f%%)",
			pathName(b.Service, b.Path, b.Device, p.NIC), b.Count, a.multi, 100*b.Share)
		if len(others) > 0 {
			slices.Sort(others)
			slices.Sort(otherP99)
			line += fmt.Sprintf("; its chunks move at %s (p50) vs %s on the median other path, latency p99 %v vs %v",
				FormatRate(p.ChunkRate.P50), FormatRate(others[len(others)/2]), round(p.Latency.P99), round(otherP99[len(otherP99)/2]))
		}
		s.Findings = append(s.Findings, line)
	}
	for _, g := range s.Stalls {
		line := fmt.Sprintf("receiver stall: %d of %d transfers to %s were receiver-bound (lag > %g× network time): receiver lag p50 %v (max %v) vs network time p50 %v; most of it %s",
			g.Count, g.Of, g.Receiver, a.opt.StallFactor, round(g.Lag.P50), round(g.Lag.Max), round(g.Network.P50), g.Cause)
		if g.Peer != "" && g.Peer != g.Receiver {
			line += " (peer " + g.Peer + ")"
		}
		s.Findings = append(s.Findings, line)
	}
	if s.Failed > 0 {
		var rs []string
		for r, n := range s.FailureReasons {
			rs = append(rs, fmt.Sprintf("%s ×%d", r, n))
		}
		slices.Sort(rs)
		if len(rs) > 5 {
			rs = append(rs[:5], fmt.Sprintf("… %d more reasons", len(rs)-5))
		}
		s.Findings = append(s.Findings, fmt.Sprintf("failed: %d of %d transfers (%s)", s.Failed, s.Selected, strings.Join(rs, "; ")))
	}
	if s.Attempts > 0 && s.Requeues > 0 {
		s.Findings = append(s.Findings, fmt.Sprintf("requeues: %d of %d chunk attempts (%.2f%%); path-down events: %d (%.3f per transfer)",
			s.Requeues, s.Attempts, 100*s.RequeueRate, s.Down, s.DownRate))
	}
	if len(s.Findings) == 0 && s.Selected > 0 {
		s.Findings = append(s.Findings, "no anomaly: no path was the bottleneck of 5% of transfers, no receiver stalled, nothing failed")
	}
}

// pathName names a path for findings: "svc path 2 (mlx5_2, eth2)".
func pathName(service string, path int, device, nic string) string {
	n := fmt.Sprintf("path %d", path)
	if service != "" {
		n = service + " " + n
	}
	var d []string
	for _, x := range []string{device, nic} {
		if x != "" {
			d = append(d, x)
		}
	}
	if len(d) > 0 {
		n += " (" + strings.Join(d, ", ") + ")"
	}
	return n
}
