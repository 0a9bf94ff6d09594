package chunk_test

import (
	"fmt"

	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/units"
)

func ExampleNewPlan() {
	for _, paths := range []int{1, 4, 6} {
		p, err := chunk.NewPlan(100*units.MiB, 0, paths)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d paths: %v\n", paths, p)
	}
	_, err := chunk.NewPlan(100*units.MiB, 5000, 4)
	fmt.Println(err)
	// Output:
	// 1 paths: 100MiB = 25 x 4MiB
	// 4 paths: 100MiB = 32 x 3200KiB
	// 6 paths: 100MiB = 30 x 3416KiB (last 3336KiB)
	// chunk: chunk size 5000B is out of range (valid: 64KiB..64MiB, 4KiB-aligned, or 0 for automatic)
}

func ExampleEncodeImm() {
	tag := chunk.MakeTag(3, 2) // slot 3, its second reuse
	imm, err := chunk.EncodeImm(tag, 1000)
	if err != nil {
		panic(err)
	}
	got, index := chunk.DecodeImm(imm)
	fmt.Printf("%#08x -> slot %d gen %d, chunk %d; probe %v\n", imm, chunk.TagSlot(got), chunk.TagGen(got), index, chunk.IsProbe(imm))
	fmt.Println(chunk.MaxTensor(chunk.DefaultSize) == 4*units.TiB-4*units.MiB)
	// Output:
	// 0x032003e8 -> slot 3 gen 2, chunk 1000; probe false
	// true
}

func ExampleReassembly() {
	p, _ := chunk.NewPlan(10*units.MiB, 4*units.MiB, 1) // 3 chunks
	r, _ := chunk.NewReassembly(p.Count)
	for _, imm := range []uint32{0x05000002, 0x05000000, 0x05000002, chunk.ProbeImm, 0x05000001} {
		if chunk.IsProbe(imm) {
			continue
		}
		_, index := chunk.DecodeImm(imm)
		fmt.Println(index, r.Mark(index), r.Complete())
	}
	fmt.Println("duplicates:", r.Duplicates())
	// Output:
	// 2 new false
	// 0 new false
	// 2 duplicate false
	// 1 new true
	// duplicates: 1
}
