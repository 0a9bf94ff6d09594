package chunk

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mptx-dev/mptx/units"
)

const (
	KiB = units.KiB
	MiB = units.MiB
	GiB = units.GiB
	TiB = units.TiB
)

func TestNewPlanExplicit(t *testing.T) {
	for _, tt := range []struct {
		size, chunk units.Bytes
		paths       int
		want        Plan
		wantLast    units.Bytes
	}{
		{64 * MiB, 4 * MiB, 1, Plan{64 * MiB, 4 * MiB, 16}, 4 * MiB},
		{10 * MiB, 4 * MiB, 3, Plan{10 * MiB, 4 * MiB, 3}, 2 * MiB},
		{1, MinSize, 1, Plan{1, MinSize, 1}, 1},
		{MinSize + 1, MinSize, 7, Plan{MinSize + 1, MinSize, 2}, 1},
		{MaxSize, MaxSize, 1, Plan{MaxSize, MaxSize, 1}, MaxSize},
		{5000, 8 * KiB * 8, 2, Plan{5000, 64 * KiB, 1}, 5000},
		{3*MiB + 4*KiB, 1 * MiB, 1, Plan{3*MiB + 4*KiB, MiB, 4}, 4 * KiB},
		{MaxTensor(MinSize), MinSize, 1, Plan{MaxTensor(MinSize), MinSize, MaxChunks}, MinSize},
		{MaxTensor(DefaultSize), DefaultSize, 4, Plan{MaxTensor(DefaultSize), DefaultSize, MaxChunks}, DefaultSize},
	} {
		got, err := NewPlan(tt.size, tt.chunk, tt.paths)
		if err != nil || got != tt.want {
			t.Errorf("NewPlan(%v, %v, %d) = %+v, %v; want %+v, nil", tt.size, tt.chunk, tt.paths, got, err, tt.want)
			continue
		}
		if last := got.Last(); last != tt.wantLast {
			t.Errorf("NewPlan(%v, %v, %d).Last() = %v, want %v", tt.size, tt.chunk, tt.paths, last, tt.wantLast)
		}
		checkPlan(t, got)
	}
}

func TestNewPlanErrors(t *testing.T) {
	for _, tt := range []struct {
		size, chunk units.Bytes
		paths       int
		want        string // the whole message, or a prefix ending in "..."
	}{
		{4 * MiB, 5000, 1, "chunk: chunk size 5000B is out of range (valid: 64KiB..64MiB, 4KiB-aligned, or 0 for automatic)"},
		{4 * MiB, 64*KiB + 5000, 1, "chunk: chunk size 70536B is not a multiple of 4KiB (valid: 64KiB..64MiB, 4KiB-aligned, or 0 for automatic)"},
		{4 * MiB, 60 * KiB, 1, "chunk: chunk size 60KiB is out of range (valid: 64KiB..64MiB, 4KiB-aligned, or 0 for automatic)"},
		{4 * MiB, 128 * MiB, 1, "chunk: chunk size 128MiB is out of range (valid: 64KiB..64MiB, 4KiB-aligned, or 0 for automatic)"},
		{4 * MiB, -4 * KiB, 1, "chunk: chunk size -4KiB is out of range (valid: 64KiB..64MiB, 4KiB-aligned, or 0 for automatic)"},
		{0, 0, 1, "chunk: tensor size 0B is out of range (valid: 1B..MaxTensor(chunk size), 4194300MiB at the default chunk size)"},
		{-1, 4 * MiB, 1, "chunk: tensor size -1B is out of range..."},
		{4 * MiB, 0, 0, "chunk: paths 0 is out of range (valid: >= 1)"},
		{4 * MiB, 4 * MiB, -3, "chunk: paths -3 is out of range (valid: >= 1)"},
		{MaxTensor(MinSize) + 1, MinSize, 1, "chunk: tensor size 68719411201B needs 1048576 chunks of 64KiB, more than the immediate encoding's 1048575 (largest tensor at this chunk size: 67108800KiB; use a larger chunk size)"},
		{MaxTensor(MaxSize) + 1, 0, 2, "chunk: tensor size 70368677068801B is out of range: it needs 1048576 chunks even of the largest chunk size 64MiB, more than the immediate encoding's 1048575 (valid: 1B..67108800MiB)"},
		{units.MaxBytes, MaxSize, 1, "chunk: tensor size unlimited needs 137438953472 chunks of 64MiB..."},
	} {
		_, err := NewPlan(tt.size, tt.chunk, tt.paths)
		if err == nil {
			t.Errorf("NewPlan(%d, %d, %d) succeeded, want error %q", tt.size, tt.chunk, tt.paths, tt.want)
			continue
		}
		if prefix, ok := strings.CutSuffix(tt.want, "..."); ok {
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("NewPlan(%d, %d, %d) error = %q, want prefix %q", tt.size, tt.chunk, tt.paths, err, prefix)
			}
		} else if err.Error() != tt.want {
			t.Errorf("NewPlan(%d, %d, %d) error = %q, want %q", tt.size, tt.chunk, tt.paths, err, tt.want)
		}
	}
}

// TestNewPlanAuto pins the automatic choice for cases worked out by hand.
func TestNewPlanAuto(t *testing.T) {
	for _, tt := range []struct {
		size  units.Bytes
		paths int
		want  Plan
	}{
		// Power-of-two paths divide 64 chunks of 4 MiB: the default size.
		{256 * MiB, 1, Plan{256 * MiB, 4 * MiB, 64}},
		{256 * MiB, 2, Plan{256 * MiB, 4 * MiB, 64}},
		{256 * MiB, 8, Plan{256 * MiB, 4 * MiB, 64}},
		{256 * MiB, 16, Plan{256 * MiB, 4 * MiB, 64}},
		// 100 MiB / 4 paths: 25 x 4 MiB leaves one path a 7th chunk
		// (busiest 28 MiB); 32 x 3200 KiB is 8 even rounds (25 MiB).
		{100 * MiB, 4, Plan{100 * MiB, 3200 * KiB, 32}},
		// 100 MiB / 5 paths: 25 x 4 MiB is already 5 even rounds.
		{100 * MiB, 5, Plan{100 * MiB, 4 * MiB, 25}},
		// 9 MiB / 3 paths: three 3 MiB chunks.
		{9 * MiB, 3, Plan{9 * MiB, 3 * MiB, 3}},
		// 4 MiB / 2 paths: two AutoMin chunks, not one 4 MiB chunk.
		{4 * MiB, 2, Plan{4 * MiB, 2 * MiB, 2}},
		// One path: always AutoMax, a short tensor is one short chunk.
		{3 * MiB, 1, Plan{3 * MiB, 4 * MiB, 1}},
		{9 * MiB, 1, Plan{9 * MiB, 4 * MiB, 3}},
		// Small tensors (< paths*AutoMin): one chunk per path.
		{7 * MiB, 4, Plan{7 * MiB, 1792 * KiB, 4}},
		{1 * MiB, 4, Plan{1 * MiB, 256 * KiB, 4}},
		{1 * MiB, 16, Plan{1 * MiB, 64 * KiB, 16}},
		{1 * MiB, 1, Plan{1 * MiB, 1 * MiB, 1}},
		{1 * MiB, 3, Plan{1 * MiB, 344 * KiB, 3}}, // ceil(1 MiB/3) rounded up to 4 KiB
		{100 * KiB, 4, Plan{100 * KiB, 64 * KiB, 2}},
		{1, 1, Plan{1, 64 * KiB, 1}},
		{1, 1000, Plan{1, 64 * KiB, 1}},
		{MaxTensor(AutoMax), 3, Plan{MaxTensor(AutoMax), AutoMax, MaxChunks}},
	} {
		got, err := NewPlan(tt.size, 0, tt.paths)
		if err != nil || got != tt.want {
			t.Errorf("NewPlan(%v, 0, %d) = %v, %v; want %v", tt.size, tt.paths, got, err, tt.want)
		}
	}
}

// autoOracle is a slow, literal reading of NewPlan's automatic rule: deal
// every chunk to the paths in turn, charge each path its bytes plus
// AutoChunkCost per chunk, and keep the c with the smallest maximum (the
// larger c on ties).
func autoOracle(size units.Bytes, paths int) units.Bytes {
	if size < units.Bytes(paths)*AutoMin {
		c := (size + units.Bytes(paths) - 1) / units.Bytes(paths)
		c = (c + Align - 1) / Align * Align
		return min(max(c, MinSize), AutoMin)
	}
	var best, bestScore units.Bytes
	load := make([]units.Bytes, paths)
	for c := AutoMin; c <= AutoMax; c += Align {
		clear(load)
		for off, i := units.Bytes(0), 0; off < size; off, i = off+c, i+1 {
			load[i%paths] += min(c, size-off) + AutoChunkCost
		}
		score := units.Bytes(0)
		for _, l := range load {
			score = max(score, l)
		}
		if best == 0 || score <= bestScore {
			best, bestScore = c, score
		}
	}
	return best
}

func TestNewPlanAutoOracle(t *testing.T) {
	sizes := []units.Bytes{1, 4 * KiB, 100 * KiB, 1 * MiB, 2*MiB - 1, 2 * MiB, 3 * MiB, 4*MiB + 1,
		7 * MiB, 9 * MiB, 33*MiB + 5, 100 * MiB, 256 * MiB, 257 * MiB, 1*GiB + 12345}
	for _, size := range sizes {
		for paths := 1; paths <= 16; paths++ {
			p, err := NewPlan(size, 0, paths)
			if err != nil {
				t.Fatalf("NewPlan(%v, 0, %d) = %v", size, paths, err)
			}
			checkPlan(t, p)
			if want := autoOracle(size, paths); p.ChunkSize != want {
				t.Errorf("NewPlan(%v, 0, %d).ChunkSize = %v, want %v (oracle)", size, paths, p.ChunkSize, want)
			}
			lo, hi := AutoMin, AutoMax
			if size < units.Bytes(paths)*AutoMin {
				lo, hi = MinSize, AutoMin
				if p.Count > paths {
					t.Errorf("NewPlan(%v, 0, %d).Count = %d, want <= paths for a small tensor", size, paths, p.Count)
				}
			}
			if p.ChunkSize < lo || p.ChunkSize > hi {
				t.Errorf("NewPlan(%v, 0, %d).ChunkSize = %v, want in [%v, %v]", size, paths, p.ChunkSize, lo, hi)
			}
			// Balance: dealt in rounds, no path carries more than its
			// fair share plus one chunk.
			if busiest := busiestPath(p, paths); busiest > size/units.Bytes(paths)+p.ChunkSize {
				t.Errorf("NewPlan(%v, 0, %d) = %v: busiest path carries %v, more than size/paths + one chunk", size, paths, p, busiest)
			}
		}
	}
}

func busiestPath(p Plan, paths int) units.Bytes {
	load := make([]units.Bytes, paths)
	for i := range p.Count {
		_, n := p.Span(i)
		load[i%paths] += n
	}
	var m units.Bytes
	for _, l := range load {
		m = max(m, l)
	}
	return m
}

// checkPlan checks the invariants every plan from NewPlan satisfies.
func checkPlan(t testing.TB, p Plan) {
	t.Helper()
	if p.Count < 1 || p.Count > MaxChunks {
		t.Fatalf("plan %+v: Count out of [1, MaxChunks]", p)
	}
	if p.ChunkSize < MinSize || p.ChunkSize > MaxSize || p.ChunkSize%Align != 0 {
		t.Fatalf("plan %+v: ChunkSize not an Align multiple in [MinSize, MaxSize]", p)
	}
	if units.Bytes(p.Count-1)*p.ChunkSize >= p.Size || p.Size > units.Bytes(p.Count)*p.ChunkSize {
		t.Fatalf("plan %+v: Count does not match Size/ChunkSize", p)
	}
	// Spans tile [0, Size) in order; check the ends and a middle one
	// (every span for small plans).
	check := func(i int) {
		off, n := p.Span(i)
		if off != units.Bytes(i)*p.ChunkSize || n <= 0 || n > p.ChunkSize || off+n > p.Size {
			t.Fatalf("plan %+v: Span(%d) = %v, %v", p, i, off, n)
		}
		if i < p.Count-1 && n != p.ChunkSize {
			t.Fatalf("plan %+v: Span(%d) = %v, %v: only the last chunk may be short", p, i, off, n)
		}
		if i == p.Count-1 && (off+n != p.Size || n != p.Last()) {
			t.Fatalf("plan %+v: last Span(%d) = %v, %v does not end at Size or match Last", p, i, off, n)
		}
	}
	if p.Count <= 1024 {
		for i := range p.Count {
			check(i)
		}
	} else {
		check(0)
		check(p.Count / 2)
		check(p.Count - 1)
	}
}

func TestSpanPanics(t *testing.T) {
	p, _ := NewPlan(10*MiB, 4*MiB, 1)
	for _, i := range []int{-1, 3, 1 << 40} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "chunk: BUG:") {
					t.Errorf("Span(%d) recovered %v, want a chunk: BUG: panic", i, r)
				}
			}()
			p.Span(i)
		}()
	}
}

func TestPlanString(t *testing.T) {
	for _, tt := range []struct {
		p    Plan
		want string
	}{
		{Plan{64 * MiB, 4 * MiB, 16}, "64MiB = 16 x 4MiB"},
		{Plan{10 * MiB, 4 * MiB, 3}, "10MiB = 3 x 4MiB (last 2MiB)"},
		{Plan{}, "0B = 0 x 0B"},
	} {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.p, got, tt.want)
		}
	}
}

// FuzzPlan checks that NewPlan either fails or returns a plan whose chunks
// tile the tensor within the documented bounds.
func FuzzPlan(f *testing.F) {
	for _, s := range []struct {
		size, chunk int64
		paths       int
	}{
		{int64(4 * MiB), 0, 1}, {int64(100 * MiB), 0, 4}, {1, 0, 1}, {0, 0, 1},
		{int64(10 * MiB), int64(4 * MiB), 3}, {int64(MaxTensor(AutoMax)), 0, 7},
		{int64(MaxTensor(AutoMax)) + 1, 0, 7}, {5000, 5000, 1}, {-1, -1, -1},
		{int64(units.MaxBytes), int64(MaxSize), 1 << 40}, {int64(7 * MiB), 0, 16},
	} {
		f.Add(s.size, s.chunk, s.paths)
	}
	f.Fuzz(func(t *testing.T, size, chunk int64, paths int) {
		p, err := NewPlan(units.Bytes(size), units.Bytes(chunk), paths)
		valid := size > 0 && paths >= 1 &&
			(chunk == 0 || (chunk >= int64(MinSize) && chunk <= int64(MaxSize) && chunk%int64(Align) == 0))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "chunk: ") {
				t.Fatalf("NewPlan(%d, %d, %d) error %q lacks the chunk: prefix", size, chunk, paths, err)
			}
			if valid && size <= int64(MaxTensor(max(units.Bytes(chunk), MaxSize))) && (chunk != 0 || size <= int64(MaxTensor(MaxSize))) && (chunk == 0 || size <= int64(MaxTensor(units.Bytes(chunk)))) {
				t.Fatalf("NewPlan(%d, %d, %d) = %v, want success", size, chunk, paths, err)
			}
			return
		}
		if !valid {
			t.Fatalf("NewPlan(%d, %d, %d) = %+v, want an error", size, chunk, paths, p)
		}
		checkPlan(t, p)
		if chunk != 0 && p.ChunkSize != units.Bytes(chunk) {
			t.Fatalf("NewPlan(%d, %d, %d).ChunkSize = %v, want the explicit size", size, chunk, paths, p.ChunkSize)
		}
		if chunk == 0 {
			big := size > int64(MaxTensor(AutoMax)) // rule 3: the smallest size that fits
			if (p.ChunkSize > AutoMax && !big) || (big && (p.ChunkSize > MaxSize || MaxTensor(p.ChunkSize-Align) >= units.Bytes(size))) ||
				(p.ChunkSize < AutoMin && int64(p.Count) > int64(paths)) {
				t.Fatalf("NewPlan(%d, 0, %d) = %v breaks the automatic bounds", size, paths, p)
			}
		}
	})
}

func BenchmarkNewPlanAuto(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkPlan, _ = NewPlan(100*MiB+12345, 0, 6)
	}
}

var sinkPlan Plan
