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
	// arrived (err nil), when OnChunk rejected one, or when the transfer
	// was abandoned (SenderDone with an error, Abandon, or a failed
	// completion queue).
	OnDone func(id multipath.TransferID, now vtime.Time, err error)
	// AwaitSender holds OnDone of a complete transfer until SenderDone
	// reports the sender's end of it. A complete bitmap says every chunk
	// landed once; it does not say that no abandoned attempt of a chunk
	// (one the sender requeued after a stall) can still land. The sender
	// knows: its engine reports a transfer only once every work request of
	// it has completed or been fenced. With AwaitSender the receive range
	// is handed over (and may be reused) only after that, which is what a
	// session does; without it, the application must not reuse the range
	// before the sender's OnDone.
	AwaitSender bool
	// Telemetry, if set, records every chunk and transfer (Expect is the
	// caller's to record: it has the trace context).
	Telemetry RecvTelemetry
}

// ReceiverStats counts what the receiver saw.
type ReceiverStats struct {
	Completions uint64
	Chunks      uint64 // distinct chunks arrived
	Duplicates  uint64 // chunks that arrived again (requeued after a lost ack)
	Probes      uint64
	Unknown     uint64 // immediates for no expected transfer, or out of range
	Stale       uint64 // immediates of an earlier use of a live transfer's slot (another generation)
	Errors      uint64 // receive completions with an error status
}

type incoming struct {
	live   bool
	tag    int
	id     multipath.TransferID
	plan   chunk.Plan
	remote units.Bytes
	asm    *chunk.Reassembly
	failed bool
	// complete: every chunk arrived (waiting for SenderDone with
	// AwaitSender); senderDone: SenderDone(nil) came first.
	complete, senderDone bool
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
	err   error // sticky: the receive completion queue failed
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

// Expect registers a transfer the sender submitted with tag (Submit's
// first result: the slot and its generation) and plan; its tensor lands at
// offset remote of the receive region. Immediates carrying the slot with
// another generation are counted Stale and ignored.
func (r *Receiver) Expect(tag int, id multipath.TransferID, plan chunk.Plan, remote units.Bytes) error {
	if tag < 0 || tag >= chunk.MaxTags {
		return fmt.Errorf("mptx: Expect: tag %d out of range [0, %d)", tag, chunk.MaxTags)
	}
	if plan.Count < 1 || plan.Count > chunk.MaxChunks || plan.ChunkSize <= 0 || plan.Size <= 0 ||
		units.Bytes(plan.Count-1)*plan.ChunkSize >= plan.Size || units.Bytes(plan.Count) < (plan.Size-1)/plan.ChunkSize+1 {
		return fmt.Errorf("mptx: Expect: plan %+v is not one chunk.NewPlan makes (Count 1..%d chunks of ChunkSize covering Size)", plan, chunk.MaxChunks)
	}
	if remote < 0 {
		return fmt.Errorf("mptx: Expect: remote offset %v (valid: >= 0)", remote)
	}
	if r.err != nil {
		return r.err
	}
	in := &r.slots[chunk.TagSlot(tag)]
	if in.live {
		return fmt.Errorf("mptx: Expect: slot %d already holds transfer %d", chunk.TagSlot(tag), in.id)
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
	*in = incoming{live: true, tag: tag, id: id, plan: plan, remote: remote, asm: in.asm}
	return nil
}

// Busy reports whether tag's slot still holds a transfer (of any
// generation): Expect(tag, ...) would fail until it ends. A sender reuses
// a slot as soon as its own end of the transfer is done, which can be
// before this end has polled the transfer's last completions.
func (r *Receiver) Busy(tag int) bool {
	return tag >= 0 && tag < chunk.MaxTags && r.slots[chunk.TagSlot(tag)].live
}

// SenderDone reports the sender's end of transfer tag (its OnDone: err nil
// for done). With AwaitSender a complete transfer is handed over now; an
// error abandons the transfer (OnDone with err) whatever has arrived. It is
// a no-op for a tag that is not live.
func (r *Receiver) SenderDone(now vtime.Time, tag int, err error) {
	in := r.lookup(tag)
	if in == nil {
		return
	}
	switch {
	case err != nil:
		r.finish(now, in, err)
	case in.complete:
		r.finish(now, in, nil)
	default:
		in.senderDone = true
	}
}

// Abandon stops tracking transfer tag and reports it failed with err. The
// sender may still write its range until its own end of the transfer.
func (r *Receiver) Abandon(now vtime.Time, tag int, err error) {
	if in := r.lookup(tag); in != nil {
		r.finish(now, in, err)
	}
}

// Err returns the receiver's sticky error: non-nil once its completion
// queue failed (every expected transfer was then reported failed).
func (r *Receiver) Err() error { return r.err }

func (r *Receiver) lookup(tag int) *incoming {
	if tag < 0 || tag >= chunk.MaxTags {
		return nil
	}
	if in := &r.slots[chunk.TagSlot(tag)]; in.live && in.tag == tag {
		return in
	}
	return nil
}

func (r *Receiver) finish(now vtime.Time, in *incoming, err error) {
	in.live = false
	if t := r.cfg.Telemetry; t != nil {
		t.Done(now, in.id, errText(err))
	}
	if r.cfg.OnDone != nil {
		r.cfg.OnDone(in.id, now, err)
	}
}

// Stats returns the receiver's counters.
func (r *Receiver) Stats() ReceiverStats { return r.stats }

// Step polls receive completions at now. It has no timers and returns 0.
func (r *Receiver) Step(now vtime.Time) vtime.Time {
	for r.err == nil {
		n, err := r.r.Poll(r.cqes)
		if err != nil {
			r.err = fmt.Errorf("mptx: polling the receive completion queue: %w", err)
			for i := range r.slots {
				if in := &r.slots[i]; in.live {
					r.finish(now, in, r.err)
				}
			}
			return 0
		}
		if n == 0 {
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
	return 0
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
	tag, idx := chunk.DecodeImm(c.Imm)
	in := &r.slots[chunk.TagSlot(tag)]
	if !in.live {
		r.stats.Unknown++
		return
	}
	if in.tag != tag {
		r.stats.Stale++
		return
	}
	switch in.asm.Mark(idx) {
	case chunk.MarkDuplicate:
		r.stats.Duplicates++
		if t := r.cfg.Telemetry; t != nil {
			t.Duplicate(now, in.id, idx, c.Path)
		}
		return
	case chunk.MarkOutOfRange:
		r.stats.Unknown++
		return
	}
	r.stats.Chunks++
	if t := r.cfg.Telemetry; t != nil {
		_, n := in.plan.Span(int(idx))
		t.Chunk(in.id, idx, c.Path, n, c.At, now)
	}
	if r.cfg.OnChunk != nil && !in.failed {
		off, n := in.plan.Span(int(idx))
		if err := r.cfg.OnChunk(in.id, chunk.Chunk{Transfer: uint64(in.id), Index: idx, Offset: in.remote + off, Len: n}); err != nil {
			in.failed = true
			r.finish(now, in, err)
			return
		}
	}
	if in.asm.Complete() {
		in.complete = true
		if !r.cfg.AwaitSender || in.senderDone {
			r.finish(now, in, nil)
		}
	}
}
