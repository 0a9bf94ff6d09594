package chunk

import (
	"testing"

	"github.com/mptx-dev/mptx/units"
)

func TestImmLayout(t *testing.T) {
	if TagBits+IndexBits != 32 || MaxSlots != 256 || MaxGens != 16 || MaxTags != 4096 || MaxChunks != 1_048_575 {
		t.Fatalf("TagBits %d, IndexBits %d, MaxSlots %d, MaxGens %d, MaxTags %d, MaxChunks %d; want 12, 20, 256, 16, 4096, 1048575",
			TagBits, IndexBits, MaxSlots, MaxGens, MaxTags, MaxChunks)
	}
	for _, tt := range []struct {
		slot  int
		gen   uint32
		index uint32
		want  uint32
	}{
		{0, 0, 0, 0x00000000},
		{0, 0, 1, 0x00000001},
		{1, 0, 0, 0x01000000},
		{0, 1, 0, 0x00100000},
		{0, 17, 0, 0x00100000}, // generations wrap modulo MaxGens
		{0xAB, 0xC, 0x12345, 0xABC12345},
		{255, 15, MaxChunks - 1, 0xFFFFFFFE},
		{0, 0, MaxChunks - 1, 0x000FFFFE},
	} {
		tag := MakeTag(tt.slot, tt.gen)
		if TagSlot(tag) != tt.slot || TagGen(tag) != int(tt.gen%MaxGens) {
			t.Errorf("MakeTag(%d, %d) = %#x: slot %d, gen %d", tt.slot, tt.gen, tag, TagSlot(tag), TagGen(tag))
		}
		got, err := EncodeImm(tag, tt.index)
		if err != nil || got != tt.want {
			t.Errorf("EncodeImm(%#x, %#x) = %#08x, %v; want %#08x, nil", tag, tt.index, got, err, tt.want)
		}
		g, i := DecodeImm(got)
		if g != tag || i != tt.index {
			t.Errorf("DecodeImm(%#08x) = %#x, %#x; want %#x, %#x", got, g, i, tag, tt.index)
		}
		if IsProbe(got) {
			t.Errorf("IsProbe(EncodeImm(%#x, %#x)) = true", tag, tt.index)
		}
	}
}

func TestMakeTagPanicsOutOfRange(t *testing.T) {
	for _, slot := range []int{-1, MaxSlots} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MakeTag(%d, 0) did not panic", slot)
				}
			}()
			MakeTag(slot, 0)
		}()
	}
}

func TestEncodeImmErrors(t *testing.T) {
	for _, tt := range []struct {
		tag   int
		index uint32
		want  error
	}{
		{-1, 0, ErrTagRange},
		{MaxTags, 0, ErrTagRange},
		{1 << 40, 0, ErrTagRange},
		{0, MaxChunks, ErrIndexRange},
		{MaxTags - 1, 0xFFFFFFFF, ErrIndexRange},
		{0, 1 << 20, ErrIndexRange},
	} {
		got, err := EncodeImm(tt.tag, tt.index)
		if err != tt.want || got != 0 {
			t.Errorf("EncodeImm(%d, %#x) = %#x, %v; want 0, %v", tt.tag, tt.index, got, err, tt.want)
		}
	}
	if got, want := ErrTagRange.Error(), "chunk: immediate tag out of range (valid: 0..4095)"; got != want {
		t.Errorf("ErrTagRange = %q, want %q", got, want)
	}
	if got, want := ErrIndexRange.Error(), "chunk: immediate chunk index out of range (valid: 0..1048574)"; got != want {
		t.Errorf("ErrIndexRange = %q, want %q", got, want)
	}
}

func TestProbeImm(t *testing.T) {
	if !IsProbe(ProbeImm) || IsProbe(0) || IsProbe(ProbeImm-1) {
		t.Fatal("IsProbe disagrees with ProbeImm")
	}
	// No valid (tag, index) encodes to a value with an all-ones index,
	// ProbeImm included: the largest index of every tag stops one short.
	for tag := range MaxTags {
		imm, err := EncodeImm(tag, MaxChunks-1)
		if err != nil || imm == ProbeImm || imm&indexMask == indexMask {
			t.Fatalf("EncodeImm(%d, MaxChunks-1) = %#08x, %v", tag, imm, err)
		}
		if _, err := EncodeImm(tag, indexMask); err != ErrIndexRange {
			t.Fatalf("EncodeImm(%d, %#x) error = %v, want ErrIndexRange", tag, indexMask, err)
		}
	}
	if g, i := DecodeImm(ProbeImm); g != MaxTags-1 || i < MaxChunks {
		t.Errorf("DecodeImm(ProbeImm) = %d, %#x; want tag 4095 and an index >= MaxChunks", g, i)
	}
}

func TestMaxTensor(t *testing.T) {
	for _, tt := range []struct {
		chunk, want units.Bytes
	}{
		{DefaultSize, 4*TiB - 4*MiB}, // 1,048,575 x 4 MiB
		{MinSize, 64*GiB - 64*KiB},
		{MaxSize, 64*TiB - 64*MiB},
		{Align, 4*GiB - 4*KiB},
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
	tag, index := 3, uint32(0)
	if a := testing.AllocsPerRun(1000, func() {
		imm, err = EncodeImm(tag, index)
		g, i := DecodeImm(imm)
		tag, index = (g+1)%MaxTags, (i+1)%MaxChunks
	}); a != 0 || err != nil {
		t.Errorf("EncodeImm/DecodeImm allocate %v times (err %v), want 0", a, err)
	}
	if a := testing.AllocsPerRun(1000, func() { imm, err = EncodeImm(MaxTags, 0) }); a != 0 || err != ErrTagRange {
		t.Errorf("EncodeImm out of range allocates %v times (err %v), want 0 and ErrTagRange", a, err)
	}
}

// FuzzImmRoundTrip checks both directions: every valid (tag, index)
// survives EncodeImm/DecodeImm and never encodes to ProbeImm, and every
// 32-bit value either re-encodes to itself or has the reserved index.
func FuzzImmRoundTrip(f *testing.F) {
	for _, s := range []struct {
		slot  int
		index uint32
	}{{0, 0}, {MaxTags - 1, MaxChunks - 1}, {MaxTags - 1, MaxChunks}, {MaxTags, 0}, {-1, 1}, {7, 0xFFFFFFFF}, {128, 1 << 19}} {
		f.Add(s.slot, s.index)
	}
	f.Fuzz(func(t *testing.T, slot int, index uint32) {
		imm, err := EncodeImm(slot, index)
		valid := slot >= 0 && slot < MaxTags && index < MaxChunks
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
		sinkU32, _ = EncodeImm(int(i&0xFFF), i&0x7FFFF)
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
