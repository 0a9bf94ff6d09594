package e2e_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/qp/tcp/internal/leak"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// pattern fills b with transfer id's bytes: distinct for every transfer and
// every offset, so that a byte of one transfer cannot pass for another's.
func pattern(b []byte, id multipath.TransferID) {
	x := uint64(id)*0x9e3779b97f4a7c15 | 1
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	for ; i < len(b); i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

// diff counts the bytes where a and b differ.
func diff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return 0
	}
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// stash is the Sender's view of the tcp.Conn: the test polls the Conn
// itself between transfers (for its barrier writes) and hands back, through
// Poll, the completions that were the Sender's. Reset and the rest come from
// the embedded Conn.
type stash struct {
	*tcp.Conn
	held []qp.Completion
}

func (s *stash) Poll(dst []qp.Completion) (int, error) {
	if len(s.held) > 0 {
		n := copy(dst, s.held)
		s.held = s.held[n:]
		return n, nil
	}
	return s.Conn.Poll(dst)
}

// tcpRig is the integrity rig of the root package's memRig, over qp/tcp in
// real time: a Sender and an AwaitSender Receiver (what a session runs)
// driven by one Loop goroutine, shipping transfers one after another
// through the same send buffer and the same receive range. For each
// transfer one path's receiver is paused (tcp.Receiver.PausePath: its
// frames wait in the socket buffers, as on a stalled link) until both
// ends have reported the transfer. The rule is checked at every step:
//
//   - the sender refills its buffer with the next transfer's bytes as soon
//     as OnDone reports a transfer (so a work request of the finished
//     transfer that is sent late carries the next one's bytes);
//   - the receiver checks the range the moment it reports a transfer done;
//   - then the paused path resumes, a barrier write on it (TCP keeps a
//     path's frames in order, so it lands after anything the old work
//     could still do on that path) completes, and the handed-over range
//     must be unchanged.
type tcpRig struct {
	t      *testing.T
	ln     *tcp.Listener
	conn   *tcp.Conn
	shim   *stash
	recv   *tcp.Receiver
	snd    *mptx.Sender
	rcv    *mptx.Receiver
	send   []byte
	region []byte
	size   units.Bytes
	clock  *vtime.Monotonic

	tags     map[multipath.TransferID]int
	sent     map[multipath.TransferID]error
	recvd    map[multipath.TransferID]error
	handed   []byte
	handedID multipath.TransferID
	filled   multipath.TransferID
	bad      []string
	barrier  uint64
}

func newTCPRig(t *testing.T, paths int, size units.Bytes, engine multipath.Config) *tcpRig {
	t.Helper()
	r := &tcpRig{t: t, size: size, send: make([]byte, size), clock: vtime.NewMonotonic(),
		tags: map[multipath.TransferID]int{}, sent: map[multipath.TransferID]error{}, recvd: map[multipath.TransferID]error{}}
	var err error
	r.ln, err = tcp.Listen("127.0.0.1:0", tcp.ListenConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.ln.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan error, 1)
	go func() {
		var err error
		r.recv, err = r.ln.Accept(ctx, make([]byte, size))
		accepted <- err
	}()
	r.conn, err = tcp.Dial(ctx, r.ln.Addr().String(), tcp.DialConfig{Secret: secret, Paths: make([]tcp.PathConfig, paths), SendRegion: r.send})
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
	r.region = r.recv.Region()
	r.shim = &stash{Conn: r.conn}
	cfg := mptx.SenderConfig{Engine: engine}
	cfg.OnDone = func(id multipath.TransferID, now vtime.Time, err error) {
		r.sent[id] = err
		pattern(r.send, id+1) // the application refills its buffer at once
		r.filled = id + 1
		r.rcv.SenderDone(now, r.tags[id], err)
	}
	if r.snd, err = mptx.NewSender(r.shim, cfg); err != nil {
		t.Fatal(err)
	}
	r.rcv, err = mptx.NewReceiver(r.recv, mptx.ReceiverConfig{
		AwaitSender: true,
		OnDone: func(id multipath.TransferID, _ vtime.Time, err error) {
			r.recvd[id] = err
			if err != nil {
				return
			}
			want := make([]byte, size)
			pattern(want, id)
			if d := diff(r.region, want); d > 0 {
				r.bad = append(r.bad, fmt.Sprintf("transfer %d reported done with %d of its %v bytes wrong", id, d, size))
			}
			r.handed, r.handedID = append(r.handed[:0], r.region...), id
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ship runs transfer id with path stalled until both ends reported it,
// then resumes the path, writes a barrier on it and checks the
// handed-over range.
func (r *tcpRig) ship(id multipath.TransferID, stalled int) {
	t := r.t
	t.Helper()
	if r.filled != id {
		pattern(r.send, id)
		r.filled = id
	}
	if err := r.recv.PausePath(stalled); err != nil {
		t.Fatal(err)
	}
	tag, plan, err := r.snd.Submit(r.clock.Now(), multipath.TransferSpec{ID: id, Size: r.size})
	if err != nil {
		t.Fatal(err)
	}
	r.tags[id] = tag
	if err := r.rcv.Expect(tag, id, plan, 0); err != nil {
		t.Fatal(err)
	}
	// A liveness bound, not a speed check.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = mptx.Loop(ctx, mptx.LoopConfig{Clock: r.clock, Done: func() bool {
		_, s := r.sent[id]
		_, v := r.recvd[id]
		return s && v
	}}, r.snd, r.rcv)
	if err != nil {
		t.Fatalf("transfer %d: %v (sent %v, received %v)", id, err, r.sent, r.recvd)
	}
	if r.sent[id] != nil || r.recvd[id] != nil {
		t.Fatalf("transfer %d: sender %v, receiver %v", id, r.sent[id], r.recvd[id])
	}
	if err := r.recv.ResumePath(stalled); err != nil {
		t.Fatal(err)
	}
	r.barrierOn(stalled)
	if d := diff(r.region, r.handed); d > 0 {
		r.bad = append(r.bad, fmt.Sprintf("%d bytes of transfer %d's range changed after the receiver handed it over", d, r.handedID))
	}
}

// barrierOn posts a zero-length WRITE on path and waits for its
// completion; the Sender's completions polled meanwhile go back to it.
func (r *tcpRig) barrierOn(path int) {
	t := r.t
	t.Helper()
	r.barrier++
	id := uint64(1)<<62 | r.barrier // never an engine work id
	if k, err := r.conn.PostSend(path, []qp.SendWR{{ID: id, Op: qp.OpWrite}}); k != 1 || err != nil {
		t.Fatalf("barrier PostSend(path %d) = %d, %v", path, k, err)
	}
	buf := make([]qp.Completion, 64)
	deadline := time.Now().Add(time.Minute) // liveness bound
	for {
		n, err := r.conn.Poll(buf)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, c := range buf[:n] {
			if c.ID == id {
				found = true // ok or not: the path's stream has drained either way
				continue
			}
			r.shim.held = append(r.shim.held, c)
		}
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the barrier write on path %d never completed", path)
		}
		select {
		case <-r.conn.Notify():
		case <-time.After(time.Millisecond):
		}
	}
}

// TestStalledPathNeverLeaks reproduces issue 9's corruption reports over
// qp/tcp: for each transfer one path stalls (its receiver pauses) far
// longer than the engine's stall floor, so the engine requeues its chunks
// on the other paths and fences it (Conn.Reset) before it reports the
// transfer. The sender refills its buffer as soon as a transfer is
// reported and the receiver hands the range over when both ends are done;
// then the stalled path resumes. Nothing of an abandoned attempt may land
// afterwards: neither the old bytes (from the socket buffers) nor the new
// ones (a work request still queued when the buffer was refilled), and
// every transfer must be whole when reported. Before Conn.Reset fenced a
// healthy path (it did nothing), the stalled work requests were written
// off, the resumed path delivered them late and the check failed.
func TestStalledPathNeverLeaks(t *testing.T) {
	leak.Check(t)
	const paths = 3
	engine := multipath.Config{
		CC: "fixed", CCParams: cc.Params{"window": "unlimited", "rate": "unlimited"}, Pacing: multipath.PacingConfig{Disabled: true},
		ChunkSize: units.MiB, MaxInFlight: 8 * units.MiB,
		MinTimeout: 50 * time.Millisecond, QuarantineMin: 2 * time.Millisecond,
	}
	r := newTCPRig(t, paths, 16*units.MiB, engine)
	for id := multipath.TransferID(1); id <= 6; id++ {
		r.ship(id, int(id-1)%paths)
	}
	for _, b := range r.bad {
		t.Error(b)
	}
	var requeues int
	for i := range paths {
		requeues += r.snd.Engine().Stats(i).Requeues
	}
	if requeues == 0 || r.snd.Stats().Resets == 0 {
		t.Fatalf("%d requeues and %d resets: the stalls did not happen, the test proves nothing", requeues, r.snd.Stats().Resets)
	}
	t.Logf("6 transfers of %v with one stalled path each: %d requeues, %d resets (%d failed); receiver %+v",
		r.size, requeues, r.snd.Stats().Resets, r.snd.Stats().ResetErrors, r.rcv.Stats())
}
