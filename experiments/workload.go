package experiments

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"
)

// Flow classes: tensor flows are what a scenario measures; background flows
// load the fabric and are reported separately.
const (
	ClassTensor     = "tensor"
	ClassBackground = "background"
)

// Flow is one transfer a run performs: Size bytes from host Src to host Dst,
// starting at Start (virtual time since the run began) or, when Trigger is
// non-zero, when that trigger fires.
type Flow struct {
	ID       int           `json:"id"`
	Src      int           `json:"src"`
	Dst      int           `json:"dst"`
	Size     Size          `json:"size"`
	Start    time.Duration `json:"start"`
	Class    string        `json:"class"`
	Workload int           `json:"workload"` // index in Spec.Workloads
	// Trigger (1-based index into Traffic.Triggers) starts the flow; 0: at Start.
	Trigger int `json:"trigger,omitempty"`
	// Signals are triggers this flow's completion counts towards.
	Signals []int `json:"signals,omitempty"`
	// PG and DPort are carried from ns-3 flow files into fct.txt.
	PG    int `json:"pg,omitempty"`
	DPort int `json:"dport,omitempty"`
	// Pull: Dst reads the flow out of Src's memory (RDMA READ) instead of
	// Src writing it (Workload.Pull).
	Pull bool `json:"pull,omitempty"`
	// Priority is the flow's transfer priority (Workload.Priority).
	Priority int `json:"priority,omitempty"`
	// Conn names the connection that carries the flow (Workload.Connection);
	// "" is its class's.
	Conn string `json:"conn,omitempty"`
}

// Connections a flow can take (Workload.Connection).
const (
	ConnTensor     = "tensor"
	ConnBackground = "background"
)

// bgConn reports whether f goes on its pair's background connection (one
// queue pair) rather than the tensor connection.
func (f *Flow) bgConn() bool {
	if f.Conn != "" {
		return f.Conn == ConnBackground
	}
	return f.Class == ClassBackground
}

// Trigger fires once Count signals (flow completions) have arrived
// (htsim oneshot: Count 1; barrier: Count K).
type Trigger struct {
	Count int `json:"count"`
}

// Failure takes Target down (Up false) or brings it back (Up true) at At.
// Targets: "link:A-B" or "nic:hN" / "nic:hN.P" (Graph node names).
type Failure struct {
	At     time.Duration `json:"at"`
	Target string        `json:"target"`
	Up     bool          `json:"up"`
}

// Traffic is everything a run's workloads generate.
type Traffic struct {
	Flows    []Flow
	Triggers []Trigger
	Failures []Failure
}

// MaxFlows bounds the flows one run may generate.
const MaxFlows = 1 << 21

// Generate expands the spec's workloads for one seed. The same spec and
// seed always yield the same Traffic: each workload draws from its own PCG
// stream seeded with (seed, workload index).
func Generate(s *Spec, g *Graph, seed int64) (*Traffic, error) {
	tr := &Traffic{}
	for wi := range s.Workloads {
		w := &s.Workloads[wi]
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(wi)+0x9e3779b97f4a7c15))
		gen := &generator{w: w, wi: wi, g: g, rng: rng, tr: tr}
		if err := gen.run(); err != nil {
			return nil, fmt.Errorf("workloads[%d] (%s): %w", wi, w.Kind, err)
		}
		if len(tr.Flows) > MaxFlows {
			return nil, fmt.Errorf("workloads[%d] (%s): more than %d flows in all; shorten its duration or lower its rate", wi, w.Kind, MaxFlows)
		}
	}
	sort.SliceStable(tr.Flows, func(i, j int) bool { return tr.Flows[i].Start < tr.Flows[j].Start })
	for i := range tr.Flows {
		tr.Flows[i].ID = i + 1
	}
	sort.SliceStable(tr.Failures, func(i, j int) bool { return tr.Failures[i].At < tr.Failures[j].At })
	return tr, nil
}

type generator struct {
	w   *Workload
	wi  int
	g   *Graph
	rng *rand.Rand
	tr  *Traffic
}

func (gen *generator) add(src, dst int, size Size, start time.Duration) *Flow {
	gen.tr.Flows = append(gen.tr.Flows, Flow{Src: src, Dst: dst, Size: size, Start: start, Class: gen.w.Class, Workload: gen.wi,
		Pull: gen.w.Pull, Priority: gen.w.Priority, Conn: gen.w.Connection})
	return &gen.tr.Flows[len(gen.tr.Flows)-1]
}

func (gen *generator) hosts(h HostSet) []int {
	if h.IsZero() || h.All {
		return gen.g.Hosts
	}
	return h.IDs
}

// rounds calls f for each repetition of a pattern with its start time.
func (gen *generator) rounds(f func(start time.Duration) error) error {
	n := max(gen.w.Repeat, 1)
	for r := range n {
		if err := f(gen.w.Start.D() + time.Duration(r)*gen.w.Interval.D()); err != nil {
			return err
		}
	}
	return nil
}

func (gen *generator) run() error {
	w := gen.w
	switch w.Kind {
	case WorkIncast:
		return gen.rounds(func(start time.Duration) error {
			for _, s := range w.Senders.IDs {
				gen.add(s, *w.Receiver, gen.size(), start)
			}
			return nil
		})
	case WorkPermutation:
		hosts := gen.hosts(w.Hosts)
		return gen.rounds(func(start time.Duration) error {
			dst, err := gen.permutation(hosts)
			if err != nil {
				return err
			}
			for i, s := range hosts {
				gen.add(s, dst[i], gen.size(), start)
			}
			return nil
		})
	case WorkAllToAll:
		hosts := gen.hosts(w.Hosts)
		return gen.rounds(func(start time.Duration) error {
			for _, s := range hosts {
				for _, d := range hosts {
					if s != d {
						gen.add(s, d, gen.size(), start)
					}
				}
			}
			return nil
		})
	case WorkKVCache:
		pre, dec := w.Prefill.IDs, w.Decode.IDs
		t := w.Start.D()
		end := time.Duration(math.MaxInt64)
		if w.Duration > 0 {
			end = w.Start.D() + w.Duration.D()
		}
		for n := 0; (w.Count == 0 || n < w.Count) && len(gen.tr.Flows) <= MaxFlows; n++ {
			t += expDuration(gen.rng, w.Rate)
			if t >= end {
				break
			}
			src := pre[gen.rng.IntN(len(pre))]
			dst := dec[gen.rng.IntN(len(dec))]
			for dst == src { // validation guarantees another decode host exists
				dst = dec[gen.rng.IntN(len(dec))]
			}
			gen.add(src, dst, gen.size(), t)
		}
	case WorkBackground:
		gen.background()
	case WorkFailure:
		gen.tr.Failures = append(gen.tr.Failures, Failure{At: w.Down.D(), Target: w.Target})
		if w.Up > 0 {
			gen.tr.Failures = append(gen.tr.Failures, Failure{At: w.Up.D(), Target: w.Target, Up: true})
		}
	case WorkNS3Flows, WorkHtsim:
		base := len(gen.tr.Triggers)
		for _, f := range w.Loaded {
			if f.Trigger != 0 {
				f.Trigger += base
			}
			f.Signals = slices.Clone(f.Signals)
			for i := range f.Signals {
				f.Signals[i] += base
			}
			f.Workload = gen.wi
			f.Class = w.Class
			f.Priority, f.Conn = w.Priority, w.Connection
			f.Start += w.Start.D()
			gen.tr.Flows = append(gen.tr.Flows, f)
		}
		gen.tr.Triggers = append(gen.tr.Triggers, w.LoadedTriggers...)
	default:
		panic("experiments: BUG: unvalidated workload kind " + w.Kind)
	}
	return nil
}

// background generates Poisson flow arrivals per sending host, as HPCC's
// traffic_gen.py does: mean inter-arrival = mean size × 8 / (load × host
// rate), destination uniform among the other hosts of the set.
func (gen *generator) background() {
	w := gen.w
	hosts := gen.hosts(w.Hosts)
	mean := cdfMean(w.CDFData)
	end := time.Duration(math.MaxInt64)
	if w.Duration > 0 {
		end = w.Start.D() + w.Duration.D()
	}
	type next struct {
		t    time.Duration
		src  int
		rate float64 // flows per second
	}
	q := make([]next, len(hosts))
	for i, h := range hosts {
		rate := float64(gen.g.HostRate(h)) * w.Load / 8 / mean
		q[i] = next{w.Start.D() + expDuration(gen.rng, rate), h, rate}
	}
	for n := 0; (w.Count == 0 || n < w.Count) && len(gen.tr.Flows) <= MaxFlows; n++ {
		// Earliest host next (ties by host id): a tiny, deterministic merge.
		k := 0
		for i := range q {
			if q[i].t < q[k].t || (q[i].t == q[k].t && q[i].src < q[k].src) {
				k = i
			}
		}
		if q[k].t >= end {
			return
		}
		dst := hosts[gen.rng.IntN(len(hosts))]
		for dst == q[k].src {
			dst = hosts[gen.rng.IntN(len(hosts))]
		}
		gen.add(q[k].src, dst, sizeOf(cdfQuantile(w.CDFData, gen.rng.Float64())), q[k].t)
		q[k].t += expDuration(gen.rng, q[k].rate)
	}
}

// expDuration draws an exponential inter-arrival for a Poisson process of
// rate per second, at least 1 ns.
func expDuration(r *rand.Rand, rate float64) time.Duration {
	d := r.ExpFloat64() / rate * 1e9
	if d >= math.MaxInt64/4 {
		return math.MaxInt64 / 4
	}
	return max(time.Duration(d), 1)
}

func (gen *generator) size() Size {
	s := &gen.w.Size
	switch s.Dist {
	case DistFixed:
		return s.Value
	case DistUniform:
		return s.Min + Size(gen.rng.Int64N(int64(s.Max-s.Min)+1))
	case DistLognormal:
		x := float64(s.Median) * math.Exp(s.Sigma*gen.rng.NormFloat64())
		v := sizeOf(x)
		if s.Min > 0 {
			v = max(v, s.Min)
		}
		if s.Max > 0 {
			v = min(v, s.Max)
		}
		return v
	case DistCDF:
		return sizeOf(cdfQuantile(s.CDFData, gen.rng.Float64()))
	}
	panic("experiments: BUG: unvalidated size distribution " + s.Dist)
}

// permutation returns a random destination for each host such that every
// host receives exactly once, nobody sends to itself, and (cross_leaf) no
// pair shares a leaf.
func (gen *generator) permutation(hosts []int) ([]int, error) {
	n := len(hosts)
	bad := func(i, d int) bool {
		return hosts[i] == d || (gen.w.CrossLeaf && gen.g.Group(hosts[i]) == gen.g.Group(d))
	}
	for try := 0; try < 100; try++ {
		dst := slices.Clone(hosts)
		gen.rng.Shuffle(n, func(i, j int) { dst[i], dst[j] = dst[j], dst[i] })
		// Repair conflicts by swapping destinations with another sender
		// when the swap fixes both.
		ok := true
		for i := range n {
			if !bad(i, dst[i]) {
				continue
			}
			fixed := false
			off := gen.rng.IntN(n)
			for k := range n {
				j := (off + k) % n
				if j != i && !bad(i, dst[j]) && !bad(j, dst[i]) {
					dst[i], dst[j] = dst[j], dst[i]
					fixed = true
					break
				}
			}
			if !fixed {
				ok = false
				break
			}
		}
		if ok {
			return dst, nil
		}
	}
	if gen.w.CrossLeaf {
		return nil, fmt.Errorf("no cross-leaf permutation of hosts %v exists: a leaf holds more than half of them", HostSet{IDs: hosts})
	}
	return nil, fmt.Errorf("no permutation of hosts %v without self-sends", HostSet{IDs: hosts})
}
