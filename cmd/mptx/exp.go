package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptx-dev/mptx/experiments"
)

// exitError is an error with its own exit status: 130 for an interrupted
// sweep (128 + SIGINT, as shells report it), 3 for a sweep whose tensor
// flows did not all complete.
type exitError struct {
	err  error
	code int
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }
func (e exitError) ExitCode() int { return e.code }

// Exit statuses of mptx exp run besides 0, 1 (failure) and 2 (bad input).
const (
	exitIncomplete  = 3
	exitInterrupted = 130
)

// specError turns a spec problem, or a file that is not a run result,
// into bad input (exit status 2).
func specError(err error) error {
	var se *experiments.SpecError
	if errors.As(err, &se) || errors.Is(err, experiments.ErrNotResult) {
		return usageError{err}
	}
	return err
}

func expCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exp",
		Short: "Compare congestion-control policies on shared scenarios (run, list, merge, plot)",
		Long: `exp runs experiment specs: YAML files that describe a fabric, its switches and
NICs, the traffic, and a matrix of policies (congestion control, queue pairs per
connection, chunk size, pacing, path selection) to compare over several seeds.
Every run is simulated packet by packet with the real mptx engine; results are
one row per run (results.jsonl, results.csv), a Markdown comparison per scenario
and plots. The spec reference is docs/experiments.md.`,
	}
	cmd.AddCommand(expRunCmd(), expListCmd(), expMergeCmd(), expPlotCmd(), expReportCmd())
	return cmd
}

func init() { addCommand(expCmd()) }

// completeSuites offers shipped suite names and *.yaml files.
func completeSuites(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	var out []string
	for _, n := range experiments.SuiteNames() {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out, cobra.ShellCompDirectiveDefault
}

func expRunCmd() *cobra.Command {
	var (
		out, shard      string
		workers         int
		force, noPlots  bool
		quiet, dryRun   bool
		trace, traceRun string
	)
	cmd := &cobra.Command{
		Use:   "run [SPEC|DIR|SUITE...]",
		Short: "Run experiment specs or shipped suites and print the comparison tables",
		Long: `run expands every spec's policy matrix × seeds into runs and simulates them in
parallel on all cores, with a progress bar and ETA. Each finished run is saved
as OUT/runs/<hash>.json, where the hash covers everything that decides its
result, so an interrupted or extended sweep resumes where it stopped.

Arguments are spec files, directories of *.yaml specs, or shipped suite names
(mptx exp list). With no argument it runs the small default suite.

With --shard i/n only every n-th run (starting at i) is run and nothing is
summarised: run n shards (a Kubernetes Indexed Job, a Slurm array) into one
shared directory or several, then mptx exp merge.`,
		Example: `  mptx exp run
  mptx exp run incast ecmp-collision
  mptx exp run my-fabric.yaml --out results/my-fabric
  mptx exp run ecmp-collision --shard $JOB_COMPLETION_INDEX/8 --out /results/ecmp`,
		ValidArgsFunction: completeSuites,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, specs, err := experiments.LoadSpecs(args)
			if err != nil {
				return specError(err)
			}
			var sh experiments.Shard
			if shard != "" {
				if sh, err = experiments.ParseShard(shard); err != nil {
					return badInput("--shard: %v", err)
				}
			}
			if workers < 0 {
				return badInput("--workers %d: want 0 (all cores) or more", workers)
			}
			if out == "" {
				out = filepath.Join("results", name)
			}
			w := cmd.OutOrStdout()
			if dryRun {
				return printRuns(w, specs, sh)
			}
			var progress io.Writer = cmd.ErrOrStderr()
			if quiet {
				progress = nil
			}
			// Ctrl-C or a pod's SIGTERM: abandon the runs in progress and
			// stop; finished runs are already saved, so a rerun resumes.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if ctx, err = traceSweep(ctx, trace, traceRun, cmd.ErrOrStderr()); err != nil {
				return err
			}
			start := time.Now()
			nw := workers
			if nw == 0 {
				nw = runtime.NumCPU()
			}
			rep, err := experiments.Sweep(ctx, specs, experiments.SweepOptions{
				Out: out, Workers: workers, Shard: sh, Force: force, Plots: !noPlots, Progress: progress,
			})
			wall := time.Since(start)
			if rep != nil && rep.Report != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d runs (%d run now, %d reused) on %d workers in %s; results in %s\n",
					len(rep.Report.Results), rep.Report.Ran, rep.Report.Reused, nw, experiments.FormatWall(wall), out)
			}
			if err != nil {
				if errors.Is(err, context.Canceled) {
					return exitError{fmt.Errorf("interrupted; finished runs are saved in %s and the next run resumes from them", out), exitInterrupted}
				}
				return err
			}
			if sh.Count > 1 {
				fmt.Fprintf(w, "shard %s done: merge the shards with: mptx exp merge --out %s DIR...\n", sh, out)
				return incomplete(rep.Report.Results)
			}
			printSummaries(w, rep.Summaries, out)
			return incomplete(rep.Report.Results)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "out", "o", "", "results directory (default results/<suite or spec name>)")
	f.IntVarP(&workers, "workers", "j", 0, "parallel runs (0: one per core)")
	f.StringVar(&shard, "shard", "", "run only shard i of n (i/n, 0-based), for job arrays")
	f.BoolVar(&force, "force", false, "re-run runs that already have results")
	f.BoolVar(&noPlots, "no-plots", false, "skip the PNG/SVG plots")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress bar")
	f.BoolVar(&dryRun, "dry-run", false, "list the runs (and their hashes) without running them")
	f.StringVar(&trace, "trace", "", "trace the runs executed now into DIR, one OTLP JSON lines file per run (<scenario>-<hash>.otlp.jsonl; off by default; reused runs are not run: add --force)")
	f.StringVar(&traceRun, "trace-run", "", "with --trace: trace only the runs matching this shell pattern on scenario/label/seedN (incast/dcqcn-nopace/seed1: the policy's short label, dashes for spaces), or a hash (prefix)")
	return cmd
}

// incomplete reports tensor flows that did not complete (exit status 3):
// how many, in how many runs, and the first failure's reason.
func incomplete(results []*experiments.Result) error {
	flows, runs, failed := 0, 0, 0
	first := ""
	for _, r := range results {
		if n := r.Row.Flows - r.Row.Completed; n > 0 {
			flows += n
			runs++
			for _, f := range r.Flows {
				if f.Err != "" {
					failed++
					if first == "" {
						first = fmt.Sprintf("; first failure: %s %s seed %d flow %d: %s", r.Row.Scenario, r.Row.Policy, r.Row.Seed, f.ID, f.Err)
					}
				}
			}
		}
	}
	if flows == 0 {
		return nil
	}
	return exitError{fmt.Errorf("%d tensor flows in %d run(s) did not complete (%d failed, %d unfinished at stop.time)%s", flows, runs, failed, flows-failed, first), exitIncomplete}
}

// printRuns lists the runs a sweep would make.
func printRuns(w io.Writer, specs []*experiments.Spec, sh experiments.Shard) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tscenario\thash\tseed\tpolicy")
	k, mine := 0, 0
	for _, s := range specs {
		for _, r := range experiments.Expand(s) {
			if sh.Has(k) {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", k, s.Name, r.Hash, r.Seed, r.Policy.Key())
				mine++
			}
			k++
		}
	}
	fmt.Fprintf(tw, "\n%d of %d runs\n", mine, k)
	return tw.Flush()
}

// printSummaries prints each scenario's comparison table.
func printSummaries(w io.Writer, sums []experiments.ScenarioSummary, out string) {
	for i := range sums {
		s := &sums[i]
		fmt.Fprintf(w, "\n## %s\n", s.Scenario)
		if s.Description != "" {
			fmt.Fprintf(w, "%s\n", strings.TrimSpace(s.Description))
		}
		fmt.Fprintln(w)
		s.Table(w)
		fmt.Fprintln(w)
		for _, line := range s.VerdictLines() {
			fmt.Fprintln(w, strings.ReplaceAll(line, "**", ""))
		}
		fmt.Fprintf(w, "Summary and plots: %s\n", filepath.Join(out, s.Scenario, "summary.md"))
	}
	if len(sums) > 0 {
		fmt.Fprintf(w, "\nReport: %s\n", filepath.Join(out, experiments.ReportFile))
	}
}

func expListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the shipped suites and their scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "suite\tscenario\truns\twhat it shows")
			for _, name := range experiments.SuiteNames() {
				specs, err := experiments.LoadSuite(name)
				if err != nil {
					return err
				}
				for _, s := range specs {
					desc := strings.TrimSpace(s.Description)
					if i := strings.IndexAny(desc, "\n"); i >= 0 {
						desc = desc[:i]
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", name, s.Name, len(experiments.Expand(s)), desc)
				}
			}
			return tw.Flush()
		},
	}
}

func expMergeCmd() *cobra.Command {
	var out string
	var noPlots bool
	cmd := &cobra.Command{
		Use:   "merge DIR...",
		Short: "Merge the results of sharded runs and write tables and plots",
		Long: `merge reads DIR/runs/*.json from every DIR (the output directories of the
shards of a sweep, or one shared directory), keeps one result per run hash,
copies them into --out and writes results.jsonl, results.csv, each scenario's
summary.md and its plots there.`,
		Example: `  mptx exp merge --out results/ecmp shard-0 shard-1 shard-2 shard-3`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			for _, d := range dirs {
				if st, err := os.Stat(d); err != nil || !st.IsDir() {
					return badInput("%s: not a results directory", d)
				}
			}
			if out == "" {
				out = dirs[0]
			}
			sums, n, err := experiments.Merge(out, dirs, !noPlots)
			if err != nil {
				return specError(err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "merged %d runs into %s\n", n, out)
			printSummaries(cmd.OutOrStdout(), sums, out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "output directory (default the first DIR)")
	cmd.Flags().BoolVar(&noPlots, "no-plots", false, "skip the PNG/SVG plots")
	return cmd
}

func expPlotCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "plot DIR",
		Short: "Redraw a results directory's tables and plots from its saved runs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if st, err := os.Stat(args[0]); err != nil || !st.IsDir() {
				return badInput("%s: not a results directory", args[0])
			}
			sums, n, err := experiments.Merge(args[0], args, true)
			if err != nil {
				return specError(err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "redrew %d runs in %s\n", n, args[0])
			printSummaries(cmd.OutOrStdout(), sums, args[0])
			return nil
		},
	}
}

func expReportCmd() *cobra.Command {
	var noPlots bool
	cmd := &cobra.Command{
		Use:   "report DIR",
		Short: "Write DIR/report.html: every result of a results directory on one page",
		Long: `report reads DIR/runs/*.json and writes DIR/report.html, one self-contained
page (no network access: inline CSS, JavaScript and SVG) that opens from disk in
any browser, with per scenario the verdicts, the figures, a sortable table with
means and 95% intervals over seeds, every run's row and the spec. It rewrites
the tables and figures too (as exp plot does). exp run writes the report after
every sweep.`,
		Example: `  mptx exp report results/sweep && xdg-open results/sweep/report.html`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if st, err := os.Stat(args[0]); err != nil || !st.IsDir() {
				return badInput("%s: not a results directory", args[0])
			}
			_, n, err := experiments.Merge(args[0], args, !noPlots)
			if err != nil {
				return specError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report of %d runs: %s\n", n, filepath.Join(args[0], experiments.ReportFile))
			return nil
		},
	}
	cmd.Flags().BoolVar(&noPlots, "no-plots", false, "leave the figures out")
	return cmd
}
