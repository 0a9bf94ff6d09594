package analyze

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mptx-dev/mptx/units"
)

// WriteJSON writes s as indented JSON; durations are integer nanoseconds
// (fields ending in _ns), rates bits per second (_bps).
func (s *Summary) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// summaryCSVHeader is WriteCSV's header: one row per (service, path).
var summaryCSVHeader = []string{
	"service", "path", "device", "nic", "transfers", "chunks", "bytes",
	"latency_p50_ns", "latency_p90_ns", "latency_p99_ns", "latency_max_ns",
	"chunk_rate_p10_bps", "chunk_rate_p50_bps", "throughput_p10_bps", "throughput_p50_bps",
	"requeues", "down_events", "ecn_marked_chunks", "cnps", "pfc_pause_ns", "bottleneck", "critical",
}

// WriteCSV writes the per-path aggregates, one row per (service, path).
func (s *Summary) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(summaryCSVHeader); err != nil {
		return err
	}
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, p := range s.Paths {
		row := []string{p.Service, strconv.Itoa(p.Path), p.Device, p.NIC, strconv.Itoa(p.Transfers), i64(p.Chunks), i64(int64(p.Bytes)),
			i64(int64(p.Latency.P50)), i64(int64(p.Latency.P90)), i64(int64(p.Latency.P99)), i64(int64(p.Latency.Max)),
			i64(int64(p.ChunkRate.P10)), i64(int64(p.ChunkRate.P50)), i64(int64(p.Throughput.P10)), i64(int64(p.Throughput.P50)),
			i64(p.Requeues), i64(p.Down), i64(p.ECNChunks), i64(p.CNPs), i64(int64(p.PFCPause)), strconv.Itoa(p.Bottleneck), strconv.Itoa(p.Critical)}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteTable writes the summary for people: the input, the findings, the
// outcomes and completion times, per-path and per-device figures, the
// receivers, failed transfers and what the metrics say.
func (s *Summary) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	in := s.Input
	ew.printf("input: %d sources, %d lines (%s), %d spans (%d mptx), %d metric lines", in.Sources, in.Lines, FormatBytes(unitsBytes(in.Bytes)), in.Spans, in.MptxSpans, in.MetricLines)
	if in.Duplicates > 0 {
		ew.printf(", %d duplicate spans dropped", in.Duplicates)
	}
	ew.printf("\n")
	ew.printf("selected %d transfers", s.Selected)
	if s.Skipped > 0 {
		ew.printf(" (%d more filtered out)", s.Skipped)
	}
	if s.Selected > 0 {
		ew.printf(", started %s … %s", s.First.Format(time.RFC3339Nano), s.Last.Format(time.RFC3339Nano))
	}
	ew.printf("\n")
	for _, x := range s.Warnings {
		ew.printf("warning: %s\n", x)
	}
	if len(s.Findings) > 0 {
		ew.printf("\nfindings:\n")
		for _, f := range s.Findings {
			ew.printf("  - %s\n", f)
		}
	}
	if s.Selected == 0 {
		return ew.err
	}
	var outs []string
	for o, n := range s.Outcomes {
		outs = append(outs, fmt.Sprintf("%s %d", o, n))
	}
	slices.Sort(outs)
	ew.printf("\noutcomes: %s; failed at either end: %d\n", strings.Join(outs, ", "), s.Failed)
	c := s.Completion
	if c.N > 0 {
		ew.printf("completion (network time, done): p50 %v  p90 %v  p99 %v  max %v over %d transfers, %s\n",
			round(c.P50), round(c.P90), round(c.P99), round(c.Max), c.N, FormatBytes(unitsBytes(s.Bytes)))
		ew.printf("goodput: p50 %s  p10 %s  p1 %s\n", FormatRate(s.Goodput.P50), FormatRate(s.Goodput.P10), FormatRate(s.Goodput.P1))
	}
	ew.printf("requeues: %d of %d chunk attempts (%.3f%%)  path-down events: %d (%.3f per transfer)  quarantines: %d\n",
		s.Requeues, s.Attempts, 100*s.RequeueRate, s.Down, s.DownRate, s.Quarantines)
	if len(s.RequeueReasons) > 0 {
		var rs []string
		for r, n := range s.RequeueReasons {
			rs = append(rs, fmt.Sprintf("%s ×%d", r, n))
		}
		slices.Sort(rs)
		ew.printf("requeue reasons: %s\n", strings.Join(rs, ", "))
	}

	ew.printf("\nper path (latency of acknowledged chunk attempts; throughput per transfer):\n")
	tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  service\tpath\tdevice\ttransfers\tchunks\tbytes\tp50\tp99\tmax\tchunk rate p50\tthroughput p10\tp50\trequeues\tdown\tecn\tcnp\tpfc\tbottleneck\tcritical\t\n")
	for _, p := range s.Paths {
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\t%d\t%s\t%v\t%v\t%v\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%v\t%d\t%d\t\n",
			p.Service, p.Path, p.Device, p.Transfers, p.Chunks, FormatBytes(p.Bytes), round(p.Latency.P50), round(p.Latency.P99), round(p.Latency.Max),
			FormatRate(p.ChunkRate.P50), FormatRate(p.Throughput.P10), FormatRate(p.Throughput.P50), p.Requeues, p.Down, p.ECNChunks, p.CNPs, round(p.PFCPause), p.Bottleneck, p.Critical)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ew.printf("\nper device:\n")
	tw = tabwriter.NewWriter(ew, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  service\tdevice\tpaths\tchunks\tbytes\tp50\tp99\tchunk rate p50\tp10\trequeues\tdown\tbottleneck\t\n")
	for _, n := range s.NICs {
		ps := make([]string, len(n.Paths))
		for i, p := range n.Paths {
			ps[i] = strconv.Itoa(p)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%v\t%v\t%s\t%s\t%d\t%d\t%d\t\n", n.Service, n.Device, strings.Join(ps, ","), n.Chunks, FormatBytes(n.Bytes),
			round(n.Latency.P50), round(n.Latency.P99), FormatRate(n.ChunkRate.P50), FormatRate(n.ChunkRate.P10), n.Requeues, n.Down, n.Bottleneck)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.Bottlenecks) > 0 {
		ew.printf("\nbottleneck frequency (transfers with >= 2 paths carrying chunks):\n")
		for i, b := range s.Bottlenecks {
			if i == 10 {
				ew.printf("  … %d more\n", len(s.Bottlenecks)-i)
				break
			}
			ew.printf("  %s: %d (%.1f%%)\n", pathName(b.Service, b.Path, b.Device, ""), b.Count, 100*b.Share)
		}
	}
	if r := s.Receiver; r != nil {
		ew.printf("\nreceivers: %d transfers with receiver spans; lag after the last arrival p50 %v p99 %v max %v; longest completion-queue wait p99 %v; hand-off p99 per transfer: p50 %v p99 %v; duplicates %d, rejected %d; receiver-bound %d\n",
			r.Transfers, round(r.Lag.P50), round(r.Lag.P99), round(r.Lag.Max), round(r.QueueMax.P99), round(r.HandoffP99.P50), round(r.HandoffP99.P99), r.Duplicates, r.Rejected, r.Bound)
		for _, g := range s.Stalls {
			ew.printf("  stalled: %s: %d of %d transfers, lag p50 %v vs network p50 %v; %s; e.g. trace %s\n",
				g.Receiver, g.Count, g.Of, round(g.Lag.P50), round(g.Network.P50), g.Cause, strings.Join(g.Examples[:min(2, len(g.Examples))], ", "))
		}
	}
	if len(s.FailedTransfers) > 0 {
		ew.printf("\nfailed transfers (%d):\n", s.Failed)
		for _, f := range s.FailedTransfers {
			name := ""
			if f.Name != "" {
				name = " " + f.Name
			}
			ew.printf("  %s transfer %d%s  trace %s  %s (%s side) to %s: %s\n", f.Start.Format(time.RFC3339Nano), f.ID, name, f.TraceID, f.Outcome, f.Side, f.Peer, f.Error)
		}
		if s.Failed > len(s.FailedTransfers) {
			ew.printf("  … %d more (see --format json, or --outcome failed)\n", s.Failed-len(s.FailedTransfers))
		}
	}
	if m := s.Metrics; m != nil {
		ew.printf("\nmetrics (%d lines, %d series):", m.Lines, m.Series)
		if m.TransferDuration.N > 0 {
			ew.printf(" transfer duration p50 %v p99 %v over %d", round(m.TransferDuration.P50), round(m.TransferDuration.P99), m.TransferDuration.N)
		}
		if m.RecvLag.N > 0 {
			ew.printf("; receiver lag p50 %v p99 %v", round(m.RecvLag.P50), round(m.RecvLag.P99))
		}
		ew.printf("\n")
		tw = tabwriter.NewWriter(ew, 2, 8, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  service\tpath\tdevice\tsent\tacked\tlatency p50\tp99\trtt p50\trequeues\tdown\tcnp\tpfc\trecv chunks\tqueue p99\thand-off p99\t\n")
		for _, p := range m.Paths {
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%v\t%v\t%v\t%d\t%d\t%d\t%d\t%d\t%v\t%v\t\n", p.Service, p.Path, p.Device,
				FormatBytes(unitsBytes(p.BytesSent)), FormatBytes(unitsBytes(p.BytesAcked)), round(p.ChunkLatency.P50), round(p.ChunkLatency.P99), round(p.RTT.P50),
				p.Requeues, p.Down, p.CNPs, p.PFCPauses, p.RecvChunks, round(p.RecvQueue.P99), round(p.RecvHandoff.P99))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return ew.err
}

func unitsBytes(n int64) units.Bytes { return units.Bytes(n) }
