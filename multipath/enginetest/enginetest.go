// Package enginetest is the one test driver of the multipath engine: a fake
// network in virtual time that carries out an Engine's actions, as
// net/http/httptest stands in for a real server. Engine unit tests, the
// engine's benchmarks, the golden event traces and telemetry's benchmarks
// all run on it.
//
// # The model
//
// Every path is a FIFO server with a line rate and a fixed round-trip
// time: a work request of n bytes posted at now starts when the path is
// free (at max(now, end of the previous one)), takes n/rate to serialise,
// and completes one RTT after it was serialised. Completions of one path
// therefore come in post order, as on an RC queue pair, and the pending
// completions live in one allocation-free ring per path.
//
// A path can be put in three failure modes, each like an RC queue pair's:
//
//   - Dead: work requests fail with "retry-exceeded" FailDelay after their
//     post (a link that is down: the NIC's retries run out); work already
//     in flight fails too when its completion falls due.
//   - Stalled: work requests vanish and never complete (a black hole the
//     NIC does not notice, until the engine's stall timeout does).
//   - Resetting a path (ActReset, or ActProbe with Reset set, as
//     qp.Resetter does) flushes what is still outstanding on it: those
//     work requests complete at once with "flushed", as moving a queue
//     pair to the error state does (ibv_modify_qp(3)), stalled ones
//     included; then the Net reports OnReset(ok).
//
// CNPs are modelled as a count per bytes carried (CNPEvery) read back
// through OnCounters; ECNEvery does the same for ECN-marked packets.
//
// # Two ways to run
//
// Run and Step follow the driver loop of the multipath package doc: every
// completion due at now is fed, then counters, then OnTimer when due, then
// Actions until they stop filling the buffer. Round is the cheapest
// faithful loop for benchmarks: exactly one event (the earliest completion
// or the timer) per round, then the actions it allows; it allocates
// nothing once the rings have grown.
//
// A Net is not safe for concurrent use.
package enginetest

import (
	"fmt"
	"io"
	"time"

	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// TB is the part of testing.TB a Net uses.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// Outcome is how a transfer ended.
type Outcome struct {
	Err error
	At  vtime.Time
}

type pending struct {
	at vtime.Time
	id uint64
	n  units.Bytes
	ok bool
}

// ring is one path's outstanding work requests in completion order.
type ring struct {
	buf  []pending
	head int
	n    int
}

func (r *ring) push(p pending) {
	if r.n == len(r.buf) {
		nb := make([]pending, max(2*len(r.buf), 64))
		for i := 0; i < r.n; i++ {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = p
	r.n++
}

func (r *ring) peek() *pending { return &r.buf[r.head] }

func (r *ring) pop() pending {
	p := r.buf[r.head]
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return p
}

// Net is a fake network driving one Engine. Fields may be changed between
// steps (a test's Hook, say) to kill, stall or revive paths.
type Net struct {
	T     TB
	E     *multipath.Engine
	Now   vtime.Time
	Rates []units.BitRate
	RTT   time.Duration
	// FailDelay is how long after its post a work request on a Dead path
	// fails; default 1 ms.
	FailDelay time.Duration

	Dead    []bool          // per path: work requests fail (see the package doc)
	Stalled []bool          // per path: work requests never complete
	Delay   []time.Duration // per path: added to RTT (a slow or congested path)
	// NoReset makes the Net a driver without qp.Resetter: ActReset and
	// the reset of an ActProbe are answered OnReset(false) and flush
	// nothing.
	NoReset bool

	// CNPEvery and ECNEvery, per path, are the bytes carried per CNP and
	// per ECN-marked packet (0: none).
	CNPEvery, ECNEvery []units.Bytes

	Bytes    []units.Bytes // bytes completed OK per path
	Posted   []units.Bytes // bytes posted per path
	Done     map[multipath.TransferID]Outcome
	Chunks   int // chunks whose last segment was posted (Round's unit of work)
	Resets   int // ActProbe actions with Reset
	Probes   int
	Timeouts int // OnTimer calls

	// Trace, if set, gets one line per action.
	Trace io.Writer
	// Hook, if set, runs after every step of Run.
	Hook func()

	acts    []multipath.Action
	rings   []ring
	heads   []vtime.Time // per path: its ring's earliest completion, vtime.Never if none
	busy    []vtime.Time
	carried []units.Bytes
	cnps    []uint64
	ecns    []uint64
	comp    multipath.Completion
}

// New builds an engine from cfg and a Net around it. When cfg.Paths is
// empty, one path per rate is added, each on its own NIC, with BaseRTT rtt.
func New(tb TB, cfg multipath.Config, rates []units.BitRate, rtt time.Duration) *Net {
	tb.Helper()
	if len(cfg.Paths) == 0 {
		for i, r := range rates {
			cfg.Paths = append(cfg.Paths, multipath.PathConfig{LineRate: r, BaseRTT: rtt, NIC: i})
		}
	}
	if len(cfg.Paths) != len(rates) {
		tb.Fatalf("enginetest: %d paths configured, %d rates", len(cfg.Paths), len(rates))
	}
	e, err := multipath.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	np := len(rates)
	n := &Net{
		T: tb, E: e, Now: vtime.Epoch, Rates: rates, RTT: rtt, FailDelay: time.Millisecond,
		Dead: make([]bool, np), Stalled: make([]bool, np), Delay: make([]time.Duration, np),
		CNPEvery: make([]units.Bytes, np), ECNEvery: make([]units.Bytes, np),
		Bytes: make([]units.Bytes, np), Posted: make([]units.Bytes, np),
		Done: map[multipath.TransferID]Outcome{},
		acts: make([]multipath.Action, 256), rings: make([]ring, np), heads: make([]vtime.Time, np), busy: make([]vtime.Time, np),
		carried: make([]units.Bytes, np), cnps: make([]uint64, np), ecns: make([]uint64, np),
	}
	for i := range n.heads {
		n.heads[i] = vtime.Never
	}
	return n
}

// push queues a pending completion on path's ring.
func (n *Net) push(path int, p pending) {
	r := &n.rings[path]
	r.push(p)
	if r.n == 1 {
		n.heads[path] = p.at
	}
}

// pop takes the earliest pending completion off path's ring.
func (n *Net) pop(path int) pending {
	r := &n.rings[path]
	p := r.pop()
	if r.n > 0 {
		n.heads[path] = r.peek().at
	} else {
		n.heads[path] = vtime.Never
	}
	return p
}

// SetActionBuffer makes Act ask for at most k actions per Actions call
// (default 256), as a driver with a small batch would.
func (n *Net) SetActionBuffer(k int) { n.acts = make([]multipath.Action, max(k, 1)) }

// Submit starts a transfer at Now and fails the test on error.
func (n *Net) Submit(id multipath.TransferID, size, chunkSize units.Bytes) chunk.Plan {
	n.T.Helper()
	_, plan, err := n.E.Submit(n.Now, multipath.TransferSpec{ID: id, Size: size, ChunkSize: chunkSize})
	if err != nil {
		n.T.Fatal(err)
	}
	return plan
}

// SubmitSpec starts the transfer spec describes at Now (its priority,
// say) and fails the test on error.
func (n *Net) SubmitSpec(spec multipath.TransferSpec) chunk.Plan {
	n.T.Helper()
	_, plan, err := n.E.Submit(n.Now, spec)
	if err != nil {
		n.T.Fatal(err)
	}
	return plan
}

// Outstanding returns the work requests posted on path and not yet
// completed (stalled ones excluded: they never will).
func (n *Net) Outstanding(path int) int { return n.rings[path].n }

// Act calls Actions at Now until it stops filling the buffer and carries
// out each action.
func (n *Net) Act() {
	for {
		k := n.E.Actions(n.Now, n.acts)
		for i := range n.acts[:k] {
			n.do(&n.acts[i])
		}
		if k < len(n.acts) {
			return
		}
	}
}

func (n *Net) do(a *multipath.Action) {
	if n.Trace != nil {
		fmt.Fprintf(n.Trace, "%d %v p%d w%d t%d c%d off%d len%d imm%v a%d rst%v rate%d\n",
			n.Now, a.Kind, a.Path, a.WorkID, a.Transfer, a.Chunk, a.Offset, a.Len, a.HasImm, a.Attempt, a.Reset, a.Rate)
		if a.Err != nil {
			fmt.Fprintf(n.Trace, "  err %v\n", a.Err)
		}
	}
	switch a.Kind {
	case multipath.ActPost, multipath.ActProbe:
		p := a.Path
		if a.Kind == multipath.ActProbe {
			n.Probes++
			if a.Reset {
				n.reset(p)
			}
		} else if a.HasImm {
			n.Chunks++
		}
		n.Posted[p] += a.Len
		switch {
		case n.Stalled[p]:
			return
		case n.Dead[p]:
			at := n.Now.Add(n.FailDelay)
			if r := &n.rings[p]; r.n > 0 {
				at = max(at, r.buf[(r.head+r.n-1)%len(r.buf)].at)
			}
			n.push(p, pending{at: at, id: a.WorkID})
			return
		}
		start := max(n.Now, n.busy[p])
		end := start.Add(n.Rates[p].TxTime(a.Len))
		n.busy[p] = end
		n.push(p, pending{at: end.Add(n.RTT + n.Delay[p]), id: a.WorkID, n: a.Len, ok: true})
		if c := n.CNPEvery[p]; c > 0 {
			before := n.carried[p] / c
			n.cnps[p] += uint64((n.carried[p]+a.Len)/c - before)
		}
		if c := n.ECNEvery[p]; c > 0 {
			before := n.carried[p] / c
			n.ecns[p] += uint64((n.carried[p]+a.Len)/c - before)
		}
		n.carried[p] += a.Len
	case multipath.ActReset:
		n.reset(a.Path)
	case multipath.ActDone, multipath.ActFailed:
		n.Done[a.Transfer] = Outcome{Err: a.Err, At: n.Now}
	}
}

// reset carries out a queue-pair reset of path and reports it.
func (n *Net) reset(path int) {
	if n.NoReset {
		n.E.OnReset(n.Now, path, false)
		return
	}
	n.Resets++
	n.flush(path)
	n.E.OnReset(n.Now, path, true)
}

// flush completes everything outstanding on path with an error at Now, as
// resetting its queue pair would.
func (n *Net) flush(path int) {
	for n.rings[path].n > 0 {
		p := n.pop(path)
		n.comp = multipath.Completion{WorkID: p.id, Reason: "flushed"}
		n.E.OnCompletion(n.Now, &n.comp)
	}
	n.busy[path] = n.Now
}

// complete feeds one completion.
func (n *Net) complete(path int, p pending) {
	if n.Dead[path] {
		p.ok = false
	}
	// Only these fields vary; the INT hops stay zero. Zeroing the whole
	// 300-byte value per completion would be charged to the engine in its
	// benchmarks.
	n.comp.WorkID, n.comp.OK, n.comp.Reason = p.id, p.ok, ""
	if p.ok {
		n.Bytes[path] += p.n
	} else {
		n.comp.Reason = "retry-exceeded"
	}
	n.E.OnCompletion(n.Now, &n.comp)
}

// earliest returns the path whose next completion is earliest, -1 if none.
func (n *Net) earliest() int {
	best, at := -1, vtime.Never
	for p, h := range n.heads {
		if h < at {
			best, at = p, h
		}
	}
	return best
}

// Step runs the driver loop once at Now: OnTimer if due, then Act.
func (n *Net) Step() {
	if d := n.E.Deadline(); d != 0 && d <= n.Now {
		n.Timeouts++
		n.E.OnTimer(n.Now)
	}
	n.Act()
}

// Advance moves Now to the next completion or deadline (whichever is
// first), feeds every completion due then and the counters, and runs Step.
// It reports false when nothing is outstanding and no deadline is set.
func (n *Net) Advance() bool {
	next := n.E.Deadline()
	if b := n.earliest(); b >= 0 {
		next = vtime.Earliest(next, n.rings[b].peek().at)
	}
	if next == 0 {
		return false
	}
	if next > n.Now {
		n.Now = next
	}
	for {
		b := n.earliest()
		if b < 0 || n.rings[b].peek().at > n.Now {
			break
		}
		n.complete(b, n.pop(b))
	}
	for i := range n.cnps {
		n.E.OnCounters(n.Now, i, n.ecns[i], n.cnps[i])
	}
	n.Step()
	return true
}

// Run steps until every transfer in ids has ended; it fails the test when
// the engine is stuck or after 10 million steps.
func (n *Net) Run(ids ...multipath.TransferID) {
	n.T.Helper()
	n.Step()
	for steps := 0; ; steps++ {
		all := true
		for _, id := range ids {
			if _, ok := n.Done[id]; !ok {
				all = false
			}
		}
		if all {
			return
		}
		if steps > 10_000_000 {
			n.T.Fatalf("enginetest: no progress after %d steps at %v", steps, n.Now)
		}
		if !n.Advance() {
			n.T.Fatalf("enginetest: stuck at %v: no deadline, nothing outstanding; done %v", n.Now, n.Done)
		}
		if n.Hook != nil {
			n.Hook()
		}
	}
}

// RunUntil steps until Now reaches t (or nothing is left to do).
func (n *Net) RunUntil(t vtime.Time) {
	n.Step()
	for n.Now < t {
		next := n.E.Deadline()
		if b := n.earliest(); b >= 0 {
			next = vtime.Earliest(next, n.rings[b].peek().at)
		}
		if next == 0 || next > t {
			n.Now = t
			n.Step()
			return
		}
		n.Advance()
		if n.Hook != nil {
			n.Hook()
		}
	}
}

// Round handles exactly one event, the earliest completion or the
// engine's timer (a completion wins a tie), and then the actions it
// allows. It allocates nothing once the rings have grown; benchmarks
// measure the engine with it.
func (n *Net) Round() {
	best := n.earliest()
	dl := n.E.Deadline()
	if best >= 0 && (dl == 0 || n.rings[best].peek().at <= dl) {
		p := n.pop(best)
		n.Now = max(n.Now, p.at)
		n.complete(best, p)
	} else if dl != 0 {
		n.Now = max(n.Now, dl)
		n.Timeouts++
		n.E.OnTimer(n.Now)
	}
	n.Act()
}

// Shares returns each path's fraction of the bytes completed.
func (n *Net) Shares() []float64 {
	var sum units.Bytes
	for _, x := range n.Bytes {
		sum += x
	}
	out := make([]float64, len(n.Bytes))
	for i, x := range n.Bytes {
		if sum > 0 {
			out[i] = float64(x) / float64(sum)
		}
	}
	return out
}
