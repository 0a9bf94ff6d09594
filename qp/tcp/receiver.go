package tcp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/internal/cqring"
	"github.com/mptx-dev/mptx/units"
)

const (
	// recvBuffer is the size of each path's read buffer: payloads at
	// least this long are read straight into the region.
	recvBuffer = 16 << 10
	// ackEvery is the most frames applied before an ACK is sent even if
	// more are already buffered.
	ackEvery = 64
	// maxHeld is the most receive completions one path holds back while
	// the receive queue is full (see Receiver, Back-pressure): the largest
	// DialConfig.MaxSendWR, so that a sender that waits for its ACKs, as
	// Conn does, never meets TCP flow control.
	maxHeld = 1 << 16
	// sumPiece is how much of a payload the reader reads before it
	// checksums what it read (ListenConfig.Checksum), and the writer
	// writes before it checksums what it wrote: small enough that the
	// bytes the kernel just copied are still in a core's L2 cache when
	// the CRC32C reads them, large enough that the extra system calls
	// stay cheap. With internal/crc32c's folding CRC, 1 MiB pieces cost
	// 26% less CPU per byte than 256 KiB ones over loopback (the CRC is
	// about 10% of the CPU either way, the calls the rest; 512 KiB and
	// 2 MiB measured no better: BenchmarkTCPLoopback/paired).
	sumPiece = 1 << 20
	// sumTail is how much of a payload's end the sender's writer
	// checksums before writing it (DialConfig.Checksum; see writeSummed).
	sumTail = 64 << 10
)

// Receiver is the receiving side of a connection: it owns the receive
// region and applies the frames of every path to it. It implements
// qp.Receiver and Notifier.
//
// Poll must be called from one goroutine at a time; Notify, ClosePath,
// PausePath, ResumePath, PathBytes, RemoteAddr, Paths and ID are safe for
// concurrent use. The zero value is not usable; get one from
// Listener.Accept.
//
// The sender's Conn.Reset fences a path and brings it back (a path that
// broke, or one the sender abandoned): the Listener that accepted the
// Receiver authenticates the rejoin and hands the new connection to the
// path, which stops applying the old connection's frames, drops it, and
// expects sequence number 1 again (see Rejoin in the package doc).
//
// # Back-pressure
//
// A driver that stops polling must stall the sender without breaking its
// paths, as an RC responder without receive buffers does with RNR NAKs
// (the sender retries, its work requests stay outstanding, and with
// rnr_retry 7 it waits for ever). The receive queue holds
// ListenConfig.RecvQueue completions. A WRITE WITH IMM that finds it full
// is still read and applied to the region, so the TCP connection keeps
// flowing and the sender's TCP_USER_TIMEOUT never fires; but its
// completion is held back on its path, and the path acknowledges only the
// frames before the first held one. The sender's work requests therefore
// stay outstanding, its send queue fills and PostSend reports
// qp.ErrQueueFull: the sender stalls. Poll moves held completions into
// the room it frees, oldest first, and the path then acknowledges them. A
// path holds at most maxHeld (65536, the largest DialConfig.MaxSendWR)
// completions, which a sender that waits for its ACKs never exceeds; past
// that (a sender that ignores them) the reader stops reading and TCP flow
// control pushes back instead. Held completions of a connection that ends
// are dropped, as an RC responder drops RNR-NAKed requests: their work
// requests failed at the sender, which sends them again.
type Receiver struct {
	id       ConnID
	ln       *Listener // where rejoins arrive; nil never (set by Accept)
	region   []byte
	infos    []qp.PathInfo
	paths    []*recvPath
	notify   chan struct{}
	done     chan struct{}
	wg       sync.WaitGroup
	avail    atomic.Int64 // completions in cq, read without the lock by Poll
	isClosed atomic.Bool
	sum      bool // ListenConfig.Checksum

	mu      sync.Mutex
	space   sync.Cond   // signalled when Poll frees room in cq; L is &mu
	waiters int         // readers waiting on space; guarded by mu
	closed  bool        // guarded by mu
	cq      cqring.Ring // guarded by mu
	held    int         // completions held back on every path; guarded by mu
	next    int         // the path Poll refills from first; guarded by mu

	// The ranges exposed to the sender (qp.Exposer, expose.go), by key.
	// The readers copy from and into them under the read lock, a piece at
	// a time; RevokeKey takes the write lock, so once it returns no copy
	// of the range is in progress or can start.
	expMu sync.RWMutex
	exps  map[uint32]*exposure

	// regionLock serialises the paths' writes into the region, in race
	// builds only. Two paths may write the same bytes concurrently (a
	// chunk requeued to another path while its first attempt still lands,
	// as RDMA allows); the bytes are identical, but the race detector
	// cannot know that. Normal builds do not lock, so paths copy in
	// parallel.
	regionLock sync.Mutex
}

var (
	_ qp.Receiver = (*Receiver)(nil)
	_ qp.Exposer  = (*Receiver)(nil)
	_ Notifier    = (*Receiver)(nil)
)

// recvPath is one path of a Receiver.
//
// Its reader applies the frames of its current connection until the
// connection fails, the peer breaks the protocol, or a rejoin fences it;
// after a NAK it discards until the sender half-closes. A rejoin (the
// sender's Conn.Reset) fences and closes the current connection, waits
// for its reader to return and starts a new one on the rejoined
// connection.
type recvPath struct {
	r   *Receiver
	idx int
	qpn uint32

	// Guarded by r.mu.
	conn    *net.TCPConn  // the current connection
	exited  chan struct{} // closed when the current reader has returned
	rejoin  chan struct{} // the rejoin in progress, closed when a newer one supersedes it; nil if none
	closing bool          // the current connection is being replaced: its reader must not wait
	// The current connection's held-back completions (see Receiver,
	// Back-pressure), oldest first from held[heldHead]; a NAK that waits
	// for them to drain.
	held       []heldImm
	heldHead   int
	nakPending bool
	nakSeq     uint32

	// pausedConn, if set, is a connection whose reader PausePath holds
	// before its next frame; guarded by r.mu. paused says whether it is
	// set, for the reader's lock-free check.
	pausedConn *net.TCPConn
	paused     atomic.Bool
	// fenced is set by a rejoin before it closes the old connection: the
	// old reader applies nothing more (not even frames already in its
	// read buffer). The rejoin clears it before the next reader starts.
	fenced atomic.Bool

	// Owned by the reader goroutine. A rejoin resets them between one
	// reader's exit and the next one's start.
	br      *bufio.Reader
	hdr     [hdrMax]byte
	expect  uint32
	scratch []byte // keyed frames' bytes on their way to or from an exposed range (respPiece)

	// Acknowledgements: the reader and, when Poll releases held
	// completions, the path's acker both write them, under wmu.
	wmu   sync.Mutex
	ack   [ackLen]byte  // guarded by wmu
	resp  [respLen]byte // guarded by wmu
	acked uint32        // the last sequence number acknowledged; guarded by wmu
	last  atomic.Uint32 // the last frame applied (its completion queued or held)
	kick  chan struct{} // wakes the acker: Poll released held completions

	applied atomic.Int64 // payload bytes applied, over every connection; read by PathBytes
}

// heldImm is a receive completion held back while the queue is full: the
// frame's sequence number (the path acknowledges only frames before it),
// immediate and length.
type heldImm struct {
	seq, imm, length uint32
	sum              uint32 // the payload's CRC32C, if summed
	summed           bool
	remote           uint64 // where the payload landed
}

// heldLen returns how many completions p holds back. Called with r.mu held.
func (p *recvPath) heldLen() int { return len(p.held) - p.heldHead }

func newRecvPath(r *Receiver, idx int, conn *net.TCPConn, qpn uint32) *recvPath {
	return &recvPath{
		r: r, idx: idx, qpn: qpn, conn: conn, exited: make(chan struct{}),
		br: bufio.NewReaderSize(conn, recvBuffer), expect: 1, kick: make(chan struct{}, 1),
	}
}

// ID returns the connection id the handshake used.
func (r *Receiver) ID() ConnID { return r.id }

// Paths describes the receiver's end of each path as accepted: its QPN,
// the sender's source port, the kernel's RTT estimate and the MSS. A rejoin
// keeps the QPN and does not change the slice (RemoteAddr reports the
// current connection).
func (r *Receiver) Paths() []qp.PathInfo { return r.infos }

// Region implements qp.Receiver: the receive region Accept was given.
// Frames are applied to it by the path goroutines; read a range only after
// the WRITE WITH IMM that ends it has been polled, or after Close.
func (r *Receiver) Region() []byte { return r.region }

// Notify implements Notifier: the channel receives a value when receive
// completions may be ready.
func (r *Receiver) Notify() <-chan struct{} { return r.notify }

// PathBytes returns the payload bytes applied to the region from path i.
func (r *Receiver) PathBytes(i int) units.Bytes { return units.Bytes(r.paths[i].applied.Load()) }

// RemoteAddr returns the sender's address of path i's current connection.
func (r *Receiver) RemoteAddr(i int) net.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.paths[i].conn.RemoteAddr()
}

// ClosePath closes path i's connection, as pulling its cable would: the
// sender sees the connection break and fails the path's outstanding work
// requests, until it brings the path back with Conn.Reset. Frames already
// applied stay applied. For tests and failure injection.
func (r *Receiver) ClosePath(i int) error {
	if i < 0 || i >= len(r.paths) {
		return fmt.Errorf("tcp: ClosePath: path %d out of range [0, %d)", i, len(r.paths))
	}
	r.mu.Lock()
	conn := r.paths[i].conn
	r.paths[i].closing = true
	r.space.Broadcast()
	r.mu.Unlock()
	err := conn.Close()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("tcp: ClosePath(%d): %w", i, err)
	}
	return nil
}

// Poll implements qp.Receiver. It never blocks and allocates nothing.
func (r *Receiver) Poll(dst []qp.Completion) (int, error) {
	if r.avail.Load() == 0 {
		if r.isClosed.Load() {
			return 0, qp.ErrClosed
		}
		return 0, nil
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return 0, qp.ErrClosed
	}
	k := r.cq.Pop(dst)
	r.avail.Add(-int64(k))
	moved := 0
	if k > 0 && r.held > 0 {
		moved = r.release()
	}
	if k > 0 && r.waiters > 0 {
		r.space.Broadcast()
	}
	r.mu.Unlock()
	if moved > 0 {
		r.wake()
	}
	return k, nil
}

// release moves held-back completions into the receive queue's free room,
// path by path from r.next, oldest first within a path, and wakes the
// acker of every path it released something from. It returns how many it
// moved. Called with r.mu held.
func (r *Receiver) release() int {
	moved := 0
	n := len(r.paths)
	for i := 0; i < n && !r.cq.Full() && r.held > 0; i++ {
		p := r.paths[(r.next+i)%n]
		k := 0
		for p.heldLen() > 0 && !r.cq.Full() {
			h := p.held[p.heldHead]
			p.heldHead++
			r.cq.Push(qp.Completion{Path: p.idx, QPN: p.qpn, Op: qp.OpRecvImm, Status: qp.StatusOK, Bytes: units.Bytes(h.length), Imm: h.imm, Sum: h.sum, HasSum: h.summed, SumAt: units.Bytes(h.remote)})
			k++
		}
		if k == 0 {
			continue
		}
		if p.heldLen() == 0 {
			p.held, p.heldHead = p.held[:0], 0
		} else {
			r.next = (r.next + i) % n // it filled the queue: it goes first next time
		}
		r.held -= k
		moved += k
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	r.avail.Add(int64(moved))
	return moved
}

func (r *Receiver) wake() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// Close implements qp.Receiver: it closes every path's connection and
// waits for the path goroutines to end; its paths can no longer rejoin. It
// is idempotent.
func (r *Receiver) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.isClosed.Store(true)
	close(r.done)
	r.space.Broadcast()
	for _, p := range r.paths {
		p.conn.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	r.ln.forget(r)
	return nil
}

// rejoin takes nc, an authenticated rejoin of path b.index, for the path,
// whatever the state of its current connection: the sender has abandoned
// that connection (Conn.Reset), and only the sender knows the secret and
// the connection id. It fences the old connection (its reader applies no
// frame from now on, not even one already in its read buffer), closes it,
// waits for the old reader to return, starts a reader on nc with sequence
// numbers from 1 and completes the handshake (step 4). So by the time the
// sender reads the verdict, nothing of the old connection can reach the
// region or the receive queue any more: this is what makes Conn.Reset a
// fence (qp.Resetter). It reports whether it took nc (then the path owns
// it); when it did not, it has written the refuse byte where the sender
// should learn why, and the caller closes nc. A newer rejoin of the same
// path supersedes one still in progress.
func (r *Receiver) rejoin(l *Listener, nc *net.TCPConn, b *binding) bool {
	p := r.paths[b.index]
	mine := make(chan struct{})
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		serverRefuse(nc)
		return false
	}
	if p.rejoin != nil {
		close(p.rejoin)
	}
	p.rejoin = mine
	old, exited := p.conn, p.exited
	p.fenced.Store(true)
	p.closing = true // a reader waiting for Poll (see deliver) or paused gives up
	r.space.Broadcast()
	r.mu.Unlock()
	release := func() {
		r.mu.Lock()
		if p.rejoin == mine {
			p.rejoin = nil
		}
		r.mu.Unlock()
	}
	// The old reader is reading (the close ends the read), discarding
	// after a NAK (likewise), waiting in deliver or paused (the broadcast
	// above ends the wait), writing an ACK (the close ends the write), or
	// has exited; nothing else can block it, so this wait is short.
	old.Close()
	select {
	case <-exited:
	case <-l.done:
		release()
		return false
	}
	_ = nc.SetNoDelay(true)
	if err := setUserTimeout(nc, l.cfg.RetryTimeout); err != nil {
		release()
		return false
	}
	// Install nc and start its reader before answering, so that the path
	// reads nc by the time the sender hears the verdict. The reader needs
	// no deadline; the verdict keeps the handshake's.
	_ = nc.SetReadDeadline(time.Time{})
	r.mu.Lock()
	if p.rejoin != mine || r.closed {
		if p.rejoin == mine {
			p.rejoin = nil
		}
		r.mu.Unlock()
		return false
	}
	p.rejoin = nil
	p.conn, p.closing = nc, false
	p.exited = make(chan struct{})
	p.fenced.Store(false)
	p.br.Reset(nc)
	p.expect = 1
	r.wg.Add(1)
	go p.readLoop(nc, p.exited)
	r.mu.Unlock()
	if err := serverAccept(nc, l.key, b, uint64(len(r.region)), p.qpn); err != nil {
		nc.Close() // the reader exits and the path is down again
		return true
	}
	_ = nc.SetWriteDeadline(time.Time{})
	return true
}

// PausePath stops applying the frames of path i's current connection, as
// a stalled link or a starved responder would: the connection stays up,
// the sender's frames wait in the socket buffers, and the sender's work
// requests stay outstanding (TCP flow control stalls its writer once the
// buffers are full). ResumePath lets the frames flow again; a rejoin
// (Conn.Reset) ends the pause by fencing the paused connection, and the
// new connection is not paused. For tests and failure injection.
func (r *Receiver) PausePath(i int) error {
	if i < 0 || i >= len(r.paths) {
		return fmt.Errorf("tcp: PausePath: path %d out of range [0, %d)", i, len(r.paths))
	}
	p := r.paths[i]
	r.mu.Lock()
	p.pausedConn = p.conn
	p.paused.Store(true)
	r.mu.Unlock()
	return nil
}

// ResumePath ends a PausePath of path i (if its connection is still the
// path's, the reader goes on with the frames waiting for it).
func (r *Receiver) ResumePath(i int) error {
	if i < 0 || i >= len(r.paths) {
		return fmt.Errorf("tcp: ResumePath: path %d out of range [0, %d)", i, len(r.paths))
	}
	p := r.paths[i]
	r.mu.Lock()
	p.pausedConn = nil
	p.paused.Store(false)
	r.space.Broadcast()
	r.mu.Unlock()
	return nil
}

// waitPaused holds p's reader on conn while PausePath holds conn. It
// reports false if the Receiver was closed or conn is being replaced.
func (r *Receiver) waitPaused(p *recvPath, conn *net.TCPConn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p.pausedConn == conn && !r.closed && !p.closing {
		r.space.Wait()
	}
	return !r.closed && !p.closing
}

// deliver queues the receive completion of frame seq of p, or holds it
// back when the queue is full or p already holds completions back (see
// Receiver, Back-pressure). Past maxHeld held completions it waits for
// Poll. The completion carries sum, the payload's CRC32C, and remote,
// where it landed, if summed. It
// reports false if the Receiver was closed or p's connection is being
// replaced.
func (r *Receiver) deliver(p *recvPath, seq, imm, length, sum uint32, summed bool, remote uint64) bool {
	r.mu.Lock()
	for p.heldLen() >= maxHeld && !r.closed && !p.closing {
		r.waiters++
		r.space.Wait()
		r.waiters--
	}
	if r.closed || p.closing {
		r.mu.Unlock()
		return false
	}
	if p.heldLen() > 0 || r.cq.Full() {
		if p.heldHead > 0 && len(p.held) == cap(p.held) {
			// Slide the live entries down rather than grow.
			p.held = p.held[:copy(p.held, p.held[p.heldHead:])]
			p.heldHead = 0
		}
		p.held = append(p.held, heldImm{seq: seq, imm: imm, length: length, sum: sum, summed: summed, remote: remote})
		r.held++
		r.mu.Unlock()
		return true
	}
	r.cq.Push(qp.Completion{Path: p.idx, QPN: p.qpn, Op: qp.OpRecvImm, Status: qp.StatusOK, Bytes: units.Bytes(length), Imm: imm, Sum: sum, HasSum: summed, SumAt: units.Bytes(remote)})
	r.avail.Add(1)
	r.mu.Unlock()
	r.wake()
	return true
}

// flushAck writes what p owes the sender on conn: an ACK of every frame up
// to the last one applied, or, while completions are held back, up to the
// one before the first held; then, once nothing is held back, a pending
// NAK (which acknowledges every frame before it). The reader calls it at
// its acknowledgement points, the acker when Poll released completions.
func (p *recvPath) flushAck(conn *net.TCPConn) error {
	r := p.r
	p.wmu.Lock()
	defer p.wmu.Unlock()
	target := p.last.Load()
	r.mu.Lock()
	held := p.heldLen() > 0
	if held {
		target = p.held[p.heldHead].seq - 1
	}
	nak, nakSeq := p.nakPending && !held, p.nakSeq
	if nak {
		p.nakPending = false
	}
	r.mu.Unlock()
	if nak {
		putAck(&p.ack, typeNAK, synRemoteAccess, nakSeq)
		raceSend()
		if _, err := conn.Write(p.ack[:]); err != nil {
			return err
		}
		p.acked = nakSeq - 1
		return nil
	}
	if target == p.acked {
		return nil
	}
	putAck(&p.ack, typeACK, 0, target)
	raceSend()
	if _, err := conn.Write(p.ack[:]); err != nil {
		return err
	}
	p.acked = target
	return nil
}

// ackLoop is the path's acker on conn: it acknowledges the frames whose
// completions Poll released (the reader may be blocked reading a sender
// that waits for exactly those ACKs). It returns when stop is closed, or
// after closing conn when a write fails.
func (p *recvPath) ackLoop(conn *net.TCPConn, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-p.kick:
			if err := p.flushAck(conn); err != nil {
				conn.Close()
				return
			}
		case <-stop:
			return
		}
	}
}

// nextFrameBuffered reports whether the next frame, header and payload, is
// already in the read buffer.
func (p *recvPath) nextFrameBuffered() bool {
	n := p.br.Buffered()
	if n < hdrLen {
		return false
	}
	h, err := p.br.Peek(hdrLen)
	if err != nil {
		return false
	}
	hl, pay := hdrLen, int(binary.BigEndian.Uint32(h[16:]))
	if keyed(h[0]) {
		hl = hdrMax
	}
	if h[0] == opRead {
		pay = 0
	}
	return n-hl >= pay
}

// readLoop applies the path's frames from conn until the connection ends or
// the peer breaks the protocol; then it closes the connection (the sender
// sees the path fail), drops the completions the path held back, marks
// the path down and closes exited.
func (p *recvPath) readLoop(conn *net.TCPConn, exited chan struct{}) {
	r := p.r
	defer r.wg.Done()
	defer close(exited)
	p.wmu.Lock()
	p.acked = 0
	p.wmu.Unlock()
	p.last.Store(0)
	select { // a kick meant for the previous connection
	case <-p.kick:
	default:
	}
	stop, ackerDone := make(chan struct{}), make(chan struct{})
	go p.ackLoop(conn, stop, ackerDone)
	defer func() {
		conn.Close()
		close(stop)
		<-ackerDone
		r.mu.Lock()
		r.held -= p.heldLen()
		p.held, p.heldHead = p.held[:0], 0
		p.nakPending = false
		r.mu.Unlock()
	}()
	unacked := 0
	errored := false
	size := uint64(len(r.region))
	for {
		if p.paused.Load() && !r.waitPaused(p, conn) {
			return
		}
		if _, err := io.ReadFull(p.br, p.hdr[:hdrLen]); err != nil {
			return
		}
		if keyed(p.hdr[0]) {
			if _, err := io.ReadFull(p.br, p.hdr[hdrLen:]); err != nil {
				return
			}
		}
		if p.fenced.Load() {
			return
		}
		raceRecv()
		h := parseHeader(p.hdr[:])
		if !validOp(h.op) || h.flags != 0 || h.seq != p.expect || units.Bytes(h.length) > MaxMessageBytes || (h.op == opRead && h.length == 0) {
			return
		}
		if keyed(h.op) {
			h.key = binary.BigEndian.Uint32(p.hdr[hdrLen:])
		}
		p.expect++
		if errored {
			// After a NAK the path is in the error state: discard
			// until the sender half-closes.
			if _, err := p.br.Discard(int(h.payload())); err != nil {
				return
			}
			continue
		}
		refused, consumed := false, false
		// A WRITE WITH IMM into the region is checksummed as it lands
		// (ListenConfig.Checksum); keyed frames are not.
		sum, summed := uint32(0), r.sum && h.op == opWriteImm
		if keyed(h.op) {
			var err error
			if refused, consumed, err = p.keyed(conn, &h); err != nil {
				return
			}
		} else {
			refused = h.remote > size || uint64(h.length) > size-h.remote
		}
		if refused {
			if !consumed {
				if _, err := p.br.Discard(int(h.payload())); err != nil {
					return
				}
			}
			// The NAK acknowledges every earlier frame, so it waits
			// until their completions are queued.
			r.mu.Lock()
			p.nakPending, p.nakSeq = true, h.seq
			r.mu.Unlock()
			errored = true
			if err := p.flushAck(conn); err != nil {
				return
			}
			continue
		}
		if keyed(h.op) { // done by p.keyed: the response sent, the bytes applied
		} else if h.length > 0 {
			if raceEnabled {
				r.regionLock.Lock()
			}
			dst := r.region[h.remote : h.remote+uint64(h.length)]
			var err error
			if summed {
				sum, err = p.readSummed(dst)
			} else {
				_, err = io.ReadFull(p.br, dst)
			}
			if raceEnabled {
				r.regionLock.Unlock()
			}
			if err != nil {
				return
			}
			p.applied.Add(int64(h.length))
		}
		if h.op == opWriteImm || h.op == opWriteImmKey {
			if !r.deliver(p, h.seq, h.imm, h.length, sum, summed, h.remote) {
				return
			}
		}
		p.last.Store(h.seq)
		unacked++
		if unacked >= ackEvery || !p.nextFrameBuffered() {
			if err := p.flushAck(conn); err != nil {
				return
			}
			unacked = 0
		}
	}
}
