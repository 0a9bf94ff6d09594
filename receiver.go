package mptx

import (
	"fmt"

	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	// Batch is the most completions polled per round; 0 means 64.
	Batch int
	// OnChunk, if set, is called for every newly arrived chunk (after its
	// last segment landed), e.g. to verify its CRC32C. Returning an error
	// fails the transfer.
	OnChunk func(id multipath.TransferID, c chunk.Chunk) error
	// OnDone is called once per expected transfer: when every chunk has
	// arrived (err nil) or when OnChunk rejected one.
	OnDone func(id multipath.TransferID, now vtime.Time, err error)
}

// ReceiverStats counts what the receiver saw.
type ReceiverStats struct {
	Completions uint64
	Chunks      uint64 // distinct chunks arrived
	Duplicates  uint64 // chunks that arrived again (requeued after a lost ack)
	Probes      uint64
	Unknown     uint64 // immediates for no expected transfer, or out of range
	Errors      uint64 // receive completions with an error status
}

type incoming struct {
	live   bool
	id     multipath.TransferID
	plan   chunk.Plan
	remote units.Bytes
	asm    *chunk.Reassembly
	failed bool
}

// Receiver tracks tensors arriving on one connection: it polls
// WRITE WITH IMM completions, decodes (transfer slot, chunk index) from each
// immediate and marks the chunk in the transfer's reassembly bitmap. A
// transfer is done when every chunk's last segment has landed; because RC
// delivers a queue pair's writes in order and a chunk's segments share one
// queue pair, that means every byte of the tensor is in place.
type Receiver struct {
	r     qp.Receiver
	cfg   ReceiverConfig
	cqes  []qp.Completion
	slots [chunk.MaxSlots]incoming
	stats ReceiverStats
}

// NewReceiver builds a receiver over r.
func NewReceiver(r qp.Receiver, cfg ReceiverConfig) (*Receiver, error) {
	if cfg.Batch == 0 {
		cfg.Batch = 64
	}
	if cfg.Batch < 1 {
		return nil, fmt.Errorf("mptx: ReceiverConfig.Batch = %d (valid: >= 1)", cfg.Batch)
	}
	return &Receiver{r: r, cfg: cfg, cqes: make([]qp.Completion, cfg.Batch)}, nil
}

// Expect registers a transfer the sender submitted in slot with plan; its
// tensor lands at offset remote of the receive region.
func (r *Receiver) Expect(slot int, id multipath.TransferID, plan chunk.Plan, remote units.Bytes) error {
	if slot < 0 || slot >= len(r.slots) {
		return fmt.Errorf("mptx: Expect: slot %d out of range [0, %d)", slot, len(r.slots))
	}
	in := &r.slots[slot]
	if in.live {
		return fmt.Errorf("mptx: Expect: slot %d already holds transfer %d", slot, in.id)
	}
	if in.asm == nil {
		a, err := chunk.NewReassembly(plan.Count)
		if err != nil {
			return err
		}
		in.asm = a
	} else {
		in.asm.Reset(plan.Count)
	}
	in.live, in.id, in.plan, in.remote, in.failed = true, id, plan, remote, false
	return nil
}

// Stats returns the receiver's counters.
func (r *Receiver) Stats() ReceiverStats { return r.stats }

// Step polls receive completions at now. It has no timers and returns 0.
func (r *Receiver) Step(now vtime.Time) vtime.Time {
	for {
		n, err := r.r.Poll(r.cqes)
		if err != nil || n == 0 {
			return 0
		}
		r.stats.Completions += uint64(n)
		for i := range r.cqes[:n] {
			r.onCompletion(now, &r.cqes[i])
		}
		if n < len(r.cqes) {
			return 0
		}
	}
}

func (r *Receiver) onCompletion(now vtime.Time, c *qp.Completion) {
	if c.Status != qp.StatusOK {
		r.stats.Errors++
		return
	}
	if chunk.IsProbe(c.Imm) {
		r.stats.Probes++
		return
	}
	slot, idx := chunk.DecodeImm(c.Imm)
	if slot < 0 || slot >= len(r.slots) || !r.slots[slot].live {
		r.stats.Unknown++
		return
	}
	in := &r.slots[slot]
	switch in.asm.Mark(idx) {
	case chunk.MarkDuplicate:
		r.stats.Duplicates++
		return
	case chunk.MarkOutOfRange:
		r.stats.Unknown++
		return
	}
	r.stats.Chunks++
	if r.cfg.OnChunk != nil && !in.failed {
		off, n := in.plan.Span(int(idx))
		if err := r.cfg.OnChunk(in.id, chunk.Chunk{Transfer: uint64(in.id), Index: idx, Offset: in.remote + off, Len: n}); err != nil {
			in.failed = true
			in.live = false
			if r.cfg.OnDone != nil {
				r.cfg.OnDone(in.id, now, err)
			}
			return
		}
	}
	if in.asm.Complete() {
		in.live = false
		if r.cfg.OnDone != nil {
			r.cfg.OnDone(in.id, now, nil)
		}
	}
}
