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
)

// Formats lists the names Write accepts.
var Formats = []string{"table", "json", "csv"}

// Write formats rep as format (table, json or csv).
func Write(w io.Writer, rep *Report, format string) error {
	switch format {
	case "table", "":
		return rep.WriteTable(w)
	case "json":
		return rep.WriteJSON(w)
	case "csv":
		return rep.WriteCSV(w)
	}
	return fmt.Errorf("analyze: format %q: valid: %s", format, strings.Join(Formats, ", "))
}

// WriteJSON writes rep as indented JSON; durations are integer
// nanoseconds (fields ending in _ns), rates bits per second (_bps).
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// csvHeader is WriteCSV's header: one row per (transfer, path).
var csvHeader = []string{
	"trace_id", "transfer_id", "outcome", "bytes", "completion_ns", "goodput_bps", "imbalance",
	"requeues", "stragglers", "critical_chunk", "critical_path", "critical_attempts", "bottleneck_path",
	"path", "device", "qpn", "path_bytes", "share", "chunks", "throughput_bps",
	"chunk_rate_p50_bps", "latency_p50_ns", "latency_p99_ns", "finish_ns", "path_requeues", "path_stragglers",
	"ecn_marked_chunks", "down_events", "cnps", "pfc_pause_ns",
}

// WriteCSV writes one row per (transfer, path), transfer figures repeated.
func (rep *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, t := range rep.Transfers {
		cc, cp, ca := "", "", ""
		if t.Critical != nil {
			cc, cp, ca = i64(t.Critical.Chunk), strconv.Itoa(t.Critical.Path), strconv.Itoa(t.Critical.Attempts)
		}
		bn := ""
		if t.Bottleneck != nil {
			bn = strconv.Itoa(*t.Bottleneck)
		}
		for _, p := range t.PerPath {
			row := []string{
				t.TraceID, i64(t.ID), t.Outcome, i64(int64(t.Bytes)), i64(int64(t.Completion)), i64(int64(t.Goodput)), f(t.Imbalance),
				strconv.Itoa(t.Requeues), strconv.Itoa(len(t.Stragglers)), cc, cp, ca, bn,
				strconv.Itoa(p.Path), p.Device, i64(p.QPN), i64(int64(p.Bytes)), f(p.Share), strconv.Itoa(p.Chunks), i64(int64(p.Throughput)),
				i64(int64(p.ChunkRate)), i64(int64(p.P50)), i64(int64(p.P99)), i64(int64(p.Finish)), strconv.Itoa(p.Requeues), strconv.Itoa(p.Stragglers),
				strconv.Itoa(p.ECNChunks), strconv.Itoa(p.Down), i64(p.CNPs), i64(int64(p.PFCPause)),
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// maxStragglersShown bounds the straggler list in the table.
const maxStragglersShown = 5

// WriteTable writes a human-readable report.
func (rep *Report) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	for i, t := range rep.Transfers {
		if i > 0 {
			ew.printf("\n")
		}
		ew.printf("transfer %d", t.ID)
		if t.Name != "" {
			ew.printf(" %q", t.Name)
		}
		ew.printf("  trace %s  %s", t.TraceID, t.Outcome)
		if t.Error != "" {
			ew.printf(" (%s)", t.Error)
		}
		ew.printf("\n")
		ew.printf("  %s in %v", FormatBytes(t.Bytes), round(t.Completion))
		if t.Goodput > 0 {
			ew.printf(" (%s)", FormatRate(t.Goodput))
		}
		ew.printf(", %d chunks of %s over %d paths", t.Chunks, FormatBytes(t.ChunkSize), t.Paths)
		var meta []string
		for _, kv := range [][2]string{{"cc", t.CC}, {"backend", t.Backend}, {"peer", t.Peer}, {"service", t.Service}} {
			if kv[1] != "" {
				meta = append(meta, kv[0]+"="+kv[1])
			}
		}
		if len(meta) > 0 {
			ew.printf(", %s", strings.Join(meta, " "))
		}
		ew.printf("\n")
		if c := t.Critical; c != nil {
			dev := ""
			if c.Device != "" {
				dev = " (" + c.Device + ")"
			}
			ew.printf("  critical: chunk %d on path %d%s, attempt %d, started +%v, acked +%v (latency %v)\n",
				c.Chunk, c.Path, dev, c.Attempts, round(c.Start), round(c.Finish), round(c.Latency))
			for _, y := range c.Why {
				ew.printf("    why: %s\n", y)
			}
		}
		if r := t.Receiver; r != nil {
			svc := ""
			if r.Service != "" {
				svc = " (" + r.Service + ")"
			}
			ew.printf("  receiver%s: %s, %d chunks, last arrival +%v, lag %v after it (network time %v); completion-queue wait p50 %v p99 %v max %v; hand-off p50 %v p99 %v, %v in all",
				svc, r.Outcome, r.Chunks, round(r.LastArrival), round(r.Lag), round(t.Completion), round(r.QueueP50), round(r.QueueP99), round(r.QueueMax),
				round(r.HandoffP50), round(r.HandoffP99), round(r.HandoffTotal))
			if r.Duplicates > 0 || r.Rejected > 0 {
				ew.printf("; duplicates %d, rejected %d", r.Duplicates, r.Rejected)
			}
			if r.Error != "" {
				ew.printf("; error: %s", r.Error)
			}
			ew.printf("\n")
			if t.ReceiverBound != "" {
				ew.printf("    receiver-bound: %s\n", t.ReceiverBound)
			}
		}
		ew.printf("  imbalance %.3f (max/mean path finish)  requeues %d  stragglers %d (latency > %g× its path's median)  median chunk latency %v",
			t.Imbalance, t.Requeues, len(t.Stragglers), t.StragglerFactor, round(t.MedianLatency))
		if t.Bottleneck != nil {
			ew.printf("  bottleneck: path %d", *t.Bottleneck)
		}
		ew.printf("\n")
		if len(t.RequeueReasons) > 0 {
			reasons := make([]string, 0, len(t.RequeueReasons))
			for r, n := range t.RequeueReasons {
				reasons = append(reasons, fmt.Sprintf("%s ×%d", r, n))
			}
			slices.Sort(reasons)
			ew.printf("  requeue reasons: %s\n", strings.Join(reasons, ", "))
		}
		tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  path\tdevice\tqpn\tbytes\tshare\tchunks\tthroughput\tchunk rate\tp50\tp99\tfinish\trequeues\tstragglers\tecn\tdown\tcnp\tpfc\t\n")
		for _, p := range t.PerPath {
			qpn := ""
			if p.QPN != 0 {
				qpn = "0x" + strconv.FormatInt(p.QPN, 16)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%.1f%%\t%d\t%s\t%s\t%v\t%v\t%v\t%d\t%d\t%d\t%d\t%d\t%v\t\n",
				p.Path, p.Device, qpn, FormatBytes(p.Bytes), 100*p.Share, p.Chunks, FormatRate(p.Throughput), FormatRate(p.ChunkRate),
				round(p.P50), round(p.P99), round(p.Finish), p.Requeues, p.Stragglers, p.ECNChunks, p.Down, p.CNPs, round(p.PFCPause))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for i, s := range t.Stragglers {
			if i == maxStragglersShown {
				ew.printf("  … %d more stragglers (see --format json)\n", len(t.Stragglers)-i)
				break
			}
			ew.printf("  straggler: chunk %d on path %d attempt %d, latency %v (%.1f× its path's median)\n", s.Chunk, s.Path, s.Attempt, round(s.Latency), s.Factor)
		}
	}
	return ew.err
}

// round trims a duration for display (4 significant digits).
func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= 10*time.Microsecond:
		return d.Round(10 * time.Nanosecond)
	}
	return d
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }
