package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// RunFunc executes one run. It is called from several goroutines at once
// (one per worker), each with its own Run; it must honour ctx cancellation
// at least between simulation steps.
type RunFunc func(ctx context.Context, r Run) (*Result, error)

// Shard selects every Count-th run starting at Index (0-based), so Count
// independent processes (a Kubernetes Indexed Job, a Slurm array) split a
// sweep without talking to each other. The zero Shard is "everything".
type Shard struct {
	Index, Count int
}

// ParseShard parses "i/n" with 0 <= i < n.
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("shard %q: want i/n with 0 <= i < n, e.g. 0/4 (Kubernetes: $JOB_COMPLETION_INDEX/N)", s)
	}
	return Shard{Index: i, Count: n}, nil
}

// Has reports whether run number k (in the whole sweep) is this shard's.
func (s Shard) Has(k int) bool { return s.Count <= 1 || k%s.Count == s.Index }

// String formats the shard as "i/n".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, max(s.Count, 1)) }

// Runner executes runs on a worker pool, persists each finished run under
// Dir/runs/<hash>.json, and skips runs already there (resume). The zero
// Runner runs on all cores without persistence or progress output.
type Runner struct {
	Run     RunFunc
	Workers int    // 0: runtime.NumCPU()
	Dir     string // results directory; "" keeps results in memory only
	Shard   Shard
	// Progress receives the progress bar (with ETA); nil for none.
	Progress io.Writer
	// Force re-runs runs that already have results.
	Force bool
}

// Report is what Execute did.
type Report struct {
	// Results holds this shard's results (run now or found on disk), in
	// the order of the runs given.
	Results []*Result
	Ran     int // runs executed now
	Reused  int // runs whose results were already in Dir
	Failed  []error
	Wall    time.Duration
}

// RunError is a run that failed.
type RunError struct {
	Run Run
	Err error
}

func (e *RunError) Error() string {
	return fmt.Sprintf("run %s (%s, %s, seed %d): %v", e.Run.Hash, e.Run.Spec.Name, e.Run.Policy.Key(), e.Run.Seed, e.Err)
}

func (e *RunError) Unwrap() error { return e.Err }

// RunPath is where a run's result lives under dir.
func RunPath(dir, hash string) string { return filepath.Join(dir, "runs", hash+".json") }

// Execute runs this shard's share of runs. Runs are numbered by their
// position in runs, so every shard must be given the same list. Failed
// runs are reported, not persisted, and do not stop the others; ctx
// cancellation stops the sweep after the runs in progress.
func (r *Runner) Execute(ctx context.Context, runs []Run) (*Report, error) {
	start := time.Now()
	if r.Run == nil {
		return nil, errors.New("experiments: Runner.Run is nil")
	}
	if r.Dir != "" {
		if err := os.MkdirAll(filepath.Join(r.Dir, "runs"), 0o755); err != nil {
			return nil, err
		}
	}
	rep := &Report{}
	var todo []int // indices into mine
	var mine []Run
	for k, run := range runs {
		if !r.Shard.Has(k) {
			continue
		}
		mine = append(mine, run)
		if !r.Force && r.Dir != "" {
			if res, err := LoadResult(RunPath(r.Dir, run.Hash)); err == nil && res.Row.Hash == run.Hash {
				rep.Results = append(rep.Results, res)
				rep.Reused++
				continue
			}
		}
		rep.Results = append(rep.Results, nil)
		todo = append(todo, len(mine)-1)
	}
	workers := r.Workers
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	workers = min(workers, max(len(todo), 1))

	prog := newProgress(r.Progress, len(todo), workers)
	jobs := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				run := mine[i]
				t0 := time.Now()
				res, err := safeRun(ctx, r.Run, run)
				if err == nil {
					res.Row.WallMs = wallMs(time.Since(t0))
					if res.Objective == nil && run.Spec.Objective.Metric != "" {
						o := run.Spec.Objective
						res.Objective = &o
					}
					if r.Dir != "" {
						err = SaveResult(RunPath(r.Dir, run.Hash), res)
					}
				}
				mu.Lock()
				if err != nil {
					rep.Failed = append(rep.Failed, &RunError{Run: run, Err: err})
				} else {
					rep.Results[i] = res
					rep.Ran++
				}
				mu.Unlock()
				if err == nil || ctx.Err() == nil {
					prog.add()
				}
			}
		}()
	}
feed:
	for _, i := range todo {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	prog.finish(ctx.Err() != nil)
	// Drop the holes failed or cancelled runs left.
	kept := rep.Results[:0]
	for _, res := range rep.Results {
		if res != nil {
			kept = append(kept, res)
		}
	}
	rep.Results = kept
	rep.Wall = time.Since(start)
	return rep, ctx.Err()
}

// progress reports a sweep's progress: a bar with ETA on a terminal,
// otherwise (a log file, a CI job, a pipe) a plain line every 10% or 30 s,
// never carriage returns. An interrupted sweep stops where it is; it never
// jumps to 100%.
type progress struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	total int
	start time.Time

	mu        sync.Mutex
	done      int
	lastLine  time.Time
	lastShown int
}

func newProgress(w io.Writer, total, workers int) *progress {
	p := &progress{w: w, total: total, start: time.Now(), lastLine: time.Now()}
	if w == nil || total == 0 {
		return p
	}
	desc := fmt.Sprintf("%d runs on %d workers", total, workers)
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionSetWidth(30),
		)
		return p
	}
	fmt.Fprintf(w, "%s\n", desc)
	return p
}

func (p *progress) add() {
	if p.w == nil {
		return
	}
	if p.bar != nil {
		_ = p.bar.Add(1)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	now := time.Now()
	if p.done < p.total && (p.done-p.lastShown)*10 < p.total && now.Sub(p.lastLine) < 30*time.Second {
		return
	}
	p.lastShown, p.lastLine = p.done, now
	el := now.Sub(p.start)
	line := fmt.Sprintf("%d/%d runs (%d%%), %s elapsed", p.done, p.total, 100*p.done/p.total, FormatWall(el))
	if p.done < p.total {
		eta := time.Duration(float64(el) / float64(p.done) * float64(p.total-p.done))
		line += ", about " + FormatWall(eta) + " left"
	}
	fmt.Fprintln(p.w, line)
}

// finish ends the bar: complete, or (interrupted) left where it stopped.
func (p *progress) finish(interrupted bool) {
	if p.bar == nil {
		return
	}
	if interrupted {
		_ = p.bar.Exit()
	} else {
		_ = p.bar.Finish()
	}
	fmt.Fprintln(p.w)
}

// safeRun calls f, turning a panic into an error carrying the stack.
func safeRun(ctx context.Context, f RunFunc, run Run) (res *Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	res, err = f(ctx, run)
	if err == nil && res == nil {
		err = errors.New("RunFunc returned no result")
	}
	return res, err
}

// SaveResult writes res to path atomically (a temporary file renamed into
// place), so an interrupted sweep never leaves a half-written result that
// resume would trust.
func SaveResult(path string, res *Result) error {
	data, err := json.Marshal(res)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil { // CreateTemp makes 0600; shards share results
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// MaxResultBytes bounds a run result file that LoadResult reads.
const MaxResultBytes = 512 << 20

// LoadResult reads a result written by SaveResult. It trusts nothing in
// the file: the size is bounded (MaxResultBytes), and a result whose
// hash, scenario name, sweep parameters or series could not have come
// from a run (a hash that is not 16 hex digits, a scenario name that is
// not a safe file name such as "../x", traces whose times and values
// differ in length) is an error naming the file and the field, so that
// merge, plot and report never write outside their output directory or
// crash on it.
func LoadResult(path string) (*Result, error) {
	data, err := readLimited(path, MaxResultBytes)
	if err != nil {
		return nil, err
	}
	res, err := DecodeResult(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return res, nil
}

// ErrNotResult is the error (wrapped) of a file that is not a valid run
// result.
var ErrNotResult = errors.New("not a run result")

// DecodeResult decodes and validates a result file's contents (see
// LoadResult).
func DecodeResult(data []byte) (*Result, error) {
	var res Result
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNotResult, clip(err.Error(), 200))
	}
	if err := res.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotResult, err)
	}
	return &res, nil
}

var hashRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

var paramKinds = []string{ParamSize, ParamRate, ParamDuration, ParamNumber, ParamHosts, ParamText}

// validate checks what LoadResult must not trust.
func (res *Result) validate() error {
	r := &res.Row
	if !hashRE.MatchString(r.Hash) {
		return fmt.Errorf("row.hash = %q: want 16 hex digits", clip(r.Hash, 40))
	}
	if !ValidName(r.Scenario) {
		return fmt.Errorf("row.scenario = %q: want a scenario name (lower-case letters, digits, - and _, at most 64)", clip(r.Scenario, 40))
	}
	if len(r.Policy) > 256 || !utf8.ValidString(r.Policy) {
		return fmt.Errorf("row.policy: want a label of at most 256 bytes of UTF-8")
	}
	if len(r.Params) > 64 {
		return fmt.Errorf("row.params: %d parameters; at most 64", len(r.Params))
	}
	for i, p := range r.Params {
		if segs, ok := parsePath(p.Name); !ok || pathString(segs) != p.Name || !slices.Contains(paramKinds, p.Kind) ||
			len(p.Value) > 256 || len(p.Label) > 256 || math.IsNaN(p.X) || math.IsInf(p.X, 0) {
			return fmt.Errorf("row.params[%d]: want {name: a spec path, value, label (at most 256 bytes each), kind: one of %s, x: a number}", i, strings.Join(paramKinds, ", "))
		}
	}
	if s := res.Series; s != nil {
		for _, ts := range [][]Trace{s.Throughput, s.Queues, s.Window, s.Rate} {
			if len(ts) > 4096 {
				return fmt.Errorf("series: %d traces; at most 4096", len(ts))
			}
			for _, t := range ts {
				if len(t.T) != len(t.V) {
					return fmt.Errorf("series trace %q: %d times but %d values", clip(t.Name, 40), len(t.T), len(t.V))
				}
			}
		}
	}
	return nil
}

// LoadResults reads every run result under each dir's runs/ folder,
// keeping one result per hash (the first found), sorted by SortResults.
// This is the merge step of a sharded sweep.
func LoadResults(dirs ...string) ([]*Result, error) {
	var out []*Result
	seen := map[string]bool{}
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join(d, "runs", "*.json"))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			if _, err := os.Stat(d); err != nil {
				return nil, err
			}
		}
		for _, f := range files { // Glob returns sorted names
			res, err := LoadResult(f)
			if err != nil {
				return nil, err
			}
			if seen[res.Row.Hash] {
				continue
			}
			seen[res.Row.Hash] = true
			out = append(out, res)
		}
	}
	SortResults(out)
	return out, nil
}
