package chunk

import (
	"fmt"

	"github.com/mptx-dev/mptx/units"
)

// The immediate encoding: the 32-bit immediate of an RDMA WRITE WITH IMM
// (ibv_post_send(3), IBV_WR_RDMA_WRITE_WITH_IMM; imm_data) names the chunk
// whose last byte the WRITE delivered:
//
//	bit 31          24 23                                      0
//	   +--------------+-----------------------------------------+
//	   | slot (8 bits)|          chunk index (24 bits)          |
//	   +--------------+-----------------------------------------+
//
// The fields and their limits:
//
//   - slot (bits 31..24) is the transfer slot: a small number the two ends
//     of a connection agree on for each live transfer (it is reused once
//     the transfer finishes), so at most MaxSlots = 256 transfers are in
//     flight per connection at once.
//   - index (bits 23..0) is the chunk index within the transfer, in
//     [0, MaxChunks). The all-ones index 0xFFFFFF is reserved in every
//     slot, so a transfer has at most MaxChunks = 16,777,215 chunks: 64 TiB
//     less one chunk at the 4 MiB default chunk size, 1 PiB less one chunk
//     at MaxSize (MaxTensor).
//   - ProbeImm (0xFFFFFFFF: slot 255, index 0xFFFFFF) marks zero-length RTT
//     probe writes. No (slot, index) pair encodes to it, nor to any other
//     value whose index field is all ones; DecodeImm of such a value
//     yields an index >= MaxChunks, which Reassembly.Mark counts as out of
//     range.
//
// Values are in host order. verbs carries imm_data in network byte order
// (__be32): the verbs backend converts with htonl/ntohl, and no other layer
// does.
const (
	// SlotBits is the width of the slot field (bits 31..24).
	SlotBits = 8
	// IndexBits is the width of the chunk-index field (bits 23..0).
	IndexBits = 32 - SlotBits
	// MaxSlots is the number of transfer slots (concurrent transfers per
	// connection).
	MaxSlots = 1 << SlotBits
	// MaxChunks is the largest chunk count of a transfer; valid indices
	// are [0, MaxChunks).
	MaxChunks = 1<<IndexBits - 1
	// ProbeImm is the reserved immediate of a zero-length probe write.
	ProbeImm uint32 = 1<<32 - 1

	indexMask = 1<<IndexBits - 1
)

// Errors returned by EncodeImm. They are preallocated so that EncodeImm
// never allocates, and therefore cannot name the bad value; the valid range
// is in the message.
var (
	ErrSlotRange  = fmt.Errorf("chunk: immediate slot out of range (valid: 0..%d)", MaxSlots-1)
	ErrIndexRange = fmt.Errorf("chunk: immediate chunk index out of range (valid: 0..%d)", MaxChunks-1)
)

// EncodeImm returns the immediate naming chunk index of the transfer in
// slot. It fails with ErrSlotRange unless 0 <= slot < MaxSlots and with
// ErrIndexRange unless index < MaxChunks. It does not allocate.
func EncodeImm(slot int, index uint32) (uint32, error) {
	if uint(slot) >= MaxSlots {
		return 0, ErrSlotRange
	}
	if index >= MaxChunks {
		return 0, ErrIndexRange
	}
	return uint32(slot)<<IndexBits | index, nil
}

// DecodeImm splits an immediate into slot and chunk index. It accepts any
// value: for ProbeImm and the other reserved values the index is
// >= MaxChunks (check IsProbe first where probes can arrive).
func DecodeImm(imm uint32) (slot int, index uint32) {
	return int(imm >> IndexBits), imm & indexMask
}

// IsProbe reports whether imm is ProbeImm.
func IsProbe(imm uint32) bool { return imm == ProbeImm }

// MaxTensor returns the largest tensor a transfer can carry at chunkSize:
// MaxChunks*chunkSize (64 TiB less 4 MiB at DefaultSize), saturating at
// units.MaxBytes; 0 for chunkSize <= 0.
func MaxTensor(chunkSize units.Bytes) units.Bytes {
	if chunkSize <= 0 {
		return 0
	}
	if chunkSize > units.MaxBytes/MaxChunks {
		return units.MaxBytes
	}
	return MaxChunks * chunkSize
}
