package pacing

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mptx-dev/mptx/units"
)

func TestSegments(t *testing.T) {
	for _, tt := range []struct {
		chunk, seg units.Bytes
		want       int
		last       units.Bytes
	}{
		{4 * MiB, 128 * KiB, 32, 128 * KiB},
		{4*MiB + 1, 128 * KiB, 33, 1},
		{3 * MiB, 4 * MiB, 1, 3 * MiB},
		{128 * KiB, 128 * KiB, 1, 128 * KiB},
		{100, 0, 1, 100},
		{100, -1, 1, 100},
		{1, 1, 1, 1},
		{10, 3, 4, 1},
		{units.MaxBytes, 1, int(units.MaxBytes), 1},
	} {
		if got := Segments(tt.chunk, tt.seg); got != tt.want {
			t.Errorf("Segments(%v, %v) = %d, want %d", tt.chunk, tt.seg, got, tt.want)
			continue
		}
		if tt.want > 1<<20 {
			off, n := SegmentSpan(tt.chunk, tt.seg, tt.want-1)
			if off+n != tt.chunk || n != tt.last {
				t.Errorf("last SegmentSpan(%v, %v) = %v, %v", tt.chunk, tt.seg, off, n)
			}
			continue
		}
		var next units.Bytes
		for i := range tt.want {
			off, n := SegmentSpan(tt.chunk, tt.seg, i)
			if off != next || n <= 0 || (i < tt.want-1 && n != tt.seg) || (i == tt.want-1 && n != tt.last) {
				t.Errorf("SegmentSpan(%v, %v, %d) = %v, %v", tt.chunk, tt.seg, i, off, n)
			}
			next = off + n
		}
		if next != tt.chunk {
			t.Errorf("segments of (%v, %v) end at %v", tt.chunk, tt.seg, next)
		}
	}
	for _, chunk := range []units.Bytes{0, -5} {
		if got := Segments(chunk, 4); got != 0 {
			t.Errorf("Segments(%v, 4) = %d, want 0", chunk, got)
		}
	}
}

func TestSegmentSpanPanics(t *testing.T) {
	for _, tt := range []struct {
		chunk, seg units.Bytes
		i          int
	}{{4 * MiB, 128 * KiB, 32}, {4 * MiB, 128 * KiB, -1}, {0, 4, 0}} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "pacing: BUG: SegmentSpan") {
					t.Errorf("SegmentSpan(%v, %v, %d) recovered %v, want a pacing: BUG: panic", tt.chunk, tt.seg, tt.i, r)
				}
			}()
			SegmentSpan(tt.chunk, tt.seg, tt.i)
		}()
	}
}

func TestSegmentsNoAllocs(t *testing.T) {
	var sink units.Bytes
	if a := testing.AllocsPerRun(100, func() {
		for i := range Segments(4*MiB, 128*KiB) {
			_, n := SegmentSpan(4*MiB, 128*KiB, i)
			sink += n
		}
	}); a != 0 {
		t.Errorf("Segments/SegmentSpan allocate %v times, want 0", a)
	}
}
