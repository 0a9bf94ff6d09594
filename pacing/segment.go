package pacing

import (
	"fmt"

	"github.com/mptx-dev/mptx/units"
)

// Segments returns how many posts of at most seg bytes carry a chunk of
// chunkLen bytes: ceil(chunkLen/seg), 0 for chunkLen <= 0, and 1 for
// seg <= 0 (no segmenting).
func Segments(chunkLen, seg units.Bytes) int {
	switch {
	case chunkLen <= 0:
		return 0
	case seg <= 0 || seg >= chunkLen:
		return 1
	}
	n := chunkLen / seg
	if chunkLen%seg != 0 {
		n++
	}
	return int(n)
}

// SegmentSpan returns the offset within the chunk and the length of
// segment i of Segments(chunkLen, seg); only the last may be short. It
// panics if i is not in [0, Segments(chunkLen, seg)).
func SegmentSpan(chunkLen, seg units.Bytes, i int) (off, n units.Bytes) {
	count := Segments(chunkLen, seg)
	if i < 0 || i >= count {
		panic(fmt.Sprintf("pacing: BUG: SegmentSpan(%v, %v, %d) of %d segments", chunkLen, seg, i, count))
	}
	if count == 1 {
		return 0, chunkLen
	}
	off = units.Bytes(i) * seg
	return off, min(seg, chunkLen-off)
}
