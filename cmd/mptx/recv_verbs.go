package main

// The direct verbs path of `mptx recv` (--transport verbs --direct): one
// tensor from one sender over qp/verbs' own bootstrap and Listener, driven
// by mptx.Receiver in mptx.Loop, without a session; recv exits after it.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/internal/crc32c"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/verbs"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// RecvSummary is what `mptx recv` reports.
type RecvSummary struct {
	Name       string        `json:"name"`
	From       string        `json:"from"`
	Bytes      int64         `json:"bytes"`
	Chunks     int           `json:"chunks"`
	Seconds    float64       `json:"seconds"`
	Gbps       float64       `json:"gbps"`
	CRC        string        `json:"crc"` // "ok", "mismatch" or "off"
	CRC32C     string        `json:"crc32c,omitempty"`
	Duplicates uint64        `json:"duplicates"`
	Probes     uint64        `json:"probes"`
	Rejected   int           `json:"rejected_peers"`
	Access     string        `json:"access"`
	File       string        `json:"file,omitempty"` // where --out wrote it
	Paths      []PathSummary `json:"paths"`
}

type verbsRecvParams struct {
	listen    string
	out       *outDir // nil: discard after checking
	secret    []byte
	devices   []string
	pool, max units.Bytes
	qp        verbs.QPConfig
	progress  bool
	busyPoll  time.Duration
}

// countingReceiver counts, per path, the chunks whose last segment landed
// there (a chunk's segments share its path's QP).
type countingReceiver struct {
	*verbs.Receiver
	slot   int
	plan   chunk.Plan
	bytes  []int64
	chunks []int
}

func (c *countingReceiver) Poll(dst []qp.Completion) (int, error) {
	n, err := c.Receiver.Poll(dst)
	for i := range dst[:n] {
		x := &dst[i]
		if x.Status != qp.StatusOK || chunk.IsProbe(x.Imm) || x.Path < 0 || x.Path >= len(c.bytes) {
			continue
		}
		if s, idx := chunk.DecodeImm(x.Imm); s == c.slot && int(idx) < c.plan.Count {
			_, l := c.plan.Span(int(idx))
			c.bytes[x.Path] += int64(l)
			c.chunks[x.Path]++
		}
	}
	return n, err
}

func runRecvVerbs(ctx context.Context, log io.Writer, p verbsRecvParams) (*RecvSummary, error) {
	h, err := verbs.OpenHost(verbs.HostConfig{Devices: p.devices, PoolSize: p.pool})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	ln, err := h.Listen(p.listen, verbs.ListenConfig{Secret: p.secret, MaxSize: p.max, QP: p.qp,
		OnReject: func(addr net.Addr, err error) { fmt.Fprintf(log, "mptx recv: rejected peer %v: %v\n", addr, err) }})
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	fmt.Fprintf(log, "mptx recv: listening on %v (NICs %v)\n", ln.Addr(), nicNames(h))
	r, err := ln.Accept(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	offer := r.Offer()
	fmt.Fprintf(log, "mptx recv: %s offers %q, %v over %d paths (access: %v)\n", r.RemoteAddr(), offer.Name, units.Bytes(offer.Size), len(r.Paths()), r.Access())
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tr, err := r.AwaitTransfer(tctx)
	if err != nil {
		return nil, err
	}
	plan := chunk.Plan{Size: units.Bytes(tr.Size), ChunkSize: units.Bytes(tr.ChunkSize), Count: int(tr.Count)}
	cr := &countingReceiver{Receiver: r, slot: int(tr.Slot), plan: plan, bytes: make([]int64, len(r.Paths())), chunks: make([]int, len(r.Paths()))}
	var done bool
	var doneErr error
	var doneAt vtime.Time
	rcv, err := mptx.NewReceiver(cr, mptx.ReceiverConfig{OnDone: func(_ multipath.TransferID, now vtime.Time, err error) {
		done, doneErr, doneAt = true, err, now
	}})
	if err != nil {
		return nil, err
	}
	id := multipath.TransferID(tr.ID)
	if err := rcv.Expect(int(tr.Slot), id, plan, units.Bytes(tr.Remote)); err != nil {
		return nil, err
	}
	clock := vtime.NewMonotonic()
	if err := r.AckTransfer(tctx, tr); err != nil {
		return nil, err
	}
	start := clock.Now()
	bar := newBar(p.progress, units.Bytes(tr.Size), "receiving")
	landed := func() int64 {
		var t int64
		for _, b := range cr.bytes {
			t += b
		}
		return min(t, int64(tr.Size))
	}
	err = runLocked(func() error {
		return mptx.Loop(ctx, mptx.LoopConfig{Clock: clock, Wake: r.Notify(), BusyPoll: p.busyPoll, Done: func() bool { return done }},
			&progress{inner: rcv, bar: bar, done: landed})
	})
	if bar != nil {
		_ = bar.Finish()
	}
	st := rcv.Stats()
	s := &RecvSummary{Name: offer.Name, From: r.RemoteAddr(), Bytes: int64(tr.Size), Chunks: plan.Count, Duplicates: st.Duplicates, Probes: st.Probes,
		Rejected: ln.Rejected(), Access: r.Access().String(), CRC: "off"}
	if done {
		d := doneAt.Sub(start)
		s.Seconds, s.Gbps = d.Seconds(), float64(tr.Size)*8/d.Seconds()/1e9
	}
	var total int64
	for _, b := range cr.bytes {
		total += b
	}
	for i, pi := range r.Paths() {
		ps := PathSummary{Path: i, Device: pi.Device, QPN: pi.QPN, SrcPort: pi.SrcPort, Bytes: cr.bytes[i], Chunks: cr.chunks[i]}
		if total > 0 {
			ps.Share = float64(cr.bytes[i]) / float64(total)
		}
		s.Paths = append(s.Paths, ps)
	}
	if err != nil {
		return s, fmt.Errorf("receive loop: %w", err)
	}
	receipt := &verbs.Receipt{ID: tr.ID, OK: doneErr == nil, Bytes: tr.Size}
	region := r.Region()[tr.Remote : tr.Remote+tr.Size]
	if doneErr == nil && tr.CRC {
		got := crc32c.Checksum(region)
		receipt.CRC32C = got
		s.CRC32C = fmt.Sprintf("%08x", got)
		if got == tr.CRC32C {
			s.CRC = "ok"
		} else {
			s.CRC = "mismatch"
			receipt.OK = false
			doneErr = fmt.Errorf("CRC-32C mismatch: got %08x, the sender announced %08x", got, tr.CRC32C)
		}
	}
	// The transfer is over: the sender's keys die before the receipt.
	if err := r.Revoke(); err != nil {
		return s, err
	}
	switch {
	case doneErr != nil:
		receipt.Message = doneErr.Error()
	case tr.CRC:
		receipt.Message = fmt.Sprintf("%d bytes in place, CRC-32C %08x ok", tr.Size, receipt.CRC32C)
	default:
		receipt.Message = fmt.Sprintf("%d bytes in place (no CRC)", tr.Size)
	}
	if err := r.SendReceipt(tctx, receipt); err != nil && doneErr == nil {
		doneErr = fmt.Errorf("sending the receipt: %w", err)
	}
	if doneErr != nil {
		return s, doneErr
	}
	if p.out != nil {
		file, err := p.out.write(offer.Name, region)
		if err != nil {
			return s, err
		}
		s.File = file
	}
	return s, nil
}

func nicNames(h *verbs.Host) []string {
	var out []string
	for _, n := range h.NICs() {
		out = append(out, fmt.Sprintf("%s:%d %v", n.Device.Name, n.Port.Num, n.GID.Addr))
	}
	return out
}

func printRecvSummary(w io.Writer, s *RecvSummary, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
		return
	}
	fmt.Fprintf(w, "received %s: %v in %d chunks, %.3f s, %.3f Gbit/s, CRC %s, %d duplicates, %d probes, %d rejected peers, access %s\n",
		s.Name, units.Bytes(s.Bytes), s.Chunks, s.Seconds, s.Gbps, s.CRC, s.Duplicates, s.Probes, s.Rejected, s.Access)
	if s.File != "" {
		fmt.Fprintf(w, "written to %s\n", s.File)
	}
	writePathTable(w, s.Paths, false)
}
