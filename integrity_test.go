package mptx_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/mem"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// pattern fills b with transfer id's bytes: distinct for every transfer
// and every offset, so a byte of one transfer cannot pass for another's.
// (Eight bytes per xorshift step: it runs over hundreds of MiB under the
// race detector.)
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

// memRig is the driver-level test rig: a Sender and a Receiver (the real
// driver and engine) over one qp/mem connection in virtual time. It ships
// transfers one after another through the same send buffer
// and the same receive range of a qp/mem connection, as an application
// that reuses its buffers does, and checks the integrity rule at every
// step:
//
//   - the sender refills its buffer with the next transfer's bytes as soon
//     as OnDone reports a transfer (so a late read of the buffer by an
//     abandoned work request would carry the next transfer's bytes into
//     the finished one's range);
//   - the receiver checks the range the moment it reports a transfer done,
//     and again just before the next transfer starts (nothing may have
//     touched the handed-over range in between);
//   - at the end the network runs on until nothing is left in it, and the
//     range must still hold the last transfer.
type memRig struct {
	t    *testing.T
	net  *mem.Network
	snd  *mptx.Sender
	rcv  *mptx.Receiver
	send []byte
	recv []byte
	size units.Bytes

	tags     map[multipath.TransferID]int
	doneAt   map[multipath.TransferID]vtime.Time
	sent     map[multipath.TransferID]error
	recvd    map[multipath.TransferID]error
	handed   []byte // the range as the receiver handed it over
	handedID multipath.TransferID
	filled   multipath.TransferID // whose bytes the send buffer holds
	bad      []string
}

func newMemRig(t *testing.T, paths []mem.PathConfig, size units.Bytes, cfg mptx.SenderConfig) *memRig {
	t.Helper()
	r := &memRig{t: t, size: size, send: make([]byte, size), recv: make([]byte, size),
		tags: map[multipath.TransferID]int{}, doneAt: map[multipath.TransferID]vtime.Time{}, sent: map[multipath.TransferID]error{}, recvd: map[multipath.TransferID]error{}}
	net, err := mem.New(mem.Config{Paths: paths, SendRegion: r.send, RecvRegion: r.recv})
	if err != nil {
		t.Fatal(err)
	}
	r.net = net
	cfg.OnDone = func(id multipath.TransferID, now vtime.Time, err error) {
		r.sent[id], r.doneAt[id] = err, now
		pattern(r.send, id+1) // the application refills its buffer at once
		r.filled = id + 1
		r.rcv.SenderDone(now, r.tags[id], err)
	}
	if r.snd, err = mptx.NewSender(net.Conn(), cfg); err != nil {
		t.Fatal(err)
	}
	r.rcv, err = mptx.NewReceiver(net.Receiver(), mptx.ReceiverConfig{
		AwaitSender: true,
		OnDone: func(id multipath.TransferID, _ vtime.Time, err error) {
			r.recvd[id] = err
			if err != nil {
				return
			}
			want := make([]byte, size)
			pattern(want, id)
			if d := diff(r.recv, want); d > 0 {
				r.bad = append(r.bad, fmt.Sprintf("transfer %d reported done with %d of its %v bytes wrong", id, d, size))
			}
			r.handed, r.handedID = append(r.handed[:0], r.recv...), id
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
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

// ship runs transfer id (its bytes are already in the send buffer) until
// both ends reported it.
func (r *memRig) ship(id multipath.TransferID) {
	r.t.Helper()
	if r.filled != id {
		pattern(r.send, id)
		r.filled = id
	}
	if r.handed != nil {
		if d := diff(r.recv, r.handed); d > 0 {
			r.bad = append(r.bad, fmt.Sprintf("%d bytes of transfer %d's range changed after the receiver handed it over", d, r.handedID))
		}
	}
	tag, plan, err := r.snd.Submit(r.net.Now(), multipath.TransferSpec{ID: id, Size: r.size})
	if err != nil {
		r.t.Fatal(err)
	}
	r.tags[id] = tag
	if err := r.rcv.Expect(tag, id, plan, 0); err != nil {
		r.t.Fatal(err)
	}
	next := r.snd.Step(r.net.Now())
	for i := 0; ; i++ {
		_, s := r.sent[id]
		_, v := r.recvd[id]
		if s && v {
			return
		}
		t := vtime.Earliest(r.net.Next(), next)
		if t == 0 || i > 5_000_000 {
			r.t.Fatalf("transfer %d stuck at %v (sent %v, received %v)", id, r.net.Now(), r.sent, r.recvd)
		}
		r.net.AdvanceTo(t)
		now := r.net.Now()
		r.rcv.Step(now)
		next = r.snd.Step(now)
	}
}

// drain lets everything still in the network land and complete.
func (r *memRig) drain() {
	for i := 0; i < 1_000_000; i++ {
		t := r.net.Next()
		if t == 0 {
			break
		}
		r.net.AdvanceTo(t)
		r.rcv.Step(r.net.Now())
		r.snd.Step(r.net.Now())
	}
	if r.handed != nil {
		if d := diff(r.recv, r.handed); d > 0 {
			r.bad = append(r.bad, fmt.Sprintf("%d bytes of transfer %d's range changed after the receiver handed it over (after the network drained)", d, r.handedID))
		}
	}
}

// slowFirstPath is the stall scenario of the corruption reports: path 0
// is 30 ms slow, so the chunks it takes first are declared stalled (10 ms
// floor) and finish on the other paths, while its writes are still on
// their way.
func slowFirstPath() []mem.PathConfig {
	return []mem.PathConfig{
		{Rate: 10 * units.Gbps, Delay: 30 * time.Millisecond, NIC: 0},
		{Rate: 10 * units.Gbps, NIC: 1},
		{Rate: 10 * units.Gbps, NIC: 2},
	}
}

// TestStaleImmediateNeverCounts reproduces the first corruption report:
// transfer 1's abandoned chunks on the stalled path land while transfer 2
// runs in the same slot and range. Before the fence, both ends reported
// transfer 2 done with transfer 1's bytes in its range (the stale
// immediates counted as transfer 2's chunks).
func TestStaleImmediateNeverCounts(t *testing.T) {
	r := newMemRig(t, slowFirstPath(), 4*units.MiB, mptx.SenderConfig{Engine: multipath.Config{CC: "fixed", ChunkSize: 256 * units.KiB}})
	for id := multipath.TransferID(1); id <= 6; id++ {
		r.ship(id)
		if r.sent[id] != nil || r.recvd[id] != nil {
			t.Fatalf("transfer %d: sender %v, receiver %v", id, r.sent[id], r.recvd[id])
		}
	}
	r.drain()
	for _, b := range r.bad {
		t.Error(b)
	}
	st := r.snd.Engine().Stats(0)
	if st.Requeues == 0 {
		t.Fatalf("path 0 requeued nothing (%+v): the scenario did not stall", st)
	}
	t.Logf("path 0: %d requeues, %d downs; sender resets %d; receiver %+v", st.Requeues, st.Downs, r.snd.Stats().Resets, r.rcv.Stats())
}

// TestRefilledSendBufferNeverLeaks reproduces the second report: the
// sender refills its buffer as soon as OnDone reports transfer 1, and the
// stalled path's late work requests must not carry the new bytes into
// transfer 1's range. The same run without resets (a backend that cannot
// fence) must hold OnDone until the stalled work requests complete.
func TestRefilledSendBufferNeverLeaks(t *testing.T) {
	for _, fence := range []bool{true, false} {
		t.Run(fmt.Sprintf("reset=%v", fence), func(t *testing.T) {
			var conn *noReset
			r := newMemRig(t, slowFirstPath(), 4*units.MiB, mptx.SenderConfig{Engine: multipath.Config{CC: "fixed", ChunkSize: 256 * units.KiB}})
			if !fence {
				// Rebuild the sender over a Conn that hides qp.Resetter.
				conn = &noReset{r.net.Conn()}
				cfg := mptx.SenderConfig{Engine: multipath.Config{CC: "fixed", ChunkSize: 256 * units.KiB}}
				cfg.OnDone = func(id multipath.TransferID, now vtime.Time, err error) {
					r.sent[id] = err
					pattern(r.send, id+1)
					r.filled = id + 1
					r.rcv.SenderDone(now, r.tags[id], err)
				}
				var err error
				if r.snd, err = mptx.NewSender(conn, cfg); err != nil {
					t.Fatal(err)
				}
			}
			r.ship(1)
			doneAt := r.net.Now()
			r.ship(2)
			r.drain()
			for _, b := range r.bad {
				t.Error(b)
			}
			if !fence && doneAt < vtime.Epoch.Add(60*time.Millisecond) {
				t.Errorf("without resets transfer 1 was reported at %v, before path 0's work requests completed (60 ms)", doneAt.Sub(vtime.Epoch))
			}
			if fence && doneAt > vtime.Epoch.Add(30*time.Millisecond) {
				t.Errorf("with resets transfer 1 was reported at %v; the fence should beat path 0's 30 ms delay", doneAt.Sub(vtime.Epoch))
			}
			t.Logf("transfer 1 reported at %v", doneAt.Sub(vtime.Epoch))
		})
	}
}

// noReset is a qp.Conn without qp.Resetter (a backend that cannot fence).
type noReset struct{ c *mem.Conn }

func (n *noReset) Paths() []qp.PathInfo                         { return n.c.Paths() }
func (n *noReset) PostSend(p int, wrs []qp.SendWR) (int, error) { return n.c.PostSend(p, wrs) }
func (n *noReset) Poll(dst []qp.Completion) (int, error)        { return n.c.Poll(dst) }
func (n *noReset) Counters(p int) (qp.Counters, error)          { return n.c.Counters(p) }
func (n *noReset) Caps() qp.Caps                                { return n.c.Caps() }
func (n *noReset) Close() error                                 { return n.c.Close() }

// TestReceiverWaitsForSender reproduces the third: a receiver that hands
// its range over when the bitmap is complete, before the sender fenced the
// stalled path, sees the abandoned writes land in the handed-over range.
// With AwaitSender (what a session uses) it hands over only after the
// sender's OnDone. The first half shows the check catches the corruption.
func TestReceiverWaitsForSender(t *testing.T) {
	for _, await := range []bool{false, true} {
		t.Run(fmt.Sprintf("await=%v", await), func(t *testing.T) {
			paths := slowFirstPath()
			send, recv := make([]byte, 4*units.MiB), make([]byte, 4*units.MiB)
			pattern(send, 1)
			net, err := mem.New(mem.Config{Paths: paths, SendRegion: send, RecvRegion: recv})
			if err != nil {
				t.Fatal(err)
			}
			var sentErr, recvErr error
			sentDone, recvDone := false, false
			rcv, err := mptx.NewReceiver(net.Receiver(), mptx.ReceiverConfig{AwaitSender: await,
				OnDone: func(_ multipath.TransferID, _ vtime.Time, err error) {
					recvDone, recvErr = true, err
					// The application reuses its buffer at once.
					for i := range recv {
						recv[i] = 0xA5
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			var tag int
			snd, err := mptx.NewSender(&noReset{net.Conn()}, mptx.SenderConfig{Engine: multipath.Config{CC: "fixed", ChunkSize: 256 * units.KiB},
				OnDone: func(_ multipath.TransferID, now vtime.Time, err error) {
					sentDone, sentErr = true, err
					rcv.SenderDone(now, tag, err)
				}})
			if err != nil {
				t.Fatal(err)
			}
			tag, plan, err := snd.Submit(net.Now(), multipath.TransferSpec{ID: 1, Size: 4 * units.MiB})
			if err != nil {
				t.Fatal(err)
			}
			if err := rcv.Expect(tag, 1, plan, 0); err != nil {
				t.Fatal(err)
			}
			next := snd.Step(net.Now())
			for !(sentDone && recvDone) {
				at := vtime.Earliest(net.Next(), next)
				if at == 0 {
					t.Fatal("stuck")
				}
				net.AdvanceTo(at)
				rcv.Step(net.Now())
				next = snd.Step(net.Now())
			}
			if sentErr != nil || recvErr != nil {
				t.Fatal(sentErr, recvErr)
			}
			canary := bytes.Repeat([]byte{0xA5}, len(recv))
			for at := net.Next(); at != 0; at = net.Next() {
				net.AdvanceTo(at)
				rcv.Step(net.Now())
				snd.Step(net.Now())
			}
			d := diff(recv, canary)
			switch {
			case await && d > 0:
				t.Errorf("%d bytes of the handed-over range were written after the receiver reported the transfer", d)
			case !await && d == 0:
				t.Errorf("without AwaitSender no late write landed: the scenario does not exercise the race")
			}
			t.Logf("await %v: %d late bytes in the handed-over range", await, d)
		})
	}
}

// TestIntegrityRandomized ships many transfers per connection through one
// send buffer and one receive range while paths randomly stall (a delay
// far above the stall floor) and die, and checks every byte of every
// transfer when both ends report it, and that nothing lands afterwards.
func TestIntegrityRandomized(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	for run := 0; run < 8; run++ {
		np := 2 + rng.IntN(3)
		paths := make([]mem.PathConfig, np)
		for i := range paths {
			paths[i] = mem.PathConfig{Rate: units.BitRate(5+rng.IntN(36)) * units.Gbps, NIC: i}
			switch rng.IntN(4) {
			case 0:
				paths[i].Delay = time.Duration(11+rng.IntN(40)) * time.Millisecond // stalls
			case 1:
				if i > 0 { // path 0 never dies, so a transfer never runs out of paths
					paths[i].FailAt = vtime.Epoch.Add(time.Duration(rng.IntN(20_000)) * time.Microsecond)
				}
			}
		}
		size := units.Bytes(1+rng.IntN(6)) * units.MiB
		cs := []units.Bytes{64 * units.KiB, 256 * units.KiB, units.MiB}[rng.IntN(3)]
		r := newMemRig(t, paths, size, mptx.SenderConfig{Engine: multipath.Config{CC: "fixed", ChunkSize: cs}})
		for id := multipath.TransferID(1); id <= 12; id++ {
			r.ship(id)
			if r.sent[id] != nil || r.recvd[id] != nil {
				t.Fatalf("run %d (paths %+v) transfer %d: sender %v, receiver %v", run, paths, id, r.sent[id], r.recvd[id])
			}
		}
		r.drain()
		for _, b := range r.bad {
			t.Errorf("run %d (paths %+v, %v in %v chunks): %s", run, paths, size, cs, b)
		}
	}
}

// testSeed returns the seed of a randomized test: TEST_SEED when set, else
// 1; it is logged so that a failure can be replayed.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(1)
	if s := os.Getenv("TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TEST_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("TEST_SEED=%d", seed)
	return seed
}
