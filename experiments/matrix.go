package experiments

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
)

// ModelVersion names the simulation model's semantics. It is part of every
// run hash: bump it when a change to the simulator, driver or metrics
// would change results, so resumed sweeps do not mix old and new rows.
const ModelVersion = "mptx-exp/4"

// Policy is one point of a spec's matrix: the knobs a run compares.
type Policy struct {
	CC         string `json:"cc"`
	Paths      int    `json:"paths"`
	Chunk      Size   `json:"chunk"`
	Pacing     bool   `json:"pacing"`
	PathPolicy string `json:"path_policy"`
	// Params are matrix.cc_params[CC]; nil for defaults.
	Params map[string]string `json:"params,omitempty"`
}

// Key is the policy's full, canonical description
// ("cc=dcqcn paths=4 chunk=64KiB pacing=on path=congestion-aware").
func (p Policy) Key() string {
	return "cc=" + p.CC + " paths=" + strconv.Itoa(p.Paths) + " chunk=" + p.Chunk.String() +
		" pacing=" + onOff(p.Pacing) + " path=" + p.PathPolicy
}

// Label is a short name for tables and plot legends that shows only the
// dimensions the matrix varies ("dcqcn 4qp", "hpcc nopace"); with nothing
// varying it is the CC name.
func (p Policy) Label(m *Matrix) string {
	parts := []string{p.CC}
	if m == nil || len(m.Paths) > 1 {
		parts = append(parts, strconv.Itoa(p.Paths)+"qp")
	}
	if m == nil || len(m.Chunk) > 1 {
		parts = append(parts, p.Chunk.String())
	}
	if m == nil || len(m.Pacing) > 1 {
		if p.Pacing {
			parts = append(parts, "pace")
		} else {
			parts = append(parts, "nopace")
		}
	}
	if m == nil || len(m.PathPolicy) > 1 {
		parts = append(parts, p.PathPolicy)
	}
	if m != nil && len(m.CC) == 1 && len(parts) > 1 {
		parts = parts[1:]
	}
	return strings.Join(parts, " ")
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Size is the number of policy points the matrix holds.
func (m *Matrix) Size() int {
	return max(len(m.CC), 1) * max(len(m.Paths), 1) * max(len(m.Chunk), 1) * max(len(m.Pacing), 1) * max(len(m.PathPolicy), 1)
}

// Policies lists the matrix's points in a fixed order: cc, then paths,
// chunk, pacing and path policy, each in the order written.
func (m *Matrix) Policies() []Policy {
	var out []Policy
	for _, c := range m.CC {
		for _, n := range m.Paths {
			for _, ch := range m.Chunk {
				for _, pc := range m.Pacing {
					for _, pp := range m.PathPolicy {
						out = append(out, Policy{CC: c, Paths: n, Chunk: ch, Pacing: pc, PathPolicy: pp, Params: m.CCParams[c]})
					}
				}
			}
		}
	}
	return out
}

// Run is one (scenario, policy, seed) to execute.
type Run struct {
	Spec   *Spec
	Policy Policy
	Seed   int64
	// Index is the run's position in its spec's expansion.
	Index int
	// Hash identifies the run's inputs (see RunHash).
	Hash string
}

// Label is the run's policy label within its spec.
func (r Run) Label() string { return r.Policy.Label(&r.Spec.Matrix) }

// Expand returns the spec's runs: every sweep point × every policy point ×
// every seed, seeds innermost, hashed. A run's Spec is its sweep point.
func Expand(s *Spec) []Run {
	var runs []Run
	for _, pt := range s.Points() {
		for _, p := range pt.Matrix.Policies() {
			for _, seed := range pt.Seeds {
				runs = append(runs, Run{Spec: pt, Policy: p, Seed: seed, Index: len(runs), Hash: RunHash(pt, p, seed)})
			}
		}
	}
	return runs
}

// RunHash is the hex SHA-256 (first 16 digits) of the canonical JSON of
// everything that determines a run's result: ModelVersion, the resolved
// scenario (with the contents, not the paths, of files it read), the
// swept parameters' values, the policy point and the seed. The
// description, the objective, the rest of the matrix and sweep and the
// other seeds are not part of it, so growing a matrix or a sweep keeps
// finished runs.
func RunHash(s *Spec, p Policy, seed int64) string {
	var sweep []string
	for _, x := range s.Params {
		sweep = append(sweep, x.Name+"="+x.Value)
	}
	b, err := json.Marshal(struct {
		Model    string   `json:"model"`
		Scenario *Spec    `json:"scenario"`
		Sweep    []string `json:"sweep,omitempty"`
		Policy   Policy   `json:"policy"`
		Seed     int64    `json:"seed"`
	}{ModelVersion, s, sweep, p, seed})
	if err != nil {
		panic("experiments: BUG: spec does not marshal: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
