package cqring

import (
	"testing"

	"github.com/mptx-dev/mptx/qp"
)

func c(id uint64) qp.Completion { return qp.Completion{ID: id, Path: int(id % 3), Status: qp.StatusOK} }

// TestFIFOAcrossWrap pushes and pops in uneven batches so that the ring
// wraps many times, and checks order, Len and Full against a slice model.
func TestFIFOAcrossWrap(t *testing.T) {
	var r Ring
	r.Init(5)
	var model []uint64
	next := uint64(1)
	dst := make([]qp.Completion, 4)
	for step := 0; step < 200; step++ {
		for k := 0; k < step%4 && !r.Full(); k++ {
			r.Push(c(next))
			model = append(model, next)
			next++
		}
		n := r.Pop(dst[:step%3+1])
		for i := 0; i < n; i++ {
			if dst[i].ID != model[i] {
				t.Fatalf("step %d: Pop()[%d].ID = %d, want %d", step, i, dst[i].ID, model[i])
			}
		}
		model = model[n:]
		if r.Len() != len(model) || r.Full() != (len(model) == 5) {
			t.Fatalf("step %d: Len() = %d, Full() = %v; want %d, %v", step, r.Len(), r.Full(), len(model), len(model) == 5)
		}
	}
	if next < 100 {
		t.Fatalf("only %d pushes: the test did not exercise the ring", next)
	}
}

func TestPushFullPanics(t *testing.T) {
	var r Ring
	r.Init(2)
	r.Push(c(1))
	r.Push(c(2))
	defer func() {
		if recover() == nil {
			t.Fatal("Push to a full ring did not panic")
		}
	}()
	r.Push(c(3))
}

// TestGrowKeepsOrder grows a wrapped ring and checks that the completions
// come out in push order.
func TestGrowKeepsOrder(t *testing.T) {
	var r Ring
	r.Init(3)
	dst := make([]qp.Completion, 8)
	r.Push(c(1))
	r.Push(c(2))
	r.Pop(dst[:2]) // head now 2: the next pushes wrap
	for id := uint64(3); id <= 5; id++ {
		r.Push(c(id))
	}
	r.Grow()
	if r.Cap() != 6 || r.Len() != 3 {
		t.Fatalf("after Grow: Cap() = %d, Len() = %d; want 6, 3", r.Cap(), r.Len())
	}
	for id := uint64(6); id <= 8; id++ {
		r.Push(c(id))
	}
	n := r.Pop(dst)
	if n != 6 {
		t.Fatalf("Pop = %d, want 6", n)
	}
	for i := 0; i < n; i++ {
		if dst[i].ID != uint64(3+i) {
			t.Fatalf("Pop()[%d].ID = %d, want %d", i, dst[i].ID, 3+i)
		}
	}
}

func TestZeroRingGrows(t *testing.T) {
	var r Ring
	if !r.Full() {
		t.Fatal("the zero Ring is not Full")
	}
	r.Grow()
	r.Push(c(7))
	dst := make([]qp.Completion, 1)
	if n := r.Pop(dst); n != 1 || dst[0].ID != 7 {
		t.Fatalf("Pop = %d, %v; want 1 completion with ID 7", n, dst[0])
	}
}

func TestNoAllocs(t *testing.T) {
	var r Ring
	r.Init(64)
	dst := make([]qp.Completion, 16)
	allocs := testing.AllocsPerRun(1000, func() {
		for i := 0; i < 16; i++ {
			r.Push(c(uint64(i)))
		}
		r.Pop(dst)
	})
	if allocs != 0 {
		t.Fatalf("Push and Pop allocate %v times per run, want 0", allocs)
	}
}

var sink int

func BenchmarkPushPop(b *testing.B) {
	b.ReportAllocs()
	var r Ring
	r.Init(256)
	dst := make([]qp.Completion, 32)
	for i := 0; i < b.N; i++ {
		for k := 0; k < 32; k++ {
			r.Push(c(uint64(k)))
		}
		sink += r.Pop(dst)
	}
}
