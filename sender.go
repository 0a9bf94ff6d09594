// Package mptx ships large tensors between machines over several RDMA queue
// pairs per peer: the driver that binds the deterministic multipath engine
// (multipath, cc, pacing, chunk) to a queue-pair backend (qp/verbs, qp/mem,
// or the simulator's).
//
// A Sender drives one connection's transfers; a Receiver tracks the tensors
// arriving on one connection. Both are driven by Step(now), which polls
// completions, feeds the engine, carries out its actions and returns the
// next instant it must run again. The same Step runs inside the simulator's
// virtual time (sim/simqp schedules it as an event) and in real time (Loop
// calls it from a goroutine, sleeping until the deadline or a completion
// notification). Senders and Receivers are not safe for concurrent use: one
// goroutine, or one simulated world, owns each.
package mptx

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// SenderConfig configures a Sender.
type SenderConfig struct {
	// Engine configures the multipath engine. Paths left empty are filled
	// from the connection's PathInfo (rate, RTT, MTU, NIC, name).
	Engine multipath.Config
	// Batch is the most actions and completions handled per round; 0
	// means 64.
	Batch int
	// CounterInterval is how often path counters (ECN, CNP) are read while
	// transfers are live; 0 means 50 µs (one DCQCN CNP interval).
	CounterInterval time.Duration
	// OnDone is called when a transfer completes (err nil) or fails.
	OnDone func(id multipath.TransferID, now vtime.Time, err error)
}

// SenderStats counts the driver's own work.
type SenderStats struct {
	Posted        uint64 // work requests posted
	Completions   uint64 // send completions polled
	PostErrors    uint64 // work requests the backend refused
	Resets        uint64 // queue-pair resets (fences and resets before probes)
	ResetErrors   uint64 // resets the backend could not carry out
	SetRateErrors uint64 // hardware rate limits the backend refused
	CounterErrors uint64 // counter readings that failed
	Steps         uint64
}

// Sender drives the engine over one qp.Conn.
type Sender struct {
	conn qp.Conn
	eng  *multipath.Engine
	cfg  SenderConfig
	intr qp.INTReader
	rl   qp.RateLimiter
	rs   qp.Resetter
	sr   qp.SendRegions
	// regions names the send region of each live transfer submitted with
	// SubmitRegion and a region other than 0; posts take it from here.
	regions map[multipath.TransferID]uint32
	acts    []multipath.Action
	cqes    []qp.Completion
	wrs     [][]qp.SendWR // per path batch
	ids     [][]uint64
	comp    multipath.Completion
	hops    [8]qp.INTHop
	nextCt  vtime.Time
	stats   SenderStats
	// posting has bit i set while wrs[i] holds work requests to post.
	posting uint64

	// pathErr is the latest backend error of each path (post, reset,
	// set-rate, counters); it is added to the error of a transfer that
	// fails afterwards.
	pathErr []error
	// rateDown marks paths taken down because SetRate failed; Step
	// retries the rate every CounterInterval and brings them back up.
	rateDown []bool
	rateWant []units.BitRate
	err      error // sticky: the completion queue failed

	// oneSided holds the transfers posted as READs or plain keyed WRITEs
	// (SubmitOneSided) until they are reported; osWork remembers, by work
	// slot, which of them each posted work request belongs to, for a
	// remote access error.
	oneSided map[multipath.TransferID]OneSided
	osWork   []osWork
}

// OneSided says how SubmitOneSided posts a transfer's work requests.
type OneSided struct {
	// Op is qp.OpRead (pull the peer's range into local memory) or
	// qp.OpWrite (push local memory into the peer's range).
	Op qp.Opcode
	// RKey is the key of the peer's exposure (qp.Exposure.Key); PathKeys,
	// when not nil, its key on each path (qp.Exposure.PathKeys: verbs
	// registers an exposure per NIC). The Sender keeps PathKeys until the
	// transfer is reported: the caller must not modify it.
	RKey     uint32
	PathKeys []uint32
	// Region is the local send region TransferSpec.Local indexes
	// (qp.SendRegions; 0: the connection's own). A READ lands in it.
	Region uint32
}

type osWork struct {
	id uint64
	t  multipath.TransferID
}

// ErrRemoteAccess wraps the failure of a one-sided transfer whose READ or
// WRITE the peer refused: outside the exposed range, without its right,
// or naming a revoked key.
var ErrRemoteAccess = errors.New("mptx: the peer refused a one-sided access (remote access error: outside the range, without the right, or a revoked key)")

// NewSender builds a sender over conn.
func NewSender(conn qp.Conn, cfg SenderConfig) (*Sender, error) {
	infos := conn.Paths()
	if len(infos) == 0 {
		return nil, fmt.Errorf("mptx: connection has no paths")
	}
	if len(cfg.Engine.Paths) == 0 {
		cfg.Engine.Paths = make([]multipath.PathConfig, len(infos))
		for i, pi := range infos {
			cfg.Engine.Paths[i] = multipath.PathConfig{
				Name: fmt.Sprintf("%s/qp%d", pi.Device, pi.QPN), NIC: pi.NIC,
				LineRate: pi.LineRate, BaseRTT: pi.BaseRTT, MTU: pi.MTU, Hops: pi.Hops,
			}
		}
	} else if len(cfg.Engine.Paths) != len(infos) {
		return nil, fmt.Errorf("mptx: SenderConfig.Engine.Paths has %d paths but the connection has %d", len(cfg.Engine.Paths), len(infos))
	}
	if cfg.Batch == 0 {
		cfg.Batch = 64
	}
	if cfg.Batch < 1 {
		return nil, fmt.Errorf("mptx: SenderConfig.Batch = %d (valid: >= 1)", cfg.Batch)
	}
	if cfg.CounterInterval == 0 {
		cfg.CounterInterval = 50 * time.Microsecond
	}
	// The engine keeps MaxWRPerPath segments plus one probe outstanding
	// per path; keep that within the backend's send queue.
	if maxWR := conn.Caps().MaxSendWR; maxWR > 1 {
		limit := maxWR - 1
		if cfg.Engine.MaxWRPerPath == 0 {
			cfg.Engine.MaxWRPerPath = min(limit, 64)
		} else if cfg.Engine.MaxWRPerPath > limit {
			return nil, fmt.Errorf("mptx: SenderConfig.Engine.MaxWRPerPath = %d exceeds the backend's send queue (valid: 1..%d)", cfg.Engine.MaxWRPerPath, limit)
		}
	}
	var rl qp.RateLimiter
	if cfg.Engine.Pacing.Hardware {
		var ok bool
		rl, ok = conn.(qp.RateLimiter)
		if !ok || !conn.Caps().HWRateLimit {
			return nil, fmt.Errorf("mptx: SenderConfig.Engine.Pacing.Hardware is set but the backend has no per-QP hardware rate limit (Caps.HWRateLimit false); use software pacing")
		}
	}
	eng, err := multipath.New(cfg.Engine)
	if err != nil {
		return nil, err
	}
	s := &Sender{conn: conn, eng: eng, cfg: cfg, rl: rl, oneSided: map[multipath.TransferID]OneSided{}}
	s.intr, _ = conn.(qp.INTReader)
	s.rs, _ = conn.(qp.Resetter)
	s.sr, _ = conn.(qp.SendRegions)
	s.acts = make([]multipath.Action, cfg.Batch)
	s.cqes = make([]qp.Completion, cfg.Batch)
	s.wrs = make([][]qp.SendWR, len(infos))
	s.ids = make([][]uint64, len(infos))
	s.pathErr = make([]error, len(infos))
	s.rateDown = make([]bool, len(infos))
	s.rateWant = make([]units.BitRate, len(infos))
	for i := range s.wrs {
		s.wrs[i] = make([]qp.SendWR, 0, cfg.Batch)
		s.ids[i] = make([]uint64, 0, cfg.Batch)
	}
	return s, nil
}

// Engine returns the sender's engine, for statistics.
func (s *Sender) Engine() *multipath.Engine { return s.eng }

// Conn returns the sender's connection.
func (s *Sender) Conn() qp.Conn { return s.conn }

// Stats returns the driver's counters.
func (s *Sender) Stats() SenderStats { return s.stats }

// Submit starts a transfer; see multipath.Engine.Submit. It returns the
// transfer's tag, which the receiver's Expect needs, and its plan. Call
// Step after it (the simulator glue and Loop do).
//
// The send buffer range of the transfer must stay unchanged until OnDone
// reports the transfer: until then the backend may read it (a chunk can be
// sent again on another path). Once OnDone has run, done or failed, no
// work request of the transfer is outstanding and none can be posted, so
// the range may be reused at once, and nothing of the transfer can land in
// the receiver's memory any more.
func (s *Sender) Submit(now vtime.Time, spec multipath.TransferSpec) (int, chunk.Plan, error) {
	if s.err != nil {
		return 0, chunk.Plan{}, s.err
	}
	return s.eng.Submit(now, spec)
}

// SubmitRegion is Submit for a transfer whose bytes are in send region
// region of the connection (qp.SendRegions; 0 is the connection's own send
// region, as with Submit): spec.Local is an offset into that region, and
// every work request of the transfer names it. The region must stay
// registered, and its range unchanged, until OnDone reports the transfer;
// then no work request of the transfer is outstanding and the caller may
// remove it (qp.SendRegions.RemoveSendRegion). It fails if region is not 0
// and the connection does not implement qp.SendRegions; the region itself
// is checked by the backend when the work requests are posted (one that is
// not registered, or too small for the transfer, fails them).
func (s *Sender) SubmitRegion(now vtime.Time, spec multipath.TransferSpec, region uint32) (int, chunk.Plan, error) {
	if region != 0 && s.sr == nil {
		return 0, chunk.Plan{}, fmt.Errorf("mptx: SubmitRegion: send region %#x, but the connection has no send regions besides its own (qp.SendRegions; valid: 0)", region)
	}
	tag, plan, err := s.Submit(now, spec)
	if err == nil && region != 0 {
		if s.regions == nil {
			s.regions = make(map[multipath.TransferID]uint32)
		}
		s.regions[spec.ID] = region
	}
	return tag, plan, err
}

// SubmitOneSided starts a transfer whose work requests are one-sided, as
// Submit does for pushes: with op qp.OpRead each segment is an RDMA READ
// of the peer's exposed range rkey at spec.Remote + offset (an address in
// that key's space, qp.Exposure.Addr + offset) into the local region at
// spec.Local + offset; with op qp.OpWrite each is a plain RDMA WRITE into
// rkey's range. No immediate is posted: the requester's completion is a
// segment's done signal (a READ's means its bytes have landed here, a
// WRITE's that they have landed there), so the engine runs unchanged: it
// paces the requests by the bytes they move, takes RTT and rate samples
// from their completions, and fences the transfer before OnDone reports
// it, as for pushes (no response of an abandoned READ lands after that).
// Probes stay zero-length WRITE WITH IMM on the receive region.
//
// A completion with a remote access error cancels the transfer (with
// ErrRemoteAccess): the request, not the path, is at fault, and would
// fail on every path.
func (s *Sender) SubmitOneSided(now vtime.Time, spec multipath.TransferSpec, o OneSided) (int, chunk.Plan, error) {
	if s.err != nil {
		return 0, chunk.Plan{}, s.err
	}
	switch {
	case o.Op != qp.OpRead && o.Op != qp.OpWrite:
		return 0, chunk.Plan{}, fmt.Errorf("mptx: SubmitOneSided: op %v (valid: RDMA_READ, WRITE)", o.Op)
	case !s.conn.Caps().Read && (o.Op == qp.OpRead || o.RKey != 0):
		return 0, chunk.Plan{}, fmt.Errorf("mptx: SubmitOneSided: the backend has no one-sided access (qp.Caps.Read)")
	case o.Op == qp.OpRead && o.RKey == 0:
		return 0, chunk.Plan{}, fmt.Errorf("mptx: SubmitOneSided: READ with rkey 0 (valid: a key the peer exposed; the receive region is not readable)")
	case o.PathKeys != nil && len(o.PathKeys) != len(s.conn.Paths()):
		return 0, chunk.Plan{}, fmt.Errorf("mptx: SubmitOneSided: %d path keys for a connection of %d paths (valid: nil, or one per path)", len(o.PathKeys), len(s.conn.Paths()))
	case o.Region != 0 && s.sr == nil:
		return 0, chunk.Plan{}, fmt.Errorf("mptx: SubmitOneSided: send region %#x, but the connection has no send regions besides its own (qp.SendRegions; valid: 0)", o.Region)
	}
	tag, plan, err := s.eng.Submit(now, spec)
	if err != nil {
		return 0, chunk.Plan{}, err
	}
	s.oneSided[spec.ID] = o
	return tag, plan, nil
}

// Cancel ends transfer id at now with err; OnDone reports it (with an
// error wrapping multipath.ErrCanceled) once its posted work requests have
// completed. See multipath.Engine.Cancel.
func (s *Sender) Cancel(now vtime.Time, id multipath.TransferID, err error) error {
	return s.eng.Cancel(now, id, err)
}

// Err returns the sender's sticky error: non-nil once its completion queue
// failed. The connection is then closed and every transfer has been
// reported failed; the sender accepts no more.
func (s *Sender) Err() error { return s.err }

// PathError returns the latest backend error of path i (a refused post,
// reset, rate limit or counter reading), nil if none.
func (s *Sender) PathError(i int) error { return s.pathErr[i] }

// Step runs one round of the driver loop at now and returns the next
// instant it must run again (0: only when a completion arrives).
func (s *Sender) Step(now vtime.Time) vtime.Time {
	s.stats.Steps++
	if s.err != nil {
		return 0
	}
	s.poll(now)
	if s.eng.Live() > 0 && now >= s.nextCt {
		s.readCounters(now)
		s.retryRates(now)
		s.nextCt = now.Add(s.cfg.CounterInterval)
	}
	if d := s.eng.Deadline(); d != 0 && d <= now {
		s.eng.OnTimer(now)
	}
	for {
		n := s.eng.Actions(now, s.acts)
		s.execute(now, s.acts[:n])
		if n < len(s.acts) {
			break
		}
		s.poll(now) // posting may have completed work synchronously
	}
	next := s.eng.Deadline()
	if s.eng.Live() > 0 {
		next = vtime.Earliest(next, s.nextCt)
	}
	return next
}

func (s *Sender) poll(now vtime.Time) {
	for s.err == nil {
		n, err := s.conn.Poll(s.cqes)
		if err != nil {
			s.fatal(now, fmt.Errorf("mptx: polling the send completion queue: %w", err))
			return
		}
		if n == 0 {
			return
		}
		s.stats.Completions += uint64(n)
		for i := range s.cqes[:n] {
			c := &s.cqes[i]
			at := c.At
			if at == 0 || at > now {
				at = now
			}
			s.comp = multipath.Completion{WorkID: c.ID, OK: c.Status == qp.StatusOK}
			if !s.comp.OK {
				s.comp.Reason = c.Status.String()
			}
			if s.intr != nil {
				if k := s.intr.INT(c.ID, s.hops[:]); k > 0 {
					s.comp.NHops = k
					for h := 0; h < k && h < len(s.comp.Hops); h++ {
						s.comp.Hops[h].QLen = s.hops[h].QLen
						s.comp.Hops[h].TxBytes = s.hops[h].TxBytes
						s.comp.Hops[h].TS = s.hops[h].TS
						s.comp.Hops[h].Rate = s.hops[h].Rate
					}
				}
			}
			s.eng.OnCompletion(at, &s.comp)
			if c.Status == qp.StatusRemoteAccess && len(s.oneSided) > 0 {
				s.refused(at, c.ID)
			}
		}
		if n < len(s.cqes) {
			return
		}
	}
}

// refused cancels the one-sided transfer work request id belonged to.
func (s *Sender) refused(now vtime.Time, id uint64) {
	k := int(uint32(id)) - 1
	if k < 0 || k >= len(s.osWork) || s.osWork[k].id != id {
		return
	}
	t := s.osWork[k].t
	if _, ok := s.oneSided[t]; ok {
		_ = s.eng.Cancel(now, t, ErrRemoteAccess)
	}
}

func (s *Sender) readCounters(now vtime.Time) {
	caps := s.conn.Caps()
	if !caps.CNPCounters && !caps.ECNCounters {
		return
	}
	for i := 0; i < s.eng.NumPaths(); i++ {
		c, err := s.conn.Counters(i)
		if err != nil {
			// Counters only steer congestion control; a path whose
			// readings fail keeps its last state. The error is kept
			// for PathError and for the error of a failing transfer.
			s.stats.CounterErrors++
			s.pathErr[i] = fmt.Errorf("reading counters: %w", err)
			continue
		}
		s.eng.OnCounters(now, i, c.ECNMarked, c.CNPReceived)
	}
}

// execute carries out a batch of actions: posts grouped per path (order
// kept within a path), then done/failed callbacks.
func (s *Sender) execute(now vtime.Time, acts []multipath.Action) {
	for i := range acts {
		a := &acts[i]
		switch a.Kind {
		case multipath.ActSetRate:
			s.setRate(now, a.Path, a.Rate)
		case multipath.ActReset:
			s.fence(now, a.Path)
		case multipath.ActPost, multipath.ActProbe:
			if a.Reset && !s.fence(now, a.Path) {
				s.comp = multipath.Completion{WorkID: a.WorkID, Reason: "reset-failed"}
				s.eng.OnCompletion(now, &s.comp)
				continue
			}
			wr := qp.SendWR{ID: a.WorkID, Op: qp.OpWrite, Local: a.Local, Remote: a.Remote, Len: a.Len}
			if len(s.regions) > 0 && a.Kind == multipath.ActPost {
				wr.Region = s.regions[a.Transfer]
			}
			if a.HasImm {
				wr.Op, wr.Imm = qp.OpWriteImm, a.ImmData
			}
			if a.Kind == multipath.ActPost && len(s.oneSided) > 0 {
				if o, ok := s.oneSided[a.Transfer]; ok {
					wr.Op, wr.Imm, wr.RKey, wr.Region = o.Op, 0, o.RKey, o.Region
					if a.Path < len(o.PathKeys) {
						wr.RKey = o.PathKeys[a.Path]
					}
					s.noteWork(a.WorkID, a.Transfer)
				}
			}
			s.wrs[a.Path] = append(s.wrs[a.Path], wr)
			s.posting |= 1 << uint(a.Path)
		}
	}
	// Post the paths that got work, in path order (MaxPaths is 64: one
	// word), rather than scanning every path's batch.
	for set := s.posting; set != 0; set &= set - 1 {
		p := bits.TrailingZeros64(set)
		wrs := s.wrs[p]
		if len(wrs) == 0 {
			continue
		}
		n, err := s.conn.PostSend(p, wrs)
		s.stats.Posted += uint64(n)
		if err != nil || n < len(wrs) {
			reason := "post-failed"
			if errors.Is(err, qp.ErrQueueFull) {
				reason = "send-queue-full"
			}
			if err == nil {
				err = fmt.Errorf("posted %d of %d work requests", n, len(wrs))
			}
			s.pathErr[p] = fmt.Errorf("posting: %w", err)
			for k := n; k < len(wrs); k++ {
				s.stats.PostErrors++
				s.comp = multipath.Completion{WorkID: wrs[k].ID, Reason: reason}
				s.eng.OnCompletion(now, &s.comp)
			}
		}
		s.wrs[p] = wrs[:0]
	}
	s.posting = 0
	for i := range acts {
		a := &acts[i]
		if a.Kind == multipath.ActDone || a.Kind == multipath.ActFailed {
			delete(s.oneSided, a.Transfer)
		}
		switch a.Kind {
		case multipath.ActDone:
			delete(s.regions, a.Transfer)
			if s.cfg.OnDone != nil {
				s.cfg.OnDone(a.Transfer, now, nil)
			}
		case multipath.ActFailed:
			delete(s.regions, a.Transfer)
			if s.cfg.OnDone != nil {
				s.cfg.OnDone(a.Transfer, now, s.withCauses(a.Err))
			}
		}
	}
}

// noteWork records that work request id belongs to one-sided transfer t.
// The table grows to the engine's work-slot count once, then never again.
func (s *Sender) noteWork(id uint64, t multipath.TransferID) {
	k := int(uint32(id)) - 1
	if k < 0 {
		return
	}
	for len(s.osWork) <= k {
		s.osWork = append(s.osWork, osWork{})
	}
	s.osWork[k] = osWork{id: id, t: t}
}

// fence resets path's queue pair (qp.Resetter), which flushes its
// outstanding work at both ends, and tells the engine how it went. Without
// a Resetter the engine is told the reset failed: it then waits for the
// work requests to complete, as RC guarantees they will (successfully or
// after the transport's retries run out).
func (s *Sender) fence(now vtime.Time, path int) bool {
	if s.rs == nil {
		s.eng.OnReset(now, path, false)
		return false
	}
	s.stats.Resets++
	if err := s.rs.Reset(path); err != nil {
		s.stats.ResetErrors++
		s.pathErr[path] = fmt.Errorf("resetting the queue pair: %w", err)
		s.eng.OnReset(now, path, false)
		return false
	}
	s.eng.OnReset(now, path, true)
	return true
}

// setRate programs path's hardware rate limit. A path whose limit the
// backend refuses would send unpaced, so it is taken out of use until a
// retry (every CounterInterval) succeeds.
func (s *Sender) setRate(now vtime.Time, path int, r units.BitRate) {
	s.rateWant[path] = r
	if err := s.rl.SetRate(path, r); err != nil {
		s.stats.SetRateErrors++
		s.pathErr[path] = fmt.Errorf("setting the rate limit to %v: %w", r, err)
		if !s.rateDown[path] {
			s.rateDown[path] = true
			s.eng.OnPathDown(now, path, "set-rate-failed")
		}
		return
	}
	if s.rateDown[path] {
		s.rateDown[path] = false
		s.eng.OnPathUp(now, path)
	}
}

func (s *Sender) retryRates(now vtime.Time) {
	for i, down := range s.rateDown {
		if down {
			s.setRate(now, i, s.rateWant[i])
		}
	}
}

// fatal makes err sticky: the connection is closed (which destroys its
// queue pairs: nothing more is posted, and what was outstanding is flushed
// or dropped) and every transfer is reported failed with err.
func (s *Sender) fatal(now vtime.Time, err error) {
	if s.err != nil {
		return
	}
	s.err = err
	if cerr := s.conn.Close(); cerr != nil {
		err = fmt.Errorf("%w (closing the connection: %v)", err, cerr)
	}
	s.eng.Abort(now, err)
	for {
		n := s.eng.Actions(now, s.acts)
		for i := range s.acts[:n] {
			if a := &s.acts[i]; a.Kind == multipath.ActDone || a.Kind == multipath.ActFailed {
				delete(s.oneSided, a.Transfer)
				delete(s.regions, a.Transfer)
				if s.cfg.OnDone != nil {
					s.cfg.OnDone(a.Transfer, now, a.Err)
				}
			}
		}
		if n < len(s.acts) {
			return
		}
	}
}

// withCauses adds the paths' backend errors to a transfer's failure.
func (s *Sender) withCauses(err error) error {
	var causes []string
	for i, pe := range s.pathErr {
		if pe != nil {
			causes = append(causes, fmt.Sprintf("path %d: %v", i, pe))
		}
	}
	if err == nil || len(causes) == 0 {
		return err
	}
	return fmt.Errorf("%w; backend errors: %s", err, strings.Join(causes, "; "))
}

// Idle reports whether the sender has no live transfer.
func (s *Sender) Idle() bool { return s.eng.Live() == 0 }
