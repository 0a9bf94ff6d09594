package mptx_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/mem"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// pullRig is the driver-level rig for one-sided transfers: the real Sender
// and engine over a qp/mem connection in virtual time, pulling (READ) from
// or writing into a range the receiver exposed.
type pullRig struct {
	t      *testing.T
	net    *mem.Network
	snd    *mptx.Sender
	local  []byte // the requester's registered region
	remote []byte // the responder's memory
	exp    qp.Exposure
	done   map[multipath.TransferID]error
	doneAt map[multipath.TransferID]vtime.Time
	// onDone, if set, runs when a transfer is reported (the application
	// reusing its buffer, say).
	onDone func(id multipath.TransferID)
}

func newPullRig(t *testing.T, paths []mem.PathConfig, local units.Bytes, remote []byte, access qp.Access, cfg mptx.SenderConfig, conn func(*mem.Conn) qp.Conn) *pullRig {
	t.Helper()
	r := &pullRig{t: t, local: make([]byte, local), remote: remote,
		done: map[multipath.TransferID]error{}, doneAt: map[multipath.TransferID]vtime.Time{}}
	net, err := mem.New(mem.Config{Paths: paths, SendRegion: r.local, RecvRegion: make([]byte, 64*units.KiB)})
	if err != nil {
		t.Fatal(err)
	}
	r.net = net
	if r.exp, err = net.Receiver().Expose(remote, access); err != nil {
		t.Fatal(err)
	}
	cfg.OnDone = func(id multipath.TransferID, now vtime.Time, err error) {
		r.done[id], r.doneAt[id] = err, now
		if r.onDone != nil {
			r.onDone(id)
		}
	}
	var c qp.Conn = net.Conn()
	if conn != nil {
		c = conn(net.Conn())
	}
	if r.snd, err = mptx.NewSender(c, cfg); err != nil {
		t.Fatal(err)
	}
	return r
}

// submit starts a one-sided transfer of size bytes between local offset
// local and remote offset remote of the exposed range.
func (r *pullRig) submit(id multipath.TransferID, op qp.Opcode, local, remote, size units.Bytes) {
	r.t.Helper()
	spec := multipath.TransferSpec{ID: id, Size: size, Local: local, Remote: units.Bytes(r.exp.Addr) + remote}
	if _, _, err := r.snd.SubmitOneSided(r.net.Now(), spec, mptx.OneSided{Op: op, RKey: r.exp.Key}); err != nil {
		r.t.Fatal(err)
	}
}

// run steps until every id was reported.
func (r *pullRig) run(ids ...multipath.TransferID) {
	r.t.Helper()
	next := r.snd.Step(r.net.Now())
	for i := 0; ; i++ {
		all := true
		for _, id := range ids {
			if _, ok := r.done[id]; !ok {
				all = false
			}
		}
		if all {
			return
		}
		at := vtime.Earliest(r.net.Next(), next)
		if at == 0 || i > 10_000_000 {
			r.t.Fatalf("transfers %v stuck at %v (reported %v)", ids, r.net.Now(), r.done)
		}
		r.net.AdvanceTo(at)
		next = r.snd.Step(r.net.Now())
	}
}

// drain lets everything still in the network land and complete.
func (r *pullRig) drain() {
	for i := 0; i < 1_000_000; i++ {
		at := r.net.Next()
		if at == 0 {
			return
		}
		r.net.AdvanceTo(at)
		r.snd.Step(r.net.Now())
	}
}

// fastFill fills b with seed's bytes quickly (1 GiB in well under a
// second, race detector included): a 1 MiB pattern copied over b, then
// every 4 KiB stamped with its offset, so that a byte landing at the
// wrong place or from another fill shows.
func fastFill(b []byte, seed multipath.TransferID) {
	n := min(len(b), 1<<20)
	pattern(b[:n], seed)
	for off := n; off < len(b); {
		off += copy(b[off:], b[:off])
	}
	for i := 0; i+8 <= len(b); i += 4096 {
		binary.LittleEndian.PutUint64(b[i:], uint64(i)^uint64(seed)<<48)
	}
}

// TestPullRatesAndIntegrity is the must-show: a 1 GiB pull (RDMA READ of
// an exposed range) over 4 paths of unequal rates, with the default engine
// (DCQCN, software pacing, automatic chunk size): every byte lands, each
// path carries its rate's share of the bytes (±15%), and the pull
// completes within 1.1× of the ideal (1 GiB at the sum of the rates).
func TestPullRatesAndIntegrity(t *testing.T) {
	paths := []mem.PathConfig{
		{Rate: 40 * units.Gbps, NIC: 0}, {Rate: 20 * units.Gbps, NIC: 1}, {Rate: 10 * units.Gbps, NIC: 2}, {Rate: 10 * units.Gbps, NIC: 3},
	}
	const size = units.GiB
	remote := make([]byte, size)
	fastFill(remote, 1)
	r := newPullRig(t, paths, size, remote, qp.AccessRead, mptx.SenderConfig{}, nil)
	r.submit(1, qp.OpRead, 0, 0, size)
	r.run(1)
	if err := r.done[1]; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.local, remote) {
		t.Fatalf("the pulled GiB differs from the exposed range in %d bytes", diff(r.local, remote))
	}
	var total units.Bytes
	for i := range paths {
		total += r.net.PathBytes(i)
	}
	if total < size {
		t.Fatalf("paths carried %v in all, less than the %v pulled", total, size)
	}
	ideal := (80 * units.Gbps).TxTime(size)
	el := r.doneAt[1].Sub(vtime.Epoch)
	if el > ideal*11/10 {
		t.Errorf("pull completed in %v, want within 1.1× of the ideal %v", el, ideal)
	}
	want := []float64{0.5, 0.25, 0.125, 0.125}
	for i := range paths {
		got := float64(r.net.PathBytes(i)) / float64(total)
		if d := got/want[i] - 1; d > 0.15 || d < -0.15 {
			t.Errorf("path %d carried %.3f of the bytes, want %.3f ±15%%", i, got, want[i])
		}
		t.Logf("path %d (%v): %.4f of the bytes (rate share %.3f)", i, paths[i].Rate, float64(r.net.PathBytes(i))/float64(total), want[i])
	}
	t.Logf("1 GiB pulled in %v, ideal %v (%.3f×)", el, ideal, float64(el)/float64(ideal))
}

// TestPullPathDies: a path dies mid-pull; its lost ranges are read again
// on the others and every byte lands, each chunk once.
func TestPullPathDies(t *testing.T) {
	paths := []mem.PathConfig{
		{Rate: 10 * units.Gbps, NIC: 0}, {Rate: 10 * units.Gbps, NIC: 1, FailAt: vtime.Epoch.Add(8 * time.Millisecond)}, {Rate: 10 * units.Gbps, NIC: 2},
	}
	const size = 64 * units.MiB
	remote := make([]byte, size)
	fastFill(remote, 9)
	r := newPullRig(t, paths, size, remote, qp.AccessRead, mptx.SenderConfig{Engine: multipath.Config{ChunkSize: units.MiB}}, nil)
	r.submit(9, qp.OpRead, 0, 0, size)
	r.run(9)
	if err := r.done[9]; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.local, remote) {
		t.Fatalf("the pull differs from the exposed range in %d bytes after a path died", diff(r.local, remote))
	}
	st := r.snd.Engine().Stats(1)
	if st.State == multipath.PathUp || st.Requeues == 0 || st.Reason != "retry-exceeded" {
		t.Errorf("path 1: %+v; want it out of use, with requeues, lost to retry-exceeded", st)
	}
	if d := r.doneAt[9].Sub(vtime.Epoch); d < 8*time.Millisecond {
		t.Errorf("pull done at %v, before the path died: the scenario lost its point", d)
	}
	t.Logf("path 1 %s (%s), %d requeues; done at %v", st.State, st.Reason, st.Requeues, r.doneAt[9].Sub(vtime.Epoch))
}

// TestPullFence is the integrity rule for pulls: the requester reuses its
// buffer the moment OnDone reports a pull, and no READ response of an
// abandoned attempt (a path 30 ms slow, declared stalled at the 10 ms
// floor, its chunks read again elsewhere) may land in it afterwards. With
// qp.Resetter the stalled path is fenced and the pull reported early;
// without, OnDone waits until the stalled READs complete.
func TestPullFence(t *testing.T) {
	for _, fence := range []bool{true, false} {
		t.Run(fmt.Sprintf("reset=%v", fence), func(t *testing.T) {
			const size = 4 * units.MiB
			remote := make([]byte, size)
			fastFill(remote, 3)
			var wrap func(*mem.Conn) qp.Conn
			if !fence {
				wrap = func(c *mem.Conn) qp.Conn { return &noReset{c} }
			}
			r := newPullRig(t, slowFirstPath(), size, remote, qp.AccessRead, mptx.SenderConfig{Engine: multipath.Config{CC: "fixed", ChunkSize: 256 * units.KiB}}, wrap)
			var handed []byte
			r.onDone = func(id multipath.TransferID) {
				if !bytes.Equal(r.local, remote) {
					t.Errorf("pull %d reported with %d bytes wrong", id, diff(r.local, remote))
				}
				fastFill(r.local, 77) // the application reuses the buffer at once
				handed = append([]byte(nil), r.local...)
			}
			r.submit(1, qp.OpRead, 0, 0, size)
			r.run(1)
			if err := r.done[1]; err != nil {
				t.Fatal(err)
			}
			doneAt := r.doneAt[1].Sub(vtime.Epoch)
			r.drain()
			if d := diff(r.local, handed); d > 0 {
				t.Errorf("%d bytes of the buffer changed after the pull was reported (late READ responses)", d)
			}
			st := r.snd.Engine().Stats(0)
			if st.Requeues == 0 {
				t.Fatalf("path 0 requeued nothing (%+v): the scenario did not stall", st)
			}
			if fence && doneAt > 30*time.Millisecond {
				t.Errorf("with resets the pull was reported at %v; the fence should beat path 0's 30 ms delay", doneAt)
			}
			if !fence && doneAt < 60*time.Millisecond {
				t.Errorf("without resets the pull was reported at %v, before path 0's READs completed (60 ms)", doneAt)
			}
			t.Logf("reported at %v; path 0: %d requeues; resets %d", doneAt, st.Requeues, r.snd.Stats().Resets)
		})
	}
}

// TestPullOutsideRange: a pull that runs past the exposed range fails
// with ErrRemoteAccess, promptly (the request is at fault, not the paths:
// it is not retried path after path), and no guard byte around the range
// reaches the requester; a keyed write past the range changes no guard
// byte of the responder.
func TestPullOutsideRange(t *testing.T) {
	paths := []mem.PathConfig{{Rate: 10 * units.Gbps, NIC: 0}, {Rate: 10 * units.Gbps, NIC: 1}}
	const guard, size = 256 * units.KiB, 2 * units.MiB
	backing := make([]byte, guard+size+guard)
	fastFill(backing, 5)
	backingWant := append([]byte(nil), backing...)
	for _, op := range []qp.Opcode{qp.OpRead, qp.OpWrite} {
		t.Run(op.String(), func(t *testing.T) {
			access := qp.AccessRead
			if op == qp.OpWrite {
				access = qp.AccessWrite
			}
			r := newPullRig(t, paths, 4*units.MiB, backing[guard:guard+size], access, mptx.SenderConfig{Engine: multipath.Config{ChunkSize: 256 * units.KiB}}, nil)
			fastFill(r.local, 6)
			localWant := append([]byte(nil), r.local...)
			// 1 MiB from the range's last 512 KiB: the second half is
			// outside it.
			r.submit(1, op, 0, size-512*units.KiB, units.MiB)
			r.run(1)
			err := r.done[1]
			if !errors.Is(err, mptx.ErrRemoteAccess) {
				t.Fatalf("pull past the range reported %v; want ErrRemoteAccess", err)
			}
			if d := r.doneAt[1].Sub(vtime.Epoch); d > 10*time.Millisecond {
				t.Errorf("the refused transfer was reported after %v; want it promptly (no probing of every path)", d)
			}
			r.drain()
			if !bytes.Equal(backing[:guard], backingWant[:guard]) || !bytes.Equal(backing[guard+size:], backingWant[guard+size:]) {
				t.Errorf("guard bytes of the responder changed")
			}
			if op == qp.OpRead {
				// Whatever landed came from inside the range: the local
				// bytes that map past it still hold the requester's fill.
				if !bytes.Equal(r.local[512*units.KiB:], localWant[512*units.KiB:]) {
					t.Errorf("bytes past the exposed range reached the requester")
				}
			} else if !bytes.Equal(backing[guard:guard+size-512*units.KiB], backingWant[guard:guard+size-512*units.KiB]) {
				t.Errorf("the refused write changed the range before its target")
			}
			t.Logf("%v", err)
		})
	}
}

// TestSubmitOneSidedChecks: a READ needs a key (the receive region is not
// readable) and only READ and WRITE are one-sided ops.
func TestSubmitOneSidedChecks(t *testing.T) {
	r := newPullRig(t, []mem.PathConfig{{Rate: 10 * units.Gbps}}, units.MiB, make([]byte, units.MiB), qp.AccessRead, mptx.SenderConfig{}, nil)
	spec := multipath.TransferSpec{ID: 1, Size: 4096}
	if _, _, err := r.snd.SubmitOneSided(r.net.Now(), spec, mptx.OneSided{Op: qp.OpRead}); err == nil {
		t.Errorf("SubmitOneSided(READ, rkey 0) = nil; want an error")
	}
	if _, _, err := r.snd.SubmitOneSided(r.net.Now(), spec, mptx.OneSided{Op: qp.OpWriteImm, RKey: r.exp.Key}); err == nil {
		t.Errorf("SubmitOneSided(WRITE_WITH_IMM) = nil; want an error")
	}
}

// TestPullAndPushShareThePaths: a pull and a push at once on one
// connection both complete intact; the reads are posted as READs (no
// immediate reaches the receiver for them) and the push's chunks as
// WRITE WITH IMM.
func TestPullAndPushShareThePaths(t *testing.T) {
	paths := []mem.PathConfig{{Rate: 20 * units.Gbps, NIC: 0}, {Rate: 10 * units.Gbps, NIC: 1}}
	const size = 16 * units.MiB
	remote := make([]byte, size)
	fastFill(remote, 11)
	r := newPullRig(t, paths, 2*size, remote, qp.AccessRead, mptx.SenderConfig{Engine: multipath.Config{ChunkSize: units.MiB}}, nil)
	fastFill(r.local[size:], 12)
	push := append([]byte(nil), r.local[size:]...)
	r.submit(1, qp.OpRead, 0, 0, size)
	// The push lands in the receive region's first 64 KiB, 16 times over
	// (the rig's receive region is small; the point is the opcodes).
	if _, _, err := r.snd.Submit(r.net.Now(), multipath.TransferSpec{ID: 2, Size: 64 * units.KiB, Local: size}); err != nil {
		t.Fatal(err)
	}
	r.run(1, 2)
	if r.done[1] != nil || r.done[2] != nil {
		t.Fatalf("pull %v, push %v", r.done[1], r.done[2])
	}
	if !bytes.Equal(r.local[:size], remote) {
		t.Errorf("the pull differs in %d bytes", diff(r.local[:size], remote))
	}
	if !bytes.Equal(r.net.Receiver().Region(), push[:64*units.KiB]) {
		t.Errorf("the push did not land")
	}
	buf := make([]qp.Completion, 64)
	imms := 0
	for {
		n, _ := r.net.Receiver().Poll(buf)
		if n == 0 {
			break
		}
		imms += n
	}
	// The push is one 64 KiB chunk: one immediate; the pull's 16 chunks
	// made none.
	if imms != 1 {
		t.Errorf("receiver saw %d immediates; want 1 (the push's chunk; READs make none)", imms)
	}
}
