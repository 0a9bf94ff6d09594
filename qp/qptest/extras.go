package qptest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// testResetFences checks the qp.Resetter contract (qp/reset.go) on a path
// that has work outstanding: a stalled path (Env.Stall) or, where the
// backend cannot stall one, a path with work in flight. Every work request
// outstanding when Reset is called completes with an error status or not
// at all; after Reset returns, none of their bytes lands in the receive
// region and none of their immediates reaches the receiver, even once the
// stall is lifted; and the path is ready for new work, which lands.
//
// The bytes of the work requests are checked, not only their immediates:
// the send region is refilled with other bytes right after Reset returns
// (as an application reuses its buffer once a transfer is reported), so
// that a backend which reads its send region late, or lets frames already
// on their way land, changes the region.
func testResetFences(t *testing.T, f Factory) {
	const (
		k     = 16 // work requests posted before the reset
		n     = 32 * units.KiB
		stale = k * n       // [0, stale): the pre-reset writes' range
		immHi = 0x7e5e_0000 // pre-reset immediates are immHi | i
	)
	env := f(t, 2, region)
	rs, ok := env.Conn.(qp.Resetter)
	if !ok {
		t.Skip("the backend does not implement qp.Resetter")
	}
	carries := env.SendRegion != nil
	if carries {
		fill(env.SendRegion, 0x3c)
	}
	var resume func()
	if env.Stall != nil {
		resume = env.Stall(0)
	}
	c := newCollector(env)
	wrs := make([]qp.SendWR, k)
	for i := range wrs {
		off := units.Bytes(i) * n
		wrs[i] = qp.SendWR{ID: uint64(500 + i), Op: qp.OpWriteImm, Local: off, Remote: off, Len: n, Imm: immHi | uint32(i)}
	}
	if got, err := env.Conn.PostSend(0, wrs); got != k || err != nil {
		t.Fatalf("PostSend(%d WRs) = %d, %v; want %d, nil", k, got, err, k)
	}
	if resume != nil {
		// Give the work time to leave the sender and wait in the
		// stalled path (a socket buffer, a paused link).
		for range 50 {
			env.Progress()
		}
		c.drain(t)
	} else {
		// In flight: wait until the first write has landed, so that the
		// rest is on its way.
		c.wait(t, "the first write to land", func() bool { return len(c.recv) > 0 })
	}
	outstanding := map[uint64]bool{}
	for _, wr := range wrs {
		outstanding[wr.ID] = true
	}
	for _, s := range c.send {
		delete(outstanding, s.ID)
	}
	if len(outstanding) == 0 {
		t.Fatalf("every work request completed before the reset (%v): the scenario proves nothing", c.send)
	}
	recvBefore := len(c.recv)
	sendBefore := len(c.send)

	if err := rs.Reset(0); err != nil {
		t.Fatalf("Reset(0) of a path with %d work requests outstanding: %v", len(outstanding), err)
	}
	var atReset []byte
	if carries {
		atReset = append([]byte(nil), env.Recv.Region()[:stale]...)
		fill(env.SendRegion[:stale], 0xc3) // the application reuses its buffer
	}
	if resume != nil {
		resume()
	}

	// New work on the reset path and on the other one, to a range of its
	// own; its completion on path 0 also orders after anything the old
	// work could still do on a backend that keeps one stream per path.
	fresh := []qp.SendWR{
		{ID: 900, Op: qp.OpWriteImm, Local: stale, Remote: stale, Len: n, Imm: 0x900},
		{ID: 901, Op: qp.OpWriteImm, Local: stale + n, Remote: stale + n, Len: n, Imm: 0x901},
	}
	for p, wr := range fresh {
		if got, err := env.Conn.PostSend(p, []qp.SendWR{wr}); got != 1 || err != nil {
			t.Fatalf("PostSend(path %d) after Reset(0) = %d, %v; want 1, nil (the path must be ready)", p, got, err)
		}
	}
	has := func(cs []qp.Completion, id uint64, imm bool) bool {
		for _, x := range cs {
			if (!imm && x.ID == id) || (imm && x.Imm == uint32(id)) {
				return true
			}
		}
		return false
	}
	c.wait(t, "the post-reset writes", func() bool {
		return has(c.send, 900, false) && has(c.send, 901, false) && has(c.recv, 0x900, true) && has(c.recv, 0x901, true)
	})
	// Let whatever the old work could still do happen.
	for range 50 {
		env.Progress()
	}
	c.drain(t)

	for _, s := range c.send[sendBefore:] {
		switch {
		case outstanding[s.ID] && s.Status == qp.StatusOK:
			t.Errorf("work request %d, outstanding when Reset was called, completed ok afterwards; want an error status (flushed) or no completion", s.ID)
		case (s.ID == 900 || s.ID == 901) && s.Status != qp.StatusOK:
			t.Errorf("post-reset work request %d on path %d completed %v; want ok", s.ID, s.Path, s.Status)
		}
	}
	var late []string
	for _, r := range c.recv[recvBefore:] {
		if r.Imm&^0xffff == immHi {
			late = append(late, fmt.Sprintf("%#x", r.Imm))
		}
	}
	if len(late) > 0 {
		t.Errorf("immediates %v of work requests flushed by Reset reached the receiver after Reset returned", late)
	}
	if carries {
		got := env.Recv.Region()
		if d := countDiff(got[:stale], atReset); d > 0 {
			t.Errorf("%d bytes of the flushed work requests' range changed after Reset returned", d)
		}
		for i, wr := range fresh {
			if !bytes.Equal(got[wr.Remote:wr.Remote+wr.Len], env.SendRegion[wr.Local:wr.Local+wr.Len]) {
				t.Errorf("post-reset write on path %d did not land", i)
			}
		}
	}
	t.Logf("%d of %d work requests outstanding at the reset; %d receive completions before it", len(outstanding), k, recvBefore)
}

// countDiff counts the bytes where a and b differ.
func countDiff(a, b []byte) int {
	d := 0
	for i := range a {
		if a[i] != b[i] {
			d++
		}
	}
	return d
}

// testSendRegions checks qp.SendRegions: writes naming a registered buffer
// send its bytes (and the connection's own send region still works next to
// it), a write naming an unknown or removed region is refused by PostSend,
// and the id of a removed region does not come back for another buffer.
func testSendRegions(t *testing.T, f Factory) {
	env := f(t, 2, region)
	sr, ok := env.Conn.(qp.SendRegions)
	if !ok {
		t.Skip("the backend does not implement qp.SendRegions")
	}
	if env.SendRegion == nil {
		t.Fatal("a backend with SendRegions must carry data (Env.SendRegion)")
	}
	fill(env.SendRegion, 0x10)
	bufA, bufB := make([]byte, 64*units.KiB), make([]byte, 48*units.KiB)
	fill(bufA, 0xa1)
	fill(bufB, 0xb2)
	idA, err := sr.AddSendRegion(bufA)
	if err != nil || idA == 0 {
		t.Fatalf("AddSendRegion(64 KiB) = %#x, %v; want a nonzero id", idA, err)
	}
	idB, err := sr.AddSendRegion(bufB)
	if err != nil || idB == 0 || idB == idA {
		t.Fatalf("AddSendRegion(48 KiB) = %#x, %v; want a nonzero id other than %#x", idB, err, idA)
	}
	if _, err := sr.AddSendRegion(nil); err == nil {
		t.Error("AddSendRegion(nil) succeeded; want an error")
	}
	c := newCollector(env)
	wrs := []qp.SendWR{
		{ID: 1, Op: qp.OpWrite, Region: idA, Local: 4096, Remote: 0, Len: 32 * units.KiB},
		{ID: 2, Op: qp.OpWrite, Region: 0, Local: 0, Remote: 32 * units.KiB, Len: 16 * units.KiB},
		{ID: 3, Op: qp.OpWriteImm, Region: idB, Local: 16 * units.KiB, Remote: 48 * units.KiB, Len: 32 * units.KiB, Imm: 3},
	}
	if k, err := env.Conn.PostSend(0, wrs); k != len(wrs) || err != nil {
		t.Fatalf("PostSend(writes naming regions %#x, 0, %#x) = %d, %v", idA, idB, k, err)
	}
	// Out of the region's bounds: refused or failed, never sent from
	// elsewhere.
	if k, err := env.Conn.PostSend(1, []qp.SendWR{{ID: 4, Op: qp.OpWrite, Region: idB, Local: 32 * units.KiB, Remote: 0, Len: 32 * units.KiB}}); k != 0 || err == nil {
		t.Errorf("PostSend(write past the end of region %#x) = %d, %v; want 0 and an error", idB, k, err)
	}
	c.wait(t, "the writes", func() bool { return len(c.send) >= 3 && len(c.recv) >= 1 })
	for _, s := range c.send {
		if s.Status != qp.StatusOK {
			t.Errorf("write %d completed %v; want ok", s.ID, s.Status)
		}
	}
	got := env.Recv.Region()
	if !bytes.Equal(got[:32*units.KiB], bufA[4096:4096+32*units.KiB]) {
		t.Error("the write from region A did not land A's bytes")
	}
	if !bytes.Equal(got[32*units.KiB:48*units.KiB], env.SendRegion[:16*units.KiB]) {
		t.Error("the write from region 0 did not land the send region's bytes")
	}
	if !bytes.Equal(got[48*units.KiB:80*units.KiB], bufB[16*units.KiB:48*units.KiB]) {
		t.Error("the write from region B did not land B's bytes")
	}
	if err := sr.RemoveSendRegion(idA); err != nil {
		t.Fatalf("RemoveSendRegion(%#x): %v", idA, err)
	}
	if err := sr.RemoveSendRegion(idA); err == nil {
		t.Errorf("second RemoveSendRegion(%#x) succeeded; want an error", idA)
	}
	idC, err := sr.AddSendRegion(make([]byte, 4096))
	if err != nil {
		t.Fatal(err)
	}
	if idC == idA {
		t.Errorf("AddSendRegion after RemoveSendRegion(%#x) returned the same id: a stale work request would alias the new buffer", idA)
	}
	for _, id := range []uint32{idA, 0xdead_beef} {
		if k, err := env.Conn.PostSend(1, []qp.SendWR{{ID: 5, Op: qp.OpWrite, Region: id, Len: 1}}); k != 0 || err == nil {
			t.Errorf("PostSend(write naming unregistered region %#x) = %d, %v; want 0 and an error", id, k, err)
		}
	}
}
