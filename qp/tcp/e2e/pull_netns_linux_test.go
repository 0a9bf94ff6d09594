//go:build linux

package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/qp/tcp/internal/leak"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// shapeIn limits what the namespace's end of pair i sends (the READ
// responses of a pull from the namespace) to rate (tc-tbf(8)).
func (n *netns) shapeIn(i int, rate, burst string) {
	n.t.Helper()
	peer := fmt.Sprintf("mptxb%d-%d", i, os.Getpid()%100000)
	out, err := exec.Command("ip", "netns", "exec", n.name, "tc", "qdisc", "add", "dev", peer, "root", "tbf", "rate", rate, "burst", burst, "latency", "100ms").CombinedOutput()
	if err != nil {
		n.t.Skipf("tc tbf unavailable: %v: %s", err, out)
	}
}

// TestPullRateShapedPaths is the netns must-show: a 1 GiB pull (RDMA READ
// over qp/tcp: READ requests out, READ responses back) from a receiver in
// a network namespace over 4 veth paths whose response directions are
// shaped to 400, 200, 100 and 100 Mbit/s. Every byte lands; each path
// carries its rate's share of the bytes (±15%); the pull completes within
// 1.1× of the ideal, 1 GiB at the 800 Mbit/s the shapers allow together.
// The engine is told nothing about the rates (every path claims 10 Gbit/s):
// the congestion-aware policy follows the delivery rates it measures from
// the READ completions.
func TestPullRateShapedPaths(t *testing.T) {
	leak.Check(t)
	const size = units.GiB
	rates := []float64{400, 200, 100, 100} // Mbit/s
	ns := newNetns(t, len(rates))
	for i, r := range rates {
		ns.shapeIn(i, fmt.Sprintf("%gmbit", r), "256kb")
	}
	var ln *tcp.Listener
	if err := ns.in(func() (err error) {
		ln, err = tcp.Listen("0.0.0.0:0", tcp.ListenConfig{Secret: secret})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	var paths []tcp.PathConfig
	for i := range rates {
		paths = append(paths, tcp.PathConfig{Remote: netip.AddrPortFrom(ns.remote(i), port).String(), Local: ns.local(i), LineRate: 10 * units.Gbps, NIC: i})
	}
	remote := make([]byte, size)
	for i := 0; i < len(remote); i += 4096 {
		remote[i] = byte(i>>12) ^ 0x5a
		remote[i+1] = byte(i >> 20)
	}
	local := make([]byte, size)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	accepted := make(chan *tcp.Receiver, 1)
	go func() {
		r, err := ln.Accept(ctx, make([]byte, 64*units.KiB))
		if err != nil {
			t.Error(err)
		}
		accepted <- r
	}()
	conn, err := tcp.Dial(ctx, "", tcp.DialConfig{Secret: secret, Paths: paths, SendRegion: local})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	recv := <-accepted
	if recv == nil {
		t.FailNow()
	}
	t.Cleanup(func() { recv.Close() })
	e, err := recv.Expose(remote, qp.AccessRead)
	if err != nil {
		t.Fatal(err)
	}
	clock := vtime.NewMonotonic()
	var doneErr error
	done := false
	snd, err := mptx.NewSender(conn, mptx.SenderConfig{
		Engine: multipath.Config{ChunkSize: 4 * units.MiB, Segment: units.MiB, MaxInFlight: 8 * units.MiB, MinTimeout: 2 * time.Second, CC: "fixed",
			CCParams: map[string]string{"window": "unlimited", "rate": "unlimited"}, Pacing: multipath.PacingConfig{Disabled: true}},
		OnDone: func(_ multipath.TransferID, _ vtime.Time, err error) { done, doneErr = true, err },
	})
	if err != nil {
		t.Fatal(err)
	}
	start := clock.Now()
	if _, _, err := snd.SubmitOneSided(start, multipath.TransferSpec{ID: 1, Size: size, Remote: units.Bytes(e.Addr)}, mptx.OneSided{Op: qp.OpRead, RKey: e.Key, PathKeys: e.PathKeys}); err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer lcancel()
	if err := mptx.Loop(lctx, mptx.LoopConfig{Clock: clock, Wake: conn.Notify(), Done: func() bool { return done }}, snd); err != nil {
		t.Fatalf("loop: %v", err)
	}
	took := clock.Now().Sub(start)
	if doneErr != nil {
		t.Fatal(doneErr)
	}
	conn.Close() // no path goroutine writes any more
	if !bytes.Equal(local, remote) {
		t.Fatalf("the pulled GiB differs from the exposed one")
	}
	var total float64
	for i := range rates {
		total += float64(snd.Engine().Stats(i).Bytes)
	}
	var sum float64
	for _, r := range rates {
		sum += r
	}
	ideal := time.Duration(float64(size) * 8 / (sum * 1e6) * float64(time.Second))
	for i, r := range rates {
		share, want := float64(snd.Engine().Stats(i).Bytes)/total, r/sum
		t.Logf("path %d (%g Mbit/s): %.4f of the bytes (rate share %.4f)", i, r, share, want)
		if d := share/want - 1; d > 0.15 || d < -0.15 {
			t.Errorf("path %d carried %.3f of the bytes, want %.3f ±15%%", i, share, want)
		}
	}
	t.Logf("1 GiB pulled in %v, ideal %v (%.3f×), %.2f Gbit/s", took.Round(time.Millisecond), ideal.Round(time.Millisecond), float64(took)/float64(ideal), float64(size)*8/took.Seconds()/1e9)
	if took > ideal*11/10 {
		t.Errorf("the pull took %v, want within 1.1× of the ideal %v", took, ideal)
	}
}
