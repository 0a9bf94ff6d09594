package mptx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// One-sided access, the dialing end: Read pulls ranges of the peer's
// exposed memory into local memory, Write pushes local bytes into them,
// both as lists of (local, remote) pairs. Each pair (or each piece of a
// staged pair) is one transfer of the session's engine, posted as RDMA
// READs or plain keyed WRITEs (Sender.SubmitOneSided): cut into chunks,
// spread over the paths, paced and congestion-controlled, failed over and
// fenced exactly like a Send. The engine does not know the difference: a
// READ is paced by the bytes it will bring back and its completion is the
// chunk's done signal (docs/design.md, "Pulls").

// Pair is one range of a Read or a Write: Local, the requester's bytes
// (where a Read's bytes land, where a Write's come from), and Remote, the
// peer's range, exactly len(Local) bytes (Descriptor.Slice narrows a
// larger exposure).
//
// Local memory inside a Buffer of the session's pool (Session.Alloc) is
// read into and written from where it lies. Any other memory is
// registered with the transport for the time of the transfer where that
// costs nothing (qp.SendRegions: TCP), and read into or written from
// where it lies too; elsewhere (verbs) it goes through the session's
// staging buffer (Config.SendBuffer) in pieces, one copy each way, as
// Send does.
type Pair struct {
	Local  []byte
	Remote Descriptor
}

// Defaults of one-sided operations.
const (
	// maxOneSided bounds the engine transfers one-sided operations keep
	// at once, all operations of a session together (the engine has 256
	// slots, which Sends share).
	maxOneSided = 64
	// maxStagePiece bounds the piece of a staged pair that is one
	// transfer; a quarter of the staging buffer at most.
	maxStagePiece = 16 * units.MiB
)

// Op is one Read or Write in progress (ReadAsync, WriteAsync). Its methods
// are safe for concurrent use.
type Op struct {
	// Size is the bytes the operation moves, all pairs together.
	Size units.Bytes

	ss      *sendSide
	write   bool
	ctx     context.Context
	pieces  []*piece
	results chan *piece

	acked    atomic.Int64
	mu       sync.Mutex
	paths    []units.Bytes
	requeues int
	staged   units.Bytes
	started  time.Time
	took     time.Duration
	err      error
	done     chan struct{}
}

// OpStats describe a finished (or running) Read or Write.
type OpStats struct {
	Bytes     units.Bytes   // the operation's size
	Done      units.Bytes   // bytes of completed chunks so far
	Pairs     int           // pairs asked for
	Transfers int           // engine transfers they became (pieces of staged pairs, adjacent pairs merged)
	PathBytes []units.Bytes // bytes each path moved (retries included)
	Requeues  int           // chunk attempts moved off a failed or stalled path
	Staged    units.Bytes   // bytes copied through the staging buffer (the rest moved where they lie)
	Started   time.Time
	Duration  time.Duration // the call to the end of the last transfer
}

// Done is closed when the operation has ended; Err then says how.
func (o *Op) Done() <-chan struct{} { return o.done }

// Err returns nil while the operation runs or when it succeeded, else why
// it failed (the first pair that failed; errors.Is(err, ErrRemoteAccess)
// when the peer refused it).
func (o *Op) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Wait blocks until the operation ends and returns Err; if ctx ends first
// it returns ctx's error and the operation goes on (cancel it through the
// context given to ReadAsync or WriteAsync).
func (o *Op) Wait(ctx context.Context) error {
	select {
	case <-o.done:
		return o.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Progress returns the bytes of completed chunks so far and the size.
func (o *Op) Progress() (done, total units.Bytes) {
	return units.Bytes(o.acked.Load()), o.Size
}

// Stats returns the operation's statistics.
func (o *Op) Stats() OpStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	pairs := 0
	for _, p := range o.pieces {
		pairs = max(pairs, p.pair+p.pairs)
	}
	return OpStats{Bytes: o.Size, Done: units.Bytes(o.acked.Load()), Pairs: pairs, Transfers: len(o.pieces),
		PathBytes: append([]units.Bytes(nil), o.paths...), Requeues: o.requeues, Staged: o.staged, Started: o.started, Duration: o.took}
}

// piece is one engine transfer of an Op: one or more adjacent pairs read
// or written in place, or a piece of a staged pair. The op goroutine owns
// it, except while it is in the loop's hands (submitted, not reported).
type piece struct {
	op     *Op
	id     multipath.TransferID
	pair   int // index of the first pair it covers
	pairs  int // how many
	local  units.Bytes
	remote uint64
	key    uint32
	keys   []uint32 // per path (Descriptor.PathKeys), nil: key on every path
	size   units.Bytes
	user   []byte  // not in the pool: the caller's bytes, registered (region) or staged
	region uint32  // the send region user is registered as (qp.SendRegions), 0: staged
	buf    *Buffer // in place: the pinned pool Buffer
	err    error
}

// Read pulls every pair's remote range into its local memory and returns
// when all have landed, or the first failure once nothing of the
// operation can land any more. ctx cancels it. See ReadAsync.
func (s *Session) Read(ctx context.Context, pairs []Pair) error {
	op, err := s.ReadAsync(ctx, pairs)
	if err != nil {
		return err
	}
	<-op.done
	return op.Err()
}

// ReadAsync starts pulling every pair's remote range (RDMA READ; the peer
// exposed it with AccessRead) into its local memory and returns the Op at
// once. The pairs are spread over the session's paths like the chunks of
// a Send. The local memory must not be used until the Op is done: when it
// is, done or failed, nothing of the operation lands any more (the
// engine fences abandoned attempts as for Sends), so the memory may be
// reused at once; after a failure its contents are unspecified. ctx
// cancels the operation (Err then wraps ctx's cause).
//
// One-sided access runs from the dialing end on memory the accepting end
// exposed (Region.Expose), on a transport with one-sided access. There is
// no checksum: the bytes are the peer's memory as it was when read.
func (s *Session) ReadAsync(ctx context.Context, pairs []Pair) (*Op, error) {
	return s.oneSided(ctx, pairs, false)
}

// Write pushes every pair's local bytes into its remote range and returns
// when all have landed there; see WriteAsync.
func (s *Session) Write(ctx context.Context, pairs []Pair) error {
	op, err := s.WriteAsync(ctx, pairs)
	if err != nil {
		return err
	}
	<-op.done
	return op.Err()
}

// WriteAsync starts pushing every pair's local bytes into its remote range
// (RDMA WRITE; the peer exposed it with AccessWrite), one-sided: the peer's
// application sees no tensor and no completion. When the Op is done the
// bytes are in the peer's memory (each WRITE's completion is its
// acknowledgement) and no abandoned attempt can land there later; the local
// bytes must not change until then. See ReadAsync.
func (s *Session) WriteAsync(ctx context.Context, pairs []Pair) (*Op, error) {
	return s.oneSided(ctx, pairs, true)
}

func (s *Session) oneSided(ctx context.Context, pairs []Pair, write bool) (*Op, error) {
	what, need := "Read", AccessRead
	if write {
		what, need = "Write", AccessWrite
	}
	ss := s.snd
	if ss == nil {
		return nil, fmt.Errorf("mptx: %s on the accepting end of a session (one-sided access runs from the dialing end, on memory the accepting end exposed)", what)
	}
	if !ss.conn.Caps().Read {
		return nil, fmt.Errorf("mptx: %s: the session's transport (%s) has no one-sided access", what, s.tr)
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("mptx: %s of no pairs (valid: at least 1)", what)
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	op := &Op{ss: ss, write: write, ctx: ctx, started: time.Now(), done: make(chan struct{}), paths: make([]units.Bytes, len(ss.conn.Paths()))}
	unpin := func() {
		for _, p := range op.pieces {
			p.buf.unpin()
		}
	}
	step := max(1, min(maxStagePiece, units.Bytes(len(ss.send))/4))
	for i, p := range pairs {
		d := p.Remote
		if err := d.check(); err != nil {
			unpin()
			return nil, fmt.Errorf("mptx: %s pair %d: %w", what, i, err)
		}
		if d.Access&need == 0 {
			unpin()
			return nil, fmt.Errorf("mptx: %s pair %d: %v lacks the right (%v)", what, i, d, need)
		}
		if units.Bytes(len(p.Local)) != d.Len {
			unpin()
			return nil, fmt.Errorf("mptx: %s pair %d: %d local bytes for a %v remote range (valid: equal lengths)", what, i, len(p.Local), d.Len)
		}
		if s.os.isRevoked(d) {
			unpin()
			return nil, fmt.Errorf("mptx: %s pair %d: %v: the peer revoked it: %w", what, i, d, ErrRemoteAccess)
		}
		op.Size += d.Len
		if buf, off := ss.pool.pinWithin(p.Local); buf != nil {
			if n := len(op.pieces); n > 0 {
				q := op.pieces[n-1]
				if q.buf == buf && q.local+q.size == off && q.key == d.Key && q.remote+uint64(q.size) == d.Addr && samePathKeys(q.keys, d.PathKeys) {
					q.size += d.Len // adjacent on both ends: one transfer
					q.pairs++
					buf.unpin()
					continue
				}
			}
			op.pieces = append(op.pieces, &piece{op: op, pair: i, pairs: 1, local: off, remote: d.Addr, key: d.Key, keys: d.PathKeys, size: d.Len, buf: buf})
			continue
		}
		if len(ss.send) == 0 {
			unpin()
			return nil, fmt.Errorf("mptx: %s pair %d: local memory outside the pool and no staging buffer (Config.SendBuffer)", what, i)
		}
		for off := units.Bytes(0); off < d.Len; off += step {
			n := min(step, d.Len-off)
			op.pieces = append(op.pieces, &piece{op: op, pair: i, pairs: 1, remote: d.Addr + uint64(off), key: d.Key, keys: d.PathKeys, size: n, user: p.Local[off : off+n]})
		}
	}
	op.results = make(chan *piece, len(op.pieces))
	// The staging buffer is the session's (registered) send memory: keep
	// it while this operation may copy into or out of it.
	if !ss.hold.acquire() {
		unpin()
		return nil, ErrSessionClosed
	}
	go op.run()
	return op, nil
}

// run feeds the operation's pieces to the loop, at most maxOneSided of
// the session's in flight, staging them when they need it, and collects
// them as they end. It returns when every piece it fed has been
// reported: then nothing of the operation can land any more.
func (o *Op) run() {
	ss := o.ss
	sem := ss.os.semaphore()
	sr := ss.snd.sr // registers the caller's memory where that costs nothing
	next, inflight := 0, 0
	var failed error
	fail := func(err error) {
		if failed != nil {
			return
		}
		failed = err
		ss.do(func() { ss.osCancel(o, err) })
	}
	// starved is set when the staging buffer has no room for the next
	// piece while pieces of this operation are in flight: their ends
	// give room back, so wait for one (this goroutine is the one that
	// releases them) rather than block in reserve.
	starved := false
	for next < len(o.pieces) && failed == nil || inflight > 0 {
		var feed chan struct{}
		var ctxDone <-chan struct{}
		if failed == nil {
			ctxDone = o.ctx.Done()
			if next < len(o.pieces) && !starved {
				feed = sem
			}
		}
		select {
		case feed <- struct{}{}:
			p := o.pieces[next]
			if p.user != nil && sr != nil {
				if id, err := sr.AddSendRegion(p.user); err == nil {
					p.region, p.local = id, 0
				}
			}
			if p.user != nil && p.region == 0 {
				off, ok := ss.tryReserve(p.size)
				if !ok && inflight > 0 {
					<-sem
					starved = true
					continue
				}
				if !ok {
					var err error
					if off, err = ss.reserve(o.ctx, p.size); err != nil {
						<-sem
						fail(o.cause(err))
						continue
					}
				}
				p.local = off
				if o.write {
					copy(ss.send[off:off+p.size], p.user)
				}
				o.mu.Lock()
				o.staged += p.size
				o.mu.Unlock()
			}
			next++
			inflight++
			if !ss.do(func() { ss.osSubmit(p) }) {
				inflight--
				o.release(p, sem)
				fail(ss.s.closedErr())
			}
		case p := <-o.results:
			inflight--
			starved = false
			if p.err == nil && p.user != nil && p.region == 0 && !o.write {
				copy(p.user, ss.send[p.local:p.local+p.size])
			}
			o.release(p, sem)
			if p.err != nil {
				fail(p.err)
			}
		case <-ctxDone:
			fail(o.cause(context.Cause(o.ctx)))
		}
	}
	for _, p := range o.pieces[next:] {
		p.buf.unpin() // never fed
	}
	ss.hold.drop()
	o.mu.Lock()
	o.err = failed
	o.took = time.Since(o.started)
	o.mu.Unlock()
	close(o.done)
}

// samePathKeys reports whether two pieces' path keys are the same.
func samePathKeys(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// tryReserve takes size bytes of the staging buffer if it has them now.
func (ss *sendSide) tryReserve(size units.Bytes) (units.Bytes, bool) {
	ss.stageMu.Lock()
	defer ss.stageMu.Unlock()
	return ss.stage.alloc(size)
}

// release gives a reported piece's registration or staging range, pin
// and slot back.
func (o *Op) release(p *piece, sem chan struct{}) {
	switch {
	case p.region != 0:
		_ = o.ss.snd.sr.RemoveSendRegion(p.region) // nothing of it is outstanding: the piece was reported
		p.region = 0
	case p.user != nil:
		o.ss.release(p.local, p.size)
	}
	p.buf.unpin()
	<-sem
}

// cause words a failure of the operation.
func (o *Op) cause(err error) error {
	what := "Read"
	if o.write {
		what = "Write"
	}
	if o.ctx.Err() != nil && (errors.Is(err, multipath.ErrCanceled) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return fmt.Errorf("mptx: %s canceled: %w", what, context.Cause(o.ctx))
	}
	return err
}

// osLoop is the sending loop's one-sided state (loop goroutine only,
// except sem). The zero value is ready.
type osLoop struct {
	live    map[multipath.TransferID]*piece
	wait    []*piece // refused by the engine for lack of slots; retried as transfers end
	semOnce sync.Once
	sem     chan struct{}
}

func (l *osLoop) semaphore() chan struct{} {
	l.semOnce.Do(func() { l.sem = make(chan struct{}, maxOneSided) })
	return l.sem
}

// osSubmit hands piece p to the engine (loop goroutine).
func (ss *sendSide) osSubmit(p *piece) {
	if err := ss.s.Err(); err != nil {
		ss.osReport(p, err)
		return
	}
	if p.op.ctx.Err() != nil {
		ss.osReport(p, p.op.cause(context.Cause(p.op.ctx)))
		return
	}
	if len(ss.os.wait) > 0 || ss.osStart(p) {
		ss.os.wait = append(ss.os.wait, p) // in order behind the waiting ones
	}
}

// osStart submits p; it reports full, without doing anything, when the
// engine has no slot free.
func (ss *sendSide) osStart(p *piece) (full bool) {
	op := qp.OpRead
	if p.op.write {
		op = qp.OpWrite
	}
	p.id = multipath.TransferID(ss.nextID.Add(1))
	spec := multipath.TransferSpec{ID: p.id, Size: p.size, Local: p.local, Remote: units.Bytes(p.remote)}
	if _, _, err := ss.snd.SubmitOneSided(ss.clock.Now(), spec, OneSided{Op: op, RKey: p.key, PathKeys: p.keys, Region: p.region}); err != nil {
		if errors.Is(err, multipath.ErrTooManyTransfers) {
			return true
		}
		ss.osReport(p, p.op.pairErr(p, err))
		return false
	}
	if ss.os.live == nil {
		ss.os.live = map[multipath.TransferID]*piece{}
	}
	ss.os.live[p.id] = p
	return false
}

// pairErr words piece p's failure.
func (o *Op) pairErr(p *piece, err error) error {
	what := "Read"
	if o.write {
		what = "Write"
	}
	if err = o.cause(err); errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("mptx: %s pair %d (key %#x [%#x, +%v)): %w", what, p.pair, p.key, p.remote, p.size, err)
}

// osReport hands a piece back to its operation (loop goroutine, or exit).
// The results channel holds every piece of the operation: it never
// blocks.
func (ss *sendSide) osReport(p *piece, err error) {
	p.err = err
	p.op.results <- p
}

// osRetry submits the waiting pieces while the engine has slots.
func (ss *sendSide) osRetry() {
	for len(ss.os.wait) > 0 {
		p := ss.os.wait[0]
		if p.op.ctx.Err() != nil {
			ss.osReport(p, p.op.cause(context.Cause(p.op.ctx)))
		} else if ss.osStart(p) {
			return // still full
		}
		ss.os.wait[0] = nil
		ss.os.wait = ss.os.wait[1:]
	}
}

// osCancel cancels every piece of op in the loop's hands (loop goroutine).
func (ss *sendSide) osCancel(op *Op, err error) {
	now := ss.clock.Now()
	for _, p := range ss.os.live {
		if p.op == op {
			_ = ss.snd.Cancel(now, p.id, err) // reported through onEngineDone
		}
	}
	kept := ss.os.wait[:0]
	for _, p := range ss.os.wait {
		if p.op == op {
			ss.osReport(p, err)
		} else {
			kept = append(kept, p)
		}
	}
	clear(ss.os.wait[len(kept):])
	ss.os.wait = kept
}

// onEngineDone is the Sender's OnDone (loop goroutine): one-sided pieces
// go back to their operation, everything else to the Send machinery; a
// transfer's end frees an engine slot for the pieces waiting for one.
func (ss *sendSide) onEngineDone(id multipath.TransferID, now vtime.Time, err error) {
	if p := ss.os.live[id]; p != nil {
		delete(ss.os.live, id)
		if err != nil {
			err = ss.s.closedCause(p.op.pairErr(p, err))
		}
		ss.osReport(p, err)
	} else {
		ss.onDone(id, now, err)
	}
	ss.osRetry()
}

// osRecord feeds the engine's chunk events to the operations' statistics
// (loop goroutine); it reports whether ev was a one-sided transfer's.
func (ss *sendSide) osRecord(ev *multipath.Event) bool {
	p := ss.os.live[ev.Transfer]
	if p == nil {
		return false
	}
	switch ev.Kind {
	case multipath.EvChunkDone:
		o := p.op
		o.mu.Lock()
		if ev.Path < len(o.paths) {
			o.paths[ev.Path] += ev.Bytes
		}
		o.mu.Unlock()
		o.acked.Add(int64(ev.Bytes))
	case multipath.EvChunkRequeue:
		p.op.mu.Lock()
		p.op.requeues++
		p.op.mu.Unlock()
	}
	return true
}

// osExit reports every piece still in the loop's hands failed with err
// (the loop has exited and closed the connection: nothing of them can
// land any more).
func (ss *sendSide) osExit(err error) {
	for id, p := range ss.os.live {
		delete(ss.os.live, id)
		ss.osReport(p, err)
	}
	for _, p := range ss.os.wait {
		ss.osReport(p, err)
	}
	ss.os.wait = nil
}

// pinWithin returns the live Buffer of the pool that holds all of data,
// pinned, and data's offset in the send region; nil if data does not lie
// within one Buffer (or the pool is nil). A slice starting where a Buffer
// does is found at once; others by a scan of the live Buffers.
func (sp *sendPool) pinWithin(data []byte) (*Buffer, units.Bytes) {
	if sp == nil || len(data) == 0 {
		return nil, 0
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	if p < sp.base || p-sp.base >= uintptr(len(sp.mem)) {
		return nil, 0
	}
	off := units.Bytes(p - sp.base)
	n := units.Bytes(len(data))
	sp.mu.Lock()
	defer sp.mu.Unlock()
	b := sp.live[off]
	if b == nil {
		for start, c := range sp.live {
			if start <= off && off < start+units.Bytes(len(c.mem)) {
				b = c
				break
			}
		}
	}
	if b == nil || b.freed || off+n > b.blk.Off+units.Bytes(len(b.mem)) {
		return nil, 0
	}
	b.pins++
	return b, sp.start + off
}
