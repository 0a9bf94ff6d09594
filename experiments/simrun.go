package experiments

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/sim/topo"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// SimRun is the RunFunc that executes a run in the packet-level simulator
// with the real driver: it builds the spec's fabric in a sim.World seeded
// with the run's seed, opens one mptx connection (Sender, Receiver and
// their simqp queue pairs) per (source, destination, connection) of the
// run's flows (Workload.Connection: by default tensor flows share one,
// background flows another), submits each flow as a transfer of its
// priority at its start time, and records
// completions, switch and NIC counters and sampled time series.
//
// The policy maps onto the stack as follows: cc names the engine's
// software congestion control; nic-dcqcn runs the NIC's DCQCN reaction
// point (per packet and CNP) and nic-hpcc the NIC's HPCC (per ACK), with
// the software CC fixed at an unlimited window and rate (HPCC's window
// makes the NIC request an ACK for every packet, whose INT it reads);
// none runs neither. paths is the QPs per tensor connection (background flows use
// one), chunk the engine's chunk size, pacing the engine's token buckets
// and path_policy its path selection. hpcc and nic-hpcc turn on switch
// INT.
//
// Time series are sampled from the first flow's start (ns-3 flow files
// start at 2 s), every sample.interval until a series holds 2·MaxPoints
// points, then at twice the period with neighbouring points merged, so a
// run's series take bounded memory however long it runs.
//
// A flow's completion time runs from its start to the sender's last
// acknowledgement (as HPCC ns-3's fct.txt). Its ideal is the same flow
// alone on an empty path: the base RTT (propagation both ways plus the
// first frame's serialisation at every hop) plus the rest of its wire bytes
// (payload, 62 B of RoCEv2 headers and 20 B of preamble and gap per
// packet) at the path's bottleneck rate. Deviation: HPCC's third.cc counts
// the first packet twice and 48 B of headers per packet, so its standalone
// FCT is slightly larger; ours is a lower bound the simulator can meet.
func SimRun(ctx context.Context, run Run) (*Result, error) {
	r, err := newSimRun(ctx, run)
	if err != nil {
		return nil, err
	}
	return r.execute()
}

// wireOverhead returns the bytes each data packet adds on the wire: its
// headers (RoCEv2's unless nic.header sets another's) and preamble and
// gap.
func wireOverhead(n *NICConfig) Size {
	if n.Header > 0 {
		return n.Header + sim.WireOverhead
	}
	return sim.DataHeaders + sim.WireOverhead
}

type simRun struct {
	ctx  context.Context
	run  Run
	spec *Spec
	g    *Graph
	w    *sim.World
	net  *sim.Network
	top  *topo.Topology // Host(id), Cables by graph link index
	tr   *Traffic

	conns  []*simConn
	connOf map[connKey]*simConn
	flows  []FlowResult
	startV []vtime.Time // when each flow was started (0: not yet)
	left   int          // flows not finished

	trigSeen  []int   // signals received per trigger
	trigFlows [][]int // flows each trigger starts
	kick      kickEvent
	kicks     []int // flows to start at the current instant

	samp *sampler
	obs  Observer // telemetry (WithObserver); nil: none
}

type connKey struct {
	src, dst int
	bg       bool
	pull     bool // dst reads from src: the connection runs dst → src
}

type simConn struct {
	key   connKey
	conn  *simqp.Conn
	snd   *mptx.Sender
	rcv   *mptx.Receiver
	sd    *simqp.Driver
	queue []int // flows waiting for a transfer slot
	live  int
	// exp is what a pull connection reads: a range its responder (the
	// flows' source) exposed.
	exp qp.Exposure
}

// kickEvent starts the flows queued in simRun.kicks, outside any driver
// callback.
type kickEvent struct{ r *simRun }

func (e *kickEvent) Fire(sim.Time) {
	r := e.r
	ks := r.kicks
	r.kicks = nil
	for _, i := range ks {
		r.start(i)
	}
}

// flowStart starts one flow at its start time.
type flowStart struct {
	r *simRun
	i int
}

func (e *flowStart) Fire(sim.Time) { e.r.start(e.i) }

// failureEvent applies a failure at its time.
type failureEvent struct {
	r *simRun
	f Failure
}

func (e *failureEvent) Fire(now sim.Time) { e.r.fail(e.f, now) }

func newSimRun(ctx context.Context, run Run) (*simRun, error) {
	s := run.Spec
	r := &simRun{ctx: ctx, run: run, spec: s, g: s.Topology.Graph(), connOf: map[connKey]*simConn{}, obs: observerFor(ctx, run)}
	r.kick.r = r
	var err error
	if r.tr, err = Generate(s, r.g, run.Seed); err != nil {
		return nil, err
	}
	r.w = sim.NewWorld(uint64(run.Seed)*0x9e3779b97f4a7c15 + 1)
	if err := r.buildFabric(); err != nil {
		return nil, fmt.Errorf("building the fabric: %w", err)
	}
	if err := r.openConns(); err != nil {
		return nil, fmt.Errorf("opening connections: %w", err)
	}
	r.flows = make([]FlowResult, len(r.tr.Flows))
	r.startV = make([]vtime.Time, len(r.tr.Flows))
	r.trigSeen = make([]int, len(r.tr.Triggers))
	r.trigFlows = make([][]int, len(r.tr.Triggers))
	mtu, wo := s.NIC.MTU, wireOverhead(&s.NIC)
	paths := map[[2]int]PathInfo{}
	for i, f := range r.tr.Flows {
		p, ok := paths[[2]int{f.Src, f.Dst}]
		if !ok {
			p, _ = r.g.Path(f.Src, f.Dst, mtu+wo)
			paths[[2]int{f.Src, f.Dst}] = p
		}
		ideal := time.Duration(0)
		if p.Bottleneck > 0 {
			// Store and forward: the first frame crosses every hop (in
			// BaseRTT), the rest follow it at the bottleneck rate.
			pkts := (f.Size-1)/mtu + 1
			first := min(f.Size, mtu) + wo
			ideal = p.BaseRTT + p.Bottleneck.TxTime(f.Size+pkts*wo-first)
			if f.Pull {
				ideal += p.BaseRTT / 2 // the READ request's way there
			}
		}
		r.flows[i] = FlowResult{ID: f.ID, Src: f.Src, Dst: f.Dst, Size: int64(f.Size), Class: f.Class,
			StartNs: int64(f.Start), IdealNs: int64(ideal), PG: f.PG, DPort: f.DPort}
		if f.Trigger != 0 {
			r.trigFlows[f.Trigger-1] = append(r.trigFlows[f.Trigger-1], i)
		} else {
			r.w.At(sim.Start+sim.FromDuration(f.Start), &flowStart{r: r, i: i})
		}
	}
	r.left = len(r.tr.Flows)
	for _, f := range r.tr.Failures {
		r.w.At(sim.Start+sim.FromDuration(f.At), &failureEvent{r: r, f: f})
	}
	r.samp = newSampler(r)
	if r.obs != nil {
		r.w.SetTracer(r.obs)
	}
	return r, nil
}

// buildFabric builds the spec's Graph with sim/topo, with the spec's
// switch, NIC, watchdog and ECN settings and the policy's INT.
func (r *simRun) buildFabric() error {
	s := r.spec
	intOn := r.run.Policy.CC == "hpcc" || r.run.Policy.CC == CCNICHPCC
	sw := sim.SwitchConfig{Buffer: s.Switch.Buffer, Lossy: !*s.Switch.PFC.Enabled, INT: intOn}
	p := s.Switch.PFC
	if p.XOFF > 0 {
		sw.PFC.XOff, sw.PFC.XOn = p.XOFF, p.XOFF-p.Hysteresis
	} else {
		sw.PFC.Alpha = p.Alpha
	}
	sw.PFC.ResumeOffset, sw.PFC.Headroom = p.Hysteresis, p.Headroom
	nic := sim.NICConfig{
		MTU: s.NIC.MTU, AckEvery: s.NIC.AckEvery, CNPInterval: sim.FromDuration(s.NIC.CNPInterval.D()),
		NAKInterval: sim.FromDuration(s.NIC.NAKInterval.D()), AckTimeout: s.NIC.AckTimeout,
		RetryCount: *s.NIC.RetryCount, MaxSendWR: s.NIC.SendQueue,
		Header: s.NIC.Header, AckInDataClass: s.NIC.AckInDataClass,
	}
	if nic.RetryCount == 0 {
		nic.RetryCount = -1 // sim: -1 is "no retries", 0 the default
	}
	if nic.CNPInterval == 0 {
		nic.CNPInterval = sim.Picosecond // spec 0: a CNP for every marked packet
	}
	if nic.NAKInterval == 0 {
		nic.NAKInterval = sim.Picosecond
	}
	switch r.run.Policy.CC {
	case CCNICDCQCN:
		params := cc.Params(s.NIC.DCQCN)
		nic.RateControl = func(path cc.PathInfo) (cc.Algorithm, error) { return cc.New("dcqcn", params, path) }
	case CCNICHPCC:
		params := cc.Params(s.NIC.HPCC)
		nic.RateControl = func(path cc.PathInfo) (cc.Algorithm, error) { return cc.New("hpcc", params, path) }
	}
	wd := s.Switch.PFC.Watchdog
	c := topo.Common{
		Switch: sw, NIC: nic,
		Watchdog: sim.WatchdogConfig{Threshold: sim.FromDuration(wd.Threshold.D()), Recover: wd.Recover, Restore: sim.FromDuration(wd.Restore.D())},
	}
	if e := s.Switch.ECN; *e.Enabled {
		c.ECN = func(rate units.BitRate) *sim.ECNConfig {
			for _, b := range e.ByRate { // switch.ecn.by_rate: per link rate, as ns-3's KMIN/KMAX maps
				if b.Rate == rate {
					return &sim.ECNConfig{Kmin: b.KMin, Kmax: b.KMax, Pmax: b.PMax}
				}
			}
			if e.KMin != 0 {
				return &sim.ECNConfig{Kmin: e.KMin, Kmax: e.KMax, Pmax: e.PMax}
			}
			cfg := sim.ECNForRate(rate)
			cfg.Pmax = e.PMax
			return cfg
		}
	}
	t, err := topo.Build(r.w, r.g, c)
	if err != nil {
		return err
	}
	r.net, r.top = t.Net, t
	return nil
}

// openConns creates one connection per (src, dst, connection), in flow
// order.
func (r *simRun) openConns() error {
	pol := r.run.Policy
	for _, f := range r.tr.Flows {
		k := connKey{f.Src, f.Dst, f.bgConn(), f.Pull}
		if r.connOf[k] != nil {
			continue
		}
		paths := pol.Paths
		if k.bg {
			paths = 1
		}
		from, to := f.Src, f.Dst
		if f.Pull {
			from, to = f.Dst, f.Src // the requester dials the memory it reads
		}
		conn, recv, err := simqp.Connect(r.net, r.top.Host(from), r.top.Host(to), simqp.Options{QPs: paths})
		if err != nil {
			return err
		}
		policy, err := multipath.ParsePolicy(pol.PathPolicy)
		if err != nil {
			return err
		}
		eng := multipath.Config{
			CC: pol.CC, CCParams: cc.Params(pol.Params), Policy: policy, ChunkSize: pol.Chunk,
			Pacing: multipath.PacingConfig{Disabled: !pol.Pacing},
			Seed:   uint64(r.run.Seed)<<20 + uint64(len(r.conns)),
		}
		if pol.CC == CCNICDCQCN || pol.CC == CCNICHPCC || pol.CC == CCNone {
			eng.CC, eng.CCParams = "fixed", cc.Params{"window": "unlimited", "rate": "unlimited"}
		}
		// A connection whose flows come in several priority classes says
		// so (multipath.Config.Priorities: the default class keeps a
		// shallow send queue from the start).
		for _, g := range r.tr.Flows {
			if g.Priority > 0 && (connKey{g.Src, g.Dst, g.bgConn(), g.Pull}) == k {
				eng.Priorities = true
				break
			}
		}
		c := &simConn{key: k, conn: conn}
		if f.Pull {
			if c.exp, err = recv.ExposeRange(units.TiB, qp.AccessRead); err != nil {
				return err
			}
		}
		if r.obs != nil {
			eng.Recorder = r.obs.Conn(ObservedConn{Index: len(r.conns), Src: r.top.Host(from).Name(), Dst: r.top.Host(to).Name(),
				Background: k.bg, CC: eng.CC, Paths: conn.Paths(), IngressPorts: ingressPorts(r.top.Host(from), conn.Paths())})
		}
		c.snd, err = mptx.NewSender(conn, mptx.SenderConfig{Engine: eng, OnDone: r.onDone})
		if err != nil {
			return err
		}
		if c.rcv, err = mptx.NewReceiver(recv, mptx.ReceiverConfig{}); err != nil {
			return err
		}
		c.sd = simqp.Drive(r.w, c.snd)
		conn.SetNotify(c.sd.Notify)
		rd := simqp.Drive(r.w, c.rcv)
		recv.SetNotify(rd.Notify)
		r.connOf[k] = c
		r.conns = append(r.conns, c)
	}
	return nil
}

func (r *simRun) conn(i int) *simConn {
	f := &r.tr.Flows[i]
	return r.connOf[connKey{f.Src, f.Dst, f.bgConn(), f.Pull}]
}

// start submits flow i (or queues it if its connection has no free slot).
func (r *simRun) start(i int) {
	now := r.w.Now().VTime()
	if r.startV[i] == 0 {
		r.startV[i] = now
		r.flows[i].StartNs = int64(now - sim.Start.VTime())
	}
	f := &r.tr.Flows[i]
	c := r.conn(i)
	spec := multipath.TransferSpec{ID: multipath.TransferID(f.ID), Size: f.Size, ChunkSize: r.run.Policy.Chunk,
		Priority: multipath.Priority(f.Priority)}
	var slot int
	var plan chunk.Plan
	var err error
	if f.Pull {
		spec.Remote = units.Bytes(c.exp.Addr)
		_, _, err = c.snd.SubmitOneSided(now, spec, mptx.OneSided{Op: qp.OpRead, RKey: c.exp.Key, PathKeys: c.exp.PathKeys})
	} else {
		slot, plan, err = c.snd.Submit(now, spec)
	}
	if errors.Is(err, multipath.ErrTooManyTransfers) {
		c.queue = append(c.queue, i)
		return
	}
	if err != nil {
		r.finish(i, now, err)
		return
	}
	if f.Pull { // nothing to expect: the requester's completions are the flow's
		c.live++
		c.sd.Notify()
		return
	}
	if err := c.rcv.Expect(slot, multipath.TransferID(f.ID), plan, 0); err != nil {
		// The receiver may not have polled the slot's previous transfer's
		// last chunk yet: let it, then try again.
		c.rcv.Step(now)
		if err := c.rcv.Expect(slot, multipath.TransferID(f.ID), plan, 0); err != nil {
			panic("experiments: BUG: receiver slot still busy: " + err.Error())
		}
	}
	c.live++
	c.sd.Notify()
}

// onDone is every Sender's completion callback.
func (r *simRun) onDone(id multipath.TransferID, now vtime.Time, err error) {
	i := int(id) - 1
	c := r.conn(i)
	c.live--
	r.finish(i, now, err)
	if len(c.queue) > 0 {
		r.later(c.queue[0])
		c.queue = c.queue[1:]
	}
}

// later starts flow i at the current instant from a fresh event.
func (r *simRun) later(i int) {
	if len(r.kicks) == 0 {
		r.w.At(r.w.Now(), &r.kick)
	}
	r.kicks = append(r.kicks, i)
}

func (r *simRun) finish(i int, now vtime.Time, err error) {
	fr := &r.flows[i]
	if err != nil {
		fr.Err = err.Error()
	}
	if err == nil {
		fr.Done = true
		fr.FCTNs = int64(now - r.startV[i])
		for _, t := range r.tr.Flows[i].Signals {
			if r.trigSeen[t-1]++; r.trigSeen[t-1] == r.tr.Triggers[t-1].Count {
				for _, j := range r.trigFlows[t-1] {
					r.later(j)
				}
			}
		}
	}
	if r.left--; r.left == 0 {
		r.w.Stop()
	}
}

// fail applies a failure event.
func (r *simRun) fail(f Failure, now sim.Time) {
	set := func(c *sim.Cable) {
		if f.Up {
			c.SetUp(now)
		} else {
			c.SetDown(now)
		}
	}
	kind, rest, _ := strings.Cut(f.Target, ":")
	switch kind {
	case "link":
		a, b, _ := r.g.SplitLink(rest)
		li, _ := r.g.FindLink(a, b)
		set(r.top.Cables[li])
	case "nic":
		host, port := rest, -1
		if h, p, ok := strings.Cut(rest, "."); ok {
			host = h
			port, _ = strconv.Atoi(p)
		}
		n, _ := r.g.Node(host)
		for li, l := range r.g.Links {
			if (l.A == n || l.B == n) && (port < 0 || l.NIC == port) {
				set(r.top.Cables[li])
			}
		}
	}
}

// execute runs the world until every flow finished, the stop time, the
// event cap or cancellation, then collects the result.
func (r *simRun) execute() (*Result, error) {
	if r.obs != nil {
		defer func() { r.obs.Done(r.w.Now().VTime()) }()
	}
	stop := sim.Start + sim.FromDuration(r.spec.Stop.Time.D())
	slice := max(sim.FromDuration(r.spec.Stop.Time.D())/1000, 10*sim.Microsecond)
	for r.left > 0 && r.w.Now() < stop {
		more := r.w.RunUntil(min(r.w.Now()+slice, stop))
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		if m := r.spec.Stop.MaxEvents; m > 0 && int64(r.w.Events()) > m {
			break
		}
		if !more {
			break // nothing left to happen: the rest can never finish
		}
	}
	return r.collect(), nil
}

func (r *simRun) collect() *Result {
	row := NewRow(r.run)
	row.Summarise(r.flows)
	var ports []*sim.Port
	for _, s := range r.net.Switches {
		ports = append(ports, s.Ports()...)
	}
	for _, n := range r.net.NICs {
		ports = append(ports, n.Port())
	}
	var paused sim.Time
	for _, p := range ports {
		c := p.Counters()
		row.TxData += c.TxData
		row.TxAck += c.TxAck
		row.TxCNP += c.TxCNP
		row.TxPFC += c.TxPFC
		row.PFCPauses += c.PauseSent
		paused += c.PausedTime
		row.ECNMarks += c.ECNMarks
		row.Drops += c.Drops + c.LinkDrops + c.LossDrops + c.WatchdogDrops
		if p.Switch() != nil {
			row.MaxQueueBytes = max(row.MaxQueueBytes, int64(c.QueueMax))
		}
	}
	row.PFCPausedUs = float64(paused) / float64(sim.Microsecond)
	for _, c := range r.conns {
		for i, q := range c.conn.QPs() {
			sc, rc := q.Counters(), c.conn.PeerQPs()[i].Counters()
			row.CNPs += rc.CNPsSent
			row.RetxBytes += max(int64(sc.TxBytes)-int64(rc.RxBytes), 0)
		}
	}
	row.SimTimeUs = float64(r.w.Now()-sim.Start) / float64(sim.Microsecond)
	row.Events = r.w.Events()
	return &Result{Row: row, Description: r.spec.Description, Flows: r.flows, Series: r.samp.series()}
}

// sampler records the run's time series: from the first flow's start,
// every interval, doubling the interval (and merging neighbouring points)
// whenever a series reaches 2·MaxPoints points.
type sampler struct {
	r        *simRun
	interval sim.Time
	smp      *sim.Sampler
	t        []float64

	// throughput: up to maxTraces paths of the first connections, from
	// the payload accepted in order over the last tpWindow samples
	tp   []pathRef
	tpB  [][tpWindow + 1]units.Bytes // ring of cumulative bytes per path
	tpT  [tpWindow + 1]sim.Time      // the ring's sample instants
	tpN  int                         // samples in the ring
	tpV  [][]float64
	last sim.Time

	// window and rate: the paths of the first tensor connection
	cc       *simConn
	win, rat [][]float64

	// queues: every switch port (the deepest are kept at the end)
	ports []*sim.Port
	qV    [][]float64
}

// tpWindow is how many samples a throughput point averages over.
const tpWindow = 5

// MaxPoints bounds the points kept per time series.
const MaxPoints = 1000

type pathRef struct {
	c    *simConn
	path int
}

// sampleStart starts the sampler at the first flow's start.
type sampleStart struct{ s *sampler }

func (e *sampleStart) Fire(now sim.Time) {
	e.s.smp = sim.NewSampler(e.s.r.w, e.s.interval, e.s.sample)
}

func newSampler(r *simRun) *sampler {
	sa := r.spec.Sample
	s := &sampler{r: r, interval: sim.FromDuration(sa.Interval.D())}
	if *sa.Paths {
		for _, c := range r.conns {
			for p := 0; p < c.snd.Engine().NumPaths() && len(s.tp) < maxTraces; p++ {
				s.tp = append(s.tp, pathRef{c, p})
			}
		}
		s.tpB = make([][tpWindow + 1]units.Bytes, len(s.tp))
		s.tpV = make([][]float64, len(s.tp))
	}
	if *sa.CC {
		for _, c := range r.conns {
			if !c.key.bg {
				s.cc = c
				n := c.snd.Engine().NumPaths()
				s.win, s.rat = make([][]float64, n), make([][]float64, n)
				break
			}
		}
	}
	if *sa.Queues && sa.TopQueues > 0 {
		for _, x := range r.net.Switches {
			s.ports = append(s.ports, x.Ports()...)
		}
		s.qV = make([][]float64, len(s.ports))
	}
	if len(s.tp) > 0 || s.cc != nil || len(s.ports) > 0 {
		first, any := time.Duration(0), false
		for _, f := range r.tr.Flows {
			if f.Trigger == 0 && (!any || f.Start < first) {
				first, any = f.Start, true
			}
		}
		r.w.At(sim.Start+sim.FromDuration(first), &sampleStart{s})
	}
	return s
}

func (s *sampler) sample(now sim.Time) {
	s.t = append(s.t, float64(now-sim.Start)/float64(sim.Microsecond))
	// Throughput is the payload the path's responder accepted in order
	// over the last tpWindow samples (packet-grained, unlike chunk acks).
	slot := s.tpN % (tpWindow + 1)
	old := (s.tpN + 1) % (tpWindow + 1) // the oldest sample in a full ring
	if s.tpN < tpWindow+1 {
		old = 0
	}
	s.tpT[slot] = now
	for i, pr := range s.tp {
		b := units.Bytes(pr.c.conn.PeerQPs()[pr.path].Counters().RxBytes)
		s.tpB[i][slot] = b
		prevB, prevT := units.Bytes(0), s.last
		if s.tpN > 0 {
			prevB, prevT = s.tpB[i][old], s.tpT[old]
		}
		if s.tpN == 0 {
			prevT = now - s.interval
		}
		secs := (now - prevT).Seconds()
		v := 0.0
		if secs > 0 {
			v = float64(b-prevB) * 8 / secs / 1e9
		}
		s.tpV[i] = append(s.tpV[i], v)
	}
	s.tpN++
	s.last = now
	if s.cc != nil {
		nicCC := s.r.run.Policy.CC == CCNICDCQCN || s.r.run.Policy.CC == CCNICHPCC
		for p := range s.win {
			st := s.cc.snd.Engine().Stats(p)
			rate, win := st.Rate, st.Window
			if nicCC {
				if a := s.cc.conn.QPs()[p].CC(); a != nil {
					rate, win = a.Rate(), a.Window()
				}
			}
			s.win[p] = append(s.win[p], finite(float64(win), float64(units.MaxBytes)))
			s.rat[p] = append(s.rat[p], finite(float64(rate), float64(units.Unlimited))/1e9)
		}
	}
	for i, p := range s.ports {
		s.qV[i] = append(s.qV[i], float64(p.Queue()))
	}
	if len(s.t) >= 2*MaxPoints {
		s.compact()
	}
}

// compact merges neighbouring points (means; maxima for queues) and
// doubles the sampling interval, so a series never holds more than
// 2·MaxPoints points.
func (s *sampler) compact() {
	s.t = bucket(s.t, 2, false)
	for i := range s.tpV {
		s.tpV[i] = bucket(s.tpV[i], 2, false)
	}
	for p := range s.win {
		s.win[p], s.rat[p] = bucket(s.win[p], 2, false), bucket(s.rat[p], 2, false)
	}
	for i := range s.qV {
		s.qV[i] = bucket(s.qV[i], 2, true)
	}
	s.interval *= 2
	s.smp.SetEvery(s.interval)
}

// bucket reduces every step consecutive values to their mean (or maximum),
// skipping NaNs; a bucket of NaNs stays NaN.
func bucket(v []float64, step int, useMax bool) []float64 {
	out := make([]float64, 0, (len(v)+step-1)/step)
	for i := 0; i < len(v); i += step {
		acc, n := 0.0, 0
		for _, x := range v[i:min(i+step, len(v))] {
			if math.IsNaN(x) {
				continue
			}
			if useMax {
				acc = max(acc, x)
			} else {
				acc += x
			}
			n++
		}
		switch {
		case n == 0:
			out = append(out, math.NaN())
		case useMax:
			out = append(out, acc)
		default:
			out = append(out, acc/float64(n))
		}
	}
	return out
}

// finite maps the "unlimited" sentinel to NaN, which plots skip.
func finite(v, unlimited float64) float64 {
	if v >= unlimited {
		return math.NaN()
	}
	return v
}

func (s *sampler) series() *Series {
	if len(s.t) == 0 {
		return nil
	}
	// Downsample long runs to MaxPoints buckets: means for rates and
	// windows, maxima for queues (a queue's peak is what matters).
	step := (len(s.t) + MaxPoints - 1) / MaxPoints
	if step > 1 {
		t := bucket(s.t, step, false)
		for i := range s.tpV {
			s.tpV[i] = bucket(s.tpV[i], step, false)
		}
		for p := range s.win {
			s.win[p], s.rat[p] = bucket(s.win[p], step, false), bucket(s.rat[p], step, false)
		}
		for i := range s.qV {
			s.qV[i] = bucket(s.qV[i], step, true)
		}
		s.t = t
	}
	out := &Series{IntervalUs: float64(s.interval) / float64(sim.Microsecond) * float64(step)}
	if len(s.t) > 1 {
		// After compaction the points are the merged ones; report their spacing.
		out.IntervalUs = (s.t[len(s.t)-1] - s.t[0]) / float64(len(s.t)-1)
	}
	for i, pr := range s.tp {
		out.Throughput = append(out.Throughput, trace(fmt.Sprintf("h%d→h%d qp%d", pr.c.key.src, pr.c.key.dst, pr.path), s.t, s.tpV[i]))
	}
	if s.cc != nil {
		for p := range s.win {
			name := fmt.Sprintf("h%d→h%d qp%d", s.cc.key.src, s.cc.key.dst, p)
			if t := trace(name, s.t, s.win[p]); len(t.T) > 0 {
				out.Window = append(out.Window, t)
			}
			if t := trace(name, s.t, s.rat[p]); len(t.T) > 0 {
				out.Rate = append(out.Rate, t)
			}
		}
	}
	// The deepest queues, by their peak (ties: port order).
	idx := make([]int, len(s.ports))
	peak := make([]float64, len(s.ports))
	for i := range idx {
		idx[i] = i
		peak[i] = slices.Max(s.qV[i])
	}
	sort.SliceStable(idx, func(a, b int) bool { return peak[idx[a]] > peak[idx[b]] })
	for _, i := range idx[:min(len(idx), s.r.spec.Sample.TopQueues)] {
		if peak[i] == 0 {
			break
		}
		out.Queues = append(out.Queues, trace(portLabel(s.ports[i]), s.t, s.qV[i]))
	}
	return out
}

// trace builds a Trace, leaving out NaN samples (unlimited values), which
// JSON cannot carry.
func trace(name string, t, v []float64) Trace {
	out := Trace{Name: name}
	for i := range v {
		if !math.IsNaN(v[i]) {
			out.T = append(out.T, t[i])
			out.V = append(out.V, v[i])
		}
	}
	return out
}

// portLabel names a port by its two ends ("leaf0→spine1").
func portLabel(p *sim.Port) string {
	owner := func(p *sim.Port) string {
		if p.Switch() != nil {
			return p.Switch().Name()
		}
		if p.NIC() != nil {
			return p.NIC().Host().Name()
		}
		return p.Name()
	}
	if p.Remote() == nil {
		return owner(p)
	}
	return owner(p) + "→" + owner(p.Remote())
}
