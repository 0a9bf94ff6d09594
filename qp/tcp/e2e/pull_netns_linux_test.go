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

// pullShaped pulls size bytes (RDMA READ over qp/tcp: READ requests out,
// READ responses back) from a receiver in a network namespace over 4 veth
// paths whose response directions are shaped to rates (Mbit/s), checks
// every byte, and returns the time it took, the ideal time (size at the
// sum of the rates) and each path's share of the bytes. The engine is told
// nothing about the rates (every path claims 10 Gbit/s): its
// congestion-aware policy follows the delivery rates it measures from the
// READ completions.
func pullShaped(tb testing.TB, size units.Bytes, rates []float64) (took, ideal time.Duration, shares []float64) {
	ns := newNetns(tb, len(rates))
	for i, r := range rates {
		ns.shapeIn(i, fmt.Sprintf("%gmbit", r), "256kb")
	}
	var ln *tcp.Listener
	if err := ns.in(func() (err error) {
		ln, err = tcp.Listen("0.0.0.0:0", tcp.ListenConfig{Secret: secret})
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
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
			tb.Error(err)
		}
		accepted <- r
	}()
	conn, err := tcp.Dial(ctx, "", tcp.DialConfig{Secret: secret, Paths: paths, SendRegion: local})
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	recv := <-accepted
	if recv == nil {
		tb.FailNow()
	}
	defer recv.Close()
	e, err := recv.Expose(remote, qp.AccessRead)
	if err != nil {
		tb.Fatal(err)
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
		tb.Fatal(err)
	}
	start := clock.Now()
	if _, _, err := snd.SubmitOneSided(start, multipath.TransferSpec{ID: 1, Size: size, Remote: units.Bytes(e.Addr)}, mptx.OneSided{Op: qp.OpRead, RKey: e.Key, PathKeys: e.PathKeys}); err != nil {
		tb.Fatal(err)
	}
	lctx, lcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer lcancel()
	if err := mptx.Loop(lctx, mptx.LoopConfig{Clock: clock, Wake: conn.Notify(), Done: func() bool { return done }}, snd); err != nil {
		tb.Fatalf("loop: %v", err)
	}
	took = clock.Now().Sub(start)
	if doneErr != nil {
		tb.Fatal(doneErr)
	}
	conn.Close() // no path goroutine writes any more
	if !bytes.Equal(local, remote) {
		tb.Fatalf("the pulled bytes differ from the exposed ones")
	}
	var total, sum float64
	for i, r := range rates {
		total += float64(snd.Engine().Stats(i).Bytes)
		sum += r
	}
	for i := range rates {
		shares = append(shares, float64(snd.Engine().Stats(i).Bytes)/total)
	}
	ideal = time.Duration(float64(size) * 8 / (sum * 1e6) * float64(time.Second))
	return took, ideal, shares
}

// pullRates are the netns pull's shaped response rates, Mbit/s.
var pullRates = []float64{400, 200, 100, 100}

// TestPullRateShapedPaths is the netns must-show's correctness half: a 1
// GiB pull over 4 paths shaped to 400, 200, 100 and 100 Mbit/s lands
// intact and each path carries its rate's share of the bytes (±15%). The
// time it takes against the ideal (the other half: within 1.1×) is logged
// here and measured by BenchmarkNetnsPull, not asserted (no timed
// assertions in tests). Under the race detector, which slows every copy
// several times, it pulls 64 MiB and checks only the bytes.
func TestPullRateShapedPaths(t *testing.T) {
	leak.Check(t)
	size := units.GiB
	if raceEnabled {
		size = 64 * units.MiB
	}
	took, ideal, shares := pullShaped(t, size, pullRates)
	var sum float64
	for _, r := range pullRates {
		sum += r
	}
	for i, r := range pullRates {
		t.Logf("path %d (%g Mbit/s): %.4f of the bytes (rate share %.4f)", i, r, shares[i], r/sum)
		if d := shares[i]/(r/sum) - 1; !raceEnabled && (d > 0.15 || d < -0.15) {
			t.Errorf("path %d carried %.3f of the bytes, want %.3f ±15%%", i, shares[i], r/sum)
		}
	}
	t.Logf("%v pulled in %v, ideal %v (%.3f×), %.2f Gbit/s", size, took.Round(time.Millisecond), ideal.Round(time.Millisecond),
		float64(took)/float64(ideal), float64(size)*8/took.Seconds()/1e9)
}

// BenchmarkNetnsPull is the netns must-show's timing half: a 1 GiB pull
// over the shaped paths of TestPullRateShapedPaths. "ratio" is the time
// taken over the ideal (1 GiB at 800 Mbit/s: the target is at most 1.1);
// "share0".."share3" are the paths' shares of the bytes (rate shares 0.5,
// 0.25, 0.125, 0.125). Needs root (it skips otherwise).
func BenchmarkNetnsPull(b *testing.B) {
	b.ReportAllocs()
	var ratio float64
	var shares []float64
	for i := 0; i < b.N; i++ {
		took, ideal, sh := pullShaped(b, units.GiB, pullRates)
		ratio += float64(took) / float64(ideal)
		shares = sh
	}
	b.ReportMetric(ratio/float64(b.N), "ratio")
	for i, s := range shares {
		b.ReportMetric(s, fmt.Sprintf("share%d", i))
	}
}
