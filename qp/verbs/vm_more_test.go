//go:build linux && cgo

package verbs

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/qptest"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if os.Getenv("MPTX_RXE_VM") != "" {
		// Every test closed what it opened (t.Cleanup): nothing may be
		// left in the ownership tree.
		if left := liveObjects(); len(left) > 0 {
			for _, l := range left {
				os.Stderr.WriteString("verbs: unclosed " + l.Kind + " " + l.Name + ", created at:\n" + l.Stack + "\n")
			}
			code = 1
		}
	}
	os.Exit(code)
}

// vmFactory builds the conformance suite's Env on Soft-RoCE: paths spread
// over as many NICs as divide them evenly.
func vmFactory(t testing.TB, paths int, region units.Bytes) *qptest.Env {
	e := needVM(t)
	nics := len(e.sender)
	for nics > 1 && paths%nics != 0 {
		nics--
	}
	p := newPair(t, e, pairOpts{nics: nics, qpsPerNIC: paths / nics, size: region,
		qp: QPConfig{Timeout: 16 * time.Millisecond, RetryCount: 3}})
	return &qptest.Env{
		Conn: p.conn, Recv: p.recv, SendRegion: p.send.Bytes(),
		Progress: runtime.Gosched,
		Timeout:  30 * time.Second,
		Fail:     p.conn.breakPath,
		// A stall: the path's wire holds every packet back far longer
		// than any test waits (ResetFences needs work outstanding; 16
		// small writes on rxe can all complete before it could reset).
		Stall: func(path int) func() { return netem(t, e.wires[p.conn.Paths()[path].NIC], 30*time.Second) },
		Alloc: func(n units.Bytes) []byte { // exposed memory: outside the Go heap
			mem, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				t.Fatal(err)
			}
			// (Unmapped before the pair's Close deregisters the
			// exposures: harmless, a registration pins its pages until
			// it is deregistered.)
			t.Cleanup(func() { _ = unix.Munmap(mem) })
			return mem
		},
	}
}

// TestVMConformance runs the qp conformance suite (the one qp/mem, qp/tcp
// and the simulator pass) on real verbs.
func TestVMConformance(t *testing.T) {
	needVM(t)
	qptest.Run(t, vmFactory)
}

func TestVMExtendedCQ(t *testing.T) {
	e := needVM(t)
	forceCQ = cqExtended
	defer func() { forceCQ = cqAuto }()
	p := newPair(t, e, pairOpts{qpsPerNIC: 1, size: units.MiB})
	roundTrip(t, p, len(e.sender))
}

// guarded returns a region carved from the middle of a larger pool buffer
// whose guard bands hold a pattern, and a check that they still do.
func guarded(t *testing.T, guard int) (func(h *Host, size units.Bytes) (*Buffer, error), func() []byte) {
	var big *Buffer
	region := func(h *Host, size units.Bytes) (*Buffer, error) {
		b, err := h.Alloc(size + units.Bytes(2*guard))
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { b.Free() })
		for i := range b.Bytes() {
			b.Bytes()[i] = 0xEE
		}
		big = b
		return b.view(guard, int(size)), nil
	}
	return region, func() []byte { return big.Bytes() }
}

// TestVMRemoteWriteOutsideRegion writes just past the end and just before
// the start of the advertised region (which sits between guard bands of
// the same registered pool), then writes after the region was revoked:
// every such write fails with a remote access error at the sender and not
// one byte changes at the receiver.
func TestVMRemoteWriteOutsideRegion(t *testing.T) {
	for _, access := range []Access{AccessAuto, AccessMR} {
		t.Run(access.String(), func(t *testing.T) {
			e := needVM(t)
			const guard = 64 << 10
			region, all := guarded(t, guard)
			p := newPair(t, e, pairOpts{nics: 1, qpsPerNIC: 4, size: units.MiB, access: access, region: region,
				qp: QPConfig{Timeout: 16 * time.Millisecond, RetryCount: 3}})
			if got := p.recv.Access(); got != AccessMR {
				t.Fatalf("Receiver.Access() = %v, want mr (rxe's windows do not confine; see windowsConfine)", got)
			}
			src := p.send.Bytes()
			for i := range src {
				src[i] = 0x42
			}
			before := append([]byte(nil), all()...)
			size := units.MiB
			post := func(path int, remote units.Bytes) qp.Completion {
				t.Helper()
				wr := []qp.SendWR{{ID: uint64(path), Op: qp.OpWriteImm, Remote: remote, Len: 8192, Imm: 7}}
				if n, err := p.conn.post(path, wr, false); n != 1 || err != nil {
					t.Fatalf("post(path %d, remote %d) = %d, %v", path, remote, n, err)
				}
				return waitSend(t, p.conn, 1)[0]
			}
			// Past the end: the last 4 KiB of the region and 4 KiB of guard.
			if c := post(0, size-4096); c.Status != qp.StatusRemoteAccess {
				t.Errorf("write across the region's end: %+v, want remote-access-error", c)
			}
			// Before the start (the offset wraps below the region's base).
			if c := post(1, -8192); c.Status != qp.StatusRemoteAccess {
				t.Errorf("write below the region's start: %+v, want remote-access-error", c)
			}
			// The pool's own MR grants nothing remotely: its rkey fails too.
			p.conn.sp[2].rkey = uint32(p.recv.region.mrs[p.recv.rp[0].g.nic.idx].rkey)
			if c := post(2, 0); c.Status != qp.StatusRemoteAccess {
				t.Errorf("write with the pool MR's rkey: %+v, want remote-access-error", c)
			}
			if !bytes.Equal(before, all()) {
				t.Fatal("a rejected write changed the receiver's memory")
			}
			if n, _ := p.recv.Poll(make([]qp.Completion, 4)); n != 0 {
				t.Errorf("rejected writes produced %d receive completions, want 0", n)
			}
			// After Revoke the peer's key is dead even inside the region.
			if err := p.recv.Revoke(); err != nil {
				t.Fatal(err)
			}
			if c := post(3, 0); c.Status != qp.StatusRemoteAccess {
				t.Errorf("write after Revoke: %+v, want remote-access-error", c)
			}
			if !bytes.Equal(before, all()) {
				t.Fatal("a write after Revoke changed the receiver's memory")
			}
			for i := 0; i < 4; i++ {
				if err := p.conn.PathErr(i); !errors.Is(err, ErrPathDown) {
					t.Errorf("PathErr(%d) = %v, want ErrPathDown after its remote access error", i, err)
				}
			}
		})
	}
}

// TestVMRxeWindowRangeUnchecked is the evidence for windowsConfine's
// deviation, and its canary: on this kernel's rdma_rxe a WRITE through a
// type 2 window lands outside the window as long as it stays inside the
// underlying MR. If it ever fails with a remote access error, rxe confines
// windows and windowsConfine can stop excluding it.
func TestVMRxeWindowRangeUnchecked(t *testing.T) {
	e := needVM(t)
	allowUnconfinedWindows = true
	defer func() { allowUnconfinedWindows = false }()
	const guard = 64 << 10
	region, all := guarded(t, guard)
	p := newPair(t, e, pairOpts{nics: 1, qpsPerNIC: 1, size: units.MiB, access: AccessMemoryWindow, region: region})
	if got := p.recv.Access(); got != AccessMemoryWindow {
		t.Fatalf("Receiver.Access() = %v, want memory-window", got)
	}
	// Inside the window: lands.
	if n, err := p.conn.PostSend(0, []qp.SendWR{{ID: 1, Op: qp.OpWrite, Len: 4096}}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if c := waitSend(t, p.conn, 1)[0]; c.Status != qp.StatusOK {
		t.Fatalf("write inside the window: %+v", c)
	}
	// 4 KiB past the window's end, still inside the pool MR.
	if n, err := p.conn.post(0, []qp.SendWR{{ID: 2, Op: qp.OpWrite, Remote: units.MiB, Len: 4096}}, false); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	c := waitSend(t, p.conn, 1)[0]
	if c.Status == qp.StatusRemoteAccess {
		t.Fatal("rxe now rejects writes outside a bound window: windowsConfine may allow memory windows on Soft-RoCE again")
	}
	if c.Status != qp.StatusOK || all()[guard+int(units.MiB)] == 0xEE {
		t.Fatalf("write past the window: %+v; guard byte %#x", c, all()[guard+int(units.MiB)])
	}
	t.Logf("rdma_rxe accepted a write %d bytes past a bound type 2 window: windows do not confine on this kernel", 4096)
}

// TestVMWindowModeRefusedOnRxe: asking for windows where they do not
// confine is an error naming why.
func TestVMWindowModeRefusedOnRxe(t *testing.T) {
	e := needVM(t)
	h, err := OpenHost(HostConfig{Devices: e.receiver[:1], PoolSize: 4 * units.MiB})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ln, err := h.Listen("127.0.0.1:0", ListenConfig{Secret: testSecret, Access: AccessMemoryWindow})
	if err == nil {
		ln.Close()
		t.Fatal("Listen(AccessMemoryWindow) on rxe succeeded; want an error")
	}
	if !strings.Contains(err.Error(), "underlying MR") {
		t.Errorf("Listen(AccessMemoryWindow) = %v; want the reason", err)
	}
}

// TestVMAccessMRCarriesData: the fallback access mode moves data too.
func TestVMAccessMRCarriesData(t *testing.T) {
	e := needVM(t)
	p := newPair(t, e, pairOpts{qpsPerNIC: 1, size: units.MiB, access: AccessMR})
	roundTrip(t, p, len(e.sender))
}

// rdmaCounts returns the "qp", "mr" and "pd" resource counts of dev
// (netlink RdmaResourceList; `rdma resource show`).
func rdmaCounts(t *testing.T, dev string) map[string]uint64 {
	t.Helper()
	rs, err := netlink.RdmaResourceList()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Name == dev {
			return r.RdmaResourceSummaryEntries
		}
	}
	t.Fatalf("no rdma resources for %s", dev)
	return nil
}

// TestVMWrongSecretRejected: a sender with the wrong secret is refused
// before the receiver creates anything (no QP, MR or window appears on its
// devices), learns nothing but "rejected", and the listener goes on to
// accept a sender that knows the secret.
func TestVMWrongSecretRejected(t *testing.T) {
	e := needVM(t)
	sh, err := OpenHost(HostConfig{Devices: e.sender, PoolSize: 8 * units.MiB})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	rh, err := OpenHost(HostConfig{Devices: e.receiver, PoolSize: 8 * units.MiB})
	if err != nil {
		t.Fatal(err)
	}
	defer rh.Close()
	var mu sync.Mutex
	var rejects []error
	ln, err := rh.Listen("127.0.0.1:0", ListenConfig{Secret: testSecret, OnReject: func(_ net.Addr, err error) {
		mu.Lock()
		rejects = append(rejects, err)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	send, err := sh.Alloc(units.MiB)
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]map[string]uint64{}
	for _, d := range append(append([]string{}, e.sender...), e.receiver...) {
		before[d] = rdmaCounts(t, d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	accepted := make(chan *Receiver, 1)
	go func() {
		r, err := ln.Accept(ctx)
		if err != nil {
			t.Error(err)
		}
		accepted <- r
	}()
	wrong := []byte("not-the-secret-at-all-0123456789")
	c, err := sh.Dial(ctx, ln.Addr().String(), DialConfig{Secret: wrong, Send: send})
	if !errors.Is(err, bootstrap.ErrAuth) {
		t.Fatalf("Dial with the wrong secret = %v, %v; want bootstrap.ErrAuth", c, err)
	}
	t.Logf("sender sees: %v", err)
	for i := 0; ; i++ {
		mu.Lock()
		n := len(rejects)
		mu.Unlock()
		if n > 0 {
			break
		}
		if i > 500 {
			t.Fatal("the listener never reported the rejected peer")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !errors.Is(rejects[0], bootstrap.ErrAuth) || ln.Rejected() != 1 {
		t.Errorf("listener rejection = %v (count %d), want one bootstrap.ErrAuth", rejects[0], ln.Rejected())
	}
	for d, b := range before {
		a := rdmaCounts(t, d)
		for _, k := range []string{"qp", "mr", "pd", "cq"} {
			if a[k] != b[k] {
				t.Errorf("%s: %s count %d -> %d across the rejected attempt; want unchanged", d, k, b[k], a[k])
			}
		}
	}
	// The right secret still gets in, on the same listener.
	c, err = sh.Dial(ctx, ln.Addr().String(), DialConfig{Secret: testSecret, Send: send})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := <-accepted
	if r == nil {
		t.Fatal("Accept returned no receiver for the good sender")
	}
	defer r.Close()
}

// sniffSports captures RoCEv2 packets on netdev for d and returns, per
// destination QPN (BTH), the UDP source ports seen.
type flowKey struct {
	src  [4]byte // IPv4 source
	dqpn uint32  // BTH destination QP
}

func sniffSports(t *testing.T, netdev string, d time.Duration, during func()) map[flowKey]map[uint16]bool {
	t.Helper()
	const ethPAll = 0x0003
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(ethPAll)))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ifc, err := net.InterfaceByName(netdev)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(ethPAll), Ifindex: ifc.Index}); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	out := map[flowKey]map[uint16]bool{}
	done := make(chan struct{})
	go func() { during(); close(done) }()
	buf := make([]byte, 16384)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			// Keep reading briefly: what the socket queued meanwhile.
			deadline = time.Now().Add(300 * time.Millisecond)
			done = nil
		default:
		}
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || n < 14+20+8+12 {
			continue
		}
		pkt := buf[:n]
		if pkt[12] != 0x08 || pkt[13] != 0x00 { // IPv4
			continue
		}
		ip := pkt[14:]
		ihl := int(ip[0]&0x0f) * 4
		if ip[9] != 17 || len(ip) < ihl+8+12 { // UDP
			continue
		}
		udp := ip[ihl:]
		sport := uint16(udp[0])<<8 | uint16(udp[1])
		dport := uint16(udp[2])<<8 | uint16(udp[3])
		if dport != 4791 {
			continue
		}
		bth := udp[8:]
		k := flowKey{dqpn: uint32(bth[5])<<16 | uint32(bth[6])<<8 | uint32(bth[7])}
		copy(k.src[:], ip[12:16])
		if out[k] == nil {
			out[k] = map[uint16]bool{}
		}
		out[k][sport] = true
	}
	return out
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// TestVMFlowEntropy: the QPs of one NIC pair carry distinct UDP source
// ports on the wire (what ECMP hashes), and PathInfo.SrcPort predicts
// them, in both directions.
func TestVMFlowEntropy(t *testing.T) {
	e := needVM(t)
	p := newPair(t, e, pairOpts{nics: 1, qpsPerNIC: 4, size: units.MiB})
	peer := strings.Replace(e.wires[0], "a", "b", 1) // va -> vb: the receiver's end of wire 0
	seen := sniffSports(t, peer, 20*time.Second, func() {
		for i := range p.conn.Paths() {
			wr := []qp.SendWR{{ID: uint64(i), Op: qp.OpWriteImm, Remote: 0, Len: 4096, Imm: 1}}
			if _, err := p.conn.PostSend(i, wr); err != nil {
				t.Error(err)
			}
		}
		waitSend(t, p.conn, len(p.conn.Paths()))
	})
	ports := map[uint16]int{}
	var sAddr, rAddr [4]byte
	copy(sAddr[:], p.sh.NICs()[0].GID.Raw[12:])
	copy(rAddr[:], p.rh.NICs()[0].GID.Raw[12:])
	for i, sp := range p.conn.Paths() {
		rp := p.recv.Paths()[i]
		toRecv := seen[flowKey{sAddr, rp.QPN}]
		if len(toRecv) != 1 || !toRecv[sp.SrcPort] {
			t.Errorf("path %d: packets to receiver QP %#x came from UDP ports %v, want exactly the predicted %d", i, rp.QPN, keys(toRecv), sp.SrcPort)
		}
		toSend := seen[flowKey{rAddr, sp.QPN}]
		if len(toSend) != 1 || !toSend[rp.SrcPort] {
			t.Errorf("path %d: ACKs to sender QP %#x came from UDP ports %v, want exactly the predicted %d", i, sp.QPN, keys(toSend), rp.SrcPort)
		}
		ports[sp.SrcPort]++
	}
	if len(ports) != len(p.conn.Paths()) {
		t.Errorf("%d paths share %d UDP source ports %v; want all distinct", len(p.conn.Paths()), len(ports), ports)
	}
	t.Logf("sender source ports per path: %v", ports)
}

func keys(m map[uint16]bool) []uint16 {
	var k []uint16
	for p := range m {
		k = append(k, p)
	}
	return k
}

// TestVMNotifyWakes: the wakeup channels fire for completions that arrive
// while the driver sleeps, again and again (the CQs stay armed).
func TestVMNotifyWakes(t *testing.T) {
	e := needVM(t)
	p := newPair(t, e, pairOpts{nics: 1, qpsPerNIC: 1, size: units.MiB})
	sch, rch := p.conn.Notify(), p.recv.Notify()
	buf := make([]qp.Completion, 8)
	for round := 0; round < 3; round++ {
		// Empty both channels and both CQs: nothing is pending.
		for _, ch := range []<-chan struct{}{sch, rch} {
			select {
			case <-ch:
			default:
			}
		}
		p.conn.Poll(buf)
		p.recv.Poll(buf)
		if _, err := p.conn.PostSend(0, []qp.SendWR{{ID: 1, Op: qp.OpWriteImm, Len: 4096, Imm: uint32(round)}}); err != nil {
			t.Fatal(err)
		}
		for name, ch := range map[string]<-chan struct{}{"sender": sch, "receiver": rch} {
			select {
			case <-ch:
			case <-time.After(20 * time.Second):
				t.Fatalf("round %d: the %s's wakeup channel never fired", round, name)
			}
		}
		waitSend(t, p.conn, 1)
		if c := waitRecv(t, p.recv, 1); c[0].Imm != uint32(round) {
			t.Fatalf("round %d: receive completion %+v", round, c[0])
		}
	}
}

// TestVMNoAllocsBatch: a batch of 16 work requests (one cgo crossing) and
// the polls that collect their 16 send and 1 receive completions allocate
// nothing, nor does reading the counters.
func TestVMNoAllocsBatch(t *testing.T) {
	e := needVM(t)
	p := newPair(t, e, pairOpts{nics: 1, qpsPerNIC: 1, size: units.MiB})
	wrs := make([]qp.SendWR, 16)
	for i := range wrs {
		wrs[i] = qp.SendWR{ID: uint64(i), Op: qp.OpWrite, Local: units.Bytes(i) * 4096, Remote: units.Bytes(i) * 4096, Len: 4096}
	}
	wrs[15].Op, wrs[15].Imm = qp.OpWriteImm, 9
	sbuf := make([]qp.Completion, 32)
	rbuf := make([]qp.Completion, 32)
	round := func() {
		if n, err := p.conn.PostSend(0, wrs); n != 16 || err != nil {
			t.Fatalf("PostSend = %d, %v", n, err)
		}
		got, gotR := 0, 0
		for got < 16 || gotR < 1 {
			n, err := p.conn.Poll(sbuf)
			if err != nil {
				t.Fatal(err)
			}
			got += n
			m, err := p.recv.Poll(rbuf)
			if err != nil {
				t.Fatal(err)
			}
			gotR += m
		}
		if _, err := p.conn.Counters(0); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		round()
	}
	if a := testing.AllocsPerRun(20, round); a != 0 {
		t.Fatalf("a 16-WR post + poll round allocates %.1f times; want 0", a)
	}
}

// TestVMHugePages: the pool maps hugetlb pages when they are reserved
// (job.sh reserves some).
func TestVMHugePages(t *testing.T) {
	e := needVM(t)
	h, err := OpenHost(HostConfig{Devices: e.sender[:1], PoolSize: 4 * units.MiB, HugePages: HugeRequire})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if !h.HugePages() || h.PoolSize() != 4*units.MiB {
		t.Fatalf("HugePages() = %v, PoolSize() = %v; want true, 4MiB", h.HugePages(), h.PoolSize())
	}
	b, err := h.Alloc(units.MiB)
	if err != nil {
		t.Fatal(err)
	}
	b.Bytes()[0] = 1
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
}

// TestVMCloseParentFirst closes the hosts while a connection and a
// receiver are still open: the tree closes children first (no EBUSY from
// ibv_dealloc_pd or ibv_close_device), and the later Closes are no-ops.
func TestVMCloseParentFirst(t *testing.T) {
	e := needVM(t)
	p := newPair(t, e, pairOpts{qpsPerNIC: 2, size: units.MiB})
	if err := p.sh.Close(); err != nil {
		t.Fatalf("sender Host.Close with a live Conn: %v", err)
	}
	if err := p.rh.Close(); err != nil {
		t.Fatalf("receiver Host.Close with a live Receiver: %v", err)
	}
	buf := make([]qp.Completion, 4)
	if _, err := p.conn.Poll(buf); !errors.Is(err, qp.ErrClosed) {
		t.Errorf("Conn.Poll after Host.Close = %v, want qp.ErrClosed", err)
	}
	if _, err := p.recv.Poll(buf); !errors.Is(err, qp.ErrClosed) {
		t.Errorf("Receiver.Poll after Host.Close = %v, want qp.ErrClosed", err)
	}
	if err := p.conn.Close(); err != nil {
		t.Errorf("Conn.Close after Host.Close: %v", err)
	}
	if err := p.recv.Close(); err != nil {
		t.Errorf("Receiver.Close after Host.Close: %v", err)
	}
	if err := p.sh.Close(); err != nil {
		t.Errorf("second Host.Close: %v", err)
	}
}

// TestVMLeakReport drops a registered buffer without Free: the cleanup
// reports it with the stack that created it and deregisters it.
func TestVMLeakReport(t *testing.T) {
	e := needVM(t)
	h, err := OpenHost(HostConfig{Devices: e.sender[:1], PoolSize: 4 * units.MiB})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	mem, err := unix.Mmap(-1, 0, int(units.MiB), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Leak, 4)
	treeMu.Lock()
	leakHook = func(l Leak) { got <- l }
	treeMu.Unlock()
	defer func() {
		treeMu.Lock()
		leakHook = nil
		treeMu.Unlock()
	}()
	func() {
		if _, err := h.Register(mem); err != nil { // never freed
			t.Fatal(err)
		}
	}()
	deadline := time.After(20 * time.Second)
	for {
		runtime.GC()
		select {
		case l := <-got:
			if l.Kind != "MR" || !strings.Contains(l.Stack, "TestVMLeakReport") {
				t.Fatalf("leak report %v; want the MR with this test in its creation stack", l)
			}
			t.Logf("%v", l)
			if err := unix.Munmap(mem); err != nil {
				t.Fatal(err)
			}
			return
		case <-deadline:
			t.Fatal("the unfreed buffer was never reported")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestVMPortDown takes wire 1 down: the async PORT_ERR event marks its
// path down at once (PostSend fails with ErrPathDown) while path 0 keeps
// working; bringing it up clears the mark.
func TestVMPortDown(t *testing.T) {
	e := needVM(t)
	p := newPair(t, e, pairOpts{qpsPerNIC: 1, size: units.MiB})
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	ip("link", "set", e.wires[1], "down")
	upAgain := false
	defer func() {
		if !upAgain {
			ip("link", "set", e.wires[1], "up")
		}
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for i := 0; !cond(); i++ {
			if i > 2000 {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("path 1 to go down", func() bool { return p.conn.PathErr(1) != nil })
	if _, err := p.conn.PostSend(1, []qp.SendWR{{ID: 1, Op: qp.OpWriteImm, Len: 4096}}); !errors.Is(err, ErrPathDown) {
		t.Errorf("PostSend on the downed path = %v, want ErrPathDown", err)
	}
	if _, err := p.conn.PostSend(0, []qp.SendWR{{ID: 2, Op: qp.OpWriteImm, Len: 4096}}); err != nil {
		t.Fatalf("PostSend on path 0: %v", err)
	}
	if c := waitSend(t, p.conn, 1); c[0].Status != qp.StatusOK {
		t.Errorf("path 0 completion %+v", c[0])
	}
	ip("link", "set", e.wires[1], "up")
	upAgain = true
	if err := rxeWaitActive(e.sender[1]); err != nil {
		t.Fatal(err)
	}
	waitFor("path 1 to come back", func() bool { return p.conn.PathErr(1) == nil })
	t.Logf("path 1 was down: %v", "PORT_ERR seen, then PORT_ACTIVE")
}

func rxeWaitActive(dev string) error {
	for i := 0; i < 200; i++ {
		b, _ := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/state")
		if strings.Contains(string(b), "ACTIVE") {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New(dev + " did not become ACTIVE again")
}

// TestVMResetPath breaks a path's QP (error state, as after retry
// exhaustion), then brings it back with Conn.Reset (qp.Resetter): both
// ends go through RESET with fresh PSNs and the path carries data again,
// while resetting a healthy path changes nothing.
func TestVMResetPath(t *testing.T) {
	for _, access := range []Access{AccessAuto, AccessMemoryWindow} {
		t.Run(access.String(), func(t *testing.T) {
			e := needVM(t)
			if access == AccessMemoryWindow {
				// Exercise the window rebind of a reset QP (rxe's windows do
				// not confine, see windowsConfine, but they do bind).
				allowUnconfinedWindows = true
				defer func() { allowUnconfinedWindows = false }()
			}
			p := newPair(t, e, pairOpts{qpsPerNIC: 1, size: units.MiB, access: access})
			oldKey := p.recv.Rkey(0)
			src := p.send.Bytes()
			for i := range src {
				src[i] = byte(i * 13)
			}
			if err := p.conn.Reset(1); err != nil {
				t.Fatalf("Reset of a healthy path: %v", err)
			}
			if err := p.conn.breakPath(0); err != nil {
				t.Fatal(err)
			}
			if _, err := p.conn.PostSend(0, []qp.SendWR{{ID: 1, Op: qp.OpWriteImm, Len: 4096, Imm: 1}}); err == nil {
				if c := waitSend(t, p.conn, 1)[0]; c.Status == qp.StatusOK {
					t.Fatalf("a write on the broken path completed %+v", c)
				}
			}
			if err := p.conn.PathErr(0); err == nil {
				t.Fatal("path 0 is not down after its QP errored")
			}
			if err := p.conn.Reset(0); err != nil {
				t.Fatalf("Reset(0): %v", err)
			}
			if err := p.conn.PathErr(0); err != nil {
				t.Fatalf("PathErr(0) after Reset = %v, want nil", err)
			}
			if access == AccessMemoryWindow && p.recv.Rkey(0) == oldKey {
				t.Errorf("the window was not rebound: rkey %#x unchanged", oldKey)
			}
			for round := 0; round < 2; round++ {
				wr := []qp.SendWR{{ID: uint64(10 + round), Op: qp.OpWriteImm, Local: 64 << 10, Remote: 64 << 10, Len: 256 << 10, Imm: uint32(0x77 + round)}}
				if n, err := p.conn.PostSend(0, wr); n != 1 || err != nil {
					t.Fatalf("PostSend after Reset = %d, %v", n, err)
				}
				if c := waitSend(t, p.conn, 1)[0]; c.Status != qp.StatusOK || c.ID != uint64(10+round) || c.Op != qp.OpWriteImm || c.Bytes != 256<<10 {
					t.Fatalf("write after Reset completed %+v", c)
				}
				if c := waitRecv(t, p.recv, 1)[0]; c.Imm != uint32(0x77+round) || c.Path != 0 {
					t.Fatalf("receiver after Reset saw %+v", c)
				}
			}
			if !bytes.Equal(p.recv.Region()[64<<10:320<<10], src[64<<10:320<<10]) {
				t.Fatal("the bytes written after Reset differ")
			}
			// The other path never noticed.
			roundTrip(t, p, len(e.sender))
		})
	}
}
