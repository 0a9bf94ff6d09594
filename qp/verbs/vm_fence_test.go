//go:build linux && cgo

package verbs

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// hwCounter reads one of dev's port counters (rdma statistic; sysfs
// hw_counters), 0 if it has none of that name.
func hwCounter(t *testing.T, dev, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/hw_counters/" + name)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v
}

// netem holds wire's egress packets back by delay (tc-netem(8)) until
// the test ends or stop is called; stop deletes the qdisc, which drops
// what it held.
func netem(t testing.TB, wire string, delay time.Duration) (stop func()) {
	t.Helper()
	args := []string{"qdisc", "replace", "dev", wire, "root", "netem", "delay", strconv.Itoa(int(delay.Milliseconds())) + "ms", "limit", "100000"}
	if out, err := exec.Command("tc", args...).CombinedOutput(); err != nil {
		t.Fatalf("tc %v: %v: %s", args, err, out)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() { _ = exec.Command("tc", "qdisc", "del", "dev", wire, "root").Run() })
	}
	t.Cleanup(stop)
	return stop
}

// TestVMResetFencesStall is qp.Resetter's fence on a stalled path, on real
// RC queue pairs: path 1's wire holds every packet back for 1.5 s (netem),
// so its writes are in flight, unacknowledged, while its QP is healthy
// (RTS; the ACK timeout, about 4 s, has not fired). Reset returns well
// before the held packets reach the receiver; once they have, the region
// must still be untouched and no immediate may have reached the receiver's
// completion queue, although the receiver's NIC did get the packets
// (rcvd_pkts grows after Reset) and refused them by PSN. A Reset that left
// a healthy QP alone, as it did before, fails this test: the held writes
// land 1.5 s after they were posted. Then the path carries data again.
func TestVMResetFencesStall(t *testing.T) {
	e := needVM(t)
	const delay = 1500 * time.Millisecond
	p := newPair(t, e, pairOpts{qpsPerNIC: 1, size: 4 * units.MiB, qp: QPConfig{Timeout: 4 * time.Second, RetryCount: 7}})
	src, region := p.send.Bytes(), p.recv.Region()
	for i := range src {
		src[i] = byte(i*7) | 1 // never zero
	}
	clear(region)
	stopNetem := netem(t, e.wires[1], delay)
	const n, seg = 8, 256 << 10
	wrs := make([]qp.SendWR, n)
	for i := range wrs {
		wrs[i] = qp.SendWR{ID: uint64(100 + i), Op: qp.OpWriteImm, Local: units.Bytes(i * seg), Remote: units.Bytes(i * seg), Len: seg, Imm: uint32(i)}
	}
	posted := time.Now()
	if k, err := p.conn.PostSend(1, wrs); k != n || err != nil {
		t.Fatalf("PostSend = %d, %v", k, err)
	}
	time.Sleep(300 * time.Millisecond)
	if !p.conn.inRTS(1) || p.conn.PathErr(1) != nil {
		t.Fatalf("path 1 is not a healthy stalled path before Reset (RTS %v, PathErr %v)", p.conn.inRTS(1), p.conn.PathErr(1))
	}
	if c := firstNonZero(region); c >= 0 {
		t.Fatalf("byte %d landed before Reset: the delay did not hold the writes back, so this run cannot show a fence", c)
	}
	rdev := e.receiver[1]
	if err := p.conn.Reset(1); err != nil {
		t.Fatalf("Reset of the stalled path: %v", err)
	}
	returned := time.Now()
	if returned.Sub(posted) > delay-200*time.Millisecond {
		t.Fatalf("Reset returned %v after the post, too close to the %v delay to tell a fence from a race", returned.Sub(posted), delay)
	}
	if c := firstNonZero(region); c >= 0 {
		t.Fatalf("byte %d landed before Reset returned; the delay did not hold", c)
	}
	rcvd := hwCounter(t, rdev, "rcvd_pkts")
	dup, oos := hwCounter(t, rdev, "duplicate_request"), hwCounter(t, rdev, "out_of_seq_request")
	// Let the held packets arrive, polling both ends meanwhile.
	buf := make([]qp.Completion, 64)
	var sendCQEs, recvCQEs []qp.Completion
	for time.Since(posted) < delay+1500*time.Millisecond {
		k, err := p.conn.Poll(buf)
		if err != nil {
			t.Fatal(err)
		}
		sendCQEs = append(sendCQEs, buf[:k]...)
		k, err = p.recv.Poll(buf)
		if err != nil {
			t.Fatal(err)
		}
		recvCQEs = append(recvCQEs, buf[:k]...)
		time.Sleep(5 * time.Millisecond)
	}
	after := hwCounter(t, rdev, "rcvd_pkts")
	t.Logf("after Reset (%v after the post): %s rcvd_pkts +%d, duplicate_request +%d, out_of_seq_request +%d; sender completions %d",
		returned.Sub(posted).Round(time.Millisecond), rdev, after-rcvd, hwCounter(t, rdev, "duplicate_request")-dup, hwCounter(t, rdev, "out_of_seq_request")-oos, len(sendCQEs))
	if c := firstNonZero(region); c >= 0 {
		t.Fatalf("byte %d of the region was written after Reset returned: the stalled path was not fenced", c)
	}
	for _, c := range recvCQEs {
		if c.Path == 1 {
			t.Fatalf("an immediate of the fenced writes reached the receiver after Reset: %+v", c)
		}
	}
	for _, c := range sendCQEs {
		if c.Status == qp.StatusOK {
			t.Fatalf("a fenced write completed successfully: %+v", c)
		}
	}
	if after == rcvd {
		t.Errorf("%s received no packet after Reset: the held writes never arrived, so this run did not show them refused", rdev)
	}
	// The path works again.
	stopNetem()
	wr := []qp.SendWR{{ID: 200, Op: qp.OpWriteImm, Local: 0, Remote: 0, Len: seg, Imm: 0x55}}
	if k, err := p.conn.PostSend(1, wr); k != 1 || err != nil {
		t.Fatalf("PostSend after Reset = %d, %v", k, err)
	}
	for done := false; !done; {
		for _, c := range waitSend(t, p.conn, 1) {
			if c.ID != 200 {
				continue // a flush of the fenced writes, still in the CQ
			}
			if c.Status != qp.StatusOK {
				t.Fatalf("write after Reset completed %+v", c)
			}
			done = true
		}
	}
	if c := waitRecv(t, p.recv, 1)[0]; c.Imm != 0x55 || c.Path != 1 {
		t.Fatalf("receiver after Reset saw %+v", c)
	}
	for i := 0; i < seg; i++ {
		if region[i] != src[i] {
			t.Fatalf("byte %d after Reset = %#x, want %#x", i, region[i], src[i])
		}
	}
	if c := firstNonZero(region[seg:]); c >= 0 {
		t.Fatalf("byte %d beyond the new write is set", seg+c)
	}
}

func firstNonZero(b []byte) int {
	for i, v := range b {
		if v != 0 {
			return i
		}
	}
	return -1
}
