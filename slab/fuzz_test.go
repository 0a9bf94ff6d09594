package slab

import (
	"encoding/binary"
	"testing"

	"github.com/mptx-dev/mptx/units"
)

// FuzzPool drives a small pool with the operations the input spells (3
// bytes each: an opcode and a 16-bit size or index) and checks the
// invariants after every one: blocks inside the region, disjoint, and a
// pool that is one free span again once everything is freed.
func FuzzPool(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 0, 2, 1, 0, 0})
	f.Add([]byte{0, 0, 200, 0, 0, 4, 0, 255, 255, 1, 1, 0, 0, 0, 3})
	f.Add([]byte{2, 16, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 1, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		p, err := New(Config{Size: 64 * units.MiB, SlabSize: 4 * units.MiB, MaxSpans: 64})
		if err != nil {
			t.Fatal(err)
		}
		var live []Block
		for i := 0; i+3 <= len(ops) && i < 3*512; i += 3 {
			arg := int(binary.LittleEndian.Uint16(ops[i+1:]))
			switch ops[i] % 3 {
			case 0, 2: // allocate arg KiB (op 2: arg bytes)
				n := units.Bytes(arg+1) * units.KiB
				if ops[i]%3 == 2 {
					n = units.Bytes(arg + 1)
				}
				if b, ok := p.Alloc(n); ok {
					if b.Len != n || b.Cap < n || b.Off%Page != 0 || b.Off+b.Cap > p.Size() {
						t.Fatalf("Alloc(%d) = %+v", n, b)
					}
					live = append(live, b)
				}
			case 1: // free live[arg % len]
				if len(live) == 0 {
					continue
				}
				k := arg % len(live)
				p.Free(live[k])
				live[k] = live[len(live)-1]
				live = live[:len(live)-1]
			}
			if err := p.Check(); err != nil {
				t.Fatalf("op %d: %v", i/3, err)
			}
		}
		checkDisjoint(t, live)
		for _, b := range live {
			p.Free(b)
		}
		if err := p.Check(); err != nil {
			t.Fatal(err)
		}
		p.releaseCached()
		var st Stats
		p.Stats(&st)
		if st.FreeSpans != 1 || st.Free != p.Size() || st.Live != 0 {
			t.Fatalf("emptied pool: %d free spans, %v free, %d live", st.FreeSpans, st.Free, st.Live)
		}
	})
}
