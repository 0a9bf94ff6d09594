package experiments

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mptx-dev/mptx/experiments/interop"
)

// InteropOptions describe a scenario given as another simulator's files.
type InteropOptions struct {
	// NS3Topology and NS3Flows are an HPCC ns-3 topology.txt and flow.txt.
	NS3Topology, NS3Flows string
	// NS3Config is an HPCC ns-3 config.txt: the NIC's congestion control
	// and its parameters, the NIC's payload, header and acknowledgements,
	// and the switches' buffer and ECN thresholds (interop.NS3Config).
	// Its TOPOLOGY_FILE and FLOW_FILE are used where NS3Topology and
	// NS3Flows are not given: as written, then relative to the config's
	// directory and to its parent (third.cc runs one level above mix/).
	NS3Config string
	// Htsim is an htsim connection matrix. Without NS3Topology it runs on
	// the smallest k-ary fat-tree with at least its node count (as htsim's
	// FatTreeTopology sizes itself).
	Htsim string
	// HostRate and LinkDelay set the generated fat-tree's links ("" for
	// 100Gbps and 1us).
	HostRate, LinkDelay string
	// MTU is the NIC payload per packet. 0 means the other simulator's:
	// ns-3's PACKET_PAYLOAD_SIZE (1000 unless the config says otherwise),
	// with its 48-byte header; htsim's 4000 with its 64-byte header.
	MTU int
	// Stop is the virtual-time limit (0: SIMULATOR_STOP_TIME, or the last
	// flow's start plus 1s).
	Stop time.Duration
}

// htsimHeader and htsimMTU are htsim's RoCE packet: 4000 bytes of payload
// behind 64 bytes of headers (csg-htsim sim/roce.h).
const (
	htsimMTU    = 4000
	htsimHeader = 64
)

// InteropSpec builds a spec from another simulator's files (validated like
// any spec, so errors name the file and line).
func InteropSpec(o InteropOptions) (*Spec, error) {
	s, _, err := InteropScenario(o)
	return s, err
}

// InteropScenario is InteropSpec that also returns notes for the user:
// lines of the files that ns-3 itself never reads, and config keys that
// have no effect here.
func InteropScenario(o InteropOptions) (*Spec, []string, error) {
	var notes []string
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		return a
	}
	var cfg *interop.NS3Config
	if o.NS3Config != "" {
		if o.Htsim != "" {
			return nil, nil, &SpecError{File: "command line", Msg: "--ns3-config describes an ns-3 scenario; it does not apply to --htsim"}
		}
		data, err := os.ReadFile(o.NS3Config)
		if err != nil {
			return nil, nil, &SpecError{File: o.NS3Config, Msg: "cannot read: " + err.Error()}
		}
		if cfg, err = interop.ParseNS3Config(bytes.NewReader(data), o.NS3Config); err != nil {
			return nil, nil, fileError(o.NS3Config, err)
		}
		for _, k := range []struct {
			flag *string
			key  string
			val  string
		}{{&o.NS3Topology, "TOPOLOGY_FILE", cfg.TopologyFile}, {&o.NS3Flows, "FLOW_FILE", cfg.FlowFile}} {
			if *k.flag != "" {
				continue
			}
			if k.val == "" {
				return nil, nil, &SpecError{File: o.NS3Config, Msg: k.key + " is not set: give it, or the file on the command line"}
			}
			p, ok := resolveNS3Path(o.NS3Config, k.val)
			if !ok {
				return nil, nil, &SpecError{File: o.NS3Config + ":" + strconv.Itoa(cfg.Line(k.key)), Msg: fmt.Sprintf("%s %s: no such file as written, next to the config, or one directory up", k.key, k.val)}
			}
			*k.flag = p
		}
		var ignored []string
		for _, k := range interop.NS3OutputKeys {
			if cfg.Line(k) > 0 {
				ignored = append(ignored, k)
			}
		}
		if len(ignored) > 0 {
			notes = append(notes, fmt.Sprintf("%s: %s have no effect here (mptx writes fct.txt with --fct-out)", o.NS3Config, strings.Join(ignored, ", ")))
		}
	}
	if (o.NS3Topology == "") != (o.NS3Flows == "") && o.Htsim == "" {
		return nil, nil, &SpecError{File: "command line", Msg: "give --ns3-topology and --ns3-flows together (or --ns3-config naming both)"}
	}
	if o.NS3Flows != "" && o.Htsim != "" {
		return nil, nil, &SpecError{File: "command line", Msg: "give ns-3 flows or an htsim matrix, not both"}
	}
	var b bytes.Buffer
	var last time.Duration
	var top *interop.NS3Topology
	mtu, header := o.MTU, 0
	switch {
	case o.NS3Topology != "":
		data, err := os.ReadFile(o.NS3Topology)
		if err != nil {
			return nil, nil, &SpecError{File: o.NS3Topology, Msg: "cannot read: " + err.Error()}
		}
		top, err = interop.ParseNS3Topology(bytes.NewReader(data), o.NS3Topology)
		if err != nil {
			return nil, nil, fileError(o.NS3Topology, err)
		}
		if top.Ignored > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d lines from line %d on follow the %d declared links; ns-3 does not read them, nor does mptx", o.NS3Topology, top.Ignored, top.IgnoredFrom, len(top.Links)))
		}
		fmt.Fprintf(&b, "name: ns3\ntopology: {kind: ns3, file: %s}\n", strconv.Quote(abs(o.NS3Topology)))
		if mtu == 0 {
			mtu = 1000 // third.cc's PACKET_PAYLOAD_SIZE default
		}
		header = interop.HeaderBytes
		if cfg != nil {
			st, err := cfg.Settings(top, o.NS3Config)
			if err != nil {
				return nil, nil, fileError(o.NS3Config, err)
			}
			if o.MTU == 0 {
				mtu = int(st.MTU)
			}
			header = int(st.Header)
			writeNS3Settings(&b, st, top)
			if o.Stop == 0 {
				o.Stop = st.Stop
			}
		}
	case o.Htsim != "":
		data, err := os.ReadFile(o.Htsim)
		if err != nil {
			return nil, nil, &SpecError{File: o.Htsim, Msg: "cannot read: " + err.Error()}
		}
		m, err := interop.ParseHtsim(bytes.NewReader(data), o.Htsim)
		if err != nil {
			return nil, nil, fileError(o.Htsim, err)
		}
		k := 2
		for k*k*k/4 < m.Nodes {
			k += 2
		}
		fmt.Fprintf(&b, "name: htsim\ntopology: {kind: fat-tree, k: %d", k)
		if o.HostRate != "" {
			fmt.Fprintf(&b, ", host_rate: %s", strconv.Quote(o.HostRate))
		}
		if o.LinkDelay != "" {
			fmt.Fprintf(&b, ", link_delay: %s", strconv.Quote(o.LinkDelay))
		}
		b.WriteString("}\n")
		for _, c := range m.Conns {
			last = max(last, c.Start)
		}
		if mtu == 0 {
			mtu = htsimMTU
		}
		header = htsimHeader
	default:
		return nil, nil, &SpecError{File: "command line", Msg: "give a spec, --ns3-topology with --ns3-flows (or --ns3-config), or --htsim"}
	}
	if cfg == nil {
		fmt.Fprintf(&b, "nic: {mtu: %d, header: %d}\n", mtu, header)
	}
	b.WriteString("workloads:\n")
	if o.NS3Flows != "" {
		data, err := os.ReadFile(o.NS3Flows)
		if err != nil {
			return nil, nil, &SpecError{File: o.NS3Flows, Msg: "cannot read: " + err.Error()}
		}
		ff, err := interop.ParseNS3FlowFile(bytes.NewReader(data), o.NS3Flows)
		if err != nil {
			return nil, nil, fileError(o.NS3Flows, err)
		}
		if ff.Ignored > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d lines from line %d on follow the %d flows the first line declares; ns-3 does not read them, nor does mptx", o.NS3Flows, ff.Ignored, ff.IgnoredFrom, len(ff.Flows)))
		}
		for _, f := range ff.Flows {
			last = max(last, f.Start)
		}
		fmt.Fprintf(&b, "  - {kind: ns3-flows, file: %s}\n", strconv.Quote(abs(o.NS3Flows)))
		if cfg != nil && !cfg.LinkDown.None() {
			fmt.Fprintf(&b, "  - {kind: failure, target: %s, down: %s}\n", strconv.Quote("link:"+ns3Name(top, cfg.LinkDown.A)+"-"+ns3Name(top, cfg.LinkDown.B)),
				(2*time.Second + cfg.LinkDown.At).String())
		}
	} else {
		fmt.Fprintf(&b, "  - {kind: htsim, file: %s}\n", strconv.Quote(abs(o.Htsim)))
	}
	stop := o.Stop
	if stop == 0 {
		stop = last + time.Second
	}
	fmt.Fprintf(&b, "stop: {time: %s}\n", stop)
	s, err := Parse("command line", b.Bytes(), os.ReadFile)
	return s, notes, err
}

// fileError turns a parser's error into a SpecError naming the file (and
// line) once.
func fileError(file string, err error) *SpecError {
	var pe *interop.ParseError
	if errors.As(err, &pe) {
		if pe.Line > 0 {
			return &SpecError{File: pe.File + ":" + strconv.Itoa(pe.Line), Msg: pe.Msg}
		}
		return &SpecError{File: pe.File, Msg: pe.Msg}
	}
	return &SpecError{File: file, Msg: err.Error()}
}

// ns3Name is the experiment graph's name of ns-3 node id: n<id> for a
// switch, h<id> for a host.
func ns3Name(top *interop.NS3Topology, id int) string {
	if top.IsSwitch(id) {
		return "n" + strconv.Itoa(id)
	}
	return "h" + strconv.Itoa(id)
}

// resolveNS3Path finds a file a config.txt names: as written (relative to
// the working directory), next to the config, or one directory above it
// (third.cc runs in simulation/, with its files under mix/).
func resolveNS3Path(config, name string) (string, bool) {
	cands := []string{name}
	if !filepath.IsAbs(name) {
		dir := filepath.Dir(config)
		cands = append(cands, filepath.Join(dir, name), filepath.Join(dir, filepath.Base(name)), filepath.Join(filepath.Dir(dir), name))
	}
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return c, true
		}
	}
	return "", false
}

// writeNS3Settings writes the nic, switch and matrix sections for st.
func writeNS3Settings(b *bytes.Buffer, st *interop.NS3Settings, top *interop.NS3Topology) {
	params := func(m map[string]string) string {
		keys := slices.Sorted(maps.Keys(m))
		var p []string
		for _, k := range keys {
			p = append(p, k+": "+strconv.Quote(m[k]))
		}
		return "{" + strings.Join(p, ", ") + "}"
	}
	alg := "dcqcn"
	if st.CC == CCNICHPCC {
		alg = "hpcc"
	}
	fmt.Fprintf(b, "nic: {mtu: %d, header: %d, ack_every: %d, cnp_interval: 0us, ack_in_data_class: %v, %s: %s}\n",
		int64(st.MTU), int64(st.Header), st.AckEvery, st.AckInDataClass, alg, params(st.CCParams))
	fmt.Fprintf(b, "switch:\n  buffer: %d\n  ecn:\n    enabled: %v\n", int64(st.Buffer), st.ECN)
	if len(st.ECNByRate) > 0 {
		b.WriteString("    by_rate:\n")
		for _, e := range st.ECNByRate {
			fmt.Fprintf(b, "      - {rate: %dbps, kmin: %d, kmax: %d, pmax: %s}\n", int64(e.Rate), int64(e.KMin), int64(e.KMax), strconv.FormatFloat(e.PMax, 'g', -1, 64))
		}
	}
	fmt.Fprintf(b, "matrix: {cc: [%s]}\n", st.CC)
}

// FCTRecords converts a run's completed flows to fct.txt records, in
// completion order (as HPCC's third.cc writes them; ties by flow id). Each
// source numbers its flows' UDP source ports from 10000 in start order and
// ns-3's destination port is kept (100 when the flow did not come from a
// flow.txt). The standalone FCT is the run's ideal completion time.
func FCTRecords(res *Result) []interop.FCTRecord {
	flows := slices.Clone(res.Flows)
	sort.SliceStable(flows, func(i, j int) bool { return flows[i].StartNs < flows[j].StartNs })
	sport := map[int]int{}
	var recs []interop.FCTRecord
	var end []int64
	for _, f := range flows {
		sp := 10000 + sport[f.Src]
		sport[f.Src]++
		if !f.Done {
			continue
		}
		dport := f.DPort
		if dport == 0 {
			dport = 100
		}
		recs = append(recs, interop.FCTRecord{Src: f.Src, Dst: f.Dst, SPort: sp, DPort: dport, Size: Size(f.Size),
			Start: time.Duration(f.StartNs), FCT: time.Duration(f.FCTNs), Standalone: time.Duration(f.IdealNs)})
		end = append(end, f.StartNs+f.FCTNs)
	}
	idx := make([]int, len(recs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return end[idx[a]] < end[idx[b]] })
	out := make([]interop.FCTRecord, len(recs))
	for i, k := range idx {
		out[i] = recs[k]
	}
	return out
}

// CompareFCT prints percentiles of completion time and slowdown of two
// fct.txt record sets side by side (ours, and another simulator's for the
// same flows), with how many flows each completed.
func CompareFCT(w io.Writer, ours, theirs []interop.FCTRecord, theirName string) {
	stats := func(rs []interop.FCTRecord) (fct, slow []float64) {
		for _, r := range rs {
			fct = append(fct, float64(r.FCT)/1e3)
			slow = append(slow, r.Slowdown())
		}
		slices.Sort(fct)
		slices.Sort(slow)
		return
	}
	of, osl := stats(ours)
	tf, ts := stats(theirs)
	fmt.Fprintf(w, "| metric | mptx | %s |\n|---|---|---|\n", theirName)
	fmt.Fprintf(w, "| flows completed | %d | %d |\n", len(ours), len(theirs))
	for _, q := range []float64{0.5, 0.95, 0.99} {
		fmt.Fprintf(w, "| FCT p%g (µs) | %s | %s |\n", q*100, num(Quantile(of, q)), num(Quantile(tf, q)))
	}
	for _, q := range []float64{0.5, 0.95, 0.99} {
		fmt.Fprintf(w, "| slowdown p%g | %s | %s |\n", q*100, num(Quantile(osl, q)), num(Quantile(ts, q)))
	}
}
