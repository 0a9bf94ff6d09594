// Package experiments compares congestion-control policies on shared
// scenarios: it parses YAML experiment specs, expands each spec's sweep
// points, policy matrix and seeds into runs, executes the runs in parallel
// (one simulated World per run, its fabric built by sim/topo), and turns
// the results into rows (JSON/CSV), statistics across seeds, verdicts,
// Markdown summaries, figures and one HTML report per results directory.
//
// # Model
//
// A Spec is one scenario (a topology, switch, NIC and workload description)
// plus a policy Matrix, a list of seeds, an optional sweep of scenario
// fields (each point a complete Spec: Spec.Points) and an Objective. Expand
// takes the cartesian product Points × Matrix × Seeds and yields one Run per
// point; each Run carries a Hash of everything that determines its outcome
// (the resolved scenario, its sweep values, its policy point, its seed and
// ModelVersion), so finished runs are found and skipped on the next
// invocation (resumability) and shards of one sweep never disagree on what
// a run is. Parsing is table-driven (rules.go, parse_*.go) and bounded
// (MaxSpecBytes, MaxDepth) against hostile files.
//
// A RunFunc executes one Run and returns a Result: one Row of metrics and,
// optionally, time series for plots. The simulator-backed RunFunc (SimRun)
// lives in simrun.go; tests use small fakes. The Runner owns a worker pool, the progress
// bar, sharding (Shard) and the results directory.
//
// # Determinism
//
// A Run's Result depends only on the Run: every random draw comes from a
// generator seeded with the run's seed (math/rand/v2 PCG, never the global
// source), no map is iterated into output, and wall-clock time appears only
// in the separate Row.WallMs field, which comparisons ignore.
//
// # Statistics
//
// Summaries (summary.go, stats.go) aggregate each (sweep point, policy)
// over its seeds: every metric's mean and 95% Student-t interval. Verdicts
// rank by the spec's Objective and test the top two with Welch's t test.
//
// # Units
//
// Spec fields take units.Bytes ("64KiB"), units.BitRate ("100Gbps") and
// durations ("50us"). Rows report times in microseconds, rates in Gbit/s and
// sizes in bytes; every column name carries its unit.
//
// # Concurrency
//
// Specs, Runs and Results are values; once parsed a Spec is read-only and
// shared by the runs made from it. The Runner calls RunFunc from several
// goroutines at once, each with its own Run.
package experiments
