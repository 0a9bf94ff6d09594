package tcp

import (
	"net"

	"github.com/mptx-dev/mptx/qp"
)

// complete queues a completion for wr on p. Called with c.mu held.
func (c *Conn) complete(p *sendPath, wr *qp.SendWR, st qp.Status) {
	cqe := qp.Completion{ID: wr.ID, Path: p.idx, QPN: p.qpn, Op: wr.Op, Status: st, Bytes: wr.Len}
	if c.sum && st == qp.StatusOK && wr.Op != qp.OpRead {
		// wr is sq[head]: completions go in queue order.
		cqe.Sum, cqe.HasSum = p.sums[p.head].Load(), true
	}
	c.cq.Push(cqe)
	c.avail.Add(1)
	p.cqPending++
}

// completeHead completes the oldest outstanding WR of p with st. Called
// with c.mu held and p.n > 0.
func (c *Conn) completeHead(p *sendPath, st qp.Status) {
	wr := &p.sq[p.head]
	c.complete(p, wr, st)
	if st == qp.StatusOK {
		p.acked += wr.Len
	}
	p.sqData[p.head] = nil
	p.head++
	if p.head == len(p.sq) {
		p.head = 0
	}
	p.n--
	if p.sent > 0 {
		p.sent--
	}
	p.seqHead++
}

// flush completes every outstanding WR of p: the oldest with first, the
// rest with StatusFlushed. Called with c.mu held.
func (c *Conn) flush(p *sendPath, first qp.Status) {
	for p.n > 0 {
		c.completeHead(p, first)
		first = qp.StatusFlushed
	}
}

// Poll implements qp.Conn. It never blocks and allocates nothing.
func (c *Conn) Poll(dst []qp.Completion) (int, error) {
	if c.avail.Load() == 0 {
		if c.isClosed.Load() {
			return 0, qp.ErrClosed
		}
		return 0, nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, qp.ErrClosed
	}
	k := c.cq.Pop(dst)
	for i := range dst[:k] {
		c.paths[dst[i].Path].cqPending--
	}
	c.avail.Add(-int64(k))
	c.mu.Unlock()
	return k, nil
}

// failPath moves p to the broken state if conn is still its connection: its
// oldest outstanding WR completes with st, the rest with StatusFlushed. It
// closes conn, and does nothing more if the path has already failed or the
// Conn is closed.
func (c *Conn) failPath(p *sendPath, conn *net.TCPConn, st qp.Status) {
	p.stopLanding(conn)
	c.harvest(p, conn)
	c.mu.Lock()
	changed := !c.closed && p.conn == conn && p.state == stateReady
	if changed {
		p.state = stateBroken
		switch {
		case p.fencing:
			// Reset decides how the outstanding WRs end.
			p.fenceFail = st
		case p.n > 0:
			p.retryIssued = true
			c.flush(p, st)
		}
	}
	c.mu.Unlock()
	conn.Close()
	if changed {
		select {
		case p.doorbell <- struct{}{}:
		default:
		}
		c.wake()
	}
}

// harvest adds conn's retransmissions to p's base before conn is closed,
// once per connection (a closed connection has no TCP_INFO left to read).
func (c *Conn) harvest(p *sendPath, conn *net.TCPConn) {
	_, _, retrans, err := tcpInfo(conn)
	if err != nil {
		return
	}
	c.mu.Lock()
	if p.harvested != conn {
		p.harvested = conn
		p.retransBase += retrans
	}
	c.mu.Unlock()
}
