package chunk

import (
	"fmt"

	"github.com/mptx-dev/mptx/units"
)

// The immediate encoding: the 32-bit immediate of an RDMA WRITE WITH IMM
// (ibv_post_send(3), IBV_WR_RDMA_WRITE_WITH_IMM; imm_data) names the chunk
// whose last byte the WRITE delivered:
//
//	bit 31      24 23   20 19                              0
//	   +----------+-------+---------------------------------+
//	   |   slot   |  gen  |      chunk index (20 bits)      |
//	   +----------+-------+---------------------------------+
//	   \___ tag (12 bits) _/
//
// The fields and their limits:
//
//   - slot (bits 31..24) is the transfer slot: a small number the two ends
//     of a connection agree on for each live transfer, so at most
//     MaxSlots = 256 transfers are in flight per connection at once.
//   - gen (bits 23..20) is the slot's generation, bumped each time the
//     slot is reused (modulo MaxGens = 16). Slot and generation together
//     are the transfer's tag (MakeTag). A receiver drops an immediate whose
//     generation is not the one it expects for the slot: a stale immediate
//     of an earlier transfer in the slot (one the sender abandoned on a
//     stalled path, say) can never be counted as a chunk of the next one.
//     The sender's fence (package multipath: a transfer is reported done
//     only after every work request of it has completed or its queue pair
//     was reset) is what guarantees no stale write lands; the generation
//     is the receiver's own check on top of it.
//   - index (bits 19..0) is the chunk index within the transfer, in
//     [0, MaxChunks). The all-ones index 0xFFFFF is reserved under every
//     tag, so a transfer has at most MaxChunks = 1,048,575 chunks: 4 TiB
//     less one chunk at the 4 MiB default chunk size, 64 TiB less one
//     chunk at MaxSize (MaxTensor); NewPlan's automatic choice grows the
//     chunk for larger tensors.
//   - ProbeImm (0xFFFFFFFF: tag 4095, index 0xFFFFF) marks zero-length RTT
//     probe writes. No (tag, index) pair encodes to it, nor to any other
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
	// GenBits is the width of the generation field (bits 23..20).
	GenBits = 4
	// TagBits is the width of a tag: slot and generation.
	TagBits = SlotBits + GenBits
	// IndexBits is the width of the chunk-index field (bits 19..0).
	IndexBits = 32 - TagBits
	// MaxSlots is the number of transfer slots (concurrent transfers per
	// connection).
	MaxSlots = 1 << SlotBits
	// MaxGens is the number of generations a slot cycles through.
	MaxGens = 1 << GenBits
	// MaxTags is the number of distinct tags (slot, generation).
	MaxTags = 1 << TagBits
	// MaxChunks is the largest chunk count of a transfer; valid indices
	// are [0, MaxChunks).
	MaxChunks = 1<<IndexBits - 1
	// ProbeImm is the reserved immediate of a zero-length probe write.
	ProbeImm uint32 = 1<<32 - 1

	indexMask = 1<<IndexBits - 1
)

// MakeTag returns the tag of a transfer in slot at generation gen (taken
// modulo MaxGens). slot must be in [0, MaxSlots); MakeTag panics otherwise
// (a bug in the caller).
func MakeTag(slot int, gen uint32) int {
	if uint(slot) >= MaxSlots {
		panic(fmt.Sprintf("chunk: BUG: MakeTag(%d) (valid slots: 0..%d)", slot, MaxSlots-1))
	}
	return slot<<GenBits | int(gen%MaxGens)
}

// TagSlot returns a tag's slot.
func TagSlot(tag int) int { return tag >> GenBits & (MaxSlots - 1) }

// TagGen returns a tag's generation.
func TagGen(tag int) int { return tag & (MaxGens - 1) }

// Errors returned by EncodeImm. They are preallocated so that EncodeImm
// never allocates, and therefore cannot name the bad value; the valid range
// is in the message.
var (
	ErrTagRange   = fmt.Errorf("chunk: immediate tag out of range (valid: 0..%d)", MaxTags-1)
	ErrIndexRange = fmt.Errorf("chunk: immediate chunk index out of range (valid: 0..%d)", MaxChunks-1)
)

// EncodeImm returns the immediate naming chunk index of the transfer with
// tag. It fails with ErrTagRange unless 0 <= tag < MaxTags and with
// ErrIndexRange unless index < MaxChunks. It does not allocate.
func EncodeImm(tag int, index uint32) (uint32, error) {
	if uint(tag) >= MaxTags {
		return 0, ErrTagRange
	}
	if index >= MaxChunks {
		return 0, ErrIndexRange
	}
	return uint32(tag)<<IndexBits | index, nil
}

// DecodeImm splits an immediate into tag and chunk index. It accepts any
// value: for ProbeImm and the other reserved values the index is
// >= MaxChunks (check IsProbe first where probes can arrive).
func DecodeImm(imm uint32) (tag int, index uint32) {
	return int(imm >> IndexBits), imm & indexMask
}

// IsProbe reports whether imm is ProbeImm.
func IsProbe(imm uint32) bool { return imm == ProbeImm }

// MaxTensor returns the largest tensor a transfer can carry at chunkSize:
// MaxChunks*chunkSize (4 TiB less 4 MiB at DefaultSize), saturating at
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
