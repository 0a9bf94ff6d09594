package experiments

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// PolicySummary aggregates one policy's runs (its seeds) in a scenario.
// Completion-time percentiles pool the flows of every seed; counters and
// goodput are means over seeds.
type PolicySummary struct {
	Policy    string
	Index     int // first run index, for ordering
	Runs      int
	Flows     int
	Completed int

	FCTP50Us, FCTP99Us       float64
	SlowdownP50, SlowdownP99 float64
	GoodputGbps              float64
	PFCPauses, PFCPausedUs   float64
	ECNMarks, CNPs, Drops    float64
	RetxBytes, MaxQueueBytes float64
	BgFlows, BgCompleted     int
	BgFCTP99Us               float64

	// FCTsUs are the pooled, sorted tensor completion times (for CDFs).
	FCTsUs []float64
}

// ScenarioSummary is the comparison table of one scenario.
type ScenarioSummary struct {
	Scenario    string
	Description string
	Seeds       int
	Policies    []PolicySummary
}

// Summarise groups results by scenario and policy. Scenarios come out in
// name order and policies in matrix order.
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

func summariseScenario(rs []*Result) ScenarioSummary {
	s := ScenarioSummary{Scenario: rs[0].Row.Scenario, Description: rs[0].Description}
	byPolicy := map[string]int{}
	seeds := map[int64]bool{}
	var slows [][]float64
	var bgs [][]float64
	for _, r := range rs {
		seeds[r.Row.Seed] = true
		i, ok := byPolicy[r.Row.Policy]
		if !ok {
			i = len(s.Policies)
			byPolicy[r.Row.Policy] = i
			s.Policies = append(s.Policies, PolicySummary{Policy: r.Row.Policy, Index: r.Row.Index})
			slows = append(slows, nil)
			bgs = append(bgs, nil)
		}
		p := &s.Policies[i]
		p.Runs++
		p.Flows += r.Row.Flows
		p.Completed += r.Row.Completed
		p.BgFlows += r.Row.BgFlows
		p.BgCompleted += r.Row.BgCompleted
		p.GoodputGbps += r.Row.GoodputGbps
		p.PFCPauses += float64(r.Row.PFCPauses)
		p.PFCPausedUs += r.Row.PFCPausedUs
		p.ECNMarks += float64(r.Row.ECNMarks)
		p.CNPs += float64(r.Row.CNPs)
		p.Drops += float64(r.Row.Drops)
		p.RetxBytes += float64(r.Row.RetxBytes)
		p.MaxQueueBytes += float64(r.Row.MaxQueueBytes)
		for _, f := range r.Flows {
			if !f.Done {
				continue
			}
			if f.Class == ClassBackground {
				bgs[i] = append(bgs[i], float64(f.FCTNs)/1e3)
				continue
			}
			p.FCTsUs = append(p.FCTsUs, float64(f.FCTNs)/1e3)
			if f.IdealNs > 0 {
				slows[i] = append(slows[i], float64(f.FCTNs)/float64(f.IdealNs))
			}
		}
	}
	s.Seeds = len(seeds)
	for i := range s.Policies {
		p := &s.Policies[i]
		k := float64(p.Runs)
		for _, x := range []*float64{&p.GoodputGbps, &p.PFCPauses, &p.PFCPausedUs, &p.ECNMarks, &p.CNPs, &p.Drops, &p.RetxBytes, &p.MaxQueueBytes} {
			*x /= k
		}
		slices.Sort(p.FCTsUs)
		slices.Sort(slows[i])
		slices.Sort(bgs[i])
		p.FCTP50Us, p.FCTP99Us = Quantile(p.FCTsUs, 0.5), Quantile(p.FCTsUs, 0.99)
		p.SlowdownP50, p.SlowdownP99 = Quantile(slows[i], 0.5), Quantile(slows[i], 0.99)
		p.BgFCTP99Us = Quantile(bgs[i], 0.99)
	}
	slices.SortStableFunc(s.Policies, func(a, b PolicySummary) int { return a.Index - b.Index })
	return s
}

// Policy returns the summary of the named policy.
func (s *ScenarioSummary) Policy(name string) (*PolicySummary, bool) {
	for i := range s.Policies {
		if s.Policies[i].Policy == name {
			return &s.Policies[i], true
		}
	}
	return nil, false
}

// Table writes the comparison as a Markdown table.
func (s *ScenarioSummary) Table(w io.Writer) {
	bg := false
	for _, p := range s.Policies {
		bg = bg || p.BgFlows > 0
	}
	head := []string{"policy", "done", "FCT p50 (µs)", "FCT p99 (µs)", "slowdown p50", "slowdown p99", "goodput (Gbps)",
		"PFC pauses", "paused (µs)", "ECN marks", "drops", "retx (KiB)", "max queue (KiB)"}
	if bg {
		head = append(head, "bg done", "bg FCT p99 (µs)")
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, p := range s.Policies {
		fct := []string{num(p.FCTP50Us), num(p.FCTP99Us), num(p.SlowdownP50), num(p.SlowdownP99), num(p.GoodputGbps)}
		if p.Completed == 0 {
			fct = []string{"–", "–", "–", "–", "–"}
		}
		cells := []string{
			p.Policy, fmt.Sprintf("%d/%d", p.Completed, p.Flows),
			fct[0], fct[1], fct[2], fct[3], fct[4],
			num(p.PFCPauses), num(p.PFCPausedUs), num(p.ECNMarks), num(p.Drops),
			num(p.RetxBytes / 1024), num(p.MaxQueueBytes / 1024),
		}
		if bg {
			bgp99 := num(p.BgFCTP99Us)
			if p.BgCompleted == 0 {
				bgp99 = "–"
			}
			cells = append(cells, fmt.Sprintf("%d/%d", p.BgCompleted, p.BgFlows), bgp99)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// Markdown writes the scenario's summary page: the table, the best policy
// by p99 completion time and links to the plots.
func (s *ScenarioSummary) Markdown(w io.Writer, plots []string) {
	fmt.Fprintf(w, "# %s\n\n", s.Scenario)
	if s.Description != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(s.Description))
	}
	runs := 0
	for _, p := range s.Policies {
		runs += p.Runs
	}
	fmt.Fprintf(w, "%d policies × %d seeds = %d runs. Completion-time percentiles pool every seed's tensor flows; other columns are means over seeds. Slowdown is completion time over the flow's ideal (alone on an empty path).\n\n", len(s.Policies), s.Seeds, runs)
	s.Table(w)
	if line := s.BestLine(); line != "" {
		fmt.Fprintf(w, "\n%s\n", line)
	}
	if len(plots) > 0 {
		fmt.Fprintf(w, "\n## Plots\n\n")
		for _, p := range plots {
			fmt.Fprintf(w, "- [%s](%s)\n", p, p)
		}
	}
}

// Best returns the policy with the lowest p99 completion time among those
// that completed every tensor flow.
func (s *ScenarioSummary) Best() (PolicySummary, bool) {
	var best PolicySummary
	found := false
	for _, p := range s.Policies {
		if p.Flows == 0 || p.Completed < p.Flows {
			continue
		}
		if !found || p.FCTP99Us < best.FCTP99Us {
			best, found = p, true
		}
	}
	return best, found
}

// BestLine names the policy with the lowest p99 completion time and any
// within 0.5% of it ("" when no policy completed every flow).
func (s *ScenarioSummary) BestLine() string {
	best, ok := s.Best()
	if !ok {
		return ""
	}
	var ties []string
	for _, p := range s.Policies {
		if p.Policy != best.Policy && p.Flows > 0 && p.Completed == p.Flows && p.FCTP99Us <= best.FCTP99Us*1.005 {
			ties = append(ties, p.Policy)
		}
	}
	line := fmt.Sprintf("Lowest p99 completion time: **%s** (%s µs)", best.Policy, num(best.FCTP99Us))
	if len(ties) > 0 {
		line += fmt.Sprintf("; within 0.5%%: %s", strings.Join(ties, ", "))
	}
	return line + "."
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
