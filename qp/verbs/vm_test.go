//go:build linux && cgo

package verbs

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// The tests in this file need real RDMA devices. `make rxe-test` boots a
// qemu VM with Soft-RoCE (rdma_rxe) and two veth "wires", each with an rxe
// device on both ends, and runs them there (test/rxe/job.sh); anywhere else
// they skip.

var testSecret = []byte("mptx-rxe-test-secret-0123456789")

// vmEnv is the topology job.sh set up.
type vmEnv struct {
	sender, receiver []string // rxe devices, path-aligned
	wires            []string // the sender-side veth of each wire
}

func needVM(t testing.TB) vmEnv {
	t.Helper()
	if os.Getenv("MPTX_RXE_VM") == "" {
		t.Skip("needs Soft-RoCE devices: run `make rxe-test` (as root; boots a qemu VM with rdma_rxe and runs this test there)")
	}
	e := vmEnv{
		sender:   strings.Split(os.Getenv("MPTX_RXE_SENDER"), ","),
		receiver: strings.Split(os.Getenv("MPTX_RXE_RECEIVER"), ","),
		wires:    strings.Split(os.Getenv("MPTX_RXE_WIRES"), ","),
	}
	if len(e.sender) < 2 || len(e.receiver) != len(e.sender) {
		t.Fatalf("MPTX_RXE_SENDER=%q MPTX_RXE_RECEIVER=%q: want two or more path-aligned devices", os.Getenv("MPTX_RXE_SENDER"), os.Getenv("MPTX_RXE_RECEIVER"))
	}
	return e
}

// pair is a connected sender and receiver in this process.
type pair struct {
	sh, rh *Host
	send   *Buffer
	conn   *Conn
	recv   *Receiver
}

type pairOpts struct {
	region    func(h *Host, size units.Bytes) (*Buffer, error) // ListenConfig.Region
	nics      int                                              // paths' NICs (default all)
	qpsPerNIC int
	size      units.Bytes
	access    Access
	qp        QPConfig
	pool      units.Bytes
	huge      HugePolicy
	probes    int // DialConfig.RTTProbes; 0 here means none
}

func newPair(t testing.TB, e vmEnv, o pairOpts) *pair {
	t.Helper()
	if o.nics == 0 {
		o.nics = len(e.sender)
	}
	if o.size == 0 {
		o.size = 4 * units.MiB
	}
	if o.pool == 0 {
		o.pool = 2*o.size + 8*units.MiB
	}
	p := &pair{}
	var err error
	if p.sh, err = OpenHost(HostConfig{Devices: e.sender[:o.nics], PoolSize: o.pool, HugePages: o.huge}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.sh.Close() })
	if p.rh, err = OpenHost(HostConfig{Devices: e.receiver[:o.nics], PoolSize: o.pool, HugePages: o.huge}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.rh.Close() })
	lc := ListenConfig{Secret: testSecret, Access: o.access, QP: o.qp}
	if o.region != nil {
		lc.Region = func(size units.Bytes) (*Buffer, error) { return o.region(p.rh, size) }
	}
	ln, err := p.rh.Listen("127.0.0.1:0", lc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if p.send, err = p.sh.Alloc(o.size); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type res struct {
		r   *Receiver
		err error
	}
	ch := make(chan res, 1)
	go func() {
		r, err := ln.Accept(ctx)
		ch <- res{r, err}
	}()
	p.conn, err = p.sh.Dial(ctx, ln.Addr().String(), DialConfig{Secret: testSecret, Send: p.send, QPsPerNIC: o.qpsPerNIC, QP: o.qp, Clock: vtime.NewMonotonic(), RTTProbes: cmp.Or(o.probes, -1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.conn.Close() })
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	p.recv = r.r
	t.Cleanup(func() { p.recv.Close() })
	return p
}

// waitSend polls the sender until n completions arrived.
func waitSend(t testing.TB, c *Conn, n int) []qp.Completion {
	t.Helper()
	var out []qp.Completion
	buf := make([]qp.Completion, 64)
	deadline := time.Now().Add(60 * time.Second)
	for len(out) < n {
		k, err := c.Poll(buf)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, buf[:k]...)
		if k == 0 && time.Now().After(deadline) {
			t.Fatalf("sender: %d of %d completions after 60 s", len(out), n)
		}
	}
	return out
}

func waitRecv(t testing.TB, r *Receiver, n int) []qp.Completion {
	t.Helper()
	var out []qp.Completion
	buf := make([]qp.Completion, 64)
	deadline := time.Now().Add(60 * time.Second)
	for len(out) < n {
		k, err := r.Poll(buf)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, buf[:k]...)
		if k == 0 && time.Now().After(deadline) {
			t.Fatalf("receiver: %d of %d completions after 60 s", len(out), n)
		}
	}
	return out
}

func TestVMDevices(t *testing.T) {
	e := needVM(t)
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	if err := WriteTable(&sb, devs); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", sb.String())
	for _, name := range append(append([]string{}, e.sender...), e.receiver...) {
		var d *Device
		for i := range devs {
			if devs[i].Name == name {
				d = &devs[i]
			}
		}
		if d == nil {
			t.Fatalf("Devices() lacks %s", name)
		}
		p, ok := d.Port(1)
		if !ok || !p.Active() || p.LinkLayer != "Ethernet" || p.Netdev == "" {
			t.Errorf("%s port 1 = %+v, want ACTIVE Ethernet with a netdev", name, p)
		}
		g, ok := p.PickGID(0)
		if !ok || g.Type != GIDRoCEv2 || !g.IPv4() || g.Index != 1 {
			t.Errorf("%s PickGID(0) = %+v, want the RoCE v2 IPv4 GID at index 1", name, g)
		}
		if !d.Soft() || !d.Caps.MemoryWindowType2 || d.Caps.Timestamps || d.Caps.HWRateLimit {
			t.Errorf("%s: Soft=%v caps=%+v; want rxe: soft, type 2 windows, no timestamps, no rate limiter", name, d.Soft(), d.Caps)
		}
		if d.Index < 0 {
			t.Errorf("%s: netlink index %d, want >= 0 (RdmaLinkList)", name, d.Index)
		}
	}
}

func TestVMWriteImmAcrossPaths(t *testing.T) {
	e := needVM(t)
	p := newPair(t, e, pairOpts{qpsPerNIC: 2, size: 1 * units.MiB})
	roundTrip(t, p, 2*len(e.sender))
}

// roundTrip writes a pattern over the whole region, one WRITE WITH IMM per
// path, and checks both sides' completions and the bytes.
func roundTrip(t *testing.T, p *pair, wantPaths int) {
	t.Helper()
	paths := p.conn.Paths()
	if len(paths) != wantPaths {
		t.Fatalf("Paths() = %d paths, want %d", len(paths), wantPaths)
	}
	src := p.send.Bytes()
	for i := range src {
		src[i] = byte(i*7 + i>>9)
	}
	seg := p.send.Len() / units.Bytes(len(paths))
	for i := range paths {
		wr := []qp.SendWR{{ID: uint64(100 + i), Op: qp.OpWriteImm, Local: units.Bytes(i) * seg, Remote: units.Bytes(i) * seg, Len: seg, Imm: uint32(0xA000 + i)}}
		if n, err := p.conn.PostSend(i, wr); n != 1 || err != nil {
			t.Fatalf("PostSend(%d) = %d, %v", i, n, err)
		}
	}
	sc := waitSend(t, p.conn, len(paths))
	rc := waitRecv(t, p.recv, len(paths))
	for _, c := range sc {
		if c.Status != qp.StatusOK || c.Op != qp.OpWriteImm || c.Bytes != seg || c.ID != uint64(100+c.Path) || c.At == 0 {
			t.Errorf("send completion %+v, want OK WRITE_WITH_IMM of %d bytes, ID 100+path, stamped", c, seg)
		}
	}
	seen := map[uint32]int{}
	for _, c := range rc {
		if c.Status != qp.StatusOK || c.Op != qp.OpRecvImm || c.Bytes != seg {
			t.Errorf("recv completion %+v, want OK RECV_RDMA_WITH_IMM of %d bytes", c, seg)
		}
		seen[c.Imm] = c.Path
	}
	for i := range paths {
		if got, ok := seen[uint32(0xA000+i)]; !ok || got != i {
			t.Errorf("imm %#x: path %d (present %v), want path %d", 0xA000+i, got, ok, i)
		}
	}
	if !bytes.Equal(p.recv.Region(), src) {
		t.Fatal("the receiver's region differs from the sent bytes")
	}
}

// TestVMRTTProbes: Dial measures every path's empty-path RTT with
// zero-length WRITE WITH IMM probes, which the receiver sees as probes.
func TestVMRTTProbes(t *testing.T) {
	e := needVM(t)
	p := newPair(t, e, pairOpts{qpsPerNIC: 1, probes: 3})
	for i, pi := range p.conn.Paths() {
		if pi.BaseRTT <= 0 || pi.BaseRTT > 10*time.Second {
			t.Errorf("path %d BaseRTT = %v, want a measured RTT", i, pi.BaseRTT)
		}
		t.Logf("path %d (%s QP %#x, UDP source port %d): base RTT %v", i, pi.Device, pi.QPN, pi.SrcPort, pi.BaseRTT)
	}
	rc := waitRecv(t, p.recv, 3*len(p.conn.Paths()))
	for _, c := range rc {
		if c.Imm != 0xFFFFFFFF || c.Bytes != 0 || c.Status != qp.StatusOK {
			t.Errorf("receiver saw %+v, want zero-length probes with immediate 0xffffffff", c)
		}
	}
}

// TestVMRateLimitUnsupported: rxe has no per-QP rate limiter
// (packet_pacing_caps are 0), so Caps says so and SetRate reports
// qp.ErrNotSupported; the engine then paces segments in software.
func TestVMRateLimitUnsupported(t *testing.T) {
	e := needVM(t)
	p := newPair(t, e, pairOpts{nics: 1, qpsPerNIC: 1})
	if p.conn.Caps().HWRateLimit {
		t.Fatal("Caps().HWRateLimit = true on rxe")
	}
	err := p.conn.SetRate(0, 100*units.Mbps)
	if !errors.Is(err, qp.ErrNotSupported) {
		t.Fatalf("SetRate on rxe = %v, want qp.ErrNotSupported", err)
	}
	t.Logf("SetRate: %v", err)
	if c := p.conn.Caps(); c.ECNCounters || c.CNPCounters || c.Timestamps || !c.CarriesData || c.MaxMessageBytes != 8*units.MiB {
		t.Errorf("Caps() = %+v; want rxe's: data, no ECN/CNP counters, no timestamps, 8 MiB messages", c)
	}
	if c, err := p.conn.Counters(0); err != nil || c.ECNMarked != 0 || c.CNPReceived != 0 {
		t.Errorf("Counters(0) = %+v, %v; want zeros for ECN and CNP", c, err)
	}
}

// TestVMInlineWrites: requests up to QPConfig.MaxInline bytes are posted
// inline and land like any other.
func TestVMInlineWrites(t *testing.T) {
	e := needVM(t)
	p := newPair(t, e, pairOpts{nics: 1, qpsPerNIC: 1, qp: QPConfig{MaxInline: 64}})
	src := p.send.Bytes()
	copy(src, "inline bytes travel inside the work request")
	if n, err := p.conn.PostSend(0, []qp.SendWR{{ID: 1, Op: qp.OpWriteImm, Len: 43, Imm: 5}}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if c := waitSend(t, p.conn, 1)[0]; c.Status != qp.StatusOK {
		t.Fatalf("inline write: %+v", c)
	}
	waitRecv(t, p.recv, 1)
	if got := string(p.recv.Region()[:43]); got != string(src[:43]) {
		t.Fatalf("region holds %q", got)
	}
}

// BenchmarkVMPostPoll measures one batch of 16 work requests (one WRITE WITH
// IMM closing 15 WRITEs of 4 KiB) posted in one crossing and polled to
// completion on both sides, on Soft-RoCE. Under TCG the time is the
// emulator's; the allocation count is the point (0).
func BenchmarkVMPostPoll(b *testing.B) {
	e := needVM(b)
	p := newPair(b, e, pairOpts{nics: 1, qpsPerNIC: 1, size: units.MiB})
	wrs := make([]qp.SendWR, 16)
	for i := range wrs {
		wrs[i] = qp.SendWR{ID: uint64(i), Op: qp.OpWrite, Local: units.Bytes(i) * 4096, Remote: units.Bytes(i) * 4096, Len: 4096}
	}
	wrs[15].Op = qp.OpWriteImm
	sbuf, rbuf := make([]qp.Completion, 32), make([]qp.Completion, 32)
	b.ReportAllocs()
	b.SetBytes(16 * 4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n, err := p.conn.PostSend(0, wrs); n != 16 || err != nil {
			b.Fatal(n, err)
		}
		for got, gotR := 0, 0; got < 16 || gotR < 1; {
			n, _ := p.conn.Poll(sbuf)
			m, _ := p.recv.Poll(rbuf)
			got, gotR = got+n, gotR+m
		}
	}
}
