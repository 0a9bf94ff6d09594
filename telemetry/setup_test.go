package telemetry

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/mptx-dev/mptx/telemetry/internal/synth"
	"github.com/mptx-dev/mptx/telemetry/schema"
)

// clearOTelEnv unsets the variables Setup reads, for the test's duration.
func clearOTelEnv(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "MPTX_OTEL_FILE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

func TestSetupEnvErrors(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, `OTEL_TRACES_EXPORTER="zipkin": unsupported exporter "zipkin"; valid: otlp, file, console, none`},
		{map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"}, `OTEL_METRICS_EXPORTER="prometheus"`},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "do not support http/json"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"}, `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="udp": valid: grpc, http/protobuf`},
		{map[string]string{"OTEL_TRACES_SAMPLER": "jaeger_remote"}, `OTEL_TRACES_SAMPLER="jaeger_remote": valid:`},
		{map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"}, `OTEL_TRACES_SAMPLER_ARG="1.5": want a ratio in [0, 1]`},
	} {
		clearOTelEnv(t)
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		_, err := Setup(context.Background(), SetupConfig{Writer: &bytes.Buffer{}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Setup with %v = %v, want an error containing %q", tc.env, err, tc.want)
		}
	}
}

func TestSetupDisabled(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_SDK_DISABLED": "true"},
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"},
	} {
		clearOTelEnv(t)
		for k, v := range env {
			t.Setenv(k, v)
		}
		var buf bytes.Buffer
		tel, err := Setup(context.Background(), SetupConfig{Writer: &buf})
		if err != nil {
			t.Fatal(err)
		}
		if len(tel.TraceExporters)+len(tel.MetricExporters) != 0 {
			t.Errorf("%v: exporters %v %v, want none", env, tel.TraceExporters, tel.MetricExporters)
		}
		rec, err := NewRecorder(Config{TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider, Wall: FixedEpoch(epoch), Paths: pathAttrs(3)})
		if err != nil {
			t.Fatal(err)
		}
		synth.Run(threePaths(), rec)
		rec.Close(0)
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if buf.Len() != 0 {
			t.Errorf("%v: %d bytes written, want none", env, buf.Len())
		}
	}
}

func TestSamplerFromEnv(t *testing.T) {
	for _, tc := range []struct{ name, arg, want string }{
		{"", "", "ParentBased{root:AlwaysOnSampler"},
		{"always_off", "", "AlwaysOffSampler"},
		{"traceidratio", "0.25", "TraceIDRatioBased{0.25}"},
		{"parentbased_traceidratio", "", "ParentBased{root:TraceIDRatioBased{1}"},
	} {
		clearOTelEnv(t)
		t.Setenv("OTEL_TRACES_SAMPLER", tc.name)
		t.Setenv("OTEL_TRACES_SAMPLER_ARG", tc.arg)
		s, err := SamplerFromEnv()
		if err != nil || !strings.HasPrefix(s.Description(), tc.want) {
			t.Errorf("SamplerFromEnv(%q, %q) = %v, %v; want %s", tc.name, tc.arg, s, err, tc.want)
		}
	}
}

// TestFileExporter runs a transfer through Setup's default exporter (the
// file) and reads the lines back with pdata: spans and, with virtual time,
// metrics stamped with the simulated clock.
func TestFileExporter(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_SERVICE_NAME", "file-test")
	path := filepath.Join(t.TempDir(), "out.jsonl")
	t.Setenv("MPTX_OTEL_FILE", path)
	ctx := context.Background()
	tel, err := Setup(ctx, SetupConfig{File: "ignored.jsonl", VirtualTime: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tel.TraceExporters, ",") + " " + strings.Join(tel.MetricExporters, ","); got != "file:"+path+" file:"+path {
		t.Errorf("exporters = %s, want the MPTX_OTEL_FILE for both", got)
	}
	rec, err := NewRecorder(Config{TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider, Wall: FixedEpoch(epoch), Paths: pathAttrs(3)})
	if err != nil {
		t.Fatal(err)
	}
	tel.UseVirtualClock(epoch, rec.WallNow)
	res := synth.Run(threePaths(), rec)
	rec.Close(res.End)
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	spans, metricLines := 0, 0
	for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		switch {
		case bytes.HasPrefix(line, []byte(`{"resourceSpans"`)):
			td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			spans += td.SpanCount()
			if v, _ := td.ResourceSpans().At(0).Resource().Attributes().Get(schema.AttrServiceName); v.AsString() != "file-test" {
				t.Errorf("service.name = %q, want file-test (OTEL_SERVICE_NAME)", v.AsString())
			}
			if v, ok := td.ResourceSpans().At(0).Resource().Attributes().Get(schema.AttrVirtual); !ok || !v.Bool() {
				t.Errorf("resource lacks %s=true", schema.AttrVirtual)
			}
		case bytes.HasPrefix(line, []byte(`{"resourceMetrics"`)):
			md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(line)
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			metricLines++
			want := epoch.Add(time.Duration(res.End))
			ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
			names := map[string]bool{}
			for j := 0; j < ms.Len(); j++ {
				m := ms.At(j)
				names[m.Name()] = true
				var ts time.Time
				switch m.Type() {
				case pmetric.MetricTypeSum:
					ts = m.Sum().DataPoints().At(0).Timestamp().AsTime()
				case pmetric.MetricTypeGauge:
					ts = m.Gauge().DataPoints().At(0).Timestamp().AsTime()
				case pmetric.MetricTypeHistogram:
					ts = m.Histogram().DataPoints().At(0).Timestamp().AsTime()
				}
				if !ts.Equal(want) {
					t.Errorf("metric %s stamped %v, want the virtual end %v", m.Name(), ts, want)
				}
			}
			for _, n := range []string{schema.MetricWindow, schema.MetricBytesAcked, schema.MetricChunkLatency, schema.MetricSRTT, schema.MetricCNP} {
				if !names[n] {
					t.Errorf("metric %s missing from the file", n)
				}
			}
		default:
			t.Errorf("line %d is neither traces nor metrics: %.80s", i+1, line)
		}
	}
	if want := 17 + res.Requeues + 1; spans != want {
		t.Errorf("spans in file = %d, want %d", spans, want)
	}
	if metricLines == 0 {
		t.Errorf("no metrics line in the file")
	}
}
