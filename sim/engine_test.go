package sim

import (
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// TestSerialiserExact checks that the carried remainder keeps the sum of
// many frames' serialisation times exactly floor(8·Σbytes·10¹²/rate) ps,
// at rates that divide 8·10¹² (25–800 Gb/s) and at awkward ones.
func TestSerialiserExact(t *testing.T) {
	rates := []units.BitRate{25 * units.Gbps, 100 * units.Gbps, 400 * units.Gbps, 800 * units.Gbps,
		56 * units.Gbps, 300*units.Gbps + 7, 123456789012, 3 * units.Gbps}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, r := range rates {
		s := NewSerialiser(r)
		var total Time
		var bytes int64
		for i := 0; i < 100000; i++ {
			n := int64(64 + rng.IntN(4200))
			total += s.Time(n)
			bytes += n
		}
		want := new(big.Int).Mul(big.NewInt(bytes), big.NewInt(8e12))
		want.Quo(want, big.NewInt(int64(r)))
		if got := big.NewInt(int64(total)); got.Cmp(want) != 0 {
			t.Errorf("rate %v: Σ Serialiser.Time = %d ps, want %s ps (no drift)", r, total, want)
		}
	}
	// 4178 wire bytes at 800 Gb/s: exactly 41780 ps.
	s := NewSerialiser(800 * units.Gbps)
	if got := s.Time(4178); got != 41780 {
		t.Errorf("800G Time(4178) = %d ps, want 41780", got)
	}
}

func TestTimeConversions(t *testing.T) {
	if got := Start.VTime(); got != vtime.Epoch {
		t.Errorf("Start.VTime() = %d, want %d (never the unset 0)", got, vtime.Epoch)
	}
	if got := FromVTime(12345); got != 12345*Nanosecond {
		t.Errorf("FromVTime(12345) = %d, want %d", got, 12345*Nanosecond)
	}
	if got := (12345*Nanosecond + 999).VTime(); got != 12345 {
		t.Errorf("VTime rounds down: got %d, want 12345", got)
	}
	if got := AckTimeoutDuration(14); got != 4096*Nanosecond*16384 {
		t.Errorf("AckTimeoutDuration(14) = %v, want 67.108864ms", got)
	}
	if got := TxTime(100*units.Gbps, 4178); got != 334240 {
		t.Errorf("TxTime(100G, 4178) = %d ps, want 334240", got)
	}
}

type recorder struct {
	w   *World
	log *[]int
	id  int
}

func (r *recorder) Fire(now Time) { *r.log = append(*r.log, r.id) }

// TestEventOrder checks time order with FIFO tie-breaking on a random
// schedule with many equal instants.
func TestEventOrder(t *testing.T) {
	w := NewWorld(1)
	var log []int
	type ev struct {
		at Time
		id int
	}
	var evs []ev
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 5000; i++ {
		at := Start + Time(rng.IntN(50))*Nanosecond
		evs = append(evs, ev{at, i})
		w.At(at, &recorder{w: w, log: &log, id: i})
	}
	w.Run()
	// expected: stable sort by time
	want := make([]int, 0, len(evs))
	for tm := Start; tm < Start+50*Nanosecond; tm += Nanosecond {
		for _, e := range evs {
			if e.at == tm {
				want = append(want, e.id)
			}
		}
	}
	if len(log) != len(want) {
		t.Fatalf("fired %d events, want %d", len(log), len(want))
	}
	for i := range want {
		if log[i] != want[i] {
			t.Fatalf("event %d fired id %d, want %d (time order, FIFO among ties)", i, log[i], want[i])
		}
	}
}

type counter struct{ fires []Time }

func (c *counter) Fire(now Time) { c.fires = append(c.fires, now) }

func TestTimer(t *testing.T) {
	w := NewWorld(1)
	var c counter
	var tm Timer
	tm.Init(w, &c)
	tm.Reset(Start + 100)
	tm.Reset(Start + 300) // later: the entry at 100 re-schedules
	tm.Reset(Start + 200) // earlier than the latest entry
	w.Run()
	if len(c.fires) != 1 || c.fires[0] != Start+200 {
		t.Fatalf("fires = %v, want exactly one at %v", c.fires, Start+200)
	}
	if w.Now() != Start+200 {
		t.Errorf("Run stopped at %v, want %v: superseded entries must not hold the world", w.Now(), Start+200)
	}
	c.fires = nil
	tm.Reset(w.Now() + 1000)
	tm.Stop()
	w.Run()
	if len(c.fires) != 0 {
		t.Errorf("stopped timer fired at %v", c.fires)
	}
	if w.Now() != Start+200 {
		t.Errorf("a stopped timer advanced the clock to %v", w.Now())
	}
	// Re-arming after a stop uses the old entry correctly.
	tm.Reset(w.Now() + 2000)
	w.Run()
	if len(c.fires) != 1 || c.fires[0] != Start+2200 {
		t.Errorf("re-armed timer fires = %v, want [%v]", c.fires, Start+2200)
	}
	// ResetEarlier does not move a deadline later.
	c.fires = nil
	tm.Reset(w.Now() + 500)
	tm.ResetEarlier(w.Now() + 900)
	w.Run()
	if len(c.fires) != 1 || c.fires[0] != Start+2700 {
		t.Errorf("ResetEarlier fires = %v, want [%v]", c.fires, Start+2700)
	}
}

func TestAtInPastPanics(t *testing.T) {
	w := NewWorld(1)
	w.RunUntil(Microsecond)
	defer func() {
		if recover() == nil {
			t.Error("At in the past did not panic")
		}
	}()
	w.At(Start, &counter{})
}

func TestPoolDoubleFreePanics(t *testing.T) {
	w := NewWorld(1)
	p := w.NewPacket()
	w.FreePacket(p)
	defer func() {
		if recover() == nil {
			t.Error("double free did not panic")
		}
	}()
	w.FreePacket(p)
}

// TestREDProb checks the marking curve at its corners and midpoint.
func TestREDProb(t *testing.T) {
	c := ECNConfig{Kmin: 100 * units.KB, Kmax: 400 * units.KB, Pmax: 0.2}
	for _, tc := range []struct {
		q    units.Bytes
		want float64
	}{{0, 0}, {100 * units.KB, 0}, {250 * units.KB, 0.1}, {400 * units.KB, 0.2}, {400*units.KB + 1, 1}} {
		if got := c.Prob(tc.q); got < tc.want-1e-12 || got > tc.want+1e-12 {
			t.Errorf("Prob(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
}

type loop struct {
	w *World
	n int
}

func (l *loop) Fire(now Time) {
	l.n++
	l.w.At(now+Time(l.n%7)*Nanosecond, l)
}

// TestEventLoopNoAllocs: firing and scheduling events allocates nothing.
func TestEventLoopNoAllocs(t *testing.T) {
	w := NewWorld(1)
	ls := make([]loop, 64)
	for i := range ls {
		ls[i].w = w
		w.At(Start+Time(i), &ls[i])
	}
	for i := 0; i < 10000; i++ {
		w.Step()
	}
	if a := testing.AllocsPerRun(100, func() {
		for i := 0; i < 1000; i++ {
			w.Step()
		}
	}); a != 0 {
		t.Errorf("1000 events allocate %v times; want 0", a)
	}
}

var sinkEvents uint64

// BenchmarkEventLoop measures the bare event list: 256 self-rescheduling
// handlers.
func BenchmarkEventLoop(b *testing.B) {
	w := NewWorld(1)
	ls := make([]loop, 256)
	for i := range ls {
		ls[i].w = w
		w.At(Start+Time(i), &ls[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w.Step()
	}
	sinkEvents = w.Events()
}

type oracleEv struct {
	o  *oracle
	at Time
	id int
}

type oracle struct {
	w       *World
	rng     *rand.Rand
	fired   []bool
	lastAt  Time
	lastID  int
	n, maxN int
	evs     []oracleEv
	bad     string
}

func (o *oracle) schedule(at Time) {
	id := len(o.evs)
	o.evs = append(o.evs, oracleEv{o: o, at: at, id: id})
	o.fired = append(o.fired, false)
}

func (e *oracleEv) Fire(now Time) {
	o := e.o
	switch {
	case o.bad != "":
	case now != e.at:
		o.bad = "fired at the wrong time"
	case o.fired[e.id]:
		o.bad = "fired twice"
	case now < o.lastAt:
		o.bad = "time went backwards"
	case now == o.lastAt && e.id < o.lastID:
		o.bad = "FIFO order broken among equal times"
	}
	o.fired[e.id] = true
	o.lastAt, o.lastID = now, e.id
	// schedule a few more, at delays that hit the same bucket, the wheel,
	// its horizon and the heap
	for k := 1 + o.rng.IntN(2); k > 0 && o.n < o.maxN; k-- {
		var d Time
		switch o.rng.IntN(6) {
		case 0:
			d = 0
		case 1:
			d = Time(o.rng.IntN(2048))
		case 2:
			d = Time(o.rng.IntN(1 << 20))
		case 3:
			d = wheelSize<<bucketShift - 2048 + Time(o.rng.IntN(4096))
		case 4:
			d = Time(o.rng.Int64N(int64(Millisecond)))
		default:
			d = Time(o.rng.IntN(3)) * Microsecond
		}
		o.n++
		o.schedule(now + d)
		o.w.At(now+d, &o.evs[len(o.evs)-1])
	}
}

// TestEventQueueOracle drives the wheel-and-heap queue with a dynamic
// random workload and checks every pop against the priority-queue
// contract: times never go back, equal times fire in scheduling order,
// every event fires once at its time.
func TestEventQueueOracle(t *testing.T) {
	w := NewWorld(1)
	o := &oracle{w: w, rng: rand.New(rand.NewPCG(5, 6)), maxN: 300000}
	o.evs = make([]oracleEv, 0, o.maxN+100)
	for i := 0; i < 64; i++ {
		at := Start + Time(o.rng.IntN(1<<22))
		o.schedule(at)
		w.At(at, &o.evs[len(o.evs)-1])
	}
	w.Run()
	if o.bad != "" {
		t.Fatal(o.bad)
	}
	for i, f := range o.fired {
		if !f {
			t.Fatalf("event %d (at %v) never fired", i, o.evs[i].at)
		}
	}
	if w.q.len() != 0 {
		t.Fatalf("queue holds %d events after Run", w.q.len())
	}
	t.Logf("%d events, %d buckets sorted late", len(o.evs), w.q.sorts)
	if w.q.sorts == 0 {
		t.Error("the workload never overflowed a bucket's in-place insertion: the late-sort path is untested")
	}
}
