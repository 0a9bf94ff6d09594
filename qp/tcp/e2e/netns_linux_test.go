//go:build linux

package e2e_test

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/qp/tcp/internal/leak"
	"github.com/mptx-dev/mptx/units"
)

// netns is a network namespace with veth pairs to the test's namespace,
// built with ip(8) and removed by the test's cleanup.
type netns struct {
	t    testing.TB
	name string
	// links[i] is the i-th pair's end in our namespace; its peer is in
	// the namespace. Pair i uses 198.18.(10+i).0/24 (RFC 2544's benchmark
	// range): .1 here, .2 there.
	links []string
}

func (n *netns) ip(args ...string) {
	n.t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		n.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newNetns creates the namespace and pairs veth pairs, or skips the test
// where that is impossible (not root, no ip(8), no namespaces).
func newNetns(t testing.TB, pairs int) *netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s(8) not found: %v", tool, err)
		}
	}
	n := &netns{t: t, name: fmt.Sprintf("mptx-e2e-%d", os.Getpid())}
	if out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() {
		// Deleting the namespace destroys the peers and with them the
		// pairs; deleting our ends too covers a half-built setup.
		for _, l := range n.links {
			_ = exec.Command("ip", "link", "del", l).Run()
		}
		if out, err := exec.Command("ip", "netns", "del", n.name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", n.name, err, out)
		}
	})
	n.ip("-n", n.name, "link", "set", "lo", "up")
	for i := 0; i < pairs; i++ {
		a := fmt.Sprintf("mptxa%d-%d", i, os.Getpid()%100000)
		b := fmt.Sprintf("mptxb%d-%d", i, os.Getpid()%100000)
		n.ip("link", "add", a, "type", "veth", "peer", "name", b)
		n.links = append(n.links, a)
		n.ip("link", "set", b, "netns", n.name)
		n.ip("addr", "add", n.local(i).String()+"/24", "dev", a)
		n.ip("-n", n.name, "addr", "add", n.remote(i).String()+"/24", "dev", b)
		n.ip("link", "set", a, "up")
		n.ip("-n", n.name, "link", "set", b, "up")
	}
	return n
}

func (n *netns) local(i int) netip.Addr  { return netip.AddrFrom4([4]byte{198, 18, byte(10 + i), 1}) }
func (n *netns) remote(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, byte(10 + i), 2}) }

// shape limits what our end of pair i sends to rate with a token bucket
// filter (tc-tbf(8)); netem is not available on this kernel.
func (n *netns) shape(i int, rate string) {
	n.t.Helper()
	out, err := exec.Command("tc", "qdisc", "add", "dev", n.links[i], "root", "tbf", "rate", rate, "burst", "64kb", "latency", "100ms").CombinedOutput()
	if err != nil {
		n.t.Skipf("tc tbf unavailable: %v: %s", err, out)
	}
}

// in runs f on an OS thread that has entered the namespace, so that the
// sockets f creates live there (they stay there when the thread leaves).
func (n *netns) in(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread if restoring fails: the thread then dies
		// with this goroutine instead of serving others in the wrong
		// namespace.
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer self.Close()
		target, err := os.Open("/run/netns/" + n.name)
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns(%s): %w", n.name, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns back: %w", err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// TestRateShapedPaths sends a tensor over two veth paths shaped to 40 and
// 20 Mbit/s into a namespace: the engine's congestion-aware policy should
// split the bytes about 2:1, following the rates it measures (both paths
// claim the same 1 Gbit/s line rate, so nothing tells it the split in
// advance). The rates are low so that the shaping, not the CPU, is the
// bottleneck even under the race detector on a loaded 2-core machine: at
// 200 and 100 Mbit/s such a run moved 100 Mbit/s in all, CPU-bound, and
// split the bytes evenly.
func TestRateShapedPaths(t *testing.T) {
	leak.Check(t)
	ns := newNetns(t, 2)
	ns.shape(0, "40mbit")
	ns.shape(1, "20mbit")
	const size = 16 * units.MiB
	var port uint16
	r := newRig(t, rigConfig{
		size:   size,
		listen: "0.0.0.0:0",
		listenIn: func(listen func() (*tcp.Listener, error)) (*tcp.Listener, error) {
			var ln *tcp.Listener
			err := ns.in(func() (err error) { ln, err = listen(); return err })
			if err == nil {
				port = uint16(ln.Addr().(*net.TCPAddr).Port)
			}
			return ln, err
		},
		dialFn: func() []tcp.PathConfig {
			return []tcp.PathConfig{
				{Remote: netip.AddrPortFrom(ns.remote(0), port).String(), Local: ns.local(0), LineRate: units.Gbps},
				{Remote: netip.AddrPortFrom(ns.remote(1), port).String(), Local: ns.local(1), LineRate: units.Gbps},
			}
		},
		engine: multipath.Config{ChunkSize: 512 * units.KiB, MaxInFlight: units.MiB, MinTimeout: time.Second},
	})
	d := r.transfer(1, nil)
	b0, b1 := r.conn.PathBytes(0), r.conn.PathBytes(1)
	r.verify()
	share := float64(b0) / float64(b0+b1)
	t.Logf("%v in %v (%.0f Mbit/s): path 0 (40 Mbit/s) %v, path 1 (20 Mbit/s) %v; path 0's share %.3f",
		units.Bytes(size), d, gbps(size, d)*1000, b0, b1, share)
	if share < 0.57 || share > 0.77 {
		t.Errorf("path 0 carried %.3f of the bytes; want about 2/3 (0.57..0.77), as its rate is twice path 1's", share)
	}
}
