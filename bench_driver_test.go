package mptx_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/mem"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// zeroConn is a qp.Conn whose paths cost the CPU nothing beyond
// bookkeeping: each path is a FIFO server of a line rate with a fixed
// round-trip time, as qp/mem's, but no byte is moved and no event list is
// kept. A work request posted at now completes at max(now, the path's
// previous one's end) + Len/rate + rtt; Poll hands out the completions due
// by the clock in time order from a binary heap. It lets
// BenchmarkDriverRound charge the driver (Sender.Step: poll, engine, post)
// and not the backend.
type zeroConn struct {
	now   vtime.Time
	rtts  []time.Duration
	infos []qp.PathInfo
	busy  []vtime.Time
	heap  []zeroDone
}

type zeroDone struct {
	at   vtime.Time
	id   uint64
	path int
	n    units.Bytes
}

// newZeroConn returns paths of rate whose RTTs are rtt plus 31 ns per path
// index, so that their completions interleave instead of falling due
// together: a step then handles about one completion, as on hardware.
func newZeroConn(paths int, rate units.BitRate, rtt time.Duration) *zeroConn {
	c := &zeroConn{now: vtime.Epoch, busy: make([]vtime.Time, paths), heap: make([]zeroDone, 0, 64*paths)}
	for i := range paths {
		r := rtt + time.Duration(i)*31*time.Nanosecond
		c.rtts = append(c.rtts, r)
		c.infos = append(c.infos, qp.PathInfo{QPN: uint32(0x100 + i), Device: "zero", Port: 1, NIC: i,
			LineRate: rate, BaseRTT: r, MTU: 4096, Hops: 1})
	}
	return c
}

func (c *zeroConn) Paths() []qp.PathInfo { return c.infos }

func (c *zeroConn) PostSend(path int, wrs []qp.SendWR) (int, error) {
	for _, wr := range wrs {
		end := max(c.now, c.busy[path]).Add(c.infos[path].LineRate.TxTime(wr.Len))
		c.busy[path] = end
		c.push(zeroDone{at: end.Add(c.rtts[path]), id: wr.ID, path: path, n: wr.Len})
	}
	return len(wrs), nil
}

func (c *zeroConn) Poll(dst []qp.Completion) (int, error) {
	k := 0
	for k < len(dst) && len(c.heap) > 0 && c.heap[0].at <= c.now {
		d := c.pop()
		dst[k] = qp.Completion{ID: d.id, Path: d.path, QPN: c.infos[d.path].QPN, Op: qp.OpWrite, Status: qp.StatusOK, Bytes: d.n, At: d.at}
		k++
	}
	return k, nil
}

func (c *zeroConn) Counters(int) (qp.Counters, error) { return qp.Counters{}, nil }

func (c *zeroConn) Caps() qp.Caps {
	return qp.Caps{Timestamps: true, MaxSendWR: 1024, MaxMessageBytes: units.GiB}
}

func (c *zeroConn) Close() error { return nil }

// next returns the earliest pending completion, 0 if none.
func (c *zeroConn) next() vtime.Time {
	if len(c.heap) == 0 {
		return 0
	}
	return c.heap[0].at
}

func (c *zeroConn) push(d zeroDone) {
	c.heap = append(c.heap, d)
	for i := len(c.heap) - 1; i > 0; {
		p := (i - 1) / 2
		if c.heap[p].at <= c.heap[i].at {
			break
		}
		c.heap[p], c.heap[i] = c.heap[i], c.heap[p]
		i = p
	}
}

func (c *zeroConn) pop() zeroDone {
	top := c.heap[0]
	last := len(c.heap) - 1
	c.heap[0] = c.heap[last]
	c.heap = c.heap[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= last {
			break
		}
		m := l
		if r := l + 1; r < last && c.heap[r].at < c.heap[l].at {
			m = r
		}
		if c.heap[i].at <= c.heap[m].at {
			break
		}
		c.heap[i], c.heap[m] = c.heap[m], c.heap[i]
		i = m
	}
	return top
}

// chunksDone sums the chunks the sender's engine completed on every path.
func chunksDone(s *mptx.Sender) int {
	e, n := s.Engine(), 0
	for i := range e.NumPaths() {
		n += e.Stats(i).Chunks
	}
	return n
}

// BenchmarkDriverRound measures the driver's round, Sender.Step (poll the
// completions due, feed the engine, run its timer, carry out its actions:
// post per path), on paths of 100 Gb/s and about 10 µs RTT (staggered by
// tens of nanoseconds per path, so completions interleave) carrying one endless
// transfer of 4 MiB chunks in the default configuration (DCQCN, software
// pacing, 128 KiB segments). One op is one Step at the next completion or
// deadline; ns/chunk is the driver's cost per 4 MiB chunk, which should
// not grow with the number of paths (the work per chunk is the same).
//
// backend=zero is zeroConn: the paths cost nothing, so the figure is the
// driver's alone. backend=mem is qp/mem, one transfer after another
// through a receive region of 8 MiB per path (at least 64 MiB): it also
// moves (clears) every byte and keeps an event heap, which is most of its
// cost per chunk.
func BenchmarkDriverRound(b *testing.B) {
	const rate, rtt = 100 * units.Gbps, 10 * time.Microsecond
	for _, backend := range []string{"zero", "mem"} {
		for _, paths := range []int{1, 4, 16, 64} {
			b.Run(fmt.Sprintf("backend=%s/paths=%d", backend, paths), func(b *testing.B) {
				if backend == "zero" {
					benchZero(b, paths, rate, rtt)
				} else {
					benchMem(b, paths, rate, rtt)
				}
			})
		}
	}
}

func benchZero(b *testing.B, paths int, rate units.BitRate, rtt time.Duration) {
	c := newZeroConn(paths, rate, rtt)
	s, err := mptx.NewSender(c, mptx.SenderConfig{})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.Submit(c.now, multipath.TransferSpec{ID: 1, Size: chunk.MaxTensor(4 * units.MiB), ChunkSize: 4 * units.MiB}); err != nil {
		b.Fatal(err)
	}
	next := s.Step(c.now)
	step := func() {
		t := vtime.Earliest(c.next(), next)
		if t == 0 {
			b.Fatal("driver stuck: no completion pending and no deadline")
		}
		c.now = max(c.now, t)
		next = s.Step(c.now)
	}
	for range 2000 + 100*paths { // warm up: every path busy
		step()
	}
	measureSteps(b, s, step)
}

func benchMem(b *testing.B, paths int, rate units.BitRate, rtt time.Duration) {
	cfgs := make([]mem.PathConfig, paths)
	for i := range cfgs {
		cfgs[i] = mem.PathConfig{Rate: rate, Delay: rtt/2 + time.Duration(i)*16*time.Nanosecond, NIC: i}
	}
	// Room for two chunks in flight per path, so that one transfer at a
	// time keeps every path busy.
	region := max(64*units.MiB, units.Bytes(paths)*8*units.MiB)
	net, err := mem.New(mem.Config{Paths: cfgs, RecvRegion: make([]byte, region)})
	if err != nil {
		b.Fatal(err)
	}
	var id multipath.TransferID
	var s *mptx.Sender
	submit := func(now vtime.Time) {
		id++
		if _, _, err := s.Submit(now, multipath.TransferSpec{ID: id, Size: region, ChunkSize: 4 * units.MiB}); err != nil {
			b.Fatal(err)
		}
	}
	// A new transfer as soon as one is reported done: the receive region
	// is free again then (Sender.Submit's contract).
	s, err = mptx.NewSender(net.Conn(), mptx.SenderConfig{OnDone: func(_ multipath.TransferID, now vtime.Time, err error) {
		if err != nil {
			b.Fatal(err)
		}
		submit(now)
	}})
	if err != nil {
		b.Fatal(err)
	}
	submit(net.Now())
	next := s.Step(net.Now())
	step := func() {
		t := vtime.Earliest(net.Next(), next)
		if t == 0 {
			b.Fatal("driver stuck: no event pending and no deadline")
		}
		net.AdvanceTo(t)
		next = s.Step(net.Now())
	}
	for range 2000 + 100*paths {
		step()
	}
	measureSteps(b, s, step)
}

// measureSteps runs b.N steps and reports the wall and CPU time (the
// thread's, which leaves out the time it waited for a CPU on a shared
// machine) per chunk the sender completed.
func measureSteps(b *testing.B, s *mptx.Sender, step func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	c0 := chunksDone(s)
	b.ResetTimer()
	cpu0, start := threadCPU(), time.Now()
	for range b.N {
		step()
	}
	el, cpu := time.Since(start), threadCPU()-cpu0
	b.StopTimer()
	if n := chunksDone(s) - c0; n > 0 {
		b.ReportMetric(float64(el.Nanoseconds())/float64(n), "ns/chunk")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/chunk")
		b.ReportMetric(float64(b.N)/float64(n), "steps/chunk")
	}
}
