package experiments

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The shipped suites: one directory per suite under experiments/suites,
// holding its spec files and a README that says what it shows.
//
//go:embed suites/*/*.yaml suites/*/README.md
var suitesFS embed.FS

// DefaultSuite is what `mptx exp run` runs with no arguments.
const DefaultSuite = "default"

// SuiteNames lists the shipped suites, sorted.
func SuiteNames() []string {
	ents, err := fs.ReadDir(suitesFS, "suites")
	if err != nil {
		panic("experiments: BUG: no embedded suites: " + err.Error())
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// LoadSuite parses every spec of a shipped suite, in file-name order.
func LoadSuite(name string) ([]*Spec, error) {
	dir := path.Join("suites", name)
	files, err := fs.Glob(suitesFS, dir+"/*.yaml")
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no suite %q (shipped suites: %s)", name, strings.Join(SuiteNames(), ", "))
	}
	var specs []*Spec
	for _, f := range files {
		data, err := suitesFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		s, err := Parse(f, data, func(p string) ([]byte, error) { return suitesFS.ReadFile(filepath.ToSlash(p)) })
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// LoadSpecs resolves command-line arguments to specs: each argument is a
// spec file, a directory of *.yaml specs or the name of a shipped suite.
// No arguments means DefaultSuite. It also returns a name for the sweep
// (the suite, file or directory name when there is one argument).
func LoadSpecs(args []string) (string, []*Spec, error) {
	if len(args) == 0 {
		args = []string{DefaultSuite}
	}
	var specs []*Spec
	for _, a := range args {
		st, statErr := os.Stat(a)
		// A bare name that is both a shipped suite and a local file or
		// directory is ambiguous: say so rather than pick one silently.
		if statErr == nil && slices.Contains(SuiteNames(), a) && !strings.ContainsAny(a, `/\.`) {
			return "", nil, &SpecError{File: a, Msg: fmt.Sprintf("both a shipped suite and a local %s; write ./%s for the local one, or run from another directory for the suite", kindOf(st), a)}
		}
		switch {
		case statErr == nil && st.IsDir():
			files, _ := filepath.Glob(filepath.Join(a, "*.yaml"))
			if len(files) == 0 {
				return "", nil, fmt.Errorf("%s: no *.yaml specs in this directory", a)
			}
			for _, f := range files {
				s, err := ParseFile(f)
				if err != nil {
					return "", nil, err
				}
				specs = append(specs, s)
			}
		case statErr == nil:
			s, err := ParseFile(a)
			if err != nil {
				return "", nil, err
			}
			specs = append(specs, s)
		case slices.Contains(SuiteNames(), a):
			ss, err := LoadSuite(a)
			if err != nil {
				return "", nil, err
			}
			specs = append(specs, ss...)
		default:
			return "", nil, &SpecError{File: a, Msg: fmt.Sprintf("no such spec file, directory or shipped suite (suites: %s)", strings.Join(SuiteNames(), ", "))}
		}
	}
	seen := map[string]string{}
	for _, s := range specs {
		if prev, dup := seen[s.Name]; dup {
			return "", nil, &SpecError{File: s.File, Field: "name", Value: s.Name, Msg: "scenario name already used by " + prev + "; scenario names must be unique in a sweep"}
		}
		seen[s.Name] = s.File
	}
	name := "sweep"
	if len(args) == 1 {
		name = strings.TrimSuffix(filepath.Base(args[0]), filepath.Ext(args[0]))
	}
	return name, specs, nil
}

func kindOf(st os.FileInfo) string {
	if st.IsDir() {
		return "directory"
	}
	return "file"
}

// SweepOptions configures Sweep.
type SweepOptions struct {
	Out     string // results directory
	Workers int    // 0: all cores
	Shard   Shard
	Force   bool
	Plots   bool
	// Progress receives the progress bar; nil for none.
	Progress io.Writer
	// Run executes runs; nil means SimRun.
	Run RunFunc
}

// SweepReport is what Sweep did.
type SweepReport struct {
	Runs      int // runs in the whole sweep
	Report    *Report
	Summaries []ScenarioSummary // nil for a shard
}

// Sweep expands specs, executes this shard's runs (resuming from Out) and,
// unless sharded, writes the outputs of the whole sweep under Out. Runs
// are numbered across specs in the order given, so every shard must get
// the same specs.
func Sweep(ctx context.Context, specs []*Spec, o SweepOptions) (*SweepReport, error) {
	var runs []Run
	for _, s := range specs {
		runs = append(runs, Expand(s)...)
	}
	if o.Run == nil {
		o.Run = SimRun
	}
	if o.Out != "" {
		if err := SaveSpecs(o.Out, specs); err != nil {
			return nil, err
		}
	}
	r := &Runner{Run: o.Run, Workers: o.Workers, Dir: o.Out, Shard: o.Shard, Progress: o.Progress, Force: o.Force}
	rep, err := r.Execute(ctx, runs)
	sr := &SweepReport{Runs: len(runs), Report: rep}
	if err != nil {
		return sr, err
	}
	if len(rep.Failed) > 0 {
		return sr, fmt.Errorf("%d of %d runs failed; first: %w", len(rep.Failed), len(runs), rep.Failed[0])
	}
	if o.Shard.Count > 1 {
		return sr, nil
	}
	sr.Summaries, err = WriteOutputs(o.Out, rep.Results, o.Plots)
	return sr, err
}

// Merge reads the run results of every dir (the shards of a sweep), and
// writes the sweep's outputs under out.
func Merge(out string, dirs []string, plots bool) ([]ScenarioSummary, int, error) {
	rs, err := LoadResults(dirs...)
	if err != nil {
		return nil, 0, err
	}
	if len(rs) == 0 {
		return nil, 0, errors.New("no run results under " + strings.Join(dirs, ", ") + " (want DIR/runs/*.json)")
	}
	if err := os.MkdirAll(filepath.Join(out, "runs"), 0o755); err != nil {
		return nil, 0, err
	}
	for _, r := range rs {
		p := RunPath(out, r.Row.Hash) // a validated hash: 16 hex digits
		if _, err := os.Stat(p); err != nil {
			if err := SaveResult(p, r); err != nil {
				return nil, 0, err
			}
		}
	}
	// The shards' spec copies, for the report (valid names only).
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join(d, "specs", "*.yaml"))
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".yaml")
			dst := specPath(out, name)
			if !ValidName(name) || filepath.Clean(f) == filepath.Clean(dst) {
				continue
			}
			if data, err := readLimited(f, MaxSpecBytes); err == nil {
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					return nil, 0, err
				}
				if err := os.WriteFile(dst, data, 0o644); err != nil {
					return nil, 0, err
				}
			}
		}
	}
	sums, err := WriteOutputs(out, rs, plots)
	return sums, len(rs), err
}

// FormatWall formats a wall time for reports (1.2s, 3m04s).
func FormatWall(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
