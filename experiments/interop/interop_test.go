package interop

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/units"
)

// A two-host, one-switch topology in HPCC's format.
const topo3 = `3 1 2
2
0 2 100Gbps 1000ns 0
1 2 25Gb/s 0.001ms 0.001
`

func TestParseNS3Topology(t *testing.T) {
	got, err := ParseNS3Topology(strings.NewReader(topo3), "topology.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := &NS3Topology{Nodes: 3, Switches: []int{2}, Links: []NS3Link{
		{Src: 0, Dst: 2, Rate: 100 * units.Gbps, Delay: time.Microsecond},
		{Src: 1, Dst: 2, Rate: 25 * units.Gbps, Delay: time.Microsecond, ErrorRate: 0.001},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseNS3Topology = %+v, want %+v", got, want)
	}
	if h := got.Hosts(); !reflect.DeepEqual(h, []int{0, 1}) {
		t.Errorf("Hosts() = %v, want [0 1]", h)
	}
	if !got.IsSwitch(2) || got.IsSwitch(0) {
		t.Errorf("IsSwitch wrong: 2→%v 0→%v", got.IsSwitch(2), got.IsSwitch(0))
	}
}

func TestParseNS3TopologyErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "t.txt: empty topology"},
		{"3 1\n", "t.txt:1: want \"nodes switches links\""},
		{"3 1 1\n5\n", "t.txt:2: switch id \"5\": want a node id in [0, 3)"},
		{"3 1 1\n2\n0 2 100Gbps 1000ns\n", "t.txt:3: want a link"},
		{"3 1 1\n2\n0 2 100Gbit 1000ns 0\n", "t.txt:3: rate \"100Gbit\": want a unit"},
		{"3 1 1\n2\n0 2 100Gbps 10parsecs 0\n", "t.txt:3: delay \"10parsecs\": want a unit"},
		{"3 1 1\n2\n0 0 100Gbps 1us 0\n", "t.txt:3: link from node 0 to itself"},
		{"3 1 2\n2\n0 2 100Gbps 1us 0\n", "t.txt:3: file ends after 1 of 2 links"},
		{"16000 1 0\n", "t.txt:1: 15999 hosts"},
		{"20001 1 0\n", "t.txt:1: nodes = 20001: at most 16384"},
		{"16385 1 0\n", "t.txt:1: nodes = 16385: at most 16384"},
		{"3 1 200000\n", "t.txt:1: links = 200000: at most"},
		{"3 1 1\n2\n0 2 100Gbps 1us 2\n", "t.txt:3: error_rate \"2\": want a probability"},
	} {
		_, err := ParseNS3Topology(strings.NewReader(tc.in), "t.txt")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseNS3Topology(%q) error = %v, want prefix %q", tc.in, err, tc.want)
		}
	}
}

func TestParseNS3RateAndTime(t *testing.T) {
	for s, want := range map[string]units.BitRate{
		"100Gbps": 100 * units.Gbps, "25Gb/s": 25 * units.Gbps, "1.25GBps": 10 * units.Gbps,
		"400Mbps": 400 * units.Mbps, "10kbps": 10 * units.Kbps, "1000bps": 1000,
	} {
		if got, err := ParseNS3Rate(s); err != nil || got != want {
			t.Errorf("ParseNS3Rate(%q) = %v, %v, want %v", s, got, err, want)
		}
	}
	for s, want := range map[string]time.Duration{
		"1000ns": time.Microsecond, "0.001ms": time.Microsecond, "1e-6s": time.Microsecond,
		"2": 2 * time.Second, "1500ps": 2 * time.Nanosecond, "1us": time.Microsecond,
	} {
		if got, err := ParseNS3Time(s); err != nil || got != want {
			t.Errorf("ParseNS3Time(%q) = %v, %v, want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "fast", "-1ns", "10xs"} {
		if _, err := ParseNS3Time(s); err == nil {
			t.Errorf("ParseNS3Time(%q) succeeded, want an error", s)
		}
	}
}

func TestNS3FlowsRoundTrip(t *testing.T) {
	in := "2\n0 1 3 100 1000000 2.000000000\n1 0 3 100 52 2.000001500\n"
	flows, err := ParseNS3Flows(strings.NewReader(in), "flow.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := []NS3Flow{
		{Src: 0, Dst: 1, PG: 3, DPort: 100, Size: 1000000, Start: 2 * time.Second},
		{Src: 1, Dst: 0, PG: 3, DPort: 100, Size: 52, Start: 2*time.Second + 1500*time.Nanosecond},
	}
	if !reflect.DeepEqual(flows, want) {
		t.Fatalf("ParseNS3Flows = %+v, want %+v", flows, want)
	}
	var buf bytes.Buffer
	if err := WriteNS3Flows(&buf, flows); err != nil {
		t.Fatal(err)
	}
	if buf.String() != in {
		t.Errorf("WriteNS3Flows = %q, want %q", buf.String(), in)
	}
}

func TestParseNS3FlowsErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "f.txt: empty flow file"},
		{"x\n", "f.txt:1: want the flow count"},
		{"2\n0 1 3 100 10 2.0\n", "f.txt:2: file ends after 1 of 2 flows"},
		{"1\n0 1 3 100 10\n", "f.txt:2: want a flow"},
		{"1\n0 0 3 100 10 1\n", "f.txt:2: flow from host 0 to itself"},
		{"1\n0 1 3 100 0 1\n", "f.txt:2: size_bytes = \"0\""},
		{"2\n0 1 3 100 10 2\n1 0 3 100 10 1\n", "f.txt:3: start_s 1 is before the previous flow's"},
		{"1048577\n", "f.txt:1: want the flow count"},
		{"1048576\n", "f.txt:1: file ends after 0 of 1048576 flows"},
	} {
		_, err := ParseNS3Flows(strings.NewReader(tc.in), "f.txt")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseNS3Flows(%q) error = %v, want prefix %q", tc.in, err, tc.want)
		}
	}
}

func TestNodeIP(t *testing.T) {
	for id, want := range map[int]uint32{0: 0x0b000001, 1: 0x0b000101, 255: 0x0b00ff01, 256: 0x0b010001, 320: 0x0b014001} {
		if got := NodeIP(id); got != want {
			t.Errorf("NodeIP(%d) = %#x, want %#x", id, got, want)
		}
		if back := NodeOfIP(want); back != id {
			t.Errorf("NodeOfIP(%#x) = %d, want %d", want, back, id)
		}
	}
}

func TestStandaloneFCT(t *testing.T) {
	// 1000 B payload per packet, 10000 B flow: 10 packets × 48 B headers;
	// (10000 + 480) × 8 bit at 100 Gbps = 838.4 ns → 839 ns, plus 8 us RTT.
	got := StandaloneFCT(10000, 1000, HeaderBytes, 8*time.Microsecond, 100*units.Gbps)
	if want := 8*time.Microsecond + 839*time.Nanosecond; got != want {
		t.Errorf("StandaloneFCT = %v, want %v", got, want)
	}
	// 1001 B is two packets.
	got = StandaloneFCT(1001, 1000, HeaderBytes, 0, 8*units.Gbps)
	if want := time.Duration(1001 + 96); got != want {
		t.Errorf("StandaloneFCT(1001) = %v, want %v", got, want)
	}
}

func TestFCTRoundTrip(t *testing.T) {
	recs := []FCTRecord{
		{Src: 0, Dst: 257, SPort: 10000, DPort: 100, Size: 1000000, Start: 2000000000, FCT: 95000, Standalone: 89000},
	}
	var buf bytes.Buffer
	if err := WriteFCT(&buf, recs); err != nil {
		t.Fatal(err)
	}
	if want := "0b000001 0b010101 10000 100 1000000 2000000000 95000 89000\n"; buf.String() != want {
		t.Errorf("WriteFCT = %q, want %q", buf.String(), want)
	}
	back, err := ParseFCT(&buf, "fct.txt")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, recs) {
		t.Errorf("ParseFCT = %+v, want %+v", back, recs)
	}
	if s := recs[0].Slowdown(); s < 1.067 || s > 1.068 {
		t.Errorf("Slowdown = %v, want 95000/89000", s)
	}
}

const matrix = `# all-reduce step
Nodes 4
Connections 3
Triggers 1
0->1 id 1 start 0 size 2000000 send_done_trigger 1
2->1 id 2 start 1500000 size 2000000 recv_done_trigger 1
1->3 id 3 trigger 1 size 4096 prio 7
trigger id 1 barrier count 2
`

func TestParseHtsim(t *testing.T) {
	m, err := ParseHtsim(strings.NewReader(matrix), "m.cm")
	if err != nil {
		t.Fatal(err)
	}
	want := &HtsimMatrix{Nodes: 4, Conns: []HtsimConn{
		{Src: 0, Dst: 1, ID: 1, Size: 2000000, SendDoneTrigger: 1},
		{Src: 2, Dst: 1, ID: 2, Start: 1500 * time.Nanosecond, Size: 2000000, RecvDoneTrigger: 1},
		{Src: 1, Dst: 3, ID: 3, Size: 4096, Prio: 7, Trigger: 1},
	}, Triggers: []HtsimTrigger{{ID: 1, Barrier: true, Count: 2}}}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("ParseHtsim = %+v, want %+v", m, want)
	}
	var buf bytes.Buffer
	if err := WriteHtsim(&buf, m); err != nil {
		t.Fatal(err)
	}
	again, err := ParseHtsim(&buf, "again.cm")
	if err != nil {
		t.Fatalf("re-parse of WriteHtsim output: %v\n%s", err, buf.String())
	}
	if !reflect.DeepEqual(again, m) {
		t.Errorf("round trip = %+v, want %+v", again, m)
	}
}

func TestParseHtsimErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Connections 1\n", "m.cm: no \"Nodes N\" line"},
		{"0->1 start 0 size 10\n", "m.cm:1: connection before the \"Nodes N\" line"},
		{"Nodes 2\n0->2 start 0 size 10\n", "m.cm:2: dst \"2\": want a node id in [0, 2)"},
		{"Nodes 2\n0->1 start 0 size 0\n", "m.cm:2: size 0 (an endless flow) is not supported"},
		{"Nodes 2\n0->1 start 0\n", "m.cm:2: flow 0->1 has no size"},
		{"Nodes 2\n0->1 size 5\n", "m.cm:2: flow 0->1 has neither a start time nor a trigger"},
		{"Nodes 2\n0->1 start 0 size 5 colour red\n", "m.cm:2: unknown token \"colour\""},
		{"Nodes 2\nConnections 2\n0->1 start 0 size 5\n", "m.cm: Connections says 2 but the file has 1"},
		{"Nodes 2\n0->1 trigger 4 size 5\n", "m.cm: trigger 4 is used by flow 0->1 but never defined"},
		{"Nodes 2\nTriggers 1\ntrigger id 1 multishot\n", "m.cm:3: multishot triggers are not supported"},
		{"Nodes 2\nfailure switch_type TOR\n", "m.cm:2: failure lines are not supported"},
		{"Nodes 2\n0->1 id 3 start 0 size 5\n1->0 id 3 start 0 size 5\n", "m.cm:3: flow id 3 already used at line 2"},
		{"Nodes 65536\n", "m.cm:1: Nodes = 65536: at most 8192 hosts"},
	} {
		_, err := ParseHtsim(strings.NewReader(tc.in), "m.cm")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseHtsim(%q) error = %v, want prefix %q", tc.in, err, tc.want)
		}
	}
}

// TestTrailingLines: like third.cc, the topology and flow readers stop at
// the declared counts; the lines after them (HPCC's shipped mix/ files end
// with explanations) are counted, not errors.
func TestTrailingLines(t *testing.T) {
	top, err := ParseNS3Topology(strings.NewReader(topo3+"0 1 100Gbps 1us 0\n\nFirst line: total node #\n"), "t.txt")
	if err != nil {
		t.Fatal(err)
	}
	if top.Ignored != 2 || top.IgnoredFrom != 5 || len(top.Links) != 2 {
		t.Errorf("topology: %d links, Ignored %d from line %d; want 2 links, 2 ignored from line 5", len(top.Links), top.Ignored, top.IgnoredFrom)
	}
	ff, err := ParseNS3FlowFile(strings.NewReader("1\n0 1 3 100 10 2\n1 0 3 100 10 2\nFirst line: # of flows\n"), "f.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(ff.Flows) != 1 || ff.Ignored != 2 || ff.IgnoredFrom != 3 {
		t.Errorf("flows: %d, Ignored %d from line %d; want 1 flow, 2 ignored from line 3", len(ff.Flows), ff.Ignored, ff.IgnoredFrom)
	}
}

// TestConnectedAndRTT: connectivity is one search; MaxBaseRTT follows
// third.cc (2 × delay + payload serialisation per hop, largest pair).
func TestConnectedAndRTT(t *testing.T) {
	// Hosts 0 and 1 on switch 3 (1 µs links at 100G and 25G); host 2 on
	// switch 4 (2 µs at 100G), switches joined by a 3 µs 100G link.
	top, err := ParseNS3Topology(strings.NewReader("5 2 4\n3 4\n0 3 100Gbps 1us 0\n1 3 25Gbps 1us 0\n2 4 100Gbps 2us 0\n3 4 100Gbps 3us 0\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := top.Connected(); err != nil {
		t.Errorf("Connected() = %v", err)
	}
	// 1 → 2: delay 1+3+2 = 6 µs, so 12 µs, plus 1000 B at 25G (320 ns)
	// and twice at 100G (80 ns each).
	if got, want := top.MaxBaseRTT(1000), 12*time.Microsecond+480*time.Nanosecond; got != want {
		t.Errorf("MaxBaseRTT(1000) = %v, want %v", got, want)
	}
	split, err := ParseNS3Topology(strings.NewReader("5 2 3\n3 4\n0 3 100Gbps 1us 0\n1 3 100Gbps 1us 0\n2 4 100Gbps 1us 0\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := split.Connected(); err == nil || !strings.Contains(err.Error(), "hosts 0 and 2 are not connected") {
		t.Errorf("Connected() of a split fabric = %v, want hosts 0 and 2 not connected", err)
	}
	// A host does not forward: 0 - 1(host) - 2 is not a path.
	chain, err := ParseNS3Topology(strings.NewReader("3 0 2\n\n0 1 100Gbps 1us 0\n1 2 100Gbps 1us 0\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.Connected(); err == nil {
		t.Error("Connected() through a host: nil, want an error")
	}
}

// cfgDCQCN is a DCQCN config.txt in HPCC's format (values of run.py's
// "dcqcn" profile at 100 Gb/s).
const cfgDCQCN = `ENABLE_QCN 1
USE_DYNAMIC_PFC_THRESHOLD 1
PACKET_PAYLOAD_SIZE 1000
TOPOLOGY_FILE mix/topo.txt
FLOW_FILE mix/flow.txt
TRACE_FILE mix/trace.txt
TRACE_OUTPUT_FILE mix/out.tr
FCT_OUTPUT_FILE mix/fct.txt
PFC_OUTPUT_FILE mix/pfc.txt
SIMULATOR_STOP_TIME 4.00
CC_MODE 1
ALPHA_RESUME_INTERVAL 1
RATE_DECREASE_INTERVAL 4
CLAMP_TARGET_RATE 0
RP_TIMER 300
EWMA_GAIN 0.00390625
FAST_RECOVERY_TIMES 1
RATE_AI 20Mb/s
RATE_HAI 200Mb/s
MIN_RATE 1000Mb/s
DCTCP_RATE_AI 1000Mb/s
ERROR_RATE_PER_LINK 0.0000
L2_CHUNK_SIZE 4000
L2_ACK_INTERVAL 1
L2_BACK_TO_ZERO 0
HAS_WIN 0
GLOBAL_T 1
VAR_WIN 0
FAST_REACT 0
U_TARGET 0.95
MI_THRESH 0
INT_MULTI 1
MULTI_RATE 0
SAMPLE_FEEDBACK 0
RATE_BOUND 1
ACK_HIGH_PRIO 1
LINK_DOWN 0 0 0
ENABLE_TRACE 1
KMAX_MAP 2 100000000000 1600 25000000000 400
KMIN_MAP 2 100000000000 400 25000000000 100
PMAX_MAP 2 100000000000 0.2 25000000000 0.2
BUFFER_SIZE 32
QLEN_MON_FILE mix/qlen.txt
QLEN_MON_START 2000000000
QLEN_MON_END 3000000000
`

func TestParseNS3Config(t *testing.T) {
	c, err := ParseNS3Config(strings.NewReader(cfgDCQCN), "config.txt")
	if err != nil {
		t.Fatal(err)
	}
	if c.CCMode != 1 || c.PayloadSize != 1000 || c.RPTimer != 300*time.Microsecond || c.AlphaResumeInterval != time.Microsecond ||
		c.RateAI != 20*units.Mbps || c.MinRate != units.Gbps || c.BufferSize != 32*units.MiB || c.StopTime != 4*time.Second ||
		!c.AckHighPrio || c.TopologyFile != "mix/topo.txt" || c.L2AckInterval != 1 || c.Line("RP_TIMER") != 15 {
		t.Errorf("ParseNS3Config = %+v", c)
	}
	if kmin, kmax, p, ok := c.ECNFor(100 * units.Gbps); !ok || kmin != 400*units.KB || kmax != 1600*units.KB || p != 0.2 {
		t.Errorf("ECNFor(100G) = %v, %v, %v, %v; want 400KB, 1600KB, 0.2", kmin, kmax, p, ok)
	}
	top, err := ParseNS3Topology(strings.NewReader(topo3), "t")
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Settings(top, "config.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"profile": "ns3", "g": "0.00390625", "alpha_timer": "1us", "rate_decrease_interval": "4us",
		"rate_increase_timer": "300us", "f": "1", "ai": "20000000bps", "hai": "200000000bps", "min_rate": "1000000000bps", "clamp_target": "after_timer"}
	if s.CC != "nic-dcqcn" || !reflect.DeepEqual(s.CCParams, want) || s.MTU != 1000 || s.Header != HeaderBytes ||
		s.AckEvery != 1 || s.AckInDataClass || s.Buffer != 32*units.MiB || len(s.ECNByRate) != 2 || s.ECNByRate[0].Rate != 25*units.Gbps {
		t.Errorf("Settings = %+v", s)
	}
	hp := strings.NewReplacer("CC_MODE 1", "CC_MODE 3", "HAS_WIN 0", "HAS_WIN 1", "VAR_WIN 0", "VAR_WIN 1", "FAST_REACT 0", "FAST_REACT 1",
		"RATE_AI 20Mb/s", "RATE_AI 40Mb/s", "ACK_HIGH_PRIO 1", "ACK_HIGH_PRIO 0").Replace(cfgDCQCN)
	c, err = ParseNS3Config(strings.NewReader(hp), "config.txt")
	if err != nil {
		t.Fatal(err)
	}
	if s, err = c.Settings(top, "config.txt"); err != nil {
		t.Fatal(err)
	}
	// GLOBAL_T: hosts 0 and 1 through switch 2, 1 µs each way: 4 µs plus
	// 1000 B at 100G (80 ns) and at 25G (320 ns).
	want = map[string]string{"eta": "0.95", "max_stage": "0", "ai": "40000000bps", "min_rate": "1000000000bps", "t": "4.4µs"}
	if s.CC != "nic-hpcc" || !reflect.DeepEqual(s.CCParams, want) || s.Header != HeaderBytes+42 || !s.AckInDataClass {
		t.Errorf("HPCC Settings = %+v", s)
	}
}

func TestParseNS3ConfigErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"CC_MODE 1\nPACKET_SIZE 1000\n", "c.txt:2: unknown key \"PACKET_SIZE\""},
		{"CC_MODE 1\nCC_MODE 3\n", "c.txt:2: CC_MODE given twice (first at line 1)"},
		{"ENABLE_QCN yes\n", "c.txt:1: ENABLE_QCN \"yes\": want 0 or 1"},
		{"RP_TIMER\n", "c.txt:1: RP_TIMER takes 1 value(s), got 0"},
		{"KMAX_MAP 2 25000000000 400\n", "c.txt:1: KMAX_MAP want 2 rate/value pairs"},
		{"KMAX_MAP 1 25Gbps 400\n", "c.txt:1: KMAX_MAP rate \"25Gbps\""},
		{"RATE_AI fast\n", "c.txt:1: RATE_AI \"fast\""},
		{"LINK_DOWN 1 2\n", "c.txt:1: LINK_DOWN takes 3 value(s)"},
		{"EWMA_GAIN 2\n", "c.txt:1: EWMA_GAIN \"2\": want a gain in [0, 1]"},
	} {
		_, err := ParseNS3Config(strings.NewReader(tc.in), "c.txt")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseNS3Config(%q) error = %v, want prefix %q", tc.in, err, tc.want)
		}
	}
	top, _ := ParseNS3Topology(strings.NewReader(topo3), "t")
	for _, tc := range []struct{ edit, want string }{
		{"CC_MODE 8", "c.txt:11: CC_MODE: 8 (DCTCP) is not modelled"},
		{"L2_BACK_TO_ZERO 1", "c.txt:25: L2_BACK_TO_ZERO: 1 (go-back-0) is not modelled"},
		{"KMIN_MAP 1 100000000000 400", "c.txt:40: KMIN_MAP: no KMIN_MAP, KMAX_MAP and PMAX_MAP entries for 25000000000 bit/s"},
		{"HAS_WIN 1", "c.txt:26: HAS_WIN: 1 with DCQCN"},
		{"PACKET_PAYLOAD_SIZE 100", "c.txt:3: PACKET_PAYLOAD_SIZE: 100 bytes"},
		{"RP_TIMER 0", "c.txt:15: RP_TIMER: 0"},
	} {
		key := strings.Fields(tc.edit)[0]
		lines := strings.Split(cfgDCQCN, "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, key+" ") {
				lines[i] = tc.edit
			}
		}
		c, err := ParseNS3Config(strings.NewReader(strings.Join(lines, "\n")), "c.txt")
		if err != nil {
			t.Fatalf("%s: %v", tc.edit, err)
		}
		if _, err := c.Settings(top, "c.txt"); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Settings with %q = %v, want prefix %q", tc.edit, err, tc.want)
		}
	}
}

func FuzzParsers(f *testing.F) {
	f.Add(topo3)
	f.Add(matrix)
	f.Add("2\n0 1 3 100 10 2.0\n1 0 3 100 10 2.5\n")
	f.Add("0b000001 0b000101 10000 100 10 0 5 4\n")
	f.Add(cfgDCQCN)
	f.Fuzz(func(t *testing.T, s string) {
		top, err := ParseNS3Topology(strings.NewReader(s), "t")
		if err == nil {
			for _, k := range top.Links {
				if k.Src >= top.Nodes || k.Dst >= top.Nodes || k.Rate <= 0 {
					t.Fatalf("accepted bad link %+v", k)
				}
			}
			_ = top.Connected()
			if len(top.Hosts()) <= 64 {
				_ = top.MaxBaseRTT(1000)
			}
		}
		if fl, err := ParseNS3Flows(strings.NewReader(s), "f"); err == nil {
			var buf bytes.Buffer
			if err := WriteNS3Flows(&buf, fl); err != nil {
				t.Fatal(err)
			}
			if _, err := ParseNS3Flows(&buf, "again"); err != nil {
				t.Fatalf("WriteNS3Flows output does not parse: %v", err)
			}
		}
		if m, err := ParseHtsim(strings.NewReader(s), "m"); err == nil {
			var buf bytes.Buffer
			if err := WriteHtsim(&buf, m); err != nil {
				t.Fatal(err)
			}
			if _, err := ParseHtsim(&buf, "again"); err != nil {
				t.Fatalf("WriteHtsim output does not parse: %v\n%s", err, buf.String())
			}
		}
		_, _ = ParseFCT(strings.NewReader(s), "fct")
		if c, err := ParseNS3Config(strings.NewReader(s), "c"); err == nil {
			if c.PayloadSize <= 0 || c.BufferSize <= 0 {
				t.Fatalf("accepted payload %v, buffer %v", c.PayloadSize, c.BufferSize)
			}
			t3, _ := ParseNS3Topology(strings.NewReader(topo3), "t")
			if st, err := c.Settings(t3, "c"); err == nil && (st.AckEvery < 1 || st.MTU < 256 || st.MTU > 9216) {
				t.Fatalf("Settings gave ack_every %d, MTU %v", st.AckEvery, st.MTU)
			}
		}
	})
}
