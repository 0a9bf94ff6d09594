package chunk

import (
	"fmt"
	"hash/crc32"

	"github.com/mptx-dev/mptx/units"
)

// Chunk describes one chunk of a transfer.
//
// The zero Chunk is chunk 0 of transfer 0 with no bytes and no CRC.
type Chunk struct {
	Transfer uint64      // transfer id, chosen by the caller
	Index    uint32      // chunk index within the plan, in [0, Plan.Count)
	Offset   units.Bytes // offset of the chunk's first byte in the tensor
	Len      units.Bytes // chunk length; ChunkSize except possibly the last
	CRC      uint32      // CRC32C (Castagnoli) of the payload when HasCRC
	HasCRC   bool
}

// Verify reports whether payload matches the chunk: its length is Len and,
// when HasCRC, its CRC32C is CRC.
func (c Chunk) Verify(payload []byte) bool {
	if units.Bytes(len(payload)) != c.Len {
		return false
	}
	return !c.HasCRC || CRC32C(payload) == c.CRC
}

// castagnoli is the CRC32C table, built once. hash/crc32 recognises it and
// uses the SSE4.2 / ARMv8 CRC instructions where the CPU has them.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected;
// RFC 3720 §B.4, the iSCSI and NVMe/TCP digest) of b. CRC32C("123456789")
// is 0xE3069283.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// UpdateCRC32C returns the CRC32C of the bytes whose CRC32C is crc followed
// by b, so a chunk's CRC can be built segment by segment:
// UpdateCRC32C(CRC32C(a), b) == CRC32C(a+b), and CRC32C of nothing is 0.
func UpdateCRC32C(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// Chunker hands out a Plan's chunks in index order, filling descriptors the
// caller owns.
//
// The zero Chunker has no chunks. A Chunker is not safe for concurrent use.
type Chunker struct {
	plan     Plan
	transfer uint64
	next     int
	data     []byte
}

// NewChunker returns a Chunker over the plan's chunks for the transfer. p
// must come from NewPlan.
func NewChunker(transfer uint64, p Plan) *Chunker {
	c := new(Chunker)
	c.Reset(transfer, p)
	return c
}

// Reset restarts c on a new transfer and plan and forgets any payload set
// by SetData. It does not allocate.
func (c *Chunker) Reset(transfer uint64, p Plan) {
	*c = Chunker{plan: p, transfer: transfer}
}

// SetData makes Next fill in each chunk's CRC32C over the matching bytes of
// data (the whole tensor), from the next chunk on. len(data) must equal the
// plan's Size. The Chunker keeps data until Reset; it does not copy it.
// Checksumming reads every byte (roughly 20 GB/s per core with the CPU's
// CRC instructions), so it is off unless asked for.
func (c *Chunker) SetData(data []byte) error {
	if units.Bytes(len(data)) != c.plan.Size {
		return fmt.Errorf("chunk: SetData: payload length %d does not match the plan's tensor size %v (valid: exactly %d bytes)", len(data), c.plan.Size, int64(c.plan.Size))
	}
	c.data = data
	return nil
}

// Next fills dst with the next chunks, at most len(dst), and returns how
// many it filled; 0 once every chunk has been handed out. It does not
// allocate.
func (c *Chunker) Next(dst []Chunk) int {
	n := min(len(dst), c.plan.Count-c.next)
	for k := range n {
		i := c.next + k
		off, l := c.plan.Span(i)
		ch := Chunk{Transfer: c.transfer, Index: uint32(i), Offset: off, Len: l}
		if c.data != nil {
			ch.CRC, ch.HasCRC = CRC32C(c.data[off:off+l]), true
		}
		dst[k] = ch
	}
	c.next += n
	return n
}

// Remaining returns the number of chunks Next has not handed out yet.
func (c *Chunker) Remaining() int { return c.plan.Count - c.next }

// Plan returns the plan c walks.
func (c *Chunker) Plan() Plan { return c.plan }
