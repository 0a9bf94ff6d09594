package rxe_test

// Sessions over real verbs (the session API, mptx.Dial and mptx.Listen, in
// this process): both ends' queue pairs set up over the session's control
// channel, on the VM's rxe devices.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/verbs"
	"github.com/mptx-dev/mptx/units"
)

var sessionSecret = []byte("rxe session test secret, 32 B..!")

// sessOpts shape a session pair on the VM's devices.
type sessOpts struct {
	nics      int            // wires used (paths: one RC QP per wire)
	send      units.Bytes    // sender's Config.SendBuffer
	region    units.Bytes    // receiver's Config.RegionSize (unless regionMem)
	regionMem []byte         // receiver's Config.Region (zero-copy)
	qp        verbs.QPConfig // both ends; default: rxe's slow-link settings
	minStall  time.Duration  // Engine.MinTimeout; default 3 s
	sendTr    mptx.Transport
	sendDevs  []string // default the sender devices of the wires used
	recvDevs  []string
	noCRC     bool
}

// rxeEngine are the engine settings of the CLI tests' slowLink (see there)
// for Soft-RoCE under TCG.
func rxeEngine(minStall time.Duration) multipath.Config {
	return multipath.Config{ChunkSize: units.MiB, Segment: units.MiB, MaxInFlight: 16 * units.MiB, MinTimeout: minStall,
		Pacing: multipath.PacingConfig{PFCXoff: 16 * units.MiB}}
}

// sessionConfigs returns the sending and receiving Config for o.
func (e env) sessionConfigs(o sessOpts) (snd, rcv mptx.Config) {
	if o.nics == 0 {
		o.nics = 2
	}
	if o.qp == (verbs.QPConfig{}) {
		o.qp = verbs.QPConfig{Timeout: 500 * time.Millisecond, RetryCount: 3}
	}
	if o.minStall == 0 {
		o.minStall = 3 * time.Second
	}
	if o.sendDevs == nil {
		o.sendDevs = e.sender[:o.nics]
	}
	if o.recvDevs == nil {
		o.recvDevs = e.receiver[:o.nics]
	}
	if o.sendTr == "" {
		o.sendTr = mptx.TransportVerbs
	}
	snd = mptx.Config{Secret: sessionSecret, Transport: o.sendTr, SendBuffer: o.send, Engine: rxeEngine(o.minStall), Timeout: setupTimeout, NoChecksum: o.noCRC,
		Verbs: mptx.VerbsConfig{Devices: o.sendDevs, QPsPerNIC: 1, QP: o.qp}}
	rcv = mptx.Config{Secret: sessionSecret, RegionSize: o.region, Region: o.regionMem, Timeout: setupTimeout, NoChecksum: o.noCRC,
		Verbs: mptx.VerbsConfig{Devices: o.recvDevs, QP: o.qp}}
	if o.regionMem != nil {
		rcv.RegionSize = 0
	}
	return snd, rcv
}

// setupTimeout is the sessions' Config.Timeout. Under TCG, with the host
// loaded, setting a verbs session up has taken 13–34 s (CI) and over a
// minute (a host running the race tests beside the VM): the acceptor then
// gives up and the dialer sees the control connection close.
const setupTimeout = 3 * time.Minute

// sessions opens a sending and a receiving session on loopback control
// (the data goes over the rxe wires); it fails the test unless both run
// over want.
func (e env) sessions(t testing.TB, o sessOpts, want mptx.Transport) (snd, rcv *mptx.Session) {
	t.Helper()
	snd, rcv, err := e.trySessions(t, o)
	if err != nil {
		t.Fatal(err)
	}
	if snd.Transport() != want || rcv.Transport() != want {
		t.Fatalf("transports: sender %v, receiver %v; want %v", snd.Transport(), rcv.Transport(), want)
	}
	return snd, rcv
}

func (e env) trySessions(t testing.TB, o sessOpts) (snd, rcv *mptx.Session, err error) {
	t.Helper()
	scfg, rcfg := e.sessionConfigs(o)
	ln, err := mptx.Listen("127.0.0.1:0", rcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*setupTimeout)
	defer cancel()
	start := time.Now()
	snd, err = mptx.Dial(ctx, ln.Addr().String(), scfg)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { snd.Close() })
	rcv, err = ln.Accept(ctx)
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	t.Cleanup(func() { rcv.Close() })
	t.Logf("session set up over %v in %v", snd.Transport(), time.Since(start).Round(time.Millisecond))
	return snd, rcv, nil
}

// pattern is tensor id's content: a xorshift stream, so that any byte
// out of place shows.
func pattern(id, size int) []byte {
	b := make([]byte, size)
	x := uint32(id)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// checkTensor compares every byte of a received tensor with its pattern.
func checkTensor(t testing.TB, tn *mptx.Tensor, id, size int) {
	t.Helper()
	want := pattern(id, size)
	if len(tn.Data) != size {
		t.Fatalf("tensor %q: %d bytes, want %d", tn.Name, len(tn.Data), size)
	}
	if !bytes.Equal(tn.Data, want) {
		i := 0
		for i < size && tn.Data[i] == want[i] {
			i++
		}
		t.Fatalf("tensor %q: byte %d is %#x, want %#x", tn.Name, i, tn.Data[i], want[i])
	}
}

// TestSessionVerbsTensors ships tensors of several sizes through a session
// over two verbs paths, every byte checked (and the CRC32C by the
// session); then the same into a region the caller mapped itself
// (Config.Region: zero-copy, the tensors land in the caller's memory).
func TestSessionVerbsTensors(t *testing.T) {
	e := needVM(t)
	sizes := []int{1, 4095, 1<<20 + 3, 13<<20 + 7, 24 << 20}
	run := func(t *testing.T, o sessOpts) (pathBytes []units.Bytes) {
		snd, rcv := e.sessions(t, o, mptx.TransportVerbs)
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		pathBytes = make([]units.Bytes, o.nics)
		errc := make(chan error, 1)
		go func() {
			for i, n := range sizes {
				tr, err := snd.SendAsync(ctx, fmt.Sprintf("t%d", i), pattern(i, n))
				if err == nil {
					err = tr.Wait(ctx)
				}
				if err != nil {
					errc <- fmt.Errorf("Send t%d (%d bytes): %w", i, n, err)
					return
				}
				for p, b := range tr.Stats().PathBytes {
					pathBytes[p] += b
				}
			}
			errc <- nil
		}()
		for i, n := range sizes {
			tn, err := rcv.Recv(ctx)
			if err != nil {
				t.Fatalf("Recv %d: %v", i, err)
			}
			if tn.Name != fmt.Sprintf("t%d", i) {
				t.Fatalf("tensor %d is named %q", i, tn.Name)
			}
			checkTensor(t, tn, i, n)
			if o.regionMem != nil {
				base := uintptr(unsafe.Pointer(&o.regionMem[0]))
				if p := uintptr(unsafe.Pointer(&tn.Data[0])); p < base || p >= base+uintptr(len(o.regionMem)) {
					t.Fatalf("tensor %d is at %#x, outside the caller's region [%#x, +%d): not zero-copy", i, p, base, len(o.regionMem))
				}
			}
			tn.Release()
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		return pathBytes
	}
	t.Run("pool", func(t *testing.T) {
		pb := run(t, sessOpts{nics: 2, send: 32 * units.MiB, region: 32 * units.MiB})
		if pb[0] == 0 || pb[1] == 0 {
			t.Errorf("bytes by path %v: want both paths used", pb)
		}
		e.report(t, "session over verbs, 2 paths: %d tensors (1 B .. 24 MiB) intact; bytes by path %v", len(sizes), pb)
	})
	t.Run("zero-copy", func(t *testing.T) {
		mem, err := unix.Mmap(-1, 0, 32<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		// Registered first, so run after the sessions' Close (which
		// returns once the region is deregistered, every tensor being
		// released): the memory is the caller's again.
		t.Cleanup(func() {
			if err := unix.Munmap(mem); err != nil {
				t.Error(err)
			}
		})
		run(t, sessOpts{nics: 2, send: 32 * units.MiB, regionMem: mem})
		e.report(t, "session over verbs into the caller's mmap'd region (Config.Region): %d tensors intact, in place", len(sizes))
	})
}

// TestSessionVerbsConcurrent: 8 goroutines each keep 8 transfers in flight
// (64 at once) on one session over two verbs paths; every byte of every
// tensor is checked.
func TestSessionVerbsConcurrent(t *testing.T) {
	e := needVM(t)
	const senders, each, size = 8, 8, 256 << 10
	snd, rcv := e.sessions(t, sessOpts{nics: 2, send: 32 * units.MiB, region: 32 * units.MiB}, mptx.TransportVerbs)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, senders)
	start := time.Now()
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var ts []*mptx.Transfer
			for k := 0; k < each; k++ {
				id := g*each + k
				tr, err := snd.SendAsync(ctx, fmt.Sprintf("g%d/%d", g, k), pattern(id, size+id))
				if err != nil {
					errc <- err
					return
				}
				ts = append(ts, tr)
			}
			for _, tr := range ts {
				if err := tr.Wait(ctx); err != nil {
					errc <- fmt.Errorf("%s: %w", tr.Name, err)
					return
				}
			}
		}(g)
	}
	seen := map[string]bool{}
	for i := 0; i < senders*each; i++ {
		tn, err := rcv.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv %d: %v", i, err)
		}
		var g, k int
		if _, err := fmt.Sscanf(tn.Name, "g%d/%d", &g, &k); err != nil || seen[tn.Name] {
			t.Fatalf("tensor %q: bad or duplicate name (%v)", tn.Name, err)
		}
		seen[tn.Name] = true
		id := g*each + k
		checkTensor(t, tn, id, size+id)
		tn.Release()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	e.report(t, "session over verbs: %d goroutines x %d transfers in flight, %d tensors intact in %v", senders, each, senders*each, time.Since(start).Round(time.Millisecond))
}

// TestSessionVerbsPathDown takes wire 1 down (`ip link set wa down`) once
// it carried 2 MiB of four 16 MiB tensors in flight: every tensor still
// arrives intact, over wire 0; then the wire comes back and the session
// goes on.
func TestSessionVerbsPathDown(t *testing.T) {
	e := needVM(t)
	wire := e.wires[1]
	snd, rcv := e.sessions(t, sessOpts{nics: 2, send: 64 * units.MiB, region: 64 * units.MiB}, mptx.TransportVerbs)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	up := true
	defer func() {
		if !up {
			setLink(t, wire, true)
			waitActive(t, e.sender[1])
		}
	}()
	const n, size = 4, 16 << 20
	data := make([][]byte, n)
	for i := range data {
		data[i] = pattern(100+i, size)
	}
	// Watch the wire from before the first SendAsync: the first tensors
	// are on their way while the later ones are still being staged.
	type down struct {
		at  int64
		err error
	}
	watched, ended := make(chan down, 1), make(chan struct{})
	base := txBytes(t, wire)
	go func() {
		at, err := watchDown(wire, base, 2<<20, func() bool {
			select {
			case <-ended:
				return true
			default:
				return false
			}
		})
		watched <- down{at, err}
	}()
	var ts []*mptx.Transfer
	for i := 0; i < n; i++ {
		tr, err := snd.SendAsync(ctx, fmt.Sprintf("t%d", i), data[i])
		if err != nil {
			close(ended)
			t.Fatal(err)
		}
		ts = append(ts, tr)
	}
	go func() {
		select {
		case <-ts[n-1].Done():
		case <-ctx.Done():
		}
		close(ended)
	}()
	w := <-watched
	downAt := w.at
	if w.err != nil {
		t.Fatal(w.err)
	}
	if downAt == 0 {
		t.Fatalf("the transfers ended (%v) before %s carried 2 MiB; nothing was taken down", ts[n-1].Err(), wire)
	}
	up = false
	for i := 0; i < n; i++ {
		tn, err := rcv.Recv(ctx)
		if err != nil {
			dumpSessions(t, snd, rcv, ts)
			t.Fatalf("Recv %d after %s went down: %v", i, wire, err)
		}
		var k int
		fmt.Sscanf(tn.Name, "t%d", &k)
		checkTensor(t, tn, 100+k, size)
		tn.Release()
	}
	var bytesBy [2]units.Bytes
	requeues := 0
	for _, tr := range ts {
		if err := tr.Wait(ctx); err != nil {
			t.Fatalf("%s: %v", tr.Name, err)
		}
		st := tr.Stats()
		requeues += st.Requeues
		for p, b := range st.PathBytes {
			bytesBy[p] += b
		}
	}
	if bytesBy[0] <= bytesBy[1] {
		t.Errorf("bytes by path %v: want path 0 to carry the rest after path 1 went down", bytesBy)
	}
	if requeues == 0 {
		t.Errorf("no chunk was requeued after %s went down at %.1f MiB: the failover was not exercised", wire, float64(downAt)/(1<<20))
	}
	setLink(t, wire, true)
	up = true
	waitActive(t, e.sender[1])
	if err := snd.Send(ctx, "after", pattern(7, 4<<20)); err != nil {
		t.Fatalf("Send after the wire came back: %v", err)
	}
	tn, err := rcv.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkTensor(t, tn, 7, 4<<20)
	tn.Release()
	e.report(t, "session over verbs, %s down after %.1f MiB of 4 x 16 MiB in flight: all intact; bytes by path %v, %d requeues; the session went on after", wire, float64(downAt)/(1<<20), bytesBy, requeues)
}

// dumpSessions logs what each end knows, for a test that gave up waiting:
// every transfer's state and statistics, the paths and the receiver's
// counters.
func dumpSessions(t testing.TB, snd, rcv *mptx.Session, ts []*mptx.Transfer) {
	t.Helper()
	for _, tr := range ts {
		select {
		case <-tr.Done():
			t.Logf("transfer %s: done, err %v, %+v", tr.Name, tr.Err(), tr.Stats())
		default:
			t.Logf("transfer %s: in flight, %+v", tr.Name, tr.Stats())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range []*mptx.Session{snd, rcv} {
		st, err := s.Stats(ctx)
		if err != nil {
			t.Logf("stats: %v", err)
			continue
		}
		for i, p := range st.Paths {
			t.Logf("path %d: %+v err %q", i, p.Engine, p.Err)
		}
		t.Logf("resets %d (%d failed), receiver %+v", st.Resets, st.ResetErrors, st.Receiver)
	}
}

// netem holds wire's egress packets back by delay until the test ends.
func netem(t testing.TB, wire string, args ...string) {
	t.Helper()
	a := append([]string{"qdisc", "replace", "dev", wire, "root", "netem"}, args...)
	if out, err := exec.Command("tc", a...).CombinedOutput(); err != nil {
		t.Fatalf("tc %v: %v: %s", a, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("tc", "qdisc", "del", "dev", wire, "root").Run() })
}

// TestSessionVerbsStallFence is issue 9's corruption scenario on verbs: a
// path stalls (its wire holds every packet back for 25 s, netem; its QP
// stays healthy, the ACK timeout being 4 s with 7 retries) while tensor A
// is in flight. The engine gives up on the path, fences it (verbs
// Conn.Reset: the QP to the error state, both ends reset with fresh PSNs)
// and finishes A over path 0; A is released, and tensor B reuses its range
// of the region (the region is exactly one tensor). The held writes of A
// reach the receiver's NIC seconds after B landed: B must still be intact
// then, every byte.
func TestSessionVerbsStallFence(t *testing.T) {
	e := needVM(t)
	const size = 4 << 20
	const hold = 25 * time.Second
	snd, rcv := e.sessions(t, sessOpts{nics: 2, send: 2 * size, region: size, minStall: 2 * time.Second,
		qp: verbs.QPConfig{Timeout: 4 * time.Second, RetryCount: 7}}, mptx.TransportVerbs)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rdev := e.receiver[1]
	rcvd0 := hwCounter(rdev, "rcvd_pkts")
	netem(t, e.wires[1], "delay", strconv.Itoa(int(hold.Milliseconds()))+"ms", "limit", "100000")
	held := time.Now()
	trA, err := snd.SendAsync(ctx, "A", pattern(1, size))
	if err != nil {
		t.Fatal(err)
	}
	a, err := rcv.Recv(ctx)
	if err != nil {
		t.Fatalf("Recv A: %v", err)
	}
	func() {
		defer a.Release() // A's range is free for B then (the test reads only a.Offset after)
		checkTensor(t, a, 1, size)
	}()
	if err := trA.Wait(ctx); err != nil {
		t.Fatalf("A: %v", err)
	}
	stA := trA.Stats()
	aDone := time.Since(held)
	if err := snd.Send(ctx, "B", pattern(2, size)); err != nil {
		t.Fatalf("B: %v", err)
	}
	b, err := rcv.Recv(ctx)
	if err != nil {
		t.Fatalf("Recv B: %v", err)
	}
	defer b.Release()
	if b.Offset != a.Offset {
		t.Fatalf("B landed at %v, A at %v: B does not reuse A's range, the test shows nothing", b.Offset, a.Offset)
	}
	checkTensor(t, b, 2, size)
	bDone := time.Since(held)
	t.Logf("A done %v after the stall began (%+v), B %v", aDone.Round(time.Millisecond), stA, bDone.Round(time.Millisecond))
	if bDone >= hold {
		t.Fatalf("B landed %v after the stall began, past the %v hold: the held writes of A may have arrived before it, the test shows nothing", bDone, hold)
	}
	time.Sleep(hold + 3*time.Second - bDone)
	rcvd := hwCounter(rdev, "rcvd_pkts") - rcvd0
	checkTensor(t, b, 2, size) // after the held writes of A arrived
	if stA.Requeues == 0 {
		t.Errorf("A was not requeued off the stalled path (stats %+v): the stall was never seen", stA)
	}
	e.report(t, "session over verbs, path 1 stalled (netem %v): A done at %v (%d requeues, bytes by path %v), B reused A's range, done at %v, intact after the held writes arrived (%s rcvd_pkts +%d)",
		hold, aDone.Round(time.Millisecond), stA.Requeues, stA.PathBytes, bDone.Round(time.Millisecond), rdev, rcvd)
}

func hwCounter(dev, name string) int64 {
	b, err := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/hw_counters/" + name)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v
}

// TestSessionVerbsAutoFallback: wire 0 loses every packet (netem loss
// 100%) but its rxe ports stay ACTIVE, so both ends look verbs-capable; the
// sender's RTT probes cannot cross, and a session set to auto falls back
// to TCP on its control channel and ships the tensor; set to verbs, Dial
// fails and says why.
func TestSessionVerbsAutoFallback(t *testing.T) {
	e := needVM(t)
	netem(t, e.wires[0], "loss", "100%")
	o := sessOpts{nics: 1, send: 8 * units.MiB, region: 8 * units.MiB, sendTr: mptx.TransportAuto}
	snd, rcv := e.sessions(t, o, mptx.TransportTCP)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() { _ = snd.Send(ctx, "t", pattern(3, 4<<20)) }()
	tn, err := rcv.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkTensor(t, tn, 3, 4<<20)
	tn.Release()
	o.sendTr = mptx.TransportVerbs
	_, _, err = e.trySessions(t, o)
	if err == nil || !strings.Contains(err.Error(), "verbs") {
		t.Fatalf("Dial with --transport verbs over a wire that drops everything = %v, want an error naming the verbs failure", err)
	}
	e.report(t, "auto over an unreachable verbs path fell back to TCP (tensor intact); forced verbs: %s", firstLine(err.Error()))
}

// BenchmarkPerftestSession compares a verbs session's throughput on one
// path with ib_write_bw on the same wire in the same VM run, like
// BenchmarkPerftestCLI does for the CLI: one operation is three rounds
// alternating, the ratio is best session over best ib_write_bw (the
// issue's target: >= 0.8), reported, not asserted. A round ships 64 MiB as
// four 16 MiB tensors in flight at once (SendAsync, each CRC32C-checked by
// the receiver), timed from the first SendAsync to the last transfer's
// end. Under TCG the numbers swing with the host's load, which the report
// quotes (the guest's and, when scripts/rxe-test.sh recorded it, the
// host's).
func BenchmarkPerftestSession(b *testing.B) {
	e := needVM(b)
	snd, rcv := e.sessions(b, sessOpts{nics: 1, send: 64 * units.MiB, region: 64 * units.MiB}, mptx.TransportVerbs)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute*time.Duration(b.N))
	defer cancel()
	const n, size, rounds = 4, 16 << 20, 3
	data := make([][]byte, n)
	for i := range data {
		data[i] = pattern(200+i, size)
	}
	recvErr := make(chan error, 1)
	go func() {
		for i := 0; i < rounds*n*b.N; i++ {
			tn, err := rcv.Recv(ctx)
			if err != nil {
				recvErr <- err
				return
			}
			tn.Release()
		}
		recvErr <- nil
	}()
	for op := 0; op < b.N; op++ {
		var refs, ours []float64
		for round := 0; round < rounds; round++ {
			ref := ibWriteBW(b, ctx, e.sender[0], e.receiver[0], 18600+round, 3*time.Second)
			start := time.Now()
			var ts []*mptx.Transfer
			for i := 0; i < n; i++ {
				tr, err := snd.SendAsync(ctx, fmt.Sprintf("o%d/r%d/%d", op, round, i), data[i])
				if err != nil {
					b.Fatal(err)
				}
				ts = append(ts, tr)
			}
			for _, tr := range ts {
				if err := tr.Wait(ctx); err != nil {
					b.Fatalf("%s: %v", tr.Name, err)
				}
			}
			gbps := float64(n*size*8) / time.Since(start).Seconds() / 1e9
			b.Logf("round %d: ib_write_bw %.3f Gbit/s, session %.3f Gbit/s", round, ref, gbps)
			refs, ours = append(refs, ref), append(ours, gbps)
		}
		if best(refs) <= 0 {
			b.Fatal("ib_write_bw measured nothing")
		}
		ratio := best(ours) / best(refs)
		reportRatio(b, best(ours), best(refs), ratio)
		e.report(b, "throughput through the session API, one path %s->%s: ib_write_bw %.3f Gbit/s (samples %.3f), session %.3f Gbit/s (4 x 16 MiB in flight, CRC32C on; samples %.3f); ratio %.2f (target >= 0.8); load: %s",
			e.sender[0], e.receiver[0], best(refs), refs, best(ours), ours, ratio, loadNote())
	}
	if err := <-recvErr; err != nil {
		b.Fatal(err)
	}
}

// loadNote describes the load the run saw: the guest's load average and
// the host's, sampled by scripts/rxe-test.sh into the share.
func loadNote() string {
	g, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(g))
	s := "guest " + strings.Join(f[:min(3, len(f))], " ")
	if share := os.Getenv("MPTX_RXE_SHARE"); share != "" {
		if h, err := os.ReadFile(filepath.Join(share, "host-load.txt")); err == nil {
			lines := strings.Split(strings.TrimSpace(string(h)), "\n")
			s += "; host (2 cores) " + lines[len(lines)-1]
		}
	}
	return s
}
