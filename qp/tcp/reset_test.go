package tcp_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/qp/tcp/internal/leak"
	"github.com/mptx-dev/mptx/units"
)

// post posts wrs on path; every one must be accepted.
func (w *waiter) post(path int, wrs ...qp.SendWR) {
	w.t.Helper()
	if k, err := w.p.conn.PostSend(path, wrs); k != len(wrs) || err != nil {
		w.t.Fatalf("PostSend(path %d, %d WRs) = %d, %v; want %d, nil", path, len(wrs), k, err, len(wrs))
	}
}

// status waits for the send completion of WR id and returns its status.
func (w *waiter) status(id uint64) qp.Status {
	w.t.Helper()
	var st qp.Status
	w.until(fmt.Sprintf("the completion of WR %d", id), func() bool {
		for _, c := range w.send {
			if c.ID == id {
				st = c.Status
				return true
			}
		}
		return false
	})
	return st
}

// breakPath closes path at the receiver and posts WR id on it: the WR fails
// with the retry error (the first WR to meet a broken connection does).
func (w *waiter) breakPath(path int, id uint64) {
	w.t.Helper()
	if err := w.p.recv.ClosePath(path); err != nil {
		w.t.Fatal(err)
	}
	w.post(path, qp.SendWR{ID: id, Op: qp.OpWrite, Len: 1})
	if st := w.status(id); st != qp.StatusRetryExceeded {
		w.t.Fatalf("WR %d on path %d after ClosePath completed %v; want %v", id, path, st, qp.StatusRetryExceeded)
	}
}

// TestResetBrokenPath breaks path 0 three times; after each Reset, writes
// on it complete OK and land, with sequence numbers restarted on both ends
// (a mismatch would break the path again with a protocol error). Path 1 is
// never disturbed, and the reset path's post and poll allocate nothing.
func TestResetBrokenPath(t *testing.T) {
	leak.Check(t)
	const region = units.MiB
	p := newPair(t, region, pairOpts{paths: make([]tcp.PathConfig, 2)})
	fill(p.send, 0x5c)
	w := newWaiter(t, p)

	// Reset of a healthy path is a no-op: same connection on both ends.
	la, ra := p.conn.LocalAddr(0).String(), p.recv.RemoteAddr(0).String()
	if err := p.conn.Reset(0); err != nil {
		t.Fatalf("Reset(0) of a healthy path: %v", err)
	}
	if got, rgot := p.conn.LocalAddr(0).String(), p.recv.RemoteAddr(0).String(); got != la || rgot != ra {
		t.Errorf("Reset of a healthy path moved it from %s→%s to %s→%s; want no change", la, ra, got, rgot)
	}
	info := p.conn.Paths()[0]

	id := uint64(100)
	wantImm := 0
	for cycle := 0; cycle < 3; cycle++ {
		id++
		w.breakPath(0, id)
		// Counters reads the failed connection's retransmissions, taken
		// before it was closed.
		if _, err := p.conn.Counters(0); err != nil {
			t.Errorf("cycle %d: Counters(0) of the broken path: %v", cycle, err)
		}
		if err := p.conn.Reset(0); err != nil {
			t.Fatalf("cycle %d: Reset(0): %v", cycle, err)
		}
		if err := p.conn.Reset(0); err != nil {
			t.Fatalf("cycle %d: second Reset(0) (now a no-op): %v", cycle, err)
		}
		if got, rgot := p.conn.LocalAddr(0).String(), p.recv.RemoteAddr(0).String(); got != rgot {
			t.Errorf("cycle %d: after Reset the sender's path 0 is %s, the receiver's comes from %s; want the same connection", cycle, got, rgot)
		}
		// Five writes, the last with an immediate, at a fresh offset.
		base := units.Bytes(cycle) * 5 * 8192
		var wrs []qp.SendWR
		for k := range 5 {
			off := base + units.Bytes(k)*8192
			id++
			wrs = append(wrs, qp.SendWR{ID: id, Op: qp.OpWrite, Local: off, Remote: off, Len: 8192})
		}
		wrs[4].Op, wrs[4].Imm = qp.OpWriteImm, uint32(cycle+1)
		w.post(0, wrs...)
		wantImm++
		for _, wr := range wrs {
			if st := w.status(wr.ID); st != qp.StatusOK {
				t.Fatalf("cycle %d: WR %d on the reset path completed %v; want ok", cycle, wr.ID, st)
			}
		}
		if _, err := p.conn.Counters(0); err != nil {
			t.Errorf("cycle %d: Counters(0) after Reset: %v", cycle, err)
		}
		w.until("the receive completion", func() bool { return len(w.recv) == wantImm })
		if c := w.recv[wantImm-1]; c.Path != 0 || c.Imm != uint32(cycle+1) || c.QPN != p.recv.Paths()[0].QPN {
			t.Errorf("cycle %d: receive completion %+v; want path 0, imm %d, QPN %#x", cycle, c, cycle+1, p.recv.Paths()[0].QPN)
		}
		if !bytes.Equal(p.recv.Region()[base:base+5*8192], p.send[base:base+5*8192]) {
			t.Fatalf("cycle %d: the writes on the reset path did not land", cycle)
		}
		// Path 1 is unaffected.
		id++
		off := region/2 + units.Bytes(cycle)*4096
		w.post(1, qp.SendWR{ID: id, Op: qp.OpWrite, Local: off, Remote: off, Len: 4096})
		if st := w.status(id); st != qp.StatusOK {
			t.Fatalf("cycle %d: WR on path 1 completed %v; want ok", cycle, st)
		}
	}
	if got := p.conn.Paths()[0]; got != info {
		t.Errorf("Paths()[0] changed across resets: %+v, was %+v (the slice must not change)", got, info)
	}
	if got, want := p.recv.PathBytes(0), units.Bytes(3*5*8192); got != want {
		t.Errorf("receiver PathBytes(0) = %d; want %d (counted over every connection)", got, want)
	}

	// Steady state on the reset path allocates nothing.
	wrs := make([]qp.SendWR, 16)
	for i := range wrs {
		wrs[i] = qp.SendWR{ID: uint64(1000 + i), Op: qp.OpWriteImm, Local: units.Bytes(i) * 4096, Remote: units.Bytes(i) * 4096, Len: 4096}
	}
	buf := make([]qp.Completion, 32)
	round := func() {
		if k, err := p.conn.PostSend(0, wrs); k != len(wrs) || err != nil {
			t.Fatalf("PostSend = %d, %v", k, err)
		}
		s, r := 0, 0
		for s < len(wrs) || r < len(wrs) {
			n, _ := p.conn.Poll(buf)
			for _, c := range buf[:n] {
				if c.Status != qp.StatusOK {
					t.Fatalf("completion %+v on the reset path; want ok", c)
				}
			}
			s += n
			m, _ := p.recv.Poll(buf)
			r += m
			if n == 0 && m == 0 {
				p.progress(w.timer)
			}
		}
	}
	for range 10 {
		round()
	}
	if a := testing.AllocsPerRun(50, round); a != 0 {
		t.Errorf("posting and polling 16 WRs on a reset path allocates %.1f times per round; want 0", a)
	}
}

// TestResetAfterRemoteAccess: a path in the error state after a NAK comes
// back with Reset.
func TestResetAfterRemoteAccess(t *testing.T) {
	leak.Check(t)
	const region = 64 * units.KiB
	p := newPair(t, region, pairOpts{paths: make([]tcp.PathConfig, 1)})
	fill(p.send, 0x33)
	w := newWaiter(t, p)
	w.post(0,
		qp.SendWR{ID: 1, Op: qp.OpWrite, Local: 0, Remote: region - 10, Len: 100},
		qp.SendWR{ID: 2, Op: qp.OpWrite, Local: 0, Remote: 0, Len: 100})
	if a, b := w.status(1), w.status(2); a != qp.StatusRemoteAccess || b != qp.StatusFlushed {
		t.Fatalf("bad write then good write completed %v, %v; want %v, %v", a, b, qp.StatusRemoteAccess, qp.StatusFlushed)
	}
	if err := p.conn.Reset(0); err != nil {
		t.Fatalf("Reset(0) after a NAK: %v", err)
	}
	w.post(0, qp.SendWR{ID: 3, Op: qp.OpWriteImm, Local: 4096, Remote: 8192, Len: 4096, Imm: 9})
	if st := w.status(3); st != qp.StatusOK {
		t.Fatalf("write after Reset completed %v; want ok", st)
	}
	w.until("the receive completion", func() bool { return len(w.recv) == 1 })
	if !bytes.Equal(p.recv.Region()[8192:12288], p.send[4096:8192]) {
		t.Error("the write after Reset did not land")
	}
	if !bytes.Equal(p.recv.Region()[:100], make([]byte, 100)) {
		t.Error("the WR flushed by the NAK changed the region")
	}
}

// proofByHand dials addr, reads the listener's hello and sends the 84-byte
// proof for path index of count of connection id, its tag signed with key
// under label, following the package doc's byte layout. It returns the
// connection and the two nonces.
func proofByHand(t *testing.T, addr string, key []byte, label string, id tcp.ConnID, index, count uint16) (nc net.Conn, nonceS, nonceC []byte) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	hello := make([]byte, 38)
	if _, err := io.ReadFull(nc, hello); err != nil {
		t.Fatal(err)
	}
	nonceS = hello[6:]
	nonceC = bytes.Repeat([]byte{byte(index) + 1}, 32)
	if _, err := nc.Write(proof(key, label, nonceS, nonceC, id, index, count)); err != nil {
		t.Fatal(err)
	}
	return nc, nonceS, nonceC
}

// proof is step 2's message: nonceC ‖ id ‖ index ‖ count ‖ HMAC(key, label
// ‖ nonceS ‖ nonceC ‖ id ‖ index ‖ count).
func proof(key []byte, label string, nonceS, nonceC []byte, id tcp.ConnID, index, count uint16) []byte {
	ic := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, index), count)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	m.Write(nonceS)
	m.Write(nonceC)
	m.Write(id[:])
	m.Write(ic)
	return slices.Concat(nonceC, id[:], ic, m.Sum(nil))
}

// verdict reads everything the listener sends until it closes.
func verdict(t *testing.T, nc net.Conn) []byte {
	t.Helper()
	rest, err := io.ReadAll(nc)
	if err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("reading the verdict: %v", err)
	}
	return rest
}

const rejoinLabel = "mptx-tcp/2 rejoin client"

// TestRejoinRefused: rejoins that must not take a path. The listener
// answers a bad tag (wrong secret, or a proof replayed under another nonce)
// with the reject byte; a valid rejoin for an unknown connection or with
// the wrong path count with the refuse byte;
// a join proof reusing a live connection's id with nothing. None of them
// disturbs the connection. A Reset after the Receiver closed is refused.
func TestRejoinRefused(t *testing.T) {
	leak.Check(t)
	const region = units.MiB
	p := newPair(t, region, pairOpts{paths: make([]tcp.PathConfig, 2), handshake: 100 * time.Millisecond})
	fill(p.send, 0x21)
	w := newWaiter(t, p)
	addr, id := p.ln.Addr().String(), p.conn.ID()
	w.breakPath(0, 1)

	// An impostor who knows the connection id (it travels in clear) but
	// not the secret cannot rejoin the broken path.
	wrong := []byte("not the secret, but just as long!")
	nc, _, _ := proofByHand(t, addr, authKey(wrong), rejoinLabel, id, 0, 2)
	if got := verdict(t, nc); !bytes.Equal(got, []byte{0x5a}) {
		t.Errorf("impostor rejoin: the listener sent %x; want only the reject byte 5a", got)
	}
	// A valid proof for one hello's nonce, replayed after another hello.
	nc, nonceS, nonceC := proofByHand(t, addr, authKey(wrong), rejoinLabel, id, 0, 2)
	verdict(t, nc)
	replay := proof(authKey(secret), rejoinLabel, nonceS, nonceC, id, 0, 2)
	nc2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	_ = nc2.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(nc2, make([]byte, 38)); err != nil {
		t.Fatal(err)
	}
	if _, err := nc2.Write(replay); err != nil {
		t.Fatal(err)
	}
	if got := verdict(t, nc2); !bytes.Equal(got, []byte{0x5a}) {
		t.Errorf("replayed rejoin proof: the listener sent %x; want only the reject byte 5a", got)
	}
	// The real sender still can.
	if err := p.conn.Reset(0); err != nil {
		t.Fatalf("Reset(0) after the impostors: %v", err)
	}
	w.post(0, qp.SendWR{ID: 2, Op: qp.OpWrite, Len: 4096})
	if st := w.status(2); st != qp.StatusOK {
		t.Fatalf("write after Reset completed %v; want ok", st)
	}

	// Valid proofs the receiver cannot take: an unknown connection id, a
	// wrong path count. (A valid rejoin of a healthy path takes it:
	// TestRejoinByHand.)
	var unknown tcp.ConnID
	unknown[0] = 1
	for _, c := range []struct {
		name         string
		id           tcp.ConnID
		index, count uint16
	}{{"unknown connection", unknown, 0, 2}, {"wrong path count", id, 0, 3}} {
		nc, _, _ := proofByHand(t, addr, authKey(secret), rejoinLabel, c.id, c.index, c.count)
		if got := verdict(t, nc); !bytes.Equal(got, []byte{0x3c}) {
			t.Errorf("%s: valid rejoin answered %x; want only the refuse byte 3c", c.name, got)
		}
	}
	// A first join with the live connection's id.
	nc, _, _ = proofByHand(t, addr, authKey(secret), "mptx-tcp/2 client", id, 1, 2)
	if got := verdict(t, nc); len(got) != 0 {
		t.Errorf("join proof with a live connection's id: the listener sent %x; want nothing", got)
	}
	for path, wid := range []uint64{3, 4} {
		w.post(path, qp.SendWR{ID: wid, Op: qp.OpWrite, Local: 8192, Remote: 8192, Len: 4096})
		if st := w.status(wid); st != qp.StatusOK {
			t.Errorf("path %d after the refused rejoins: write completed %v; want ok", path, st)
		}
	}

	// Once the Receiver is closed its paths cannot rejoin.
	if err := p.recv.Close(); err != nil {
		t.Fatal(err)
	}
	w.post(0, qp.SendWR{ID: 5, Op: qp.OpWrite, Len: 1})
	for {
		n, err := p.conn.Poll(w.buf)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(w.buf[:n], func(c qp.Completion) bool { return c.ID == 5 }) {
			break
		}
		p.progress(w.timer)
	}
	if err := p.conn.Reset(0); !errors.Is(err, tcp.ErrRefused) {
		t.Errorf("Reset(0) after the Receiver closed: %v; want ErrRefused", err)
	}
}

// TestRejoinByHand speaks the rejoin by hand, following the package doc:
// the rejoin of path 1 arrives while the path is healthy and takes it at
// once, fencing the sender's connection (the sender's next write on the
// path fails); the listener's answer carries the region size, the path's
// QPN and a tag under the rejoin server label. A frame with sequence
// number 1 is then applied and acknowledged. The sender's own Reset of
// path 1 then takes the path back from the hand-made connection, which the
// receiver closes, and the sender's writes land again.
func TestRejoinByHand(t *testing.T) {
	leak.Check(t)
	const region = units.MiB
	p := newPair(t, region, pairOpts{paths: make([]tcp.PathConfig, 2), handshake: 500 * time.Millisecond})
	fill(p.send, 0x44)
	w := newWaiter(t, p)
	id := p.conn.ID()
	nc, nonceS, nonceC := proofByHand(t, p.ln.Addr().String(), authKey(secret), rejoinLabel, id, 1, 2)

	ans := make([]byte, 45)
	if _, err := io.ReadFull(nc, ans); err != nil {
		t.Fatalf("reading the rejoin verdict: %v", err)
	}
	if ans[0] != 0xa5 {
		t.Fatalf("rejoin verdict %#x; want the accept byte a5", ans[0])
	}
	regionSize, qpn := binary.BigEndian.Uint64(ans[1:]), binary.BigEndian.Uint32(ans[9:])
	if regionSize != uint64(region) || qpn != p.recv.Paths()[1].QPN {
		t.Errorf("rejoin verdict: region %d, QPN %#x; want %d, %#x (unchanged)", regionSize, qpn, region, p.recv.Paths()[1].QPN)
	}
	m := hmac.New(sha256.New, authKey(secret))
	m.Write([]byte("mptx-tcp/2 rejoin server"))
	m.Write(nonceC)
	m.Write(nonceS)
	m.Write(id[:])
	m.Write([]byte{0, 1, 0, 2})
	m.Write(ans[1:13])
	if !hmac.Equal(ans[13:], m.Sum(nil)) {
		t.Error("the rejoin verdict's tag is not HMAC(secret, rejoin server label ‖ nonceC ‖ nonceS ‖ id ‖ index ‖ count ‖ region ‖ QPN)")
	}
	// The sender's connection of path 1 was fenced and closed: its next
	// write fails (the connection may be found broken by the write or
	// before it).
	w.post(1, qp.SendWR{ID: 1, Op: qp.OpWrite, Len: 1})
	if st := w.status(1); st == qp.StatusOK {
		t.Fatalf("write on the sender's fenced connection completed ok; want an error")
	}
	// WRITE WITH IMM, seq 1, 5 bytes at offset 777, imm 0xfeed.
	frame := []byte{2, 0, 0, 0, 0, 0, 0, 1}
	frame = binary.BigEndian.AppendUint64(frame, 777)
	frame = binary.BigEndian.AppendUint32(frame, 5)
	frame = binary.BigEndian.AppendUint32(frame, 0xfeed)
	frame = append(frame, "hello"...)
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	ack := make([]byte, 8)
	if _, err := io.ReadFull(nc, ack); err != nil {
		t.Fatalf("reading the ACK: %v", err)
	}
	if !bytes.Equal(ack, []byte{0x81, 0, 0, 0, 0, 0, 0, 1}) {
		t.Errorf("ACK frame %x; want 8100000000000001 (ACK of seq 1)", ack)
	}
	w.until("the receive completion", func() bool { return len(w.recv) == 1 })
	if c := w.recv[0]; c.Path != 1 || c.Imm != 0xfeed || c.Bytes != 5 {
		t.Errorf("receive completion %+v; want path 1, imm 0xfeed, 5 bytes", c)
	}
	if got := string(p.recv.Region()[777:782]); got != "hello" {
		t.Errorf("region[777:782] = %q; want %q", got, "hello")
	}

	// The sender's Reset takes the path back: the hand-made connection is
	// closed by the receiver...
	if err := p.conn.Reset(1); err != nil {
		t.Fatalf("Reset(1) while the hand-made connection holds the path: %v", err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := nc.Read(make([]byte, 1)); err == nil {
		t.Errorf("the hand-made connection still delivers (%d bytes) after the sender's Reset took the path; want it closed", n)
	}
	nc.Close()
	// ...and the sender's writes land again.
	w.post(1, qp.SendWR{ID: 2, Op: qp.OpWriteImm, Local: 0, Remote: 0, Len: 4096, Imm: 2})
	if st := w.status(2); st != qp.StatusOK {
		t.Fatalf("write after Reset(1) completed %v; want ok", st)
	}
	w.until("the second receive completion", func() bool { return len(w.recv) == 2 })
	if !bytes.Equal(p.recv.Region()[:4096], p.send[:4096]) {
		t.Error("the write after Reset(1) did not land")
	}
}

// resetAsync runs Reset(path) in its own goroutine, so that a hang fails
// the test (after a liveness bound, not a speed check) instead of hanging
// it.
func resetAsync(c *tcp.Conn, path int) <-chan error {
	done := make(chan error, 1)
	go func() { done <- c.Reset(path) }()
	return done
}

func wait(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return in 30 s", what)
		return nil
	}
}

// TestResetUnreachable: with the listener gone, Reset fails at once
// (connection refused); with a peer that accepts and never answers, it
// fails when DialConfig.ResetTimeout ends it. Either way the path stays in
// the error state. Close abandons a Reset in progress.
func TestResetUnreachable(t *testing.T) {
	leak.Check(t)
	p := newPair(t, units.MiB, pairOpts{paths: make([]tcp.PathConfig, 2), resetTimeout: 200 * time.Millisecond})
	w := newWaiter(t, p)
	addr := p.ln.Addr().String()
	if err := p.ln.Close(); err != nil {
		t.Fatal(err)
	}
	w.breakPath(0, 1)
	err := wait(t, resetAsync(p.conn, 0), "Reset(0) with the listener gone")
	if err == nil || !strings.Contains(err.Error(), "Reset(path 0)") {
		t.Fatalf("Reset(0) with the listener gone: %v; want an error naming the path", err)
	}
	t.Logf("Reset with the listener gone: %v", err)
	w.post(0, qp.SendWR{ID: 2, Op: qp.OpWrite, Len: 1})
	if st := w.status(2); st != qp.StatusFlushed {
		t.Errorf("post after a failed Reset completed %v; want %v (still in the error state)", st, qp.StatusFlushed)
	}

	// A peer that accepts and says nothing.
	mute, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on the listener's old address %s again: %v", addr, err)
	}
	defer mute.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			nc, err := mute.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- nc
		}
	}()
	defer func() {
		mute.Close()
		for nc := range accepted {
			nc.Close()
		}
	}()
	err = wait(t, resetAsync(p.conn, 0), "Reset(0) to a mute peer")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Reset(0) to a peer that never answers: %v; want context.DeadlineExceeded (DialConfig.ResetTimeout)", err)
	}
	w.post(0, qp.SendWR{ID: 3, Op: qp.OpWrite, Len: 1})
	if st := w.status(3); st != qp.StatusFlushed {
		t.Errorf("post after a timed-out Reset completed %v; want %v", st, qp.StatusFlushed)
	}
	if err := p.conn.Reset(1); err != nil {
		t.Errorf("Reset(1) of the healthy path: %v; want nil (no-op)", err)
	}

	// Close while a Reset waits on the mute peer: the Reset returns
	// ErrClosed, not the timeout's error (the default timeout is 10 s).
	q := newPair(t, units.MiB, pairOpts{paths: make([]tcp.PathConfig, 1)})
	mute.Close()
	for nc := range accepted {
		nc.Close()
	}
	if err := q.ln.Close(); err != nil {
		t.Fatal(err)
	}
	mute2, err := net.Listen("tcp", q.ln.Addr().String())
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", q.ln.Addr(), err)
	}
	defer mute2.Close()
	got := make(chan net.Conn, 1)
	go func() {
		nc, err := mute2.Accept()
		if err == nil {
			got <- nc
		}
		close(got)
	}()
	wq := newWaiter(t, q)
	wq.breakPath(0, 1)
	done := resetAsync(q.conn, 0)
	if nc, ok := <-got; ok {
		defer nc.Close()
	}
	q.conn.Close()
	if err := wait(t, done, "Reset(0) during Close"); !errors.Is(err, qp.ErrClosed) {
		t.Errorf("Reset(0) interrupted by Close: %v; want qp.ErrClosed", err)
	}
	if err := q.conn.Reset(0); !errors.Is(err, qp.ErrClosed) {
		t.Errorf("Reset(0) after Close: %v; want qp.ErrClosed", err)
	}
}

func TestResetBadPath(t *testing.T) {
	leak.Check(t)
	p := newPair(t, 4096, pairOpts{paths: make([]tcp.PathConfig, 2)})
	for _, path := range []int{-1, 2} {
		if err := p.conn.Reset(path); err == nil || !strings.Contains(err.Error(), "out of range [0, 2)") {
			t.Errorf("Reset(%d) on a 2-path connection: %v; want an out-of-range error", path, err)
		}
	}
}
