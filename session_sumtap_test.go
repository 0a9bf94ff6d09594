package mptx

import (
	"testing"

	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// cqeRecv is a qp.Receiver that hands out the completions it was given.
type cqeRecv struct {
	qp.Receiver
	cqes []qp.Completion
}

func (f *cqeRecv) Poll(dst []qp.Completion) (int, error) {
	n := copy(dst, f.cqes)
	f.cqes = f.cqes[n:]
	return n, nil
}

// TestSumTapTakesBackendSums: sumTap takes a chunk's CRC32C from its
// completion when the backend computed one over exactly the chunk's bytes
// where they belong (it does not read the region: the sum given is used
// as is, so a backend's sum that disagrees with the sender's fails the
// tensor), and checksums the chunk in the region when the completion has
// no sum, covers only the chunk's last segment, or landed elsewhere.
func TestSumTapTakesBackendSums(t *testing.T) {
	const chunkSize = 64 << 10
	plan, err := chunk.NewPlan(4*chunkSize, chunkSize, 1)
	if err != nil {
		t.Fatal(err)
	}
	region := make([]byte, 6*chunkSize)
	for i := range region {
		region[i] = byte(i * 7)
	}
	in := &incomingTensor{plan: plan, off: chunkSize, sums: make([]uint32, 4), summed: make([]bool, 4)}
	const tag = 5
	rs := &recvSide{region: region, checking: map[int]*incomingTensor{tag: in}}
	imm := func(i uint32) uint32 {
		v, err := chunk.EncodeImm(tag, i)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const given = 0xdeadbeef
	f := &cqeRecv{cqes: []qp.Completion{
		{Op: qp.OpRecvImm, Status: qp.StatusOK, Imm: imm(0), Bytes: chunkSize, Sum: given, HasSum: true, SumAt: chunkSize},
		{Op: qp.OpRecvImm, Status: qp.StatusOK, Imm: imm(1), Bytes: chunkSize / 2, Sum: given, HasSum: true, SumAt: 2*chunkSize + chunkSize/2},
		{Op: qp.OpRecvImm, Status: qp.StatusOK, Imm: imm(2), Bytes: chunkSize},
		{Op: qp.OpRecvImm, Status: qp.StatusOK, Imm: imm(3), Bytes: chunkSize, Sum: given, HasSum: true, SumAt: 0},
	}}
	tap := &sumTap{Receiver: f, rs: rs}
	dst := make([]qp.Completion, 8)
	if n, err := tap.Poll(dst); n != 4 || err != nil {
		t.Fatalf("Poll = %d, %v; want 4, nil", n, err)
	}
	span := func(i int) []byte {
		off, n := plan.Span(i)
		return region[units.Bytes(chunkSize)+off : units.Bytes(chunkSize)+off+n]
	}
	want := []uint32{given, chunk.CRC32C(span(1)), chunk.CRC32C(span(2)), chunk.CRC32C(span(3))}
	for i := range 4 {
		if !in.summed[i] || in.sums[i] != want[i] {
			t.Errorf("chunk %d: sum %#08x (summed %v), want %#08x", i, in.sums[i], in.summed[i], want[i])
		}
	}
}
