package tcp

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/mptx-dev/mptx/qp"
)

// Reset implements qp.Resetter: it brings path back from the error state,
// as ibv_modify_qp(3) RESET → INIT → RTR → RTS does for an RC queue pair
// after a transport error. A path whose connection broke, or whose WR the
// receiver NAKed, gets a new TCP connection to the same receiver address,
// from the same source address and interface (a new source port), that
// rejoins the connection: the same connection id and path index,
// authenticated with the shared secret as in Dial (see the package doc).
// Both ends restart the path's sequence numbers at 1. The old connection is
// closed on both ends.
//
// Work requests outstanding when the path failed were already completed
// with an error status, so nothing carries over; completions not yet polled
// are still delivered (and keep their send queue slots until then).
// PathBytes keeps counting. Paths() is unchanged: SrcPort stays the first
// connection's port; LocalAddr reports the current one.
//
// Reset of a path that is not in the error state is a no-op. Reset blocks
// for one handshake, at most DialConfig.ResetTimeout; when the receiver
// cannot be reached, refuses (ErrRefused: it has closed the Receiver, or
// the path is still healthy on its side) or does not know the secret
// (ErrAuth), Reset returns the error and the path stays in the error state,
// so the driver may try again later. Like PostSend, Reset is called from
// the driver's goroutine; it returns qp.ErrClosed after Close, and a Close
// from another goroutine abandons a Reset in progress (it returns
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
	if p.state == stateReady {
		c.mu.Unlock()
		return nil
	}
	if p.resetting {
		c.mu.Unlock()
		return fmt.Errorf("tcp: Reset(path %d): another Reset of the path is in progress (Reset is not for concurrent use)", path)
	}
	p.resetting = true
	old := p.conn
	c.mu.Unlock()

	// The old connection's writer has returned or is returning (the
	// failure rang its doorbell); its reader may still wait for the
	// receiver's FIN. Closing ends both.
	c.harvest(p, old)
	old.Close()
	p.wg.Wait()

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
