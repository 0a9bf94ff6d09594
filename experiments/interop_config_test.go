package experiments

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mptx-dev/mptx/units"
)

// ns3Files writes a one-switch topology (three hosts at 100G), a flow file
// with two 2 MB flows at 2 s and a config.txt in HPCC's formats, each with
// the trailing explanations HPCC's mix/ files end with.
func ns3Files(t *testing.T, ccMode string) string {
	t.Helper()
	dir := t.TempDir()
	mix := filepath.Join(dir, "mix")
	if err := os.Mkdir(mix, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"topology.txt": "4 1 3\n0\n0 1 100Gbps 0.001ms 0\n0 2 100Gbps 0.001ms 0\n0 3 100Gbps 0.001ms 0\n\nFirst line: total node #, switch node #, link #\n",
		"flow.txt":     "2\n2 1 3 100 2000000 2\n3 1 3 100 2000000 2\n\nFirst line: # of flows\n",
		"config.txt": "CC_MODE " + ccMode + "\nTOPOLOGY_FILE mix/topology.txt\nFLOW_FILE mix/flow.txt\nFCT_OUTPUT_FILE mix/fct.txt\n" +
			"PACKET_PAYLOAD_SIZE 1000\nL2_ACK_INTERVAL 1\nACK_HIGH_PRIO 0\nSIMULATOR_STOP_TIME 2.1\nBUFFER_SIZE 16\n" +
			"ALPHA_RESUME_INTERVAL 1\nRATE_DECREASE_INTERVAL 4\nRP_TIMER 300\nEWMA_GAIN 0.00390625\nFAST_RECOVERY_TIMES 1\n" +
			"RATE_AI 50Mb/s\nRATE_HAI 100Mb/s\nMIN_RATE 100Mb/s\nHAS_WIN " + map[bool]string{true: "1", false: "0"}[ccMode == "3"] +
			"\nVAR_WIN 1\nGLOBAL_T 1\nU_TARGET 0.95\nMI_THRESH 0\n" +
			"KMAX_MAP 1 100000000000 1600\nKMIN_MAP 1 100000000000 400\nPMAX_MAP 1 100000000000 0.2\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(mix, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(mix, "config.txt")
}

// TestInteropNS3Config: a config.txt sets the NIC's CC, framing and ACKs
// and the switches' buffer and ECN maps; its file names resolve one level
// above mix/ as third.cc's do; lines ns-3 never reads become notes; the
// run completes every flow and reports its link transmissions.
func TestInteropNS3Config(t *testing.T) {
	for _, tc := range []struct {
		mode, cc string
		header   units.Bytes
	}{{"3", CCNICHPCC, 90}, {"1", CCNICDCQCN, 48}} {
		cfg := ns3Files(t, tc.mode)
		s, notes, err := InteropScenario(InteropOptions{NS3Config: cfg})
		if err != nil {
			t.Fatalf("CC_MODE %s: %v", tc.mode, err)
		}
		if len(notes) != 3 || !strings.Contains(notes[0], "FCT_OUTPUT_FILE") || !strings.Contains(notes[1], "1 lines from line 7") ||
			!strings.Contains(notes[2], "1 lines from line 5") {
			t.Errorf("CC_MODE %s: notes %q", tc.mode, notes)
		}
		n := s.NIC
		if n.MTU != 1000 || n.Header != tc.header || n.AckEvery != 1 || !n.AckInDataClass || n.CNPInterval != 0 ||
			s.Switch.Buffer != 16*units.MiB || len(s.Switch.ECN.ByRate) != 1 || s.Switch.ECN.ByRate[0].KMin != 400*units.KB {
			t.Errorf("CC_MODE %s: NIC %+v, switch %+v", tc.mode, n, s.Switch)
		}
		if got := s.Matrix.CC; len(got) != 1 || got[0] != tc.cc {
			t.Errorf("CC_MODE %s: matrix.cc = %v, want [%s]", tc.mode, got, tc.cc)
		}
		run := Expand(s)[0]
		res, err := SimRun(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		r := res.Row
		if r.Completed != 2 || r.TxData == 0 || r.TxAck == 0 || r.TxData < 2*2*2000 {
			t.Errorf("CC_MODE %s: row %+v", tc.mode, r)
		}
		// Sampling starts with the first flow, at 2 s.
		if res.Series == nil || len(res.Series.Throughput) == 0 || res.Series.Throughput[0].T[0] < 2e6 {
			t.Errorf("CC_MODE %s: series should start at the flows' 2 s start", tc.mode)
		}
	}
	// A config that asks for something the simulator does not model names
	// the line.
	cfg := ns3Files(t, "8")
	if _, _, err := InteropScenario(InteropOptions{NS3Config: cfg}); err == nil || !strings.Contains(err.Error(), "config.txt:1: CC_MODE: 8 (DCTCP) is not modelled") {
		t.Errorf("CC_MODE 8: %v", err)
	}
}

// TestSamplerBounded: a long run keeps at most MaxPoints points per
// series, and its time series start at the first flow.
func TestSamplerBounded(t *testing.T) {
	s := mustParse(t, `name: long
topology: {kind: star, hosts: 3}
workloads: [{kind: incast, senders: "1-2", receiver: 0, size: 64MiB, start: 1ms}]
matrix: {cc: [dcqcn]}
sample: {interval: 1us}
stop: {time: 50ms}
`)
	res, err := SimRun(context.Background(), Expand(s)[0])
	if err != nil {
		t.Fatal(err)
	}
	if res.Row.Completed != 2 {
		t.Fatalf("completed %d of 2", res.Row.Completed)
	}
	for _, tr := range append(append(res.Series.Throughput, res.Series.Queues...), res.Series.Rate...) {
		if len(tr.T) > MaxPoints || len(tr.T) < MaxPoints/4 {
			t.Errorf("%s: %d points, want between %d and %d", tr.Name, len(tr.T), MaxPoints/4, MaxPoints)
		}
		if tr.T[0] < 1000 {
			t.Errorf("%s starts at %.1f µs, before the first flow (1 ms)", tr.Name, tr.T[0])
		}
	}
	if res.Series.IntervalUs < 5 {
		t.Errorf("interval %.2f µs after ~10 ms at 1 µs: want it doubled several times", res.Series.IntervalUs)
	}
}
