package experiments

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/mptx-dev/mptx/experiments/interop"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/units"
)

// workKind is the table entry of one workload kind: the fields it takes
// besides kind and name (required ones marked '*') and its own checks.
type workKind struct {
	fields []string
	check  func(v *validator, w *Workload, f func(string) string) error
}

var workTable = map[string]workKind{
	WorkIncast:      {fields: []string{"senders*", "receiver*", "size*", "start", "repeat", "interval", "pull"}, check: (*validator).incast},
	WorkPermutation: {fields: []string{"hosts", "size*", "start", "repeat", "interval", "cross_leaf", "pull"}, check: (*validator).pattern},
	WorkAllToAll:    {fields: []string{"hosts", "size*", "start", "repeat", "interval", "pull"}, check: (*validator).pattern},
	WorkKVCache:     {fields: []string{"prefill*", "decode*", "size*", "rate*", "count", "duration", "start", "pull"}, check: (*validator).kvcache},
	WorkBackground:  {fields: []string{"hosts", "cdf*", "load*", "duration", "count", "start"}, check: (*validator).background},
	WorkFailure:     {fields: []string{"target*", "down*", "up"}, check: (*validator).failure},
	WorkNS3Flows:    {fields: []string{"file*", "start"}, check: (*validator).loadFlows},
	WorkHtsim:       {fields: []string{"file*", "start"}, check: (*validator).loadFlows},
}

func (v *validator) workloads() error {
	s := v.s
	if len(s.Workloads) == 0 {
		return v.fail("workloads", "", "required: at least one workload ("+oneOf(workKinds)+")")
	}
	traffic := false
	for i := range s.Workloads {
		if err := v.workload(i); err != nil {
			return err
		}
		traffic = traffic || s.Workloads[i].Kind != WorkFailure
	}
	if !traffic {
		return v.fail("workloads", "", "only failure workloads: add one that moves data")
	}
	return nil
}

func (v *validator) workload(i int) error {
	w := &v.s.Workloads[i]
	path := fmt.Sprintf("workloads[%d]", i)
	f := func(name string) string { return path + "." + name }
	if w.Kind == "" {
		return v.fail(f("kind"), "", "required; "+oneOf(workKinds))
	}
	k, ok := workTable[w.Kind]
	if !ok {
		return v.fail(f("kind"), w.Kind, "unknown workload; "+oneOf(workKinds))
	}
	var names []string
	for _, x := range k.fields {
		name := strings.TrimSuffix(x, "*")
		names = append(names, name)
		if name != x && !v.set(f(name)) {
			return v.fail(f(name), "", "required for "+article(w.Kind)+" workload")
		}
	}
	if err := v.onlyFields(path, article(w.Kind)+" workload", reflect.TypeFor[Workload](), names); err != nil {
		return err
	}
	if w.Name == "" {
		w.Name = w.Kind
	}
	if w.Class == "" {
		w.Class = ClassTensor
		if w.Kind == WorkBackground {
			w.Class = ClassBackground
		}
	}
	if w.Class != ClassTensor && w.Class != ClassBackground {
		return v.fail(f("class"), w.Class, oneOf([]string{ClassTensor, ClassBackground}))
	}
	if w.Kind == WorkFailure && v.set(f("class")) {
		return v.fail(f("class"), w.Class, "does not apply to a failure workload")
	}
	if w.Priority < 0 || w.Priority > int(multipath.MaxPriority) {
		return v.fail(f("priority"), strconv.Itoa(w.Priority), fmt.Sprintf("want a transfer priority class in [0, %d] (0 the default, higher served first)", multipath.MaxPriority))
	}
	if w.Connection != "" && w.Connection != ConnTensor && w.Connection != ConnBackground {
		return v.fail(f("connection"), w.Connection, oneOf([]string{ConnTensor, ConnBackground}))
	}
	if w.Kind == WorkFailure && (v.set(f("priority")) || v.set(f("connection"))) {
		return v.fail(f("priority"), strconv.Itoa(w.Priority), "does not apply to a failure workload (nor does connection)")
	}
	if w.Repeat < 0 || w.Repeat > 10000 {
		return v.fail(f("repeat"), strconv.Itoa(w.Repeat), "want a whole number in [1, 10000]")
	}
	if w.Repeat > 1 && w.Interval == 0 {
		return v.fail(f("interval"), "", fmt.Sprintf("required when repeat > 1: the time between the %d rounds", w.Repeat))
	}
	if w.Repeat == 0 {
		w.Repeat = 1
	}
	if err := k.check(v, w, f); err != nil {
		return err
	}
	if w.Count < 0 {
		return v.fail(f("count"), strconv.Itoa(w.Count), "want a whole number >= 0")
	}
	if slices.Contains(k.fields, "size*") {
		return v.size(f("size"), &w.Size)
	}
	return nil
}

// hosts resolves "all" and checks a host set against the graph.
func (v *validator) hosts(field string, h *HostSet, min int) error {
	if h.All {
		h.All, h.IDs = false, slices.Clone(v.g.Hosts)
	}
	for _, id := range h.IDs {
		if !v.g.IsHost(id) {
			return v.fail(field, strconv.Itoa(id), fmt.Sprintf("no such host (hosts are %s)", HostSet{IDs: v.g.Hosts}))
		}
	}
	if v.set(field) && len(h.IDs) < min {
		return v.fail(field, h.String(), fmt.Sprintf("want at least %d hosts", min))
	}
	return nil
}

func (v *validator) incast(w *Workload, f func(string) string) error {
	if err := v.hosts(f("senders"), &w.Senders, 1); err != nil {
		return err
	}
	if !v.g.IsHost(*w.Receiver) {
		return v.fail(f("receiver"), strconv.Itoa(*w.Receiver), fmt.Sprintf("no such host (hosts are %s)", HostSet{IDs: v.g.Hosts}))
	}
	if slices.Contains(w.Senders.IDs, *w.Receiver) {
		return v.fail(f("receiver"), strconv.Itoa(*w.Receiver), "the receiver is also a sender")
	}
	if len(w.Senders.IDs)*w.Repeat > MaxFlows {
		return v.fail(f("repeat"), strconv.Itoa(w.Repeat), fmt.Sprintf("more than %d flows", MaxFlows))
	}
	return nil
}

// pattern checks permutation and all-to-all.
func (v *validator) pattern(w *Workload, f func(string) string) error {
	if err := v.hosts(f("hosts"), &w.Hosts, 2); err != nil {
		return err
	}
	ids := w.Hosts.IDs
	if len(ids) == 0 {
		ids = v.g.Hosts
	}
	n := len(ids)
	if w.Kind == WorkAllToAll && n*(n-1)*w.Repeat > MaxFlows {
		return v.fail(f("hosts"), w.Hosts.String(), fmt.Sprintf("all-to-all over %d hosts × %d rounds is more than %d flows", n, w.Repeat, MaxFlows))
	}
	if !w.CrossLeaf {
		return nil
	}
	if v.g.Group(v.g.Hosts[0]) < 0 {
		return v.fail(f("cross_leaf"), "true", "topology kind "+v.s.Topology.Kind+" has no leaves")
	}
	per := map[int]int{}
	for _, h := range ids {
		if per[v.g.Group(h)]++; 2*per[v.g.Group(h)] > n {
			return v.fail(f("cross_leaf"), "true", fmt.Sprintf("more than half of the %d hosts share one leaf, so no cross-leaf permutation exists", n))
		}
	}
	return nil
}

func (v *validator) kvcache(w *Workload, f func(string) string) error {
	if err := v.hosts(f("prefill"), &w.Prefill, 1); err != nil {
		return err
	}
	if err := v.hosts(f("decode"), &w.Decode, 1); err != nil {
		return err
	}
	if len(w.Decode.IDs) == 1 && slices.Contains(w.Prefill.IDs, w.Decode.IDs[0]) {
		return v.fail(f("decode"), w.Decode.String(), "the only decode host is also a prefill host: it would send to itself")
	}
	if !(w.Rate > 0 && w.Rate <= 1e9) {
		return v.fail(f("rate"), fmtFloat(w.Rate), "want requests per second in (0, 1e9]")
	}
	if w.Count == 0 && w.Duration == 0 {
		return v.fail(f("count"), "", "give count (requests) or duration (arrival window), or both")
	}
	return nil
}

func (v *validator) background(w *Workload, f func(string) string) error {
	if err := v.hosts(f("hosts"), &w.Hosts, 2); err != nil {
		return err
	}
	if !(w.Load > 0 && w.Load <= 1) {
		return v.fail(f("load"), fmtFloat(w.Load), "want a fraction of each host's link rate in (0, 1]")
	}
	if w.Count == 0 && w.Duration == 0 {
		return v.fail(f("duration"), "", "give duration (arrival window) or count (flows), or both")
	}
	pts, err := v.cdf(f("cdf"), w.CDF)
	if err != nil {
		return err
	}
	w.CDFData = pts
	return nil
}

func (v *validator) failure(w *Workload, f func(string) string) error {
	if err := v.failureTarget(f("target"), w.Target); err != nil {
		return err
	}
	if w.Up != 0 && w.Up <= w.Down {
		return v.fail(f("up"), w.Up.String(), "must be after down "+w.Down.String())
	}
	return nil
}

func (v *validator) cdf(field, name string) ([]CDFPoint, error) {
	if pts, ok := BuiltinCDF(name); ok {
		return pts, nil
	}
	if name == "" || !strings.ContainsAny(name, "./") {
		return nil, v.fail(field, name, "want a shipped CDF ("+strings.Join(BuiltinCDFs, ", ")+") or a file path")
	}
	data, err := v.readRef(field, name)
	if err != nil {
		return nil, err
	}
	pts, perr := ParseCDF(bytes.NewReader(data), name)
	if perr != nil {
		return nil, v.fail(field, name, perr.Error())
	}
	return pts, nil
}

var dists = []string{DistFixed, DistUniform, DistLognormal, DistCDF}

// distFields lists the fields each size distribution takes.
var distFields = map[string][]string{
	DistFixed:     {},
	DistUniform:   {"dist", "min", "max"},
	DistLognormal: {"dist", "median", "sigma", "min", "max"},
	DistCDF:       {"dist", "cdf"},
}

// maxFlowSize bounds one flow's size.
const maxFlowSize = units.TiB

func (v *validator) size(path string, s *SizeDist) error {
	inRange := func(field string, b Size) error {
		if b <= 0 || b > maxFlowSize {
			return v.fail(join(path, field), b.String(), "want a size in [1B, 1TiB]")
		}
		return nil
	}
	if s.Dist == "" {
		return v.fail(join(path, "dist"), "", "required; "+oneOf(dists))
	}
	keys, ok := distFields[s.Dist]
	if !ok || (s.Dist == DistFixed && v.set(join(path, "dist"))) {
		return v.fail(join(path, "dist"), s.Dist, "unknown distribution; "+oneOf(dists[1:])+" (write a fixed size as size: 4MiB)")
	}
	if err := v.onlyFields(path, "dist "+s.Dist, reflect.TypeFor[SizeDist](), keys); err != nil {
		return err
	}
	switch s.Dist {
	case DistFixed:
		if s.Value <= 0 || s.Value > maxFlowSize {
			return v.fail(path, s.Value.String(), "want a size in [1B, 1TiB]")
		}
	case DistUniform:
		if err := inRange("min", s.Min); err != nil {
			return err
		}
		if err := inRange("max", s.Max); err != nil {
			return err
		}
		if s.Max < s.Min {
			return v.fail(join(path, "max"), s.Max.String(), "must not be below min "+s.Min.String())
		}
	case DistLognormal:
		if err := inRange("median", s.Median); err != nil {
			return err
		}
		if !(s.Sigma >= 0 && s.Sigma <= 5) {
			return v.fail(join(path, "sigma"), fmtFloat(s.Sigma), "want the log-space standard deviation in [0, 5]")
		}
		if s.Max != 0 && s.Max < max(s.Min, 1) {
			return v.fail(join(path, "max"), s.Max.String(), "must not be below min")
		}
		if s.Max > maxFlowSize {
			return v.fail(join(path, "max"), s.Max.String(), "want a size in [1B, 1TiB]")
		}
	case DistCDF:
		pts, err := v.cdf(join(path, "cdf"), s.CDF)
		if err != nil {
			return err
		}
		s.CDFData = pts
	}
	return nil
}

// largest returns the largest flow the distribution can draw (0 when it
// has no bound: an unbounded lognormal).
func (s *SizeDist) largest() Size {
	switch s.Dist {
	case DistFixed:
		return s.Value
	case DistUniform:
		return s.Max
	case DistLognormal:
		return s.Max
	case DistCDF:
		if n := len(s.CDFData); n > 0 {
			return sizeOf(s.CDFData[n-1].Bytes)
		}
	}
	return 0
}

// failureTarget checks "link:A-B" and "nic:hN[.P]" against the graph.
func (v *validator) failureTarget(field, t string) error {
	kind, rest, _ := strings.Cut(t, ":")
	switch kind {
	case "link":
		a, b, ok := v.g.SplitLink(rest)
		if !ok {
			return v.fail(field, t, fmt.Sprintf("want link:A-B naming two nodes (%s), e.g. link:leaf0-spine1", v.g.NodeNames()))
		}
		if _, ok := v.g.FindLink(a, b); !ok {
			return v.fail(field, t, fmt.Sprintf("%s and %s are not linked", a, b))
		}
		return nil
	case "nic":
		host, port, hasPort := strings.Cut(rest, ".")
		i, ok := v.g.Node(host)
		if !ok || v.g.Nodes[i].Switch {
			return v.fail(field, t, fmt.Sprintf("no host %q (%s)", host, v.g.NodeNames()))
		}
		if hasPort {
			p, err := strconv.Atoi(port)
			if err != nil || p < 0 || p >= v.g.NICs {
				return v.fail(field, t, fmt.Sprintf("NIC index must be in [0, %d)", v.g.NICs))
			}
		}
		return nil
	}
	return v.fail(field, t, "want link:A-B (e.g. link:leaf0-spine1) or nic:hN (e.g. nic:h3, nic:h3.1 for a host's second NIC)")
}

// loadFlows reads an ns-3 flow.txt or htsim matrix into w.Loaded.
func (v *validator) loadFlows(w *Workload, f func(string) string) error {
	field := f("file")
	data, err := v.readRef(field, w.File)
	if err != nil {
		return err
	}
	check := func(src, dst int) error {
		for _, h := range []int{src, dst} {
			if !v.g.IsHost(h) {
				return v.fail(field, w.File, fmt.Sprintf("flow %d->%d: node %d is not a host of the topology (hosts are %s)", src, dst, h, HostSet{IDs: v.g.Hosts}))
			}
		}
		return nil
	}
	if w.Kind == WorkNS3Flows {
		flows, perr := interop.ParseNS3Flows(bytes.NewReader(data), w.File)
		if perr != nil {
			return v.fail(field, w.File, perr.Error())
		}
		for _, fl := range flows {
			if err := check(fl.Src, fl.Dst); err != nil {
				return err
			}
			w.Loaded = append(w.Loaded, Flow{Src: fl.Src, Dst: fl.Dst, Size: fl.Size, Start: fl.Start, Class: ClassTensor, PG: fl.PG, DPort: fl.DPort})
		}
		return nil
	}
	m, perr := interop.ParseHtsim(bytes.NewReader(data), w.File)
	if perr != nil {
		return v.fail(field, w.File, perr.Error())
	}
	idx := map[int]int{} // htsim trigger id → 1-based index
	for i, t := range m.Triggers {
		idx[t.ID] = i + 1
		w.LoadedTriggers = append(w.LoadedTriggers, Trigger{Count: t.Count})
	}
	for _, c := range m.Conns {
		if err := check(c.Src, c.Dst); err != nil {
			return err
		}
		fl := Flow{Src: c.Src, Dst: c.Dst, Size: c.Size, Start: c.Start, Class: ClassTensor, Trigger: idx[c.Trigger]}
		if c.Trigger != 0 {
			fl.Start = 0
		}
		for _, t := range []int{c.SendDoneTrigger, c.RecvDoneTrigger} {
			if t != 0 {
				fl.Signals = append(fl.Signals, idx[t])
			}
		}
		w.Loaded = append(w.Loaded, fl)
	}
	return nil
}
