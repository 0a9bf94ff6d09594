// Package e2e_test runs the mptx driver (mptx.Sender, mptx.Receiver,
// mptx.Loop) over the TCP backend on real sockets: whole tensors, every
// byte verified, with and without a path dying mid-transfer, and (as root)
// over rate-shaped veth pairs in a network namespace.
package e2e_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/qp/tcp/internal/leak"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

var secret = []byte("e2e secret: 32 bytes of nonsense")

// rig is a Sender and a Receiver connected through the TCP backend, each
// run by its own mptx.Loop goroutine, as on two machines.
type rig struct {
	t     testing.TB
	ln    *tcp.Listener
	conn  *tcp.Conn
	recv  *tcp.Receiver
	snd   *mptx.Sender
	rcv   *mptx.Receiver
	send  []byte
	clock *vtime.Monotonic

	// Owned by the loops until they return.
	sendErr, recvErr   error
	sendDone, recvDone bool
}

type rigConfig struct {
	size   units.Bytes
	listen string // listener address; default 127.0.0.1:0
	dial   string // dial address; default the listener's
	paths  []tcp.PathConfig
	// dialFn, if set, computes paths once the listener exists.
	dialFn func() []tcp.PathConfig
	engine multipath.Config
	// listenIn, if set, creates the listener (e.g. inside a network
	// namespace).
	listenIn func(func() (*tcp.Listener, error)) (*tcp.Listener, error)
}

func newRig(t testing.TB, rc rigConfig) *rig {
	t.Helper()
	r := &rig{t: t, clock: vtime.NewMonotonic()}
	if rc.listen == "" {
		rc.listen = "127.0.0.1:0"
	}
	listen := func() (*tcp.Listener, error) { return tcp.Listen(rc.listen, tcp.ListenConfig{Secret: secret}) }
	var err error
	if rc.listenIn != nil {
		r.ln, err = rc.listenIn(listen)
	} else {
		r.ln, err = listen()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.ln.Close() })
	if rc.dial == "" {
		rc.dial = r.ln.Addr().String()
	}
	if rc.dialFn != nil {
		rc.paths = rc.dialFn()
	}
	r.send = make([]byte, rc.size)
	for i := range r.send {
		r.send[i] = byte(i*131 + i>>12 + i>>20)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan error, 1)
	go func() {
		var err error
		r.recv, err = r.ln.Accept(ctx, make([]byte, rc.size))
		accepted <- err
	}()
	r.conn, err = tcp.Dial(ctx, rc.dial, tcp.DialConfig{Secret: secret, Paths: rc.paths, SendRegion: r.send})
	aerr := <-accepted
	if r.recv != nil {
		t.Cleanup(func() { r.recv.Close() })
	}
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { r.conn.Close() })
	if aerr != nil {
		t.Fatalf("Accept: %v", aerr)
	}
	cfg := mptx.SenderConfig{Engine: rc.engine}
	cfg.OnDone = func(_ multipath.TransferID, _ vtime.Time, err error) { r.sendDone, r.sendErr = true, err }
	if r.snd, err = mptx.NewSender(r.conn, cfg); err != nil {
		t.Fatal(err)
	}
	r.rcv, err = mptx.NewReceiver(r.recv, mptx.ReceiverConfig{
		OnDone: func(_ multipath.TransferID, _ vtime.Time, err error) { r.recvDone, r.recvErr = true, err },
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// transfer moves the whole send region to the receiver and returns how
// long it took. during, if set, runs in its own goroutine meanwhile and is
// told through stop when the transfer is over.
func (r *rig) transfer(id multipath.TransferID, during func(stop <-chan struct{})) time.Duration {
	t := r.t
	t.Helper()
	start := r.clock.Now()
	slot, plan, err := r.snd.Submit(start, multipath.TransferSpec{ID: id, Size: units.Bytes(len(r.send))})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.rcv.Expect(slot, id, plan, 0); err != nil {
		t.Fatal(err)
	}
	// A liveness bound, not a speed check: a stuck transfer fails here
	// instead of hanging the test binary.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sendFinished := make(chan struct{}) // closed when the sender's loop returns
	senderFailed := make(chan struct{}) // closed when the sender reports a failure
	var wg sync.WaitGroup
	if during != nil {
		wg.Add(1)
		go func() { defer wg.Done(); during(sendFinished) }()
	}
	var sendLoopErr, recvLoopErr error
	var end vtime.Time
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(sendFinished)
		sendLoopErr = mptx.Loop(ctx, mptx.LoopConfig{Clock: r.clock, Wake: r.conn.Notify(), Done: func() bool { return r.sendDone }}, r.snd)
		end = r.clock.Now()
		if r.sendErr != nil {
			close(senderFailed)
		}
	}()
	go func() {
		defer wg.Done()
		recvLoopErr = mptx.Loop(ctx, mptx.LoopConfig{Clock: r.clock, Wake: r.recv.Notify(), Done: func() bool {
			select {
			case <-senderFailed:
				return true
			default:
				return r.recvDone
			}
		}}, r.rcv)
	}()
	wg.Wait()
	if sendLoopErr != nil || recvLoopErr != nil {
		t.Fatalf("loops: sender %v, receiver %v (sender done %v, receiver done %v)", sendLoopErr, recvLoopErr, r.sendDone, r.recvDone)
	}
	if r.sendErr != nil || r.recvErr != nil {
		t.Fatalf("transfer %d: sender %v, receiver %v", id, r.sendErr, r.recvErr)
	}
	return end.Sub(start)
}

// verify closes both ends (so that no path goroutine can still write) and
// compares the receive region with the send region byte for byte.
func (r *rig) verify() {
	r.t.Helper()
	r.conn.Close()
	r.recv.Close()
	got := r.recv.Region()
	if bytes.Equal(got, r.send) {
		return
	}
	bad, first := 0, -1
	for i := range got {
		if got[i] != r.send[i] {
			bad++
			if first < 0 {
				first = i
			}
		}
	}
	r.t.Fatalf("received tensor differs from the sent one in %d of %d bytes, first at offset %d", bad, len(got), first)
}

func gbps(n units.Bytes, d time.Duration) float64 { return float64(n) * 8 / d.Seconds() / 1e9 }

// engineConfig is the engine setup for loopback: DCQCN (no CNPs arrive, so
// it holds line rate), 1 MiB chunks, 4 MiB in flight per path (the default
// 2·BDP of a 50 µs loopback RTT would starve the pipe) and a stall timeout
// loose enough for a loaded 2-core CI machine under the race detector.
func engineConfig() multipath.Config {
	return multipath.Config{ChunkSize: units.MiB, MaxInFlight: 4 * units.MiB, MinTimeout: 500 * time.Millisecond}
}

// TestTensor64MiB moves a 64 MiB tensor over 3 loopback paths.
func TestTensor64MiB(t *testing.T) {
	leak.Check(t)
	const size = 64 * units.MiB
	r := newRig(t, rigConfig{size: size, paths: make([]tcp.PathConfig, 3), engine: engineConfig()})
	d := r.transfer(1, nil)
	var split [3]units.Bytes
	for i := range split {
		split[i] = r.conn.PathBytes(i)
	}
	r.verify()
	rs := r.rcv.Stats()
	if rs.Chunks != 64 {
		t.Errorf("receiver counted %d distinct chunks, want 64", rs.Chunks)
	}
	for i := range split {
		st := r.snd.Engine().Stats(i)
		if split[i] == 0 {
			t.Errorf("path %d carried nothing (%+v); want all 3 paths used", i, st)
		}
	}
	t.Logf("64 MiB over 3 TCP paths in %v: %.2f Gbit/s; bytes per path %v; duplicates %d", d, gbps(size, d), split, rs.Duplicates)
}

// TestPathKilledMidTransfer closes one path's socket at the receiver once
// it has carried 4 MiB: the engine requeues that path's chunks on the
// others and the tensor still arrives intact, each chunk counted once.
// (The path may come back through Conn.Reset; TestPathResetMidTransfer
// checks that it does.)
func TestPathKilledMidTransfer(t *testing.T) {
	leak.Check(t)
	const size = 64 * units.MiB
	r := newRig(t, rigConfig{size: size, paths: make([]tcp.PathConfig, 3), engine: engineConfig()})
	killed := make(chan units.Bytes, 1)
	d := r.transfer(2, func(done <-chan struct{}) {
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				killed <- -1
				return
			case <-tick.C:
			}
			if n := r.recv.PathBytes(1); n >= 4*units.MiB {
				if err := r.recv.ClosePath(1); err != nil {
					t.Error(err)
				}
				killed <- n
				return
			}
		}
	})
	at := <-killed
	if at < 0 {
		t.Fatal("path 1 never carried 4 MiB, so it was never killed; the test proves nothing")
	}
	r.verify()
	st := r.snd.Engine().Stats(1)
	if st.Downs == 0 || st.Requeues == 0 {
		t.Errorf("path 1 after its socket was closed: %+v; want the loss counted and its chunks requeued", st)
	}
	rs := r.rcv.Stats()
	if rs.Chunks != 64 {
		t.Errorf("receiver counted %d distinct chunks, want 64 (each exactly once)", rs.Chunks)
	}
	t.Logf("path 1 killed after %d bytes; it is %s (%s), %d requeues; %.2f Gbit/s overall; receiver duplicates %d",
		at, st.State, st.Reason, st.Requeues, gbps(size, d), rs.Duplicates)
}

// pathLog records the engine's events for one path, and the end of the
// transfer. The sender's loop calls it; read it after the loop returned.
type pathLog struct {
	path   int
	events []multipath.Event
}

func (l *pathLog) Record(ev *multipath.Event) {
	switch ev.Kind {
	case multipath.EvPathDown, multipath.EvPathUp, multipath.EvChunkDone, multipath.EvProbe:
		if ev.Path == l.path {
			l.events = append(l.events, *ev)
		}
	case multipath.EvTransferDone, multipath.EvTransferFailed:
		l.events = append(l.events, *ev)
	}
}

// TestPathResetMidTransfer closes one path's socket at the receiver once it
// has carried 4 MiB of a 128 MiB tensor. The engine quarantines the path
// (2 ms backoff), then probes it, asking the driver to reset the queue pair
// first: Conn.Reset dials the path again and the receiver takes the rejoin.
// The probe completes, the path is up again and completes chunks before the
// transfer is done; the tensor arrives intact.
func TestPathResetMidTransfer(t *testing.T) {
	leak.Check(t)
	const size = 128 * units.MiB
	const victim = 1
	log := &pathLog{path: victim}
	cfg := engineConfig()
	cfg.QuarantineMin = 2 * time.Millisecond
	cfg.Recorder = log
	r := newRig(t, rigConfig{size: size, paths: make([]tcp.PathConfig, 3), engine: cfg})
	firstPort := r.conn.LocalAddr(victim).String()
	killed := make(chan units.Bytes, 1)
	d := r.transfer(3, func(done <-chan struct{}) {
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				killed <- -1
				return
			case <-tick.C:
			}
			if n := r.recv.PathBytes(victim); n >= 4*units.MiB {
				if err := r.recv.ClosePath(victim); err != nil {
					t.Error(err)
				}
				killed <- n
				return
			}
		}
	})
	at := <-killed
	if at < 0 {
		t.Fatal("path 1 never carried 4 MiB, so it was never killed; the test proves nothing")
	}
	nowPort := r.conn.LocalAddr(victim).String()
	applied := r.recv.PathBytes(victim)
	r.verify()

	if got := r.snd.Stats().Resets; got == 0 {
		t.Errorf("the driver reset no queue pair; want at least one Reset of path %d", victim)
	}
	// down → up → chunks on the path → transfer done, in that order.
	down, up, chunksAfter, doneAt := -1, -1, 0, -1
	for i, ev := range log.events {
		switch {
		case ev.Kind == multipath.EvPathDown && down < 0:
			down = i
		case ev.Kind == multipath.EvPathUp && down >= 0 && up < 0:
			up = i
		case ev.Kind == multipath.EvChunkDone && up >= 0 && doneAt < 0:
			chunksAfter++
		case ev.Kind == multipath.EvTransferDone:
			doneAt = i
		case ev.Kind == multipath.EvTransferFailed:
			t.Fatalf("transfer failed: %s", ev.Reason)
		}
	}
	if down < 0 || up < 0 || doneAt < 0 {
		t.Fatalf("path %d events: down at %d, up at %d, transfer done at %d; want all three (%d events)", victim, down, up, doneAt, len(log.events))
	}
	if chunksAfter == 0 {
		t.Errorf("path %d came back (event %d) but completed no chunk before the transfer was done (event %d)", victim, up, doneAt)
	}
	st := r.snd.Engine().Stats(victim)
	if st.State != multipath.PathUp {
		t.Errorf("path %d at the end: %+v; want up", victim, st)
	}
	// The receiver applied bytes on the path after the kill: at most one
	// in-flight 1 MiB chunk could have landed between the sample and the
	// close, so more than that came over the new connection.
	if applied < at+2*units.MiB {
		t.Errorf("receiver applied %d bytes on path %d, %d at the kill; want at least 2 MiB more over the rejoined connection", applied, victim, at)
	}
	if nowPort == firstPort {
		t.Errorf("path %d still uses its first connection %s; want a new one after Reset", victim, firstPort)
	}
	rs := r.rcv.Stats()
	if rs.Chunks != 128 {
		t.Errorf("receiver counted %d distinct chunks, want 128", rs.Chunks)
	}
	t.Logf("path %d killed after %d bytes, reset %d time(s) (%s → %s); %d chunks on it after it came back; %d bytes applied on it; %.2f Gbit/s overall; receiver duplicates %d",
		victim, at, r.snd.Stats().Resets, firstPort, nowPort, chunksAfter, applied, gbps(size, d), rs.Duplicates)
}

// BenchmarkTensor reports the driver's end-to-end throughput on loopback
// (b.SetBytes: MB/s of tensor).
func BenchmarkTensor(b *testing.B) {
	const size = 64 * units.MiB
	r := newRig(b, rigConfig{size: size, paths: make([]tcp.PathConfig, 3), engine: engineConfig()})
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.sendDone, r.recvDone = false, false
		r.transfer(multipath.TransferID(i+1), nil)
	}
}
