package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/mptx-dev/mptx/telemetry/schema"
)

// DefaultFile is where the file exporter writes when neither
// SetupConfig.File nor MPTX_OTEL_FILE names a file.
const DefaultFile = "mptx-otlp.jsonl"

// SetupConfig configures Setup. The zero value is valid: exporters, sampler
// and resource then come from the standard OTEL_* environment variables,
// and the default exporter is the OTLP JSON lines file exporter.
type SetupConfig struct {
	// ServiceName is service.name when OTEL_SERVICE_NAME is unset; empty
	// means "mptx".
	ServiceName string
	// File is the file exporter's path when MPTX_OTEL_FILE is unset; empty
	// means DefaultFile. The file is created or truncated.
	File string
	// Writer, if set, receives the file exporter's lines instead of File.
	// Setup does not close it.
	Writer io.Writer
	// Sampler, if set, overrides OTEL_TRACES_SAMPLER.
	Sampler sdktrace.Sampler
	// VirtualTime marks the run as simulated: the resource carries
	// mptx.virtual_time=true, and metric points are stamped with the clock
	// given to UseVirtualClock instead of the wall clock.
	VirtualTime bool
	// SyncExport exports every span as it ends (SimpleSpanProcessor)
	// instead of in batches; for tests and short command-line runs.
	SyncExport bool
	// Attributes are added to the resource.
	Attributes []attribute.KeyValue
	// TracesExporter and MetricsExporter, if set, replace the
	// OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER variables (same
	// syntax: a comma-separated list of otlp, file, console, none).
	TracesExporter, MetricsExporter string
	// TraceFile, if set, sends both signals to the file exporter writing
	// to this path, whatever TracesExporter, MetricsExporter, the
	// OTEL_*_EXPORTER variables, MPTX_OTEL_FILE and File say: the
	// commands' --trace FILE.
	TraceFile string
}

// Telemetry holds the providers Setup built. Pass them to NewRecorder's
// Config and call Shutdown before exit to flush. It is safe for concurrent
// use.
type Telemetry struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// TraceExporters and MetricExporters name the exporters in use
	// ("otlp/grpc", "otlp/http", "file:PATH", "console"); empty when
	// disabled.
	TraceExporters, MetricExporters []string

	shutdown []func(context.Context) error
	flush    []func(context.Context) error
	vclock   atomic.Pointer[virtualClock]
}

type virtualClock struct {
	start time.Time
	now   func() time.Time
}

// UseVirtualClock stamps metric points with virtual time: start is the
// run's epoch (the points' StartTime) and now returns the current virtual
// wall time (the points' Time), typically (*Recorder).WallNow. It has an
// effect only with SetupConfig.VirtualTime. The simulator's glue calls it
// once before the run; the final collection at Shutdown then carries the
// run's last virtual instant.
func (t *Telemetry) UseVirtualClock(start time.Time, now func() time.Time) {
	t.vclock.Store(&virtualClock{start: start, now: now})
}

// Shutdown flushes and stops every exporter. It returns the first error.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	t.shutdown = nil
	return errors.Join(errs...)
}

// ForceFlush exports everything buffered so far.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	var errs []error
	for _, f := range t.flush {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// Setup builds tracer and meter providers from cfg and the standard
// OpenTelemetry environment variables:
//
//   - OTEL_SDK_DISABLED=true: both no-op.
//   - OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER: comma-separated list of
//     otlp, file, console, none. Unset means file. "file" writes OTLP JSON
//     lines (one ExportTraceServiceRequest or ExportMetricsServiceRequest
//     per line, the collector's file exporter format) to MPTX_OTEL_FILE,
//     cfg.File or DefaultFile; traces and metrics share the file.
//     "console" writes the same lines to standard output.
//   - OTEL_EXPORTER_OTLP_PROTOCOL (and the _TRACES_/_METRICS_ variants):
//     grpc or http/protobuf (the default, as the specification says).
//     OTEL_EXPORTER_OTLP_ENDPOINT, _HEADERS, _TIMEOUT, _INSECURE and the
//     rest are read by the OTLP exporters themselves.
//   - OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG: always_on, always_off,
//     traceidratio, parentbased_always_on (default), parentbased_always_off,
//     parentbased_traceidratio; the ratio is in [0, 1].
//   - OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES: the resource.
//   - OTEL_METRIC_EXPORT_INTERVAL: read by the periodic metric reader.
//   - OTEL_BSP_*: read by the batch span processors.
//
// The span processors (one per trace exporter) sit behind NewSpanProcessor,
// so that Recorders hand them chunk spans directly; a processor added later
// with RegisterSpanProcessor sees transfer spans only unless wrapped too.
//
// Errors name the variable, its value and the valid values.
func Setup(ctx context.Context, cfg SetupConfig) (*Telemetry, error) {
	t := &Telemetry{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}
	if v := os.Getenv("OTEL_SDK_DISABLED"); strings.EqualFold(strings.TrimSpace(v), "true") {
		return t, nil
	}
	traceKinds, err := exporterList(exporterSetting("OTEL_TRACES_EXPORTER", "SetupConfig.TracesExporter", cfg.TracesExporter))
	if err != nil {
		return nil, err
	}
	metricKinds, err := exporterList(exporterSetting("OTEL_METRICS_EXPORTER", "SetupConfig.MetricsExporter", cfg.MetricsExporter))
	if err != nil {
		return nil, err
	}
	if cfg.TraceFile != "" {
		traceKinds, metricKinds = []string{"file"}, []string{"file"}
	}
	sampler := cfg.Sampler
	if sampler == nil {
		if sampler, err = SamplerFromEnv(); err != nil {
			return nil, err
		}
	}
	res, err := buildResource(ctx, cfg)
	if err != nil {
		return nil, err
	}

	var sink *fileSink
	sinkFor := func(kind string) (*fileSink, string, error) {
		if kind == "console" {
			return newFileSink(os.Stdout, nil), "console", nil
		}
		if sink != nil {
			sink.refs++
			return sink, "file:" + sink.name, nil
		}
		if cfg.Writer != nil {
			sink = newFileSink(cfg.Writer, nil)
			sink.name = "writer"
			return sink, "file:writer", nil
		}
		path := cfg.TraceFile
		if path == "" {
			path = os.Getenv("MPTX_OTEL_FILE")
		}
		if path == "" {
			path = cfg.File
		}
		if path == "" {
			path = DefaultFile
		}
		f, err := os.Create(path)
		if err != nil {
			return nil, "", fmt.Errorf("telemetry: file exporter: %w", err)
		}
		sink = newFileSink(f, f)
		sink.name = path
		return sink, "file:" + path, nil
	}
	fail := func(err error) (*Telemetry, error) {
		_ = t.Shutdown(ctx)
		return nil, err
	}

	// Traces. The processors are wrapped in NewSpanProcessor so that
	// Recorders hand them chunk spans directly.
	var procs []sdktrace.SpanProcessor
	for _, kind := range traceKinds {
		var exp sdktrace.SpanExporter
		var name string
		switch kind {
		case "otlp":
			proto, err := otlpProtocol("TRACES")
			if err != nil {
				return fail(err)
			}
			if proto == "grpc" {
				exp, err = otlptracegrpc.New(ctx)
			} else {
				exp, err = otlptracehttp.New(ctx)
			}
			if err != nil {
				return fail(fmt.Errorf("telemetry: OTLP trace exporter (%s): %w", proto, err))
			}
			name = "otlp/" + strings.TrimSuffix(proto, "/protobuf")
		case "file", "console":
			s, n, err := sinkFor(kind)
			if err != nil {
				return fail(err)
			}
			exp, err = otlptrace.New(ctx, &fileTraceClient{sink: s})
			if err != nil {
				return fail(err)
			}
			name = n
		}
		if cfg.SyncExport {
			procs = append(procs, sdktrace.NewSimpleSpanProcessor(exp))
		} else {
			procs = append(procs, sdktrace.NewBatchSpanProcessor(exp))
		}
		t.TraceExporters = append(t.TraceExporters, name)
	}
	if len(t.TraceExporters) > 0 {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(NewSpanProcessor(procs...)),
			sdktrace.WithResource(res), sdktrace.WithSampler(sampler))
		t.TracerProvider = tp
		t.shutdown = append(t.shutdown, tp.Shutdown)
		t.flush = append(t.flush, tp.ForceFlush)
	}

	// Metrics.
	var mpOpts []sdkmetric.Option
	for _, kind := range metricKinds {
		var exp sdkmetric.Exporter
		var name string
		switch kind {
		case "otlp":
			proto, err := otlpProtocol("METRICS")
			if err != nil {
				return fail(err)
			}
			if proto == "grpc" {
				exp, err = otlpmetricgrpc.New(ctx)
			} else {
				exp, err = otlpmetrichttp.New(ctx)
			}
			if err != nil {
				return fail(fmt.Errorf("telemetry: OTLP metric exporter (%s): %w", proto, err))
			}
			name = "otlp/" + strings.TrimSuffix(proto, "/protobuf")
		case "file", "console":
			s, n, err := sinkFor(kind)
			if err != nil {
				return fail(err)
			}
			exp, name = &fileMetricExporter{sink: s}, n
		}
		if cfg.VirtualTime {
			exp = &virtualTimeExporter{Exporter: exp, t: t}
		}
		mpOpts = append(mpOpts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
		t.MetricExporters = append(t.MetricExporters, name)
	}
	if len(t.MetricExporters) > 0 {
		// No exemplars: histograms are recorded off the request path with no
		// span in the context, and the reservoir costs on every record.
		mpOpts = append(mpOpts, sdkmetric.WithResource(res), sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
		mp := sdkmetric.NewMeterProvider(mpOpts...)
		t.MeterProvider = mp
		t.shutdown = append(t.shutdown, mp.Shutdown)
		t.flush = append(t.flush, mp.ForceFlush)
	}
	return t, nil
}

var exporterKinds = []string{"otlp", "file", "console", "none"}

// exporterSetting returns the exporter list to parse and the name of
// where it came from: override (named field) when set, else variable env.
func exporterSetting(env, field, override string) (name, value string) {
	if v := strings.TrimSpace(override); v != "" {
		return field, v
	}
	return env, strings.TrimSpace(os.Getenv(env))
}

// exporterList parses an exporter list (from an OTEL_*_EXPORTER variable
// or its SetupConfig override, named env in errors); empty means [file].
func exporterList(env, v string) ([]string, error) {
	if v == "" {
		return []string{"file"}, nil
	}
	var out []string
	for _, k := range strings.Split(v, ",") {
		k = strings.ToLower(strings.TrimSpace(k))
		switch k {
		case "otlp", "file", "console":
			out = append(out, k)
		case "none":
		default:
			return nil, fmt.Errorf("telemetry: %s=%q: unsupported exporter %q; valid: %s (comma-separated)", env, v, k, strings.Join(exporterKinds, ", "))
		}
	}
	return out, nil
}

// otlpProtocol reads OTEL_EXPORTER_OTLP_<signal>_PROTOCOL, then
// OTEL_EXPORTER_OTLP_PROTOCOL; the default is http/protobuf.
func otlpProtocol(signal string) (string, error) {
	env := "OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"
	v := strings.TrimSpace(os.Getenv(env))
	if v == "" {
		env = "OTEL_EXPORTER_OTLP_PROTOCOL"
		v = strings.TrimSpace(os.Getenv(env))
	}
	switch strings.ToLower(v) {
	case "", "http/protobuf", "http":
		return "http/protobuf", nil
	case "grpc":
		return "grpc", nil
	case "http/json":
		return "", fmt.Errorf("telemetry: %s=%q: the Go OTLP exporters do not support http/json; valid: grpc, http/protobuf", env, v)
	}
	return "", fmt.Errorf("telemetry: %s=%q: valid: grpc, http/protobuf", env, v)
}

// SamplerFromEnv returns the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name, as the OpenTelemetry specification defines
// them; unset means parentbased_always_on.
func SamplerFromEnv() (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("telemetry: OTEL_TRACES_SAMPLER_ARG=%q: want a ratio in [0, 1]", arg)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("telemetry: OTEL_TRACES_SAMPLER=%q: valid: always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio", name)
}

func buildResource(ctx context.Context, cfg SetupConfig) (*resource.Resource, error) {
	svc := cfg.ServiceName
	if svc == "" {
		svc = "mptx"
	}
	attrs := append([]attribute.KeyValue{attribute.String(schema.AttrServiceName, svc)}, cfg.Attributes...)
	if cfg.VirtualTime {
		attrs = append(attrs, attribute.Bool(schema.AttrVirtual, true))
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attrs...),
		resource.WithFromEnv(), // OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME win
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource (OTEL_RESOURCE_ATTRIBUTES=%q): %w", os.Getenv("OTEL_RESOURCE_ATTRIBUTES"), err)
	}
	return res, nil
}

// virtualTimeExporter restamps metric points with the simulator's clock.
type virtualTimeExporter struct {
	sdkmetric.Exporter
	t *Telemetry
}

func (e *virtualTimeExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if vc := e.t.vclock.Load(); vc != nil {
		if now := vc.now(); !now.IsZero() {
			restamp(rm, vc.start, now)
		}
	}
	return e.Exporter.Export(ctx, rm)
}

// restamp sets every data point's StartTime and Time.
func restamp(rm *metricdata.ResourceMetrics, start, now time.Time) {
	for si := range rm.ScopeMetrics {
		ms := rm.ScopeMetrics[si].Metrics
		for mi := range ms {
			switch d := ms[mi].Data.(type) {
			case metricdata.Gauge[int64]:
				stampPoints(d.DataPoints, start, now)
			case metricdata.Gauge[float64]:
				stampPoints(d.DataPoints, start, now)
			case metricdata.Sum[int64]:
				stampPoints(d.DataPoints, start, now)
			case metricdata.Sum[float64]:
				stampPoints(d.DataPoints, start, now)
			case metricdata.Histogram[int64]:
				for i := range d.DataPoints {
					d.DataPoints[i].StartTime, d.DataPoints[i].Time = start, now
				}
			case metricdata.Histogram[float64]:
				for i := range d.DataPoints {
					d.DataPoints[i].StartTime, d.DataPoints[i].Time = start, now
				}
			}
		}
	}
}

func stampPoints[N int64 | float64](dp []metricdata.DataPoint[N], start, now time.Time) {
	for i := range dp {
		dp[i].StartTime, dp[i].Time = start, now
	}
}
