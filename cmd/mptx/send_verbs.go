package main

// The direct verbs path of `mptx send` (--transport verbs --direct): one
// tensor over qp/verbs' own bootstrap, Host and Conn, driven by
// mptx.Sender in mptx.Loop, without a session (--transport verbs alone is
// a session over verbs, like tcp). It is kept as the bare path to compare
// sessions with (test/rxe's perftest benchmarks) and for its per-device
// report.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/internal/crc32c"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/verbs"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// progress steps a driver and refreshes a progress bar at most every
// 100 ms from the loop's goroutine.
type progress struct {
	inner mptx.Stepper
	bar   *progressbar.ProgressBar
	done  func() int64
	last  vtime.Time
}

func (p *progress) Step(now vtime.Time) vtime.Time {
	next := p.inner.Step(now)
	if p.bar != nil && now.Sub(p.last) >= 100*time.Millisecond {
		p.last = now
		_ = p.bar.Set64(p.done())
	}
	return next
}

// PathSummary is one path's line of a send or recv summary.
type PathSummary struct {
	Path     int     `json:"path"`
	Device   string  `json:"device"`
	QPN      uint32  `json:"qpn"`
	SrcPort  uint16  `json:"udp_src_port"`
	Bytes    int64   `json:"bytes"`
	Share    float64 `json:"share"`
	Chunks   int     `json:"chunks"`
	Requeues int     `json:"requeues,omitempty"`
	State    string  `json:"state,omitempty"`
	Reason   string  `json:"reason,omitempty"`
	BaseRTT  string  `json:"base_rtt,omitempty"`
	SRTT     string  `json:"srtt,omitempty"`
	MinRTT   string  `json:"min_rtt,omitempty"`
	Probes   int     `json:"probes,omitempty"`
	Error    string  `json:"error,omitempty"` // the backend's account of why the path is down
}

// SendSummary is what `mptx send` reports.
type SendSummary struct {
	Name       string        `json:"name"`
	Bytes      int64         `json:"bytes"`
	Chunks     int           `json:"chunks"`
	ChunkSize  int64         `json:"chunk_size"`
	Seconds    float64       `json:"seconds"`
	Gbps       float64       `json:"gbps"`
	CRC32C     string        `json:"crc32c,omitempty"`
	Requeues   int           `json:"requeues"`
	Paths      []PathSummary `json:"paths"`
	ReceiverOK bool          `json:"receiver_ok"`
	Receipt    string        `json:"receipt"`
}

type verbsSendParams struct {
	to, file, name string
	size           units.Bytes
	seed           uint64
	secret         []byte
	devices        []string
	pool           units.Bytes
	qpsPerNIC      int
	qp             verbs.QPConfig
	crc            bool
	progress       bool
	busyPoll       time.Duration
	engine         multipath.Config
}

func runSendVerbs(ctx context.Context, p verbsSendParams) (*SendSummary, error) {
	h, err := verbs.OpenHost(verbs.HostConfig{Devices: p.devices, PoolSize: p.pool})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	buf, err := h.Alloc(p.size)
	if err != nil {
		return nil, err
	}
	defer buf.Free()
	if p.file != "" {
		f, err := os.Open(p.file)
		if err != nil {
			return nil, err
		}
		_, err = io.ReadFull(f, buf.Bytes())
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p.file, err)
		}
	} else {
		fillPattern(buf.Bytes(), p.seed)
	}
	var sum uint32
	if p.crc {
		sum = crc32c.Checksum(buf.Bytes())
	}
	clock := vtime.NewMonotonic()
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	conn, err := h.Dial(dctx, p.to, verbs.DialConfig{
		Secret: p.secret, Send: buf, Size: p.size, ChunkSize: p.engine.ChunkSize, CRC: p.crc, CRC32C: sum,
		Name: p.name, QPsPerNIC: p.qpsPerNIC, QP: p.qp, Clock: clock,
	})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var done bool
	var doneErr error
	var doneAt vtime.Time
	snd, err := mptx.NewSender(conn, mptx.SenderConfig{Engine: p.engine, OnDone: func(_ multipath.TransferID, now vtime.Time, err error) {
		done, doneErr, doneAt = true, err, now
	}})
	if err != nil {
		return nil, err
	}
	const id = 1
	start := clock.Now()
	slot, plan, err := snd.Submit(start, multipath.TransferSpec{ID: id, Size: p.size})
	if err != nil {
		return nil, err
	}
	if err := conn.Announce(dctx, &verbs.Transfer{ID: id, Slot: uint32(slot), Size: uint64(p.size), ChunkSize: uint64(plan.ChunkSize),
		Count: uint32(plan.Count), CRC: p.crc, CRC32C: sum}); err != nil {
		return nil, err
	}
	eng := snd.Engine()
	bar := newBar(p.progress, p.size, "sending")
	acked := func() int64 {
		var t int64
		for i := 0; i < eng.NumPaths(); i++ {
			t += int64(eng.Stats(i).Bytes)
		}
		return min(t, int64(p.size))
	}
	start = clock.Now()
	err = runLocked(func() error {
		return mptx.Loop(ctx, mptx.LoopConfig{Clock: clock, Wake: conn.Notify(), BusyPoll: p.busyPoll, Done: func() bool { return done }},
			&progress{inner: snd, bar: bar, done: acked})
	})
	if bar != nil {
		_ = bar.Finish()
	}
	s := &SendSummary{Name: p.name, Bytes: int64(p.size), Chunks: plan.Count, ChunkSize: int64(plan.ChunkSize)}
	if p.crc {
		s.CRC32C = fmt.Sprintf("%08x", sum)
	}
	if done && doneErr == nil {
		d := doneAt.Sub(start)
		s.Seconds = d.Seconds()
		s.Gbps = float64(p.size) * 8 / d.Seconds() / 1e9
	}
	infos := conn.Paths()
	var total int64
	for i := 0; i < eng.NumPaths(); i++ {
		total += int64(eng.Stats(i).Bytes)
	}
	for i := 0; i < eng.NumPaths(); i++ {
		st := eng.Stats(i)
		ps := PathSummary{Path: i, Device: infos[i].Device, QPN: infos[i].QPN, SrcPort: infos[i].SrcPort, Bytes: int64(st.Bytes),
			Chunks: st.Chunks, Requeues: st.Requeues, State: st.State.String(), Reason: st.Reason,
			BaseRTT: infos[i].BaseRTT.String(), SRTT: st.SRTT.String(), MinRTT: st.MinRTT.String(), Probes: st.Probes}
		if total > 0 {
			ps.Share = float64(st.Bytes) / float64(total)
		}
		if perr := conn.PathErr(i); perr != nil {
			ps.Error = perr.Error()
		}
		s.Requeues += st.Requeues
		s.Paths = append(s.Paths, ps)
	}
	if err != nil {
		return s, fmt.Errorf("send loop: %w", err)
	}
	if doneErr != nil {
		return s, fmt.Errorf("transfer failed: %w", doneErr)
	}
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Minute) // the receiver may be checking a large CRC
	defer rcancel()
	rc, err := conn.AwaitReceipt(rctx)
	if err != nil {
		return s, fmt.Errorf("waiting for the receiver's receipt: %w", err)
	}
	s.ReceiverOK = rc.OK
	s.Receipt = rc.Message
	if !rc.OK {
		return s, fmt.Errorf("the receiver rejected the transfer: %s", rc.Message)
	}
	return s, nil
}

func printSendSummary(w io.Writer, s *SendSummary, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
		return
	}
	fmt.Fprintf(w, "sent %s: %v in %d chunks of %v, %.3f s, %.3f Gbit/s, %d requeues; receiver: %s\n",
		s.Name, units.Bytes(s.Bytes), s.Chunks, units.Bytes(s.ChunkSize), s.Seconds, s.Gbps, s.Requeues, s.Receipt)
	writePathTable(w, s.Paths, true)
	for _, p := range s.Paths {
		if p.Error != "" {
			fmt.Fprintf(w, "path %d: %s\n", p.Path, p.Error)
		}
	}
}

func writePathTable(w io.Writer, paths []PathSummary, sender bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if sender {
		fmt.Fprintln(tw, "path\tdevice\tqpn\tudp sport\tbytes\tshare\tchunks\trequeues\tstate\tbase rtt\tsrtt\tmin rtt\t")
	} else {
		fmt.Fprintln(tw, "path\tdevice\tqpn\tudp sport\tbytes\tshare\tchunks\t")
	}
	for _, p := range paths {
		if sender {
			state := p.State
			if p.Reason != "" {
				state += " (" + p.Reason + ")"
			}
			fmt.Fprintf(tw, "%d\t%s\t%#x\t%d\t%v\t%.1f%%\t%d\t%d\t%s\t%s\t%s\t%s\t\n", p.Path, p.Device, p.QPN, p.SrcPort,
				units.Bytes(p.Bytes), 100*p.Share, p.Chunks, p.Requeues, state, p.BaseRTT, p.SRTT, p.MinRTT)
		} else {
			fmt.Fprintf(tw, "%d\t%s\t%#x\t%d\t%v\t%.1f%%\t%d\t\n", p.Path, p.Device, p.QPN, p.SrcPort, units.Bytes(p.Bytes), 100*p.Share, p.Chunks)
		}
	}
	_ = tw.Flush()
}
