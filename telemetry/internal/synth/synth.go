// Package synth is a small deterministic stand-in for the multipath engine
// in telemetry's tests: it runs one transfer over paths of given rate and
// RTT and feeds a multipath.Recorder the event sequence the engine's
// contract (multipath/event.go) describes, keeping its own per-path
// counters to check the analysis against.
//
// Model: each path serialises one chunk at a time at its rate and keeps up
// to Window chunks in flight; a chunk is acknowledged one RTT after its
// serialisation ends. A freed slot takes the next chunk (requeued chunks
// first). A path that goes down requeues its in-flight chunks.
package synth

import (
	"container/heap"
	"time"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Path describes one path.
type Path struct {
	Rate   units.BitRate
	RTT    time.Duration
	Window int        // chunks in flight; 0 means 2
	DownAt vtime.Time // the path fails at this time; 0 means never
	// CNPEvery > 0 sends a CNP reading (of CNPs CNPs) after every
	// CNPEvery-th completion, and marks those chunks with ECN.
	CNPEvery, CNPs int
}

// Spec is one transfer.
type Spec struct {
	Transfer  multipath.TransferID
	Bytes     units.Bytes
	ChunkSize units.Bytes
	Start     vtime.Time
	Paths     []Path
	// Delay adds to the first attempt of the chunks it names (a
	// straggler: a slow completion not explained by the path's rate).
	Delay map[uint32]time.Duration
}

// Result is the synthetic engine's own accounting.
type Result struct {
	Acked    []units.Bytes // bytes acknowledged per path
	Chunks   []int         // chunks acknowledged per path
	Requeues int
	End      vtime.Time // time of the transfer-done event
}

type pending struct {
	at      vtime.Time
	seq     int
	path    int
	chunk   uint32
	attempt uint16
	start   vtime.Time
	down    bool // a path-down event rather than a completion
}

type pq []pending

func (q pq) Len() int { return len(q) }
func (q pq) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q pq) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *pq) Push(x any)   { *q = append(*q, x.(pending)) }
func (q *pq) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// Run runs spec, feeding rec, and returns the counters. rec may be nil.
func Run(spec Spec, rec multipath.Recorder) Result {
	var ev multipath.Event
	emit := func(e multipath.Event) {
		if rec != nil {
			ev = e
			rec.Record(&ev)
		}
	}
	n := int((spec.Bytes + spec.ChunkSize - 1) / spec.ChunkSize)
	size := func(c uint32) units.Bytes {
		return min(spec.ChunkSize, spec.Bytes-units.Bytes(c)*spec.ChunkSize)
	}
	res := Result{Acked: make([]units.Bytes, len(spec.Paths)), Chunks: make([]int, len(spec.Paths))}
	type pstate struct {
		busy     vtime.Time
		inflight int
		down     bool
		done     int
		srtt     time.Duration
		attempts map[uint32]pending
	}
	ps := make([]pstate, len(spec.Paths))
	var q pq
	seq := 0
	push := func(p pending) { p.seq = seq; seq++; heap.Push(&q, p) }
	for i, p := range spec.Paths {
		ps[i].attempts = map[uint32]pending{}
		ps[i].srtt = p.RTT
		if p.DownAt != 0 {
			push(pending{at: p.DownAt, path: i, down: true})
		}
	}
	emit(multipath.Event{Kind: multipath.EvTransferStart, Now: spec.Start, Transfer: spec.Transfer,
		Bytes: spec.Bytes, Chunk: uint32(n), Size: spec.ChunkSize})
	next := uint32(0)
	var requeued []pending
	attempts := make([]uint16, n)
	assign := func(now vtime.Time, path int) bool {
		var c uint32
		switch {
		case len(requeued) > 0:
			c = requeued[0].chunk
			requeued = requeued[1:]
		case int(next) < n:
			c = next
			next++
		default:
			return false
		}
		attempts[c]++
		p := &ps[path]
		sz := size(c)
		ser := max(now, p.busy)
		p.busy = ser.Add(spec.Paths[path].Rate.TxTime(sz))
		p.inflight++
		done := p.busy.Add(spec.Paths[path].RTT)
		if attempts[c] == 1 {
			done = done.Add(spec.Delay[c])
		}
		pe := pending{at: done, path: path, chunk: c, attempt: attempts[c], start: now}
		p.attempts[c] = pe
		emit(multipath.Event{Kind: multipath.EvChunkStart, Now: now, Transfer: spec.Transfer, Chunk: c,
			Path: path, Attempt: attempts[c], Bytes: sz})
		push(pe)
		return true
	}
	fill := func(now vtime.Time) {
		for {
			progress := false
			for i := range ps {
				w := spec.Paths[i].Window
				if w == 0 {
					w = 2
				}
				if !ps[i].down && ps[i].inflight < w && assign(now, i) {
					progress = true
				}
			}
			if !progress {
				return
			}
		}
	}
	fill(spec.Start)
	acked := 0
	for acked < n && q.Len() > 0 {
		e := heap.Pop(&q).(pending)
		p := &ps[e.path]
		if e.down {
			p.down = true
			res.End = max(res.End, e.at)
			emit(multipath.Event{Kind: multipath.EvPathDown, Now: e.at, Path: e.path, Reason: "retry exceeded"})
			for c, a := range p.attempts {
				_ = a
				requeued = append(requeued, pending{chunk: c})
			}
			// deterministic order
			for i := 1; i < len(requeued); i++ {
				for j := i; j > 0 && requeued[j].chunk < requeued[j-1].chunk; j-- {
					requeued[j], requeued[j-1] = requeued[j-1], requeued[j]
				}
			}
			for _, r := range requeued {
				a := p.attempts[r.chunk]
				emit(multipath.Event{Kind: multipath.EvChunkRequeue, Now: e.at, Transfer: spec.Transfer,
					Chunk: r.chunk, Path: e.path, Attempt: a.attempt, Reason: "path down"})
				res.Requeues++
			}
			clear(p.attempts)
			p.inflight = 0
			fill(e.at)
			continue
		}
		if p.down {
			continue // completion of a chunk already requeued
		}
		if cur, ok := p.attempts[e.chunk]; !ok || cur.attempt != e.attempt {
			continue
		}
		delete(p.attempts, e.chunk)
		p.inflight--
		p.done++
		acked++
		sz := size(e.chunk)
		res.Acked[e.path] += sz
		res.Chunks[e.path]++
		var ecn uint64
		pc := spec.Paths[e.path]
		if pc.CNPEvery > 0 && p.done%pc.CNPEvery == 0 {
			ecn = uint64(pc.CNPs)
		}
		rtt := pc.RTT + pc.Rate.TxTime(min(sz, 4*units.KiB))
		p.srtt = (7*p.srtt + rtt) / 8
		emit(multipath.Event{Kind: multipath.EvChunkDone, Now: e.at, Transfer: spec.Transfer, Chunk: e.chunk,
			Path: e.path, Attempt: e.attempt, Bytes: sz, RTT: rtt, Latency: e.at.Sub(e.start), ECN: ecn})
		emit(multipath.Event{Kind: multipath.EvPathSample, Now: e.at, Path: e.path,
			Window: units.Bytes(max(pc.Window, 2)) * spec.ChunkSize, Rate: pc.Rate,
			InFlight: units.Bytes(p.inflight) * spec.ChunkSize, SRTT: p.srtt, Bytes: res.Acked[e.path]})
		if ecn > 0 {
			emit(multipath.Event{Kind: multipath.EvCNP, Now: e.at, Path: e.path, ECN: ecn})
		}
		fill(e.at)
		res.End = max(res.End, e.at)
	}
	if acked < n {
		emit(multipath.Event{Kind: multipath.EvTransferFailed, Now: res.End, Transfer: spec.Transfer, Reason: "all paths down"})
		return res
	}
	emit(multipath.Event{Kind: multipath.EvTransferDone, Now: res.End, Transfer: spec.Transfer, Bytes: spec.Bytes})
	return res
}
