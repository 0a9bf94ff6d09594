package tcp

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/mptx-dev/mptx/qp"
)

// Reset implements qp.Resetter: it fences path and brings it back ready,
// as ibv_modify_qp(3) to the error state and RESET → INIT → RTR → RTS on
// both ends does for an RC queue pair. It opens a new TCP connection for
// the path to the same receiver address, from the same source address and
// interface (a new source port), that rejoins the connection: the same
// connection id and path index, authenticated with the shared secret as
// in Dial (see Rejoin in the package doc). The receiver takes the rejoin
// whatever the state of the path's old connection: it stops applying the
// old connection's frames (those still in flight or in its socket buffers
// are dropped), closes it and waits for its reader to return before it
// answers. Both ends restart the path's sequence numbers at 1, and the
// sender closes the old connection with a reset (SO_LINGER 0, socket(7)),
// which discards what it had not sent yet.
//
// Work requests outstanding when Reset is called therefore never land
// once Reset has returned nil. While Reset runs none of them completes;
// when it returns nil they have all completed with StatusFlushed (none
// successfully, even one whose acknowledgement arrived meanwhile).
// Completions not yet polled are still delivered (and keep their send
// queue slots until then). PathBytes keeps counting. Paths() is
// unchanged: SrcPort stays the first connection's port; LocalAddr reports
// the current one.
//
// A path that failed (its connection broke, or its WR was NAKed) had its
// work requests completed with an error status when it failed; Reset
// brings it back the same way. Reset of a healthy path with no work
// outstanding does nothing: nothing of it can land any more.
//
// Reset blocks for one handshake, at most DialConfig.ResetTimeout. When
// the receiver cannot be reached, refuses (ErrRefused: it has closed the
// Receiver) or does not know the secret (ErrAuth), Reset returns the
// error and nothing is fenced: a failed path stays failed, and a healthy
// one keeps its connection, its outstanding work requests completing as
// they would have (successfully once acknowledged, or with an error if
// the connection fails), so that the driver may wait for them or try
// again later. Like PostSend, Reset is called from the driver's
// goroutine; it returns qp.ErrClosed after Close, and a Close from
// another goroutine abandons a Reset in progress (it returns
// qp.ErrClosed).
func (c *Conn) Reset(path int) error {
	return c.ResetContext(context.Background(), path)
}

// ResetContext is Reset bounded by ctx as well as by
// DialConfig.ResetTimeout.
func (c *Conn) ResetContext(ctx context.Context, path int) error {
	if path < 0 || path >= len(c.paths) {
		return fmt.Errorf("tcp: Reset: path %d out of range [0, %d)", path, len(c.paths))
	}
	p := c.paths[path]
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return qp.ErrClosed
	}
	if p.state == stateReady && p.n == 0 {
		c.mu.Unlock()
		return nil
	}
	if p.resetting {
		c.mu.Unlock()
		return fmt.Errorf("tcp: Reset(path %d): another Reset of the path is in progress (Reset is not for concurrent use)", path)
	}
	p.resetting = true
	old := p.conn
	fence := p.state == stateReady
	if fence {
		p.fencing = true
		p.fenceAck, p.fenceNak, p.fenceFail = 0, 0, qp.StatusRetryExceeded
	}
	c.mu.Unlock()

	if !fence {
		// The old connection's writer has returned or is returning
		// (the failure rang its doorbell); its reader may still wait
		// for the receiver's FIN. Closing ends both.
		c.harvest(p, old)
		old.Close()
		p.wg.Wait()
	}

	ctx, cancel := context.WithTimeout(ctx, c.resetTimeout)
	defer cancel()
	go func() { // Close abandons a Reset in progress
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	tc, err := c.rejoin(ctx, path)

	if fence {
		c.endFence(p, old, err == nil)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p.resetting = false
	if c.closed {
		if tc != nil {
			tc.Close()
		}
		return qp.ErrClosed
	}
	if err != nil {
		return fmt.Errorf("tcp: Reset(path %d): %w", path, err)
	}
	if p.n != 0 || p.sent != 0 {
		panic("tcp: BUG: Reset of a path with outstanding work requests")
	}
	p.conn = tc
	p.state, p.retryIssued = stateReady, false
	p.head, p.seqHead = 0, 1
	p.br.Reset(tc)
	c.start(p, tc)
	return nil
}

// endFence ends the fence of p's connection old. If the receiver fenced it
// (fenced), every outstanding WR completes with StatusFlushed and old is
// closed with a reset; Reset then installs the new connection. If not, p
// goes on as if no Reset had been asked for: the acknowledgement, NAK or
// failure that arrived meanwhile takes effect now, and a healthy
// connection's writer resumes.
func (c *Conn) endFence(p *sendPath, old *net.TCPConn, fenced bool) {
	if fenced {
		p.stopLanding(old) // before the flush: no READ response of old lands after it
	}
	c.mu.Lock()
	p.fencing = false
	if fenced {
		p.state, p.retryIssued = stateBroken, true // the old writer and reader stop
		c.flush(p, qp.StatusFlushed)
		c.mu.Unlock()
		c.wake()
		c.harvest(p, old)
		_ = old.SetLinger(0)
		old.Close()
		select {
		case p.doorbell <- struct{}{}:
		default:
		}
		p.wg.Wait()
		return
	}
	if p.state == stateReady {
		if p.fenceAck != 0 {
			c.ackLocked(p, p.fenceAck)
		}
		if p.fenceNak != 0 {
			c.nakLocked(p, p.fenceNak)
		}
	} else if p.n > 0 {
		// The connection failed meanwhile.
		p.retryIssued = true
		c.flush(p, p.fenceFail)
	}
	c.mu.Unlock()
	select {
	case p.doorbell <- struct{}{}:
	default:
	}
	c.wake()
}

// rejoin dials path again and runs the rejoin handshake (the package doc's
// steps 1–4 with the rejoin labels). It checks that the receiver reports the
// same region size and QPN as when the connection was dialed.
func (c *Conn) rejoin(ctx context.Context, path int) (*net.TCPConn, error) {
	tc, err := dialPath(ctx, c.remotes[path], c.pcfgs[path])
	if err != nil {
		return nil, ioErr(ctx, fmt.Sprintf("path %d: dialing %s", path, c.remotes[path]), err)
	}
	deadline, _ := ctx.Deadline()
	_ = tc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = tc.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*net.TCPConn, error) {
		stop()
		tc.Close()
		return nil, err
	}
	b := binding{id: c.id, index: uint16(path), count: uint16(len(c.paths)), rejoin: true}
	if err := clientHello(ctx, tc, c.key, &b); err != nil {
		return fail(err)
	}
	region, qpn, err := clientVerdict(ctx, tc, c.key, &b)
	if err != nil {
		return fail(err)
	}
	if region != uint64(c.regionSize) || qpn != c.rqpns[path] {
		return fail(fmt.Errorf("%w: path %d: the rejoined receiver reports a %d-byte region and QPN %#x; the connection has a %d-byte region and QPN %#x", ErrProtocol, path, region, qpn, c.regionSize, c.rqpns[path]))
	}
	if !stop() {
		// ctx ended: its past deadline may be set on the socket.
		tc.Close()
		return nil, fmt.Errorf("tcp: path %d: rejoin: %w", path, ctx.Err())
	}
	if err := readyPath(tc, c.retryTimeout); err != nil {
		tc.Close()
		return nil, fmt.Errorf("tcp: path %d: %w", path, err)
	}
	return tc, nil
}
