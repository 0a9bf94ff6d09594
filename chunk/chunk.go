package chunk

import (
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
