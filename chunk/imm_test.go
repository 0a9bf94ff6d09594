package chunk

import (
	"testing"

	"github.com/mptx-dev/mptx/units"
)

func TestImmLayout(t *testing.T) {
	if SlotBits+IndexBits != 32 || MaxSlots != 256 || MaxChunks != 16_777_215 {
		t.Fatalf("SlotBits %d, IndexBits %d, MaxSlots %d, MaxChunks %d; want 8, 24, 256, 16777215", SlotBits, IndexBits, MaxSlots, MaxChunks)
	}
	for _, tt := range []struct {
		slot  int
		index uint32
		want  uint32
	}{
		{0, 0, 0x00000000},
		{0, 1, 0x00000001},
		{1, 0, 0x01000000},
		{0xAB, 0x123456, 0xAB123456},
		{255, MaxChunks - 1, 0xFFFFFFFE},
		{0, MaxChunks - 1, 0x00FFFFFE},
	} {
		got, err := EncodeImm(tt.slot, tt.index)
		if err != nil || got != tt.want {
			t.Errorf("EncodeImm(%d, %#x) = %#08x, %v; want %#08x, nil", tt.slot, tt.index, got, err, tt.want)
		}
		s, i := DecodeImm(got)
		if s != tt.slot || i != tt.index {
			t.Errorf("DecodeImm(%#08x) = %d, %#x; want %d, %#x", got, s, i, tt.slot, tt.index)
		}
		if IsProbe(got) {
			t.Errorf("IsProbe(EncodeImm(%d, %#x)) = true", tt.slot, tt.index)
		}
	}
}

func TestEncodeImmErrors(t *testing.T) {
	for _, tt := range []struct {
		slot  int
		index uint32
		want  error
	}{
		{-1, 0, ErrSlotRange},
		{256, 0, ErrSlotRange},
		{1 << 40, 0, ErrSlotRange},
		{0, MaxChunks, ErrIndexRange},
		{255, 0xFFFFFFFF, ErrIndexRange},
		{0, 1 << 24, ErrIndexRange},
	} {
		got, err := EncodeImm(tt.slot, tt.index)
		if err != tt.want || got != 0 {
			t.Errorf("EncodeImm(%d, %#x) = %#x, %v; want 0, %v", tt.slot, tt.index, got, err, tt.want)
		}
	}
	if got, want := ErrSlotRange.Error(), "chunk: immediate slot out of range (valid: 0..255)"; got != want {
		t.Errorf("ErrSlotRange = %q, want %q", got, want)
	}
	if got, want := ErrIndexRange.Error(), "chunk: immediate chunk index out of range (valid: 0..16777214)"; got != want {
		t.Errorf("ErrIndexRange = %q, want %q", got, want)
	}
}

func TestProbeImm(t *testing.T) {
	if !IsProbe(ProbeImm) || IsProbe(0) || IsProbe(ProbeImm-1) {
		t.Fatal("IsProbe disagrees with ProbeImm")
	}
	// No valid (slot, index) encodes to a value with an all-ones index,
	// ProbeImm included: the largest index of every slot stops one short.
	for slot := range MaxSlots {
		imm, err := EncodeImm(slot, MaxChunks-1)
		if err != nil || imm == ProbeImm || imm&indexMask == indexMask {
			t.Fatalf("EncodeImm(%d, MaxChunks-1) = %#08x, %v", slot, imm, err)
		}
		if _, err := EncodeImm(slot, indexMask); err != ErrIndexRange {
			t.Fatalf("EncodeImm(%d, %#x) error = %v, want ErrIndexRange", slot, indexMask, err)
		}
	}
	if s, i := DecodeImm(ProbeImm); s != MaxSlots-1 || i < MaxChunks {
		t.Errorf("DecodeImm(ProbeImm) = %d, %#x; want slot 255 and an index >= MaxChunks", s, i)
	}
}

func TestMaxTensor(t *testing.T) {
	for _, tt := range []struct {
		chunk, want units.Bytes
	}{
		{DefaultSize, 64*TiB - 4*MiB}, // 16,777,215 x 4 MiB
		{MinSize, 1024*GiB - 64*KiB},
		{MaxSize, 1024*TiB - 64*MiB},
		{Align, 64*GiB - 4*KiB},
		{0, 0},
		{-1, 0},
		{units.MaxBytes / 2, units.MaxBytes},
		{units.MaxBytes/MaxChunks + 1, units.MaxBytes},
	} {
		if got := MaxTensor(tt.chunk); got != tt.want {
			t.Errorf("MaxTensor(%v) = %v, want %v", tt.chunk, got, tt.want)
		}
	}
}

func TestImmNoAllocs(t *testing.T) {
	var imm uint32
	var err error
	slot, index := 3, uint32(0)
	if a := testing.AllocsPerRun(1000, func() {
		imm, err = EncodeImm(slot, index)
		s, i := DecodeImm(imm)
		slot, index = (s+1)%MaxSlots, (i+1)%MaxChunks
	}); a != 0 || err != nil {
		t.Errorf("EncodeImm/DecodeImm allocate %v times (err %v), want 0", a, err)
	}
	if a := testing.AllocsPerRun(1000, func() { imm, err = EncodeImm(MaxSlots, 0) }); a != 0 || err != ErrSlotRange {
		t.Errorf("EncodeImm out of range allocates %v times (err %v), want 0 and ErrSlotRange", a, err)
	}
}

// FuzzImmRoundTrip checks both directions: every valid (slot, index)
// survives EncodeImm/DecodeImm and never encodes to ProbeImm, and every
// 32-bit value either re-encodes to itself or has the reserved index.
func FuzzImmRoundTrip(f *testing.F) {
	for _, s := range []struct {
		slot  int
		index uint32
	}{{0, 0}, {255, MaxChunks - 1}, {255, MaxChunks}, {256, 0}, {-1, 1}, {7, 0xFFFFFFFF}, {128, 1 << 23}} {
		f.Add(s.slot, s.index)
	}
	f.Fuzz(func(t *testing.T, slot int, index uint32) {
		imm, err := EncodeImm(slot, index)
		valid := slot >= 0 && slot < MaxSlots && index < MaxChunks
		switch {
		case valid && err != nil:
			t.Fatalf("EncodeImm(%d, %#x) = %v, want success", slot, index, err)
		case !valid && err == nil:
			t.Fatalf("EncodeImm(%d, %#x) = %#08x, want an error", slot, index, imm)
		case valid:
			if s, i := DecodeImm(imm); s != slot || i != index || IsProbe(imm) {
				t.Fatalf("DecodeImm(EncodeImm(%d, %#x) = %#08x) = %d, %#x (probe %v)", slot, index, imm, s, i, IsProbe(imm))
			}
		}
		// The other direction, on the fuzzed bits read as an immediate.
		raw := uint32(slot)<<IndexBits ^ index
		s, i := DecodeImm(raw)
		back, err := EncodeImm(s, i)
		if i >= MaxChunks {
			if err == nil {
				t.Fatalf("DecodeImm(%#08x) = %d, %#x re-encodes, want the reserved index rejected", raw, s, i)
			}
		} else if err != nil || back != raw {
			t.Fatalf("EncodeImm(DecodeImm(%#08x)) = %#08x, %v", raw, back, err)
		}
	})
}

func BenchmarkEncodeImm(b *testing.B) {
	b.ReportAllocs()
	i := uint32(0)
	for b.Loop() {
		sinkU32, _ = EncodeImm(int(i&0xFF), i&0xFFFFF)
		i++
	}
}

func BenchmarkDecodeImm(b *testing.B) {
	b.ReportAllocs()
	i := uint32(0)
	for b.Loop() {
		s, idx := DecodeImm(i)
		sinkU32 += uint32(s) + idx
		i++
	}
}
