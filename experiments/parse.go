package experiments

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mptx-dev/mptx/experiments/interop"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/units"
)

// ParseFile reads, defaults and validates the spec at path. Errors are
// *SpecError values naming the file, line, field, bad value and what is
// allowed.
func ParseFile(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &SpecError{File: path, Msg: "cannot read spec: " + err.Error()}
	}
	return Parse(path, data, os.ReadFile)
}

// Parse parses a spec held in data; file names it in errors and anchors
// relative file references (topology.file, workloads[].file, cdf paths),
// which are read with readFile.
func Parse(file string, data []byte, readFile func(string) ([]byte, error)) (*Spec, error) {
	root, err := parseYAML(file, data)
	if err != nil {
		return nil, err
	}
	if root.kind != yMap {
		return nil, &SpecError{File: file, Line: root.pos.line, Col: root.pos.col, Msg: "a spec is a YAML mapping (name: …, topology: …, workloads: …), got " + root.kind.String()}
	}
	d := &decoder{file: file, seen: map[string]pos{}}
	s := &Spec{File: file, dir: filepath.Dir(file)}
	if err := d.decode(root, reflect.ValueOf(s).Elem(), ""); err != nil {
		return nil, err
	}
	v := &validator{d: d, s: s, read: readFile}
	if err := v.spec(); err != nil {
		return nil, err
	}
	return s, nil
}

// validator fills in defaults and checks a decoded spec. Its methods return
// the first problem as a *SpecError.
type validator struct {
	d    *decoder
	s    *Spec
	read func(string) ([]byte, error)
	g    *Graph
}

// fail reports a problem at path, positioned at path or its nearest
// ancestor that appeared in the file.
func (v *validator) fail(path, value, msg string) error {
	e := &SpecError{File: v.d.file, Field: path, Value: value, Msg: msg}
	for p := path; ; {
		if at, ok := v.d.seen[p]; ok {
			e.Line, e.Col = at.line, at.col
			break
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return e
}

// set reports whether path was written in the file.
func (v *validator) set(path string) bool { _, ok := v.d.seen[path]; return ok }

func oneOf(allowed []string) string { return "allowed: " + strings.Join(allowed, ", ") }

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

func (v *validator) spec() error {
	s := v.s
	if s.Name == "" {
		return v.fail("name", "", "required: the scenario's name (lower-case letters, digits, - and _)")
	}
	if !nameRE.MatchString(s.Name) {
		return v.fail("name", s.Name, "want lower-case letters, digits, - and _ (at most 64, starting with a letter or digit)")
	}
	if err := v.topology(); err != nil {
		return err
	}
	if err := v.switchConfig(); err != nil {
		return err
	}
	if err := v.nic(); err != nil {
		return err
	}
	if err := v.stopAndSample(); err != nil {
		return err
	}
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
	if err := v.matrix(); err != nil {
		return err
	}
	if len(s.Seeds) == 0 {
		s.Seeds = []int64{1}
	}
	if len(s.Seeds) > 10000 {
		return v.fail("seeds", strconv.Itoa(len(s.Seeds)), "at most 10000 seeds")
	}
	for i, x := range s.Seeds {
		if slices.Index(s.Seeds, x) != i {
			return v.fail(fmt.Sprintf("seeds[%d]", i), strconv.FormatInt(x, 10), "duplicate seed")
		}
	}
	if n := s.Matrix.Size() * len(s.Seeds); n > MaxRuns {
		return v.fail("matrix", strconv.Itoa(n), fmt.Sprintf("matrix × seeds makes %d runs; at most %d", n, MaxRuns))
	}
	return nil
}

// MaxRuns bounds the runs one spec may expand to.
const MaxRuns = 100000

// topoFields lists, per kind, the topology fields it takes besides kind.
var topoFields = map[string][]string{
	TopoStar:      {"hosts", "host_rate", "link_delay", "loss", "host_overrides"},
	TopoDumbbell:  {"hosts", "host_rate", "fabric_rate", "link_delay", "loss", "host_overrides"},
	TopoLeafSpine: {"leaves", "spines", "hosts_per_leaf", "host_rate", "fabric_rate", "link_delay", "loss", "host_overrides"},
	TopoFatTree:   {"k", "host_rate", "fabric_rate", "link_delay", "loss", "host_overrides"},
	TopoMultiRail: {"hosts", "rails", "hosts_per_leaf", "spines", "host_rate", "fabric_rate", "link_delay", "loss", "host_overrides"},
	TopoNS3:       {"file"},
}

func (v *validator) onlyFields(prefix, kindDesc string, t reflect.Type, allowed []string) error {
	for _, f := range yamlFields(t) {
		if f == "kind" || f == "name" || f == "class" || slices.Contains(allowed, f) {
			continue
		}
		if v.set(join(prefix, f)) {
			return v.fail(join(prefix, f), "", fmt.Sprintf("does not apply to %s; it takes: %s", kindDesc, strings.Join(allowed, ", ")))
		}
	}
	return nil
}

func (v *validator) topology() error {
	t := &v.s.Topology
	if t.Kind == "" {
		return v.fail("topology.kind", "", "required; "+oneOf(topoKinds))
	}
	if !slices.Contains(topoKinds, t.Kind) {
		return v.fail("topology.kind", t.Kind, "unknown topology; "+oneOf(topoKinds))
	}
	if err := v.onlyFields("topology", "kind "+t.Kind, reflect.TypeFor[Topology](), topoFields[t.Kind]); err != nil {
		return err
	}
	count := func(field string, x, lo, hi int) error {
		if x < lo || x > hi {
			msg := fmt.Sprintf("want a whole number in [%d, %d]", lo, hi)
			if !v.set("topology." + field) {
				return v.fail("topology."+field, "", "required for kind "+t.Kind+": "+msg)
			}
			return v.fail("topology."+field, strconv.Itoa(x), msg)
		}
		return nil
	}
	var err error
	switch t.Kind {
	case TopoStar:
		err = count("hosts", t.Hosts, 2, 4096)
	case TopoDumbbell:
		err = count("hosts", t.Hosts, 1, 4096)
	case TopoLeafSpine:
		if err = count("leaves", t.Leaves, 1, 1024); err == nil {
			if err = count("spines", t.Spines, 1, 1024); err == nil {
				err = count("hosts_per_leaf", t.HostsPerLeaf, 1, 1024)
			}
		}
		if err == nil && t.Leaves*t.HostsPerLeaf < 2 {
			err = v.fail("topology.hosts_per_leaf", strconv.Itoa(t.HostsPerLeaf), "leaves × hosts_per_leaf must be at least 2 hosts")
		}
		if err == nil && t.Leaves*t.Spines > 65536 {
			err = v.fail("topology.spines", strconv.Itoa(t.Spines), "leaves × spines must be at most 65536 fabric links")
		}
		if err == nil && t.Leaves*t.HostsPerLeaf > 65536 {
			err = v.fail("topology.hosts_per_leaf", strconv.Itoa(t.HostsPerLeaf), "leaves × hosts_per_leaf must be at most 65536 hosts")
		}
	case TopoFatTree:
		if err = count("k", t.K, 2, 64); err == nil && t.K%2 != 0 {
			err = v.fail("topology.k", strconv.Itoa(t.K), "k must be even (k pods of k/2 edge and k/2 aggregation switches)")
		}
	case TopoMultiRail:
		if t.HostsPerLeaf == 0 && !v.set("topology.hosts_per_leaf") {
			t.HostsPerLeaf = t.Hosts
		}
		if t.Spines == 0 && !v.set("topology.spines") {
			t.Spines = 1
		}
		if err = count("hosts", t.Hosts, 2, 4096); err == nil {
			if err = count("rails", t.Rails, 1, 16); err == nil {
				if err = count("hosts_per_leaf", t.HostsPerLeaf, 1, t.Hosts); err == nil {
					err = count("spines", t.Spines, 1, 64)
				}
			}
		}
	case TopoNS3:
		if t.File == "" {
			return v.fail("topology.file", "", "required for kind ns3: the HPCC ns-3 topology.txt")
		}
		data, err := v.readRef("topology.file", t.File)
		if err != nil {
			return err
		}
		ns, perr := interop.ParseNS3Topology(bytes.NewReader(data), t.File)
		if perr != nil {
			return v.fail("topology.file", t.File, perr.Error())
		}
		if len(ns.Hosts()) < 2 {
			return v.fail("topology.file", t.File, "the topology has fewer than 2 hosts")
		}
		t.NS3 = ns
	}
	if err != nil {
		return err
	}
	if t.Kind != TopoNS3 {
		if t.HostRate == 0 {
			t.HostRate = 100 * units.Gbps
		}
		if t.FabricRate == 0 {
			t.FabricRate = t.HostRate
		}
		if t.LinkDelay == 0 && !v.set("topology.link_delay") {
			t.LinkDelay = Duration(time.Microsecond)
		}
		for _, f := range []struct {
			name string
			r    Rate
		}{{"host_rate", t.HostRate}, {"fabric_rate", t.FabricRate}} {
			if f.r < units.Gbps || f.r > 1600*units.Gbps {
				return v.fail("topology."+f.name, f.r.String(), "want a rate in [1Gbps, 1600Gbps]")
			}
		}
		if !(t.Loss >= 0 && t.Loss <= 1) {
			return v.fail("topology.loss", fmtFloat(t.Loss), "want a probability in [0, 1]")
		}
		if t.LinkDelay.D() > time.Second {
			return v.fail("topology.link_delay", t.LinkDelay.String(), "want a delay in [0, 1s]")
		}
	}
	for i := range t.HostOverrides {
		o := &t.HostOverrides[i]
		f := fmt.Sprintf("topology.host_overrides[%d]", i)
		if o.Hosts.IsZero() {
			return v.fail(f+".hosts", "", "required: the hosts whose links change")
		}
		if o.Rate < units.Gbps || o.Rate > 1600*units.Gbps {
			return v.fail(f+".rate", o.Rate.String(), "want a rate in [1Gbps, 1600Gbps]")
		}
	}
	v.g = t.Graph()
	for i := range t.HostOverrides {
		o := &t.HostOverrides[i]
		if o.Hosts.All {
			o.Hosts = HostSet{IDs: slices.Clone(v.g.Hosts)}
		}
		for _, id := range o.Hosts.IDs {
			if !v.g.IsHost(id) {
				return v.fail(fmt.Sprintf("topology.host_overrides[%d].hosts", i), strconv.Itoa(id), fmt.Sprintf("no such host (hosts are %s)", HostSet{IDs: v.g.Hosts}))
			}
		}
	}
	if t.Kind == TopoNS3 {
		// One breadth-first search (a pairwise check is quadratic: it hung
		// on a 20k-host file).
		if err := t.NS3.Connected(); err != nil {
			return v.fail("topology", t.Kind, err.Error())
		}
		return nil
	}
	if h := v.g.Hosts; len(h) > 1 {
		if _, ok := v.g.Path(h[0], h[1], 4096); !ok { // generated topologies are connected; check one pair
			return v.fail("topology", t.Kind, fmt.Sprintf("hosts %d and %d are not connected", h[0], h[1]))
		}
	}
	return nil
}

// readRef reads a file the spec refers to, relative to the spec.
func (v *validator) readRef(field, name string) ([]byte, error) {
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(v.s.dir, p)
	}
	data, err := v.read(p)
	if err != nil {
		return nil, v.fail(field, name, "cannot read: "+err.Error())
	}
	return data, nil
}

func (v *validator) switchConfig() error {
	sw := &v.s.Switch
	if sw.Buffer == 0 {
		sw.Buffer = 16 * units.MiB
	}
	if sw.Buffer < 64*units.KiB || sw.Buffer > 16*units.GiB {
		return v.fail("switch.buffer", sw.Buffer.String(), "want a size in [64KiB, 16GiB]")
	}
	p := &sw.PFC
	if p.Enabled == nil {
		p.Enabled = ptr(true)
	}
	if p.Alpha == 0 {
		p.Alpha = 0.125
	}
	if !(p.Alpha > 0 && p.Alpha <= 8) {
		return v.fail("switch.pfc.alpha", fmtFloat(p.Alpha), "want a fraction of free buffer in (0, 8]")
	}
	if p.Hysteresis == 0 {
		p.Hysteresis = 3 * units.KiB
	}
	if p.XOFF != 0 && p.XOFF > sw.Buffer {
		return v.fail("switch.pfc.xoff", p.XOFF.String(), "exceeds switch.buffer "+sw.Buffer.String())
	}
	if p.XOFF != 0 && p.Hysteresis >= p.XOFF {
		return v.fail("switch.pfc.hysteresis", p.Hysteresis.String(), "must be below xoff "+p.XOFF.String())
	}
	wd := &p.Watchdog
	if wd.Threshold.D() > time.Minute {
		return v.fail("switch.pfc.watchdog.threshold", wd.Threshold.String(), "want a duration in [0, 1m]")
	}
	if wd.Threshold == 0 && (wd.Recover || wd.Restore != 0) {
		return v.fail("switch.pfc.watchdog.threshold", "", "required when the watchdog recovers or restores")
	}
	if wd.Threshold != 0 && wd.Restore == 0 {
		wd.Restore = 10 * wd.Threshold
	}
	if p.Headroom > sw.Buffer {
		return v.fail("switch.pfc.headroom", p.Headroom.String(), "exceeds switch.buffer "+sw.Buffer.String())
	}
	e := &sw.ECN
	if e.Enabled == nil {
		e.Enabled = ptr(true)
	}
	if e.PMax == 0 {
		e.PMax = 0.2
	}
	if !(e.PMax > 0 && e.PMax <= 1) {
		return v.fail("switch.ecn.pmax", fmtFloat(e.PMax), "want a probability in (0, 1]")
	}
	if (e.KMin == 0) != (e.KMax == 0) {
		field := "switch.ecn.kmax"
		if e.KMin == 0 {
			field = "switch.ecn.kmin"
		}
		return v.fail(field, "", "give both kmin and kmax, or neither (both then scale with link rate: 100KB/400KB per 25Gbps)")
	}
	if e.KMin > e.KMax {
		return v.fail("switch.ecn.kmin", e.KMin.String(), "must not exceed kmax "+e.KMax.String())
	}
	if e.KMax > sw.Buffer {
		return v.fail("switch.ecn.kmax", e.KMax.String(), "exceeds switch.buffer "+sw.Buffer.String())
	}
	for i, r := range e.ByRate {
		f := fmt.Sprintf("switch.ecn.by_rate[%d]", i)
		switch {
		case r.Rate < units.Gbps || r.Rate > 1600*units.Gbps:
			return v.fail(f+".rate", r.Rate.String(), "want a link rate in [1Gbps, 1600Gbps]")
		case r.KMin < 0 || r.KMax <= r.KMin || r.KMax > sw.Buffer:
			return v.fail(f+".kmax", r.KMax.String(), "want kmin < kmax <= switch.buffer")
		case !(r.PMax > 0 && r.PMax <= 1):
			return v.fail(f+".pmax", fmtFloat(r.PMax), "want a probability in (0, 1]")
		}
		for _, o := range e.ByRate[:i] {
			if o.Rate == r.Rate {
				return v.fail(f+".rate", r.Rate.String(), "listed twice")
			}
		}
	}
	return nil
}

func (v *validator) nic() error {
	n := &v.s.NIC
	if n.MTU == 0 {
		n.MTU = 4096
	}
	if n.MTU < 256 || n.MTU > sim.MaxMTU {
		return v.fail("nic.mtu", n.MTU.String(), fmt.Sprintf("want a payload of 256 to %d bytes", sim.MaxMTU))
	}
	if n.Header < 0 || n.Header > 1024 {
		return v.fail("nic.header", n.Header.String(), "want 0 (RoCEv2 framing) or header bytes in [1, 1024]")
	}
	if n.AckEvery == 0 {
		n.AckEvery = 4
	}
	if n.AckEvery < 1 || n.AckEvery > 65536 {
		return v.fail("nic.ack_every", strconv.Itoa(n.AckEvery), "want packets per ACK in [1, 65536]")
	}
	for _, f := range []struct {
		name string
		d    *Duration
		def  time.Duration
	}{{"cnp_interval", &n.CNPInterval, 50 * time.Microsecond}, {"nak_interval", &n.NAKInterval, 500 * time.Microsecond}} {
		if *f.d == 0 && !v.set("nic."+f.name) {
			*f.d = Duration(f.def)
		}
		if f.d.D() > time.Second {
			return v.fail("nic."+f.name, f.d.String(), "want a duration in [0, 1s]")
		}
	}
	if n.AckTimeout == 0 {
		n.AckTimeout = 14
	}
	if n.AckTimeout < -1 || n.AckTimeout > 31 {
		return v.fail("nic.ack_timeout", strconv.Itoa(n.AckTimeout), "want the exponent t of 4.096us × 2^t in [1, 31], or -1 for infinite")
	}
	if n.RetryCount == nil {
		n.RetryCount = ptr(7)
	}
	if *n.RetryCount < 0 || *n.RetryCount > 7 {
		return v.fail("nic.retry_count", strconv.Itoa(*n.RetryCount), "want retries in [0, 7]")
	}
	if n.SendQueue == 0 {
		n.SendQueue = 256
	}
	if n.SendQueue < 2 || n.SendQueue > 65536 {
		return v.fail("nic.send_queue", strconv.Itoa(n.SendQueue), "want work requests per QP in [2, 65536]")
	}
	if err := v.ccParams("nic.dcqcn", "dcqcn", n.DCQCN); err != nil {
		return err
	}
	return v.ccParams("nic.hpcc", "hpcc", n.HPCC)
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

func (v *validator) stopAndSample() error {
	st := &v.s.Stop
	if st.Time == 0 {
		st.Time = Duration(100 * time.Millisecond)
	}
	if st.Time.D() > time.Hour {
		return v.fail("stop.time", st.Time.String(), "want a virtual-time limit in (0, 1h]")
	}
	if st.MaxEvents < 0 {
		return v.fail("stop.max_events", strconv.FormatInt(st.MaxEvents, 10), "want 0 (no cap) or a positive count")
	}
	sa := &v.s.Sample
	if sa.Interval == 0 {
		sa.Interval = Duration(10 * time.Microsecond)
	}
	if sa.Interval.D() < 100*time.Nanosecond {
		return v.fail("sample.interval", sa.Interval.String(), "want at least 100ns")
	}
	if sa.Interval > st.Time {
		return v.fail("sample.interval", sa.Interval.String(), "must not exceed stop.time "+st.Time.String())
	}
	if st.Time.D()/sa.Interval.D() > 10000000 {
		return v.fail("sample.interval", sa.Interval.String(), "too fine: more than 10^7 samples per run; raise it to at least "+(st.Time.D()/10000000).String())
	}
	for _, b := range []**bool{&sa.Queues, &sa.Paths, &sa.CC} {
		if *b == nil {
			*b = ptr(true)
		}
	}
	if sa.TopQueues == 0 && !v.set("sample.top_queues") {
		sa.TopQueues = 4
	}
	if sa.TopQueues < 0 || sa.TopQueues > 64 {
		return v.fail("sample.top_queues", strconv.Itoa(sa.TopQueues), "want a whole number in [0, 64]")
	}
	return nil
}

// workFields lists, per workload kind, the fields it takes besides kind
// and name; required ones are marked with '*'.
var workFields = map[string][]string{
	WorkIncast:      {"senders*", "receiver*", "size*", "start", "repeat", "interval"},
	WorkPermutation: {"hosts", "size*", "start", "repeat", "interval", "cross_leaf"},
	WorkAllToAll:    {"hosts", "size*", "start", "repeat", "interval"},
	WorkKVCache:     {"prefill*", "decode*", "size*", "rate*", "count", "duration", "start"},
	WorkBackground:  {"hosts", "cdf*", "load*", "duration", "count", "start"},
	WorkFailure:     {"target*", "down*", "up"},
	WorkNS3Flows:    {"file*", "start"},
	WorkHtsim:       {"file*", "start"},
}

func (v *validator) workload(i int) error {
	w := &v.s.Workloads[i]
	path := fmt.Sprintf("workloads[%d]", i)
	f := func(name string) string { return path + "." + name }
	if w.Kind == "" {
		return v.fail(f("kind"), "", "required; "+oneOf(workKinds))
	}
	fields, ok := workFields[w.Kind]
	if !ok {
		return v.fail(f("kind"), w.Kind, "unknown workload; "+oneOf(workKinds))
	}
	var names []string
	for _, x := range fields {
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
	if w.Repeat < 0 || w.Repeat > 10000 {
		return v.fail(f("repeat"), strconv.Itoa(w.Repeat), "want a whole number in [1, 10000]")
	}
	if w.Repeat > 1 && w.Interval == 0 {
		return v.fail(f("interval"), "", fmt.Sprintf("required when repeat > 1: the time between the %d rounds", w.Repeat))
	}
	if w.Repeat == 0 {
		w.Repeat = 1
	}
	hosts := func(name string, h *HostSet, min int) error {
		if h.All {
			h.All, h.IDs = false, slices.Clone(v.g.Hosts)
		}
		for _, id := range h.IDs {
			if !v.g.IsHost(id) {
				return v.fail(f(name), strconv.Itoa(id), fmt.Sprintf("no such host (hosts are %s)", HostSet{IDs: v.g.Hosts}))
			}
		}
		if v.set(f(name)) && len(h.IDs) < min {
			return v.fail(f(name), h.String(), fmt.Sprintf("want at least %d hosts", min))
		}
		return nil
	}
	rounds := max(w.Repeat, 1)
	switch w.Kind {
	case WorkIncast:
		if err := hosts("senders", &w.Senders, 1); err != nil {
			return err
		}
		if !v.g.IsHost(*w.Receiver) {
			return v.fail(f("receiver"), strconv.Itoa(*w.Receiver), fmt.Sprintf("no such host (hosts are %s)", HostSet{IDs: v.g.Hosts}))
		}
		if slices.Contains(w.Senders.IDs, *w.Receiver) {
			return v.fail(f("receiver"), strconv.Itoa(*w.Receiver), "the receiver is also a sender")
		}
		if len(w.Senders.IDs)*rounds > MaxFlows {
			return v.fail(f("repeat"), strconv.Itoa(w.Repeat), fmt.Sprintf("more than %d flows", MaxFlows))
		}
	case WorkPermutation, WorkAllToAll:
		if err := hosts("hosts", &w.Hosts, 2); err != nil {
			return err
		}
		n := len(w.Hosts.IDs)
		if n == 0 {
			n = len(v.g.Hosts)
		}
		if w.Kind == WorkAllToAll && n*(n-1)*rounds > MaxFlows {
			return v.fail(f("hosts"), w.Hosts.String(), fmt.Sprintf("all-to-all over %d hosts × %d rounds is more than %d flows", n, rounds, MaxFlows))
		}
		if w.CrossLeaf {
			if v.g.Group(v.g.Hosts[0]) < 0 {
				return v.fail(f("cross_leaf"), "true", "topology kind "+v.s.Topology.Kind+" has no leaves")
			}
			ids := w.Hosts.IDs
			if len(ids) == 0 {
				ids = v.g.Hosts
			}
			per := map[int]int{}
			for _, h := range ids {
				if per[v.g.Group(h)]++; 2*per[v.g.Group(h)] > len(ids) {
					return v.fail(f("cross_leaf"), "true", fmt.Sprintf("more than half of the %d hosts share one leaf, so no cross-leaf permutation exists", len(ids)))
				}
			}
		}
	case WorkKVCache:
		if err := hosts("prefill", &w.Prefill, 1); err != nil {
			return err
		}
		if err := hosts("decode", &w.Decode, 1); err != nil {
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
	case WorkBackground:
		if err := hosts("hosts", &w.Hosts, 2); err != nil {
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
	case WorkFailure:
		if err := v.failureTarget(f("target"), w.Target); err != nil {
			return err
		}
		if w.Up != 0 && w.Up <= w.Down {
			return v.fail(f("up"), w.Up.String(), "must be after down "+w.Down.String())
		}
	case WorkNS3Flows, WorkHtsim:
		if err := v.loadFlows(f("file"), w); err != nil {
			return err
		}
	}
	if w.Count < 0 {
		return v.fail(f("count"), strconv.Itoa(w.Count), "want a whole number >= 0")
	}
	if slices.Contains(fields, "size*") {
		return v.size(f("size"), &w.Size)
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

func (v *validator) size(path string, s *SizeDist) error {
	const maxSize = units.TiB
	inRange := func(field string, b Size) error {
		if b <= 0 || b > maxSize {
			return v.fail(join(path, field), b.String(), "want a size in [1B, 1TiB]")
		}
		return nil
	}
	allowed := map[string][]string{
		DistFixed:     {},
		DistUniform:   {"dist", "min", "max"},
		DistLognormal: {"dist", "median", "sigma", "min", "max"},
		DistCDF:       {"dist", "cdf"},
	}
	if s.Dist == "" {
		return v.fail(join(path, "dist"), "", "required; "+oneOf(dists))
	}
	keys, ok := allowed[s.Dist]
	if !ok || (s.Dist == DistFixed && v.set(join(path, "dist"))) {
		return v.fail(join(path, "dist"), s.Dist, "unknown distribution; "+oneOf(dists[1:])+" (write a fixed size as size: 4MiB)")
	}
	if err := v.onlyFields(path, "dist "+s.Dist, reflect.TypeFor[SizeDist](), keys); err != nil {
		return err
	}
	switch s.Dist {
	case DistFixed:
		if s.Value <= 0 || s.Value > maxSize {
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
	case DistCDF:
		pts, err := v.cdf(join(path, "cdf"), s.CDF)
		if err != nil {
			return err
		}
		s.CDFData = pts
	}
	return nil
}

// failureTarget checks "link:A-B" and "nic:hN[.P]" against the graph.
func (v *validator) failureTarget(field, t string) error {
	kind, rest, _ := strings.Cut(t, ":")
	switch kind {
	case "link":
		a, b, ok := v.g.SplitLink(rest)
		if !ok {
			return v.fail(field, t, fmt.Sprintf("want link:A-B naming two nodes (%s), e.g. link:leaf0-spine1", v.g.nodeNames()))
		}
		if _, ok := v.g.FindLink(a, b); !ok {
			return v.fail(field, t, fmt.Sprintf("%s and %s are not linked", a, b))
		}
		return nil
	case "nic":
		host, port, hasPort := strings.Cut(rest, ".")
		i, ok := v.g.Node(host)
		if !ok || v.g.Nodes[i].Switch {
			return v.fail(field, t, fmt.Sprintf("no host %q (%s)", host, v.g.nodeNames()))
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
func (v *validator) loadFlows(field string, w *Workload) error {
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

func (v *validator) matrix() error {
	m := &v.s.Matrix
	if len(m.CC) == 0 {
		m.CC = []string{"dcqcn"}
	}
	if len(m.Paths) == 0 {
		m.Paths = []int{1}
	}
	if len(m.Chunk) == 0 {
		m.Chunk = []Size{64 * units.KiB}
	}
	if len(m.Pacing) == 0 {
		m.Pacing = []bool{true}
	}
	if len(m.PathPolicy) == 0 {
		m.PathPolicy = []string{PathPolicies[0]}
	}
	for i, c := range m.CC {
		p := fmt.Sprintf("matrix.cc[%d]", i)
		if !slices.Contains(CCNames, c) {
			return v.fail(p, c, "unknown congestion control; "+oneOf(CCNames))
		}
		if slices.Index(m.CC, c) != i {
			return v.fail(p, c, "listed twice")
		}
	}
	for i, n := range m.Paths {
		p := fmt.Sprintf("matrix.paths[%d]", i)
		if n < 1 || n > 64 {
			return v.fail(p, strconv.Itoa(n), "want queue pairs per connection in [1, 64]")
		}
		if slices.Index(m.Paths, n) != i {
			return v.fail(p, strconv.Itoa(n), "listed twice")
		}
	}
	for i, c := range m.Chunk {
		p := fmt.Sprintf("matrix.chunk[%d]", i)
		if c < v.s.NIC.MTU || c > units.GiB {
			return v.fail(p, c.String(), fmt.Sprintf("want a chunk size in [nic.mtu (%s), 1GiB]", v.s.NIC.MTU))
		}
		if slices.Index(m.Chunk, c) != i {
			return v.fail(p, c.String(), "listed twice")
		}
	}
	for i, b := range m.Pacing {
		if slices.Index(m.Pacing, b) != i {
			return v.fail(fmt.Sprintf("matrix.pacing[%d]", i), strconv.FormatBool(b), "listed twice")
		}
	}
	for i, pp := range m.PathPolicy {
		p := fmt.Sprintf("matrix.path_policy[%d]", i)
		if !slices.Contains(PathPolicies, pp) {
			return v.fail(p, pp, "unknown path policy; "+oneOf(PathPolicies))
		}
		if slices.Index(m.PathPolicy, pp) != i {
			return v.fail(p, pp, "listed twice")
		}
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

// article prefixes a or an.
func article(w string) string {
	if strings.ContainsRune("aeiou", rune(w[0])) {
		return "an " + w
	}
	return "a " + w
}

func ptr[T any](x T) *T { return &x }

func fmtFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return fmt.Sprint(f)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
