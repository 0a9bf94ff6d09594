// Package interop reads and writes the scenario and result files of the
// simulators mptx users already have, so their scenarios re-run here and the
// results compare line by line:
//
//   - the HPCC ns-3 simulator (alibaba-edu/High-Precision-Congestion-Control,
//     simulation/scratch/third.cc): topology.txt, flow.txt and fct.txt;
//   - htsim (Broadcom/csg-htsim, sim/datacenter/connection_matrix.cpp):
//     connection matrices.
//
// Parsers are strict: a malformed line is an error naming the file, the line
// and what was expected, never a silently skipped flow. The one leniency is
// ns-3's own: like third.cc, the topology and flow readers stop after the
// counts their first line declares, and report (Ignored) any lines after
// them, such as the explanations HPCC's shipped mix/ files end with.
//
// # Limits
//
// Inputs are bounded so that a hostile or mistaken file fails at once with
// one line instead of exhausting time or memory: at most MaxNodes nodes,
// MaxHosts hosts (a k = 32 fat tree), MaxLinks links and MaxFlows flows;
// lines of at most 1 MiB. Checks on a whole topology are linear (one
// breadth-first search for connectivity; MaxBaseRTT is one search per
// host).
package interop

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mptx-dev/mptx/units"
)

// ParseError is a malformed line in an input file.
type ParseError struct {
	File string
	Line int // 1-based; 0 for whole-file problems
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return e.File + ": " + e.Msg
}

// lines yields the non-empty, non-comment lines of r with their numbers.
// HPCC's files have no comments; '#' lines are accepted as a convenience.
type lineReader struct {
	s    *bufio.Scanner
	file string
	n    int
}

func newLineReader(r io.Reader, file string) *lineReader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1<<20)
	return &lineReader{s: s, file: file}
}

// next returns the next line's fields, or nil at EOF.
func (l *lineReader) next() ([]string, error) {
	for l.s.Scan() {
		l.n++
		t := strings.TrimSpace(l.s.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		return strings.Fields(t), nil
	}
	if err := l.s.Err(); err != nil {
		return nil, &ParseError{File: l.file, Line: l.n, Msg: err.Error()}
	}
	return nil, nil
}

func (l *lineReader) fail(format string, args ...any) error {
	return &ParseError{File: l.file, Line: l.n, Msg: fmt.Sprintf(format, args...)}
}

// NS3Topology is an HPCC ns-3 topology.txt:
//
//	nodes switches links
//	switch_id switch_id ...
//	src dst rate delay error_rate     (one line per link)
//
// for example "0 320 100Gbps 1000ns 0". Node ids are 0..Nodes-1; ids not
// listed as switches are hosts.
type NS3Topology struct {
	Nodes    int       `json:"nodes"`
	Switches []int     `json:"switches"`
	Links    []NS3Link `json:"links"`
	// Ignored counts the non-empty lines after the declared links, which
	// third.cc never reads; IgnoredFrom is the first one's line.
	Ignored     int `json:"-"`
	IgnoredFrom int `json:"-"`
}

// NS3Link is one full-duplex link.
type NS3Link struct {
	Src       int           `json:"src"`
	Dst       int           `json:"dst"`
	Rate      units.BitRate `json:"rate"`
	Delay     time.Duration `json:"delay"`
	ErrorRate float64       `json:"error_rate"`
}

// IsSwitch reports whether node id is a switch.
func (t *NS3Topology) IsSwitch(id int) bool { return slices.Contains(t.Switches, id) }

// adjacency returns each node's neighbours and the delay to each.
func (t *NS3Topology) adjacency() [][]nbr {
	adj := make([][]nbr, t.Nodes)
	for _, k := range t.Links {
		adj[k.Src] = append(adj[k.Src], nbr{k.Dst, k.Delay, k.Rate})
		adj[k.Dst] = append(adj[k.Dst], nbr{k.Src, k.Delay, k.Rate})
	}
	return adj
}

type nbr struct {
	node  int
	delay time.Duration
	rate  units.BitRate
}

// Connected returns nil if every host reaches every other through
// switches (hosts do not forward, as in third.cc), else an error naming
// two hosts that are not connected. It is one breadth-first search.
func (t *NS3Topology) Connected() error {
	hosts := t.Hosts()
	if len(hosts) < 2 {
		return nil
	}
	sw := make([]bool, t.Nodes)
	for _, s := range t.Switches {
		sw[s] = true
	}
	adj := t.adjacency()
	seen := make([]bool, t.Nodes)
	queue := []int{hosts[0]}
	seen[hosts[0]] = true
	for h := 0; h < len(queue); h++ {
		u := queue[h]
		if u != hosts[0] && !sw[u] {
			continue // hosts do not forward
		}
		for _, n := range adj[u] {
			if !seen[n.node] {
				seen[n.node] = true
				queue = append(queue, n.node)
			}
		}
	}
	for _, h := range hosts[1:] {
		if !seen[h] {
			return fmt.Errorf("hosts %d and %d are not connected (through switches)", hosts[0], h)
		}
	}
	return nil
}

// MaxBaseRTT is the largest base RTT between two hosts as third.cc
// computes it for GLOBAL_T: twice the propagation delay plus one payload's
// serialisation at every hop, along the paths its breadth-first search
// from each host finds. It costs one search per host (MaxHosts bounds
// it).
func (t *NS3Topology) MaxBaseRTT(payload units.Bytes) time.Duration {
	sw := make([]bool, t.Nodes)
	for _, s := range t.Switches {
		sw[s] = true
	}
	adj := t.adjacency()
	dist := make([]int, t.Nodes)
	delay := make([]time.Duration, t.Nodes)
	tx := make([]time.Duration, t.Nodes)
	var best time.Duration
	queue := make([]int, 0, t.Nodes)
	for _, h := range t.Hosts() {
		for i := range dist {
			dist[i] = -1
		}
		dist[h], delay[h], tx[h] = 0, 0, 0
		queue = append(queue[:0], h)
		for q := 0; q < len(queue); q++ {
			u := queue[q]
			for _, n := range adj[u] {
				if dist[n.node] >= 0 {
					continue
				}
				dist[n.node] = dist[u] + 1
				delay[n.node] = delay[u] + n.delay
				tx[n.node] = tx[u] + n.rate.TxTime(payload)
				if sw[n.node] {
					queue = append(queue, n.node)
				} else if rtt := 2*delay[n.node] + tx[n.node]; rtt > best {
					best = rtt
				}
			}
		}
	}
	return best
}

// Hosts returns the host node ids in increasing order.
func (t *NS3Topology) Hosts() []int {
	sw := make([]bool, t.Nodes)
	for _, s := range t.Switches {
		sw[s] = true
	}
	var h []int
	for i := range t.Nodes {
		if !sw[i] {
			h = append(h, i)
		}
	}
	return h
}

// Input limits (see the package documentation).
const (
	// MaxNodes bounds the nodes of a topology and node ids in flow files.
	MaxNodes = 16384
	// MaxHosts bounds the hosts of a topology (and an htsim matrix's
	// Nodes): a k = 32 fat tree.
	MaxHosts = 8192
	// MaxLinks bounds the links of a topology.
	MaxLinks = 1 << 17
	// MaxFlows bounds the flows of a flow file or connection matrix.
	MaxFlows = 1 << 20
)

// maxNodes is MaxNodes (kept for the parsers' older name).
const maxNodes = MaxNodes

// ParseNS3Topology reads a topology.txt; file names it in errors.
func ParseNS3Topology(r io.Reader, file string) (*NS3Topology, error) {
	l := newLineReader(r, file)
	f, err := l.next()
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, &ParseError{File: file, Msg: "empty topology: want a first line \"nodes switches links\""}
	}
	if len(f) != 3 {
		return nil, l.fail("want \"nodes switches links\" (3 numbers), got %d fields", len(f))
	}
	var nums [3]int
	for i, name := range []string{"nodes", "switches", "links"} {
		n, err := strconv.Atoi(f[i])
		if err != nil || n < 0 {
			return nil, l.fail("%s = %q: want a whole number >= 0", name, f[i])
		}
		nums[i] = n
	}
	t := &NS3Topology{Nodes: nums[0]}
	switch {
	case t.Nodes > MaxNodes:
		return nil, l.fail("nodes = %d: at most %d nodes are supported", t.Nodes, MaxNodes)
	case nums[1] > t.Nodes:
		return nil, l.fail("switches = %d exceeds nodes = %d", nums[1], t.Nodes)
	case t.Nodes-nums[1] > MaxHosts:
		return nil, l.fail("%d hosts (nodes %d less switches %d): at most %d hosts are supported (a k = 32 fat tree)", t.Nodes-nums[1], t.Nodes, nums[1], MaxHosts)
	case nums[2] > MaxLinks:
		return nil, l.fail("links = %d: at most %d links are supported", nums[2], MaxLinks)
	}
	seen := make(map[int]bool, nums[1])
	for len(t.Switches) < nums[1] {
		f, err := l.next()
		if err != nil {
			return nil, err
		}
		if f == nil {
			return nil, &ParseError{File: file, Line: l.n, Msg: fmt.Sprintf("file ends after %d of %d switch ids", len(t.Switches), nums[1])}
		}
		for _, s := range f {
			if len(t.Switches) == nums[1] {
				return nil, l.fail("more switch ids than the %d declared", nums[1])
			}
			id, err := strconv.Atoi(s)
			if err != nil || id < 0 || id >= t.Nodes {
				return nil, l.fail("switch id %q: want a node id in [0, %d)", s, t.Nodes)
			}
			if seen[id] {
				return nil, l.fail("switch id %d listed twice", id)
			}
			seen[id] = true
			t.Switches = append(t.Switches, id)
		}
	}
	for len(t.Links) < nums[2] {
		f, err := l.next()
		if err != nil {
			return nil, err
		}
		if f == nil {
			return nil, &ParseError{File: file, Line: l.n, Msg: fmt.Sprintf("file ends after %d of %d links", len(t.Links), nums[2])}
		}
		if len(f) != 5 {
			return nil, l.fail("want a link \"src dst rate delay error_rate\" (e.g. \"0 320 100Gbps 1000ns 0\"), got %d fields", len(f))
		}
		var k NS3Link
		if k.Src, err = nodeID(f[0], t.Nodes); err != nil {
			return nil, l.fail("src %v", err)
		}
		if k.Dst, err = nodeID(f[1], t.Nodes); err != nil {
			return nil, l.fail("dst %v", err)
		}
		if k.Src == k.Dst {
			return nil, l.fail("link from node %d to itself", k.Src)
		}
		if k.Rate, err = ParseNS3Rate(f[2]); err != nil {
			return nil, l.fail("rate %v", err)
		}
		if k.Delay, err = ParseNS3Time(f[3]); err != nil {
			return nil, l.fail("delay %v", err)
		}
		if k.ErrorRate, err = strconv.ParseFloat(f[4], 64); err != nil || !(k.ErrorRate >= 0 && k.ErrorRate <= 1) {
			return nil, l.fail("error_rate %q: want a probability in [0, 1]", f[4])
		}
		t.Links = append(t.Links, k)
	}
	if t.Ignored, t.IgnoredFrom, err = l.rest(); err != nil {
		return nil, err
	}
	return t, nil
}

// rest counts the non-empty lines left (third.cc reads no further than the
// declared counts) and returns the first one's line number.
func (l *lineReader) rest() (n, first int, err error) {
	for {
		f, err := l.next()
		if err != nil {
			return 0, 0, err
		}
		if f == nil {
			return n, first, nil
		}
		if n == 0 {
			first = l.n
		}
		n++
	}
}

func nodeID(s string, n int) (int, error) {
	id, err := strconv.Atoi(s)
	if err != nil || id < 0 || id >= n {
		return 0, fmt.Errorf("%q: want a node id in [0, %d)", s, n)
	}
	return id, nil
}

// ParseNS3Rate parses an ns-3 DataRate string: a number with a unit where
// "bps" and "b/s" are bits and "Bps" and "B/s" bytes per second, with SI
// prefixes k/K, M, G, T ("100Gbps", "25Gb/s", "1.25GBps").
func ParseNS3Rate(s string) (units.BitRate, error) {
	num, unit := splitNumber(s)
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q: want a rate such as 100Gbps", s)
	}
	mult := 1.0
	if unit != "" {
		switch unit[0] {
		case 'k', 'K':
			mult, unit = 1e3, unit[1:]
		case 'M':
			mult, unit = 1e6, unit[1:]
		case 'G':
			mult, unit = 1e9, unit[1:]
		case 'T':
			mult, unit = 1e12, unit[1:]
		}
	}
	switch unit {
	case "bps", "b/s":
	case "Bps", "B/s":
		mult *= 8
	default:
		return 0, fmt.Errorf("%q: want a unit bps, b/s, Bps or B/s with an optional k, M, G, T prefix", s)
	}
	r := v * mult
	if r < 1 || r >= math.MaxInt64 {
		return 0, fmt.Errorf("%q: out of range", s)
	}
	return units.BitRate(math.Round(r)), nil
}

// ParseNS3Time parses an ns-3 Time string: a number with an optional unit
// (s, ms, us, ns, ps, min, h); no unit means seconds ("1000ns", "0.001ms",
// "1e-6s"). The result is rounded to the nearest nanosecond.
func ParseNS3Time(s string) (time.Duration, error) {
	num, unit := splitNumber(s)
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q: want a time such as 1000ns", s)
	}
	var ns float64
	switch unit {
	case "", "s":
		ns = 1e9
	case "ms":
		ns = 1e6
	case "us":
		ns = 1e3
	case "ns":
		ns = 1
	case "ps":
		ns = 1e-3
	case "min":
		ns = 60e9
	case "h":
		ns = 3600e9
	default:
		return 0, fmt.Errorf("%q: want a unit s, ms, us, ns, ps, min or h", s)
	}
	d := math.Round(v * ns)
	if d >= math.MaxInt64 {
		return 0, fmt.Errorf("%q: out of range", s)
	}
	return time.Duration(d), nil
}

// splitNumber splits "1.5e-3ms" into "1.5e-3" and "ms".
func splitNumber(s string) (string, string) {
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c == '.', c == '+', c == '-':
		case (c == 'e' || c == 'E') && i+1 < len(s) && (s[i+1] == '-' || s[i+1] == '+' || (s[i+1] >= '0' && s[i+1] <= '9')):
		default:
			return s[:i], s[i:]
		}
		i++
	}
	return s, ""
}

// NS3Flow is one line of an HPCC ns-3 flow.txt:
//
//	src dst pg dport size_bytes start_s
//
// after a first line holding the flow count; lines are sorted by start time
// (third.cc reads them in order and schedules each at its start).
type NS3Flow struct {
	Src   int           `json:"src"`
	Dst   int           `json:"dst"`
	PG    int           `json:"pg"`
	DPort int           `json:"dport"`
	Size  units.Bytes   `json:"size"`
	Start time.Duration `json:"start"`
}

// maxFlows is MaxFlows (kept for the parsers' older name).
const maxFlows = MaxFlows

// NS3FlowFile is a parsed flow.txt.
type NS3FlowFile struct {
	Flows []NS3Flow
	// Ignored counts the non-empty lines after the declared flows, which
	// third.cc never reads; IgnoredFrom is the first one's line.
	Ignored, IgnoredFrom int
}

// ParseNS3Flows reads a flow.txt. Host ids are checked later, against the
// topology the flows run on. Lines after the declared flows are ignored
// (ParseNS3FlowFile counts them).
func ParseNS3Flows(r io.Reader, file string) ([]NS3Flow, error) {
	ff, err := ParseNS3FlowFile(r, file)
	if err != nil {
		return nil, err
	}
	return ff.Flows, nil
}

// ParseNS3FlowFile reads a flow.txt and counts the lines after the
// declared flows.
func ParseNS3FlowFile(r io.Reader, file string) (*NS3FlowFile, error) {
	l := newLineReader(r, file)
	f, err := l.next()
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, &ParseError{File: file, Msg: "empty flow file: want a first line holding the flow count"}
	}
	n, err := strconv.Atoi(f[0])
	if len(f) != 1 || err != nil || n < 0 || n > maxFlows {
		return nil, l.fail("want the flow count (a whole number in [0, %d]) alone on the first line", maxFlows)
	}
	flows := make([]NS3Flow, 0, min(n, 1<<12)) // grown as lines arrive: a count alone allocates nothing
	for len(flows) < n {
		f, err := l.next()
		if err != nil {
			return nil, err
		}
		if f == nil {
			return nil, &ParseError{File: file, Line: l.n, Msg: fmt.Sprintf("file ends after %d of %d flows", len(flows), n)}
		}
		if len(f) != 6 {
			return nil, l.fail("want a flow \"src dst pg dport size_bytes start_s\" (e.g. \"0 1 3 100 1000000 2.0\"), got %d fields", len(f))
		}
		var fl NS3Flow
		ints := []*int{&fl.Src, &fl.Dst, &fl.PG, &fl.DPort}
		for i, name := range []string{"src", "dst", "pg", "dport"} {
			v, err := strconv.Atoi(f[i])
			if err != nil || v < 0 || (name == "dport" && v > 65535) || v > maxNodes {
				return nil, l.fail("%s = %q: want a whole number >= 0", name, f[i])
			}
			*ints[i] = v
		}
		if fl.Src == fl.Dst {
			return nil, l.fail("flow from host %d to itself", fl.Src)
		}
		sz, err := strconv.ParseInt(f[4], 10, 64)
		if err != nil || sz <= 0 {
			return nil, l.fail("size_bytes = %q: want a whole number > 0", f[4])
		}
		fl.Size = units.Bytes(sz)
		st, err := strconv.ParseFloat(f[5], 64)
		if err != nil || !(st >= 0 && st < 1e6) {
			return nil, l.fail("start_s = %q: want seconds in [0, 1e6)", f[5])
		}
		fl.Start = time.Duration(math.Round(st * 1e9))
		if k := len(flows); k > 0 && fl.Start < flows[k-1].Start {
			return nil, l.fail("start_s %s is before the previous flow's: flow.txt must be sorted by start time", f[5])
		}
		flows = append(flows, fl)
	}
	ff := &NS3FlowFile{Flows: flows}
	if ff.Ignored, ff.IgnoredFrom, err = l.rest(); err != nil {
		return nil, err
	}
	return ff, nil
}

// WriteNS3Flows writes flows in flow.txt format (the inverse of
// ParseNS3Flows), so workloads generated here can be run by ns-3.
func WriteNS3Flows(w io.Writer, flows []NS3Flow) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%d\n", len(flows))
	for _, f := range flows {
		fmt.Fprintf(bw, "%d %d %d %d %d %.9f\n", f.Src, f.Dst, f.PG, f.DPort, int64(f.Size), f.Start.Seconds())
	}
	return bw.Flush()
}

// NodeIP is the IPv4 address HPCC's third.cc gives node id:
// 0x0b000001 + (id/256)·0x10000 + (id%256)·0x100 (11.0.x.y/8).
func NodeIP(id int) uint32 {
	return 0x0b000001 + uint32(id/256)*0x10000 + uint32(id%256)*0x100
}

// NodeOfIP inverts NodeIP ((ip >> 8) & 0xffff, as third.cc's ip_to_node_id).
func NodeOfIP(ip uint32) int { return int((ip >> 8) & 0xffff) }

// HeaderBytes is the per-packet header overhead third.cc's standalone FCT
// counts: Ethernet 14 + IPv4 20 + UDP 8 + SeqTs 6 (CustomHeader's whole
// header without INT).
const HeaderBytes = 48

// StandaloneFCT is the completion time of a flow of size bytes alone on an
// empty path, as third.cc's qp_finish computes it:
//
//	base RTT + (size + packets × header) × 8 / bottleneck rate
//
// with packets = ceil(size / mtu). baseRTT is the empty-path round trip
// (twice the propagation delay plus one packet's serialisation per hop).
func StandaloneFCT(size units.Bytes, mtu units.Bytes, header units.Bytes, baseRTT time.Duration, bottleneck units.BitRate) time.Duration {
	if size <= 0 {
		return baseRTT
	}
	pkts := (size-1)/mtu + 1
	total := size + pkts*header
	return baseRTT + bottleneck.TxTime(total)
}

// FCTRecord is one line of fct.txt:
//
//	sip_hex dip_hex sport dport size start_ns fct_ns standalone_fct_ns
type FCTRecord struct {
	Src, Dst     int // node ids (written as NodeIP in hex)
	SPort, DPort int
	Size         units.Bytes
	Start        time.Duration
	FCT          time.Duration
	Standalone   time.Duration
}

// Slowdown is FCT / standalone FCT.
func (r FCTRecord) Slowdown() float64 {
	if r.Standalone <= 0 {
		return 0
	}
	return float64(r.FCT) / float64(r.Standalone)
}

// WriteFCT writes records in fct.txt format, one per line, in the order
// given (third.cc writes them in completion order).
func WriteFCT(w io.Writer, recs []FCTRecord) error {
	bw := bufio.NewWriter(w)
	for _, r := range recs {
		fmt.Fprintf(bw, "%08x %08x %d %d %d %d %d %d\n", NodeIP(r.Src), NodeIP(r.Dst), r.SPort, r.DPort,
			int64(r.Size), int64(r.Start), int64(r.FCT), int64(r.Standalone))
	}
	return bw.Flush()
}

// ParseFCT reads an fct.txt written by ns-3 (or WriteFCT), for comparing
// results across simulators.
func ParseFCT(r io.Reader, file string) ([]FCTRecord, error) {
	l := newLineReader(r, file)
	var out []FCTRecord
	for {
		f, err := l.next()
		if err != nil {
			return nil, err
		}
		if f == nil {
			return out, nil
		}
		if len(f) != 8 {
			return nil, l.fail("want \"sip dip sport dport size start_ns fct_ns standalone_fct_ns\", got %d fields", len(f))
		}
		var rec FCTRecord
		for i, p := range []*int{&rec.Src, &rec.Dst} {
			ip, err := strconv.ParseUint(f[i], 16, 32)
			if err != nil {
				return nil, l.fail("ip %q: want 8 hex digits", f[i])
			}
			*p = NodeOfIP(uint32(ip))
		}
		var nums [6]int64
		for i := range nums {
			v, err := strconv.ParseInt(f[2+i], 10, 64)
			if err != nil || v < 0 {
				return nil, l.fail("field %d = %q: want a whole number >= 0", 3+i, f[2+i])
			}
			nums[i] = v
		}
		if nums[0] > 65535 || nums[1] > 65535 {
			return nil, l.fail("ports must be in [0, 65535]")
		}
		rec.SPort, rec.DPort = int(nums[0]), int(nums[1])
		rec.Size = units.Bytes(nums[2])
		rec.Start, rec.FCT, rec.Standalone = time.Duration(nums[3]), time.Duration(nums[4]), time.Duration(nums[5])
		out = append(out, rec)
	}
}
