package tcp

import (
	"io"
	"net"

	"github.com/mptx-dev/mptx/qp"
)

// readLoop is the path's reader on conn (p.br reads it): it turns ACK and
// NAK frames into completions.
func (p *sendPath) readLoop(conn *net.TCPConn) {
	c := p.c
	defer c.wg.Done()
	defer p.wg.Done()
	for {
		if _, err := io.ReadFull(p.br, p.ack[:]); err != nil {
			c.failPath(p, conn, qp.StatusRetryExceeded)
			return
		}
		raceRecv()
		typ, syn, seq := p.ack[0], p.ack[1], uint32(p.ack[4])<<24|uint32(p.ack[5])<<16|uint32(p.ack[6])<<8|uint32(p.ack[7])
		ok := false
		switch {
		case typ == typeACK && syn == 0 && p.ack[2]|p.ack[3] == 0:
			ok = c.onACK(p, seq)
		case typ == typeNAK && syn == synRemoteAccess && p.ack[2]|p.ack[3] == 0:
			ok = c.onNAK(p, seq)
		case typ == typeReadResp && syn == 0 && p.ack[2]|p.ack[3] == 0:
			var err error
			if ok, err = c.onReadResp(p, conn, seq); err != nil {
				c.failPath(p, conn, qp.StatusRetryExceeded)
				return
			}
		}
		if !ok {
			c.failPath(p, conn, qp.StatusFatal)
			return
		}
	}
}

// onReadResp reads the response to READ seq (its length follows the
// frame's first 8 bytes) into the READ's memory and completes every WR up
// to and including it. It reports false (ok) for a response the path does
// not wait for (no READ of that length at seq), and an error when conn
// fails while it reads.
func (c *Conn) onReadResp(p *sendPath, conn *net.TCPConn, seq uint32) (ok bool, err error) {
	if _, err := io.ReadFull(p.br, p.respN[:]); err != nil {
		return true, err
	}
	length := uint32(p.respN[0])<<24 | uint32(p.respN[1])<<16 | uint32(p.respN[2])<<8 | uint32(p.respN[3])
	c.mu.Lock()
	k := seq - p.seqHead
	if p.state != stateReady || uint64(k) >= uint64(p.sent) {
		c.mu.Unlock()
		return false, nil
	}
	j := p.head + int(k)
	if j >= len(p.sq) {
		j -= len(p.sq)
	}
	wr := &p.sq[j]
	if wr.Op != qp.OpRead || uint64(wr.Len) != uint64(length) {
		c.mu.Unlock()
		return false, nil
	}
	dst := p.sqData[j]
	c.mu.Unlock()
	if p.scratch == nil {
		p.scratch = make([]byte, respPiece)
	}
	for off := 0; off < len(dst); {
		n := min(len(dst)-off, respPiece)
		if _, err := io.ReadFull(p.br, p.scratch[:n]); err != nil {
			return true, err
		}
		p.dmu.Lock()
		if p.landOn.Load() == conn {
			copy(dst[off:off+n], p.scratch[:n])
		}
		p.dmu.Unlock()
		off += n
	}
	c.mu.Lock()
	if k := seq - p.seqHead; p.state == stateReady && uint64(k) < uint64(p.sent) {
		// (Still outstanding: nothing completed it while its bytes
		// were read, as only this goroutine completes successfully.)
		j := p.head + int(k)
		if j >= len(p.sq) {
			j -= len(p.sq)
		}
		p.answered[j] = true
	}
	c.mu.Unlock()
	return c.onACK(p, seq), nil
}

// unanswered reports whether one of p's first k outstanding WRs is a READ
// whose response has not landed: an acknowledgement that covers it breaks
// the protocol (a receiver answers a READ before it acknowledges anything
// after it). Called with c.mu held.
func (p *sendPath) unanswered(k uint32) bool {
	for i := uint32(0); i < k; i++ {
		j := p.head + int(i)
		if j >= len(p.sq) {
			j -= len(p.sq)
		}
		if p.sq[j].Op == qp.OpRead && !p.answered[j] {
			return true
		}
	}
	return false
}

// stopLanding stops READ responses arriving on conn from landing, and
// waits for a copy in progress: called before the path's work requests
// are completed by anything but the reader's own acknowledgements.
func (p *sendPath) stopLanding(conn *net.TCPConn) {
	if p.landOn.CompareAndSwap(conn, nil) {
		p.dmu.Lock()
		p.dmu.Unlock() //nolint:staticcheck // a barrier: the reader's copy, if any, is over
	}
}

// onACK completes p's WRs up to and including seq. It reports false if
// seq does not name a WR that was sent and not yet acknowledged.
func (c *Conn) onACK(p *sendPath, seq uint32) bool {
	c.mu.Lock()
	ok, completed := c.ackLocked(p, seq)
	c.mu.Unlock()
	if completed {
		c.wake()
	}
	return ok
}

// ackLocked is onACK with c.mu held; completed says whether it completed
// WRs (the caller wakes the driver). While Reset fences the path it only
// records seq.
func (c *Conn) ackLocked(p *sendPath, seq uint32) (ok, completed bool) {
	if p.state != stateReady {
		return true, false
	}
	k := seq - p.seqHead + 1
	if k == 0 || uint64(k) > uint64(p.sent) || p.unanswered(k) {
		return false, false
	}
	if p.fencing {
		p.fenceAck = seq
		return true, false
	}
	for ; k > 0; k-- {
		c.completeHead(p, qp.StatusOK)
	}
	return true, true
}

// onNAK completes p's WRs before seq with StatusOK, the one at seq with
// StatusRemoteAccess and the rest with StatusFlushed, and puts p in the
// error state.
func (c *Conn) onNAK(p *sendPath, seq uint32) bool {
	c.mu.Lock()
	ok, completed := c.nakLocked(p, seq)
	c.mu.Unlock()
	if completed {
		select {
		case p.doorbell <- struct{}{}:
		default:
		}
		c.wake()
	}
	return ok
}

// nakLocked is onNAK with c.mu held. While Reset fences the path it only
// records seq.
func (c *Conn) nakLocked(p *sendPath, seq uint32) (ok, completed bool) {
	if p.state != stateReady {
		return true, false
	}
	k := seq - p.seqHead
	if uint64(k) >= uint64(p.sent) || p.unanswered(k) {
		return false, false
	}
	if p.fencing {
		p.fenceNak = seq
		return true, false
	}
	for ; k > 0; k-- {
		c.completeHead(p, qp.StatusOK)
	}
	c.flush(p, qp.StatusRemoteAccess)
	p.state = stateError
	return true, true
}
