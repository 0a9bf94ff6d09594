package qptest

import (
	"bytes"
	"testing"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// The READ cases: one-sided access to ranges the receiver exposed
// (qp.Exposer). Every case fills the sender's region and the exposed
// memory with patterns and checks, besides the completions, that no byte
// outside the range a request names changed on either end. Each request
// names the exposure by its key on the path it is posted on
// (Exposure.PathKey): on verbs, paths on different NICs have different
// rkeys, and a request with another path's key is refused like a forged
// one.

// readEnv builds an env for a READ case, or skips the test when the
// backend has no one-sided access.
func readEnv(t *testing.T, f Factory, paths int) (*Env, qp.Exposer) {
	t.Helper()
	env := f(t, paths, region)
	exp, ok := env.Recv.(qp.Exposer)
	if !ok || !env.Conn.Caps().Read {
		t.Skipf("backend has no one-sided access (Caps.Read %v, receiver implements qp.Exposer %v)", env.Conn.Caps().Read, ok)
	}
	return env, exp
}

// alloc returns n bytes the receiver can expose, filled with seed's pattern.
func alloc(env *Env, n units.Bytes, seed byte) []byte {
	var b []byte
	if env.Alloc != nil {
		b = env.Alloc(n)
	} else {
		b = make([]byte, n)
	}
	fill(b, seed)
	return b
}

func expose(t *testing.T, exp qp.Exposer, mem []byte, a qp.Access) qp.Exposure {
	t.Helper()
	e, err := exp.Expose(mem, a)
	if err != nil {
		t.Fatalf("Expose(%d bytes, %v): %v", len(mem), a, err)
	}
	if e.Key == 0 || e.Len != units.Bytes(len(mem)) || e.Access != a || e.Addr+uint64(e.Len) > uint64(units.MaxBytes) {
		t.Fatalf("Expose(%d bytes, %v) = %+v; want a nonzero key, Len %d, Access %v, Addr+Len <= units.MaxBytes", len(mem), a, e, len(mem), a)
	}
	return e
}

func post(t *testing.T, env *Env, path int, wrs ...qp.SendWR) {
	t.Helper()
	if k, err := env.Conn.PostSend(path, wrs); k != len(wrs) || err != nil {
		t.Fatalf("PostSend(path %d, %d WRs) = %d, %v; want %d, nil", path, len(wrs), k, err, len(wrs))
	}
}

// snapshot copies the sender's region (nil if the backend carries no data).
func snapshot(env *Env) []byte {
	if env.SendRegion == nil {
		return nil
	}
	return append([]byte(nil), env.SendRegion...)
}

// sameExcept reports the first offset outside [from, to) where a and b
// differ, -1 if none.
func sameExcept(a, b []byte, from, to int) int {
	for i := range a {
		if (i < from || i >= to) && a[i] != b[i] {
			return i
		}
	}
	return -1
}

func byID(c []qp.Completion, id uint64) (qp.Completion, bool) {
	for _, x := range c {
		if x.ID == id {
			return x, true
		}
	}
	return qp.Completion{}, false
}

func testReadLands(t *testing.T, f Factory) {
	const paths = 2
	env, exp := readEnv(t, f, paths)
	if env.SendRegion != nil {
		fill(env.SendRegion, 0x21)
	}
	before := snapshot(env)
	remote := alloc(env, 256*units.KiB, 0x9c)
	e := expose(t, exp, remote, qp.AccessRead)
	c := newCollector(env)
	const n = 64*units.KiB - 3
	for p := 0; p < paths; p++ {
		// Unaligned on both ends.
		post(t, env, p, qp.SendWR{ID: uint64(200 + p), Op: qp.OpRead, Local: units.Bytes(p)*128*units.KiB + 5,
			Remote: units.Bytes(e.Addr) + units.Bytes(p)*64*units.KiB + 101, Len: n, RKey: e.PathKey(p)})
	}
	c.wait(t, "2 READ completions", func() bool { return len(c.send) >= paths })
	for _, s := range c.send {
		if s.Status != qp.StatusOK || s.Op != qp.OpRead || s.ID != uint64(200+s.Path) || s.Bytes != n {
			t.Errorf("READ completion %+v; want status ok, RDMA_READ, ID 200+path, %d bytes", s, n)
		}
	}
	c.drain(t)
	if len(c.recv) != 0 {
		t.Errorf("READs produced receive completions at the responder: %v; want none", c.recv)
	}
	if env.SendRegion == nil {
		return
	}
	for p := 0; p < paths; p++ {
		l := int(units.Bytes(p)*128*units.KiB + 5)
		r := p*64*1024 + 101
		if !bytes.Equal(env.SendRegion[l:l+int(n)], remote[r:r+int(n)]) {
			t.Errorf("path %d: local [%d, %d) differs from the remote range it read", p, l, l+int(n))
		}
		if i := sameExcept(before[l-5:l+int(n)+5], env.SendRegion[l-5:l+int(n)+5], 5, 5+int(n)); i >= 0 {
			t.Errorf("path %d: the READ changed local byte %d outside its range", p, l-5+i)
		}
	}
	// Nothing else of the local region moved.
	for i := range before {
		inRead := false
		for p := 0; p < paths; p++ {
			l := p*128*1024 + 5
			inRead = inRead || (i >= l && i < l+int(n))
		}
		if !inRead && before[i] != env.SendRegion[i] {
			t.Fatalf("local byte %d changed; no READ targets it", i)
		}
	}
}

// testReadOutside: a READ that starts inside the exposed range and runs
// past its end, and one that starts before it, fail with a remote access
// error; the requester's destination and the responder's guard bytes on
// both sides of the range stay as they were.
func testReadOutside(t *testing.T, f Factory) {
	env, exp := readEnv(t, f, 2)
	if env.SendRegion != nil {
		fill(env.SendRegion, 0x47)
	}
	before := snapshot(env)
	backing := alloc(env, 64*units.KiB, 0x3e)
	want := append([]byte(nil), backing...)
	const lo, hi = 16 * 1024, 32 * 1024 // guard bytes: [0, lo) and [hi, end)
	e := expose(t, exp, backing[lo:hi], qp.AccessRead)
	c := newCollector(env)
	post(t, env, 0, qp.SendWR{ID: 1, Op: qp.OpRead, Local: 0, Remote: units.Bytes(e.Addr) + 8*units.KiB, Len: 16 * units.KiB, RKey: e.Key})
	post(t, env, 1, qp.SendWR{ID: 2, Op: qp.OpRead, Local: 64 * units.KiB, Remote: units.Bytes(e.Addr) - 1, Len: 4 * units.KiB, RKey: e.PathKey(1)})
	c.wait(t, "both failed READs", func() bool { return len(c.send) >= 2 })
	for _, id := range []uint64{1, 2} {
		if s, ok := byID(c.send, id); !ok || s.Status != qp.StatusRemoteAccess {
			t.Errorf("READ %d outside the exposed range completed %+v; want status remote-access-error", id, s)
		}
	}
	if !bytes.Equal(backing, want) {
		t.Errorf("the responder's memory changed (guard bytes included) after READs outside its range")
	}
	if before != nil && !bytes.Equal(before, env.SendRegion) {
		i := sameExcept(before, env.SendRegion, 0, 0)
		t.Errorf("a refused READ changed the requester's region (first at byte %d)", i)
	}
}

// testRights: a READ of a write-only range and a keyed WRITE into a
// read-only one fail with a remote access error and move no byte.
func testRights(t *testing.T, f Factory) {
	env, exp := readEnv(t, f, 2)
	if env.SendRegion != nil {
		fill(env.SendRegion, 0x58)
	}
	before := snapshot(env)
	wo := alloc(env, 16*units.KiB, 0x61)
	ro := alloc(env, 16*units.KiB, 0x62)
	woWant, roWant := append([]byte(nil), wo...), append([]byte(nil), ro...)
	ew := expose(t, exp, wo, qp.AccessWrite)
	er := expose(t, exp, ro, qp.AccessRead)
	c := newCollector(env)
	post(t, env, 0, qp.SendWR{ID: 1, Op: qp.OpRead, Local: 0, Remote: units.Bytes(ew.Addr), Len: 4096, RKey: ew.Key})
	post(t, env, 1, qp.SendWR{ID: 2, Op: qp.OpWrite, Local: 8192, Remote: units.Bytes(er.Addr), Len: 4096, RKey: er.PathKey(1)})
	c.wait(t, "both refused requests", func() bool { return len(c.send) >= 2 })
	for _, id := range []uint64{1, 2} {
		if s, ok := byID(c.send, id); !ok || s.Status != qp.StatusRemoteAccess {
			t.Errorf("request %d without the range's right completed %+v; want status remote-access-error", id, s)
		}
	}
	if !bytes.Equal(wo, woWant) || !bytes.Equal(ro, roWant) {
		t.Errorf("a refused request changed exposed memory")
	}
	if before != nil && !bytes.Equal(before, env.SendRegion) {
		t.Errorf("a READ of a write-only range changed the requester's region")
	}
}

// testReadRecvRegion: the receive region (RKey 0) is writable, not
// readable.
func testReadRecvRegion(t *testing.T, f Factory) {
	env, _ := readEnv(t, f, 1)
	c := newCollector(env)
	post(t, env, 0, qp.SendWR{ID: 3, Op: qp.OpRead, Local: 0, Remote: 0, Len: 4096})
	c.wait(t, "the READ of the receive region", func() bool { return len(c.send) >= 1 })
	if s := c.send[0]; s.Status != qp.StatusRemoteAccess {
		t.Errorf("READ with RKey 0 (the receive region) completed %+v; want remote-access-error", s)
	}
}

// testKeyedWrite: a WRITE and a WRITE WITH IMM naming an exposed
// writable range land there, exactly; the immediate reaches the receiver.
func testKeyedWrite(t *testing.T, f Factory) {
	env, exp := readEnv(t, f, 1)
	if env.SendRegion != nil {
		fill(env.SendRegion, 0x73)
	}
	dst := alloc(env, 64*units.KiB, 0x74)
	want := append([]byte(nil), dst...)
	e := expose(t, exp, dst, qp.AccessWrite|qp.AccessRead)
	c := newCollector(env)
	post(t, env, 0,
		qp.SendWR{ID: 1, Op: qp.OpWrite, Local: 1000, Remote: units.Bytes(e.Addr) + 3, Len: 10_000, RKey: e.Key},
		qp.SendWR{ID: 2, Op: qp.OpWriteImm, Local: 30_000, Remote: units.Bytes(e.Addr) + 40_000, Len: 20_000, RKey: e.Key, Imm: 0x1234})
	c.wait(t, "both keyed writes", func() bool { return len(c.send) >= 2 && len(c.recv) >= 1 })
	for i, s := range c.send {
		if s.Status != qp.StatusOK || s.ID != uint64(i+1) {
			t.Errorf("keyed write completion %d = %+v; want id %d ok", i, s, i+1)
		}
	}
	if r := c.recv[0]; r.Imm != 0x1234 || r.Bytes != 20_000 || len(c.recv) != 1 {
		t.Errorf("receive completions %v; want one, Imm 0x1234, 20000 bytes", c.recv)
	}
	if env.SendRegion == nil {
		return
	}
	copy(want[3:], env.SendRegion[1000:11_000])
	copy(want[40_000:], env.SendRegion[30_000:50_000])
	if !bytes.Equal(dst, want) {
		t.Errorf("exposed range after the keyed writes differs from what was written (first at byte %d)", sameExcept(dst, want, 0, 0))
	}
}

// testRevoke: a READ works until Revoke, fails after it, and a second
// Revoke of the key is an error.
func testRevoke(t *testing.T, f Factory) {
	env, exp := readEnv(t, f, 2)
	remote := alloc(env, 16*units.KiB, 0x15)
	e := expose(t, exp, remote, qp.AccessRead)
	c := newCollector(env)
	post(t, env, 0, qp.SendWR{ID: 1, Op: qp.OpRead, Remote: units.Bytes(e.Addr), Len: 4096, RKey: e.Key})
	c.wait(t, "the READ before Revoke", func() bool { return len(c.send) >= 1 })
	if s := c.send[0]; s.Status != qp.StatusOK {
		t.Fatalf("READ before Revoke completed %+v; want ok", s)
	}
	if err := exp.RevokeKey(e.Key); err != nil {
		t.Fatalf("RevokeKey(%#x): %v", e.Key, err)
	}
	if env.SendRegion != nil {
		fill(env.SendRegion, 0x16)
	}
	before := snapshot(env)
	c.send = nil
	post(t, env, 1, qp.SendWR{ID: 2, Op: qp.OpRead, Remote: units.Bytes(e.Addr), Len: 4096, RKey: e.PathKey(1)})
	c.wait(t, "the READ after Revoke", func() bool { return len(c.send) >= 1 })
	if s := c.send[0]; s.Status != qp.StatusRemoteAccess {
		t.Errorf("READ after Revoke completed %+v; want remote-access-error", s)
	}
	if before != nil && !bytes.Equal(before, env.SendRegion) {
		t.Errorf("a READ of a revoked key changed the requester's region")
	}
	if err := exp.RevokeKey(e.Key); err == nil {
		t.Errorf("second RevokeKey(%#x) = nil; want an error (the key is gone)", e.Key)
	}
}

// testReadOrder: WRITEs and READs posted in one batch on one path
// complete in post order, each with its own opcode.
func testReadOrder(t *testing.T, f Factory) {
	env, exp := readEnv(t, f, 1)
	if env.SendRegion != nil {
		fill(env.SendRegion, 0x2a)
	}
	remote := alloc(env, 256*units.KiB, 0x2b)
	e := expose(t, exp, remote, qp.AccessRead)
	c := newCollector(env)
	wrs := []qp.SendWR{
		{ID: 1, Op: qp.OpWrite, Local: 0, Remote: 0, Len: 64 * units.KiB},
		{ID: 2, Op: qp.OpRead, Local: 512 * units.KiB, Remote: units.Bytes(e.Addr), Len: 128 * units.KiB, RKey: e.Key},
		{ID: 3, Op: qp.OpWriteImm, Local: 64 * units.KiB, Remote: 64 * units.KiB, Len: 8 * units.KiB, Imm: 9},
		{ID: 4, Op: qp.OpRead, Local: 768 * units.KiB, Remote: units.Bytes(e.Addr) + 128*units.KiB, Len: 4 * units.KiB, RKey: e.Key},
	}
	post(t, env, 0, wrs...)
	c.wait(t, "4 completions", func() bool { return len(c.send) >= 4 && len(c.recv) >= 1 })
	for i, s := range c.send {
		if s.ID != wrs[i].ID || s.Op != wrs[i].Op || s.Status != qp.StatusOK {
			t.Errorf("completion %d = id %d %v %v; want id %d %v ok (completions in post order)", i, s.ID, s.Op, s.Status, wrs[i].ID, wrs[i].Op)
		}
	}
	if env.SendRegion != nil && !bytes.Equal(env.SendRegion[512*1024:640*1024], remote[:128*1024]) {
		t.Errorf("the READ between writes did not land")
	}
}

// testReadFailedPath: READs on a broken path fail; the other path reads.
func testReadFailedPath(t *testing.T, f Factory) {
	env, exp := readEnv(t, f, 2)
	if env.Fail == nil {
		t.Fatal("Env.Fail is nil")
	}
	remote := alloc(env, 64*units.KiB, 0x41)
	e := expose(t, exp, remote, qp.AccessRead)
	c := newCollector(env)
	if err := env.Fail(0); err != nil {
		t.Fatalf("Fail(0): %v", err)
	}
	wrs := []qp.SendWR{{ID: 1, Op: qp.OpRead, Remote: units.Bytes(e.Addr), Len: 4096, RKey: e.Key}, {ID: 2, Op: qp.OpRead, Local: 4096, Remote: units.Bytes(e.Addr), Len: 4096, RKey: e.Key}}
	k, err := env.Conn.PostSend(0, wrs)
	if err == nil && k == 2 {
		c.wait(t, "errors on the failed path", func() bool { return len(c.send) >= 2 })
		for _, s := range c.send {
			if s.Status == qp.StatusOK {
				t.Errorf("READ %d on a failed path completed ok", s.ID)
			}
		}
	} else if k != 0 && err == nil {
		t.Errorf("PostSend on a failed path = %d, nil; want both accepted (and failing) or an error", k)
	}
	c.send = nil
	post(t, env, 1, qp.SendWR{ID: 3, Op: qp.OpRead, Local: 8192, Remote: units.Bytes(e.Addr), Len: 4096, RKey: e.PathKey(1)})
	c.wait(t, "path 1's READ", func() bool { _, ok := byID(c.send, 3); return ok })
	if s, _ := byID(c.send, 3); s.Status != qp.StatusOK {
		t.Errorf("READ on the healthy path completed %+v; want ok", s)
	}
}

// testReadFence: READs outstanding when Reset is called never land
// afterwards: the requester overwrites the destination as soon as Reset
// returns (an application reusing a buffer handed back to it), and the
// bytes must stay as it left them however long the network runs on.
func testReadFence(t *testing.T, f Factory) {
	env, exp := readEnv(t, f, 1)
	rs, ok := env.Conn.(qp.Resetter)
	if !ok {
		t.Skip("backend has no qp.Resetter: nothing to fence with")
	}
	if env.SendRegion == nil {
		t.Skip("backend carries no data: no byte can land")
	}
	remote := alloc(env, 512*units.KiB, 0x55)
	e := expose(t, exp, remote, qp.AccessRead)
	c := newCollector(env)
	const k = 4
	for i := 0; i < k; i++ {
		post(t, env, 0, qp.SendWR{ID: uint64(i + 1), Op: qp.OpRead, Local: units.Bytes(i) * 128 * units.KiB,
			Remote: units.Bytes(e.Addr) + units.Bytes(i)*128*units.KiB, Len: 128 * units.KiB, RKey: e.Key})
	}
	if err := rs.Reset(0); err != nil {
		t.Fatalf("Reset(0): %v", err)
	}
	fill(env.SendRegion, 0xee) // the buffer is reused at once
	canary := snapshot(env)
	for i := 0; i < 2000 && len(c.send) < k; i++ {
		c.drain(t)
		env.Progress()
	}
	for i := 0; i < 100; i++ {
		c.drain(t)
		env.Progress()
	}
	for _, s := range c.send {
		if s.Status != qp.StatusFlushed && s.Status != qp.StatusOK {
			t.Errorf("READ %d outstanding at Reset completed %v; want flushed (or ok, had it completed before)", s.ID, s.Status)
		}
	}
	if i := sameExcept(canary, env.SendRegion, 0, 0); i >= 0 {
		t.Errorf("a READ outstanding at Reset landed afterwards (first changed byte %d)", i)
	}
	// The path works again.
	c.send = nil
	post(t, env, 0, qp.SendWR{ID: 9, Op: qp.OpRead, Remote: units.Bytes(e.Addr), Len: 4096, RKey: e.Key})
	c.wait(t, "a READ after the reset", func() bool { _, ok := byID(c.send, 9); return ok })
	if s, _ := byID(c.send, 9); s.Status != qp.StatusOK {
		t.Errorf("READ after Reset completed %+v; want ok", s)
	}
}

func testReadNoAllocs(t *testing.T, f Factory) {
	env, exp := readEnv(t, f, 1)
	remote := alloc(env, 64*units.KiB, 0x66)
	e := expose(t, exp, remote, qp.AccessRead)
	wr := []qp.SendWR{{ID: 1, Op: qp.OpRead, Remote: units.Bytes(e.Addr), Len: 4096, RKey: e.Key}}
	buf := make([]qp.Completion, 8)
	round := func() {
		if k, err := env.Conn.PostSend(0, wr); k != 1 || err != nil {
			t.Fatalf("PostSend = %d, %v", k, err)
		}
		for i := 0; ; i++ {
			if n, _ := env.Conn.Poll(buf); n > 0 {
				return
			}
			env.Progress()
			if i > 1_000_000 {
				t.Fatal("no completion")
			}
		}
	}
	for i := 0; i < 10; i++ {
		round()
	}
	if a := testing.AllocsPerRun(50, round); a != 0 {
		t.Errorf("READ post + poll round allocates %.1f times; want 0", a)
	}
}
