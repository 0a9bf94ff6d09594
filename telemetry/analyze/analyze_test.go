package analyze

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mptx-dev/mptx/telemetry"
	"github.com/mptx-dev/mptx/telemetry/internal/synth"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// update regenerates testdata: the OTLP JSON input from the synthetic
// scenarios, and the golden outputs from it. Review every diff.
var update = flag.Bool("update", false, "rewrite testdata/*.jsonl and *.golden")

const input = "testdata/transfers.otlp.jsonl"

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// seqIDs is a deterministic IDGenerator so that regenerated testdata only
// changes when the recorder's output does.
type seqIDs struct {
	mu sync.Mutex
	n  uint64
}

func (g *seqIDs) next() uint64 { g.mu.Lock(); defer g.mu.Unlock(); g.n++; return g.n }

func (g *seqIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	var t trace.TraceID
	binary.BigEndian.PutUint64(t[8:], g.next())
	t[0] = 0x4d // "M"
	return t, g.NewSpanID(context.Background(), t)
}

func (g *seqIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var s trace.SpanID
	binary.BigEndian.PutUint64(s[:], g.next())
	return s
}

// scenarios are the transfers in the committed input: a requeue after a
// path failure with a slow path and CNPs; a balanced transfer with one
// straggling chunk; a transfer that fails when its only path dies.
func scenarios() []synth.Spec {
	ms := vtime.Time(time.Millisecond)
	return []synth.Spec{
		{Transfer: 7, Bytes: 4*units.MiB + 123, ChunkSize: 256 * units.KiB, Start: ms,
			Paths: []synth.Path{
				{Rate: 100 * units.Gbps, RTT: 10 * time.Microsecond, CNPEvery: 3, CNPs: 2},
				{Rate: 25 * units.Gbps, RTT: 10 * time.Microsecond},
				{Rate: 100 * units.Gbps, RTT: 10 * time.Microsecond, DownAt: ms + vtime.Time(60*time.Microsecond)},
			}},
		{Transfer: 8, Bytes: 8 * units.MiB, ChunkSize: 512 * units.KiB, Start: 5 * ms,
			Delay: map[uint32]time.Duration{9: 300 * time.Microsecond},
			Paths: []synth.Path{
				{Rate: 100 * units.Gbps, RTT: 8 * time.Microsecond},
				{Rate: 100 * units.Gbps, RTT: 8 * time.Microsecond},
				{Rate: 100 * units.Gbps, RTT: 8 * time.Microsecond},
			}},
		{Transfer: 9, Bytes: 2 * units.MiB, ChunkSize: 256 * units.KiB, Start: 9 * ms,
			Paths: []synth.Path{
				{Rate: 10 * units.Gbps, RTT: 10 * time.Microsecond, Window: 1, DownAt: 9*ms + vtime.Time(700*time.Microsecond)},
				// path 1 exists in the config but never carries (down at once)
				{Rate: 10 * units.Gbps, RTT: 10 * time.Microsecond, DownAt: 9 * ms},
			}},
	}
}

// generate runs the scenarios through a real Recorder and the file
// exporters and returns the OTLP JSON lines.
func generate(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	ctx := context.Background()
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "mptx-golden")))
	if err != nil {
		t.Fatal(err)
	}
	sexp, err := telemetry.NewFileSpanExporter(ctx, &buf)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(sexp), sdktrace.WithIDGenerator(&seqIDs{}), sdktrace.WithResource(res))
	var mbuf bytes.Buffer
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(telemetry.NewFileMetricExporter(&mbuf))), sdkmetric.WithResource(res))
	for _, spec := range scenarios() {
		paths := make([]telemetry.PathAttr, len(spec.Paths))
		for i := range paths {
			paths[i] = telemetry.PathAttr{Device: "mlx5_" + string(rune('0'+i)), QPN: uint32(0x200 + i)}
		}
		rec, err := telemetry.NewRecorder(telemetry.Config{TracerProvider: tp, MeterProvider: mp, Wall: telemetry.FixedEpoch(epoch),
			CC: "dcqcn", Backend: "sim", Peer: "10.0.0.2", Paths: paths, Synchronous: true})
		if err != nil {
			t.Fatal(err)
		}
		synth.Run(spec, rec)
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := mp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// A metrics line, as in a collector file holding both signals; the
	// reader must skip it. Its timestamps are wall-clock: blank them.
	if mbuf.Len() == 0 {
		t.Fatal("metric exporter wrote nothing")
	}
	line := bytes.SplitN(mbuf.Bytes(), []byte("\n"), 2)[0]
	buf.Write(blankTimes(line))
	buf.WriteByte('\n')
	return buf.Bytes()
}

// blankTimes replaces wall-clock timestamps in a metrics line so that the
// committed file is reproducible.
func blankTimes(b []byte) []byte {
	s := string(b)
	for _, k := range []string{`"startTimeUnixNano":"`, `"timeUnixNano":"`} {
		var out strings.Builder
		for {
			i := strings.Index(s, k)
			if i < 0 {
				out.WriteString(s)
				break
			}
			out.WriteString(s[:i+len(k)])
			s = s[i+len(k):]
			j := strings.IndexByte(s, '"')
			out.WriteString("1772366400000000000")
			s = s[j:]
		}
		s = out.String()
	}
	return []byte(s)
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it; review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestGolden(t *testing.T) {
	if *update {
		if err := os.WriteFile(input, generate(t), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	td, err := ReadFiles(input)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Analyze(td, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Formats {
		var buf bytes.Buffer
		if err := Write(&buf, rep, f); err != nil {
			t.Fatalf("Write(%s): %v", f, err)
		}
		golden(t, "transfers."+f+".golden", buf.Bytes())
	}
}

// TestGeneratedMatchesCommitted guards the committed input against drift:
// the recorder must still produce it byte for byte.
func TestGeneratedMatchesCommitted(t *testing.T) {
	want, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	got := generate(t)
	// Compare the span lines: the metrics line's point order is the
	// SDK's map order.
	norm := func(b []byte) string {
		var spans []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, `{"resourceSpans"`) {
				spans = append(spans, l)
			}
		}
		return strings.Join(spans, "\n")
	}
	if norm(got) != norm(want) {
		t.Errorf("the recorder's output changed; if intended, run go test -update ./telemetry/analyze and review the diff")
	}
}

// TestAnalyzeFindings checks the analysis against the synthetic engine's
// own accounting, independently of the golden text.
func TestAnalyzeFindings(t *testing.T) {
	td, err := Parse(generate(t), "generated")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Analyze(td, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Transfers) != 3 {
		t.Fatalf("transfers = %d, want 3", len(rep.Transfers))
	}
	for i, spec := range scenarios() {
		res := synth.Run(spec, nil)
		tr := rep.Transfers[i]
		if tr.ID != int64(spec.Transfer) {
			t.Fatalf("transfer %d: id %d, want %d", i, tr.ID, spec.Transfer)
		}
		for _, p := range tr.PerPath {
			if p.Bytes != res.Acked[p.Path] {
				t.Errorf("transfer %d path %d: bytes %d, want engine's %d", tr.ID, p.Path, p.Bytes, res.Acked[p.Path])
			}
		}
		if tr.Requeues != res.Requeues {
			t.Errorf("transfer %d: requeues %d, want %d", tr.ID, tr.Requeues, res.Requeues)
		}
		if tr.Outcome == "done" || tr.Outcome == "failed" {
			if got, want := tr.Completion, res.End.Sub(spec.Start); got != want {
				t.Errorf("transfer %d: completion %v, want %v", tr.ID, got, want)
			}
		}
	}
	t7, t8, t9 := rep.Transfers[0], rep.Transfers[1], rep.Transfers[2]
	if t7.Bottleneck == nil || *t7.Bottleneck != 1 {
		t.Errorf("transfer 7: bottleneck %v, want path 1 (25 Gbps among 100 Gbps paths)", t7.Bottleneck)
	}
	if t7.RequeueReasons["path down"] != t7.Requeues {
		t.Errorf("transfer 7: requeue reasons %v", t7.RequeueReasons)
	}
	if len(t8.Stragglers) == 0 || t8.Stragglers[0].Chunk != 9 {
		t.Errorf("transfer 8: stragglers %+v, want chunk 9 first", t8.Stragglers)
	}
	if t8.Critical == nil || t8.Critical.Chunk != 9 || !strings.Contains(strings.Join(t8.Critical.Why, ";"), "straggler") {
		t.Errorf("transfer 8: critical %+v, want the delayed chunk 9 named a straggler", t8.Critical)
	}
	if t8.Imbalance <= 1 {
		t.Errorf("transfer 8: imbalance %v, want > 1 (chunk 9's path finished late)", t8.Imbalance)
	}
	if t9.Outcome != "failed" || t9.Error != "all paths down" {
		t.Errorf("transfer 9: outcome %q error %q, want failed / all paths down", t9.Outcome, t9.Error)
	}
}

func TestParseErrors(t *testing.T) {
	good, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	first := bytes.SplitN(good, []byte("\n"), 2)[0]
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "empty input"},
		{"blank", "\n \n", "empty input"},
		{"truncated", string(first[:len(first)/2]), "test.jsonl:1: invalid OTLP JSON (last line has no newline: truncated file?)"},
		{"second line bad", string(first) + "\n{\"resourceSpans\": [\n", "test.jsonl:2: invalid OTLP JSON"},
		{"array", "[1,2]\n", "want a JSON object"},
		{"number", "42\n", "want a JSON object"},
		{"bad field type", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":12}]}]}]}` + "\n", "test.jsonl:1: invalid OTLP JSON"},
		{"jaeger error", `{"error":{"httpCode":404,"message":"No traces found"}}` + "\n", "query API error"},
	} {
		_, err := Parse([]byte(tc.in), "test.jsonl")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Parse = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// Valid OTLP without mptx spans.
	td, err := Parse([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"GET /"}]}]}]}`), "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Analyze(td, Options{}); err == nil || !strings.Contains(err.Error(), "not an mptx trace") {
		t.Errorf("Analyze(non-mptx) = %v, want 'not an mptx trace'", err)
	}
	td, _ = Parse([]byte("{}\n"), "x")
	if _, err := Analyze(td, Options{}); !errors.Is(err, ErrNoSpans) {
		t.Errorf("Analyze({}) = %v, want ErrNoSpans", err)
	}
	if _, err := Analyze(td, Options{StragglerFactor: 0.5}); err == nil || !strings.Contains(err.Error(), "StragglerFactor = 0.5") {
		t.Errorf("Analyze(StragglerFactor 0.5) = %v, want an error naming it", err)
	}
	if err := Write(&bytes.Buffer{}, &Report{}, "xml"); err == nil || !strings.Contains(err.Error(), "table, json, csv") {
		t.Errorf("Write(xml) = %v, want the valid formats listed", err)
	}
}

// TestParsePrettyAndJaeger: one pretty-printed document and Jaeger API v3
// responses parse like the lines.
func TestParsePrettyAndJaeger(t *testing.T) {
	good, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	first := bytes.SplitN(good, []byte("\n"), 2)[0]
	var pretty bytes.Buffer
	if err := jsonIndent(&pretty, first); err != nil {
		t.Fatal(err)
	}
	want, err := Parse(first, "line")
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string][]byte{
		"pretty": pretty.Bytes(),
		"jaeger": append(append([]byte(`{"result":`), first...), '}'),
	} {
		td, err := Parse(in, name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if td.SpanCount() != want.SpanCount() {
			t.Errorf("%s: %d spans, want %d", name, td.SpanCount(), want.SpanCount())
		}
	}
}

func FuzzReadOTLP(f *testing.F) {
	good, err := os.ReadFile(input)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	lines := bytes.Split(good, []byte("\n"))
	f.Add(lines[0])
	f.Add(lines[0][:len(lines[0])/3])
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"mptx.chunk","attributes":[{"key":"mptx.transfer.id","value":{"intValue":"1"}}]}]}]}]}`))
	f.Add([]byte(`{"result":{"resourceSpans":[]}}`))
	f.Add([]byte("{}\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		td, err := Parse(data, "fuzz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "analyze: ") {
				t.Errorf("error without the package prefix: %v", err)
			}
			return
		}
		rep, err := Analyze(td, Options{})
		if err != nil {
			return
		}
		var buf bytes.Buffer
		for _, f := range Formats {
			if err := Write(&buf, rep, f); err != nil {
				t.Errorf("Write(%s): %v", f, err)
			}
		}
	})
}
