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

	"mptx/qp"
	"mptx/units"
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
// PathBytes, Paths and ID are safe for concurrent use. The zero value is not
// usable; get one from Listener.Accept.
type Receiver struct {
	id       ConnID
	region   []byte
	infos    []qp.PathInfo
	paths    []*recvPath
	notify   chan struct{}
	done     chan struct{}
	wg       sync.WaitGroup
	avail    atomic.Int64 // completions in cq, read without the lock by Poll
	isClosed atomic.Bool

	mu      sync.Mutex
	space   sync.Cond // signalled when Poll frees room in cq; L is &mu
	waiters int       // readers waiting on space; guarded by mu
	closed  bool      // guarded by mu
	cq      cq        // guarded by mu

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

// recvPath is one path of a Receiver; its fields are owned by its reader
// goroutine except where noted.
type recvPath struct {
	r       *Receiver
	idx     int
	conn    *net.TCPConn
	qpn     uint32
	br      *bufio.Reader
	hdr     [hdrLen]byte
	ack     [ackLen]byte
	expect  uint32
	applied atomic.Int64 // payload bytes applied; read by PathBytes
}

func newRecvPath(r *Receiver, idx int, conn *net.TCPConn, qpn uint32) *recvPath {
	return &recvPath{r: r, idx: idx, conn: conn, qpn: qpn, br: bufio.NewReaderSize(conn, recvBuffer), expect: 1}
}

// ID returns the connection id the handshake used.
func (r *Receiver) ID() ConnID { return r.id }

// Paths describes the receiver's end of each path: its QPN, the sender's
// source port, the kernel's RTT estimate and the MSS.
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

// RemoteAddr returns the sender's address of path i.
func (r *Receiver) RemoteAddr(i int) net.Addr { return r.paths[i].conn.RemoteAddr() }

// ClosePath closes path i's connection, as pulling its cable would: the
// sender sees the connection break and fails the path's outstanding work
// requests. Frames already applied stay applied. For tests and failure
// injection.
func (r *Receiver) ClosePath(i int) error {
	if i < 0 || i >= len(r.paths) {
		return fmt.Errorf("tcp: ClosePath: path %d out of range [0, %d)", i, len(r.paths))
	}
	err := r.paths[i].conn.Close()
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
	k := r.cq.pop(dst)
	r.avail.Add(-int64(k))
	if k > 0 && r.waiters > 0 {
		r.space.Broadcast()
	}
	r.mu.Unlock()
	return k, nil
}

// Close implements qp.Receiver: it closes every path's connection and
// waits for the path goroutines to end. It is idempotent.
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
	r.mu.Unlock()
	for _, p := range r.paths {
		p.conn.Close()
	}
	r.wg.Wait()
	return nil
}

// deliver queues a receive completion, waiting for room while the queue is
// full. It reports false if the Receiver was closed.
func (r *Receiver) deliver(c qp.Completion) bool {
	r.mu.Lock()
	for r.cq.full() && !r.closed {
		r.waiters++
		r.space.Wait()
		r.waiters--
	}
	if r.closed {
		r.mu.Unlock()
		return false
	}
	r.cq.push(c)
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

// readLoop applies the path's frames until the connection ends or the peer
// breaks the protocol; then it closes the connection (the sender sees the
// path fail).
func (p *recvPath) readLoop() {
	r := p.r
	defer r.wg.Done()
	defer p.conn.Close()
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
			if _, err := p.conn.Write(p.ack[:]); err != nil {
				return
			}
			errored = true
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
			if _, err := p.conn.Write(p.ack[:]); err != nil {
				return
			}
			unacked = 0
		}
	}
}
