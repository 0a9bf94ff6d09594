package chunk

import (
	"fmt"

	"github.com/mptx-dev/mptx/units"
)

// Chunk sizes.
const (
	// DefaultSize is the conventional chunk size, and the size the
	// automatic choice makes for a single path and a large tensor.
	DefaultSize units.Bytes = 4 * units.MiB
	// AutoMin and AutoMax bound the automatic choice for tensors large
	// enough to give every path at least one AutoMin chunk.
	AutoMin units.Bytes = 2 * units.MiB
	AutoMax units.Bytes = 4 * units.MiB
	// MinSize and MaxSize bound an explicit chunk size.
	MinSize units.Bytes = 64 * units.KiB
	MaxSize units.Bytes = 64 * units.MiB
	// Align is the alignment of every chunk size (one page): every chunk
	// but the last starts and ends on a page boundary of the tensor.
	Align units.Bytes = 4 * units.KiB
)

// AutoChunkCost is the fixed cost of one chunk, in byte-equivalents, that
// the automatic choice charges a path for each chunk it carries (a work
// request, a completion and the engine's bookkeeping; about 1.3 µs at
// 100 Gb/s). It makes the choice prefer fewer, larger chunks when the
// balance over paths is equal or nearly so. It is a modelling constant,
// not a measurement.
const AutoChunkCost units.Bytes = 16 * units.KiB

// Plan says how a tensor is cut into chunks. Chunk i covers bytes
// [i*ChunkSize, min((i+1)*ChunkSize, Size)); only the last may be short.
//
// The zero Plan has no chunks. Plans made by NewPlan satisfy
// 1 <= Count <= MaxChunks and (Count-1)*ChunkSize < Size <= Count*ChunkSize.
type Plan struct {
	Size      units.Bytes // tensor size
	ChunkSize units.Bytes // every chunk's size but possibly the last's
	Count     int         // number of chunks
}

// NewPlan plans a tensor of size bytes for transfer over paths paths.
//
// chunkSize 0 chooses automatically:
//
//  1. Small tensors (size < paths*AutoMin): chunks of ceil(size/paths)
//     rounded up to Align and clamped to [MinSize, AutoMin], so that as
//     many paths as possible get one chunk each (a 1 MiB tensor over 4
//     paths is four 256 KiB chunks; anything under AutoMin on one path is
//     one chunk). Splitting below AutoMin trades per-chunk overhead for
//     parallelism, which is the right trade when the whole transfer is a
//     few round trips.
//  2. Otherwise every Align multiple c in [AutoMin, AutoMax] is scored by
//     the busiest path's load when the ceil(size/c) chunks are dealt to
//     the paths in rounds, one chunk per path per round (what an engine
//     that hands the next chunk to the first free path does on paths of
//     equal speed), plus AutoChunkCost per chunk that path carries. The
//     lowest score wins; ties go to the larger c. The busiest path's load
//     is the transfer's completion time in bytes, so this picks counts
//     that are multiples of paths with a full last chunk when one exists
//     (256 MiB over 1, 2, 4, 8 or 16 paths gives 4 MiB chunks), and
//     otherwise the c whose last round is most even. On one path it is
//     always AutoMax.
//  3. Tensors too large for AutoMax chunks (more than MaxTensor(AutoMax),
//     4 TiB less 4 MiB): the smallest Align multiple that keeps the count
//     within MaxChunks, up to MaxSize.
//
// Any other chunkSize must be an Align multiple in [MinSize, MaxSize]; paths
// is then only validated. size must be positive and Count may not exceed
// MaxChunks (the immediate encoding's limit; see MaxTensor). Errors name the
// parameter, its value and the valid range.
func NewPlan(size, chunkSize units.Bytes, paths int) (Plan, error) {
	if size <= 0 {
		return Plan{}, fmt.Errorf("chunk: tensor size %v is out of range (valid: 1B..MaxTensor(chunk size), %v at the default chunk size)", size, MaxTensor(DefaultSize))
	}
	if paths < 1 {
		return Plan{}, fmt.Errorf("chunk: paths %d is out of range (valid: >= 1)", paths)
	}
	if chunkSize == 0 {
		c, ok := autoSize(size, paths)
		if !ok {
			return Plan{}, fmt.Errorf("chunk: tensor size %v is out of range: it needs %d chunks even of the largest chunk size %v, more than the immediate encoding's %d (valid: 1B..%v)",
				size, ceilDiv(size, MaxSize), MaxSize, MaxChunks, MaxTensor(MaxSize))
		}
		return Plan{Size: size, ChunkSize: c, Count: int(ceilDiv(size, c))}, nil
	}
	if chunkSize < MinSize || chunkSize > MaxSize {
		return Plan{}, fmt.Errorf("chunk: chunk size %v is out of range (valid: %v..%v, %v-aligned, or 0 for automatic)", chunkSize, MinSize, MaxSize, Align)
	}
	if chunkSize%Align != 0 {
		return Plan{}, fmt.Errorf("chunk: chunk size %v is not a multiple of %v (valid: %v..%v, %v-aligned, or 0 for automatic)", chunkSize, Align, MinSize, MaxSize, Align)
	}
	count := ceilDiv(size, chunkSize)
	if count > MaxChunks {
		return Plan{}, fmt.Errorf("chunk: tensor size %v needs %d chunks of %v, more than the immediate encoding's %d (largest tensor at this chunk size: %v; use a larger chunk size)",
			size, count, chunkSize, MaxChunks, MaxTensor(chunkSize))
	}
	return Plan{Size: size, ChunkSize: chunkSize, Count: int(count)}, nil
}

// autoSize implements NewPlan's automatic rule. It reports false when even
// AutoMax chunks exceed MaxChunks. size > 0 and paths >= 1.
func autoSize(size units.Bytes, paths int) (units.Bytes, bool) {
	p := int64(paths)
	if int64(size/AutoMin) < p { // size < paths*AutoMin, without overflow
		c := alignUp(ceilDiv(size, units.Bytes(p)))
		return c.Clamp(MinSize, AutoMin), true
	}
	var best units.Bytes
	bestScore := units.MaxBytes
	// Larger first, so that on a tie (strict <) the larger size stays.
	for c := AutoMax; c >= AutoMin; c -= Align {
		count := int64(ceilDiv(size, c))
		if count > MaxChunks {
			break // smaller sizes only need more chunks
		}
		rounds := (count + p - 1) / p
		load := units.Bytes(rounds) * c
		if (count-1)%p == 0 {
			// The short last chunk opens the last round on the path
			// that is then the busiest.
			load = units.Bytes(rounds-1)*c + (size - units.Bytes(count-1)*c)
		}
		if score := load + units.Bytes(rounds)*AutoChunkCost; score < bestScore {
			best, bestScore = c, score
		}
	}
	if best == 0 {
		// Too many chunks even at AutoMax: the smallest aligned size
		// that fits the encoding, up to MaxSize.
		c := alignUp(ceilDiv(size, MaxChunks))
		return c, c <= MaxSize
	}
	return best, true
}

// ceilDiv returns ceil(a/b) for a >= 0, b > 0, without overflow.
func ceilDiv(a, b units.Bytes) units.Bytes {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// alignUp rounds n > 0 up to a multiple of Align, saturating below MaxBytes.
func alignUp(n units.Bytes) units.Bytes {
	if n > units.MaxBytes-Align {
		return units.MaxBytes - units.MaxBytes%Align
	}
	return (n + Align - 1) / Align * Align
}

// Span returns the offset and length of chunk i. It panics if i is not in
// [0, Count): chunk indices come from the plan, so a bad one is a bug
// (indices from the wire go through Reassembly.Mark, which checks them).
func (p Plan) Span(i int) (off, n units.Bytes) {
	if i < 0 || i >= p.Count {
		panic(fmt.Sprintf("chunk: BUG: Span(%d) on a plan of %d chunks", i, p.Count))
	}
	off = units.Bytes(i) * p.ChunkSize
	return off, min(p.ChunkSize, p.Size-off)
}

// Last returns the length of the last chunk (ChunkSize unless Size is not a
// multiple of it); 0 for the zero Plan.
func (p Plan) Last() units.Bytes {
	if p.Count == 0 {
		return 0
	}
	return p.Size - units.Bytes(p.Count-1)*p.ChunkSize
}

// String formats the plan as "64MiB = 16 x 4MiB" or, with a short last
// chunk, "10MiB = 3 x 4MiB (last 2MiB)".
func (p Plan) String() string {
	if last := p.Last(); last != p.ChunkSize {
		return fmt.Sprintf("%v = %d x %v (last %v)", p.Size, p.Count, p.ChunkSize, last)
	}
	return fmt.Sprintf("%v = %d x %v", p.Size, p.Count, p.ChunkSize)
}
