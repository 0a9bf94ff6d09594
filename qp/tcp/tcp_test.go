package tcp_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/qptest"
	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/qp/tcp/internal/leak"
	"github.com/mptx-dev/mptx/units"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

// pair is a connected Conn and Receiver over loopback.
type pair struct {
	conn *tcp.Conn
	recv *tcp.Receiver
	send []byte
	ln   *tcp.Listener
}

type pairOpts struct {
	paths        []tcp.PathConfig
	maxWR        int
	recvQueue    int
	handshake    time.Duration // ListenConfig.HandshakeTimeout
	resetTimeout time.Duration // DialConfig.ResetTimeout
	retry        time.Duration // RetryTimeout of both ends
	checksum     bool          // ListenConfig.Checksum and DialConfig.Checksum
}

// newPair connects a Conn with len(o.paths) paths (3 if nil) to a Receiver
// with a region of region bytes; the send region has the same size. Both
// are closed by t's cleanups.
func newPair(t testing.TB, region units.Bytes, o pairOpts) *pair {
	t.Helper()
	if o.paths == nil {
		o.paths = make([]tcp.PathConfig, 3)
	}
	ln, err := tcp.Listen("127.0.0.1:0", tcp.ListenConfig{Secret: secret, RecvQueue: o.recvQueue, HandshakeTimeout: o.handshake, RetryTimeout: o.retry, Checksum: o.checksum})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	type res struct {
		r   *tcp.Receiver
		err error
	}
	ch := make(chan res, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		r, err := ln.Accept(ctx, make([]byte, region))
		ch <- res{r, err}
	}()
	send := make([]byte, region)
	c, err := tcp.Dial(ctx, ln.Addr().String(), tcp.DialConfig{Secret: secret, Paths: o.paths, SendRegion: send, MaxSendWR: o.maxWR, ResetTimeout: o.resetTimeout, RetryTimeout: o.retry, Checksum: o.checksum})
	a := <-ch
	if a.r != nil {
		t.Cleanup(func() { a.r.Close() })
	}
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if a.err != nil {
		t.Fatalf("Accept: %v", a.err)
	}
	return &pair{conn: c, recv: a.r, send: send, ln: ln}
}

// progress waits briefly for either side's notification; it allocates
// nothing.
func (p *pair) progress(timer *time.Timer) {
	timer.Reset(time.Millisecond)
	select {
	case <-p.conn.Notify():
	case <-p.recv.Notify():
	case <-timer.C:
	}
}

func factory(t testing.TB, paths int, region units.Bytes) *qptest.Env {
	leak.Check(t)
	p := newPair(t, region, pairOpts{paths: make([]tcp.PathConfig, paths)})
	timer := time.NewTimer(time.Hour)
	t.Cleanup(func() { timer.Stop() })
	return &qptest.Env{
		Conn: p.conn, Recv: p.recv, SendRegion: p.send,
		Progress: func() { p.progress(timer) },
		Fail:     p.recv.ClosePath,
		Stall: func(i int) func() {
			if err := p.recv.PausePath(i); err != nil {
				t.Fatal(err)
			}
			return func() { _ = p.recv.ResumePath(i) }
		},
	}
}

func TestConformance(t *testing.T) { qptest.Run(t, factory) }

// waiter collects completions from both sides of a pair.
type waiter struct {
	t     *testing.T
	p     *pair
	send  []qp.Completion
	recv  []qp.Completion
	buf   []qp.Completion
	timer *time.Timer
}

func newWaiter(t *testing.T, p *pair) *waiter {
	w := &waiter{t: t, p: p, buf: make([]qp.Completion, 64), timer: time.NewTimer(time.Hour)}
	t.Cleanup(func() { w.timer.Stop() })
	return w
}

func (w *waiter) drain() {
	w.t.Helper()
	for {
		n, err := w.p.conn.Poll(w.buf)
		if err != nil {
			w.t.Fatalf("Conn.Poll: %v", err)
		}
		w.send = append(w.send, w.buf[:n]...)
		if n == 0 {
			break
		}
	}
	for {
		n, err := w.p.recv.Poll(w.buf)
		if err != nil {
			w.t.Fatalf("Receiver.Poll: %v", err)
		}
		w.recv = append(w.recv, w.buf[:n]...)
		if n == 0 {
			break
		}
	}
}

// until drains until cond holds; it gives up after 10 s (a liveness bound,
// not a speed check).
func (w *waiter) until(what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.drain()
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s: send %v, recv %v", what, w.send, w.recv)
		}
		w.p.progress(w.timer)
	}
}

func (w *waiter) sendStatuses() []qp.Status {
	var s []qp.Status
	for _, c := range w.send {
		s = append(s, c.Status)
	}
	return s
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*131+i>>11) ^ seed
	}
}

func TestPathInfo(t *testing.T) {
	leak.Check(t)
	p := newPair(t, units.MiB, pairOpts{})
	ps := p.conn.Paths()
	rps := p.recv.Paths()
	if len(ps) != 3 || len(rps) != 3 {
		t.Fatalf("Paths() = %d on the sender, %d on the receiver; want 3", len(ps), len(rps))
	}
	ports := map[uint16]bool{}
	for i, pi := range ps {
		if pi.SrcPort == 0 || ports[pi.SrcPort] {
			t.Errorf("Paths()[%d].SrcPort = %d; want a distinct non-zero source port per path", i, pi.SrcPort)
		}
		ports[pi.SrcPort] = true
		if pi.SrcPort != rps[i].SrcPort {
			t.Errorf("path %d: sender's SrcPort %d, receiver sees %d", i, pi.SrcPort, rps[i].SrcPort)
		}
		if pi.LineRate != tcp.DefaultLineRate {
			t.Errorf("Paths()[%d].LineRate = %v, want the default %v", i, pi.LineRate, tcp.DefaultLineRate)
		}
	}
	if got := p.conn.RegionSize(); got != units.MiB {
		t.Errorf("RegionSize() = %d, want %d (the receiver's region)", got, units.MiB)
	}
	if p.conn.ID() != p.recv.ID() {
		t.Errorf("connection ids differ: sender %v, receiver %v", p.conn.ID(), p.recv.ID())
	}
	caps := p.conn.Caps()
	if !caps.CarriesData || caps.Timestamps || caps.ECNCounters || caps.CNPCounters || caps.MaxSendWR != tcp.DefaultMaxSendWR {
		t.Errorf("Caps() = %+v; want CarriesData only, MaxSendWR %d", caps, tcp.DefaultMaxSendWR)
	}
	if _, err := p.conn.Counters(0); err != nil {
		t.Errorf("Counters(0): %v", err)
	}
	if _, err := p.conn.Counters(3); err == nil {
		t.Errorf("Counters(3) on a 3-path connection succeeded; want an error")
	}
}

// TestLocalAddress binds each path to its own loopback source address and
// interface, as paths over different NICs would be.
func TestLocalAddress(t *testing.T) {
	leak.Check(t)
	paths := []tcp.PathConfig{
		{Local: netip.MustParseAddr("127.0.0.1")},
		{Local: netip.MustParseAddr("127.0.0.2"), LineRate: 25 * units.Gbps, NIC: 1},
	}
	p := newPair(t, units.MiB, pairOpts{paths: paths})
	for i, pc := range paths {
		ra := p.recv.RemoteAddr(i).(*net.TCPAddr)
		if got := ra.AddrPort().Addr().Unmap(); got != pc.Local {
			t.Errorf("path %d arrives from %v, want %v", i, got, pc.Local)
		}
	}
	if pi := p.conn.Paths()[1]; pi.LineRate != 25*units.Gbps || pi.NIC != 1 {
		t.Errorf("Paths()[1] = %+v; want LineRate 25 Gbit/s, NIC 1", pi)
	}
}

func TestBindToDevice(t *testing.T) {
	leak.Check(t)
	ln, err := tcp.Listen("127.0.0.1:0", tcp.ListenConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		if r, err := ln.Accept(ctx, make([]byte, 4096)); err == nil {
			r.Close()
		}
	}()
	c, err := tcp.Dial(ctx, ln.Addr().String(), tcp.DialConfig{Secret: secret, Paths: []tcp.PathConfig{{Interface: "lo"}}})
	if err != nil {
		if strings.Contains(err.Error(), "CAP_NET_RAW") || errors.Is(err, qp.ErrNotSupported) {
			t.Skipf("cannot bind to a device here: %v", err)
		}
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Paths()[0].Device; got != "lo" {
		t.Errorf("Paths()[0].Device = %q, want %q", got, "lo")
	}
	_, err = tcp.Dial(ctx, ln.Addr().String(), tcp.DialConfig{Secret: secret, Paths: []tcp.PathConfig{{Interface: "mptx-no-such0"}}})
	if err == nil || !strings.Contains(err.Error(), "mptx-no-such0") {
		t.Errorf("Dial bound to a missing interface: %v; want an error naming it", err)
	}
}

// TestManyWRsInOrder posts 2000 small and large WRs in uneven batches on
// two paths and checks every completion arrives once, in post order per
// path, and every byte lands.
func TestManyWRsInOrder(t *testing.T) {
	leak.Check(t)
	const region = 8 * units.MiB
	p := newPair(t, region, pairOpts{paths: make([]tcp.PathConfig, 2), maxWR: 64})
	fill(p.send, 0x42)
	w := newWaiter(t, p)
	const total = 2000
	sizes := []units.Bytes{1, 0, 17, 4096, 100_000, 3}
	var off [2]units.Bytes
	next := [2]uint64{}
	posted := 0
	var wantImm int
	want := make([]byte, region)
	for posted < total {
		for path := 0; path < 2 && posted < total; path++ {
			var batch []qp.SendWR
			for k := 0; k < 1+posted%37 && posted+len(batch) < total; k++ {
				i := posted + len(batch)
				n := sizes[i%len(sizes)]
				if off[path]+n > region/2 {
					off[path] = 0
				}
				wr := qp.SendWR{ID: uint64(path)<<32 | next[path], Op: qp.OpWrite, Local: units.Bytes(path)*region/2 + off[path], Len: n}
				wr.Remote = wr.Local
				if i%5 == 0 {
					wr.Op, wr.Imm = qp.OpWriteImm, uint32(i)
					wantImm++
				}
				copy(want[wr.Remote:wr.Remote+n], p.send[wr.Local:wr.Local+n])
				off[path] += n
				next[path]++
				batch = append(batch, wr)
			}
			for len(batch) > 0 {
				k, err := p.conn.PostSend(path, batch)
				if err != nil && !errors.Is(err, qp.ErrQueueFull) {
					t.Fatalf("PostSend: %v", err)
				}
				posted += k
				batch = batch[k:]
				if len(batch) > 0 {
					w.drain()
					w.p.progress(w.timer)
				}
			}
		}
	}
	w.until("all completions", func() bool { return len(w.send) == total && len(w.recv) == wantImm })
	seen := [2]uint64{}
	for _, c := range w.send {
		path := int(c.ID >> 32)
		if c.Path != path || c.Status != qp.StatusOK {
			t.Fatalf("completion %+v: want path %d, status ok", c, path)
		}
		if c.ID&0xffffffff != seen[path] {
			t.Fatalf("path %d: completion for WR %d, want %d (post order)", path, c.ID&0xffffffff, seen[path])
		}
		seen[path]++
	}
	if !bytes.Equal(p.recv.Region(), want) {
		t.Fatal("receive region differs from the writes")
	}
}

// TestRemoteAccessErrorState: the failed WR's successors flush, later
// posts on the path flush, nothing lands, and the other path keeps working.
func TestRemoteAccessErrorState(t *testing.T) {
	leak.Check(t)
	const region = units.MiB
	p := newPair(t, region, pairOpts{paths: make([]tcp.PathConfig, 2)})
	fill(p.send, 0x77)
	w := newWaiter(t, p)
	wrs := []qp.SendWR{
		{ID: 1, Op: qp.OpWriteImm, Local: 0, Remote: 0, Len: 4096, Imm: 11},
		{ID: 2, Op: qp.OpWriteImm, Local: 4096, Remote: region - 100, Len: 4096, Imm: 12},
		{ID: 3, Op: qp.OpWriteImm, Local: 8192, Remote: 8192, Len: 4096, Imm: 13},
		{ID: 4, Op: qp.OpWrite, Local: 0, Remote: -4096, Len: 4096},
	}
	if k, err := p.conn.PostSend(0, wrs); k != 4 || err != nil {
		t.Fatalf("PostSend = %d, %v; want 4, nil", k, err)
	}
	w.until("4 completions", func() bool { return len(w.send) == 4 })
	want := []qp.Status{qp.StatusOK, qp.StatusRemoteAccess, qp.StatusFlushed, qp.StatusFlushed}
	for i, c := range w.send {
		if c.ID != uint64(i+1) || c.Status != want[i] {
			t.Errorf("completion %d = id %d %v; want id %d %v", i, c.ID, c.Status, i+1, want[i])
		}
	}
	if k, err := p.conn.PostSend(0, []qp.SendWR{{ID: 5, Op: qp.OpWriteImm, Len: 0}}); k != 1 || err != nil {
		t.Fatalf("PostSend on the errored path = %d, %v; want 1, nil (accepted, then flushed)", k, err)
	}
	w.until("the flushed post", func() bool { return len(w.send) == 5 })
	if c := w.send[4]; c.ID != 5 || c.Status != qp.StatusFlushed {
		t.Errorf("post after the error completed %+v; want id 5 flushed", c)
	}
	if k, err := p.conn.PostSend(1, []qp.SendWR{{ID: 6, Op: qp.OpWriteImm, Local: 0, Remote: 65536, Len: 4096, Imm: 16}}); k != 1 || err != nil {
		t.Fatalf("PostSend(path 1) = %d, %v", k, err)
	}
	w.until("path 1's write", func() bool { return len(w.send) == 6 && len(w.recv) == 2 })
	if c := w.send[5]; c.ID != 6 || c.Status != qp.StatusOK {
		t.Errorf("path 1 completion %+v; want id 6 ok", c)
	}
	if r := w.recv; r[0].Imm != 11 || r[1].Imm != 16 {
		t.Errorf("receive completions %v; want Imm 11 then 16 only", r)
	}
	got := p.recv.Region()
	if !bytes.Equal(got[:4096], p.send[:4096]) || !bytes.Equal(got[65536:65536+4096], p.send[:4096]) {
		t.Error("the good writes did not land")
	}
	if !bytes.Equal(got[4096:65536], make([]byte, 65536-4096)) || !bytes.Equal(got[65536+4096:], make([]byte, int(region)-65536-4096)) {
		t.Error("a failed or flushed write changed the region")
	}
}

// TestBrokenPath: with the receiver's completion queue full (depth 1, not
// polled) its reader holds WR 2 unacknowledged; closing the path then fails
// WR 2 with retry-exceeded and flushes WRs 3–5, whatever the timing. WR 2
// had landed, as a write whose ACK is lost has on RC.
func TestBrokenPath(t *testing.T) {
	leak.Check(t)
	p := newPair(t, units.MiB, pairOpts{paths: make([]tcp.PathConfig, 2), recvQueue: 1})
	fill(p.send, 1)
	w := newWaiter(t, p)
	post := func(path int, wrs ...qp.SendWR) {
		t.Helper()
		if k, err := p.conn.PostSend(path, wrs); k != len(wrs) || err != nil {
			t.Fatalf("PostSend(%d WRs) = %d, %v", len(wrs), k, err)
		}
	}
	pollSend := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(w.send) < n {
			k, err := p.conn.Poll(w.buf)
			if err != nil {
				t.Fatal(err)
			}
			w.send = append(w.send, w.buf[:k]...)
			if k == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("timed out waiting for %d send completions: %v", n, w.send)
				}
				p.progress(w.timer)
			}
		}
	}
	post(0, qp.SendWR{ID: 1, Op: qp.OpWriteImm, Len: 4096, Imm: 1})
	pollSend(1) // WR 1's completion fills the receive queue
	post(0,
		qp.SendWR{ID: 2, Op: qp.OpWriteImm, Local: 4096, Remote: 4096, Len: 4096, Imm: 2},
		qp.SendWR{ID: 3, Op: qp.OpWrite, Len: 4096},
		qp.SendWR{ID: 4, Op: qp.OpWrite, Len: 4096},
		qp.SendWR{ID: 5, Op: qp.OpWriteImm, Len: 4096, Imm: 5})
	// Wait until WR 2 has landed: its reader is now waiting for room.
	deadline := time.Now().Add(10 * time.Second)
	for p.recv.PathBytes(0) < 8192 {
		if time.Now().After(deadline) {
			t.Fatalf("WR 2 never landed (%d bytes)", p.recv.PathBytes(0))
		}
		time.Sleep(100 * time.Microsecond)
	}
	if err := p.recv.ClosePath(0); err != nil {
		t.Fatal(err)
	}
	pollSend(5)
	want := []qp.Status{qp.StatusOK, qp.StatusRetryExceeded, qp.StatusFlushed, qp.StatusFlushed, qp.StatusFlushed}
	for i, c := range w.send {
		if c.ID != uint64(i+1) || c.Status != want[i] {
			t.Errorf("completion %d = id %d %v; want id %d %v", i, c.ID, c.Status, i+1, want[i])
		}
	}
	post(0, qp.SendWR{ID: 6, Op: qp.OpWrite, Len: 1})
	pollSend(6)
	if c := w.send[5]; c.Status != qp.StatusFlushed {
		t.Errorf("post on the broken path completed %v; want flushed", c.Status)
	}
	if !bytes.Equal(p.recv.Region()[4096:8192], p.send[4096:8192]) {
		t.Error("WR 2 did not land before the path broke")
	}
	// A path that breaks with nothing outstanding: the next WR gets the
	// retry error, the one after it flushes.
	if err := p.recv.ClosePath(1); err != nil {
		t.Fatal(err)
	}
	post(1, qp.SendWR{ID: 7, Op: qp.OpWrite, Len: 1}, qp.SendWR{ID: 8, Op: qp.OpWrite, Len: 1})
	pollSend(8)
	if a, b := w.send[6], w.send[7]; a.ID != 7 || a.Status != qp.StatusRetryExceeded || b.ID != 8 || b.Status != qp.StatusFlushed {
		t.Errorf("posts on a path broken while idle completed %v, %v; want 7 retry-exceeded, 8 flushed", a, b)
	}
}

// TestQueueFull: a WR holds its send queue slot until its completion has
// been polled, as in verbs.
func TestQueueFull(t *testing.T) {
	leak.Check(t)
	p := newPair(t, units.MiB, pairOpts{paths: make([]tcp.PathConfig, 1), maxWR: 4})
	wrs := make([]qp.SendWR, 6)
	for i := range wrs {
		wrs[i] = qp.SendWR{ID: uint64(i), Op: qp.OpWrite, Len: 100}
	}
	if k, err := p.conn.PostSend(0, wrs); k != 4 || !errors.Is(err, qp.ErrQueueFull) {
		t.Fatalf("PostSend(6 WRs) on a 4-deep queue = %d, %v; want 4, ErrQueueFull", k, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.conn.PathBytes(0) < 400 {
		if time.Now().After(deadline) {
			t.Fatalf("4 WRs never acknowledged (%d bytes)", p.conn.PathBytes(0))
		}
		time.Sleep(100 * time.Microsecond)
	}
	if k, err := p.conn.PostSend(0, wrs[4:]); k != 0 || !errors.Is(err, qp.ErrQueueFull) {
		t.Fatalf("PostSend with 4 unpolled completions = %d, %v; want 0, ErrQueueFull", k, err)
	}
	buf := make([]qp.Completion, 8)
	if n, err := p.conn.Poll(buf); n != 4 || err != nil {
		t.Fatalf("Poll = %d, %v; want 4, nil", n, err)
	}
	if k, err := p.conn.PostSend(0, wrs[4:]); k != 2 || err != nil {
		t.Fatalf("PostSend after polling = %d, %v; want 2, nil", k, err)
	}
}

func TestPostSendBadInput(t *testing.T) {
	leak.Check(t)
	p := newPair(t, 4096, pairOpts{paths: make([]tcp.PathConfig, 1)})
	cases := []struct {
		name string
		path int
		wr   qp.SendWR
		want string
	}{
		{"path", 1, qp.SendWR{Op: qp.OpWrite}, "path 1 out of range"},
		{"op", 0, qp.SendWR{Op: qp.OpRecvImm}, "Op = RECV_RDMA_WITH_IMM"},
		{"len", 0, qp.SendWR{Op: qp.OpWrite, Len: -1}, "Len = -1"},
		{"local", 0, qp.SendWR{Op: qp.OpWrite, Local: 4000, Len: 100}, "local range [4000, 4100)"},
	}
	for _, c := range cases {
		k, err := p.conn.PostSend(c.path, []qp.SendWR{c.wr})
		if k != 0 || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: PostSend(%+v) = %d, %v; want 0 and an error containing %q", c.name, c.wr, k, err, c.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		cfg  tcp.DialConfig
		want string
	}{
		{tcp.DialConfig{Secret: []byte("short"), Paths: make([]tcp.PathConfig, 1)}, "Secret is 5 bytes"},
		{tcp.DialConfig{Secret: secret}, "Paths has 0 paths (valid: 1..64)"},
		{tcp.DialConfig{Secret: secret, Paths: make([]tcp.PathConfig, 65)}, "Paths has 65 paths"},
		{tcp.DialConfig{Secret: secret, Paths: make([]tcp.PathConfig, 1), MaxSendWR: 1}, "MaxSendWR = 1"},
		{tcp.DialConfig{Secret: secret, Paths: []tcp.PathConfig{{LineRate: -1}}}, "Paths[0].LineRate = -1"},
		{tcp.DialConfig{Secret: secret, Paths: []tcp.PathConfig{{}, {NIC: 64}}}, "Paths[1].NIC = 64"},
	}
	for _, c := range cases {
		_, err := tcp.Dial(ctx, "127.0.0.1:1", c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Dial(%+v) = %v; want an error containing %q", c.cfg, err, c.want)
		}
	}
	if _, err := tcp.Dial(ctx, "", tcp.DialConfig{Secret: secret, Paths: make([]tcp.PathConfig, 1)}); err == nil || !strings.Contains(err.Error(), "Paths[0].Remote is empty") {
		t.Errorf("Dial with no address: %v", err)
	}
	if _, err := tcp.Listen("127.0.0.1:0", tcp.ListenConfig{Secret: secret, RecvQueue: -1}); err == nil || !strings.Contains(err.Error(), "RecvQueue = -1") {
		t.Errorf("Listen with RecvQueue -1: %v", err)
	}
	if _, err := tcp.Listen("127.0.0.1:0", tcp.ListenConfig{Secret: secret, MaxPending: 4, MaxPendingPerSource: 5}); err == nil || !strings.Contains(err.Error(), "MaxPendingPerSource = 5 (valid: 0 for 16, or 1..MaxPending = 4)") {
		t.Errorf("Listen with MaxPendingPerSource above MaxPending: %v", err)
	}
}

// TestCloseWhileBusy closes both sides in the middle of a stream of large
// writes: nothing hangs, no goroutine is left, later calls fail cleanly.
func TestCloseWhileBusy(t *testing.T) {
	leak.Check(t)
	p := newPair(t, 16*units.MiB, pairOpts{paths: make([]tcp.PathConfig, 2), maxWR: 16})
	for path := 0; path < 2; path++ {
		wrs := make([]qp.SendWR, 16)
		for i := range wrs {
			off := units.Bytes(path*16+i) * units.MiB / 2
			wrs[i] = qp.SendWR{ID: uint64(i), Op: qp.OpWriteImm, Local: off, Remote: off, Len: units.MiB / 2}
		}
		if k, err := p.conn.PostSend(path, wrs); k != 16 || err != nil {
			t.Fatalf("PostSend = %d, %v", k, err)
		}
	}
	if err := p.recv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.conn.Close(); err != nil {
		t.Fatal(err)
	}
	buf := make([]qp.Completion, 4)
	if _, err := p.conn.Poll(buf); !errors.Is(err, qp.ErrClosed) {
		t.Errorf("Conn.Poll after Close: %v; want ErrClosed", err)
	}
	if _, err := p.recv.Poll(buf); !errors.Is(err, qp.ErrClosed) {
		t.Errorf("Receiver.Poll after Close: %v; want ErrClosed", err)
	}
	if err := p.ln.Close(); err != nil {
		t.Errorf("Listener.Close: %v", err)
	}
	if err := p.ln.Close(); err != nil {
		t.Errorf("second Listener.Close: %v; want nil", err)
	}
	if n := leak.Count(); n != 0 {
		// Close waits for its goroutines; allow only ones that are
		// already returning (the cleanup check waits for those).
		t.Logf("%d qp/tcp goroutines still returning right after Close", n)
	}
}

// TestNoAllocsBatch is stricter than qptest's NoAllocs: 32 WRs per post,
// polled until all complete on both sides.
func TestNoAllocsBatch(t *testing.T) {
	leak.Check(t)
	p := newPair(t, units.MiB, pairOpts{paths: make([]tcp.PathConfig, 2)})
	wrs := make([]qp.SendWR, 32)
	for i := range wrs {
		wrs[i] = qp.SendWR{ID: uint64(i), Op: qp.OpWriteImm, Local: units.Bytes(i) * 8192, Remote: units.Bytes(i) * 8192, Len: 8192, Imm: uint32(i)}
	}
	buf := make([]qp.Completion, 64)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	round := func() {
		for path := 0; path < 2; path++ {
			if k, err := p.conn.PostSend(path, wrs); k != len(wrs) || err != nil {
				t.Fatalf("PostSend = %d, %v", k, err)
			}
		}
		s, r := 0, 0
		for s < 64 || r < 64 {
			n, _ := p.conn.Poll(buf)
			s += n
			m, _ := p.recv.Poll(buf)
			r += m
			if n == 0 && m == 0 {
				p.progress(timer)
			}
		}
	}
	for i := 0; i < 20; i++ {
		round()
	}
	if a := testing.AllocsPerRun(100, round); a != 0 {
		t.Errorf("posting and polling 64 WRs allocates %.1f times per round; want 0", a)
	}
}

var sinkN int

// BenchmarkWrite measures one path's throughput on loopback: batches of
// 16 × 256 KiB writes, the last with an immediate.
func BenchmarkWrite(b *testing.B) {
	for _, paths := range []int{1, 3} {
		b.Run(map[int]string{1: "1path", 3: "3paths"}[paths], func(b *testing.B) {
			const seg = 256 * units.KiB
			const batch = 16
			p := newPair(b, batch*seg*units.Bytes(paths), pairOpts{paths: make([]tcp.PathConfig, paths), maxWR: 2 * batch})
			wrs := make([][]qp.SendWR, paths)
			for path := range wrs {
				for i := 0; i < batch; i++ {
					off := (units.Bytes(path)*batch + units.Bytes(i)) * seg
					wrs[path] = append(wrs[path], qp.SendWR{ID: uint64(i), Op: qp.OpWrite, Local: off, Remote: off, Len: seg})
				}
				wrs[path][batch-1].Op = qp.OpWriteImm
			}
			buf := make([]qp.Completion, 64)
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			b.SetBytes(int64(batch * seg * units.Bytes(paths)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for path := range wrs {
					if k, err := p.conn.PostSend(path, wrs[path]); k != batch || err != nil {
						b.Fatalf("PostSend = %d, %v", k, err)
					}
				}
				s := 0
				for s < batch*paths {
					n, _ := p.conn.Poll(buf)
					s += n
					m, _ := p.recv.Poll(buf)
					sinkN += m
					if n == 0 && m == 0 {
						p.progress(timer)
					}
				}
			}
		})
	}
}
