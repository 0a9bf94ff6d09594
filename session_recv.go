package mptx

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/internal/crc32c"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Tensor is a received tensor. Data is a slice of the session's region,
// valid until Release: the bytes stay put, and the range is not reused for
// another tensor, until then. Release it once you are done with it (or
// have copied it), or the region fills and the sender waits.
type Tensor struct {
	ID     multipath.TransferID
	Name   string
	Data   []byte
	Offset units.Bytes // where Data starts in the region
	CRC32C uint32      // as the sender computed it (0 when either end has NoChecksum)
	// Took is the time from the receiver's Grant to the sender's End.
	Took time.Duration

	r    *recvSide
	hold *tensorHold // the region's registered memory, while Data points into it
	// gc drops hold if the tensor is collected before Recv returned it
	// (queued when the session ended); Recv stops it: from then on only
	// Release may, the application holding Data.
	gc   runtime.Cleanup
	once sync.Once
}

// Release gives the tensor's range back to the region. Data must not be
// used afterwards. Release is idempotent. Over verbs the region is
// registered memory that stays mapped, after the session has ended too,
// until its last tensor is released: release every tensor Recv returned
// (tensors that arrived but were never received are released when they
// are garbage collected).
func (t *Tensor) Release() {
	t.once.Do(func() {
		t.r.do(func() { t.r.freeRange(t.Offset, units.Bytes(len(t.Data))) })
		t.hold.drop()
	})
}

// tensorHold is one tensor's hold on the region's memory (memHold),
// dropped once: by Release, by the receiver when the tensor is not
// delivered, or by the garbage collector's cleanup of a tensor that was
// never handed to the application.
type tensorHold struct {
	h       *memHold
	dropped atomic.Bool
}

func (th *tensorHold) drop() {
	if th != nil && th.dropped.CompareAndSwap(false, true) {
		th.h.drop()
	}
}

// incomingTensor is an offered tensor on the receiver's side.
type incomingTensor struct {
	offer   offerMsg
	plan    chunk.Plan
	off     units.Bytes
	granted bool
	at      time.Time
	// The sender's CRC32C, from its Sum (haveSum), and whether the
	// tensor is complete (both ends done) and waits for that Sum.
	crc      uint32
	haveSum  bool
	complete bool
	// sums[i] is the CRC32C of chunk i as its WRITE WITH IMM landed (the
	// backend's, see sumTap) or as it stood when that write's completion
	// was polled (summed[i]); nil when the tensor is not checked.
	sums   []uint32
	summed []bool
}

// sumChunk checksums chunk i of in's range in region.
func (in *incomingTensor) sumChunk(region []byte, i uint32) {
	off, n := in.plan.Span(int(i))
	b := region[in.off+off : in.off+off+n]
	in.sums[i], in.summed[i] = crc32c.Checksum(b), true
}

// sum returns the CRC32C of in's range: the chunks' sums combined in
// order, summing any chunk that has none yet.
func (in *incomingTensor) sum(region []byte) uint32 {
	var c uint32
	for i := range in.sums {
		if !in.summed[i] {
			in.sumChunk(region, uint32(i))
		}
		_, n := in.plan.Span(i)
		c = crc32c.Combine(c, in.sums[i], uint64(n))
	}
	return c
}

// sumTap is the receive driver's view of the connection's qp.Receiver: it
// takes each chunk's CRC32C of a checked tensor from the completion of its
// WRITE WITH IMM when the backend computed it as the bytes landed and the
// write carried the whole chunk (qp/tcp with ListenConfig.Checksum and
// segments as large as the chunks, the TCP defaults: the CRC32C then reads
// each piece the kernel just copied from the core's cache, and on the
// reader's goroutine rather than the loop's); otherwise it checksums the
// chunk when the completion is polled, which is right after the chunk's
// last bytes landed (a path's writes land in order), while they are still
// in the CPU's cache, instead of reading the whole tensor from memory
// again once it is complete. Immediates that name no tensor being checked (probes,
// an earlier use of a slot) are passed on untouched; the Receiver judges
// them. Loop goroutine only.
type sumTap struct {
	qp.Receiver
	rs *recvSide
}

func (t *sumTap) Poll(dst []qp.Completion) (int, error) {
	n, err := t.Receiver.Poll(dst)
	if len(t.rs.checking) == 0 {
		return n, err
	}
	for i := range dst[:n] {
		c := &dst[i]
		if c.Op != qp.OpRecvImm || c.Status != qp.StatusOK || chunk.IsProbe(c.Imm) {
			continue
		}
		tag, idx := chunk.DecodeImm(c.Imm)
		if in := t.rs.checking[tag]; in != nil && int(idx) < len(in.sums) {
			if off, n := in.plan.Span(int(idx)); c.HasSum && c.Bytes == n && c.SumAt == in.off+off && testHookReceived == nil {
				// The backend checksummed the write as it landed
				// (qp/tcp), and that write carried exactly the chunk.
				in.sums[idx], in.summed[idx] = c.Sum, true
				continue
			}
			if testHookReceived != nil {
				off, n := in.plan.Span(int(idx))
				testHookReceived(t.rs.region[in.off+off : in.off+off+n])
			}
			in.sumChunk(t.rs.region, idx)
		}
	}
	return n, err
}

// recvSide is the acceptor's end: the receive driver, its loop goroutine
// and the region's allocator.
type recvSide struct {
	s      *Session
	recv   qp.Receiver
	rcv    *Receiver
	region []byte
	alloc  *rangeAlloc
	clock  *vtime.Monotonic
	wake   <-chan struct{}
	cmds   chan func()
	kick   chan struct{}

	tel    RecvTelemetry                            // nil without Config.Telemetry
	hold   *memHold                                 // the region's registered memory (verbs); nil: Go memory
	offers map[multipath.TransferID]*incomingTensor // loop only
	// checking holds the granted tensors whose chunks sumTap checksums,
	// by immediate tag; loop only.
	checking map[int]*incomingTensor
	waiting  []multipath.TransferID // offers waiting for room, in order; loop only
	out      chan any               // *Tensor or error, to Recv
	mu       sync.Mutex
	closed   bool
	busy     time.Duration
	// receipts counts checks in progress (their Receipt not yet sent);
	// Close waits for them, so a sender is never told "closed" for a
	// tensor the receiving application already has.
	rmu      sync.Mutex
	rcond    *sync.Cond
	receipts int
	// exited is closed once the loop has exited and queued its last
	// tensor or failure: Recv drains out after it.
	exited chan struct{}
}

func (rs *recvSide) receiptStart() {
	rs.rmu.Lock()
	rs.receipts++
	rs.rmu.Unlock()
}

func (rs *recvSide) receiptDone() {
	rs.rmu.Lock()
	rs.receipts--
	rs.rcond.Broadcast()
	rs.rmu.Unlock()
}

// waitReceipts waits until every Receipt in progress was sent, at most d
// (a check whose tensor cannot be queued, Recv's queue being full, would
// wait for ever).
func (rs *recvSide) waitReceipts(d time.Duration) {
	expired := false
	t := time.AfterFunc(d, func() {
		rs.rmu.Lock()
		expired = true
		rs.rcond.Broadcast()
		rs.rmu.Unlock()
	})
	defer t.Stop()
	rs.rmu.Lock()
	for rs.receipts > 0 && !expired {
		rs.rcond.Wait()
	}
	rs.rmu.Unlock()
}

func newRecvSide(s *Session, recv qp.Receiver, region []byte, cfg *Config) (*recvSide, error) {
	rs := &recvSide{s: s, recv: recv, region: region, alloc: newRangeAlloc(units.Bytes(len(region))),
		clock: vtime.NewMonotonic(), cmds: make(chan func(), 1024), kick: make(chan struct{}, 1),
		offers: map[multipath.TransferID]*incomingTensor{}, checking: map[int]*incomingTensor{}, out: make(chan any, chunk.MaxSlots), exited: make(chan struct{})}
	rs.rcond = sync.NewCond(&rs.rmu)
	if n, ok := recv.(qp.Notifier); ok {
		rs.wake = n.Notify()
	}
	if s.tr == TransportVerbs {
		rs.busy = 50 * time.Microsecond
	}
	if cfg.Telemetry != nil {
		rt, err := cfg.Telemetry.RecvTelemetry(SessionInfo{Backend: string(s.tr), Peer: s.peers, Paths: recvPaths(recv), Wall: rs.clock.Wall})
		if err != nil {
			return nil, fmt.Errorf("mptx: Config.Telemetry: %w", err)
		}
		rs.tel = rt
	}
	rcv, err := NewReceiver(&sumTap{Receiver: recv, rs: rs}, ReceiverConfig{AwaitSender: true, OnDone: rs.onDone, Telemetry: rs.tel})
	if err != nil {
		return nil, err
	}
	rs.rcv = rcv
	return rs, nil
}

// Recv returns the next tensor the sender shipped, checked; or a
// *TransferError for a tensor that failed (the session goes on); or, once
// the session has ended, its error. Several goroutines may call Recv; each
// tensor goes to one of them.
func (s *Session) Recv(ctx context.Context) (*Tensor, error) {
	rs := s.rcv
	if rs == nil {
		return nil, fmt.Errorf("mptx: Recv on the sending end of a session (sessions carry tensors from the dialer to the acceptor)")
	}
	select {
	case v := <-rs.out:
		return deliver(v)
	default:
	}
	select {
	case v := <-rs.out:
		return deliver(v)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.done:
		<-rs.exited // what the session delivers is queued by now
		select {
		case v := <-rs.out:
			return deliver(v)
		default:
		}
		return nil, s.Err()
	}
}

func deliver(v any) (*Tensor, error) {
	if t, ok := v.(*Tensor); ok {
		t.gc.Stop() // the application holds Data now: Release decides
		return t, nil
	}
	return nil, v.(error)
}

// RegionSize returns the receiving end's region size.
func (s *Session) RegionSize() units.Bytes {
	if s.rcv == nil {
		return 0
	}
	return units.Bytes(len(s.rcv.region))
}

func (rs *recvSide) do(f func()) bool {
	rs.mu.Lock()
	if rs.closed {
		rs.mu.Unlock()
		return false
	}
	rs.cmds <- f
	rs.mu.Unlock()
	select {
	case rs.kick <- struct{}{}:
	default:
	}
	return true
}

// onCtrl handles a control frame from the sender (reader goroutine).
func (rs *recvSide) onCtrl(typ bootstrap.Type, payload []byte) error {
	switch typ {
	case msgOffer:
		var m offerMsg
		if err := m.unmarshal(payload); err != nil {
			return err
		}
		rs.do(func() { rs.offer(m) })
	case msgEnd:
		var m idMsg
		if err := m.unmarshal(payload, "End"); err != nil {
			return err
		}
		rs.do(func() { rs.end(m) })
	case msgSum:
		var m sumMsg
		if err := m.unmarshal(payload); err != nil {
			return err
		}
		rs.do(func() { rs.sum(m) })
	default:
		return fmt.Errorf("mptx: unexpected control message %d from the sender", typ)
	}
	return nil
}

// offer sets a range aside for an offered tensor, or queues the offer
// until there is room (loop goroutine).
func (rs *recvSide) offer(m offerMsg) {
	id := multipath.TransferID(m.ID)
	plan, _ := m.plan() // checked by unmarshal
	if _, dup := rs.offers[id]; dup {
		rs.s.end(fmt.Errorf("mptx: the sender offered tensor %d twice", m.ID))
		return
	}
	if plan.Size > units.Bytes(len(rs.region)) {
		r := idMsg{ID: m.ID, Err: fmt.Sprintf("tensor %q is %v, larger than the receiver's region (%v; Config.RegionSize)", m.Name, plan.Size, units.Bytes(len(rs.region)))}
		_ = rs.s.ctrl.send(msgRefuse, r.marshal())
		return
	}
	rs.offers[id] = &incomingTensor{offer: m, plan: plan}
	rs.waiting = append(rs.waiting, id)
	// The sender reuses a slot once its engine has seen every
	// completion of the slot's previous transfer, and sends that
	// transfer's End before this Offer. Every receive completion of it
	// is therefore in the receive queue already (a path acknowledges a
	// WRITE WITH IMM only once its completion is queued), but the loop
	// may not have polled them yet: poll now, so that the previous
	// transfer completes and frees the slot before Expect takes it.
	rs.rcv.Step(rs.clock.Now())
	rs.grant()
}

// grant grants waiting offers, in order, while the region has room.
func (rs *recvSide) grant() {
	for len(rs.waiting) > 0 {
		in := rs.offers[rs.waiting[0]]
		if in == nil {
			rs.waiting = rs.waiting[1:]
			continue
		}
		if rs.rcv.Busy(int(in.offer.Tag)) {
			// The sender reused the tag slot of a transfer whose last
			// completions this end has yet to poll: wait for it to
			// retire (onDone grants again).
			return
		}
		off, ok := rs.alloc.alloc(in.plan.Size)
		if !ok {
			return
		}
		rs.waiting = rs.waiting[1:]
		in.off, in.granted, in.at = off, true, time.Now()
		id := multipath.TransferID(in.offer.ID)
		if err := rs.rcv.Expect(int(in.offer.Tag), id, in.plan, off); err != nil {
			rs.alloc.free(off, in.plan.Size)
			delete(rs.offers, id)
			r := idMsg{ID: in.offer.ID, Err: err.Error()}
			_ = rs.s.ctrl.send(msgRefuse, r.marshal())
			continue
		}
		if rs.tel != nil {
			// A malformed trace context only unlinks the spans.
			_ = rs.tel.Expect(rs.clock.Now(), id, in.plan.Size, uint32(in.plan.Count), in.plan.ChunkSize, []byte(in.offer.Trace))
		}
		if !rs.s.cfg.NoChecksum && in.offer.Flags&offerChecked != 0 {
			in.sums, in.summed = make([]uint32, in.plan.Count), make([]bool, in.plan.Count)
			rs.checking[int(in.offer.Tag)] = in
		}
		g := grantMsg{ID: in.offer.ID, Remote: uint64(off)}
		if err := rs.s.ctrl.send(msgGrant, g.marshal()); err != nil {
			rs.s.end(fmt.Errorf("mptx: sending Grant: %w", err))
			return
		}
	}
}

// end is the sender's End: its engine has fenced the transfer.
func (rs *recvSide) end(m idMsg) {
	id := multipath.TransferID(m.ID)
	in := rs.offers[id]
	if in == nil {
		return
	}
	if !in.granted {
		// Failed or canceled before a grant: nothing was written.
		delete(rs.offers, id)
		rs.push(&TransferError{ID: id, Name: in.offer.Name, Err: textErr(m.Err)})
		return
	}
	if int(m.Tag) != int(in.offer.Tag) {
		rs.s.end(fmt.Errorf("mptx: End of tensor %d carries tag %d, its Offer %d", m.ID, m.Tag, in.offer.Tag))
		return
	}
	rs.rcv.SenderDone(rs.clock.Now(), int(in.offer.Tag), textErr(m.Err))
}

// sum is the sender's Sum: the tensor's CRC32C. A complete tensor that
// waited for it is checked and delivered now.
func (rs *recvSide) sum(m sumMsg) {
	id := multipath.TransferID(m.ID)
	in := rs.offers[id]
	if in == nil {
		return // it failed meanwhile
	}
	in.crc, in.haveSum = m.CRC32C, true
	if in.complete {
		delete(rs.offers, id)
		rs.deliver(id, in)
	}
}

// onDone is the Receiver's OnDone (loop goroutine): every chunk landed and
// the sender fenced (or the transfer failed). A checked tensor whose Sum
// has not come yet waits for it (its slot is free already; its range stays
// set aside); otherwise it is checked and delivered.
func (rs *recvSide) onDone(id multipath.TransferID, _ vtime.Time, err error) {
	in := rs.offers[id]
	if in == nil {
		return
	}
	defer rs.grant() // the transfer's tag slot is free again
	if rs.checking[int(in.offer.Tag)] == in {
		delete(rs.checking, int(in.offer.Tag))
	}
	if err != nil {
		delete(rs.offers, id)
		rs.alloc.free(in.off, in.plan.Size)
		rs.grant()
		r := idMsg{ID: uint64(id), Err: err.Error()}
		_ = rs.s.ctrl.send(msgReceipt, r.marshal())
		rs.push(&TransferError{ID: id, Name: in.offer.Name, Err: err})
		return
	}
	if in.sums != nil && !in.haveSum {
		in.complete = true
		return
	}
	delete(rs.offers, id)
	rs.deliver(id, in)
}

// deliver checks a complete tensor's CRC32C (its chunks' sums, combined),
// then hands it to Recv and answers the sender, off the loop.
func (rs *recvSide) deliver(id multipath.TransferID, in *incomingTensor) {
	size := in.plan.Size
	data := rs.region[in.off : in.off+size : in.off+size]
	t := &Tensor{ID: id, Name: in.offer.Name, Data: data, Offset: in.off, Took: time.Since(in.at), r: rs}
	if rs.hold != nil {
		// The tensor's hold, taken on the loop goroutine (before exit
		// drops the session's): Data points into the region until
		// Release.
		rs.hold.acquire()
		t.hold = &tensorHold{h: rs.hold}
		t.gc = runtime.AddCleanup(t, (*tensorHold).drop, t.hold)
	}
	var crcErr error
	if in.sums != nil {
		// The chunks were checksummed as they landed (sumTap); the
		// tensor's CRC32C combines theirs.
		t.CRC32C = in.crc
		if got := in.sum(rs.region); got != in.crc {
			crcErr = fmt.Errorf("CRC32C %#08x of the received bytes, the sender's is %#08x", got, in.crc)
		}
	}
	rs.receiptStart()
	go func() {
		defer rs.receiptDone()
		err := crcErr
		// Queue the tensor (or its failure) before the Receipt, so that
		// a sender who closes as soon as Send returns cannot end the
		// session before Recv can have it.
		if err != nil {
			rs.do(func() { rs.freeRange(in.off, size) })
			t.hold.drop()
			rs.push(&TransferError{ID: id, Name: in.offer.Name, Err: err})
		} else if !rs.push(t) {
			t.hold.drop()
		}
		r := idMsg{ID: uint64(id), Err: errText(err)}
		_ = rs.s.ctrl.send(msgReceipt, r.marshal())
	}()
}

// push hands a tensor or an error to Recv and reports whether it did (not
// once the session has ended); it never blocks the loop for long: out
// holds as many as there are slots.
func (rs *recvSide) push(v any) bool {
	select {
	case rs.out <- v: // room: never dropped, even if the session just ended
		return true
	default:
	}
	select {
	case rs.out <- v:
		return true
	case <-rs.s.done:
		return false
	}
}

func (rs *recvSide) freeRange(off, size units.Bytes) {
	rs.alloc.free(off, size)
	rs.grant()
}

// run is the receiving loop goroutine.
func (rs *recvSide) run() {
	defer rs.exit()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	lastBusy := rs.clock.Now()
	for {
		for drained := false; !drained; {
			select {
			case f := <-rs.cmds:
				f()
			default:
				drained = true
			}
		}
		select {
		case <-rs.s.done:
			return
		default:
		}
		rs.rcv.Step(rs.clock.Now())
		if err := rs.rcv.Err(); err != nil {
			rs.s.end(err)
			continue
		}
		now := rs.clock.Now()
		if rs.busy > 0 && now.Sub(lastBusy) < rs.busy {
			continue
		}
		sleep := time.Hour
		if rs.wake == nil {
			sleep = 100 * time.Microsecond
		}
		timer.Reset(sleep)
		select {
		case <-rs.s.done:
		case <-rs.kick:
		case <-rs.wake:
			lastBusy = rs.clock.Now()
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

func (rs *recvSide) exit() {
	rs.mu.Lock()
	rs.closed = true
	rs.mu.Unlock()
	for {
		select {
		case f := <-rs.cmds:
			f()
			continue
		default:
		}
		break
	}
	rs.recv.Close()
	if rs.tel != nil {
		rs.tel.Close(rs.clock.Now())
	}
	err := rs.s.Err()
	if err == nil {
		err = ErrSessionClosed
	}
	for id, in := range rs.offers {
		delete(rs.offers, id)
		select {
		case rs.out <- &TransferError{ID: id, Name: in.offer.Name, Err: err}:
		default:
		}
	}
	rs.waitReceipts(rs.s.cfg.timeout()) // their pushes come first
	close(rs.exited)
	rs.hold.drop() // the session's own: the queue pairs are gone
}

func (rs *recvSide) shutdown(error) {
	select {
	case rs.kick <- struct{}{}:
	default:
	}
}

// acceptSession runs the receiver's half of the session handshake on an
// authenticated control channel.
// dataHost is the listener's host: the data listener binds there too (the
// wildcard when the session listener listens on every address, so paths
// may reach the receiver through any of its addresses).
func acceptSession(ctx context.Context, bs *bootstrap.Session, t bootstrap.Type, payload []byte, dataHost string, cfg Config) (*Session, error) {
	if t != msgHello {
		return nil, fmt.Errorf("mptx: got message %d, want Hello", t)
	}
	var h hello
	if err := h.unmarshal(payload); err != nil {
		return nil, err
	}
	if h.Version != sessionVersion {
		return nil, fmt.Errorf("mptx: the sender speaks session version %d, this receiver %d", h.Version, sessionVersion)
	}
	if h.Paths == 0 || int(h.Paths) > multipath.MaxPaths {
		return nil, fmt.Errorf("mptx: Hello asks for %d paths (valid: 1..%d)", h.Paths, multipath.MaxPaths)
	}
	verbsErr := verbsTransport.usable(&cfg)
	var tr uint8
	switch {
	case h.Transports&transportVerbs != 0 && cfg.Transport != TransportTCP && verbsErr == nil:
		tr = transportVerbs
	case h.Transports&transportTCP != 0 && cfg.Transport != TransportVerbs:
		tr = transportTCP
	default:
		why := ""
		if verbsErr != nil {
			why = fmt.Sprintf("; this receiver cannot run verbs: %v", verbsErr)
		}
		return nil, fmt.Errorf("mptx: no common transport (the sender offers %s, this receiver is set to %s%s)",
			transportNames(h.Transports), cfgTransport(cfg), why)
	}
	s := &Session{cfg: cfg, ctrl: &ctrlConn{s: bs, timeout: cfg.timeout()}, done: make(chan struct{}), peers: bs.RemoteAddr().String()}
	var l link
	var err error
	if s.tr, l, err = acceptTransport(ctx, bs, &h, tr, dataHost, &cfg); err != nil {
		return nil, err
	}
	s.ctrl.in = l.in
	rs, err := newRecvSide(s, l.recv, l.mem, &cfg)
	if err != nil {
		l.close()
		return nil, err
	}
	if l.clock != nil {
		rs.clock = l.clock // the backend stamps completions with it
	}
	rs.hold = newMemHold(l.free)
	s.rcv = rs
	go s.readLoop(rs.onCtrl)
	s.loop.Add(1)
	go func() {
		defer s.loop.Done()
		rs.run()
	}()
	return s, nil
}

func transportNames(bits uint8) string {
	switch bits & (transportTCP | transportVerbs) {
	case transportTCP:
		return "tcp"
	case transportVerbs:
		return "verbs"
	case transportTCP | transportVerbs:
		return "tcp and verbs"
	}
	return "nothing"
}

func cfgTransport(cfg Config) Transport {
	if cfg.Transport == "" {
		return TransportAuto
	}
	return cfg.Transport
}

// testHookReceived, set by tests only, sees (and may corrupt) every
// checked chunk as it lands, before it is checksummed.
var testHookReceived func(data []byte)

// recvPaths describes a receiver's paths when its backend says (qp/tcp and
// verbs receivers have Paths), else nothing.
func recvPaths(r qp.Receiver) []qp.PathInfo {
	if p, ok := r.(interface{ Paths() []qp.PathInfo }); ok {
		return p.Paths()
	}
	return nil
}
