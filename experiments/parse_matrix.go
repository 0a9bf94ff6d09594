package experiments

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/units"
)

// dimension validates one matrix dimension: the default for an empty
// list, then each value (check returns "" or what is wrong) and
// duplicates.
func dimension[T comparable](v *validator, name string, xs *[]T, def T, str func(T) string, check func(T) string) error {
	if len(*xs) == 0 {
		*xs = []T{def}
	}
	for i, x := range *xs {
		p := fmt.Sprintf("matrix.%s[%d]", name, i)
		if check != nil {
			if m := check(x); m != "" {
				return v.fail(p, str(x), m)
			}
		}
		if slices.Index(*xs, x) != i {
			return v.fail(p, str(x), "listed twice")
		}
	}
	return nil
}

func (v *validator) matrix() error {
	m := &v.s.Matrix
	id := func(s string) string { return s }
	if err := dimension(v, "cc", &m.CC, "dcqcn", id, func(c string) string {
		if !slices.Contains(CCNames, c) {
			return "unknown congestion control; " + oneOf(CCNames)
		}
		return ""
	}); err != nil {
		return err
	}
	if err := dimension(v, "paths", &m.Paths, 1, strconv.Itoa, func(n int) string {
		if n < 1 || n > 64 {
			return "want queue pairs per connection in [1, 64]"
		}
		return ""
	}); err != nil {
		return err
	}
	if err := dimension(v, "chunk", &m.Chunk, 64*units.KiB, Size.String, v.chunkSize); err != nil {
		return err
	}
	if err := dimension(v, "pacing", &m.Pacing, true, strconv.FormatBool, nil); err != nil {
		return err
	}
	if err := dimension(v, "path_policy", &m.PathPolicy, PathPolicies[0], id, func(pp string) string {
		if !slices.Contains(PathPolicies, pp) {
			return "unknown path policy; " + oneOf(PathPolicies)
		}
		return ""
	}); err != nil {
		return err
	}
	for _, name := range sortedKeys(m.CCParams) {
		p := "matrix.cc_params." + name
		if !slices.Contains(SoftwareCCs, name) {
			return v.fail(p, "", "not a software congestion control; "+oneOf(SoftwareCCs)+" (NIC DCQCN parameters go in nic.dcqcn)")
		}
		if err := v.ccParams(p, name, m.CCParams[name]); err != nil {
			return err
		}
	}
	return nil
}

// chunkSize checks a matrix chunk size against what the engine's chunk
// planner accepts (chunk.NewPlan) and the spec's MTU and flow sizes, so a
// bad size fails here, not in every run.
func (v *validator) chunkSize(c Size) string {
	if _, err := chunk.NewPlan(c, c, 1); err != nil || c < v.s.NIC.MTU {
		return fmt.Sprintf("want a chunk size in [%s, %s], a multiple of %s (the engine's chunk planner, chunk.NewPlan)", chunk.MinSize, chunk.MaxSize, chunk.Align)
	}
	for i, w := range v.s.Workloads {
		if big := w.Size.largest(); big > chunk.MaxTensor(c) {
			return fmt.Sprintf("workloads[%d] has %s flows, more than %s chunks of %s can carry (chunk.MaxTensor); use a larger chunk", i, big, strconv.Itoa(chunk.MaxChunks), c)
		}
	}
	return ""
}

// ccParams checks an algorithm's tunables with the cc registry.
func (v *validator) ccParams(field, algo string, p map[string]string) error {
	if len(p) == 0 {
		return nil
	}
	if err := CheckCCParams(algo, p, v.ccPath()); err != nil {
		return v.fail(field, "", err.Error())
	}
	return nil
}

// ccPath is a representative path for checking CC parameters.
func (v *validator) ccPath() PathSpec {
	mtu := v.s.NIC.MTU
	if mtu == 0 {
		mtu = 4096
	}
	h := v.g.Hosts
	p, _ := v.g.Path(h[0], h[len(h)-1], mtu)
	return PathSpec{LineRate: v.g.HostRate(h[0]), BaseRTT: p.BaseRTT, MTU: mtu, Hops: max(p.Hops-1, 1)}
}

// Objective metrics: the Row columns a spec may rank on, and whether
// higher is better by default.
var objectiveMetrics = map[string]bool{
	"fct_p99_us": false, "fct_p50_us": false, "fct_mean_us": false, "fct_max_us": false,
	"slowdown_p50": false, "slowdown_p99": false, "goodput_gbps": true,
	"bg_fct_p99_us": false, "bg_slowdown_p99": false, "pfc_paused_us": false, "max_queue_bytes": false,
}

// Objective constraints.
const (
	RequireCompleted  = "completed"
	RequireNoDrops    = "no_drops"
	RequireNoPauses   = "no_pauses"
	RequireNoFailures = "no_failures"
)

var requirements = []string{RequireCompleted, RequireNoDrops, RequireNoPauses, RequireNoFailures}

func (v *validator) objective() error {
	o := &v.s.Objective
	if o.Metric == "" {
		o.Metric = "fct_p99_us"
	}
	higher, ok := objectiveMetrics[o.Metric]
	if !ok {
		return v.fail("objective.metric", o.Metric, "unknown metric; "+oneOf(sortedKeys(objectiveMetrics)))
	}
	switch o.Goal {
	case "":
		o.Goal = "min"
		if higher {
			o.Goal = "max"
		}
	case "min", "max":
	default:
		return v.fail("objective.goal", o.Goal, "allowed: min, max")
	}
	if o.Require == nil && !v.set("objective.require") {
		o.Require = []string{RequireCompleted, RequireNoDrops}
	}
	for i, r := range o.Require {
		if !slices.Contains(requirements, r) {
			return v.fail(fmt.Sprintf("objective.require[%d]", i), r, "unknown constraint; "+oneOf(requirements))
		}
	}
	return nil
}
