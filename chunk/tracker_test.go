package chunk

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mptx-dev/mptx/units"
)

func ck(transfer uint64, index uint32, n units.Bytes) Chunk {
	return Chunk{Transfer: transfer, Index: index, Len: n}
}

func TestTrackerSteps(t *testing.T) {
	tr, err := NewTracker(3)
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string, wantLen int, wantBytes units.Bytes, wantFull bool) {
		t.Helper()
		if tr.Len() != wantLen || tr.InFlight() != wantBytes || tr.Full() != wantFull {
			t.Errorf("%s: Len, InFlight, Full = %d, %v, %v; want %d, %v, %v", step, tr.Len(), tr.InFlight(), tr.Full(), wantLen, wantBytes, wantFull)
		}
	}
	check("empty", 0, 0, false)
	tr.Add(ck(1, 0, 4*MiB))
	tr.Add(ck(2, 7, 1*MiB))
	tr.Add(ck(1, 1, 4*MiB))
	check("three added", 3, 9*MiB, true)
	if o, ok := tr.Oldest(); !ok || o != ck(1, 0, 4*MiB) {
		t.Errorf("Oldest() = %+v, %v", o, ok)
	}
	if n := tr.Ack(1, 5); n != 0 {
		t.Errorf("Ack of a chunk not in flight removed %d", n)
	}
	check("stale ack", 3, 9*MiB, true)
	if n := tr.Ack(2, 7); n != 2 { // covers the older (1, 0) too
		t.Errorf("Ack(2, 7) = %d, want 2", n)
	}
	check("ack through the second", 1, 4*MiB, false)
	tr.Add(ck(3, 0, 64*KiB)) // wraps around the ring
	tr.Add(ck(3, 1, 64*KiB))
	check("wrapped", 3, 4*MiB+128*KiB, true)
	lost := tr.Lost(make([]Chunk, 0, 3))
	if want := []Chunk{ck(1, 1, 4*MiB), ck(3, 0, 64*KiB), ck(3, 1, 64*KiB)}; !slices.Equal(lost, want) {
		t.Errorf("Lost = %+v, want %+v", lost, want)
	}
	check("lost", 0, 0, false)
	if _, ok := tr.Oldest(); ok {
		t.Error("Oldest on an empty tracker reports a chunk")
	}
	if n := tr.Ack(3, 1); n != 0 {
		t.Errorf("Ack on an empty tracker = %d", n)
	}
}

// TestTrackerModel compares a Tracker against a plain slice under a long
// random sequence of operations.
func TestTrackerModel(t *testing.T) {
	rng := testRand(t)
	tr, _ := NewTracker(8)
	var model []Chunk
	var idx uint32
	for range 20000 {
		switch op := rng.IntN(10); {
		case op < 5:
			if tr.Full() != (len(model) == 8) {
				t.Fatalf("Full() = %v with %d in flight", tr.Full(), len(model))
			}
			if !tr.Full() {
				c := ck(uint64(rng.IntN(3)), idx, units.Bytes(1+rng.IntN(1000)))
				idx++
				tr.Add(c)
				model = append(model, c)
			}
		case op < 9:
			var tgt Chunk
			if len(model) > 0 && rng.IntN(4) != 0 {
				tgt = model[rng.IntN(len(model))]
			} else {
				tgt = ck(9, idx+100, 0) // not in flight
			}
			want := 0
			for k, c := range model {
				if c.Transfer == tgt.Transfer && c.Index == tgt.Index {
					want = k + 1
					break
				}
			}
			if got := tr.Ack(tgt.Transfer, tgt.Index); got != want {
				t.Fatalf("Ack(%d, %d) = %d, want %d", tgt.Transfer, tgt.Index, got, want)
			}
			model = model[want:]
		default:
			if got := tr.Lost(nil); !slices.Equal(got, model) {
				t.Fatalf("Lost = %+v, want %+v", got, model)
			}
			model = nil
		}
		var bytes units.Bytes
		for _, c := range model {
			bytes += c.Len
		}
		if tr.Len() != len(model) || tr.InFlight() != bytes {
			t.Fatalf("Len, InFlight = %d, %v; model %d, %v", tr.Len(), tr.InFlight(), len(model), bytes)
		}
	}
}

func TestTrackerErrors(t *testing.T) {
	for _, c := range []int{0, -1, MaxChunks + 1} {
		_, err := NewTracker(c)
		want := fmt.Sprintf("chunk: tracker capacity %d is out of range (valid: 1..16777215)", c)
		if err == nil || err.Error() != want {
			t.Errorf("NewTracker(%d) = %v, want %q", c, err, want)
		}
	}
	var z Tracker
	if !z.Full() || z.Cap() != 0 {
		t.Error("zero Tracker is not full with capacity 0")
	}
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "chunk: BUG: Tracker.Add when full") {
			t.Errorf("Add on a full tracker recovered %v, want a chunk: BUG: panic", r)
		}
	}()
	z.Add(Chunk{})
}

func TestTrackerNoAllocs(t *testing.T) {
	tr, _ := NewTracker(16)
	dst := make([]Chunk, 0, 16)
	i := uint32(0)
	if a := testing.AllocsPerRun(1000, func() {
		if tr.Full() {
			dst = tr.Lost(dst[:0])
		}
		tr.Add(ck(1, i, 4*MiB))
		if i%3 == 0 {
			tr.Ack(1, i)
		}
		i++
	}); a != 0 {
		t.Errorf("Tracker operations allocate %v times, want 0", a)
	}
}

func BenchmarkTrackerAddAck(b *testing.B) {
	tr, _ := NewTracker(32)
	b.ReportAllocs()
	i := uint32(0)
	for b.Loop() {
		tr.Add(ck(1, i, 4*MiB))
		if tr.Full() {
			tr.Ack(1, i-16) // the oldest half
		}
		i++
	}
}
