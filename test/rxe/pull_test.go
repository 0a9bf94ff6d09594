package rxe_test

// One-sided pulls over real verbs (the session API in this process): the
// accepting end registers mmap'd memory and exposes it, the dialing end
// reads it with RDMA READs over both rxe wires.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/units"
)

// mmapped returns n bytes of anonymous mapped memory (exposed memory must
// be outside the Go heap), unmapped at the test's end.
func mmapped(t testing.TB, n int) []byte {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	return mem
}

// rxBytes reads a net device's received byte count.
func rxBytes(t testing.TB, dev string) int64 {
	t.Helper()
	b, err := os.ReadFile("/sys/class/net/" + dev + "/statistics/rx_bytes")
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// pullSetup exposes size bytes of pattern(id) at the acceptor, between
// guard bands of 1 MiB on each side, and hands the descriptor to the
// dialer over the session.
func pullSetup(t testing.TB, snd, rcv *mptx.Session, size int, id int) (backing []byte, d mptx.Descriptor) {
	t.Helper()
	const guard = 1 << 20
	backing = mmapped(t, guard+size+guard)
	copy(backing, pattern(1000+id, len(backing)))
	copy(backing[guard:], pattern(id, size))
	reg, err := rcv.Register(backing[guard : guard+size])
	if err != nil {
		t.Fatal(err)
	}
	exp, err := reg.Expose(0, units.Bytes(size), mptx.AccessRead)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rcv.SendDescriptor(ctx, "kv", exp); err != nil {
		t.Fatal(err)
	}
	name, got, err := snd.RecvDescriptor(ctx)
	if err != nil || name != "kv" || !got.Equal(exp) {
		t.Fatalf("RecvDescriptor = %q, %v, %v; want kv, %v", name, got, err, exp)
	}
	return backing, got
}

// TestSessionVerbsPull: a 48 MiB pull over two rxe paths into a pool
// Buffer (read in place), and into plain memory (staged), every byte and
// the CRC32C checked, both paths used.
func TestSessionVerbsPull(t *testing.T) {
	e := needVM(t)
	const size = 48 << 20
	o := sessOpts{nics: 2, send: 16 * units.MiB, region: 4 * units.MiB}
	scfg, rcfg := e.sessionConfigs(o)
	scfg.Pool = 64 * units.MiB
	snd, rcv := e.sessionsWith(t, scfg, rcfg)
	_, d := pullSetup(t, snd, rcv, size, 1)
	want := pattern(1, size)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	buf, err := snd.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	start := time.Now()
	op, err := snd.ReadAsync(ctx, []mptx.Pair{{Local: buf.Bytes(), Remote: d}})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if got, w := chunk.CRC32C(buf.Bytes()), chunk.CRC32C(want); got != w || !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("pulled CRC32C %#08x, exposed %#08x: the pull differs", got, w)
	}
	st := op.Stats()
	if st.PathBytes[0] == 0 || st.PathBytes[1] == 0 {
		t.Errorf("bytes by path %v: want both paths used", st.PathBytes)
	}
	plain := make([]byte, size)
	if err := snd.Read(ctx, []mptx.Pair{{Local: plain, Remote: d}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain, want) {
		t.Fatalf("the staged pull differs")
	}
	e.report(t, "pull over verbs (RDMA READ), 2 paths: 48 MiB into a pool Buffer in %v (%.0f MiB/s), CRC32C %#08x intact; bytes by path %v; and again staged into plain memory, intact",
		took.Round(time.Millisecond), float64(size)/(1<<20)/took.Seconds(), chunk.CRC32C(want), st.PathBytes)
}

// TestSessionVerbsPullPathDown takes wire 1 down once 2 MiB of a 48 MiB
// pull's responses crossed it: the pull completes intact over wire 0.
func TestSessionVerbsPullPathDown(t *testing.T) {
	e := needVM(t)
	const size = 48 << 20
	wire := e.wires[1]
	scfg, rcfg := e.sessionConfigs(sessOpts{nics: 2, send: 16 * units.MiB, region: 4 * units.MiB})
	scfg.Pool = 64 * units.MiB
	snd, rcv := e.sessionsWith(t, scfg, rcfg)
	_, d := pullSetup(t, snd, rcv, size, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	up := true
	defer func() {
		if !up {
			_ = linkSet(wire, true)
			waitActive(t, e.sender[1])
		}
	}()
	buf, err := snd.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	base := rxBytes(t, wire)
	op, err := snd.ReadAsync(ctx, []mptx.Pair{{Local: buf.Bytes(), Remote: d}})
	if err != nil {
		t.Fatal(err)
	}
	var downAt int64
	for downAt == 0 {
		if c := rxBytes(t, wire) - base; c >= 2<<20 {
			setLink(t, wire, false) // one netlink request: no fork
			up, downAt = false, c
			break
		}
		select {
		case <-op.Done():
			t.Fatalf("the pull ended (%v) before %s carried 2 MiB; nothing was taken down", op.Err(), wire)
		case <-time.After(time.Millisecond):
		}
	}
	if err := op.Wait(ctx); err != nil {
		t.Logf("op: %+v", op.Stats())
		dumpSessions(t, snd, rcv, nil)
		t.Fatalf("pull after %s went down (after %.1f MiB): %v", wire, float64(downAt)/(1<<20), err)
	}
	if got, w := chunk.CRC32C(buf.Bytes()), chunk.CRC32C(pattern(2, size)); got != w {
		t.Fatalf("pulled CRC32C %#08x, exposed %#08x after a path went down", got, w)
	}
	st := op.Stats()
	if st.PathBytes[0] <= st.PathBytes[1] {
		t.Errorf("bytes by path %v: want path 0 to carry the rest after path 1 went down", st.PathBytes)
	}
	setLink(t, wire, true)
	up = true
	waitActive(t, e.sender[1])
	e.report(t, "pull over verbs, %s down after %.1f MiB of a 48 MiB pull: intact (CRC32C); bytes by path %v, %d requeues", wire, float64(downAt)/(1<<20), st.PathBytes, st.Requeues)
}

// TestSessionVerbsPullOutside: a READ past the exposed range (a forged
// descriptor, its length doubled) fails with a remote access error from
// the NIC (ErrRemoteAccess), no byte of the guard band after the range
// reaches the dialer, the acceptor's memory is untouched, and the session
// reads the real range afterwards.
func TestSessionVerbsPullOutside(t *testing.T) {
	e := needVM(t)
	const size = 4 << 20
	scfg, rcfg := e.sessionConfigs(sessOpts{nics: 2, send: 16 * units.MiB, region: 4 * units.MiB})
	scfg.Pool = 16 * units.MiB
	snd, rcv := e.sessionsWith(t, scfg, rcfg)
	backing, d := pullSetup(t, snd, rcv, size, 3)
	before := append([]byte(nil), backing...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	buf, err := snd.Alloc(2 * size)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	canary := pattern(77, 2*size)
	copy(buf.Bytes(), canary)
	forged := d
	forged.Len = 2 * size
	err = snd.Read(ctx, []mptx.Pair{{Local: buf.Bytes(), Remote: forged}})
	if !errors.Is(err, mptx.ErrRemoteAccess) {
		t.Fatalf("Read past the exposure = %v; want ErrRemoteAccess", err)
	}
	if !bytes.Equal(buf.Bytes()[size:], canary[size:]) {
		t.Errorf("bytes from past the exposed range reached the dialer")
	}
	if !bytes.Equal(backing, before) {
		t.Errorf("the acceptor's memory (guard bands included) changed")
	}
	if err := snd.Read(ctx, []mptx.Pair{{Local: buf.Bytes()[:size], Remote: d}}); err != nil {
		t.Fatalf("Read of the real range after the refusal: %v", err)
	}
	if !bytes.Equal(buf.Bytes()[:size], pattern(3, size)) {
		t.Errorf("the read after the refusal differs")
	}
	e.report(t, "pull over verbs past the exposed range: %v; guard bands untouched at both ends; the session read the real range afterwards", err)
}

// sessionsWith opens a sending and a receiving session over verbs with
// the configurations given (see sessions).
func (e env) sessionsWith(t testing.TB, scfg, rcfg mptx.Config) (snd, rcv *mptx.Session) {
	t.Helper()
	ln, err := mptx.Listen("127.0.0.1:0", rcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if snd, err = mptx.Dial(ctx, ln.Addr().String(), scfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snd.Close() })
	if rcv, err = ln.Accept(ctx); err != nil {
		t.Fatalf("Accept: %v", err)
	}
	t.Cleanup(func() { rcv.Close() })
	if snd.Transport() != mptx.TransportVerbs || rcv.Transport() != mptx.TransportVerbs {
		t.Fatalf("transports: sender %v, receiver %v; want verbs", snd.Transport(), rcv.Transport())
	}
	return snd, rcv
}
