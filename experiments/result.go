package experiments

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Row is one run's metrics: one line of results.jsonl and results.csv.
// Column names carry their units. Tensor metrics cover the scenario's
// non-background flows; Bg* cover background flows.
type Row struct {
	Scenario   string `json:"scenario"`
	Hash       string `json:"hash"`
	Seed       int64  `json:"seed"`
	Version    string `json:"version"`
	Index      int    `json:"index"` // run index within the scenario's expansion
	Policy     string `json:"policy"`
	CC         string `json:"cc"`
	Paths      int    `json:"paths"`
	ChunkBytes int64  `json:"chunk_bytes"`
	Pacing     bool   `json:"pacing"`
	PathPolicy string `json:"path_policy"`
	// Params are the run's sweep point. In results.csv and results.jsonl
	// each is its own column (Param.Column), placed here.
	Params []Param `json:"params,omitempty"`

	Flows     int `json:"flows"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`

	FCTP50Us    float64 `json:"fct_p50_us"`
	FCTP99Us    float64 `json:"fct_p99_us"`
	FCTMaxUs    float64 `json:"fct_max_us"`
	FCTMeanUs   float64 `json:"fct_mean_us"`
	SlowdownP50 float64 `json:"slowdown_p50"`
	SlowdownP99 float64 `json:"slowdown_p99"`
	// GoodputGbps is tensor bytes delivered over the span from the first
	// tensor flow's start to the last one's completion.
	GoodputGbps float64 `json:"goodput_gbps"`

	BgFlows       int     `json:"bg_flows"`
	BgCompleted   int     `json:"bg_completed"`
	BgFCTP50Us    float64 `json:"bg_fct_p50_us"`
	BgFCTP99Us    float64 `json:"bg_fct_p99_us"`
	BgSlowdownP99 float64 `json:"bg_slowdown_p99"`

	PFCPauses     uint64  `json:"pfc_pause_frames"`
	PFCPausedUs   float64 `json:"pfc_paused_us"` // summed over ports
	ECNMarks      uint64  `json:"ecn_marks"`
	CNPs          uint64  `json:"cnps"`
	Drops         uint64  `json:"drops"`
	RetxBytes     int64   `json:"retx_bytes"`
	MaxQueueBytes int64   `json:"max_queue_bytes"`

	// TxData, TxAck, TxCNP and TxPFC are the link transmissions of the
	// run: frames of each kind (ACK counts ACKs and NAKs) summed over
	// every port that sent them, one per link crossed, so that a run can
	// be put next to another simulator's on equal work.
	TxData uint64 `json:"tx_data_frames"`
	TxAck  uint64 `json:"tx_ack_frames"`
	TxCNP  uint64 `json:"tx_cnp_frames"`
	TxPFC  uint64 `json:"tx_pfc_frames"`

	SimTimeUs float64 `json:"sim_time_us"` // virtual time the run ended at
	Events    uint64  `json:"events"`
	// WallMs is the run's wall-clock time; it is the one field that varies
	// between identical runs, and comparisons ignore it.
	WallMs float64 `json:"wall_ms"`
}

// FlowResult is one flow's outcome.
type FlowResult struct {
	ID      int    `json:"id"`
	Src     int    `json:"src"`
	Dst     int    `json:"dst"`
	Size    int64  `json:"size"`
	Class   string `json:"class"`
	StartNs int64  `json:"start_ns"`
	// FCTNs is the completion time; 0 if the flow did not complete.
	FCTNs int64 `json:"fct_ns"`
	// IdealNs is the flow's completion time alone on an empty path (HPCC's
	// standalone FCT: base RTT + bytes with headers / bottleneck rate).
	IdealNs int64 `json:"ideal_ns"`
	Done    bool  `json:"done"`
	// Err says why the flow failed (empty if it completed or was still
	// running when the run stopped).
	Err string `json:"err,omitempty"`
	// PG and DPort come from ns-3 flow files, for fct.txt.
	PG    int `json:"pg,omitempty"`
	DPort int `json:"dport,omitempty"`
}

// Trace is one sampled time series: V[i] at T[i] microseconds.
type Trace struct {
	Name string    `json:"name"`
	T    []float64 `json:"t_us"`
	V    []float64 `json:"v"`
}

// Series are a run's sampled time series, for plots.
type Series struct {
	IntervalUs float64 `json:"interval_us"`
	// Throughput is per path (per connection and QP) in Gbit/s: payload
	// the path's receiver accepted in order, averaged over 5 intervals.
	Throughput []Trace `json:"throughput_gbps,omitempty"`
	// Queues are the deepest switch egress queues, in bytes.
	Queues []Trace `json:"queue_bytes,omitempty"`
	// Window (bytes) and Rate (Gbit/s) are per path of the first tensor
	// connection.
	Window []Trace `json:"window_bytes,omitempty"`
	Rate   []Trace `json:"rate_gbps,omitempty"`
}

// Result is everything one run produces.
type Result struct {
	Row         Row    `json:"row"`
	Description string `json:"description,omitempty"`
	// Objective is the spec's objective when the run was made (summaries
	// rank by it; it is not part of the run's hash).
	Objective *Objective   `json:"objective,omitempty"`
	Flows     []FlowResult `json:"flows"`
	Series    *Series      `json:"series,omitempty"`
}

// Version is this build's identity for rows: ModelVersion plus the module
// version or VCS revision when the binary carries them.
func Version() string {
	v := ModelVersion
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return v + "+" + s.Value[:12]
			}
		}
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return v + "+" + bi.Main.Version
		}
	}
	return v
}

// NewRow fills a row's identity columns for run r.
func NewRow(r Run) Row {
	return Row{
		Scenario: r.Spec.Name, Hash: r.Hash, Seed: r.Seed, Version: Version(), Index: r.Index,
		Policy: r.Label(), CC: r.Policy.CC, Paths: r.Policy.Paths, ChunkBytes: int64(r.Policy.Chunk),
		Pacing: r.Policy.Pacing, PathPolicy: r.Policy.PathPolicy, Params: slices.Clone(r.Spec.Params),
	}
}

// Summarise fills the row's flow metrics from flows.
func (row *Row) Summarise(flows []FlowResult) {
	var fct, slow, bgFCT, bgSlow []float64
	var bytes int64
	first, last := int64(math.MaxInt64), int64(0)
	for _, f := range flows {
		bg := f.Class == ClassBackground
		if bg {
			row.BgFlows++
		} else {
			row.Flows++
			first = min(first, f.StartNs)
		}
		if !f.Done {
			continue
		}
		us := float64(f.FCTNs) / 1e3
		sd := 0.0
		if f.IdealNs > 0 {
			sd = float64(f.FCTNs) / float64(f.IdealNs)
		}
		if bg {
			row.BgCompleted++
			bgFCT, bgSlow = append(bgFCT, us), append(bgSlow, sd)
			continue
		}
		row.Completed++
		fct, slow = append(fct, us), append(slow, sd)
		bytes += f.Size
		last = max(last, f.StartNs+f.FCTNs)
	}
	row.Failed = row.Flows - row.Completed
	slices.Sort(fct)
	slices.Sort(slow)
	slices.Sort(bgFCT)
	slices.Sort(bgSlow)
	row.FCTP50Us, row.FCTP99Us = Quantile(fct, 0.5), Quantile(fct, 0.99)
	if len(fct) > 0 {
		row.FCTMaxUs = fct[len(fct)-1]
		var s float64
		for _, x := range fct {
			s += x
		}
		row.FCTMeanUs = s / float64(len(fct))
	}
	row.SlowdownP50, row.SlowdownP99 = Quantile(slow, 0.5), Quantile(slow, 0.99)
	if last > first {
		row.GoodputGbps = float64(bytes) * 8 / float64(last-first)
	}
	row.BgFCTP50Us, row.BgFCTP99Us = Quantile(bgFCT, 0.5), Quantile(bgFCT, 0.99)
	row.BgSlowdownP99 = Quantile(bgSlow, 0.99)
}

// Quantile returns the q-quantile of sorted xs (nearest rank), 0 if empty.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// SortResults orders results by scenario, run index and seed.
func SortResults(rs []*Result) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i].Row, rs[j].Row
		if a.Scenario != b.Scenario {
			return a.Scenario < b.Scenario
		}
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		return a.Seed < b.Seed
	})
}

// paramColumns lists the sweep columns of rows: every parameter's column,
// in order of first appearance.
func paramColumns(rows []Row) []Param {
	var out []Param
	for _, r := range rows {
		for _, p := range r.Params {
			if !slices.ContainsFunc(out, func(q Param) bool { return q.Column() == p.Column() }) {
				out = append(out, p)
			}
		}
	}
	return out
}

// paramCell is a row's value of a sweep column ("" when the row's
// scenario does not sweep it): X in the column's unit, or the value as
// written for text.
func paramCell(r *Row, col string) (string, bool) {
	for _, p := range r.Params {
		if p.Column() == col {
			if p.Kind == ParamText {
				return p.Value, true
			}
			return strconv.FormatFloat(p.X, 'g', 10, 64), true
		}
	}
	return "", false
}

// WriteJSONL writes one JSON object per row, with the row's fields and a
// field per sweep column (after path_policy), not the params list.
func WriteJSONL(w io.Writer, rows []Row) error {
	for i := range rows {
		r := rows[i]
		params := r.Params
		r.Params = nil
		b, err := json.Marshal(&r)
		if err != nil {
			return err
		}
		var extra bytes.Buffer
		for _, p := range params {
			k, _ := json.Marshal(p.Column())
			extra.WriteByte(',')
			extra.Write(k)
			extra.WriteByte(':')
			if p.Kind == ParamText {
				v, _ := json.Marshal(p.Value)
				extra.Write(v)
			} else {
				extra.WriteString(strconv.FormatFloat(p.X, 'g', -1, 64))
			}
		}
		at := bytes.Index(b, []byte(`,"flows":`))
		if at < 0 {
			return fmt.Errorf("experiments: BUG: row JSON lacks flows: %s", b)
		}
		line := slices.Concat(b[:at], extra.Bytes(), b[at:], []byte("\n"))
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	return nil
}

// CSVHeader lists the CSV columns: Row's JSON names, in field order, with
// the sweep columns of params after path_policy.
func CSVHeader(params []Param) []string {
	t := reflect.TypeFor[Row]()
	var h []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "params" {
			for _, p := range params {
				h = append(h, p.Column())
			}
			continue
		}
		h = append(h, name)
	}
	return h
}

// WriteCSV writes a header and one line per row; a row whose scenario
// does not sweep a column leaves it empty.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	params := paramColumns(rows)
	if err := cw.Write(CSVHeader(params)); err != nil {
		return err
	}
	for i := range rows {
		v := reflect.ValueOf(rows[i])
		var rec []string
		for j := range v.NumField() {
			if v.Type().Field(j).Name == "Params" {
				for _, p := range params {
					c, _ := paramCell(&rows[i], p.Column())
					rec = append(rec, c)
				}
				continue
			}
			rec = append(rec, csvCell(v.Field(j)))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func csvCell(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', 10, 64)
	}
	panic(fmt.Sprintf("experiments: BUG: CSV cell of kind %s", v.Kind()))
}

// Rows extracts the rows of results.
func Rows(rs []*Result) []Row {
	out := make([]Row, len(rs))
	for i, r := range rs {
		out[i] = r.Row
	}
	return out
}

// wallMs converts a wall-clock duration for Row.WallMs.
func wallMs(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }
