package mptx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mptx-dev/mptx/internal/crc32c"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// sendSide is the dialer's end: the driver, its loop goroutine, and the
// staging buffer.
type sendSide struct {
	s     *Session
	conn  qp.Conn
	regs  qp.SendRegions // nil: every tensor is staged
	snd   *Sender
	clock *vtime.Monotonic
	wake  <-chan struct{}
	cmds  chan func()
	kick  chan struct{} // cmds has work

	stage    *rangeAlloc // over the send region; guarded by stageMu
	stageMu  sync.Mutex
	stageCnd *sync.Cond
	send     []byte
	pool     *sendPool // the rest of the region: Session.Alloc (nil: none)

	tel    SendTelemetry // nil without Config.Telemetry
	nextID atomic.Uint64
	live   map[multipath.TransferID]*Transfer // loop goroutine only
	busy   time.Duration
	hold   *memHold // keeps the send buffer mapped while stagers copy into it

	mu     sync.Mutex // orders do against the loop's exit
	closed bool       // guarded by mu: the loop has stopped taking commands

	os osLoop // one-sided Reads and Writes in the loop's hands (oneside.go)

	// sumc is the connection as the driver sees it when qp/tcp
	// checksums what it sends (session_sum.go); nil otherwise. byRegion
	// finds the fused transfers by send region; loop goroutine only.
	sumc     *sumConn
	byRegion map[uint32]*Transfer
}

func newSendSide(s *Session, conn qp.Conn, send []byte, cfg *Config) (*sendSide, error) {
	send, pool, err := newSendPool(send, cfg)
	if err != nil {
		return nil, err
	}
	ss := &sendSide{s: s, conn: conn, send: send, pool: pool, cmds: make(chan func(), 1024), kick: make(chan struct{}, 1),
		live: map[multipath.TransferID]*Transfer{}, clock: vtime.NewMonotonic()}
	ss.stage = newRangeAlloc(units.Bytes(len(send)))
	ss.stageCnd = sync.NewCond(&ss.stageMu)
	if n, ok := conn.(qp.Notifier); ok {
		ss.wake = n.Notify()
	}
	ss.regs, _ = conn.(qp.SendRegions)
	if s.tr == TransportVerbs {
		ss.busy = 50 * time.Microsecond
	}
	ecfg := cfg.Engine
	if s.tr == TransportTCP {
		tcpEngineDefaults(&ecfg)
	}
	if cfg.Telemetry != nil {
		cc := ecfg.CC
		if cc == "" {
			cc = "dcqcn"
		}
		st, err := cfg.Telemetry.SendTelemetry(SessionInfo{Backend: string(s.tr), Peer: s.peers, CC: cc, Paths: conn.Paths(), Wall: ss.clock.Wall})
		if err != nil {
			return nil, fmt.Errorf("mptx: Config.Telemetry: %w", err)
		}
		ss.tel = st
		if ecfg.Recorder == nil {
			ecfg.Recorder = st
		} else {
			ecfg.Recorder = multiRecorder{ecfg.Recorder, st}
		}
	}
	ecfg.Recorder = teeRecorder{ss, ecfg.Recorder}
	dconn := conn
	if tc, ok := conn.(*tcp.Conn); ok && !cfg.NoChecksum && ecfg.ChunkSize > 0 && ecfg.Segment >= ecfg.ChunkSize {
		// Each chunk is one write (the TCP defaults), whose completion
		// brings the chunk's CRC32C (session_sum.go).
		ss.sumc = &sumConn{Conn: tc, ss: ss, posted: map[uint64]postedWR{}}
		ss.byRegion = map[uint32]*Transfer{}
		dconn = ss.sumc
	}
	snd, err := NewSender(dconn, SenderConfig{Engine: ecfg, OnDone: ss.onEngineDone})
	if err != nil {
		return nil, err
	}
	ss.snd = snd
	return ss, nil
}

// do runs f on the loop goroutine; it reports false if the session ended
// (f then never runs).
func (ss *sendSide) do(f func()) bool {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return false
	}
	ss.cmds <- f // the loop drains cmds without taking mu
	ss.mu.Unlock()
	select {
	case ss.kick <- struct{}{}:
	default:
	}
	return true
}

// Send ships data as one tensor named name and returns when the receiver
// has it, checked: nil, or why not. ctx cancels the transfer on both ends.
// Send reads data until it returns; data must not be modified before then.
func (s *Session) Send(ctx context.Context, name string, data []byte) error {
	t, err := s.SendAsync(ctx, name, data)
	if err != nil {
		return err
	}
	<-t.done
	return t.Err()
}

// SendAsync starts sending data as one tensor named name and returns its
// Transfer at once. ctx cancels the transfer on both ends: it then fails
// with ctx's error, and the receiver never delivers it.
//
// The caller must not modify data until the transfer has ended (its Done
// channel is closed, Wait has returned): until then the session may read
// it, and a change would reach the receiver, or fail the tensor's CRC32C
// check. Once the transfer has ended, successfully or not, nothing reads
// data any more. How data is read:
//
//   - A tensor that starts where a Buffer of the session's pool does
//     (Session.Alloc) is sent where it lies: no copy, no registration.
//   - TCP sends straight from data (qp.SendRegions: data is registered
//     with the connection for the transfer's lifetime): no copy.
//   - Verbs, for now, copies other memory into the session's registered
//     send buffer (Config.SendBuffer) before SendAsync returns, waiting
//     for room while the buffer is busy with earlier tensors; a tensor
//     larger than the buffer is refused.
func (s *Session) SendAsync(ctx context.Context, name string, data []byte) (*Transfer, error) {
	return s.sendAsync(ctx, name, data, SendOptions{})
}

func (s *Session) sendAsync(ctx context.Context, name string, data []byte, opts SendOptions) (*Transfer, error) {
	ss := s.snd
	if ss == nil {
		return nil, fmt.Errorf("mptx: SendAsync on the receiving end of a session (sessions carry tensors from the dialer to the acceptor)")
	}
	if len(name) > MaxNameLen {
		return nil, fmt.Errorf("mptx: tensor name of %d bytes (valid: up to %d)", len(name), MaxNameLen)
	}
	size := units.Bytes(len(data))
	if size == 0 {
		return nil, fmt.Errorf("mptx: tensor %q is empty (valid: at least 1 byte)", name)
	}
	buf := ss.pool.pin(data) // a Buffer of the pool is sent where it lies (session_alloc.go)
	if buf == nil && ss.regs == nil && size > units.Bytes(len(ss.send)) {
		return nil, fmt.Errorf("mptx: tensor %q is %v, larger than the send buffer (%v; Config.SendBuffer)", name, size, units.Bytes(len(ss.send)))
	}
	if err := s.Err(); err != nil {
		buf.unpin()
		return nil, err
	}
	if !ss.hold.acquire() {
		buf.unpin()
		return nil, ErrSessionClosed
	}
	defer ss.hold.drop()
	t := &Transfer{ID: multipath.TransferID(ss.nextID.Add(1)), Name: name, Size: size, Priority: opts.Priority, s: ss, ctx: ctx,
		done: make(chan struct{}), started: time.Now()}
	t.checked = !s.cfg.NoChecksum
	t.summing = t.checked
	sum := data
	switch {
	case buf != nil:
		// In place, in the registered send region; pinned until the
		// transfer is fenced (and its checksum done).
		t.buf, t.off = buf, buf.Offset()
	case ss.regs != nil:
		// Zero-copy: send from data itself.
		id, err := ss.regs.AddSendRegion(data)
		if err != nil {
			return nil, fmt.Errorf("mptx: tensor %q: registering it to send from: %w", name, err)
		}
		t.region = id
		// qp/tcp's writers checksum the chunks as they send them
		// (session_sum.go).
		t.fused, t.data = t.checked && ss.sumc != nil, data
	default:
		// Stage: take a range of the send buffer (waiting for room) and
		// copy on the caller's goroutine, so that the engine's loop never
		// stalls on a copy and several senders copy in parallel.
		off, err := ss.reserve(ctx, size)
		if err != nil {
			return nil, err
		}
		t.off, t.staged = off, true
		copy(ss.send[off:off+size], data)
		sum = ss.send[off : off+size]
	}
	t.stop = context.AfterFunc(ctx, func() {
		ss.do(func() { ss.cancel(t, context.Cause(ctx)) })
	})
	if !ss.do(func() { ss.start(t) }) {
		t.stop()
		t.summing = false // no checksum will run
		ss.unpin(t)
		return nil, s.Err()
	}
	if t.checked && !t.fused {
		// Checksum on the caller's goroutine while the transfer starts
		// (Offer, Grant, the first chunks): the CRC32C goes in a Sum of
		// its own, so the pass over the tensor overlaps its transfer
		// instead of delaying it, and several senders checksum in
		// parallel.
		crc := crc32c.Checksum(sum)
		ss.do(func() { ss.summed(t, crc) })
	}
	return t, nil
}

// summed sends t's checksum to the receiver (loop goroutine), unless t
// has ended meanwhile. If the engine has reported t, its bytes are
// unpinned here: they were kept while the checksum read them.
func (ss *sendSide) summed(t *Transfer, crc uint32) {
	t.summing = false
	if ss.live[t.ID] != t {
		ss.unpin(t) // ended (failed, or the session ended) meanwhile
		return
	}
	if t.fenced {
		ss.unpin(t)
	}
	m := sumMsg{ID: uint64(t.ID), CRC32C: crc}
	if err := ss.s.ctrl.send(msgSum, m.marshal()); err != nil {
		ss.s.end(fmt.Errorf("mptx: sending Sum: %w", err))
	}
}

// unpin gives back what holds t's bytes for sending: its staging range, or
// its registration as a send region. Only once nothing of t can be read
// any more: before it was submitted, or once the engine fenced it, and
// not while its checksum is being computed.
func (ss *sendSide) unpin(t *Transfer) {
	if t.summing {
		return // summed unpins
	}
	if t.staged {
		t.staged = false
		ss.release(t.off, t.Size)
	}
	if t.region != 0 {
		if ss.byRegion[t.region] == t {
			delete(ss.byRegion, t.region)
		}
		if err := ss.regs.RemoveSendRegion(t.region); err != nil {
			panic(fmt.Sprintf("mptx: BUG: tensor %q: %v", t.Name, err))
		}
		t.region = 0
	}
	if t.buf != nil {
		t.buf.unpin()
		t.buf = nil
	}
}

// reserve takes size bytes of the send buffer, waiting while it is full.
func (ss *sendSide) reserve(ctx context.Context, size units.Bytes) (units.Bytes, error) {
	stop := context.AfterFunc(ctx, func() {
		ss.stageMu.Lock()
		ss.stageCnd.Broadcast()
		ss.stageMu.Unlock()
	})
	defer stop()
	ss.stageMu.Lock()
	defer ss.stageMu.Unlock()
	for {
		if off, ok := ss.stage.alloc(size); ok {
			return off, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := ss.s.Err(); err != nil {
			return 0, err
		}
		ss.stageCnd.Wait()
	}
}

func (ss *sendSide) release(off, size units.Bytes) {
	ss.stageMu.Lock()
	ss.stage.free(off, size)
	ss.stageCnd.Broadcast()
	ss.stageMu.Unlock()
}

// start submits t held, and offers it to the receiver (loop goroutine).
func (ss *sendSide) start(t *Transfer) {
	if err := ss.s.Err(); err != nil {
		ss.fail(t, err)
		return
	}
	if t.ctx.Err() != nil {
		ss.fail(t, fmt.Errorf("mptx: tensor %q canceled: %w", t.Name, context.Cause(t.ctx)))
		return
	}
	now := ss.clock.Now()
	var tc []byte
	if ss.tel != nil {
		tc = ss.tel.BeginTransfer(t.ctx, now, t.ID, t.Name)
	}
	tag, plan, err := ss.snd.SubmitRegion(now, multipath.TransferSpec{ID: t.ID, Size: t.Size, Local: t.off, Hold: true, Priority: t.Priority}, t.region)
	if err != nil {
		if ss.tel != nil {
			ss.tel.CancelTransfer(now, t.ID, err.Error())
		}
		ss.fail(t, err)
		return
	}
	t.tag, t.plan = tag, plan
	if t.fused {
		t.sums, t.have = make([]uint32, plan.Count), make([]bool, plan.Count)
		ss.byRegion[t.region] = t
	}
	t.paths = make([]units.Bytes, len(ss.conn.Paths()))
	ss.live[t.ID] = t
	m := offerMsg{ID: uint64(t.ID), Tag: uint16(tag), Size: uint64(plan.Size), ChunkSize: uint64(plan.ChunkSize),
		Count: uint32(plan.Count), Name: t.Name, Trace: string(tc)}
	if t.checked {
		m.Flags |= offerChecked
	}
	if err := ss.s.ctrl.send(msgOffer, m.marshal()); err != nil {
		ss.s.end(fmt.Errorf("mptx: sending Offer: %w", err))
	}
}

// cancel cancels t (loop goroutine); the engine reports it through onDone.
func (ss *sendSide) cancel(t *Transfer, cause error) {
	if _, ok := ss.live[t.ID]; !ok {
		return
	}
	_ = ss.snd.Cancel(ss.clock.Now(), t.ID, cause)
}

// fail ends t with err and unpins its bytes.
func (ss *sendSide) fail(t *Transfer, err error) {
	delete(ss.live, t.ID)
	if t.fused {
		t.summing = false // no Sum will be sent
	}
	ss.unpin(t)
	t.finish(err)
}

// onDone is the Sender's OnDone (loop goroutine): the engine has fenced
// the transfer. Tell the receiver; a failure ends it here, a success
// waits for the receiver's Receipt.
func (ss *sendSide) onDone(id multipath.TransferID, _ vtime.Time, err error) {
	t := ss.live[id]
	if t == nil {
		return
	}
	t.fenced = true
	if t.fused && t.summing && err == nil {
		// Every chunk is acknowledged: its sum is in (session_sum.go).
		ss.summed(t, ss.fusedSum(t))
	}
	m := idMsg{ID: uint64(id), Tag: uint16(t.tag), Err: errText(err)}
	if serr := ss.s.ctrl.send(msgEnd, m.marshal()); serr != nil && err == nil {
		err = fmt.Errorf("mptx: telling the receiver: %w", serr)
	}
	// Fenced: nothing posted reads t's bytes any more (unpin waits for a
	// checksum in progress).
	ss.unpin(t)
	if err != nil {
		if errors.Is(err, multipath.ErrCanceled) && t.ctx.Err() != nil {
			err = fmt.Errorf("mptx: tensor %q canceled: %w", t.Name, context.Cause(t.ctx))
		}
		ss.fail(t, ss.s.closedCause(err))
	}
}

// onCtrl handles a control frame (reader goroutine): it forwards to the
// loop.
func (ss *sendSide) onCtrl(typ bootstrap.Type, payload []byte) error {
	switch typ {
	case msgGrant:
		var m grantMsg
		if err := m.unmarshal(payload); err != nil {
			return err
		}
		ss.do(func() {
			if t := ss.live[multipath.TransferID(m.ID)]; t != nil {
				if err := ss.snd.Engine().Start(ss.clock.Now(), t.ID, units.Bytes(m.Remote)); err != nil {
					_ = ss.snd.Cancel(ss.clock.Now(), t.ID, err)
				}
			}
		})
	case msgRefuse, msgCancel, msgReceipt:
		var m idMsg
		if err := m.unmarshal(payload, "Receipt"); err != nil {
			return err
		}
		ss.do(func() {
			t := ss.live[multipath.TransferID(m.ID)]
			if t == nil {
				return
			}
			switch typ {
			case msgReceipt:
				ss.fail(t, textErr(m.Err))
			case msgRefuse:
				_ = ss.snd.Cancel(ss.clock.Now(), t.ID, fmt.Errorf("%w: %s", ErrRefused, m.Err))
			default:
				_ = ss.snd.Cancel(ss.clock.Now(), t.ID, fmt.Errorf("the receiver gave up: %s", m.Err))
			}
		})
	default:
		return fmt.Errorf("mptx: unexpected control message %d from the receiver", typ)
	}
	return nil
}

// run is the loop goroutine: commands, then a driver round, then sleep
// until the deadline, a completion, or a command.
func (ss *sendSide) run() {
	defer ss.exit()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	lastBusy := ss.clock.Now()
	for {
		for drained := false; !drained; {
			select {
			case f := <-ss.cmds:
				f()
			default:
				drained = true
			}
		}
		select {
		case <-ss.s.done:
			return
		default:
		}
		now := ss.clock.Now()
		next := ss.snd.Step(now)
		if err := ss.snd.Err(); err != nil {
			ss.s.end(err)
			continue
		}
		now = ss.clock.Now()
		if next != 0 && next <= now {
			lastBusy = now
			continue
		}
		if ss.busy > 0 && now.Sub(lastBusy) < ss.busy {
			continue
		}
		sleep := time.Hour
		if ss.wake == nil {
			sleep = 100 * time.Microsecond
		}
		if next != 0 {
			sleep = min(sleep, next.Sub(now))
		}
		timer.Reset(sleep)
		select {
		case <-ss.s.done:
		case <-ss.kick:
		case <-ss.wake:
			lastBusy = ss.clock.Now()
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// exit ends the loop: no command is taken after it; those queued run
// (and fail, the session having ended); the connection is closed, which
// destroys its queue pairs (nothing more is posted, what was in flight is
// flushed or dropped), and every transfer still live fails with the
// session's error.
func (ss *sendSide) exit() {
	ss.mu.Lock()
	ss.closed = true
	ss.mu.Unlock()
	for {
		select {
		case f := <-ss.cmds:
			f()
			continue
		default:
		}
		break
	}
	ss.conn.Close()
	err := ss.s.Err()
	for _, t := range ss.live {
		ss.fail(t, err)
	}
	ss.osExit(err)
	if ss.tel != nil {
		ss.tel.Close(ss.clock.Now())
	}
	ss.hold.drop() // the session's own: the queue pairs are gone
}

// multiRecorder feeds engine events to two recorders.
type multiRecorder [2]multipath.Recorder

func (m multiRecorder) Record(ev *multipath.Event) {
	m[0].Record(ev)
	m[1].Record(ev)
}

// shutdown wakes whatever waits on the sending side (the session ended);
// the loop goroutine does the rest (exit).
func (ss *sendSide) shutdown(error) {
	ss.stageMu.Lock()
	ss.stageCnd.Broadcast()
	ss.stageMu.Unlock()
	select {
	case ss.kick <- struct{}{}:
	default:
	}
}

// teeRecorder feeds engine events to the session (per-transfer path bytes
// and requeues) and to the user's Recorder.
type teeRecorder struct {
	ss   *sendSide
	next multipath.Recorder
}

func (r teeRecorder) Record(ev *multipath.Event) {
	r.ss.osRecord(ev) // one-sided transfers (oneside.go); not in r.ss.live
	switch ev.Kind {
	case multipath.EvChunkDone:
		if t := r.ss.live[ev.Transfer]; t != nil && ev.Path < len(t.paths) {
			t.mu.Lock()
			t.paths[ev.Path] += ev.Bytes
			t.mu.Unlock()
			t.acked.Add(int64(ev.Bytes))
		}
	case multipath.EvChunkRequeue:
		if t := r.ss.live[ev.Transfer]; t != nil {
			t.mu.Lock()
			t.requeues++
			t.mu.Unlock()
		}
	}
	if r.next != nil {
		r.next.Record(ev)
	}
}
