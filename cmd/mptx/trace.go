package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot/vg"

	"github.com/mptx-dev/mptx/telemetry/analyze"
)

func init() { addCommand(traceCmd()) }

func traceCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "trace",
		Short: "Analyse transfer traces (OTLP JSON from mptx, the OTel collector or Jaeger)",
		Long: `Analyse the spans mptx's telemetry exports: OTLP JSON lines as mptx's file
exporter and the OpenTelemetry collector's file exporter write them (one
ExportTraceServiceRequest per line), a single OTLP JSON document, or Jaeger
API v3 responses. Span and metric names are listed in docs/telemetry.md.`,
	}
	c.AddCommand(traceAnalyzeCmd(), traceTimelineCmd())
	return c
}

func traceAnalyzeCmd() *cobra.Command {
	var format string
	var opt analyze.Options
	c := &cobra.Command{
		Use:   "analyze FILE...",
		Short: "Where did the time go: per-transfer completion, critical chunk, per-path figures",
		Long: `For every transfer in the files: completion time; the critical chunk (the one
acknowledged last), its path, its attempts and why it was late; per-path
bytes, share, throughput, chunk latency p50/p99 and finish time; imbalance
(max/mean path finish time); the bottleneck path; requeues and stragglers.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(analyze.Formats, format) {
				return badInput("--format %q: valid: %s", format, strings.Join(analyze.Formats, ", "))
			}
			rep, err := loadReport(args, opt)
			if err != nil {
				return err
			}
			return analyze.Write(cmd.OutOrStdout(), rep, format)
		},
	}
	c.Flags().StringVar(&format, "format", "table", "output format: table, json or csv")
	c.Flags().Float64Var(&opt.StragglerFactor, "straggler-factor", 2, "an attempt slower than this multiple of its path's median chunk latency is a straggler (>= 1)")
	c.Flags().Float64Var(&opt.SlowFactor, "slow-factor", 0.75, "a path whose per-chunk rate is below this fraction of the median path's is the bottleneck (0 < f <= 1)")
	return c
}

func traceTimelineCmd() *cobra.Command {
	var out, transfer string
	var width, height float64
	c := &cobra.Command{
		Use:   "timeline FILE...",
		Short: "Draw a per-path Gantt chart of each transfer's chunk attempts (PNG and SVG)",
		Long: `Draw one chart per transfer: a row per path, a bar per chunk attempt,
coloured by outcome (acked, straggler, requeued, abandoned), the critical
chunk outlined. --out names the file; its extension (.png or .svg) picks the
format, and "-" followed by the transfer id is inserted before it when the
files hold several transfers.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ext := strings.TrimPrefix(filepath.Ext(out), ".")
			if !slices.Contains(analyze.TimelineFormats, ext) {
				return badInput("--out %q: want a file name ending in .png or .svg", out)
			}
			if width < 0 || height < 0 {
				return badInput("--width %v / --height %v: want inches >= 0 (0 means automatic)", width, height)
			}
			rep, err := loadReport(args, analyze.Options{})
			if err != nil {
				return err
			}
			ts := rep.Transfers
			if transfer != "" {
				id, err := strconv.ParseInt(transfer, 10, 64)
				if err != nil {
					return badInput("--transfer %q: want a transfer id (an integer)", transfer)
				}
				ts = slices.DeleteFunc(slices.Clone(ts), func(t *analyze.Transfer) bool { return t.ID != id })
				if len(ts) == 0 {
					return badInput("--transfer %d: no such transfer in the input", id)
				}
			}
			for _, t := range ts {
				name := out
				if len(ts) > 1 {
					name = strings.TrimSuffix(out, "."+ext) + "-" + strconv.FormatInt(t.ID, 10) + "." + ext
				}
				f, err := os.Create(name)
				if err != nil {
					return err
				}
				err = analyze.Timeline(f, t, ext, vg.Length(width)*vg.Inch, vg.Length(height)*vg.Inch)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), name)
			}
			return nil
		},
	}
	c.Flags().StringVarP(&out, "out", "o", "timeline.png", "output file (.png or .svg)")
	c.Flags().StringVar(&transfer, "transfer", "", "draw only this transfer id")
	c.Flags().Float64Var(&width, "width", 0, "width in inches (0: 10)")
	c.Flags().Float64Var(&height, "height", 0, "height in inches (0: 1 per path + 1)")
	return c
}

// loadReport reads and analyses files; unreadable or invalid input and
// bad options are bad input (exit status 2).
func loadReport(files []string, opt analyze.Options) (*analyze.Report, error) {
	td, err := analyze.ReadFiles(files...)
	if err != nil {
		return nil, badInput("%v", err)
	}
	rep, err := analyze.Analyze(td, opt)
	if err != nil {
		if errors.Is(err, analyze.ErrNoSpans) {
			return nil, badInput("%v (in %s)", err, strings.Join(files, ", "))
		}
		return nil, badInput("%v", err)
	}
	return rep, nil
}
