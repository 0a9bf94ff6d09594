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
		{"3 1 1\n2\n0 2 100Gbps 1us 0\n1 2 100Gbps 1us 0\n", "t.txt:4: more links than the 1 declared"},
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
		{"1\n0 1 3 100 10 1\n0 1 3 100 10 1\n", "f.txt:3: more flows than the 1 declared"},
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
	} {
		_, err := ParseHtsim(strings.NewReader(tc.in), "m.cm")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseHtsim(%q) error = %v, want prefix %q", tc.in, err, tc.want)
		}
	}
}

func FuzzParsers(f *testing.F) {
	f.Add(topo3)
	f.Add(matrix)
	f.Add("2\n0 1 3 100 10 2.0\n1 0 3 100 10 2.5\n")
	f.Add("0b000001 0b000101 10000 100 10 0 5 4\n")
	f.Fuzz(func(t *testing.T, s string) {
		if top, err := ParseNS3Topology(strings.NewReader(s), "t"); err == nil {
			for _, k := range top.Links {
				if k.Src >= top.Nodes || k.Dst >= top.Nodes || k.Rate <= 0 {
					t.Fatalf("accepted bad link %+v", k)
				}
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
	})
}
