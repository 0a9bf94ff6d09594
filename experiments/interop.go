package experiments

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/mptx-dev/mptx/experiments/interop"
)

// InteropOptions describe a scenario given as another simulator's files.
type InteropOptions struct {
	// NS3Topology and NS3Flows are an HPCC ns-3 topology.txt and flow.txt.
	NS3Topology, NS3Flows string
	// Htsim is an htsim connection matrix. Without NS3Topology it runs on
	// the smallest k-ary fat-tree with at least its node count (as htsim's
	// FatTreeTopology sizes itself).
	Htsim string
	// HostRate and LinkDelay set the generated fat-tree's links ("" for
	// 100Gbps and 1us).
	HostRate, LinkDelay string
	// MTU is the NIC payload per packet (0: 1024, the IB MTU nearest
	// HPCC's usual 1000-byte payload).
	MTU int
	// Stop is the virtual-time limit (0: the last flow's start plus 1s).
	Stop time.Duration
}

// InteropSpec builds a spec from another simulator's files (validated like
// any spec, so errors name the file and line).
func InteropSpec(o InteropOptions) (*Spec, error) {
	if (o.NS3Topology == "") != (o.NS3Flows == "") && o.Htsim == "" {
		return nil, &SpecError{File: "command line", Msg: "give --ns3-topology and --ns3-flows together"}
	}
	if o.NS3Flows != "" && o.Htsim != "" {
		return nil, &SpecError{File: "command line", Msg: "give ns-3 flows or an htsim matrix, not both"}
	}
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		return a
	}
	mtu := o.MTU
	if mtu == 0 {
		mtu = 1024
	}
	var b bytes.Buffer
	var last time.Duration
	switch {
	case o.NS3Topology != "":
		fmt.Fprintf(&b, "name: ns3\ntopology: {kind: ns3, file: %s}\n", strconv.Quote(abs(o.NS3Topology)))
	case o.Htsim != "":
		data, err := os.ReadFile(o.Htsim)
		if err != nil {
			return nil, &SpecError{File: o.Htsim, Msg: "cannot read: " + err.Error()}
		}
		m, err := interop.ParseHtsim(bytes.NewReader(data), o.Htsim)
		if err != nil {
			return nil, &SpecError{File: o.Htsim, Msg: err.Error()}
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
	default:
		return nil, &SpecError{File: "command line", Msg: "give a spec, --ns3-topology with --ns3-flows, or --htsim"}
	}
	fmt.Fprintf(&b, "nic: {mtu: %d}\nworkloads:\n", mtu)
	if o.NS3Flows != "" {
		data, err := os.ReadFile(o.NS3Flows)
		if err != nil {
			return nil, &SpecError{File: o.NS3Flows, Msg: "cannot read: " + err.Error()}
		}
		flows, err := interop.ParseNS3Flows(bytes.NewReader(data), o.NS3Flows)
		if err != nil {
			return nil, &SpecError{File: o.NS3Flows, Msg: err.Error()}
		}
		for _, f := range flows {
			last = max(last, f.Start)
		}
		fmt.Fprintf(&b, "  - {kind: ns3-flows, file: %s}\n", strconv.Quote(abs(o.NS3Flows)))
	} else {
		fmt.Fprintf(&b, "  - {kind: htsim, file: %s}\n", strconv.Quote(abs(o.Htsim)))
	}
	stop := o.Stop
	if stop == 0 {
		stop = last + time.Second
	}
	fmt.Fprintf(&b, "stop: {time: %s}\n", stop)
	return Parse("command line", b.Bytes(), os.ReadFile)
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
