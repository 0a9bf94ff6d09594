package tcp

import (
	"fmt"
	"net"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// PostSend implements qp.Conn. WRs are queued for the path's writer, which
// sends everything queued since its last write in one writev. On a path in
// the error or broken state the WRs are accepted and complete with an error
// status (see the package doc). It returns ErrQueueFull, with the count
// posted, when the path's send queue is full: a WR holds its slot until its
// completion has been polled.
func (c *Conn) PostSend(path int, wrs []qp.SendWR) (int, error) {
	if path < 0 || path >= len(c.paths) {
		return 0, fmt.Errorf("tcp: PostSend: path %d out of range [0, %d)", path, len(c.paths))
	}
	p := c.paths[path]
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, qp.ErrClosed
	}
	raceSend()
	queued, failed := false, false
	for k := range wrs {
		wr := &wrs[k]
		data, err := c.checkWR(k, wr)
		if err != nil {
			c.mu.Unlock()
			c.kick(p, queued, failed)
			return k, err
		}
		if p.n+p.cqPending >= c.maxWR {
			c.mu.Unlock()
			c.kick(p, queued, failed)
			return k, qp.ErrQueueFull
		}
		if p.state != stateReady {
			st := qp.StatusFlushed
			if p.state == stateBroken && !p.retryIssued {
				st, p.retryIssued = qp.StatusRetryExceeded, true
			}
			c.complete(p, wr, st)
			failed = true
			continue
		}
		i := p.head + p.n
		if i >= len(p.sq) {
			i -= len(p.sq)
		}
		p.sq[i] = *wr
		p.sqData[i] = data
		p.answered[i] = false
		p.n++
		queued = true
	}
	c.mu.Unlock()
	c.kick(p, queued, failed)
	return len(wrs), nil
}

// checkWR checks wrs[k] and returns its payload: the bytes of its send
// region it names (nil for a zero-length WR).
func (c *Conn) checkWR(k int, wr *qp.SendWR) ([]byte, error) {
	if wr.Op != qp.OpWrite && wr.Op != qp.OpWriteImm && wr.Op != qp.OpRead {
		return nil, fmt.Errorf("tcp: PostSend: wrs[%d].Op = %v (valid: WRITE, WRITE_WITH_IMM, RDMA_READ)", k, wr.Op)
	}
	if wr.Len < 0 || wr.Len > MaxMessageBytes {
		return nil, fmt.Errorf("tcp: PostSend: wrs[%d].Len = %d B (valid: 0..%d)", k, wr.Len, MaxMessageBytes)
	}
	if wr.Op == qp.OpRead && wr.Len == 0 {
		return nil, fmt.Errorf("tcp: PostSend: wrs[%d] is a zero-length READ (valid: 1 byte and up)", k)
	}
	if wr.Len == 0 {
		return nil, nil
	}
	region := c.region
	if wr.Region != 0 {
		var ok bool
		if region, ok = c.regs.Lookup(wr.Region); !ok {
			return nil, fmt.Errorf("tcp: PostSend: wrs[%d].Region = %#x is not registered (AddSendRegion)", k, wr.Region)
		}
	}
	if wr.Local < 0 || wr.Local > units.Bytes(len(region))-wr.Len {
		return nil, fmt.Errorf("tcp: PostSend: wrs[%d] local range [%d, %d) outside the %d-byte send region %#x", k, wr.Local, wr.Local+wr.Len, len(region), wr.Region)
	}
	return region[wr.Local : wr.Local+wr.Len : wr.Local+wr.Len], nil
}

// AddSendRegion implements qp.SendRegions: buf becomes a send region that
// work requests name by the id returned (SendWR.Region). The path writers
// gather payloads straight from it into their writev calls, so the caller
// must leave buf unchanged while work requests naming it are outstanding.
// Registering takes no system call and no copy. It is safe for concurrent
// use with every other method.
func (c *Conn) AddSendRegion(buf []byte) (uint32, error) {
	if c.isClosed.Load() {
		return 0, qp.ErrClosed
	}
	return c.regs.Add("tcp", buf)
}

// RemoveSendRegion implements qp.SendRegions. Work requests already
// posted keep the payload they resolved when they were posted (PostSend
// checks and resolves the region), so removing a region cannot make a
// writer read another buffer; but the caller must not modify the buffer
// until they have completed. It is safe for concurrent use with every
// other method.
func (c *Conn) RemoveSendRegion(id uint32) error {
	return c.regs.Remove("tcp", id)
}

// kick rings p's doorbell if WRs were queued and notifies the driver if
// completions were produced.
func (c *Conn) kick(p *sendPath, queued, completed bool) {
	if queued {
		select {
		case p.doorbell <- struct{}{}:
		default:
		}
	}
	if completed {
		c.wake()
	}
}

func (c *Conn) wake() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// writeLoop is the path's writer on conn: it sends every WR queued since
// its last write as one vectored write of header and payload slices.
func (p *sendPath) writeLoop(conn *net.TCPConn) {
	c := p.c
	defer c.wg.Done()
	defer p.wg.Done()
	for {
		c.mu.Lock()
		if c.closed || p.state != stateReady {
			halfClose := !c.closed && p.state == stateError
			c.mu.Unlock()
			if halfClose {
				// Tell the receiver we are done with this path: it
				// discards what is left and closes.
				_ = conn.CloseWrite()
			}
			return
		}
		k := min(p.n-p.sent, maxBatch)
		if p.fencing {
			k = 0 // Reset is fencing the connection: send nothing more
		}
		iov := p.iov[:0]
		for i := 0; i < k; i++ {
			j := p.head + p.sent + i
			if j >= len(p.sq) {
				j -= len(p.sq)
			}
			wr := &p.sq[j]
			h := putHeader(&p.hdrs[i], wr, p.seqHead+uint32(p.sent+i))
			iov = append(iov, p.hdrs[i][:h])
			if wr.Len > 0 && wr.Op != qp.OpRead { // a READ's memory is where its response lands
				iov = append(iov, p.sqData[j])
			}
			p.batch[i] = j
		}
		p.sent += k
		c.mu.Unlock()
		if k == 0 {
			select {
			case <-p.doorbell:
			case <-c.done:
				return
			}
			continue
		}
		var err error
		if c.sum {
			err = p.writeSummed(conn, iov, k)
		} else {
			p.bufs = iov
			_, err = p.bufs.WriteTo(conn)
		}
		if err != nil {
			c.failPath(p, conn, qp.StatusRetryExceeded)
			return
		}
	}
}
