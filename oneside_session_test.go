package mptx

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/mem"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// The session-level tests of one-sided access run a dialing and an
// accepting Session joined by a real authenticated control channel
// (bootstrap over loopback TCP) and a qp/mem connection driven in real
// time: every call first advances the in-memory network to the wall
// clock's elapsed time. The sessions' own code is what runs (Register,
// Expose, Read, Write, the loops, the engine); only the data paths are
// in memory.

// rtNet drives a mem.Network in real time for the two sessions' loops.
type rtNet struct {
	mu    sync.Mutex
	n     *mem.Network
	start time.Time
}

func (r *rtNet) advance() {
	r.n.AdvanceTo(vtime.Epoch.Add(time.Since(r.start)))
}

// rtConn is the dialer's qp.Conn (and qp.Resetter) over rtNet.
type rtConn struct{ r *rtNet }

func (c rtConn) Paths() []qp.PathInfo { return c.r.n.Conn().Paths() }
func (c rtConn) PostSend(p int, wrs []qp.SendWR) (int, error) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.r.advance()
	return c.r.n.Conn().PostSend(p, wrs)
}
func (c rtConn) Poll(dst []qp.Completion) (int, error) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.r.advance()
	return c.r.n.Conn().Poll(dst)
}
func (c rtConn) Counters(p int) (qp.Counters, error) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.r.n.Conn().Counters(p)
}
func (c rtConn) Caps() qp.Caps { return c.r.n.Conn().Caps() }
func (c rtConn) Close() error {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.r.n.Conn().Close()
}
func (c rtConn) Reset(p int) error {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.r.n.Conn().Reset(p)
}

// rtRegions is an rtConn that also registers send regions
// (qp.SendRegions), as qp/tcp does: one-sided operations then read into
// and write from the caller's memory where it lies.
type rtRegions struct{ rtConn }

func (c rtRegions) AddSendRegion(b []byte) (uint32, error) { return c.r.n.Conn().AddSendRegion(b) }
func (c rtRegions) RemoveSendRegion(id uint32) error       { return c.r.n.Conn().RemoveSendRegion(id) }

// rtRecv is the acceptor's qp.Receiver and qp.Exposer over rtNet (the
// in-memory exposures have their own lock).
type rtRecv struct{ r *rtNet }

func (v rtRecv) Poll(dst []qp.Completion) (int, error) {
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	v.r.advance()
	return v.r.n.Receiver().Poll(dst)
}
func (v rtRecv) Region() []byte { return v.r.n.Receiver().Region() }
func (v rtRecv) Close() error {
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	return v.r.n.Receiver().Close()
}
func (v rtRecv) Expose(b []byte, a qp.Access) (qp.Exposure, error) {
	return v.r.n.Receiver().Expose(b, a)
}
func (v rtRecv) RevokeKey(key uint32) error { return v.r.n.Receiver().RevokeKey(key) }

// memSessions returns a dialing and an accepting session over paths; both
// are closed at the test's end. With regions the dialer's connection
// registers send regions (qp.SendRegions); without, one-sided operations
// stage memory outside the pool.
func memSessions(t *testing.T, paths []mem.PathConfig, cfg Config, regions ...bool) (*Session, *Session, *rtNet) {
	t.Helper()
	cfg.Secret = []byte("0123456789abcdef-one-sided-test")
	if cfg.SendBuffer == 0 {
		cfg.SendBuffer = 8 * units.MiB
	}
	if cfg.RegionSize == 0 {
		cfg.RegionSize = units.MiB
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv := make(chan *bootstrap.Session, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srv <- nil
			return
		}
		bs, err := bootstrap.Server(ctx, c, cfg.Secret)
		if err != nil {
			c.Close()
		}
		srv <- bs
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cbs, err := bootstrap.Client(ctx, c, cfg.Secret)
	if err != nil {
		t.Fatal(err)
	}
	sbs := <-srv
	if sbs == nil {
		t.Fatal("bootstrap server failed")
	}
	send := make([]byte, sendRegionSize(&cfg))
	region := make([]byte, cfg.RegionSize)
	n, err := mem.New(mem.Config{Paths: paths, SendRegion: send, RecvRegion: region, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rt := &rtNet{n: n, start: time.Now()}
	dialer := &Session{cfg: cfg, ctrl: &ctrlConn{s: cbs, timeout: cfg.timeout()}, tr: "mem", done: make(chan struct{}), peers: "acceptor"}
	var conn qp.Conn = rtConn{rt}
	if len(regions) > 0 && regions[0] {
		conn = rtRegions{rtConn{rt}}
	}
	ss, err := newSendSide(dialer, conn, send, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	dialer.snd = ss
	acceptor := &Session{cfg: cfg, ctrl: &ctrlConn{s: sbs, timeout: cfg.timeout()}, tr: "mem", done: make(chan struct{}), peers: "dialer"}
	rs, err := newRecvSide(acceptor, rtRecv{rt}, region, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	acceptor.rcv = rs
	go dialer.readLoop(ss.onCtrl)
	go ss.run()
	go acceptor.readLoop(rs.onCtrl)
	go rs.run()
	t.Cleanup(func() {
		dialer.Close()
		acceptor.Close()
	})
	return dialer, acceptor, rt
}

func fourPaths() []mem.PathConfig {
	return []mem.PathConfig{{Rate: 40 * units.Gbps, NIC: 0}, {Rate: 20 * units.Gbps, NIC: 1}, {Rate: 10 * units.Gbps, NIC: 2}, {Rate: 10 * units.Gbps, NIC: 3}}
}

func fillSeed(b []byte, seed byte) {
	x := uint32(seed)*2654435761 | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

// TestSessionReadWrite: the acceptor registers memory, exposes a readable
// and a writable range and sends their descriptors over the session; the
// dialer reads scattered blocks (KV-cache style) into a pool Buffer in
// place and a whole range into plain memory (staged), and writes into the
// writable range. Every byte checks.
func TestSessionReadWrite(t *testing.T) {
	for _, regions := range []bool{false, true} {
		t.Run(map[bool]string{false: "staged", true: "registered"}[regions], func(t *testing.T) { testSessionReadWrite(t, regions) })
	}
}

func testSessionReadWrite(t *testing.T, regions bool) {
	dialer, acceptor, _ := memSessions(t, fourPaths(), Config{Pool: 64 * units.MiB}, regions)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mem := make([]byte, 24*units.MiB)
	fillSeed(mem, 1)
	reg, err := acceptor.Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := reg.Expose(0, 16*units.MiB, AccessRead)
	if err != nil {
		t.Fatal(err)
	}
	wr, err := reg.Expose(16*units.MiB, 8*units.MiB, AccessWrite)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		name string
		d    Descriptor
	}{{"kv", rd}, {"out", wr}} {
		if err := acceptor.SendDescriptor(ctx, x.name, x.d); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]Descriptor{}
	for range 2 {
		name, d, err := dialer.RecvDescriptor(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got[name] = d
	}
	if !got["kv"].Equal(rd) || !got["out"].Equal(wr) {
		t.Fatalf("descriptors received %v; want kv %v, out %v", got, rd, wr)
	}

	// Scattered 64 KiB blocks, read into consecutive places of a pool
	// Buffer; blocks 0..3 are adjacent on both ends (one transfer).
	buf, err := dialer.Alloc(8 * units.MiB)
	if err != nil {
		t.Fatal(err)
	}
	const blk = 64 * units.KiB
	src := []units.Bytes{0, 1, 2, 3, 100, 7, 200, 50, 201, 9}
	var pairs []Pair
	for i, b := range src {
		d, err := rd.Slice(b*blk, blk)
		if err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, Pair{Local: buf.Bytes()[units.Bytes(i)*blk : units.Bytes(i+1)*blk], Remote: d})
	}
	op, err := dialer.ReadAsync(ctx, pairs)
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for i, b := range src {
		if !bytes.Equal(buf.Bytes()[units.Bytes(i)*blk:units.Bytes(i+1)*blk], mem[b*blk:(b+1)*blk]) {
			t.Errorf("block %d (remote block %d) differs", i, b)
		}
	}
	st := op.Stats()
	if st.Pairs != len(src) || st.Transfers != len(src)-3 || st.Done != st.Bytes || st.Bytes != units.Bytes(len(src))*blk {
		t.Errorf("Stats = %+v; want %d pairs in %d transfers (the 4 adjacent ones merged), all %v done", st, len(src), len(src)-3, units.Bytes(len(src))*blk)
	}

	// The whole readable range into plain memory: staged, in pieces, or
	// registered and read in place.
	plain := make([]byte, 16*units.MiB)
	op, err = dialer.ReadAsync(ctx, []Pair{{Local: plain, Remote: rd}})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if st, want := op.Stats().Staged, map[bool]units.Bytes{false: 16 * units.MiB, true: 0}[regions]; st != want {
		t.Errorf("%v staged; want %v (registered: %v)", st, want, regions)
	}
	if !bytes.Equal(plain, mem[:16*units.MiB]) {
		t.Errorf("the staged 16 MiB read differs in %d bytes", countDiff(plain, mem[:16*units.MiB]))
	}

	// Write plain memory into the writable range, and a pool Buffer into
	// its second half.
	out := make([]byte, 4*units.MiB)
	fillSeed(out, 2)
	fillSeed(buf.Bytes()[:4*units.MiB], 3)
	w2, _ := wr.Slice(4*units.MiB, 4*units.MiB)
	w1, _ := wr.Slice(0, 4*units.MiB)
	if err := dialer.Write(ctx, []Pair{{Local: out, Remote: w1}, {Local: buf.Bytes()[:4*units.MiB], Remote: w2}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem[16*units.MiB:20*units.MiB], out) || !bytes.Equal(mem[20*units.MiB:], buf.Bytes()[:4*units.MiB]) {
		t.Errorf("the written ranges differ from what was written")
	}
	buf.Free()
}

func countDiff(a, b []byte) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// TestSessionReadRefused: a request without the right, or for the wrong
// length, fails before anything is posted; a forged descriptor (the
// exposure's key with a longer range) is refused by the acceptor's
// backend: the Read and the Write fail with ErrRemoteAccess, no guard
// byte around the exposure is read or written, and the session goes on.
func TestSessionReadRefused(t *testing.T) {
	dialer, acceptor, _ := memSessions(t, fourPaths(), Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	backing := make([]byte, 3*units.MiB)
	fillSeed(backing, 4)
	want := append([]byte(nil), backing...)
	reg, err := acceptor.Register(backing[units.MiB : 2*units.MiB])
	if err != nil {
		t.Fatal(err)
	}
	rd, err := reg.Expose(0, units.MiB, AccessRead)
	if err != nil {
		t.Fatal(err)
	}
	wo, err := reg.Expose(0, units.MiB, AccessWrite)
	if err != nil {
		t.Fatal(err)
	}
	local := make([]byte, 2*units.MiB)
	if err := dialer.Read(ctx, []Pair{{Local: local[:units.MiB], Remote: wo}}); err == nil || !strings.Contains(err.Error(), "lacks the right") {
		t.Errorf("Read of a write-only descriptor = %v; want a missing-right error", err)
	}
	if err := dialer.Read(ctx, []Pair{{Local: local[:100], Remote: rd}}); err == nil {
		t.Errorf("Read of 100 local bytes from a 1 MiB range = nil; want a length error")
	}
	forged := rd
	forged.Len = 2 * units.MiB // past the exposure: the guard bytes after it
	fillSeed(local, 5)
	localWant := append([]byte(nil), local...)
	err = dialer.Read(ctx, []Pair{{Local: local, Remote: forged}})
	if !errors.Is(err, ErrRemoteAccess) {
		t.Fatalf("Read of a forged descriptor = %v; want ErrRemoteAccess", err)
	}
	// Whatever landed came from inside the exposure.
	if !bytes.Equal(local[units.MiB:], localWant[units.MiB:]) {
		t.Errorf("bytes from past the exposure reached the dialer")
	}
	forgedW := wo
	forgedW.Addr -= 4096 // before the exposure
	if err := dialer.Write(ctx, []Pair{{Local: local[:64*units.KiB], Remote: Descriptor{Key: forgedW.Key, Addr: forgedW.Addr, Len: 64 * units.KiB, Access: AccessWrite}}}); !errors.Is(err, ErrRemoteAccess) {
		t.Fatalf("Write before the exposure = %v; want ErrRemoteAccess", err)
	}
	if !bytes.Equal(backing[:units.MiB], want[:units.MiB]) || !bytes.Equal(backing[2*units.MiB:], want[2*units.MiB:]) {
		t.Errorf("guard bytes around the exposure changed")
	}
	// The session goes on.
	if err := dialer.Read(ctx, []Pair{{Local: local[:units.MiB], Remote: rd}}); err != nil {
		t.Fatalf("Read after the refusals: %v", err)
	}
	if !bytes.Equal(local[:units.MiB], backing[units.MiB:2*units.MiB]) {
		t.Errorf("the good read differs")
	}
}

// TestSessionRevoke: once the acceptor revoked a descriptor, Reads of it
// fail with ErrRemoteAccess (at once once the Revoke message arrived,
// from the backend before) and Revoke again is an error.
func TestSessionRevoke(t *testing.T) {
	dialer, acceptor, _ := memSessions(t, fourPaths(), Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	memory := make([]byte, units.MiB)
	reg, err := acceptor.Register(memory)
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.Expose(0, units.MiB, AccessRead)
	if err != nil {
		t.Fatal(err)
	}
	local := make([]byte, units.MiB)
	if err := dialer.Read(ctx, []Pair{{Local: local, Remote: d}}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Revoke(d); err != nil {
		t.Fatal(err)
	}
	if err := reg.Revoke(d); err == nil {
		t.Errorf("second Revoke = nil; want an error")
	}
	if err := dialer.Read(ctx, []Pair{{Local: local, Remote: d}}); !errors.Is(err, ErrRemoteAccess) {
		t.Errorf("Read of a revoked descriptor = %v; want ErrRemoteAccess", err)
	}
	for !dialer.os.isRevoked(d) { // the Revoke message is on its way
		time.Sleep(time.Millisecond)
	}
	err = dialer.Read(ctx, []Pair{{Local: local, Remote: d}})
	if !errors.Is(err, ErrRemoteAccess) || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("Read of a descriptor the dialer knows revoked = %v; want ErrRemoteAccess naming the revocation", err)
	}
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Expose(0, 10, AccessRead); err == nil {
		t.Errorf("Expose on a closed region = nil error")
	}
}

// TestSessionReadCancel: a Read canceled mid-way returns the context's
// error only when nothing of it can land any more: the buffer, reused
// the moment Read returns, stays as the application left it.
func TestSessionReadCancel(t *testing.T) {
	slow := []mem.PathConfig{{Rate: units.Gbps, NIC: 0}, {Rate: units.Gbps, NIC: 1}}
	dialer, acceptor, rt := memSessions(t, slow, Config{Pool: 64 * units.MiB})
	memory := make([]byte, 32*units.MiB)
	fillSeed(memory, 6)
	reg, err := acceptor.Register(memory)
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.Expose(0, 32*units.MiB, AccessRead)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := dialer.Alloc(32 * units.MiB)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	op, err := dialer.ReadAsync(ctx, []Pair{{Local: buf.Bytes(), Remote: d}})
	if err != nil {
		t.Fatal(err)
	}
	for { // 32 MiB at 2 Gb/s takes 134 ms: cancel once some has landed
		if done, _ := op.Progress(); done > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	err = op.Wait(context.Background())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Read = %v; want context.Canceled", err)
	}
	fillSeed(buf.Bytes(), 7) // reused at once
	canary := append([]byte(nil), buf.Bytes()...)
	time.Sleep(200 * time.Millisecond) // longer than the whole read would take
	rt.mu.Lock()
	rt.advance()
	rt.mu.Unlock()
	if n := countDiff(buf.Bytes(), canary); n > 0 {
		t.Errorf("%d bytes landed in the buffer after the canceled Read returned", n)
	}
}

// TestSessionReadManyPairs: a thousand scattered 16 KiB blocks, more
// transfers than the session keeps in flight (and than the engine has
// slots), all land.
func TestSessionReadManyPairs(t *testing.T) {
	dialer, acceptor, _ := memSessions(t, fourPaths(), Config{Pool: 32 * units.MiB})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	memory := make([]byte, 32*units.MiB)
	fillSeed(memory, 8)
	reg, err := acceptor.Register(memory)
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.Expose(0, 32*units.MiB, AccessRead)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := dialer.Alloc(32 * units.MiB)
	if err != nil {
		t.Fatal(err)
	}
	const blk, n = 16 * units.KiB, 1000
	pairs := make([]Pair, n)
	for i := range pairs {
		src := units.Bytes((i*7919)%2000) * blk // scattered, never adjacent in order
		rd, _ := d.Slice(src, blk)
		pairs[i] = Pair{Local: buf.Bytes()[units.Bytes(2*i)*blk : units.Bytes(2*i+1)*blk], Remote: rd}
	}
	op, err := dialer.ReadAsync(ctx, pairs)
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for i, p := range pairs {
		off := p.Remote.Addr - d.Addr
		if !bytes.Equal(p.Local, memory[off:off+uint64(blk)]) {
			t.Fatalf("block %d differs", i)
		}
	}
	if st := op.Stats(); st.Transfers != n {
		t.Errorf("Stats().Transfers = %d, want %d", st.Transfers, n)
	}
}

// TestSessionOneSidedErrors: one-sided calls on the wrong end.
func TestSessionOneSidedErrors(t *testing.T) {
	dialer, acceptor, _ := memSessions(t, fourPaths(), Config{})
	ctx := context.Background()
	if _, err := dialer.Register(make([]byte, 10)); err == nil {
		t.Errorf("Register on the dialer = nil error")
	}
	if err := acceptor.Read(ctx, []Pair{{Local: make([]byte, 1), Remote: Descriptor{Key: 1, Len: 1, Access: AccessRead}}}); err == nil {
		t.Errorf("Read on the acceptor = nil error")
	}
	if err := dialer.Read(ctx, nil); err == nil {
		t.Errorf("Read of no pairs = nil error")
	}
	if err := dialer.SendDescriptor(ctx, "x", Descriptor{Key: 1, Len: 1, Access: AccessRead}); err == nil {
		t.Errorf("SendDescriptor on the dialer = nil error")
	}
	if _, _, err := acceptor.RecvDescriptor(ctx); err == nil {
		t.Errorf("RecvDescriptor on the acceptor = nil error")
	}
}

// TestSessionReadSessionEnds: the dialer closing mid-read fails the Read
// with the session's end, and nothing lands afterwards.
func TestSessionReadSessionEnds(t *testing.T) {
	slow := []mem.PathConfig{{Rate: units.Gbps, NIC: 0}}
	dialer, acceptor, rt := memSessions(t, slow, Config{Pool: 16 * units.MiB})
	memory := make([]byte, 16*units.MiB)
	reg, err := acceptor.Register(memory)
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.Expose(0, 16*units.MiB, AccessRead)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := dialer.Alloc(16 * units.MiB)
	if err != nil {
		t.Fatal(err)
	}
	op, err := dialer.ReadAsync(context.Background(), []Pair{{Local: buf.Bytes(), Remote: d}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	dialer.Close()
	if err := op.Wait(context.Background()); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("Read when the session closed = %v; want ErrSessionClosed", err)
	}
	fillSeed(buf.Bytes(), 9)
	canary := append([]byte(nil), buf.Bytes()...)
	time.Sleep(150 * time.Millisecond)
	rt.mu.Lock()
	rt.advance()
	rt.mu.Unlock()
	if n := countDiff(buf.Bytes(), canary); n > 0 {
		t.Errorf("%d bytes landed after the Read failed with the session", n)
	}
}
