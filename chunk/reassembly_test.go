package chunk

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestReassemblySteps(t *testing.T) {
	r, err := NewReassembly(5)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range []struct {
		index    uint32
		want     MarkResult
		complete bool
		received int
	}{
		{3, MarkNew, false, 1},
		{3, MarkDuplicate, false, 1},
		{0, MarkNew, false, 2},
		{5, MarkOutOfRange, false, 2}, // == count
		{ProbeImm & indexMask, MarkOutOfRange, false, 2},
		{4, MarkNew, false, 3},
		{1, MarkNew, false, 4},
		{1, MarkDuplicate, false, 4},
		{2, MarkNew, true, 5},
		{2, MarkDuplicate, true, 5},
		{0xFFFFFFFF, MarkOutOfRange, true, 5},
	} {
		if got := r.Mark(st.index); got != st.want {
			t.Errorf("step %d: Mark(%d) = %v, want %v", i, st.index, got, st.want)
		}
		if r.Complete() != st.complete || r.Received() != st.received {
			t.Errorf("step %d: Complete, Received = %v, %d; want %v, %d", i, r.Complete(), r.Received(), st.complete, st.received)
		}
	}
	if r.Duplicates() != 3 || r.OutOfRange() != 3 || r.Count() != 5 {
		t.Errorf("Duplicates, OutOfRange, Count = %d, %d, %d; want 3, 3, 5", r.Duplicates(), r.OutOfRange(), r.Count())
	}
}

func TestReassemblyMissingAndHas(t *testing.T) {
	for _, count := range []int{1, 63, 64, 65, 128, 130, 1000} {
		r, _ := NewReassembly(count)
		want := make([]uint32, 0, count)
		for i := range count {
			if i%3 == 0 {
				r.Mark(uint32(i))
			} else {
				want = append(want, uint32(i))
			}
		}
		r.Mark(uint32(count)) // out of range: must not show up anywhere
		if got := r.Missing(nil); !slices.Equal(got, want) {
			t.Errorf("count %d: Missing = %v, want %v", count, got, want)
		}
		for i := range uint32(count + 70) {
			if got := r.Has(i); got != (int(i) < count && i%3 == 0) {
				t.Errorf("count %d: Has(%d) = %v", count, i, got)
			}
		}
		buf := make([]uint32, 0, count)
		if a := testing.AllocsPerRun(10, func() { buf = r.Missing(buf[:0]) }); a != 0 {
			t.Errorf("Missing into a large enough slice allocates %v times, want 0", a)
		}
		prefix := []uint32{99}
		if got := r.Missing(prefix); !slices.Equal(got, append([]uint32{99}, want...)) {
			t.Errorf("Missing([99]) = %v, want 99 then the missing indices", got)
		}
	}
}

// TestReassemblyNeverEarly marks random permutations with random duplicates
// and out-of-range indices mixed in and checks that Complete turns true
// exactly at the last distinct index, and that the counters match a
// reference map.
func TestReassemblyNeverEarly(t *testing.T) {
	rng := testRand(t)
	var r Reassembly
	for trial := range 300 {
		count := 1 + rng.IntN(300)
		if trial%50 == 0 {
			count = 1 + rng.IntN(MaxChunks/64) // large bitmaps too
		}
		r.Reset(count)
		seen := make(map[uint32]bool, count)
		dups, bad := 0, 0
		perm := rng.Perm(count)
		for k, i := range perm {
			// Before each new index: some replays and junk.
			for range rng.IntN(3) {
				if k > 0 {
					j := uint32(perm[rng.IntN(k)])
					if got := r.Mark(j); got != MarkDuplicate {
						t.Fatalf("count %d: Mark(%d) again = %v, want duplicate", count, j, got)
					}
					dups++
				}
				if junk := uint32(count) + rng.Uint32N(1<<31); r.Mark(junk) != MarkOutOfRange {
					t.Fatalf("count %d: Mark(%d) not out of range", count, junk)
				}
				bad++
			}
			if r.Complete() {
				t.Fatalf("count %d: Complete with %d of %d marked", count, len(seen), count)
			}
			if got := r.Mark(uint32(i)); got != MarkNew {
				t.Fatalf("count %d: first Mark(%d) = %v, want new", count, i, got)
			}
			seen[uint32(i)] = true
		}
		if !r.Complete() || r.Received() != count || r.Duplicates() != dups || r.OutOfRange() != bad {
			t.Fatalf("count %d: Complete %v, Received %d, Duplicates %d, OutOfRange %d; want true, %d, %d, %d",
				count, r.Complete(), r.Received(), r.Duplicates(), r.OutOfRange(), count, dups, bad)
		}
		if m := r.Missing(nil); len(m) != 0 {
			t.Fatalf("count %d: complete but Missing = %v", count, m)
		}
	}
}

func TestReassemblyZeroAndErrors(t *testing.T) {
	var z Reassembly
	if z.Mark(0) != MarkOutOfRange || z.Complete() || z.Has(0) || len(z.Missing(nil)) != 0 {
		t.Error("zero Reassembly: want every Mark out of range, never Complete, nothing missing")
	}
	for _, count := range []int{0, -1, MaxChunks + 1} {
		_, err := NewReassembly(count)
		want := fmt.Sprintf("chunk: reassembly chunk count %d is out of range (valid: 1..1048575)", count)
		if err == nil || err.Error() != want {
			t.Errorf("NewReassembly(%d) = %v, want %q", count, err, want)
		}
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.HasPrefix(fmt.Sprint(p), "chunk: BUG:") {
					t.Errorf("Reset(%d) recovered %v, want a chunk: BUG: panic", count, p)
				}
			}()
			z.Reset(count)
		}()
	}
	if _, err := NewReassembly(MaxChunks); err != nil {
		t.Errorf("NewReassembly(MaxChunks) = %v", err)
	}
}

func TestMarkResultString(t *testing.T) {
	for m, want := range map[MarkResult]string{MarkNew: "new", MarkDuplicate: "duplicate", MarkOutOfRange: "out-of-range", 0: "unknown"} {
		if got := m.String(); got != want {
			t.Errorf("MarkResult(%d).String() = %q, want %q", m, got, want)
		}
	}
}

func TestReassemblyNoAllocs(t *testing.T) {
	r, _ := NewReassembly(MaxChunks)
	i := uint32(0)
	if a := testing.AllocsPerRun(1000, func() {
		r.Mark(i % (MaxChunks + 10)) // new, then duplicates and out of range
		i += 7919
	}); a != 0 {
		t.Errorf("Mark allocates %v times per call, want 0", a)
	}
	if a := testing.AllocsPerRun(10, func() { r.Reset(1 << 19) }); a != 0 {
		t.Errorf("Reset to a smaller count allocates %v times, want 0", a)
	}
}

func BenchmarkReassemblyMark(b *testing.B) {
	const count = 1 << 16
	r, _ := NewReassembly(count)
	b.ReportAllocs()
	i := uint32(0)
	for b.Loop() {
		if r.Mark(i%count) == MarkNew && r.Complete() {
			r.Reset(count)
		}
		i += 40503 // odd stride: out-of-order, covers every index
	}
}
