package telemetry_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp/mem"
	"github.com/mptx-dev/mptx/telemetry"
	"github.com/mptx-dev/mptx/telemetry/analyze"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// jaegerBinary returns the Jaeger all-in-one binary: $MPTX_JAEGER if set,
// else the one scripts/jaeger.sh has built and cached (asked with --cached,
// which never builds: a plain offline `go test ./...` must not download and
// compile Jaeger). With neither the test skips, saying how to get one,
// unless MPTX_JAEGER_REQUIRED=1 (set by `make test`, which builds the binary
// first through telemetry.mk): then a missing binary fails it.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MPTX_JAEGER"); p != "" {
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			t.Fatalf("MPTX_JAEGER=%s: not an executable file (%v)", p, err)
		}
		return p
	}
	missing := func(why string) string {
		msg := "Jaeger binary not available (" + why + "): run `make jaeger` (scripts/jaeger.sh builds Jaeger v1.76.0 once, ~5 min, network needed) or set MPTX_JAEGER=/path/to/jaeger; `make test` does the former"
		if os.Getenv("MPTX_JAEGER_REQUIRED") == "1" {
			t.Fatal(msg + " [MPTX_JAEGER_REQUIRED=1]")
		}
		t.Skip(msg)
		return ""
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return missing("cannot find the repository root (go.mod) to ask scripts/jaeger.sh")
		}
		dir = parent
	}
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(dir, "scripts", "jaeger.sh"), "--cached")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return missing(strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out))
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// jaegerConfig is an all-in-one configuration (in-memory storage, OTLP
// receivers, query API) listening on loopback at the given ports only,
// with the collector's own metrics endpoint off.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    traces:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 1000
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

type jaeger struct {
	query, otlpGRPC, otlpHTTP int
	log                       *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// startJaeger runs Jaeger on loopback and waits until its query API
// answers. It is stopped when the test ends.
func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	bin := jaegerBinary(t)
	p := freePorts(t, 4)
	j := &jaeger{query: p[0], otlpGRPC: p[2], otlpHTTP: p[3], log: &syncBuffer{}}
	cfg := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, p[0], p[1], p[2], p[3]), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Stdout, cmd.Stderr = j.log, j.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting Jaeger: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(3 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("Jaeger log:\n%s", j.log.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("Jaeger exited at start: %v\n%s", err, j.log.String())
		default:
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/v3/services", j.query))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger's query API not ready after 60s (last error %v)\n%s", err, j.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fetch polls Jaeger's API v3 for service's traces until they hold want
// spans, and returns the response body.
func (j *jaeger) fetch(t *testing.T, service string, from, to time.Time, want int) []byte {
	t.Helper()
	q := url.Values{
		"query.service_name":   {service},
		"query.start_time_min": {from.Add(-time.Minute).Format(time.RFC3339Nano)},
		"query.start_time_max": {to.Add(time.Minute).Format(time.RFC3339Nano)},
		"query.raw_traces":     {"true"},
		"query.num_traces":     {"20"},
	}
	u := fmt.Sprintf("http://127.0.0.1:%d/api/v3/traces?%s", j.query, q.Encode())
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for {
		resp, err := http.Get(u)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK {
				td, perr := analyze.Parse(body, "jaeger")
				if perr == nil && td.SpanCount() >= want {
					return body
				}
				last = fmt.Sprintf("%d spans (parse error %v)", td.SpanCount(), perr)
			} else {
				last = fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, body)
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger did not return %d spans for %s within 30s; last: %s", want, service, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestJaegerEndToEnd exports a real engine transfer's spans to Jaeger over
// OTLP (gRPC and HTTP, configured by the standard OTEL_* variables),
// reads them back from Jaeger's query API, analyses them and checks the
// per-path figures against the engine's own counters.
func TestJaegerEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the Jaeger end-to-end test starts a real backend")
	}
	start := time.Now()
	j := startJaeger(t)
	t.Logf("Jaeger ready in %v (query :%d, OTLP gRPC :%d, HTTP :%d)", time.Since(start).Round(time.Millisecond), j.query, j.otlpGRPC, j.otlpHTTP)
	paths := []mem.PathConfig{{Rate: 40 * units.Gbps, NIC: 0, CNPEvery: 2 * units.MiB}, {Rate: 20 * units.Gbps, NIC: 1}, {Rate: 10 * units.Gbps, NIC: 2}}
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(strings.ReplaceAll(proto, "/", "-"), func(t *testing.T) {
			port := j.otlpGRPC
			if proto != "grpc" {
				port = j.otlpHTTP
			}
			service := "mptx-e2e-" + strings.ReplaceAll(proto, "/", "-")
			t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
			t.Setenv("OTEL_METRICS_EXPORTER", "none")
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", fmt.Sprintf("http://127.0.0.1:%d", port))
			t.Setenv("OTEL_SERVICE_NAME", service)
			t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
			ctx := context.Background()
			tel, err := telemetry.Setup(ctx, telemetry.SetupConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(tel.TraceExporters, ","); got != "otlp/"+strings.TrimSuffix(proto, "/protobuf") {
				t.Fatalf("trace exporters = %q", got)
			}
			epoch := time.Now()
			rec, err := telemetry.NewRecorder(telemetry.Config{TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider,
				Wall: telemetry.FixedEpoch(epoch), CC: "dcqcn", Backend: "mem", Peer: "127.0.0.1", Paths: memPathAttrs(len(paths))})
			if err != nil {
				t.Fatal(err)
			}
			run := runEngine(t, rec, paths, 32*units.MiB, units.MiB, "dcqcn")
			rec.Close(run.doneAt)
			if err := tel.Shutdown(ctx); err != nil {
				t.Fatalf("flushing to Jaeger: %v", err)
			}
			if run.err != nil {
				t.Fatalf("transfer failed: %v", run.err)
			}
			chunks := 0
			for _, st := range run.stats {
				chunks += st.Chunks + st.Requeues
			}
			body := j.fetch(t, service, epoch, epoch.Add(run.doneAt.Sub(vtime.Epoch)), chunks+1)
			td, err := analyze.Parse(body, "jaeger")
			if err != nil {
				t.Fatal(err)
			}
			rep, err := analyze.Analyze(td, analyze.Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkAgainstEngine(t, rep, run)
			tr := rep.Transfers[0]
			if tr.Service != service {
				t.Errorf("service = %q, want %q", tr.Service, service)
			}
			if got, want := tr.Completion, run.doneAt.Sub(vtime.Epoch); got < want-time.Microsecond || got > want+time.Microsecond {
				t.Errorf("completion read back from Jaeger = %v, want the engine's %v", got, want)
			}
			var tbl bytes.Buffer
			if err := rep.WriteTable(&tbl); err != nil {
				t.Fatal(err)
			}
			t.Logf("analysis of the spans read back from Jaeger:\n%s", tbl.String())
		})
	}
	t.Run("both-ends", func(t *testing.T) { jaegerBothEnds(t, j) })
	t.Logf("Jaeger end-to-end: %v", time.Since(start).Round(time.Millisecond))
}

// jaegerBothEnds exports a transfer's two ends as two services (the sender
// and a slow receiver, the driver at both ends over the in-memory
// backend, the trace context carried as a session's control channel
// would) to Jaeger over OTLP, then reads the trace back with the query
// API as mptx trace analyze --jaeger does: one trace holding both
// services' spans, the receiver's joined to the sender's, the receiver
// found to be the bottleneck.
func jaegerBothEnds(t *testing.T, j *jaeger) {
	ctx := context.Background()
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", fmt.Sprintf("http://127.0.0.1:%d", j.otlpGRPC))
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
	setup := func(service string) *telemetry.Telemetry {
		t.Setenv("OTEL_SERVICE_NAME", service)
		tel, err := telemetry.Setup(ctx, telemetry.SetupConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return tel
	}
	send, recv := setup("mptx-e2e-sender"), setup("mptx-e2e-receiver")
	epoch := time.Now()
	res := runBothEnds(t, bothEndsConfig{
		paths:   []mem.PathConfig{{Rate: 100 * units.Gbps, NIC: 0}, {Rate: 100 * units.Gbps, NIC: 1}},
		size:    8 * units.MiB,
		handoff: 100 * time.Microsecond,
		sendTP:  send.TracerProvider, recvTP: recv.TracerProvider,
		epoch: epoch,
	})
	if res.sendErr != nil || res.recvErr != nil {
		t.Fatalf("transfer: send %v, receive %v", res.sendErr, res.recvErr)
	}
	for _, tel := range []*telemetry.Telemetry{send, recv} {
		if err := tel.Shutdown(ctx); err != nil {
			t.Fatalf("flushing to Jaeger: %v", err)
		}
	}
	// The receiver's service returns the whole trace: both services.
	body := j.fetch(t, "mptx-e2e-receiver", epoch, epoch.Add(time.Second), 2*res.plan.Count+2)
	td, err := analyze.Parse(body, "jaeger")
	if err != nil {
		t.Fatal(err)
	}
	services := map[string]int{}
	traces := map[string]bool{}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		svc, _ := rss.At(i).Resource().Attributes().Get("service.name")
		sss := rss.At(i).ScopeSpans()
		for k := 0; k < sss.Len(); k++ {
			for m := 0; m < sss.At(k).Spans().Len(); m++ {
				services[svc.AsString()]++
				traces[sss.At(k).Spans().At(m).TraceID().String()] = true
			}
		}
	}
	if len(traces) != 1 || services["mptx-e2e-sender"] < res.plan.Count+1 || services["mptx-e2e-receiver"] != res.plan.Count+1 {
		t.Fatalf("Jaeger returned %d traces, spans per service %v; want one trace with both services' spans (%d chunks)", len(traces), services, res.plan.Count)
	}
	// The same through the query API source mptx trace analyze --jaeger uses.
	src, err := analyze.JaegerSource(analyze.JaegerQuery{URL: fmt.Sprintf("http://127.0.0.1:%d", j.query), Service: "mptx-e2e-sender",
		Since: epoch.Add(-time.Minute), Until: epoch.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := analyze.Scan(ctx, []analyze.Source{src}, analyze.ScanConfig{Detail: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Selected != 1 || len(sum.Transfers) != 1 || sum.Transfers[0].Receiver == nil || sum.Transfers[0].ReceiverBound == "" || len(sum.Stalls) != 1 {
		t.Fatalf("analysis of the Jaeger trace: selected %d, receiver %+v, stalls %v; want one transfer, receiver-bound", sum.Selected, sum.Transfers, sum.Stalls)
	}
	var tbl bytes.Buffer
	if err := sum.WriteTable(&tbl); err != nil {
		t.Fatal(err)
	}
	t.Logf("one trace, services %v; analysis read back from Jaeger:\n%s", services, tbl.String())
}
