// Package qptest is the conformance suite every qp backend passes: the
// in-memory backend (qp/mem), the simulator's (sim/simqp) and real verbs
// (qp/verbs, inside the Soft-RoCE VM). It checks the behaviour the mptx
// driver relies on: WRITE WITH IMM lands and produces a receive completion
// carrying the immediate, send completions echo work-request ids in post
// order per path, zero-length probes work, batches post in one call,
// out-of-region writes fail with a remote access error and corrupt
// nothing, a failed path errors its work requests without disturbing the
// others, a reset fences a path (qp.Resetter: nothing of the work it
// flushed lands afterwards), registered send regions (qp.SendRegions) are
// sent from, and steady-state post/poll allocates nothing.
//
// Backends with one-sided access (Caps.Read and a receiver implementing
// qp.Exposer) also pass the READ cases (read.go): reads land and complete
// in post order with the writes around them, keyed writes land, the
// responder refuses anything outside a key's range or rights and after
// Revoke with a remote access error while every guard byte stays as it
// was, reads on a failed path fail, a Reset fences reads, and a steady
// read round allocates nothing. The READ cases skip, saying so, on a
// backend without them.
package qptest

import (
	"bytes"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// Env is one backend instance under test: a sender connection with the
// requested number of paths and its receiver.
type Env struct {
	Conn qp.Conn
	Recv qp.Receiver
	// SendRegion is the sender's registered region, which the suite fills
	// with a pattern, nil if the backend carries no data.
	SendRegion []byte
	// Progress makes one step of progress: a virtual-time backend runs its
	// next event, a real one waits briefly. It must not allocate in steady
	// state.
	Progress func()
	// Timeout bounds each wait in real time (virtual backends: the number
	// of Progress calls is bounded instead); 0 means 10 s.
	Timeout time.Duration
	// Fail breaks path i so that its work requests fail (link down, port
	// down, QP forced to error).
	Fail func(path int) error
	// Stall, if set, stalls path i without breaking it, as a congested or
	// paused link does: work posted on it stays outstanding and nothing of
	// it completes, while the path's queue pair (or connection) stays
	// healthy. It returns resume, which lets the stalled work go on; the
	// suite calls it after resetting the path. A backend that cannot
	// model a stall leaves Stall nil, and ResetFences resets a path with
	// work in flight instead.
	Stall func(path int) (resume func())
	// Alloc returns n bytes of memory the receiver can expose
	// (qp.Exposer); nil means make([]byte, n). A verbs backend needs
	// memory outside the Go heap.
	Alloc func(n units.Bytes) []byte
}

// Factory builds a fresh Env with paths paths and a receive region of
// region bytes. It registers its own cleanup with t.Cleanup.
type Factory func(t testing.TB, paths int, region units.Bytes) *Env

// Run runs the suite against the backend f builds.
func Run(t *testing.T, f Factory) {
	t.Run("Paths", func(t *testing.T) { testPaths(t, f) })
	t.Run("WriteImmLands", func(t *testing.T) { testWriteImm(t, f) })
	t.Run("BatchInOrder", func(t *testing.T) { testBatch(t, f) })
	t.Run("ZeroLengthProbe", func(t *testing.T) { testProbe(t, f) })
	t.Run("PollEmpty", func(t *testing.T) { testPollEmpty(t, f) })
	t.Run("RemoteAccessError", func(t *testing.T) { testRemoteAccess(t, f) })
	t.Run("FailedPath", func(t *testing.T) { testFailedPath(t, f) })
	t.Run("ResetFences", func(t *testing.T) { testResetFences(t, f) })
	t.Run("SendRegions", func(t *testing.T) { testSendRegions(t, f) })
	t.Run("NoAllocs", func(t *testing.T) { testNoAllocs(t, f) })
	t.Run("CloseIdempotent", func(t *testing.T) { testClose(t, f) })
	t.Run("ReadLands", func(t *testing.T) { testReadLands(t, f) })
	t.Run("ReadOutsideRange", func(t *testing.T) { testReadOutside(t, f) })
	t.Run("AccessRights", func(t *testing.T) { testRights(t, f) })
	t.Run("ReceiveRegionNotReadable", func(t *testing.T) { testReadRecvRegion(t, f) })
	t.Run("KeyedWrite", func(t *testing.T) { testKeyedWrite(t, f) })
	t.Run("Revoke", func(t *testing.T) { testRevoke(t, f) })
	t.Run("ReadWriteInOrder", func(t *testing.T) { testReadOrder(t, f) })
	t.Run("ReadFailedPath", func(t *testing.T) { testReadFailedPath(t, f) })
	t.Run("ReadFence", func(t *testing.T) { testReadFence(t, f) })
	t.Run("ReadNoAllocs", func(t *testing.T) { testReadNoAllocs(t, f) })
}

const region = 1 * units.MiB

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
}

// collector gathers completions from both sides.
type collector struct {
	env  *Env
	send []qp.Completion
	recv []qp.Completion
	buf  []qp.Completion
}

func newCollector(env *Env) *collector {
	return &collector{env: env, buf: make([]qp.Completion, 32)}
}

func (c *collector) drain(t testing.TB) {
	t.Helper()
	for {
		n, err := c.env.Conn.Poll(c.buf)
		if err != nil {
			t.Fatalf("Conn.Poll: %v", err)
		}
		c.send = append(c.send, c.buf[:n]...)
		if n < len(c.buf) {
			break
		}
	}
	for {
		n, err := c.env.Recv.Poll(c.buf)
		if err != nil {
			t.Fatalf("Receiver.Poll: %v", err)
		}
		c.recv = append(c.recv, c.buf[:n]...)
		if n < len(c.buf) {
			break
		}
	}
}

// wait drains until cond holds or the env's timeout passes.
func (c *collector) wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	timeout := c.env.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for i := 0; ; i++ {
		c.drain(t)
		if cond() {
			return
		}
		if time.Now().After(deadline) || i > 10_000_000 {
			t.Fatalf("timed out waiting for %s: %d send and %d receive completions so far: send %v recv %v",
				what, len(c.send), len(c.recv), c.send, c.recv)
		}
		c.env.Progress()
	}
}

func testPaths(t *testing.T, f Factory) {
	env := f(t, 3, region)
	ps := env.Conn.Paths()
	if len(ps) != 3 {
		t.Fatalf("Paths() has %d paths, want 3", len(ps))
	}
	qpns := map[uint32]bool{}
	for i, p := range ps {
		if qpns[p.QPN] {
			t.Errorf("Paths()[%d].QPN = %d, duplicate", i, p.QPN)
		}
		qpns[p.QPN] = true
		if p.LineRate <= 0 {
			t.Errorf("Paths()[%d].LineRate = %v, want > 0", i, p.LineRate)
		}
	}
	caps := env.Conn.Caps()
	if caps.MaxSendWR < 2 {
		t.Errorf("Caps().MaxSendWR = %d, want >= 2", caps.MaxSendWR)
	}
	if caps.CarriesData != (env.SendRegion != nil) {
		t.Errorf("Caps().CarriesData = %v but Env.SendRegion set = %v", caps.CarriesData, env.SendRegion != nil)
	}
}

func testWriteImm(t *testing.T, f Factory) {
	const paths = 2
	env := f(t, paths, region)
	if env.SendRegion != nil {
		fill(env.SendRegion, 0x5a)
	}
	c := newCollector(env)
	const n = 64 * units.KiB
	for p := 0; p < paths; p++ {
		off := units.Bytes(p) * 2 * n
		wr := []qp.SendWR{{ID: uint64(100 + p), Op: qp.OpWriteImm, Local: off, Remote: off + 4096, Len: n, Imm: uint32(0xabc0 + p)}}
		if k, err := env.Conn.PostSend(p, wr); k != 1 || err != nil {
			t.Fatalf("PostSend(path %d) = %d, %v; want 1, nil", p, k, err)
		}
	}
	c.wait(t, "2 send + 2 receive completions", func() bool { return len(c.send) >= paths && len(c.recv) >= paths })
	seenImm := map[uint32]int{}
	for _, r := range c.recv {
		if r.Op != qp.OpRecvImm || r.Status != qp.StatusOK || r.Bytes != n {
			t.Errorf("receive completion %+v: want Op RECV_RDMA_WITH_IMM, status ok, %d bytes", r, n)
		}
		seenImm[r.Imm] = r.Path
	}
	for p := 0; p < paths; p++ {
		if _, ok := seenImm[uint32(0xabc0+p)]; !ok {
			t.Errorf("no receive completion with Imm %#x (path %d); got %v", 0xabc0+p, p, c.recv)
		}
	}
	for _, s := range c.send {
		if s.Status != qp.StatusOK || s.Op != qp.OpWriteImm || s.ID != uint64(100+s.Path) {
			t.Errorf("send completion %+v: want status ok, WRITE_WITH_IMM, ID 100+path", s)
		}
	}
	if env.SendRegion != nil {
		got := env.Recv.Region()
		for p := 0; p < paths; p++ {
			off := units.Bytes(p) * 2 * n
			if !bytes.Equal(got[off+4096:off+4096+n], env.SendRegion[off:off+n]) {
				t.Errorf("path %d: receive region [%d, %d) differs from what was sent", p, off+4096, off+4096+n)
			}
		}
	}
}

func testBatch(t *testing.T, f Factory) {
	env := f(t, 1, region)
	if env.SendRegion != nil {
		fill(env.SendRegion, 0x11)
	}
	c := newCollector(env)
	const k = 16
	const n = 8 * units.KiB
	wrs := make([]qp.SendWR, k)
	for i := range wrs {
		wrs[i] = qp.SendWR{ID: uint64(1000 + i), Op: qp.OpWrite, Local: units.Bytes(i) * n, Remote: units.Bytes(i) * n, Len: n}
	}
	wrs[k-1].Op, wrs[k-1].Imm = qp.OpWriteImm, 77
	if got, err := env.Conn.PostSend(0, wrs); got != k || err != nil {
		t.Fatalf("PostSend(16 WRs) = %d, %v; want 16, nil", got, err)
	}
	c.wait(t, "16 send completions", func() bool { return len(c.send) >= k && len(c.recv) >= 1 })
	for i, s := range c.send {
		if s.ID != uint64(1000+i) || s.Status != qp.StatusOK {
			t.Fatalf("send completion %d = id %d status %v; want id %d ok (completions in post order)", i, s.ID, s.Status, 1000+i)
		}
	}
	if len(c.recv) != 1 || c.recv[0].Imm != 77 {
		t.Fatalf("receive completions = %v; want exactly one with Imm 77 (plain WRITEs make none)", c.recv)
	}
	if env.SendRegion != nil && !bytes.Equal(env.Recv.Region()[:k*n], env.SendRegion[:k*n]) {
		t.Fatalf("receive region differs from the 16 writes")
	}
}

func testProbe(t *testing.T, f Factory) {
	env := f(t, 1, region)
	c := newCollector(env)
	wr := []qp.SendWR{{ID: 9, Op: qp.OpWriteImm, Len: 0, Imm: 0xffffffff}}
	if k, err := env.Conn.PostSend(0, wr); k != 1 || err != nil {
		t.Fatalf("PostSend(zero-length WRITE_WITH_IMM) = %d, %v", k, err)
	}
	c.wait(t, "probe completions", func() bool { return len(c.send) >= 1 && len(c.recv) >= 1 })
	if s := c.send[0]; s.ID != 9 || s.Status != qp.StatusOK {
		t.Errorf("probe send completion %+v; want id 9 ok", s)
	}
	if r := c.recv[0]; r.Imm != 0xffffffff || r.Bytes != 0 {
		t.Errorf("probe receive completion %+v; want Imm 0xffffffff, 0 bytes", r)
	}
}

func testPollEmpty(t *testing.T, f Factory) {
	env := f(t, 1, region)
	buf := make([]qp.Completion, 4)
	if n, err := env.Conn.Poll(buf); n != 0 || err != nil {
		t.Errorf("Conn.Poll on an idle connection = %d, %v; want 0, nil", n, err)
	}
	if n, err := env.Recv.Poll(buf); n != 0 || err != nil {
		t.Errorf("Receiver.Poll on an idle connection = %d, %v; want 0, nil", n, err)
	}
}

func testRemoteAccess(t *testing.T, f Factory) {
	env := f(t, 2, region)
	if env.SendRegion != nil {
		fill(env.SendRegion, 0x33)
	}
	var before []byte
	if r := env.Recv.Region(); r != nil {
		before = append([]byte(nil), r...)
	}
	c := newCollector(env)
	wr := []qp.SendWR{{ID: 5, Op: qp.OpWriteImm, Local: 0, Remote: region - 4096, Len: 8192, Imm: 1}}
	if k, err := env.Conn.PostSend(0, wr); k != 1 || err != nil {
		t.Fatalf("PostSend(out-of-region write) = %d, %v; want the post accepted and the completion to fail", k, err)
	}
	c.wait(t, "the failed completion", func() bool { return len(c.send) >= 1 })
	if s := c.send[0]; s.ID != 5 || s.Status != qp.StatusRemoteAccess {
		t.Errorf("out-of-region write completed %+v; want id 5 status remote-access-error", s)
	}
	if len(c.recv) != 0 {
		t.Errorf("out-of-region write produced receive completions %v; want none", c.recv)
	}
	if before != nil && !bytes.Equal(before, env.Recv.Region()) {
		t.Errorf("out-of-region write changed the receive region")
	}
	// The other path is unaffected.
	c.send, c.recv = nil, nil
	ok := []qp.SendWR{{ID: 6, Op: qp.OpWriteImm, Len: 4096, Imm: 2}}
	if k, err := env.Conn.PostSend(1, ok); k != 1 || err != nil {
		t.Fatalf("PostSend(path 1) after path 0's error = %d, %v", k, err)
	}
	c.wait(t, "path 1's completion", func() bool { return len(c.send) >= 1 && len(c.recv) >= 1 })
	if s := c.send[0]; s.ID != 6 || s.Status != qp.StatusOK {
		t.Errorf("path 1 completion %+v; want id 6 ok", s)
	}
}

func testFailedPath(t *testing.T, f Factory) {
	env := f(t, 2, region)
	if env.Fail == nil {
		t.Fatal("Env.Fail is nil: every backend must be able to break a path for this suite")
	}
	c := newCollector(env)
	if err := env.Fail(0); err != nil {
		t.Fatalf("Fail(0): %v", err)
	}
	wrs := []qp.SendWR{{ID: 1, Op: qp.OpWrite, Len: 4096}, {ID: 2, Op: qp.OpWriteImm, Len: 4096, Imm: 3}}
	k, err := env.Conn.PostSend(0, wrs)
	if err == nil && k == 2 {
		c.wait(t, "errors on the failed path", func() bool { return len(c.send) >= 2 })
		for _, s := range c.send {
			if s.Status == qp.StatusOK {
				t.Errorf("work request %d on a failed path completed ok", s.ID)
			}
		}
	} else if k != 0 && err == nil {
		t.Errorf("PostSend on a failed path = %d, nil; want both accepted (and failing) or an error", k)
	}
	c.send, c.recv = nil, nil
	if k, err := env.Conn.PostSend(1, []qp.SendWR{{ID: 3, Op: qp.OpWriteImm, Len: 4096, Imm: 4}}); k != 1 || err != nil {
		t.Fatalf("PostSend(path 1) = %d, %v", k, err)
	}
	c.wait(t, "path 1's completion", func() bool {
		for _, s := range c.send {
			if s.ID == 3 {
				return len(c.recv) >= 1
			}
		}
		return false
	})
	for _, s := range c.send {
		if s.ID == 3 && s.Status != qp.StatusOK {
			t.Errorf("path 1 completion %+v; want ok", s)
		}
	}
}

func testNoAllocs(t *testing.T, f Factory) {
	env := f(t, 1, region)
	wr := []qp.SendWR{{ID: 1, Op: qp.OpWriteImm, Len: 4096, Imm: 5}}
	buf := make([]qp.Completion, 8)
	rbuf := make([]qp.Completion, 8)
	round := func() {
		if k, err := env.Conn.PostSend(0, wr); k != 1 || err != nil {
			t.Fatalf("PostSend = %d, %v", k, err)
		}
		got, gotR := 0, 0
		for i := 0; got == 0 || gotR == 0; i++ {
			n, _ := env.Conn.Poll(buf)
			got += n
			m, _ := env.Recv.Poll(rbuf)
			gotR += m
			if got == 0 || gotR == 0 {
				env.Progress()
			}
			if i > 1_000_000 {
				t.Fatal("no completion")
			}
		}
	}
	for i := 0; i < 10; i++ { // warm up rings and pools
		round()
	}
	if a := testing.AllocsPerRun(50, round); a != 0 {
		t.Errorf("post + poll round allocates %.1f times; want 0", a)
	}
}

func testClose(t *testing.T, f Factory) {
	env := f(t, 1, region)
	if err := env.Conn.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := env.Conn.Close(); err != nil {
		t.Fatalf("second Close: %v; want nil (idempotent)", err)
	}
	if _, err := env.Conn.PostSend(0, []qp.SendWR{{ID: 1, Op: qp.OpWrite, Len: 1}}); err == nil {
		t.Errorf("PostSend after Close succeeded; want an error")
	}
}
