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
)

// Receiver is the receiving side of a connection: it owns the receive
// region and applies the frames of every path to it. It implements
// qp.Receiver and Notifier.
//
// Poll must be called from one goroutine at a time; Notify, ClosePath,
// PathBytes, RemoteAddr, Paths and ID are safe for concurrent use. The zero
// value is not usable; get one from Listener.Accept.
//
// A path that broke (its connection failed, or it NAKed a write) can be
// brought back by the sender's Conn.Reset: the Listener that accepted the
// Receiver authenticates the rejoin and hands the new connection to the
// path, which drops the old one and expects sequence number 1 again.
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

	mu      sync.Mutex
	space   sync.Cond   // signalled when Poll frees room in cq; L is &mu
	waiters int         // readers waiting on space; guarded by mu
	closed  bool        // guarded by mu
	cq      cqring.Ring // guarded by mu

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
	_ Notifier    = (*Receiver)(nil)
)

// recvPath is one path of a Receiver.
//
// A path is up while its reader applies frames. It goes down when its
// reader exits (the connection failed, or the peer broke the protocol) or
// answers a NAK (then the reader discards until the sender half-closes).
// Only a path that is down takes a rejoin; the rejoin closes the old
// connection, waits for the old reader to exit and starts a new one.
type recvPath struct {
	r   *Receiver
	idx int
	qpn uint32

	// Guarded by r.mu.
	conn   *net.TCPConn  // the current connection
	up     bool          // see above
	down   chan struct{} // closed when up turns false
	exited chan struct{} // closed when the current reader has returned
	rejoin chan struct{} // the rejoin in progress, closed when a newer one supersedes it; nil if none

	// Owned by the reader goroutine. A rejoin resets them between one
	// reader's exit and the next one's start.
	br     *bufio.Reader
	hdr    [hdrLen]byte
	ack    [ackLen]byte
	expect uint32

	applied atomic.Int64 // payload bytes applied, over every connection; read by PathBytes
}

func newRecvPath(r *Receiver, idx int, conn *net.TCPConn, qpn uint32) *recvPath {
	return &recvPath{
		r: r, idx: idx, qpn: qpn, conn: conn, up: true, down: make(chan struct{}), exited: make(chan struct{}),
		br: bufio.NewReaderSize(conn, recvBuffer), expect: 1,
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
	if k > 0 && r.waiters > 0 {
		r.space.Broadcast()
	}
	r.mu.Unlock()
	return k, nil
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

// markDown records that p's reader exited or answered a NAK.
func (r *Receiver) markDown(p *recvPath) {
	r.mu.Lock()
	if p.up {
		p.up = false
		close(p.down)
	}
	r.mu.Unlock()
}

// rejoinProbe is the keepalive a rejoin sets on a path's old connection
// that still looks up: an idle connection whose sender has gone answers
// its first probe with a reset, or none at all and then TCP_USER_TIMEOUT
// (or the probe count) ends it (tcp(7)).
var rejoinProbe = net.KeepAliveConfig{Enable: true, Idle: time.Second, Interval: time.Second, Count: 2}

// rejoin takes nc, an authenticated rejoin of path b.index, for the path:
// once the path is down (waiting for that until deadline if the old
// connection still looks healthy, as it does when the sender noticed the
// break first) it closes the old connection, waits for the old reader,
// starts a reader on nc with sequence numbers from 1 and completes the
// handshake (step 4). It reports whether it took nc (then the path owns
// it); when it did not, it has written the refuse byte where the sender
// should learn why, and the caller closes nc. A newer rejoin of the same
// path supersedes one still waiting.
func (r *Receiver) rejoin(l *Listener, nc *net.TCPConn, b *binding, deadline time.Time) bool {
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
	up, down, old := p.up, p.down, p.conn
	r.mu.Unlock()
	release := func() {
		r.mu.Lock()
		if p.rejoin == mine {
			p.rejoin = nil
		}
		r.mu.Unlock()
	}
	if up {
		_ = old.SetKeepAliveConfig(rejoinProbe)
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-down:
			t.Stop()
		case <-t.C:
			release()
			serverRefuse(nc)
			return false
		case <-mine:
			t.Stop()
			return false
		case <-r.done:
			t.Stop()
			serverRefuse(nc)
			return false
		case <-l.done:
			t.Stop()
			release()
			return false
		}
	}
	r.mu.Lock()
	if p.rejoin != mine || r.closed {
		r.mu.Unlock()
		release()
		return false
	}
	old, exited := p.conn, p.exited
	r.mu.Unlock()
	// The old reader has exited, or discards after a NAK until this
	// close ends its read; nothing else can block it.
	old.Close()
	<-exited
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
	p.conn, p.up = nc, true
	p.down, p.exited = make(chan struct{}), make(chan struct{})
	p.br.Reset(nc)
	p.expect = 1
	r.wg.Add(1)
	go p.readLoop(nc, p.exited)
	r.mu.Unlock()
	if err := serverAccept(nc, l.cfg.Secret, b, uint64(len(r.region)), p.qpn); err != nil {
		nc.Close() // the reader exits and the path is down again
		return true
	}
	_ = nc.SetWriteDeadline(time.Time{})
	return true
}

// deliver queues a receive completion, waiting for room while the queue is
// full. It reports false if the Receiver was closed.
func (r *Receiver) deliver(c qp.Completion) bool {
	r.mu.Lock()
	for r.cq.Full() && !r.closed {
		r.waiters++
		r.space.Wait()
		r.waiters--
	}
	if r.closed {
		r.mu.Unlock()
		return false
	}
	r.cq.Push(c)
	r.avail.Add(1)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
	return true
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
	return n-hdrLen >= int(binary.BigEndian.Uint32(h[16:]))
}

// readLoop applies the path's frames from conn until the connection ends or
// the peer breaks the protocol; then it closes the connection (the sender
// sees the path fail), marks the path down and closes exited.
func (p *recvPath) readLoop(conn *net.TCPConn, exited chan struct{}) {
	r := p.r
	defer r.wg.Done()
	defer close(exited)
	defer r.markDown(p)
	defer conn.Close()
	unacked, last := 0, uint32(0)
	errored := false
	size := uint64(len(r.region))
	for {
		if _, err := io.ReadFull(p.br, p.hdr[:]); err != nil {
			return
		}
		raceRecv()
		h := parseHeader(p.hdr[:])
		if (h.op != opWrite && h.op != opWriteImm) || h.flags != 0 || h.seq != p.expect || units.Bytes(h.length) > MaxMessageBytes {
			return
		}
		p.expect++
		if errored {
			// After a NAK the path is in the error state: discard
			// until the sender half-closes.
			if _, err := p.br.Discard(int(h.length)); err != nil {
				return
			}
			continue
		}
		if h.remote > size || uint64(h.length) > size-h.remote {
			if _, err := p.br.Discard(int(h.length)); err != nil {
				return
			}
			// The NAK acknowledges every earlier frame.
			putAck(&p.ack, typeNAK, synRemoteAccess, h.seq)
			raceSend()
			if _, err := conn.Write(p.ack[:]); err != nil {
				return
			}
			errored = true
			r.markDown(p)
			continue
		}
		if h.length > 0 {
			if raceEnabled {
				r.regionLock.Lock()
			}
			_, err := io.ReadFull(p.br, r.region[h.remote:h.remote+uint64(h.length)])
			if raceEnabled {
				r.regionLock.Unlock()
			}
			if err != nil {
				return
			}
			p.applied.Add(int64(h.length))
		}
		if h.op == opWriteImm {
			if !r.deliver(qp.Completion{Path: p.idx, QPN: p.qpn, Op: qp.OpRecvImm, Status: qp.StatusOK, Bytes: units.Bytes(h.length), Imm: h.imm}) {
				return
			}
		}
		unacked++
		last = h.seq
		if unacked >= ackEvery || !p.nextFrameBuffered() {
			putAck(&p.ack, typeACK, 0, last)
			raceSend()
			if _, err := conn.Write(p.ack[:]); err != nil {
				return
			}
			unacked = 0
		}
	}
}
