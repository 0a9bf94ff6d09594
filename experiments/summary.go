package experiments

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Metric is a results column that summaries aggregate over seeds.
type Metric struct {
	Col  string // results column (Row JSON name)
	Head string // table heading, with the displayed unit
	// Scale divides the column for display (1024 shows bytes in KiB).
	Scale float64
	// Higher is better (goodput); otherwise lower is.
	Higher bool
	// Tensor metrics of completion time are undefined for a seed that
	// completed no tensor flow (Bg: no background flow); such seeds are
	// left out of the metric's statistics.
	FCT, Bg bool
	// Table says whether the comparison table shows it.
	Table bool
	get   func(*Row) float64
}

// Metrics lists the aggregated metrics, in table order.
var Metrics = []Metric{
	{Col: "fct_p50_us", Head: "FCT p50 (µs)", Scale: 1, FCT: true, Table: true, get: func(r *Row) float64 { return r.FCTP50Us }},
	{Col: "fct_p99_us", Head: "FCT p99 (µs)", Scale: 1, FCT: true, Table: true, get: func(r *Row) float64 { return r.FCTP99Us }},
	{Col: "fct_mean_us", Head: "FCT mean (µs)", Scale: 1, FCT: true, get: func(r *Row) float64 { return r.FCTMeanUs }},
	{Col: "fct_max_us", Head: "FCT max (µs)", Scale: 1, FCT: true, get: func(r *Row) float64 { return r.FCTMaxUs }},
	{Col: "slowdown_p50", Head: "slowdown p50", Scale: 1, FCT: true, Table: true, get: func(r *Row) float64 { return r.SlowdownP50 }},
	{Col: "slowdown_p99", Head: "slowdown p99", Scale: 1, FCT: true, Table: true, get: func(r *Row) float64 { return r.SlowdownP99 }},
	{Col: "goodput_gbps", Head: "goodput (Gbps)", Scale: 1, Higher: true, FCT: true, Table: true, get: func(r *Row) float64 { return r.GoodputGbps }},
	{Col: "pfc_pause_frames", Head: "PFC pauses", Scale: 1, Table: true, get: func(r *Row) float64 { return float64(r.PFCPauses) }},
	{Col: "pfc_paused_us", Head: "paused (µs)", Scale: 1, Table: true, get: func(r *Row) float64 { return r.PFCPausedUs }},
	{Col: "ecn_marks", Head: "ECN marks", Scale: 1, Table: true, get: func(r *Row) float64 { return float64(r.ECNMarks) }},
	{Col: "cnps", Head: "CNPs", Scale: 1, get: func(r *Row) float64 { return float64(r.CNPs) }},
	{Col: "drops", Head: "drops", Scale: 1, Table: true, get: func(r *Row) float64 { return float64(r.Drops) }},
	{Col: "retx_bytes", Head: "retx (KiB)", Scale: 1024, Table: true, get: func(r *Row) float64 { return float64(r.RetxBytes) }},
	{Col: "max_queue_bytes", Head: "max queue (KiB)", Scale: 1024, Table: true, get: func(r *Row) float64 { return float64(r.MaxQueueBytes) }},
	{Col: "bg_fct_p99_us", Head: "bg FCT p99 (µs)", Scale: 1, Bg: true, Table: true, get: func(r *Row) float64 { return r.BgFCTP99Us }},
	{Col: "bg_slowdown_p99", Head: "bg slowdown p99", Scale: 1, Bg: true, get: func(r *Row) float64 { return r.BgSlowdownP99 }},
}

// MetricByCol returns the metric of a results column.
func MetricByCol(col string) (Metric, bool) {
	for _, m := range Metrics {
		if m.Col == col {
			return m, true
		}
	}
	return Metric{}, false
}

// PolicySummary aggregates one policy's runs (its seeds) at one sweep
// point of a scenario. Every metric is summarised across seeds as a Stat
// (mean and 95% Student-t interval of the per-seed values); the float
// fields are the means, for convenience.
type PolicySummary struct {
	Policy string
	// Params are the sweep point's values (nil without a sweep).
	Params []Param
	Index  int // first run index, for ordering
	Runs   int
	// Flows and Completed count tensor flows over every seed; Errored
	// those whose transfer failed (the rest of the incomplete ones were
	// unfinished at the stop time).
	Flows, Completed, Errored int
	BgFlows, BgCompleted      int
	// Seeds and Hashes list the runs, in seed order.
	Seeds  []int64
	Hashes []string
	// Stats holds every Metric's summary, by column.
	Stats map[string]Stat

	FCTP50Us, FCTP99Us       float64
	SlowdownP50, SlowdownP99 float64
	GoodputGbps              float64
	PFCPauses, PFCPausedUs   float64
	ECNMarks, CNPs, Drops    float64
	RetxBytes, MaxQueueBytes float64
	BgFCTP99Us               float64

	// FCTsUs are the pooled, sorted tensor completion times of every seed
	// (for CDFs).
	FCTsUs []float64

	// violations counts the seeds that broke each objective constraint,
	// by constraint; worst holds an example value.
	violations map[string]int
}

// Stat returns the summary of a results column (a NaN Stat if unknown).
func (p *PolicySummary) Stat(col string) Stat {
	if s, ok := p.Stats[col]; ok {
		return s
	}
	return NewStat(nil)
}

// Point returns the summary's sweep point as "name=value, ..." ("" without
// a sweep).
func (p *PolicySummary) Point() string { return paramsKey(p.Params) }

func paramsKey(ps []Param) string {
	var parts []string
	for _, x := range ps {
		parts = append(parts, x.Name+"="+x.Value)
	}
	return strings.Join(parts, ", ")
}

// pointLabel shows a sweep point for people ("switch buffer = 1MiB,
// incast degree = 16").
func pointLabel(ps []Param) string {
	var parts []string
	for _, x := range ps {
		parts = append(parts, x.Label+" = "+x.Display())
	}
	return strings.Join(parts, ", ")
}

// ScenarioSummary is the comparison of one scenario: a PolicySummary per
// (sweep point, policy).
type ScenarioSummary struct {
	Scenario    string
	Description string
	Seeds       int
	// Params are the swept parameters (their first run's values, for the
	// names, labels and kinds); nil without a sweep.
	Params    []Param
	Objective Objective
	Policies  []PolicySummary
}

// Summarise groups results by scenario, sweep point and policy. Scenarios
// come out in name order, points and policies in expansion order. Each
// scenario ranks by the objective its results carry (the default one for
// results without).
func Summarise(results []*Result) []ScenarioSummary {
	rs := slices.Clone(results)
	SortResults(rs)
	var out []ScenarioSummary
	for len(rs) > 0 {
		n := 1
		for n < len(rs) && rs[n].Row.Scenario == rs[0].Row.Scenario {
			n++
		}
		out = append(out, summariseScenario(rs[:n]))
		rs = rs[n:]
	}
	return out
}

// DefaultObjective ranks by p99 completion time among policies that
// complete every tensor flow without drops.
func DefaultObjective() Objective {
	return Objective{Metric: "fct_p99_us", Goal: "min", Require: []string{RequireCompleted, RequireNoDrops}}
}

func summariseScenario(rs []*Result) ScenarioSummary {
	s := ScenarioSummary{Scenario: rs[0].Row.Scenario, Description: rs[0].Description, Objective: DefaultObjective(), Params: rs[0].Row.Params}
	for _, r := range rs {
		if r.Objective != nil {
			s.Objective = *r.Objective
		}
	}
	byKey := map[string]int{}
	seeds := map[int64]bool{}
	var rows [][]*Result
	for _, r := range rs {
		seeds[r.Row.Seed] = true
		key := paramsKey(r.Row.Params) + "\x00" + r.Row.Policy
		i, ok := byKey[key]
		if !ok {
			i = len(s.Policies)
			byKey[key] = i
			s.Policies = append(s.Policies, PolicySummary{Policy: r.Row.Policy, Params: r.Row.Params, Index: r.Row.Index})
			rows = append(rows, nil)
		}
		rows[i] = append(rows[i], r)
	}
	s.Seeds = len(seeds)
	for i := range s.Policies {
		summarisePolicy(&s.Policies[i], rows[i], s.Objective)
	}
	slices.SortStableFunc(s.Policies, func(a, b PolicySummary) int { return a.Index - b.Index })
	return s
}

func summarisePolicy(p *PolicySummary, rs []*Result, o Objective) {
	slices.SortStableFunc(rs, func(a, b *Result) int { return cmpInt64(a.Row.Seed, b.Row.Seed) })
	p.Stats = map[string]Stat{}
	p.violations = map[string]int{}
	vals := map[string][]float64{}
	for _, r := range rs {
		row := &r.Row
		p.Runs++
		p.Seeds = append(p.Seeds, row.Seed)
		p.Hashes = append(p.Hashes, row.Hash)
		p.Flows += row.Flows
		p.Completed += row.Completed
		p.BgFlows += row.BgFlows
		p.BgCompleted += row.BgCompleted
		errored := 0
		for _, f := range r.Flows {
			if f.Class == ClassBackground {
				continue
			}
			if f.Err != "" {
				errored++
			}
			if f.Done {
				p.FCTsUs = append(p.FCTsUs, float64(f.FCTNs)/1e3)
			}
		}
		p.Errored += errored
		for _, m := range Metrics {
			if (m.FCT && row.Completed == 0) || (m.Bg && row.BgCompleted == 0) {
				continue
			}
			vals[m.Col] = append(vals[m.Col], m.get(row))
		}
		for _, c := range o.Require {
			if violates(c, row, errored) {
				p.violations[c]++
			}
		}
	}
	for _, m := range Metrics {
		p.Stats[m.Col] = NewStat(vals[m.Col])
	}
	slices.Sort(p.FCTsUs)
	mean := func(col string) float64 { return p.Stats[col].Mean }
	p.FCTP50Us, p.FCTP99Us = mean("fct_p50_us"), mean("fct_p99_us")
	p.SlowdownP50, p.SlowdownP99 = mean("slowdown_p50"), mean("slowdown_p99")
	p.GoodputGbps = mean("goodput_gbps")
	p.PFCPauses, p.PFCPausedUs = mean("pfc_pause_frames"), mean("pfc_paused_us")
	p.ECNMarks, p.CNPs, p.Drops = mean("ecn_marks"), mean("cnps"), mean("drops")
	p.RetxBytes, p.MaxQueueBytes = mean("retx_bytes"), mean("max_queue_bytes")
	p.BgFCTP99Us = mean("bg_fct_p99_us")
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// violates reports whether one run breaks an objective constraint.
func violates(c string, row *Row, errored int) bool {
	switch c {
	case RequireCompleted:
		return row.Flows == 0 || row.Completed < row.Flows
	case RequireNoDrops:
		return row.Drops > 0
	case RequireNoPauses:
		return row.PFCPauses > 0
	case RequireNoFailures:
		return errored > 0
	}
	return false
}

// Policy returns the summary of the named policy (at the first sweep
// point that has it).
func (s *ScenarioSummary) Policy(name string) (*PolicySummary, bool) {
	for i := range s.Policies {
		if s.Policies[i].Policy == name {
			return &s.Policies[i], true
		}
	}
	return nil, false
}

// Points groups the policies by sweep point, in order (one group without
// a sweep).
func (s *ScenarioSummary) Points() [][]PolicySummary {
	var out [][]PolicySummary
	for i := 0; i < len(s.Policies); {
		j := i + 1
		for j < len(s.Policies) && s.Policies[j].Point() == s.Policies[i].Point() {
			j++
		}
		out = append(out, s.Policies[i:j])
		i = j
	}
	return out
}

// Cell formats a metric's summary for a table: "2750 ± 12" (the mean and
// its 95% interval's half width), the mean alone for one seed, "–" when
// no seed has a value.
func Cell(st Stat, scale float64) string {
	if st.N == 0 || math.IsNaN(st.Mean) {
		return "–"
	}
	m := num(st.Mean / scale)
	if st.N < 2 || st.HalfWidth() == 0 {
		return m
	}
	return m + " ± " + numHW(st.HalfWidth()/scale)
}

// numHW formats an interval's half width: like num, with two significant
// digits below 0.01 (so a tight interval does not read as ± 0.00).
func numHW(x float64) string {
	switch {
	case x >= 0.01:
		return num(x)
	case x < 0.001:
		return "<0.001"
	}
	return strconv.FormatFloat(x, 'f', 4, 64)
}

// TableMetrics returns the metrics the scenario's table shows (background
// ones only when it has background flows).
func (s *ScenarioSummary) TableMetrics() []Metric {
	bg := slices.ContainsFunc(s.Policies, func(p PolicySummary) bool { return p.BgFlows > 0 })
	var out []Metric
	for _, m := range Metrics {
		if m.Table && (!m.Bg || bg) {
			out = append(out, m)
		}
	}
	return out
}

// Table writes the comparison as a Markdown table: one row per (sweep
// point, policy), each metric as its mean over seeds ± the half width of
// its 95% interval.
func (s *ScenarioSummary) Table(w io.Writer) {
	ms := s.TableMetrics()
	var head []string
	for _, p := range s.Params {
		head = append(head, p.Label)
	}
	head = append(head, "policy", "done")
	for _, m := range ms {
		head = append(head, m.Head)
	}
	bg := slices.ContainsFunc(ms, func(m Metric) bool { return m.Bg })
	if bg {
		head = append(head, "bg done")
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for i := range s.Policies {
		p := &s.Policies[i]
		var cells []string
		for _, x := range p.Params {
			cells = append(cells, x.Display())
		}
		cells = append(cells, p.Policy, fmt.Sprintf("%d/%d", p.Completed, p.Flows))
		for _, m := range ms {
			cells = append(cells, Cell(p.Stat(m.Col), m.Scale))
		}
		if bg {
			cells = append(cells, fmt.Sprintf("%d/%d", p.BgCompleted, p.BgFlows))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// Markdown writes the scenario's summary page: the table, the verdicts
// and links to the plots.
func (s *ScenarioSummary) Markdown(w io.Writer, plots []string) {
	fmt.Fprintf(w, "# %s\n\n", s.Scenario)
	if s.Description != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(s.Description))
	}
	fmt.Fprintf(w, "%s\n\n", s.Method())
	s.Table(w)
	if lines := s.VerdictLines(); len(lines) > 0 {
		fmt.Fprintln(w)
		for _, l := range lines {
			fmt.Fprintf(w, "- %s\n", l)
		}
	}
	if len(plots) > 0 {
		fmt.Fprintf(w, "\n## Plots\n\n")
		for _, p := range plots {
			fmt.Fprintf(w, "- [%s](%s)\n", p, p)
		}
	}
}

// Method says how the table was computed.
func (s *ScenarioSummary) Method() string {
	runs := 0
	for _, p := range s.Policies {
		runs += p.Runs
	}
	points := len(s.Points())
	what := fmt.Sprintf("%d policies × %d seeds = %d runs.", len(s.Policies)/max(points, 1), s.Seeds, runs)
	if len(s.Params) > 0 {
		what = fmt.Sprintf("%d sweep points × %d policies × %d seeds = %d runs.", points, len(s.Policies)/max(points, 1), s.Seeds, runs)
	}
	return what + " Each cell is the mean over seeds of the per-seed value, ± the half width of its 95% confidence interval (Student's t, n−1 degrees of freedom; no interval with one seed). Slowdown is completion time over the flow's ideal (alone on an empty path)."
}

// Verdict is the ranking of one sweep point's policies by the objective.
type Verdict struct {
	Objective Objective
	// Best and RunnerUp are the two best eligible policies (nil if none).
	Best, RunnerUp *PolicySummary
	// WithinNoise says whether the two are within noise of each other
	// (Welch's t test at 5%); Known is false when either has one seed.
	WithinNoise, Known bool
	// Excluded lists the policies that broke a constraint, each with the
	// first constraint it broke.
	Excluded []Exclusion
}

// Exclusion is a policy the objective's constraints ruled out.
type Exclusion struct {
	Policy     string
	Constraint string
	Seeds      int // seeds that broke it
	Detail     string
}

// Judge ranks one sweep point's policies.
func (s *ScenarioSummary) Judge(ps []PolicySummary) Verdict {
	v := Verdict{Objective: s.Objective}
	var ok []*PolicySummary
	for i := range ps {
		p := &ps[i]
		bad := ""
		for _, c := range s.Objective.Require {
			if p.violations[c] > 0 {
				bad = c
				break
			}
		}
		st := p.Stat(s.Objective.Metric)
		if bad == "" && st.N > 0 && !math.IsNaN(st.Mean) {
			ok = append(ok, p)
			continue
		}
		e := Exclusion{Policy: p.Policy, Constraint: bad, Seeds: p.violations[bad]}
		switch bad {
		case RequireCompleted:
			e.Detail = fmt.Sprintf("%d/%d flows done", p.Completed, p.Flows)
		case RequireNoDrops:
			e.Detail = num(p.Drops) + " drops"
		case RequireNoPauses:
			e.Detail = num(p.PFCPauses) + " PFC pauses"
		case RequireNoFailures:
			e.Detail = fmt.Sprintf("%d failed flows", p.Errored)
		default:
			e.Constraint, e.Detail = "no value", "no seed has "+s.Objective.Metric
		}
		v.Excluded = append(v.Excluded, e)
	}
	better := func(a, b *PolicySummary) bool {
		x, y := a.Stat(s.Objective.Metric).Mean, b.Stat(s.Objective.Metric).Mean
		if s.Objective.Goal == "max" {
			return x > y
		}
		return x < y
	}
	slices.SortStableFunc(ok, func(a, b *PolicySummary) int {
		switch {
		case better(a, b):
			return -1
		case better(b, a):
			return 1
		}
		return 0
	})
	if len(ok) > 0 {
		v.Best = ok[0]
	}
	if len(ok) > 1 {
		v.RunnerUp = ok[1]
		v.WithinNoise, v.Known = WithinNoise(ok[0].Stat(s.Objective.Metric), ok[1].Stat(s.Objective.Metric))
	}
	return v
}

// Describe says what the objective ranks ("lowest FCT p99 (µs), with every
// tensor flow completed and no drops").
func (o Objective) Describe() string {
	head := o.Metric
	if m, ok := MetricByCol(o.Metric); ok {
		head = m.Head
	}
	dir := "lowest"
	if o.Goal == "max" {
		dir = "highest"
	}
	var req []string
	for _, r := range o.Require {
		switch r {
		case RequireCompleted:
			req = append(req, "every tensor flow completed")
		case RequireNoDrops:
			req = append(req, "no drops")
		case RequireNoPauses:
			req = append(req, "no PFC pauses")
		case RequireNoFailures:
			req = append(req, "no failed flow")
		}
	}
	out := dir + " " + head
	if len(req) > 0 {
		out += ", with " + strings.Join(req, " and ")
	}
	return out
}

// Line writes the verdict as one sentence (Markdown bold on the winner).
func (v Verdict) Line() string {
	m, _ := MetricByCol(v.Objective.Metric)
	scale := max(m.Scale, 1)
	var b strings.Builder
	fmt.Fprintf(&b, "Objective: %s. ", v.Objective.Describe())
	if v.Best == nil {
		b.WriteString("No policy qualifies")
	} else {
		st := v.Best.Stat(v.Objective.Metric)
		seeds := "seeds"
		if st.N == 1 {
			seeds = "seed"
		}
		fmt.Fprintf(&b, "Best: **%s** (%s, %d %s)", v.Best.Policy, Cell(st, scale), st.N, seeds)
		if v.RunnerUp != nil {
			r := v.RunnerUp.Stat(v.Objective.Metric)
			fmt.Fprintf(&b, "; runner-up %s (%s)", v.RunnerUp.Policy, Cell(r, scale))
			switch {
			case !v.Known:
				b.WriteString(": one seed, so noise cannot be told from difference")
			case v.WithinNoise:
				b.WriteString(": **within noise** (Welch t test, 95%)")
			case math.Abs(r.Mean-st.Mean) <= 0.001*math.Abs(st.Mean):
				b.WriteString(": worse beyond noise (Welch t test, 95%), but by under 0.1%")
			default:
				b.WriteString(": worse beyond noise (Welch t test, 95%)")
			}
		}
	}
	if len(v.Excluded) > 0 {
		var ex []string
		for _, e := range v.Excluded[:min(len(v.Excluded), 6)] {
			ex = append(ex, fmt.Sprintf("%s (%s)", e.Policy, e.Detail))
		}
		if len(v.Excluded) > 6 {
			ex = append(ex, fmt.Sprintf("%d more", len(v.Excluded)-6))
		}
		fmt.Fprintf(&b, ". Excluded: %s", strings.Join(ex, ", "))
	}
	b.WriteString(".")
	return b.String()
}

// VerdictLines returns one verdict per sweep point (prefixed with the
// point's values when there is a sweep).
func (s *ScenarioSummary) VerdictLines() []string {
	var out []string
	for _, pt := range s.Points() {
		line := s.Judge(pt).Line()
		if k := pointLabel(pt[0].Params); k != "" {
			line = k + ": " + line
		}
		out = append(out, line)
	}
	return out
}

// Best returns the best policy of the first sweep point by the objective.
func (s *ScenarioSummary) Best() (PolicySummary, bool) {
	pts := s.Points()
	if len(pts) == 0 {
		return PolicySummary{}, false
	}
	v := s.Judge(pts[0])
	if v.Best == nil {
		return PolicySummary{}, false
	}
	return *v.Best, true
}

// BestLine is the first sweep point's verdict ("" without policies).
func (s *ScenarioSummary) BestLine() string {
	if lines := s.VerdictLines(); len(lines) > 0 {
		return lines[0]
	}
	return ""
}

// num formats a table number compactly: integers as such, others with
// three significant digits (at least one decimal below 100).
func num(x float64) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "–"
	case x == math.Trunc(x) && math.Abs(x) < 1e15:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case math.Abs(x) >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case math.Abs(x) >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}
