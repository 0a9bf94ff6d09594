package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptx-dev/mptx/telemetry/analyze"
)

func init() { addCommand(traceCmd()) }

func traceCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "trace",
		Short: "Analyse transfer traces (OTLP JSON from mptx, the OTel collector or Jaeger)",
		Long: `Analyse the spans mptx's telemetry exports: OTLP JSON lines as mptx's file
exporter and the OpenTelemetry collector's file exporter write them (one
export request per line, traces and metrics), a single OTLP JSON document,
Jaeger API v3 responses, or a running Jaeger's query API. Span and metric
names are listed in docs/telemetry.md.`,
	}
	c.AddCommand(traceAnalyzeCmd(), traceTimelineCmd())
	return c
}

// selection is the input and filter flags shared by analyze and timeline.
type selection struct {
	jaeger, service, operation string
	since, until               string
	lookback                   time.Duration
	jaegerLimit                int
	outcomes                   []string
	minDur, maxDur             time.Duration
	peer, name                 string
	transfers                  []int64
}

func (s *selection) register(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&s.jaeger, "jaeger", "", "query a running Jaeger (its query service's URL, http://host:16686) instead of, or besides, files")
	f.StringVar(&s.service, "service", "", "select transfers of this service (shell pattern; either end's service.name); with --jaeger, the service to query (required)")
	f.StringVar(&s.operation, "operation", "", "with --jaeger: only traces with a span of this name")
	f.StringVar(&s.since, "since", "", "select transfers started at or after this time: RFC 3339 (2026-03-01T12:00:00Z) or a duration ago (90m)")
	f.StringVar(&s.until, "until", "", "select transfers started before this time (RFC 3339 or a duration ago)")
	f.DurationVar(&s.lookback, "lookback", time.Hour, "with --jaeger and no --since: how far back to query")
	f.IntVar(&s.jaegerLimit, "jaeger-limit", 1000, "with --jaeger: the most traces to fetch (1..1000000)")
	f.StringSliceVar(&s.outcomes, "outcome", nil, "select transfers with this outcome at either end: "+strings.Join(analyze.FilterOutcomes, ", ")+" (repeat or comma-separate)")
	f.DurationVar(&s.minDur, "min-duration", 0, "select transfers whose completion took at least this long")
	f.DurationVar(&s.maxDur, "max-duration", 0, "select transfers whose completion took at most this long (0: no bound)")
	f.StringVar(&s.peer, "peer", "", "select transfers with this peer address (shell pattern; either end's network.peer.address)")
	f.StringVar(&s.name, "name", "", "select transfers with this name (shell pattern on mptx.transfer.name, the application's label)")
	f.Int64SliceVar(&s.transfers, "transfer", nil, "select these transfer ids (repeat or comma-separate)")
}

// parseWhen reads an RFC 3339 time or a duration before now.
func parseWhen(flag, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want an RFC 3339 time (2026-03-01T12:00:00Z) or a non-negative duration ago (90m)", flag, v)
}

// sources returns the files' and Jaeger's sources and the filter.
func (s *selection) sources(args []string) ([]analyze.Source, analyze.Filter, error) {
	now := time.Now()
	since, err := parseWhen("since", s.since, now)
	if err != nil {
		return nil, analyze.Filter{}, usageError{err}
	}
	until, err := parseWhen("until", s.until, now)
	if err != nil {
		return nil, analyze.Filter{}, usageError{err}
	}
	f := analyze.Filter{Outcomes: s.outcomes, MinDuration: s.minDur, MaxDuration: s.maxDur, Peer: s.peer, Name: s.name,
		Service: s.service, Since: since, Until: until, IDs: s.transfers}
	if err := f.Validate(); err != nil {
		return nil, f, usageError{err}
	}
	if len(args) == 0 && s.jaeger == "" {
		return nil, f, badInput("no input: give trace files, directories or - (standard input), or --jaeger URL")
	}
	srcs, err := analyze.FileSources(args...)
	if err != nil {
		return nil, f, usageError{err}
	}
	if s.jaeger != "" {
		if s.lookback <= 0 {
			return nil, f, badInput("--lookback %v: want a positive duration", s.lookback)
		}
		q := analyze.JaegerQuery{URL: s.jaeger, Service: s.service, Operation: s.operation, Since: since, Until: until, Limit: s.jaegerLimit}
		if q.Since.IsZero() {
			q.Since = now.Add(-s.lookback)
		}
		if q.Until.IsZero() {
			q.Until = now.Add(time.Minute)
		}
		src, err := analyze.JaegerSource(q)
		if err != nil {
			return nil, f, usageError{err}
		}
		srcs = append(srcs, src)
	}
	return srcs, f, nil
}

// scan runs analyze.Scan; unreadable or invalid input is bad input (exit
// status 2).
func scan(ctx context.Context, srcs []analyze.Source, cfg analyze.ScanConfig) (*analyze.Summary, error) {
	sum, err := analyze.Scan(ctx, srcs, cfg)
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			return nil, err
		}
		return nil, usageError{err}
	}
	return sum, nil
}

// traceFormats are analyze's output formats.
var traceFormats = []string{"table", "json", "csv", "paths-csv"}

func traceAnalyzeCmd() *cobra.Command {
	var (
		sel    selection
		format string
		detail int
		opt    analyze.Options
	)
	c := &cobra.Command{
		Use:   "analyze [FILE|DIR|-]...",
		Short: "Where did the time go: one transfer in detail, or thousands aggregated",
		Long: `analyze reads trace files (OTLP JSON lines, gzipped or not), directories of
them, standard input (-) and, with --jaeger, a running Jaeger's query API, then
selects transfers (--outcome, --min-duration/--max-duration, --peer, --name,
--service, --since/--until, --transfer) and reports:

  - findings: paths that are usually the bottleneck, receivers that stall,
    failures, requeues;
  - outcomes, completion (network) time and goodput percentiles;
  - per path and per device: chunk latency and rate percentiles, per-transfer
    throughput, requeues, path-down events, ECN/CNP/PFC, how often it was the
    bottleneck or carried the critical chunk;
  - receivers (their spans joined by trace): lag after the last chunk
    arrived, completion-queue waits, hand-off times, receiver-bound transfers;
  - failed transfers with their reasons; what the metric lines say.

When the selection holds at most --detail transfers, each is also explained
in detail: completion, critical chunk and why it was late, per-path figures,
imbalance, stragglers and the receiver's view.

Exit status: 0; 1 when a selected transfer failed (or was abandoned) at
either end; 2 for bad input.`,
		Example: `  mptx trace analyze mptx-otlp.jsonl
  mptx trace analyze traces/ --outcome failed
  mptx trace analyze traces/ --since 2h --peer '10.0.1.*' --min-duration 5ms --format json
  mptx trace analyze --jaeger http://jaeger:16686 --service mptx-send --lookback 1h`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(traceFormats, format) {
				return badInput("--format %q: valid: %s", format, strings.Join(traceFormats, ", "))
			}
			if detail < 0 || detail > analyze.MaxHTMLTransfers*100 {
				return badInput("--detail %d: valid 0..%d", detail, analyze.MaxHTMLTransfers*100)
			}
			srcs, f, err := sel.sources(args)
			if err != nil {
				return err
			}
			sum, err := scan(cmd.Context(), srcs, analyze.ScanConfig{Options: opt, Filter: f, Detail: detail})
			if err != nil {
				return err
			}
			if err := writeAnalysis(cmd.OutOrStdout(), sum, format, detail); err != nil {
				return err
			}
			if sum.Failed > 0 {
				return fmt.Errorf("%d of %d selected transfers failed or were abandoned (listed in the report)", sum.Failed, sum.Selected)
			}
			return nil
		},
	}
	f := c.Flags()
	sel.register(c)
	f.StringVar(&format, "format", "table", "output: table, json (the whole summary), csv (one row per transfer and path, detailed transfers), paths-csv (one row per path, aggregated)")
	f.IntVar(&detail, "detail", 10, "explain each transfer in detail when the selection holds at most this many (json and csv: list them)")
	f.Float64Var(&opt.StragglerFactor, "straggler-factor", 2, "an attempt slower than this multiple of its path's median chunk latency is a straggler (>= 1)")
	f.Float64Var(&opt.SlowFactor, "slow-factor", 0.75, "a path whose per-chunk rate is below this fraction of the median path's is the bottleneck (0 < f <= 1)")
	f.Float64Var(&opt.StallFactor, "stall-factor", 0.5, "a transfer is receiver-bound when the receiver's lag after the last arrival exceeds this multiple of its network time (> 0)")
	return c
}

// writeAnalysis writes the summary in format.
func writeAnalysis(w io.Writer, sum *analyze.Summary, format string, detail int) error {
	rep := &analyze.Report{Transfers: sum.Transfers}
	switch format {
	case "json":
		return sum.WriteJSON(w)
	case "csv":
		return rep.WriteCSV(w)
	case "paths-csv":
		return sum.WriteCSV(w)
	}
	if sum.Selected > 0 && sum.Selected <= detail {
		if err := rep.WriteTable(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if err := sum.WriteTable(w); err != nil {
		return err
	}
	if sum.Selected > detail && detail > 0 {
		fmt.Fprintf(w, "\n(%d transfers selected: narrow the selection, or raise --detail, to see them one by one)\n", sum.Selected)
	}
	return nil
}

func traceTimelineCmd() *cobra.Command {
	var (
		sel           selection
		out           string
		html          bool
		width, height float64
		limit         int
	)
	c := &cobra.Command{
		Use:   "timeline [FILE|DIR|-]...",
		Short: "Draw each selected transfer's chunks per path: an interactive HTML page, or PNG/SVG",
		Long: `timeline draws the selected transfers (the same selection flags as analyze).

--html (or --out ending in .html) writes one self-contained page (no network)
with every selected transfer: a row per path, a bar per chunk attempt (hover
for its chunk, attempt, bytes, times and outcome; the critical chunk
outlined), path down/up and quarantine markers, requeue marks, CNP bursts and
PFC pauses, each path's start-up gap hatched, and the receiver's lag; the
mouse wheel zooms, dragging pans, a double click resets.

Otherwise --out's extension (.png or .svg) picks an image format for papers,
one file per transfer ("-ID" inserted before the extension when there are
several). Limits: images at most 100 inches a side and 2000 square inches
(18 Mpx at 96 dpi), 256 paths and 100,000 chunk attempts; pages at most 100
transfers of 4096 paths and 500,000 attempts each.`,
		Example: `  mptx trace timeline mptx-otlp.jsonl --html -o timeline.html
  mptx trace timeline traces/ --outcome failed --html -o failed.html
  mptx trace timeline mptx-otlp.jsonl --transfer 7 -o t7.svg`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ext := strings.TrimPrefix(filepath.Ext(out), ".")
			if html || ext == "html" {
				html = true
				if ext != "html" {
					return badInput("--out %q: want a file name ending in .html with --html", out)
				}
			} else if !slices.Contains(analyze.TimelineFormats, ext) {
				return badInput("--out %q: want a file name ending in .png, .svg or .html", out)
			}
			for _, d := range []struct {
				name string
				v    float64
			}{{"width", width}, {"height", height}} {
				if math.IsNaN(d.v) || math.IsInf(d.v, 0) || d.v < 0 || d.v > analyze.MaxImageSide {
					return badInput("--%s %v: want inches in (0, %g], or 0 for automatic", d.name, d.v, analyze.MaxImageSide)
				}
			}
			if limit < 1 || limit > analyze.MaxHTMLTransfers {
				return badInput("--limit %d: valid 1..%d", limit, analyze.MaxHTMLTransfers)
			}
			srcs, f, err := sel.sources(args)
			if err != nil {
				return err
			}
			sum, err := scan(cmd.Context(), srcs, analyze.ScanConfig{Filter: f, Detail: limit})
			if err != nil {
				return err
			}
			ts := sum.Transfers
			if len(ts) == 0 {
				return badInput("no transfer selected (of %d read)", sum.Selected+sum.Skipped)
			}
			if sum.Selected > len(ts) {
				fmt.Fprintf(cmd.ErrOrStderr(), "mptx: %d transfers selected; drawing the first %d (--limit)\n", sum.Selected, len(ts))
			}
			if html {
				return writeFile(out, func(w io.Writer) error { return analyze.TimelineHTML(w, ts) }, cmd.OutOrStdout())
			}
			for _, t := range ts {
				name := out
				if len(ts) > 1 {
					name = strings.TrimSuffix(out, "."+ext) + "-" + strconv.FormatInt(t.ID, 10) + "." + ext
				}
				err := writeFile(name, func(w io.Writer) error { return analyze.Timeline(w, t, ext, width, height) }, cmd.OutOrStdout())
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := c.Flags()
	sel.register(c)
	f.StringVarP(&out, "out", "o", "timeline.png", "output file (.html, .png or .svg)")
	f.BoolVar(&html, "html", false, "write an interactive HTML page (--out must end in .html)")
	f.Float64Var(&width, "width", 0, "image width in inches (0: 10; at most 100)")
	f.Float64Var(&height, "height", 0, "image height in inches (0: 1 per path + 1; at most 100)")
	f.IntVar(&limit, "limit", 20, "draw at most this many transfers (1..100)")
	return c
}

// writeFile creates name, writes it with write, and prints its name; a
// failed write removes it. Rendering limits are bad input.
func writeFile(name string, write func(io.Writer) error, stdout io.Writer) error {
	fh, err := os.Create(name)
	if err != nil {
		return err
	}
	err = write(fh)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
		return usageError{err}
	}
	fmt.Fprintln(stdout, name)
	return nil
}
